//! The pack: an append-only log of records split into chunk files.
//!
//! Offsets are logical and global: chunk `chunk-<start>.pack` holds the
//! bytes from `start` up to the next chunk's start. A commit's batch is
//! appended whole to the last chunk; a new chunk is started before a batch
//! once the last one has reached the target size, so a batch never straddles
//! two chunks and GC can later drop or rewrite whole chunks.
//!
//! After a garbage collection, the live records below the first chunk are
//! found through a run table (`format::mapping`): each run of live bytes
//! lies in a segment a collection wrote (`segment-<g>.pack`) or in an old
//! chunk kept in place. Their logical offsets do not change, so every
//! pointer stays valid.
//!
//! Invariants:
//! - Bytes below `end` are never rewritten; readers may read them while the
//!   writer appends. Records reserved for another thread to write
//!   (`reserve`) lie past `end` until written, in the order reserved; a
//!   batch is appended, and a chunk started, only once none is pending.
//!   A collection replaces the layout below the first chunk in one step
//!   (`install`, under every lock); a reader that located a record in an
//!   old file keeps reading it through its open handle (asserted in
//!   `append` and `reserve`, the switch in `layout`'s `install`; tested by
//!   `shuttle_readers_never_see_a_switch`).
//! - Locks are taken in one order: chunks, collected, cold (tested by
//!   `shuttle_readers_never_see_a_switch`, whose schedules would find a
//!   deadlock, with the `shuttle` feature).
//! - Every chunk but the last is exactly `next.start - start` bytes long;
//!   a cold file holds exactly the bytes its chunk held (asserted in
//!   `prepare_append`, when the last chunk is closed).
//!
//! Boundary: the pack knows records, not nodes or commits.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::error::{Error, Result};
use crate::format::control::Control;
use crate::format::mapping::{IN_CHUNK, Run};
use crate::format::record::{self, Parse, RecordKind};
use crate::io::{File, Storage};
use crate::locks::{AtomicBool, AtomicU64, RwLock};

mod follow;
mod layout;
mod names;
mod scan;
pub(crate) mod window;
#[cfg(all(test, feature = "shuttle"))]
mod shuttle_tests;

pub use layout::{Collected, Layout, Resolved, PackFile};
use layout::open_collected;
pub use names::{chunk_name, cold_name, segment_name};
pub(crate) use names::parse_hex_name;
use names::{parse_chunk_name, parse_cold_name, parse_segment_name};
pub(crate) use scan::whole_batches_end;
use scan::{Stopped, scan_region};

/// What [`Pack::open`] opens and how it may change it: the fields of the
/// control file that describe the pack, and the store's mode.
#[derive(Clone, Debug, Default)]
pub struct PackOptions {
    /// The start of the first chunk; records below it lie in `collected`'s runs.
    pub first_chunk_start: u64,
    /// The end of the pack's durable bytes, as the control file says.
    pub durable_end: u64,
    /// The size past which the next batch starts a new chunk.
    pub chunk_target_bytes: u64,
    /// Writable: takes in the whole batches past `durable_end`, cuts off
    /// what follows them, and finishes what a collection left. Read-only
    /// changes nothing.
    pub writable: bool,
    /// A collected store's generation and run table.
    pub collected: Option<(u64, Vec<Run>)>,
    /// Archive mode: chunks below the first become cold files instead of
    /// being removed.
    pub archive: bool,
}

impl PackOptions {
    /// The pack as the control state `control` describes it, with the run
    /// table of its generation (`collected`), opened writable or not.
    pub fn of_control(control: &Control, writable: bool, collected: Option<(u64, Vec<Run>)>) -> PackOptions {
        PackOptions {
            first_chunk_start: control.first_chunk_start,
            durable_end: control.durable_end,
            chunk_target_bytes: control.chunk_target_bytes,
            writable,
            collected,
            archive: control.archive(),
        }
    }
}

/// How many bytes a read of a record asks for first; most records fit.
const READ_AHEAD: u64 = 512;

/// What [`Pack::scan`] calls on each record: offset, kind, payload.
pub type RecordFn<'a> = dyn FnMut(u64, RecordKind, &[u8]) -> Result<()> + 'a;

/// Where a record lies: its file, the position of its first byte there,
/// and how many bytes of the same region precede and follow it.
struct Located {
    file: Arc<dyn File>,
    name: String,
    key: u64,
    pos: u64,
    back: u64,
    avail: u64,
}

