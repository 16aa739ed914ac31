//! Building a store from a snapshot (grammar in `crate::snapshot`).
//!
//! The stream comes in pre-order; each inode is encoded and appended to the
//! pack as soon as its last child is, so the importer holds one inode per
//! level under construction (and, for a directory of at most 256 entries,
//! the entries its flat hash needs), whatever the sizes of the directories.
//! Records go to the pack in batches of a few MiB; nothing is durable until
//! the last batch, the commit record and the control write, which happen
//! only once the tree hashes to the commit the header names.
//!
//! Invariants:
//! - Every inode is checked as the store's decoder checks it (entry count,
//!   sorted unique steps, entries on their index path, a tree inode's length
//!   the sum of its children's) plus the canonical layout (a directory of
//!   more than 32 entries is a tree inode and no other), so the store built
//!   is the one the same entries would give: each record appended decodes
//!   back to its entries (asserted in `finish`; damage is refused, tested by
//!   `every_flipped_byte_and_every_truncation_is_refused`).
//! - An inode is finished once it holds what its header announced: a value
//!   inode one hash per entry, a tree inode one child per bitmap bit, a
//!   directory hashed flat its unique entries (asserted in `finish`).
//! - A failure leaves nothing durable: the control file still describes
//!   the empty store, and the store refuses writes until it is reopened
//!   (tested by `a_failed_import_leaves_an_empty_store_that_reopens`).

use pando_core::dir::{MAX_DEPTH, tree_hash, values_hash};
use pando_core::inode::{ENTRIES, hashed_flat, index};
use pando_core::tezos::{Kind, contents_hash};
use pando_core::{CommitInfo, Hash};
use std::io::Read;

use crate::dict::{self, RawSteps};
use crate::error::{Error, Result};
use crate::format::commit::{ABSENT_PARENT, CommitRecord};
use crate::format::node::{INLINE_MAX, decode_tree, decode_values, encode_tree, encode_values, resolve_children};
use crate::format::record::{self, MAX_PAYLOAD, RecordKind};
use crate::node::{Child, Inline, Leaf, Ptr, Step, Values};
use crate::snapshot::{END, ENTRY_CONTENTS, ENTRY_DIR, FrameReader, Header, SnapshotSummary, TAG_TREE, TAG_VALUES};
use crate::store::Repo;
use crate::store::write::commit::note_commit;

/// Bytes of records gathered before they are appended to the pack.
const BATCH_BYTES: usize = 8 << 20;
/// Deepest nesting of directories accepted.
const MAX_DIR_DEPTH: usize = 4096;

/// An inode under construction.
struct Building {
    /// Its index path in its directory's trie (empty for a directory root).
    path: Vec<u8>,
    /// Collect the entries for the flat hash of a directory of ≤ 256 entries.
    flat: Option<Vec<(Step, Kind, Hash)>>,
    body: Body,
}

enum Body {
    Values {
        count: usize,
        entries: Vec<(Step, Child)>,
        hashes: Vec<Hash>,
        /// The step of the directory entry whose directory is being read.
        waiting: Option<Step>,
    },
    Tree {
        len: u64,
        bitmap: u32,
        next: usize,
        /// The children read so far: index, offset and inode hash.
        children: Vec<(usize, u64, Hash)>,
        /// Entries found below the children so far.
        sum: u64,
    },
}

/// A finished inode as its parent needs it.
struct Done {
    offset: u64,
    /// The directory hash for a root, the inode hash below.
    hash: Hash,
    len: u64,
    flat: Option<Vec<(Step, Kind, Hash)>>,
}

/// Records on their way to the pack.
struct Output<'a> {
    repo: &'a Repo,
    base: u64,
    buf: Vec<u8>,
    payload: Vec<u8>,
    /// The bytes an inode's hash is computed over, kept between inodes.
    hashed: Vec<u8>,
    raw_steps: RawSteps,
}

