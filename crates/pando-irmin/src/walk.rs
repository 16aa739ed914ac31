//! The walk of a commit's tree: every object read is re-hashed and checked
//! against the hash irmin recorded in its entry, and, when importing, the
//! tree is written as pando's snapshot stream on the way
//! (`pando_store::snapshot`'s grammar: pre-order, one inode per level).
//!
//! The hashing rules are pando_core's, the ones the Tezos context hash
//! uses: a contents is hashed alone; a non-root inode by its inode encoding
//! (`inode::encode_values` or `encode_tree`); a directory (a root inode) by
//! its flat node encoding when it has at most 256 entries, by its root
//! inode's encoding otherwise; a commit by its info, root and parents.
//!
//! Invariants:
//! - Memory is one decoded inode per level of the walk (plus, under a
//!   directory of at most 256 entries, those entries), whatever the tree's
//!   size; contents are read one at a time. A check of many commits adds
//!   its memo ([`Checked`], bounded).
//! - Every pointer followed points below its entry (`Entry::child`), and
//!   directories nest at most [`MAX_DIRS`] deep: no walk loops.
//! - The layout is checked to be the canonical one (entries sorted and on
//!   their index path, depths and lengths consistent, tree inodes only
//!   above 32 entries), so a store that passes is one Tezos would hash the
//!   same way.
//! - The first mismatch ends the walk with an error naming the file and
//!   byte of the object at fault.

use pando_core::dir::{MAX_DEPTH, tree_hash, values_hash};
use pando_core::inode::{self, ENTRIES, hashed_flat};
use pando_core::varint::write_u64;
use pando_core::{CommitInfo, Hash, Kind};
use std::sync::atomic::{AtomicBool, Ordering};

use pando_store::snapshot::{ENTRY_CONTENTS, ENTRY_DIR, FrameWriter, TAG_TREE, TAG_VALUES};

use crate::dict::Dict;
use crate::entry::{self, Address, CommitBody, Entry, EntryKind, InodeBody, Loc};
use crate::error::{Error, Result};
use crate::space::Space;

/// Deepest nesting of directories followed (Tezos paths are far shorter);
/// it bounds the walks' recursion.
pub(crate) const MAX_DIRS: usize = 256;
/// Most inodes a [`Checked`] memo holds (about 170 MB resident, measured).
const MEMO_DIRS: usize = 1 << 20;

/// Directories and inodes already re-hashed, by offset, with their hash
/// and entry count: a check of many commits walks what each shares with
/// the others once. Bounded: it is emptied when full.
///
/// Keyed by offset and position (the index path, a directory's root
/// being the empty one), so that an object met elsewhere is checked
/// there too.
#[derive(Default)]
pub struct Checked {
    inodes: std::collections::HashMap<(u64, u64), (Hash, u64)>,
}

/// The index path `path` as one number (5 bits per level after a leading
/// 1), when it fits.
fn position(path: &[u8]) -> Option<u64> {
    (path.len() <= 12).then(|| path.iter().fold(1u64, |code, &i| code << 5 | u64::from(i)))
}

impl Checked {
    fn insert(&mut self, offset: u64, path: &[u8], hash: Hash, len: u64) {
        let Some(at) = position(path) else { return };
        if self.inodes.len() >= MEMO_DIRS {
            self.inodes.clear();
        }
        self.inodes.insert((offset, at), (hash, len));
    }
}

/// What a walk met.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalkStats {
    pub commits: u64,
    pub directories: u64,
    pub inodes: u64,
    pub contents: u64,
    pub contents_bytes: u64,
    /// Bytes of the irmin entries walked (an object met twice counts twice).
    pub entry_bytes: u64,
}

impl std::ops::AddAssign<&WalkStats> for WalkStats {
    fn add_assign(&mut self, other: &WalkStats) {
        self.commits += other.commits;
        self.directories += other.directories;
        self.inodes += other.inodes;
        self.contents += other.contents;
        self.contents_bytes += other.contents_bytes;
        self.entry_bytes += other.entry_bytes;
    }
}

/// A walk over one store's objects.
pub struct Walker<'a> {
    pub space: &'a mut Space,
    pub dict: &'a Dict,
    /// Where the snapshot stream goes, when importing.
    pub out: Option<&'a mut FrameWriter>,
    /// Directories checked before, skipped when only checking.
    pub checked: Option<&'a mut Checked>,
    pub stats: WalkStats,
    /// Called every few thousand objects.
    pub progress: &'a mut dyn FnMut(&WalkStats, u64),
    /// Checked as often as `progress` is called: once set, the walk stops
    /// with [`Error::Interrupted`].
    pub stop: Option<&'a AtomicBool>,
    ticks: u32,
    /// The bytes of the hash being computed.
    buf: Vec<u8>,
}

/// A checked commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedCommit {
    pub hash: Hash,
    pub info: CommitInfo,
}