/// Logical bytes `start..end` of the pack, held contiguously in one file
/// from position `pos`: a chunk, a run below the first chunk, or a cold file.
#[derive(Clone)]
pub struct Region {
    pub start: u64,
    pub end: u64,
    pub name: String,
    pub file: Arc<dyn File>,
    pub pos: u64,
}

struct Chunk {
    start: u64,
    name: String,
    file: Arc<dyn File>,
}

/// A chunk an archive-mode collection moved out of the hot set. Cold files
/// need not touch: a rolling collection may have removed chunks between them.
struct Cold {
    start: u64,
    len: u64,
    name: String,
    file: Arc<dyn File>,
}

impl Cold {
    fn holds(&self, offset: u64) -> bool {
        self.start <= offset && offset < self.start + self.len
    }
}

/// The sync of the pack's last chunk, as it is now.
pub struct ChunkSync {
    file: Arc<dyn File>,
    name: String,
}

impl ChunkSync {
    pub fn run(&self) -> Result<()> {
        self.file.sync().map_err(Error::io(&self.name, "sync"))
    }
}

pub struct Pack {
    storage: Arc<dyn Storage>,
    chunks: RwLock<Vec<Chunk>>,
    collected: RwLock<Option<Arc<Collected>>>,
    /// Archive mode: the chunks collections moved out of the hot set,
    /// sorted; read below the first chunk when no run holds a record.
    cold: RwLock<Vec<Cold>>,
    /// The first chunk's start, readable without a lock.
    first_start: AtomicU64,
    /// The bytes of the files below the first chunk, readable without a
    /// lock (`size_bytes` is sampled after every block of a replay).
    collected_bytes: AtomicU64,
    /// End of the bytes written, visible to readers of this process.
    end: Arc<AtomicU64>,
    /// End of the bytes appended or reserved: past `end` while records
    /// [`Pack::reserve`]d are still being written.
    reserved: AtomicU64,
    chunk_target_bytes: u64,
    /// Set once a collection started: the next batch starts a chunk, where
    /// a later collection's boundary can then fall (see [`Pack::split`]).
    split: AtomicBool,
    /// Records below the first chunk held without some of the records they
    /// refer to: patch bases, kept for the children their patches need
    /// (see `gc_plan::live_records`), as this process's last collection
    /// found them (see [`Pack::holds_whole`]).
    partial: RwLock<HashSet<u64>>,
}

/// Bytes at the end of the pack, reserved for a record written later
/// ([`Pack::reserve`]).
pub struct Reserved {
    file: Arc<dyn File>,
    name: String,
    /// Where in the file.
    pos: u64,
    /// The record's offset and length.
    at: u64,
    len: u64,
    /// The pack's end of written bytes.
    written: Arc<AtomicU64>,
}

impl Reserved {
    /// Writes `record` (of the length reserved) and moves the pack's end
    /// of written bytes over it; refused unless every record reserved
    /// before is written.
    pub fn write(self, record: &[u8]) -> Result<()> {
        assert_eq!(record.len() as u64, self.len, "a reserved record is written whole");
        let written = self.written.load(Ordering::Acquire);
        if written != self.at {
            return Err(Error::Invalid(format!("record at {} written before the pack's bytes up to it ({written})", self.at)));
        }
        self.file.write_all_at(record, self.pos).map_err(Error::io(&self.name, "write"))?;
        self.written.store(self.at + self.len, Ordering::Release);
        Ok(())
    }
}

impl Pack {
    /// Creates the empty first chunk of a new store (the caller syncs the directory).
    pub fn create_files(storage: &dyn Storage) -> Result<()> {
        let name = chunk_name(0);
        let file = storage.open(&name, true).map_err(Error::io(&name, "create"))?;
        file.sync().map_err(Error::io(&name, "sync"))
    }

