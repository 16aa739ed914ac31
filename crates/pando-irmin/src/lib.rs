//! Reading irmin-pack 3.x stores, the files of every Tezos node's context
//! (Octez's irmin and Brassaia backends), to check them and to bring a
//! commit into a pando store without a resync.
//!
//! Modules, in the order the bytes are met:
//! - `control`: `store.control`, which names the other files;
//! - `space`: the global offset space over the suffix chunks and, after a
//!   collection, the prefix and its mapping;
//! - `dict`: `store.dict`, the step names stored once;
//! - `entry`: the pack entries (contents, commits, inodes);
//! - `index`: irmin's index, to find commits without reading the pack,
//!   and a suffix that lost bytes (a commit it places there is missing);
//! - `walk`: a commit's tree, re-hashed object by object and written as a
//!   pando snapshot stream on the way;
//! - `history`: later commits applied as the differences of their trees;
//! - this module: [`Context`], the public face.
//!
//! `docs/IRMIN-PACK.md` describes the format as this crate reads it.
//!
//! Invariants:
//! - Nothing is ever written to the context directory: its files are
//!   opened read-only ([`pando_store::io::FsStorage::read_only`]).
//! - Every object of a commit walked whole is re-hashed as it is read;
//!   the first difference from the hash irmin recorded is an error naming
//!   the file and byte. The later commits of [`Context::import_all`] have
//!   their contents re-hashed and the rest checked through the commit's
//!   hash.
//! - A damaged or truncated file gives an error, never a panic and never
//!   a store with wrong data: an import lands only if the commit's tree
//!   hashes, in pando, to the commit irmin recorded.

#![forbid(unsafe_code)]

mod control;
mod dict;
mod entry;
mod error;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod history;
mod index;
mod read;
mod space;
mod walk;

use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};

use pando_core::Hash;
use pando_store::Store;
use pando_store::io::{FsStorage, Storage};

pub use control::{Control, Gced, Status};
pub use error::{Error, Result};
pub use history::DiffStats;
pub use walk::{CheckedCommit, WalkStats};

use dict::Dict;
use entry::{EntryKind, Loc};
use space::Space;

/// A commit found in the files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitRef {
    pub hash: Hash,
    /// Its global offset.
    pub offset: u64,
}

/// An irmin-pack context directory, open for reading.
pub struct Context {
    control: Control,
    space: Space,
    dict: Dict,
    /// The `index` directory, when there is one.
    index: Option<FsStorage>,
    /// Inodes already checked, by offset and position (bounded), when
    /// checking many commits.
    checked: Option<walk::Checked>,
    /// Once set, a walk or an import stops with [`Error::Interrupted`].
    stop: Option<Arc<AtomicBool>>,
    /// True once the index's commits in the suffix were found there.
    index_checked: bool,
}

/// What an import brought in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Imported {
    pub commit: CheckedCommit,
    pub walk: WalkStats,
    pub snapshot: pando_store::SnapshotSummary,
    /// Bytes read from the irmin files.
    pub bytes_read: u64,
}

/// What [`Context::import_all`] brought in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    /// The oldest commit, imported whole.
    pub first: Imported,
    /// Commits imported, the oldest included.
    pub commits: usize,
    /// The newest.
    pub head: Hash,
    /// The later commits' differences.
    pub diff: DiffStats,
    pub bytes_read: u64,
}

