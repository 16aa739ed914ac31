//! Staged blobs: contents a writer appended to the pack when they were
//! added to a tree, before any commit refers to them, and their hashes,
//! computed on a thread of their own.
//!
//! Invariants:
//! - A staged record has an offset of its own and one [`Staged`] (shared
//!   by `Arc`); the offset is in the [`StagedSet`] from `stage` until a
//!   commit that refers to it is in the index ([`StagedSet::committed`])
//!   or that `Staged` drops, and collections keep every record from the
//!   smallest such offset on. Once committed, the record is traced from
//!   the commits like any other; a tree that still holds it after its
//!   commits were collected is refused at its commit (`check_refs`), as
//!   for any stored pointer. (Asserted in `stage`; tested by
//!   `collections_keep_what_an_uncommitted_tree_staged`.)
//! - The record's place in the pack is reserved before its `Staged`
//!   exists; the thread writes it, then hashes the contents. It takes the
//!   records in the order they were staged and numbers them as it goes,
//!   so a `Staged` whose number is at most that count is written (or
//!   knows the failure that stopped it) and has its hash. Asking a
//!   `Staged` for its hash waits until then, and so does anything that
//!   reads its record ([`Staged::written`]) and every commit
//!   ([`StagedSet::settle`]). (Asserted in `count`.)
//! - After a failed write the thread writes no later record (each must
//!   follow the one before in the pack), but still hashes them; the first
//!   failure is kept for the store ([`StagedSet::settle`],
//!   [`StagedSet::take_failure`]). If the thread cannot be started, or is
//!   found gone, the staging thread writes and hashes itself. (Asserted
//!   in `run`.)

use pando_core::Hash;
use pando_core::tezos::contents_hash;
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};

/// Writes a staged record at the place reserved for it in the pack.
pub type WriteRecord = Box<dyn FnOnce(&[u8]) -> Result<()> + Send>;

/// How many staged records may wait for their hash; the staging thread
/// waits beyond it.
const QUEUED: usize = 32;
/// Record buffers above this size are not kept for the next value.
const KEPT_BUFFER: usize = 1 << 20;

/// A blob record a store placed in its pack when the contents were added
/// to a tree (written on the hashing thread), so that a large commit does
/// not hold its values in memory. Until a commit refers to it, the store's
/// collections keep every record from its offset on (the store's set of
/// staged offsets).
pub struct Staged {
    pub offset: u64,
    hash: OnceLock<Hash>,
    /// Set when the record was not written: the failure that stopped it.
    unwritten: OnceLock<String>,
    /// Its place in the hashing thread's order (1 for the first).
    number: u64,
    live: Arc<StagedSet>,
}

impl Staged {
    /// The hash of the contents, once the hashing thread has it.
    pub fn hash(&self) -> Hash {
        if let Some(hash) = self.hash.get() {
            return *hash;
        }
        self.live.hashing.wait_for(self.number);
        *self.hash.get().expect("the hashing thread numbers a record after hashing it")
    }

    /// Waits until the record is written; the write's failure (or the
    /// failure of an earlier one, which stopped it) if it was not.
    pub fn written(&self) -> Result<()> {
        self.hash();
        match self.unwritten.get() {
            Some(first) => Err(Error::PreviousIo { first: first.clone() }),
            None => Ok(()),
        }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        // Already gone if a commit released it.
        self.live.offsets.lock().remove(&self.offset);
    }
}

/// The offsets of the staged blobs no commit refers to yet that some tree
/// may still hold, and the thread that hashes their contents.
#[derive(Default)]
pub struct StagedSet {
    offsets: Mutex<BTreeSet<u64>>,
    hashing: Hashing,
}

impl StagedSet {
    /// A buffer to build the next staged record in.
    pub fn buffer(&self) -> Vec<u8> {
        let mut buf = self.hashing.emptied.lock().as_ref().and_then(|emptied| emptied.try_recv().ok()).unwrap_or_default();
        buf.clear();
        buf
    }

    /// A staged blob at `offset`, live until dropped: `record` holds it,
    /// its contents at `contents`, and `write` writes it at the place
    /// reserved for it. The hashing thread writes it, then hashes the
    /// contents (or this thread, without one).
    pub fn stage(self: &Arc<Self>, offset: u64, record: Vec<u8>, contents: Range<usize>, write: WriteRecord) -> Arc<Staged> {
        let fresh = self.offsets.lock().insert(offset);
        assert!(fresh, "a staged record has an offset of its own");
        let mut queue = self.hashing.queue.lock();
        queue.staged += 1;
        let staged = Arc::new(Staged {
            offset,
            hash: OnceLock::new(),
            unwritten: OnceLock::new(),
            number: queue.staged,
            live: self.clone(),
        });
        let job = Job { staged: staged.clone(), record, contents, write };
        match queue.send(job, &self.hashing) {
            Ok(()) => {}
            Err(job) => {
                // No thread: write and hash here, as the thread would have.
                let number = job.staged.number;
                job.run(&self.hashing);
                self.hashing.count(number);
            }
        }
        staged
    }