impl Output<'_> {
    fn push(&mut self, kind: RecordKind) -> u64 {
        let at = self.base + self.buf.len() as u64;
        record::append(&mut self.buf, kind, &self.payload);
        at
    }

    /// Appends the dictionary record promoting the steps seen twice so far
    /// (used from the next batch on, as a commit's promotions are).
    fn promote(&mut self) {
        let first_id = self.repo.read.dict.read().len();
        let promoted = self.repo.read.dict.write().observe(&self.raw_steps);
        self.raw_steps.clear();
        if !promoted.is_empty() {
            record::append(&mut self.buf, RecordKind::Dict, &dict::encode_record(first_id, &promoted));
            let mut dict = self.repo.read.dict.write();
            for step in promoted {
                dict.push(step);
            }
        }
    }

    /// Appends the batch to the pack once it is large enough.
    fn maybe_flush(&mut self) -> Result<()> {
        if self.buf.len() >= BATCH_BYTES {
            self.promote();
            self.repo.read.pack.append(self.base, &self.buf)?;
            self.buf.clear();
            self.base = self.repo.read.pack.prepare_append()?;
        }
        Ok(())
    }
}

impl Repo {
    /// Imports a snapshot into this store, which must be empty; returns
    /// what it held once its commit is durable.
    pub(in crate::store) fn import(&self, input: &mut dyn Read) -> Result<SnapshotSummary> {
        self.write.check_writable()?;
        let mut writer = self.write.writer.as_ref().expect("checked writable").lock();
        // A blob staged meanwhile makes the store not empty.
        self.write.guard(self.write.staged.settle())?;
        if writer.control.commits != 0 || self.read.pack.end() != 0 {
            return Err(Error::Invalid("a snapshot is imported into an empty store".into()));
        }
        let result = self.import_locked(input);
        // Poisoned, as after any failed write, but not logged as one: the
        // caller has the cause, most often the snapshot's own damage.
        let (summary, commit_at) = self.write.poison_on_error(result, crate::telemetry::import_failed)?;
        note_commit(&mut writer, summary.commit, commit_at);
        self.flush_locked(&mut writer, true)?;
        self.publish_commit(summary.commit, commit_at);
        Ok(summary)
    }

