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
//!   for any stored pointer.
//! - The record is in the pack before its `Staged` exists; only its hash
//!   may come later. The hashing thread takes the records in the order
//!   they were staged and numbers them as it goes, so a `Staged` whose
//!   number is at most that count has its hash. Asking a `Staged` for its
//!   hash waits until then.
//! - The thread only hashes (nothing it does can fail); if it cannot be
//!   started, or is found gone, the staging thread hashes the contents
//!   itself.

use pando_core::Hash;
use pando_core::tezos::contents_hash;
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, OnceLock};

/// How many staged records may wait for their hash; the staging thread
/// waits beyond it.
const QUEUED: usize = 32;
/// Record buffers above this size are not kept for the next value.
const KEPT_BUFFER: usize = 1 << 20;

/// A blob record a store wrote when the contents were added to a tree, so
/// that a large commit does not hold its values in memory. Until a commit
/// refers to it, the store's collections keep every record from its
/// offset on (the store's set of staged offsets).
pub struct Staged {
    pub offset: u64,
    hash: OnceLock<Hash>,
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
    /// its contents at `contents`. The record is already in the pack; its
    /// hash is computed on the hashing thread (or here, without one).
    pub fn stage(self: &Arc<Self>, offset: u64, record: Vec<u8>, contents: Range<usize>) -> Arc<Staged> {
        let fresh = self.offsets.lock().insert(offset);
        assert!(fresh, "a staged record has an offset of its own");
        let mut queue = self.hashing.queue.lock();
        queue.staged += 1;
        let staged = Arc::new(Staged { offset, hash: OnceLock::new(), number: queue.staged, live: self.clone() });
        let job = Job { staged: staged.clone(), record, contents };
        match queue.send(job, &self.hashing) {
            Ok(()) => {}
            Err(job) => {
                // No thread: hash here, as the thread would have.
                job.run();
                self.hashing.count(1);
            }
        }
        staged
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

/// A staged record to hash.
struct Job {
    staged: Arc<Staged>,
    record: Vec<u8>,
    contents: Range<usize>,
}

impl Job {
    /// Hashes the contents and gives the record's buffer back.
    fn run(self) -> Vec<u8> {
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
                let live = job.staged.live.clone();
                let mut buf = job.run();
                live.hashing.count(1);
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

    /// Counts `n` more records hashed.
    fn count(&self, n: u64) {
        *self.hashed.lock() += n;
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