    /// Waits until every record staged so far is written and hashed;
    /// the first write that failed, if none has reported it yet.
    pub fn settle(&self) -> Result<()> {
        let staged = self.hashing.queue.lock().staged;
        self.hashing.wait_for(staged);
        self.take_failure().map_or(Ok(()), Err)
    }

    /// The first write that failed, if none has reported it yet (without
    /// waiting for the records being written).
    pub fn take_failure(&self) -> Option<Error> {
        self.hashing.failure.lock().take()
    }

    /// Releases the staged blobs at `offsets`: a commit in the index now
    /// refers to each, so collections find them by tracing and need not
    /// keep every record after them (a tree held across many blocks, such
    /// as the newest commit's kept in memory, would otherwise hold back
    /// every collection's boundary).
    pub fn committed(&self, offsets: &[u64]) {
        if offsets.is_empty() {
            return;
        }
        let mut live = self.offsets.lock();
        for offset in offsets {
            live.remove(offset);
        }
    }

    /// The smallest offset of a staged blob no commit refers to yet.
    pub fn oldest(&self) -> Option<u64> {
        self.offsets.lock().first().copied()
    }
}

/// A staged record to write and hash.
struct Job {
    staged: Arc<Staged>,
    record: Vec<u8>,
    contents: Range<usize>,
    write: WriteRecord,
}

impl Job {
    /// Writes the record, unless a write failed before (the failure is
    /// kept in `hashing`), hashes the contents and gives the record's
    /// buffer back.
    fn run(self, hashing: &Hashing) -> Vec<u8> {
        match hashing.first_failure.get() {
            Some(first) => {
                let _ = self.staged.unwritten.set(first.clone());
            }
            None => {
                if let Err(e) = (self.write)(&self.record) {
                    let first = hashing.first_failure.get_or_init(|| e.to_string());
                    let _ = self.staged.unwritten.set(first.clone());
                    *hashing.failure.lock() = Some(e);
                }
            }
        }
        debug_assert!(
            hashing.first_failure.get().is_none() || self.staged.unwritten.get().is_some(),
            "after a failed write, no later record is written"
        );
        let _ = self.staged.hash.set(contents_hash(&self.record[self.contents]));
        self.record
    }
}

/// The hashing thread's two ends and its count of records hashed.
#[derive(Default)]
struct Hashing {
    queue: Mutex<Queue>,
    /// Buffers the thread is done with.
    emptied: Mutex<Option<Receiver<Vec<u8>>>>,
    /// Records hashed, in staging order.
    hashed: Mutex<u64>,
    progress: Condvar,
    /// The first failed write, as text: later records are not written.
    first_failure: OnceLock<String>,
    /// The first failed write, until reported.
    failure: Mutex<Option<Error>>,
}

#[derive(Default)]
struct Queue {
    /// Records staged (numbered from 1).
    staged: u64,
    /// `None` before the first record and once the thread is gone.
    jobs: Option<SyncSender<Job>>,
    /// The thread could not start: hash on the staging thread.
    failed: bool,
}

impl Queue {
    /// Hands `job` to the thread (started on the first), or back when
    /// there is none.
    fn send(&mut self, job: Job, hashing: &Hashing) -> Result<(), Job> {
        if self.jobs.is_none() && !self.failed {
            match hashing.start() {
                Some(jobs) => self.jobs = Some(jobs),
                None => self.failed = true,
            }
        }
        let Some(jobs) = &self.jobs else { return Err(job) };
        jobs.send(job).map_err(|refused| {
            self.jobs = None;
            self.failed = true;
            refused.0
        })
    }
}

impl Hashing {
    /// Starts the thread; `None` if it cannot.
    fn start(&self) -> Option<SyncSender<Job>> {
        let (jobs, received) = sync_channel::<Job>(QUEUED);
        let (give_back, emptied) = sync_channel::<Vec<u8>>(2);
        // The thread holds no `Arc<StagedSet>` of its own (only the jobs'
        // while it hashes them), so the set drops, and with it the sender
        // that ends the thread, when the store and its trees are gone.
        let spawned = std::thread::Builder::new().name("pando-hash".into()).spawn(move || {
            for job in received {
                let (live, number) = (job.staged.live.clone(), job.staged.number);
                let mut buf = job.run(&live.hashing);
                live.hashing.count(number);
                drop(live);
                if buf.capacity() <= KEPT_BUFFER {
                    buf.clear();
                    let _ = give_back.try_send(buf);
                }
            }
        });
        spawned.ok()?;
        *self.emptied.lock() = Some(emptied);
        Some(jobs)
    }

    /// Counts record `number` hashed: the next in staging order.
    fn count(&self, number: u64) {
        let mut hashed = self.hashed.lock();
        assert_eq!(*hashed + 1, number, "staged records are written and hashed in the order staged");
        *hashed = number;
        drop(hashed);
        self.progress.notify_all();
    }

    /// Waits until record `number` is hashed.
    fn wait_for(&self, number: u64) {
        let mut hashed = self.hashed.lock();
        while *hashed < number {
            self.progress.wait(&mut hashed);
        }
    }
}