    /// Reads and appends the snapshot's records; returns the commit
    /// record's offset once the tree hashes to the header's commit.
    fn import_locked(&self, input: &mut dyn Read) -> Result<(SnapshotSummary, u64)> {
        let mut r = FrameReader::new(input)?;
        let header = Header::decode(&mut r)?;
        let mut summary = SnapshotSummary { commit: header.commit, directories: 1, ..SnapshotSummary::default() };
        let mut out = Output {
            repo: self,
            base: self.read.pack.prepare_append()?,
            buf: Vec::new(),
            payload: Vec::new(),
            hashed: Vec::new(),
            raw_steps: Default::default(),
        };
        let mut stack = vec![read_node(&mut r, Vec::new(), false, &mut summary)?];
        // Directory roots on the stack, to bound the nesting.
        let mut dirs = 1usize;
        let root = loop {
            let top = stack.last_mut().expect("the root is built last");
            // `Some(Some(child))`: read a child; `Some(None)`: an entry was
            // read; `None`: the inode is complete.
            let next = match &mut top.body {
                Body::Values { count, entries, hashes, waiting } if entries.len() < *count => {
                    let step: Step = r.bytes(u64::from(u16::MAX), "step")?.into();
                    if entries.last().is_some_and(|(last, _)| last[..] >= step[..]) {
                        return Err(r.error("entries not sorted by step, or repeated"));
                    }
                    if !top.path.iter().enumerate().all(|(d, &i)| index(d as u32, &step) == usize::from(i)) {
                        return Err(r.error("an entry lies outside its inode's index path"));
                    }
                    match r.byte()? {
                        ENTRY_CONTENTS => {
                            let bytes = r.bytes(MAX_PAYLOAD, "contents")?;
                            let hash = contents_hash(&bytes);
                            summary.contents += 1;
                            summary.contents_bytes += bytes.len() as u64;
                            let child = if bytes.len() > INLINE_MAX {
                                out.payload = bytes;
                                Child::Contents(Leaf::Blob { offset: out.push(RecordKind::Blob), hash })
                            } else {
                                Child::Contents(Leaf::Inline(Inline::new(&bytes).expect("at most INLINE_MAX bytes")))
                            };
                            if let Some(flat) = &mut top.flat {
                                flat.push((step.clone(), Kind::Contents, hash));
                            }
                            entries.push((step, child));
                            hashes.push(hash);
                            Some(None)
                        }
                        ENTRY_DIR => {
                            debug_assert!(waiting.is_none(), "a value inode waits for one directory at a time");
                            *waiting = Some(step);
                            dirs += 1;
                            summary.directories += 1;
                            if dirs > MAX_DIR_DEPTH {
                                return Err(r.error(format!("directories nested more than {MAX_DIR_DEPTH} deep")));
                            }
                            Some(Some(read_node(&mut r, Vec::new(), false, &mut summary)?))
                        }
                        other => return Err(r.error(format!("unknown entry kind {other}"))),
                    }
                }
                Body::Tree { bitmap, next, .. } if (*next..ENTRIES).any(|i| *bitmap & (1 << i) != 0) => {
                    let i = (*next..ENTRIES).find(|i| *bitmap & (1 << i) != 0).expect("found above");
                    *next = i;
                    if top.path.len() + 1 > MAX_DEPTH as usize {
                        return Err(r.error(format!("an inode deeper than {MAX_DEPTH} levels")));
                    }
                    let mut path = top.path.clone();
                    path.push(i as u8);
                    let collect = top.flat.is_some();
                    Some(Some(read_node(&mut r, path, collect, &mut summary)?))
                }
                _ => None,
            };
            match next {
                Some(Some(child)) => {
                    stack.push(child);
                    continue;
                }
                Some(None) => continue,
                None => {}
            }
            let done = self.finish(stack.pop().expect("top"), &mut out).map_err(|reason| r.error(reason))?;
            out.maybe_flush()?;
            let Some(parent) = stack.last_mut() else { break done };
            match &mut parent.body {
                Body::Values { entries, hashes, waiting, .. } => {
                    dirs -= 1;
                    let step = waiting.take().expect("a directory entry waits for its directory");
                    if done.len == 0 {
                        return Err(r.error("an empty directory (Tezos trees have none)"));
                    }
                    if let Some(flat) = &mut parent.flat {
                        flat.push((step.clone(), Kind::Dir, done.hash));
                    }
                    entries.push((step, Child::Dir(Ptr::stored(done.offset, done.hash))));
                    hashes.push(done.hash);
                }
                Body::Tree { next, children, sum, .. } => {
                    children.push((*next, done.offset, done.hash));
                    *sum += done.len;
                    *next += 1;
                    if let (Some(flat), Some(mut entries)) = (&mut parent.flat, done.flat) {
                        flat.append(&mut entries);
                    }
                }
            }
        };
        assert_eq!(dirs, 1, "every directory entered is left, but the root");
        if r.byte()? != END {
            return Err(r.error("the tree is not followed by the end marker"));
        }
        summary.stream_bytes = r.stream_pos();
        summary.file_bytes = r.finish()?;
        let mut parents = header.parents.clone();
        parents.sort();
        parents.dedup();
        let info = CommitInfo {
            root: root.hash,
            parents: parents.clone(),
            date: header.date,
            author: header.author.clone(),
            message: header.message.clone(),
        };
        let found = info.hash();
        if found != header.commit {
            return Err(Error::Snapshot {
                file_offset: 0,
                stream_offset: 0,
                reason: format!("the snapshot's tree and fields hash to commit {found}, its header names {}", header.commit),
            });
        }
        out.promote();
        let commit_at = out.base + out.buf.len() as u64;
        let record = CommitRecord {
            root_offset: root.offset,
            root_hash: root.hash,
            parents: parents.iter().map(|p| (*p, ABSENT_PARENT)).collect(),
            date: header.date,
            author: header.author,
            message: header.message,
        };
        record::append(&mut out.buf, RecordKind::Commit, &record.encode(commit_at));
        self.read.pack.append(out.base, &out.buf)?;
        Ok((summary, commit_at))
    }