    /// Opens the chunks of a store whose durable end is `durable_end`, and
    /// the files the run table `collected` (generation and runs) points into
    /// (see [`PackOptions`]).
    /// Writable: first extends the durable end over the whole batches found
    /// after it (see [`whole_batches_end`]; [`Pack::end`] tells the caller),
    /// then removes chunks past it and truncates the last one there;
    /// finishes what a collection left (chunks and segments no run needs
    /// are removed, or in archive mode chunks below the first become cold).
    /// Read-only: ignores what lies past the durable end.
    pub fn open(storage: Arc<dyn Storage>, options: PackOptions) -> Result<Pack> {
        let PackOptions { first_chunk_start: first_start, durable_end, chunk_target_bytes, writable, collected, archive } = options;
        let names = storage.list().map_err(Error::io(storage.describe(), "list"))?;
        let durable_end = if writable { whole_batches_end(&*storage, &names, first_start, durable_end)? } else { durable_end };
        let needed: BTreeSet<u64> = collected.iter().flat_map(|(_, runs)| runs.iter().map(|r| r.file)).collect();
        let mut starts: Vec<u64> =
            names.iter().filter_map(|name| parse_chunk_name(name)).filter(|&start| start >= first_start).collect();
        starts.sort_unstable();
        let mut cold: Vec<(u64, String)> = names
            .iter()
            .filter_map(|name| parse_cold_name(name).map(|start| (start, name.clone())))
            .filter(|(start, _)| *start < first_start)
            .collect();
        // Chunks a collection replaced: kept in place while runs point into
        // them; otherwise a crash came before their removal, or (archive
        // mode) their move to cold files. Read-only, an archive's are read
        // where they are.
        let replaced: Vec<u64> =
            names.iter().filter_map(|name| parse_chunk_name(name)).filter(|&start| start < first_start).collect();
        let mut changed = false;
        for &start in &replaced {
            let name = chunk_name(start);
            match (writable, archive) {
                (true, true) => {
                    storage.rename(&name, &cold_name(start)).map_err(Error::io(name.as_str(), "rename"))?;
                    cold.push((start, cold_name(start)));
                    changed = true;
                }
                (true, false) if !needed.contains(&(IN_CHUNK | start)) => {
                    storage.remove(&name).map_err(Error::io(name.as_str(), "remove"))?;
                    changed = true;
                }
                (false, true) => cold.push((start, name)),
                _ => {}
            }
        }
        // Segments of an unfinished step, or of an older layout.
        for generation in names.iter().filter_map(|name| parse_segment_name(name)) {
            if writable && !needed.contains(&generation) {
                let name = segment_name(generation);
                storage.remove(&name).map_err(Error::io(name.as_str(), "remove"))?;
                changed = true;
            }
        }
        if changed {
            storage.sync_dir().map_err(Error::io(storage.describe(), "sync directory"))?;
        }
        cold.sort_unstable();
        let cold = cold
            .into_iter()
            .map(|(start, name)| {
                // Read-only, a chunk listed under its old name may have
                // been renamed cold meanwhile.
                let (name, file) = match storage.open(&name, false) {
                    Ok(file) => (name, file),
                    Err(_) if !writable => {
                        (cold_name(start), storage.open(&cold_name(start), false).map_err(Error::io(&name, "open"))?)
                    }
                    Err(e) => return Err(Error::io(&name, "open")(e)),
                };
                let len = file.len().map_err(Error::io(&name, "stat"))?;
                Ok(Cold { start, len, name, file })
            })
            .collect::<Result<Vec<_>>>()?;
        let collected = match collected {
            Some((generation, runs)) => Some(Arc::new(open_collected(&*storage, generation, runs, &cold)?)),
            None => None,
        };
        let (live, beyond): (Vec<u64>, Vec<u64>) = starts.into_iter().partition(|&s| s <= durable_end);
        if writable && !beyond.is_empty() {
            // Chunks started by a batch that never became durable. The
            // removal must be durable before the last chunk grows past
            // their start, or a crash could bring one back mid-pack.
            for start in beyond {
                storage.remove(&chunk_name(start)).map_err(Error::io(chunk_name(start), "remove"))?;
            }
            storage.sync_dir().map_err(Error::io(storage.describe(), "sync directory"))?;
        }
        if live.first() != Some(&first_start) {
            return Err(Error::corrupt(chunk_name(first_start), 0, "the first chunk of the store is missing"));
        }
        let mut chunks = Vec::with_capacity(live.len());
        for (i, &start) in live.iter().enumerate() {
            let name = chunk_name(start);
            let file = storage.open(&name, false).map_err(Error::io(&name, "open"))?;
            let len = file.len().map_err(Error::io(&name, "stat"))?;
            let expected_end = live.get(i + 1).copied().unwrap_or(durable_end);
            let needed = expected_end - start;
            if len < needed {
                return Err(Error::corrupt(
                    &name,
                    len,
                    format!("chunk is {len} bytes but the control file says {needed} are durable"),
                ));
            }
            if len > needed {
                if i + 1 < live.len() {
                    return Err(Error::corrupt(&name, needed, format!("chunk is {len} bytes, overlapping the next chunk")));
                }
                if writable {
                    crate::telemetry::cut_tail(&name, needed, len);
                    file.truncate(needed).map_err(Error::io(&name, "truncate"))?;
                    file.sync().map_err(Error::io(&name, "sync"))?;
                }
            }
            chunks.push(Chunk { start, name, file });
        }
        Ok(Pack {
            storage,
            chunks: RwLock::new(chunks),
            collected_bytes: AtomicU64::new(collected.as_ref().map_or(0, |c| c.file_bytes())),
            collected: RwLock::new(collected),
            cold: RwLock::new(cold),
            first_start: AtomicU64::new(first_start),
            end: Arc::new(AtomicU64::new(durable_end)),
            reserved: AtomicU64::new(durable_end),
            chunk_target_bytes,
            split: AtomicBool::new(false),
            partial: RwLock::new(HashSet::new()),
        })
    }