/// A finished inode, as its parent needs it.
struct Done {
    /// The checked hash: the directory's for a root, the inode's below.
    hash: Hash,
    len: u64,
    /// Its entries, for the flat hash of a directory of at most 256.
    flat: Option<Vec<(Vec<u8>, Kind, Hash)>>,
}

impl<'a> Walker<'a> {
    pub fn new(space: &'a mut Space, dict: &'a Dict, progress: &'a mut dyn FnMut(&WalkStats, u64)) -> Walker<'a> {
        Walker {
            space,
            dict,
            out: None,
            checked: None,
            stats: WalkStats::default(),
            progress,
            stop: None,
            ticks: 0,
            buf: Vec::new(),
        }
    }

    fn read(&mut self, offset: u64, from: &Loc) -> Result<Entry> {
        let entry = entry::read(self.space, offset, from)?;
        self.count(&entry)?;
        Ok(entry)
    }

    fn count(&mut self, entry: &Entry) -> Result<()> {
        self.stats.entry_bytes += entry.size;
        self.ticks += 1;
        if self.ticks.is_multiple_of(4096) {
            (self.progress)(&self.stats, self.space.bytes_read);
            if self.stop.is_some_and(|stop| stop.load(Ordering::Relaxed)) {
                return Err(Error::Interrupted);
            }
        }
        Ok(())
    }

    fn emit(&mut self, bytes: &[&[u8]]) {
        if let Some(out) = &mut self.out {
            for b in bytes {
                out.buf().extend_from_slice(b);
            }
        }
    }

    fn emit_varint(&mut self, value: u64) {
        if let Some(out) = &mut self.out {
            write_u64(out.buf(), value);
        }
    }

    fn flush(&mut self) -> Result<()> {
        if let Some(out) = &mut self.out {
            out.maybe_flush()?;
        }
        Ok(())
    }

    /// Walks and checks the commit at `offset` and its whole tree.
    pub fn commit(&mut self, offset: u64, from: &Loc) -> Result<CheckedCommit> {
        let (entry, body, parents) = commit_fields(self.space, offset, from)?;
        self.count(&entry)?;
        if self.out.is_some() {
            let mut sorted = parents.clone();
            sorted.sort();
            let header = pando_store::snapshot::Header {
                commit: entry.hash,
                parents: sorted,
                date: body.date,
                author: body.author.clone(),
                message: body.message.clone(),
            };
            let mut bytes = Vec::new();
            header.encode(&mut bytes);
            self.emit(&[&bytes]);
        }
        let root = self.dir(&entry, body.node, 0)?;
        self.emit(&[&[pando_store::snapshot::END]]);
        self.flush()?;
        let info = CommitInfo { root, parents, date: body.date, author: body.author, message: body.message };
        let found = info.hash();
        entry.verify("commit", found)?;
        self.stats.commits += 1;
        Ok(CheckedCommit { hash: entry.hash, info })
    }

    /// What an earlier walk found at `offset`, when only checking.
    fn memo(&self, offset: u64, path: &[u8]) -> Option<(Hash, u64)> {
        if self.out.is_some() {
            return None;
        }
        self.checked.as_ref()?.inodes.get(&(offset, position(path)?)).copied()
    }

    /// The directory `parent` points to at `address`; returns its hash.
    fn dir(&mut self, parent: &Entry, address: Address, dirs: usize) -> Result<Hash> {
        if dirs >= MAX_DIRS {
            return Err(parent.loc.error(format!("directories nested more than {MAX_DIRS} deep")));
        }
        let offset = parent.child(address)?;
        if let Some((hash, _)) = self.memo(offset, &[]) {
            return Ok(hash);
        }
        let entry = self.read(offset, &parent.loc)?;
        entry.expect(&[EntryKind::Root], "a directory's root inode")?;
        self.stats.directories += 1;
        let done = self.inode(&entry, &mut Vec::new(), false, dirs)?;
        if let Some(checked) = &mut self.checked {
            checked.insert(offset, &[], done.hash, done.len);
        }
        Ok(done.hash)
    }

    /// The inode `entry`, at index path `path` in its directory (empty for
    /// the root); `collect`: return its entries for a flat hash above.
    fn inode(&mut self, entry: &Entry, path: &mut Vec<u8>, collect: bool, dirs: usize) -> Result<Done> {
        let root = path.is_empty();
        let depth = path.len() as u32;
        self.stats.inodes += 1;
        let done = match entry.inode(self.dict)? {
            InodeBody::Values(values) => {
                if values.is_empty() && !root {
                    return Err(entry.loc.error("an empty non-root inode"));
                }
                self.emit(&[&[TAG_VALUES]]);
                self.emit_varint(values.len() as u64);
                let mut entries: Vec<(Vec<u8>, Kind, Hash)> = Vec::with_capacity(values.len());
                for (name, kind, address) in values {
                    if entries.last().is_some_and(|(last, _, _)| *last >= name) {
                        return Err(entry.loc.error("entries not sorted by name, or repeated"));
                    }
                    if !path.iter().enumerate().all(|(d, &i)| inode::index(d as u32, &name) == usize::from(i)) {
                        return Err(entry
                            .loc
                            .error(format!("entry {:?} lies outside its inode's index path", String::from_utf8_lossy(&name))));
                    }
                    self.emit_varint(name.len() as u64);
                    self.emit(&[&name]);
                    let hash = match kind {
                        Kind::Contents => {
                            let contents = entry.contents(self.space, address)?;
                            self.count(&contents)?;
                            self.stats.contents += 1;
                            self.stats.contents_bytes += contents.body.len() as u64;
                            self.emit(&[&[ENTRY_CONTENTS]]);
                            self.emit_varint(contents.body.len() as u64);
                            self.emit(&[&contents.body]);
                            self.flush()?;
                            contents.hash
                        }
                        Kind::Dir => {
                            self.emit(&[&[ENTRY_DIR]]);
                            self.dir(entry, address, dirs + 1)?
                        }
                    };
                    entries.push((name, kind, hash));
                }
                let hash = values_hash(&mut self.buf, root, entries.len(), entries.iter().map(|(n, k, h)| (&n[..], *k, h)));
                Done { hash, len: entries.len() as u64, flat: collect.then_some(entries) }
            }
            InodeBody::Tree { depth: recorded, length, pointers } => {
                if recorded != u64::from(depth) {
                    return Err(entry.loc.error(format!("an inode at depth {depth} records depth {recorded}")));
                }
                if length <= ENTRIES as u64 {
                    return Err(entry
                        .loc
                        .error(format!("a tree inode of {length} entries (at most {ENTRIES} make a values inode)")));
                }
                if depth >= MAX_DEPTH {
                    return Err(entry.loc.error(format!("a tree inode at depth {depth}, deeper than {MAX_DEPTH}")));
                }
                if pointers.is_empty() || pointers.windows(2).any(|w| w[0].0 >= w[1].0) {
                    return Err(entry.loc.error("pointers missing, or not sorted by index"));
                }
                let bitmap = pointers.iter().fold(0u32, |b, (i, _)| b | 1 << i);
                self.emit(&[&[TAG_TREE]]);
                self.emit_varint(length);
                self.emit(&[&bitmap.to_le_bytes()]);
                let below = if root { hashed_flat(length) } else { collect };
                let mut flat = below.then(Vec::new);
                let (mut hashes, mut sum) = (Vec::with_capacity(pointers.len()), 0u64);
                for (index, address) in pointers {
                    let at = entry.child(address)?;
                    // Entries are needed for a flat hash above: no shortcut then.
                    path.push(index);
                    let done = match self.memo(at, path).filter(|_| !below) {
                        Some((hash, len)) => Done { hash, len, flat: None },
                        None => {
                            let child = self.read(at, &entry.loc)?;
                            child.expect(&[EntryKind::Inode], "a non-root inode")?;
                            let done = self.inode(&child, path, below, dirs)?;
                            if let Some(checked) = &mut self.checked {
                                checked.insert(at, path, done.hash, done.len);
                            }
                            done
                        }
                    };
                    path.pop();
                    sum += done.len;
                    hashes.push((usize::from(index), done.hash));
                    if let (Some(flat), Some(mut entries)) = (&mut flat, done.flat) {
                        flat.append(&mut entries);
                    }
                }
                if sum != length {
                    return Err(entry.loc.error(format!("a tree inode of {length} entries whose children hold {sum}")));
                }
                let hash = match &mut flat {
                    // Each entry lay on its index path: the flat entries are unique.
                    Some(entries) if root => {
                        entries.sort_by(|a, b| a.0.cmp(&b.0));
                        values_hash(&mut self.buf, true, entries.len(), entries.iter().map(|(n, k, h)| (&n[..], *k, h)))
                    }
                    _ => tree_hash(&mut self.buf, depth, length, hashes.iter().map(|(i, h)| (*i, h))),
                };
                Done { hash, len: length, flat: if root { None } else { flat } }
            }
        };
        entry.verify(if root { "directory" } else { "inode" }, done.hash)?;
        self.flush()?;
        Ok(done)
    }
}

/// The commit at `offset` (found at `from`): its entry, its fields, and
/// the hashes of its parents (read from their entries).
pub fn commit_fields(space: &mut Space, offset: u64, from: &Loc) -> Result<(Entry, CommitBody, Vec<Hash>)> {
    let entry = entry::read(space, offset, from)?;
    entry.expect(&[EntryKind::Commit], "a commit")?;
    let body = entry.commit()?;
    let mut parents = Vec::with_capacity(body.parents.len());
    for parent in &body.parents {
        parents.push(match *parent {
            Address::Hash(hash) => hash,
            Address::Offset(_) => {
                let header = entry::header(space, entry.child(*parent)?, &entry.loc)?;
                if !matches!(header.kind, EntryKind::Commit | EntryKind::DanglingParent) {
                    return Err(header.loc.error(format!("a parent commit expected, found a {:?} entry", header.kind)));
                }
                header.hash
            }
        });
    }
    Ok((entry, body, parents))
}