    /// Encodes a finished inode and computes its hash.
    fn finish(&self, mut building: Building, out: &mut Output<'_>) -> Result<Done, String> {
        let root = building.path.is_empty();
        let at = out.base + out.buf.len() as u64;
        out.payload.clear();
        let mut buf = std::mem::take(&mut out.hashed);
        buf.clear();
        let (len, kind, hash) = match building.body {
            Body::Values { count, entries, hashes, .. } => {
                debug_assert!(
                    entries.len() == count && hashes.len() == count,
                    "a value inode is finished with one hash per entry"
                );
                let values = Values::from_sorted(entries);
                let resolved = resolve_children(&values, &[]);
                encode_values(&values, at, &resolved, &self.read.dict.read(), Some(&mut out.raw_steps), &mut out.payload);
                debug_assert!(
                    decode_values(&out.payload, at, &self.read.dict.read()).is_ok_and(|inode| inode.len() == count as u64),
                    "an imported value inode decodes back to its entries"
                );
                let hash =
                    values_hash(&mut buf, root, values.len(), values.iter().zip(&hashes).map(|((s, c), h)| (s, c.kind(), h)));
                (values.len() as u64, RecordKind::Values, hash)
            }
            Body::Tree { len, bitmap, children, sum, .. } => {
                debug_assert_eq!(children.len(), bitmap.count_ones() as usize, "a tree inode is finished with a child per bit");
                if sum != len {
                    return Err(format!("a tree inode of {len} entries has {sum} below it"));
                }
                let depth = building.path.len() as u32;
                encode_tree(depth, len, &children, at, &mut out.payload);
                debug_assert!(
                    decode_tree(&out.payload, at, depth).is_ok_and(|inode| inode.len() == len),
                    "an imported tree inode decodes back to its pointers"
                );
                let hash = match &mut building.flat {
                    // A directory of at most 256 entries: hashed flat. Its
                    // entries are unique: each lies on its index path.
                    Some(flat) if root => {
                        flat.sort_by(|a, b| a.0.cmp(&b.0));
                        debug_assert!(
                            flat.len() as u64 == len && flat.windows(2).all(|pair| pair[0].0 < pair[1].0),
                            "a directory hashed flat holds each of its entries once"
                        );
                        values_hash(&mut buf, true, flat.len(), flat.iter().map(|(s, k, h)| (&s[..], *k, h)))
                    }
                    _ => tree_hash(&mut buf, depth, len, children.iter().map(|(i, _, h)| (*i, h))),
                };
                (len, RecordKind::Tree, hash)
            }
        };
        out.hashed = buf;
        let offset = out.push(kind);
        Ok(Done { offset, hash, len, flat: building.flat.filter(|_| !root) })
    }
}

/// Reads an inode's own part (tag, count or length and bitmap) and checks
/// it against its place: `path` its index path in its directory, `collect`
/// whether its directory's flat hash needs its entries.
fn read_node(r: &mut FrameReader<'_>, path: Vec<u8>, collect: bool, summary: &mut SnapshotSummary) -> Result<Building> {
    summary.inodes += 1;
    let root = path.is_empty();
    let building = match r.byte()? {
        TAG_VALUES => {
            let count = r.varint()?;
            if count > ENTRIES as u64 {
                return Err(r.error(format!("value inode of {count} entries (at most {ENTRIES})")));
            }
            if count == 0 && !root {
                return Err(r.error("an empty inode below a directory root"));
            }
            let count = count as usize;
            let flat = (collect && !root).then(Vec::new);
            Building {
                path,
                flat,
                body: Body::Values {
                    count,
                    entries: Vec::with_capacity(count),
                    hashes: Vec::with_capacity(count),
                    waiting: None,
                },
            }
        }
        TAG_TREE => {
            let len = r.varint()?;
            let mut bitmap = [0u8; 4];
            r.read(&mut bitmap)?;
            let bitmap = u32::from_le_bytes(bitmap);
            if len <= ENTRIES as u64 {
                return Err(r.error(format!("tree inode of {len} entries (a directory of at most {ENTRIES} is a value inode)")));
            }
            if bitmap == 0 {
                return Err(r.error("tree inode without children"));
            }
            // A directory root of at most 256 entries is hashed flat.
            let flat = if root { hashed_flat(len).then(Vec::new) } else { collect.then(Vec::new) };
            Building {
                path,
                flat,
                body: Body::Tree { len, bitmap, next: 0, children: Vec::with_capacity(bitmap.count_ones() as usize), sum: 0 },
            }
        }
        other => return Err(r.error(format!("unknown inode tag {other}"))),
    };
    Ok(building)
}