    /// Logical offset of the first chunk's first byte: below it, only the
    /// runs of the layout (and cold files) remain.
    pub fn first_chunk_start(&self) -> u64 {
        self.first_start.load(Ordering::Acquire)
    }

    /// True if `offset` is a byte the store still holds: anything from the
    /// first chunk on (including a batch being built), or a live run below it.
    pub fn holds(&self, offset: u64) -> bool {
        if offset >= self.first_chunk_start() {
            return true;
        }
        // One lock at a time: a reader never waits holding one.
        let in_run = self.collected.read().as_ref().is_some_and(|c| c.find(offset).is_some());
        in_run || self.cold.read().iter().any(|c| c.holds(offset))
    }

    /// True if the store holds the record at `offset` and every record it
    /// refers to: [`Pack::holds`], and not a patch base a collection kept
    /// only for its patches (the children they replaced are gone). A
    /// pointer to such a base that does not go through its patches comes
    /// from a tree of a collected commit, and cannot be written again.
    pub fn holds_whole(&self, offset: u64) -> bool {
        self.holds(offset) && (offset >= self.first_chunk_start() || !self.partial.read().contains(&offset))
    }

    /// Sets the records held without some of the records they refer to
    /// (a collection's switch, under the writer lock, with the layout it
    /// installs): `partial`, and those already set if `keep` (a
    /// collection that kept the older runs as they were).
    pub fn set_partial(&self, partial: HashSet<u64>, keep: bool) {
        let mut set = self.partial.write();
        if keep {
            set.extend(partial);
        } else {
            *set = partial;
        }
    }

    /// The layout's epoch: the generation of the layout below the first
    /// chunk (0 before any collection), which every install raises. Only an
    /// install removes records, so a record [`Pack::holds`] while this is
    /// unchanged stays held; a caller that learnt a set of records is held
    /// (all reachable from a commit not collected), then finds the epoch
    /// unchanged, need not ask for each. Read before what it vouches for:
    /// a collection marks its commits collected before it installs.
    pub fn layout_epoch(&self) -> u64 {
        self.collected.read().as_ref().map_or(0, |c| c.generation)
    }

    /// The chunk starts, in order, with the end of each chunk's bytes.
    pub fn chunk_bounds(&self) -> Vec<(u64, u64)> {
        let end = self.end();
        let chunks = self.chunks.read();
        chunks.iter().enumerate().map(|(i, c)| (c.start, chunks.get(i + 1).map_or(end, |n| n.start))).collect()
    }

    /// The layout below the first chunk, if a collection made one.
    pub fn collected(&self) -> Option<Arc<Collected>> {
        self.collected.read().clone()
    }

    /// End of the bytes written (reserved records still being written
    /// lie past it).
    pub fn end(&self) -> u64 {
        self.end.load(Ordering::Acquire)
    }

    /// Total bytes in the chunks and the files below them, with the
    /// records reserved and still being written (no lock).
    pub fn size_bytes(&self) -> u64 {
        self.reserved.load(Ordering::Acquire) - self.first_chunk_start() + self.collected_bytes.load(Ordering::Acquire)
    }