impl Context {
    /// Opens the context directory at `path` (Octez: `<data-dir>/context`).
    pub fn open(path: &Path) -> Result<Context> {
        let shown = path.display();
        let storage = FsStorage::read_only(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::NotAContext(format!("{shown}: no such directory")),
            std::io::ErrorKind::NotADirectory => Error::NotAContext(format!("{shown}: a file, not a context directory")),
            _ => Error::Io { file: shown.to_string(), op: "open", source: e },
        })?;
        if !storage.exists(control::FILE).map_err(Error::io(control::FILE, "look for"))? {
            return Err(Error::NotAContext(format!(
                "{shown} has no {}: not an irmin-pack context (Octez keeps it in <data-dir>/context)",
                control::FILE
            )));
        }
        let mut context = Context::open_storage(&storage)?;
        context.index = FsStorage::read_only(path.join("index")).ok();
        Ok(context)
    }

    /// Opens the context held by `storage`.
    pub fn open_storage(storage: &dyn Storage) -> Result<Context> {
        let file = storage.open(control::FILE, false).map_err(Error::io(control::FILE, "open"))?;
        let bytes = pando_store::io::read_all(&*file).map_err(Error::io(control::FILE, "read"))?;
        let control = Control::decode(&bytes)?;
        let space = Space::open(storage, &control)?;
        let dict = Dict::open(storage, control.dict_end)?;
        Ok(Context { control, space, dict, index: None, checked: None, stop: None, index_checked: false })
    }

    /// Stops the walks and imports that follow with [`Error::Interrupted`]
    /// once `flag` is set (by a signal handler, say), within a few
    /// thousand objects: an import then fails as on damage, and its
    /// store keeps nothing.
    pub fn stop_when(&mut self, flag: Arc<AtomicBool>) {
        self.stop = Some(flag);
    }

    /// The control file's fields.
    pub fn control(&self) -> &Control {
        &self.control
    }

    /// Every commit whose tree the files hold, oldest first (by offset),
    /// found by reading every live entry.
    pub fn commits(&mut self) -> Result<Vec<CommitRef>> {
        self.commits_from(0)
    }

    /// The commits irmin's index names, `(offset, hash)`; `None` without
    /// an index. The first call also checks that every commit it places
    /// at or after the suffix's start is there: irmin writes the suffix
    /// and the control file before the index, so one that is not says the
    /// suffix lost bytes (a chunk emptied or removed leaves no other
    /// trace: the chunks before the last are as long as their files).
    /// Commits it places below the suffix are collected or in the prefix,
    /// and not looked at.
    fn indexed_commits(&mut self) -> Result<Option<Vec<(u64, Hash)>>> {
        let Some(dir) = &self.index else { return Ok(None) };
        let mut indexed = Vec::new();
        index::for_each(dir, &mut |e| {
            if e.kind == b'D' {
                indexed.push((e.offset, e.hash));
            }
        })?;
        if !self.index_checked {
            let (start, end) = self.space.suffix_range();
            for &(offset, hash) in &indexed {
                if offset < start || self.is_live_commit(offset, &hash) {
                    continue;
                }
                let at = if offset >= end {
                    format!("past the suffix's end ({end})")
                } else {
                    "where the suffix holds another entry".into()
                };
                return Err(Error::Corrupt {
                    file: "index".into(),
                    offset: 0,
                    reason: format!(
                        "irmin's index places commit {hash} at offset {offset}, {at}: a suffix chunk is missing, \
                         emptied or cut (irmin writes the suffix before the index)"
                    ),
                });
            }
            self.index_checked = true;
        }
        Ok(Some(indexed))
    }

    /// The commits at or after `from`, which is 0 or an entry's offset.
    fn commits_from(&mut self, from: u64) -> Result<Vec<CommitRef>> {
        if !self.index_checked {
            self.indexed_commits()?;
        }
        let mut commits = Vec::new();
        let mut runs: Vec<(u64, u64)> = self.space.prefix_runs().collect();
        let (start, end) = self.space.suffix_range();
        runs.push((start, end - start));
        for (run, len) in runs {
            if run + len <= from {
                continue;
            }
            // Entries lie whole within their run (`entry::header` checks it).
            let mut at = run.max(from);
            while at < run + len {
                let entry = entry::header(&mut self.space, at, &Self::origin(at))?;
                if entry.kind == EntryKind::Commit {
                    commits.push(CommitRef { hash: entry.hash, offset: at });
                }
                at += entry.size;
            }
        }
        Ok(commits)
    }

    /// The commit `hash`, or the newest in the files when `None`.
    ///
    /// irmin's index, when present, names the candidates, each checked
    /// against the pack (the index keeps collected commits); the newest is
    /// then looked for only in the entries after it (the index may lag
    /// behind the pack). Without an index, or when it names none, every
    /// live entry is read.
    pub fn find_commit(&mut self, hash: Option<&Hash>) -> Result<CommitRef> {
        if let Some(mut candidates) = self.indexed_commits()? {
            candidates.retain(|(_, found)| hash.is_none_or(|h| h == found));
            candidates.sort_unstable();
            candidates.dedup();
            for (offset, found) in candidates.into_iter().rev() {
                if !self.is_live_commit(offset, &found) {
                    continue;
                }
                if hash.is_some() {
                    return Ok(CommitRef { hash: found, offset });
                }
                let later = self.commits_from(offset)?;
                return Ok(later.into_iter().next_back().unwrap_or(CommitRef { hash: found, offset }));
            }
        }
        let commits = self.commits()?;
        match hash {
            Some(hash) => commits.into_iter().find(|c| &c.hash == hash).ok_or(Error::UnknownCommit(*hash)),
            None => commits.into_iter().next_back().ok_or_else(|| Error::NotAContext("the files hold no commit".into())),
        }
    }

    /// True if a commit `hash` is at `offset` in the live files.
    fn is_live_commit(&mut self, offset: u64, hash: &Hash) -> bool {
        entry::header(&mut self.space, offset, &Self::origin(offset))
            .is_ok_and(|e| e.kind == EntryKind::Commit && e.hash == *hash)
    }

    /// Where a walk from `offset` (an entry found by a scan, the index
    /// or the caller) starts, for errors about the offset itself.
    fn origin(offset: u64) -> Loc {
        Loc { file: "irmin's offset space".into(), offset }
    }

    /// From now on, remember the inodes checked (at most 2^20, about
    /// 170 MB): a check of many commits then walks what they share once.
    pub fn remember_checked(&mut self) {
        self.checked.get_or_insert_with(walk::Checked::default);
    }

    /// Walks the commit and its tree, re-hashing every object; writes
    /// nothing. After [`Context::remember_checked`], an inode an earlier
    /// call checked (at the same offset and position) is not walked again.
    pub fn check_commit(
        &mut self,
        commit: &CommitRef,
        progress: &mut dyn FnMut(&WalkStats, u64),
    ) -> Result<(CheckedCommit, WalkStats)> {
        let origin = Self::origin(commit.offset);
        let mut walker = walk::Walker::new(&mut self.space, &self.dict, progress);
        walker.checked = self.checked.as_mut();
        walker.stop = self.stop.as_deref();
        let checked = walker.commit(commit.offset, &origin)?;
        Ok((checked, walker.stats))
    }

    /// Imports the commit into `store`, which must be empty: its tree is
    /// re-hashed here as it is read, and again by pando as it is written;
    /// the store keeps it only if it hashes to the commit irmin recorded.
    pub fn import_commit(
        &mut self,
        commit: &CommitRef,
        store: &Store,
        progress: &mut dyn FnMut(&WalkStats, u64),
    ) -> Result<Imported> {
        let origin = Self::origin(commit.offset);
        let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(8);
        let mut reader = PipeReader { rx, buf: Vec::new(), pos: 0 };
        let stop = self.stop.as_deref();
        let (walked, imported) = std::thread::scope(|scope| {
            let importer = scope.spawn(move || store.import_snapshot(&mut reader));
            let mut writer = PipeWriter { tx: Some(tx) };
            let walked = pando_store::snapshot::write_frames(&mut writer, |frames| {
                let mut walker = walk::Walker::new(&mut self.space, &self.dict, progress);
                walker.out = Some(frames);
                walker.stop = stop;
                let checked = walker.commit(commit.offset, &origin);
                Ok(checked.map(|c| (c, walker.stats)))
            });
            writer.tx = None;
            (walked, importer.join().expect("the importing thread does not panic"))
        });
        // An error of the irmin files is the cause (the importer then only
        // saw the stream end early); an error on the way to the store is
        // the importer's when it stopped first (a full disk, say).
        let (commit, walk) = match walked {
            Ok((Ok(done), _, _)) => done,
            Ok((Err(Error::Store(e)), _, _)) => return Err(imported.err().map_or(Error::Store(e), Error::Store)),
            Ok((Err(e), _, _)) => return Err(e),
            Err(e) => return Err(imported.err().unwrap_or(e).into()),
        };
        let snapshot = imported?;
        Ok(Imported { commit, walk, snapshot, bytes_read: self.space.bytes_read })
    }

    /// Imports every commit the files hold whole, oldest first, into
    /// `store`, which must be empty: the oldest as a snapshot, each later
    /// one as the differences from an imported commit (its parent when
    /// there is one), each kept only if its hash is irmin's. `progress`
    /// gets the commits done, their number, and the last one.
    pub fn import_all(&mut self, store: &Store, progress: &mut dyn FnMut(usize, usize, &Hash)) -> Result<History> {
        let commits = self.commits()?;
        let first = commits.first().ok_or_else(|| Error::NotAContext("the files hold no commit".into()))?;
        let imported = self.import_commit(first, store, &mut |_, _| {})?;
        progress(1, commits.len(), &first.hash);
        // The irmin offset of each imported commit: 40 bytes a commit.
        let mut imported_at = std::collections::HashMap::new();
        imported_at.insert(first.hash, first.offset);
        let mut last = first.hash;
        let stop = self.stop.clone();
        let mut differ = history::Differ { space: &mut self.space, dict: &self.dict, stats: DiffStats::default() };
        for (done, commit) in commits.iter().enumerate().skip(1) {
            if stop.as_ref().is_some_and(|flag| flag.load(Ordering::Relaxed)) {
                return Err(Error::Interrupted);
            }
            let (entry, body, parents) = walk::commit_fields(differ.space, commit.offset, &Self::origin(commit.offset))?;
            let base = parents.iter().find(|p| imported_at.contains_key(*p)).copied().unwrap_or(last);
            let at = imported_at[&base];
            let (base_entry, base_body, _) = walk::commit_fields(differ.space, at, &Self::origin(at))?;
            let hash = history::import_on(&mut differ, store, (&base_entry, &base_body), (&entry, &body, &parents))?;
            imported_at.insert(hash, commit.offset);
            last = hash;
            progress(done + 1, commits.len(), &hash);
        }
        Ok(History { first: imported, commits: commits.len(), head: last, diff: differ.stats, bytes_read: self.space.bytes_read })
    }

    /// Bytes read from the files so far.
    pub fn bytes_read(&self) -> u64 {
        self.space.bytes_read
    }
}

/// The writing end of an in-process pipe of byte buffers.
struct PipeWriter {
    tx: Option<mpsc::SyncSender<Vec<u8>>>,
}

impl Write for PipeWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let tx = self.tx.as_ref().ok_or_else(|| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        tx.send(buf.to_vec()).map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the importer stopped"))?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The reading end: the end of the stream when the writer is dropped.
struct PipeReader {
    rx: mpsc::Receiver<Vec<u8>>,
    buf: Vec<u8>,
    pos: usize,
}

impl Read for PipeReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.pos == self.buf.len() {
            match self.rx.recv() {
                Ok(buf) => (self.buf, self.pos) = (buf, 0),
                Err(_) => return Ok(0),
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests;