    /// Makes the next batch start a new chunk: a collection's boundary is
    /// a chunk's start, so that the next one can discard all that lies
    /// before the commits it keeps, not the rest of a large chunk too.
    pub fn split(&self) {
        self.split.store(true, Ordering::Release);
    }

    /// Whether [`Pack::prepare_append`] would start a new chunk now: the
    /// last one is full or [`Pack::split`] asked.
    pub fn starts_chunk(&self) -> bool {
        self.chunk_due(self.reserved.load(Ordering::Acquire), self.split.load(Ordering::Acquire))
    }

    /// Whether a batch at `end` starts a new chunk: the last one holds
    /// something and is full, or `split` was asked.
    fn chunk_due(&self, end: u64, split: bool) -> bool {
        let last_start = self.chunks.read().last().expect("a pack has a chunk").start;
        end > last_start && (end - last_start >= self.chunk_target_bytes || split)
    }

    /// The offset the next batch will be written at, starting a new chunk
    /// first if [`Pack::starts_chunk`]. Writer only. A chunk is only
    /// started once every reserved record is written (it syncs the last
    /// one first): until then the batch goes to the last chunk, and the
    /// new chunk waits for a later batch.
    pub fn prepare_append(&self) -> Result<u64> {
        let end = self.reserved.load(Ordering::Acquire);
        if end != self.end() {
            // Records still being written (a split asked stays asked).
            return Ok(end);
        }
        if self.chunk_due(end, self.split.swap(false, Ordering::AcqRel)) {
            // Only the last chunk is synced at commits: finish this one first.
            self.sync()?;
            // It now ends where the next one starts: nothing lies past the
            // end of the bytes written in it (a chunk longer than that
            // would overlap the next one, which an open refuses).
            let (last, last_name, last_start) = self.last_chunk();
            let len = last.len().map_err(Error::io(&last_name, "stat"))?;
            assert_eq!(len, end - last_start, "a chunk closed holds exactly the bytes up to the next chunk's start");
            let name = chunk_name(end);
            let file = self.storage.open(&name, true).map_err(Error::io(&name, "create"))?;
            file.truncate(0).map_err(Error::io(&name, "truncate"))?;
            // The new file must survive a crash before any commit refers to it.
            self.storage.sync_dir().map_err(Error::io(self.storage.describe(), "sync directory"))?;
            crate::crash_point::reach("chunk-created");
            self.chunks.write().push(Chunk { start: end, name, file });
        }
        Ok(end)
    }

    /// Appends a batch at `at`, the offset `prepare_append` returned, once
    /// every reserved record is written.
    pub fn append(&self, at: u64, batch: &[u8]) -> Result<()> {
        assert_eq!(at, self.end(), "batches are appended at the end");
        assert_eq!(at, self.reserved.load(Ordering::Acquire), "batches are appended after the reserved records are written");
        let (file, name, start) = self.last_chunk();
        assert!(at >= start, "a batch is appended to the last chunk, at or after its start");
        file.write_all_at(batch, at - start).map_err(Error::io(&name, "write"))?;
        self.reserved.store(at + batch.len() as u64, Ordering::Release);
        self.end.store(at + batch.len() as u64, Ordering::Release);
        Ok(())
    }

    /// Reserves `len` bytes at `at` (the offset `prepare_append` returned)
    /// for a record [`Reserved::write`] writes later, on another thread.
    /// Records must be written in the order they were reserved: each
    /// moves [`Pack::end`] over itself, so that readers see it.
    pub fn reserve(&self, at: u64, len: u64) -> Reserved {
        assert_eq!(at, self.reserved.load(Ordering::Acquire), "records are reserved at the end");
        let (file, name, start) = self.last_chunk();
        debug_assert!(at >= self.end() && at >= start, "a reserved record lies past the written end, in the last chunk");
        self.reserved.store(at + len, Ordering::Release);
        Reserved { file, name, pos: at - start, at, len, written: self.end.clone() }
    }

    fn last_chunk(&self) -> (Arc<dyn File>, String, u64) {
        let chunks = self.chunks.read();
        let last = chunks.last().expect("a pack has a chunk");
        (last.file.clone(), last.name.clone(), last.start)
    }

    /// Makes every appended byte durable.
    pub fn sync(&self) -> Result<()> {
        self.syncing().run()
    }

    /// What [`Pack::sync`] does, to run on another thread: earlier chunks
    /// were synced before the chunk after them was started, so syncing the
    /// last one makes every byte appended so far durable.
    pub fn syncing(&self) -> ChunkSync {
        let chunks = self.chunks.read();
        let last = chunks.last().expect("a pack has a chunk");
        ChunkSync { file: last.file.clone(), name: last.name.clone() }
    }

    /// Where `offset` lies: its file's key ([`Run::file`]; a chunk's is
    /// `IN_CHUNK | start`), the position there, and how many bytes of the
    /// same region follow.
    pub fn whereabouts(&self, offset: u64) -> Result<(u64, u64, u64)> {
        self.locate(offset).map(|l| (l.key, l.pos, l.avail))
    }

    /// The name of the file holding `offset` and the position there, for
    /// an error about the record at `offset`.
    pub fn file_position(&self, offset: u64) -> Result<(String, u64)> {
        self.locate(offset).map(|l| (l.name, l.pos))
    }

    /// The file region holding `offset`: a chunk, a run below the first
    /// chunk, or (archive mode) a cold chunk.
    fn locate(&self, offset: u64) -> Result<Located> {
        let end = self.end();
        let chunks = self.chunks.read();
        let i = chunks.partition_point(|c| c.start <= offset);
        if offset >= end {
            return Err(Error::corrupt("pack", offset, format!("offset outside the pack ({}..{end})", chunks[0].start)));
        }
        if i == 0 {
            let collected = self.collected.read();
            let located = collected.as_ref().and_then(|c| {
                let run = c.find(offset)?;
                debug_assert!(run.old <= offset && offset < run.end(), "the run found for an offset holds it");
                let source = c.files.get(&run.file)?;
                let skip = offset - run.old;
                Some(Located {
                    file: source.file.clone(),
                    name: source.name.clone(),
                    key: run.file,
                    pos: run.new + skip,
                    back: skip,
                    avail: run.len - skip,
                })
            });
            let located = located.or_else(|| {
                let cold = self.cold.read();
                let i = cold.partition_point(|c| c.start <= offset);
                let chunk = cold.get(i.checked_sub(1)?).filter(|c| c.holds(offset))?;
                Some(Located {
                    file: chunk.file.clone(),
                    name: chunk.name.clone(),
                    key: IN_CHUNK | chunk.start,
                    pos: offset - chunk.start,
                    back: offset - chunk.start,
                    avail: chunk.start + chunk.len - offset,
                })
            });
            return located.ok_or(Error::Collected { offset });
        }
        let chunk = &chunks[i - 1];
        let limit = chunks.get(i).map_or(end, |next| next.start);
        Ok(Located {
            file: chunk.file.clone(),
            name: chunk.name.clone(),
            key: IN_CHUNK | chunk.start,
            pos: offset - chunk.start,
            back: offset - chunk.start,
            avail: limit - offset,
        })
    }

    /// The region reads of `offset` go to.
    pub fn region(&self, offset: u64) -> Result<Region> {
        let Located { file, name, pos, back, avail, .. } = self.locate(offset)?;
        Ok(Region { start: offset - back, end: offset + avail, name, file, pos: pos - back })
    }

    /// Every region holding records: the chunks, the runs below them, and
    /// the cold files whole (which hold again what the runs into them hold).
    pub fn regions(&self) -> Vec<Region> {
        let region = |start, end, name: &String, file: &Arc<dyn File>, pos| Region {
            start,
            end,
            name: name.clone(),
            file: file.clone(),
            pos,
        };
        let bounds = self.chunk_bounds();
        let chunks =
            self.chunks.read().iter().zip(bounds).map(|(c, (start, end))| region(start, end, &c.name, &c.file, 0)).collect();
        let cold: Vec<Region> = self.cold.read().iter().map(|c| region(c.start, c.start + c.len, &c.name, &c.file, 0)).collect();
        let collected = self.collected();
        let runs = collected.iter().flat_map(|c| c.runs.iter().filter_map(|r| Some((r, c.files.get(&r.file)?))));
        let runs = runs.filter(|(r, _)| !cold.iter().any(|c| r.file == IN_CHUNK | c.start));
        let mut out: Vec<Region> = chunks;
        out.extend(runs.map(|(r, f)| region(r.old, r.end(), &f.name, &f.file, r.new)));
        out.extend(cold);
        out
    }

    /// Reads the bytes at `offset..offset + buf.len()` (which may span
    /// chunks, or lie in one run below the first chunk).
    pub fn read_raw(&self, mut offset: u64, mut buf: &mut [u8]) -> Result<()> {
        while !buf.is_empty() {
            let Located { file, name, pos, avail, .. } = self.locate(offset)?;
            let n = (avail.min(buf.len() as u64)) as usize;
            file.read_exact_at(&mut buf[..n], pos).map_err(Error::io(&name, "read"))?;
            buf = &mut buf[n..];
            offset += n as u64;
        }
        Ok(())
    }

    /// Reads and checks the record at `offset`.
    pub fn read_record(&self, offset: u64) -> Result<(RecordKind, Vec<u8>)> {
        let Located { file, name, pos, avail, .. } = self.locate(offset)?;
        let mut buf = vec![0u8; READ_AHEAD.min(avail) as usize];
        file.read_exact_at(&mut buf, pos).map_err(Error::io(&name, "read"))?;
        loop {
            match record::parse(&buf) {
                Parse::Record { kind, payload, .. } => return Ok((kind, payload.to_vec())),
                // Only the rest of the record is read.
                Parse::NeedMore { total } if total > buf.len() && (total as u64) <= avail => {
                    let have = buf.len();
                    buf.resize(total, 0);
                    file.read_exact_at(&mut buf[have..], pos + have as u64).map_err(Error::io(&name, "read"))?;
                }
                Parse::NeedMore { total } => {
                    return Err(Error::corrupt(&name, pos, format!("record of {total} bytes runs past the end of its region")));
                }
                Parse::Invalid { reason } => return Err(Error::corrupt(&name, pos, reason)),
            }
        }
    }

    /// Calls `f(offset, kind, payload)` on every record from `from` to `to`,
    /// which must be record boundaries.
    pub fn scan(&self, from: u64, to: u64, f: &mut RecordFn<'_>) -> Result<()> {
        let mut offset = from;
        while offset < to {
            let Located { file, name, pos, avail, .. } = self.locate(offset)?;
            let end = pos + avail.min(to - offset);
            let base = offset - pos;
            if let Some(Stopped { pos, reason }) =
                scan_region(&*file, &name, pos, end, &mut |pos, kind, payload, _| f(base + pos, kind, payload))?
            {
                return Err(Error::corrupt(&name, pos, reason));
            }
            offset = base + end;
        }
        Ok(())
    }

    /// Names and sizes of the chunk files.
    pub fn chunk_sizes(&self) -> Vec<(String, u64)> {
        let end = self.end();
        let chunks = self.chunks.read();
        chunks.iter().enumerate().map(|(i, c)| (c.name.clone(), chunks.get(i + 1).map_or(end, |n| n.start) - c.start)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemStorage;

    fn pack() -> Pack {
        let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
        Pack::create_files(&*storage).unwrap();
        Pack::open(storage, PackOptions { chunk_target_bytes: 1 << 20, writable: true, ..PackOptions::default() }).unwrap()
    }

    /// Reserved records become readable in the order reserved: one
    /// written before the records ahead of it is refused, and `end`
    /// stays below a record not written yet.
    #[test]
    fn reserved_records_are_written_in_order() {
        let pack = pack();
        let (mut first, mut second) = (Vec::new(), Vec::new());
        record::append(&mut first, RecordKind::Blob, b"first");
        record::append(&mut second, RecordKind::Blob, b"second");
        let at = pack.prepare_append().unwrap();
        let one = pack.reserve(at, first.len() as u64);
        let two = pack.reserve(pack.prepare_append().unwrap(), second.len() as u64);
        assert_eq!(pack.end(), 0);
        assert_eq!(pack.size_bytes(), (first.len() + second.len()) as u64);
        assert!(matches!(two.write(&second), Err(Error::Invalid(_))));
        assert!(pack.read_record(at).is_err(), "nothing is read past the written end");
        one.write(&first).unwrap();
        assert_eq!(pack.end(), first.len() as u64);
        assert_eq!(pack.read_record(at).unwrap(), (RecordKind::Blob, b"first".to_vec()));
    }
}
