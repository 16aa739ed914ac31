//! Online garbage collection: keep the commits from a chosen one onwards
//! (and pinned ones), discard the rest, while the writer keeps committing
//! and readers keep reading.
//!
//! A collection's *boundary* is the start of the chunk holding the oldest
//! kept commit; records at or after it stay where they are. One background
//! thread does the whole collection, in two stages:
//!
//! 1. **Liveness.** It finds the records below the boundary that are still
//!    reachable (`gc_plan`) and where they lie now, in runs; it writes
//!    `mapping-<g>` (the runs, still in the old files) and `index-<g>`
//!    (collected commits marked). Records the writer adds meanwhile are
//!    scanned in catch-up rounds. Then, holding the writer lock between two
//!    commits, it scans the last new records and makes one durable control
//!    write naming generation `g`, its index and the boundary: the
//!    collection has taken effect. Files holding no live record are removed.
//! 2. **Relocation.** Files whose live share is low are rewritten, a group
//!    at a time: the group's live runs are copied into `segment-<g'>.pack`,
//!    `mapping-<g'>` is written, and one durable control write (again under
//!    the writer lock, for a few milliseconds) names generation `g'`; then
//!    the group's files are removed. The disk holds at most one segment
//!    more than the store did.
//!
//! Invariants:
//! - Logical offsets never change: a live record below the boundary is
//!   found through the runs, every pointer in the store stays valid
//!   (tested by `collection_keeps_recent_commits_and_frees_space`;
//!   `gc_plan::relocate` asserts a step moves records, never drops one).
//! - The control file names the layout; each step's files are durable
//!   before the control write naming them, files it replaces are removed
//!   only after it. Files of an unfinished step are removed on open
//!   (asserted in `write_control` and `retire`; tested by
//!   `every_operation_of_a_collection_fails_in_turn_then_crash`).
//! - After the liveness switch, no commit may refer to a record that is
//!   gone: the tree is checked before its batch is built
//!   (`commit::check_refs`). A blob staged when added to a tree, which no
//!   commit refers to yet, is never gone: the boundary is at or below the
//!   oldest one trees still hold. Relocation changes where records lie, never
//!   which are held (asserted in `start_gc`; tested by
//!   `pinned_commits_survive_and_stale_trees_are_refused`).
//! - A reader that located a record before a switch reads it from its open
//!   file handle; old files disappear from the directory only (tested by
//!   `collections_writer_and_readers_together`).
//! - The collector never holds a lock the writer takes while it runs at
//!   a lower priority than the writer: the long stages (scanning,
//!   tracing, writing the new files) run on a low-priority thread that
//!   holds no such lock for longer than a lookup, and the sections under
//!   the writer lock run on the collection's own thread, at the priority
//!   of the thread that started it. A nice-19 thread preempted under the
//!   writer lock on a busy machine held the writer for up to 1.6 s
//!   (asserted in `lock_writer`).
//! - A collection due while the last one still runs is not started; the
//!   store says so once per running collection (a warning and
//!   `pando_gc_overdue_total`): the disk then grows past the retention
//!   (tested by `an_overdue_collection_is_said_once`).
//!
//! Crash points (`crash_point::GC_POINTS`, the kill test's): `gc-planned`,
//! `gc-index-written`, `gc-switched`, `gc-segment-written`,
//! `gc-relocated`, `gc-removed`.

mod work;

use pando_core::Hash;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Repo, Writer, index_file};
use crate::error::{Error, Result};
use work::Work;

/// Reports of finished collections kept for `take_gc_reports`, at most.
const MAX_REPORTS: usize = 64;

/// What a collection is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcPhase {
    /// Reading the records at and after the boundary for references below it.
    Scanning,
    /// Following references below the boundary.
    Tracing,
    /// Scanning what the writer added meanwhile.
    CatchingUp,
    /// Rewriting mostly dead files into segments (after the switch).
    Relocating,
}

/// The progress of a running collection.
#[derive(Clone, Debug)]
pub struct GcStatus {
    /// The generation its liveness switch makes.
    pub generation: u64,
    pub phase: GcPhase,
    /// Bytes (records while tracing) of the current phase done, and to do
    /// (0 when unknown).
    pub done: u64,
    pub total: u64,
    pub elapsed: Duration,
}

/// What a finished collection did.
#[derive(Clone, Debug, Default)]
pub struct GcReport {
    /// The generation of the liveness switch, and of the last relocation step.
    pub generation: u64,
    pub last_generation: u64,
    /// Records below this offset were collected or kept.
    pub boundary: u64,
    /// The records below this offset (the previous boundary) were kept as
    /// they were, not traced again; 0 for a whole trace.
    pub traced_from: u64,
    /// Runs and bytes of live records below the boundary.
    pub live_runs: u64,
    pub live_bytes: u64,
    /// Bytes rewritten into segments, and how many segments.
    pub copied_bytes: u64,
    pub segments: u64,
    /// Pack bytes before, at most during (files being replaced and the
    /// segment replacing them), and after.
    pub bytes_before: u64,
    pub peak_bytes: u64,
    pub bytes_after: u64,
    pub collected_commits: u64,
    pub duration: Duration,
    /// How long the writer was held: to start the collection, by the
    /// liveness switch, and by the longest relocation step.
    pub start_pause: Duration,
    pub switch_pause: Duration,
    pub step_pause: Duration,
    /// Why relocation stopped early, if it did (the collection itself took
    /// effect; the files not rewritten are rewritten by the next one).
    pub relocation_error: Option<String>,
}

impl GcReport {
    /// The longest time the collection held the writer.
    pub fn longest_pause(&self) -> Duration {
        self.start_pause.max(self.switch_pause).max(self.step_pause)
    }
}

#[derive(Default)]
struct Progress {
    phase: AtomicU8,
    done: AtomicU64,
    total: AtomicU64,
}

impl Progress {
    fn enter(&self, phase: GcPhase, total: u64) {
        crate::telemetry::gc_phase(phase);
        self.done.store(0, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
        self.phase.store(phase as u8, Ordering::Release);
    }

    fn phase(&self) -> GcPhase {
        match self.phase.load(Ordering::Acquire) {
            0 => GcPhase::Scanning,
            1 => GcPhase::Tracing,
            2 => GcPhase::CatchingUp,
            _ => GcPhase::Relocating,
        }
    }
}

struct Job {
    generation: u64,
    /// Commits below this offset (not pinned at the start) are collected.
    keep_offset: u64,
    started: Instant,
    progress: Arc<Progress>,
    handle: JoinHandle<Result<GcReport>>,
}

/// The collector's state in a store.
#[derive(Default)]
pub(crate) struct GcState {
    job: Mutex<Option<Job>>,
    /// Commits kept by every collection, with a count of pins.
    pinned: Mutex<HashMap<Hash, usize>>,
    /// True from a collection's start to its liveness switch: commits are
    /// then also noted in `since_start`.
    pub(crate) running: AtomicBool,
    /// Commits made while a job runs: the switch adds them to the new index.
    pub(crate) since_start: Mutex<Vec<(Hash, u64)>>,
    /// The error of a collection that failed in the background.
    last_error: Mutex<Option<String>>,
    /// Asks the worker to stop (the store is closing).
    cancel: AtomicBool,
    /// The most recent commits, oldest first, for `Retention::KeepLast`.
    recent: Mutex<std::collections::VecDeque<Hash>>,
    /// Commits since the retention policy last started a collection.
    since_retention: AtomicU64,
    /// Reports of finished collections not yet taken (the last `MAX_REPORTS`).
    finished: Mutex<Vec<GcReport>>,
    /// The generation of the running collection the store last said was
    /// overdue (a later one was due while it ran).
    overdue_noted: AtomicU64,
    /// Bytes of the live records below the boundary that the last whole
    /// trace found (`None`: none since the store opened).
    whole_live_bytes: Mutex<Option<u64>>,
}

impl Repo {
    /// Pins `commit`; refused (`GcRunning`) while a running collection
    /// would collect it, since its roots were fixed when it started.
    pub(crate) fn pin(&self, commit: &Hash) -> Result<()> {
        if !self.live_commit(commit)? {
            return Err(Error::UnknownCommit(*commit));
        }
        let offset = self.read.index.read().get(commit).copied().unwrap_or(0);
        let collecting =
            self.write.gc.job.lock().as_ref().is_some_and(|job| !job.handle.is_finished() && offset < job.keep_offset);
        if collecting && !self.read.options.retention.archive() {
            return Err(Error::GcRunning);
        }
        *self.write.gc.pinned.lock().entry(*commit).or_insert(0) += 1;
        Ok(())
    }

    pub(crate) fn unpin(&self, commit: &Hash) {
        let mut pinned = self.write.gc.pinned.lock();
        if let Some(count) = pinned.get_mut(commit) {
            *count -= 1;
            if *count == 0 {
                pinned.remove(commit);
            }
        }
    }

    /// True if `commit` is in the store and not collected.
    fn live_commit(&self, commit: &Hash) -> Result<bool> {
        match self.read.index.read().get(commit) {
            None => Ok(false),
            Some(&index_file::COLLECTED) => Err(Error::CollectedCommit(*commit)),
            Some(_) => Ok(true),
        }
    }

    /// The running collection's progress; `None` once it has finished
    /// (its outcome waits for `wait_gc` or `take_gc_reports`).
    pub(crate) fn gc_status(&self) -> Option<GcStatus> {
        let job = self.write.gc.job.lock();
        job.as_ref().filter(|job| !job.handle.is_finished()).map(|job| GcStatus {
            generation: job.generation,
            phase: job.progress.phase(),
            done: job.progress.done.load(Ordering::Relaxed),
            total: job.progress.total.load(Ordering::Relaxed),
            elapsed: job.started.elapsed(),
        })
    }

    /// Starts a collection keeping `keep_from`, the commits after it and
    /// the pinned commits.
    pub(crate) fn start_gc(self: &Arc<Self>, keep_from: &Hash) -> Result<()> {
        self.write.check_writable()?;
        // Locks in the writer's order: the writer, then the job.
        let started = Instant::now();
        let writer = self.write.writer.as_ref().expect("checked writable").lock();
        let mut job = self.write.gc.job.lock();
        // A finished job is reaped under the same lock the next one is
        // installed under, so `wait_gc` never sees an empty slot between
        // the two while its report is not yet among the finished ones.
        if job.as_ref().is_some_and(|j| j.handle.is_finished()) {
            let finished = job.take().expect("checked");
            if let Err(e) = self.settle_job(finished) {
                *self.write.gc.last_error.lock() = Some(e.to_string());
            }
        }
        if job.is_some() {
            return Err(Error::GcRunning);
        }
        let keep_offset = match self.read.index.read().get(keep_from) {
            None => return Err(Error::UnknownCommit(*keep_from)),
            Some(&index_file::COLLECTED) => return Err(Error::CollectedCommit(*keep_from)),
            Some(&offset) => offset,
        };
        // From here on, commits are noted for the new index; those before
        // are all below `scan_end`.
        let generation = writer.control.generation.checked_add(1).ok_or(Error::Invalid("generation overflow".into()))?;
        self.write.gc.since_start.lock().clear();
        self.write.gc.running.store(true, Ordering::Release);
        let scan_end = self.read.pack.end();
        // The next batch starts a chunk: the next collection's boundary
        // can fall there.
        self.read.pack.split();
        // Blobs staged from now on lie past `scan_end`.
        let oldest_staged = self.write.staged.oldest().unwrap_or(u64::MAX);
        drop(writer);
        let start_pause = started.elapsed();
        // The chunk holding `keep_from`, or the oldest blob a tree staged
        // and no commit refers to yet (it cannot be traced), if older; a
        // commit kept below the first chunk (pinned by an earlier
        // collection) keeps the boundary where it is, and is a root.
        let first = self.read.pack.first_chunk_start();
        let keep_at = keep_offset.min(oldest_staged);
        let boundary = self.read.pack.chunk_bounds().iter().rev().find(|(start, _)| *start <= keep_at).map_or(first, |c| c.0);
        // Every earlier collection's boundary was at or below the blobs
        // staged then, and later ones lie past it: none is below `first`.
        assert!(boundary <= oldest_staged, "a collection's boundary is at or below every blob trees staged");
        let pinned: std::collections::HashSet<Hash> = self.write.gc.pinned.lock().keys().copied().collect();
        let progress = Arc::new(Progress::default());
        crate::telemetry::gc_started(generation, keep_offset, boundary);
        let repo = self.clone();
        let worker_progress = progress.clone();
        let handle = std::thread::Builder::new()
            .name("pando-gc".into())
            .spawn(move || {
                // This thread keeps the caller's priority: it holds the
                // writer lock for the switches. The long stages run on a
                // thread of lower priority that it waits for (`Work::aside`).
                // Kept: commits from `keep_from` on, and pinned ones (their
                // records are roots). Commits after `scan_end` are in
                // `since_start`; no other collection runs meanwhile.
                let archive = repo.read.options.retention.archive();
                let (mut entries, mut collected, mut roots) = (Vec::new(), Vec::new(), Vec::new());
                // A copy, so that the writer's index updates wait only for it.
                let mut snapshot: Vec<(Hash, u64)> = repo.read.index.read().iter().map(|(h, o)| (*h, *o)).collect();
                // In the order of the pack (collected commits last, by
                // hash), not of the map's hashing: the new index file is
                // then the same bytes for the same store, run after run.
                snapshot.sort_unstable_by_key(|&(hash, offset)| (offset, hash));
                for &(hash, offset) in &snapshot {
                    if offset != index_file::COLLECTED && offset >= scan_end {
                        continue;
                    }
                    let kept = offset >= keep_offset || pinned.contains(&hash);
                    if offset == index_file::COLLECTED || kept || archive {
                        // Archive mode keeps every commit: older ones are
                        // read from the cold files, not kept hot (no root).
                        entries.push((hash, offset));
                        if offset != index_file::COLLECTED && kept {
                            roots.push(offset);
                        }
                    } else {
                        entries.push((hash, index_file::COLLECTED));
                        collected.push(hash);
                    }
                }
                let mut work = Work {
                    repo: &repo,
                    generation,
                    boundary,
                    progress: &worker_progress,
                    started,
                    in_flight: Vec::new(),
                    report: GcReport { start_pause, ..GcReport::default() },
                };
                let result = work.run(scan_end, roots, entries, collected);
                repo.write.gc.running.store(false, Ordering::Release);
                match &result {
                    Ok(report) => crate::telemetry::gc_done(report),
                    Err(e) => crate::telemetry::gc_failed(e),
                }
                if result.is_err() && !repo.write.is_poisoned() {
                    work.remove_in_flight();
                }
                result
            })
            .map_err(|e| {
                self.write.gc.running.store(false, Ordering::Release);
                Error::io("pando-gc", "spawn thread")(e)
            })?;
        *job = Some(Job { generation, keep_offset, started, progress, handle });
        Ok(())
    }

    /// True if a collection starting over `current` (the layout below the
    /// first chunk, if any) traces every live record, false if only those
    /// at or after its boundary: the first since the store opened does
    /// (the records kept without some children are known only to the
    /// collection that dropped them), as does archive mode, and one after
    /// the older live records have grown past the share allowed over what
    /// the last whole trace found (`Options::gc_whole_trace_growth_percent`).
    fn trace_whole(&self, current: Option<&crate::pack::Collected>) -> bool {
        let growth = self.read.options.gc_whole_trace_growth_percent;
        let (Some(last), Some(current)) = (*self.write.gc.whole_live_bytes.lock(), current) else { return true };
        if growth == 0 || self.read.options.retention.archive() {
            return true;
        }
        current.live_bytes().saturating_mul(100) > last.max(1).saturating_mul(100u64.saturating_add(growth))
    }

    /// Waits for the running collection, if any, to finish, and returns its
    /// report (or its error).
    pub(crate) fn wait_gc(&self) -> Result<Option<GcReport>> {
        let Some(target) = self.write.gc.job.lock().as_ref().map(|job| job.generation) else {
            return self.write.gc.last_error.lock().take().map_or(Ok(None), |e| Err(Error::GcFailed(e)));
        };
        let pending =
            || self.write.gc.job.lock().as_ref().is_some_and(|job| job.generation == target && !job.handle.is_finished());
        while pending() {
            std::thread::sleep(Duration::from_millis(2));
        }
        if self.write.gc.job.lock().as_ref().is_some_and(|job| job.generation == target)
            && let Some(outcome) = self.reap()
        {
            return outcome.map(Some);
        }
        // Another caller took it (and may have started the next one).
        if let Some(report) = self.write.gc.finished.lock().iter().rev().find(|r| r.generation == target) {
            return Ok(Some(report.clone()));
        }
        self.write.gc.last_error.lock().take().map_or(Ok(None), |e| Err(Error::GcFailed(e)))
    }

    /// Takes a finished job, if any; its report joins the finished ones.
    fn reap(&self) -> Option<Result<GcReport>> {
        let job = {
            let mut job = self.write.gc.job.lock();
            if !job.as_ref().is_some_and(|j| j.handle.is_finished()) {
                return None;
            }
            job.take().expect("checked")
        };
        Some(self.settle_job(job))
    }

    /// The outcome of a finished job taken from its slot; a report joins
    /// the finished ones.
    fn settle_job(&self, job: Job) -> Result<GcReport> {
        let outcome = match job.handle.join() {
            Ok(outcome) => outcome,
            Err(_) => Err(Error::GcFailed("the collector thread panicked".into())),
        };
        if let Ok(report) = &outcome {
            let mut finished = self.write.gc.finished.lock();
            if finished.len() == MAX_REPORTS {
                finished.remove(0);
            }
            finished.push(report.clone());
        }
        outcome
    }

    /// Takes a finished job, keeping its error for `wait_gc`.
    fn reap_quietly(&self) {
        if let Some(Err(e)) = self.reap() {
            *self.write.gc.last_error.lock() = Some(e.to_string());
        }
    }

    /// Loads the most recent commits for the retention policy (at open).
    pub(crate) fn init_retention(&self) {
        let Some((commits, _)) = self.read.options.retention.keep_last() else { return };
        let mut live: Vec<(u64, Hash)> =
            self.read.index.read().iter().filter(|(_, o)| **o != index_file::COLLECTED).map(|(h, o)| (*o, *h)).collect();
        live.sort_unstable();
        let keep = live.len().saturating_sub(commits as usize);
        *self.write.gc.recent.lock() = live[keep..].iter().map(|(_, h)| *h).collect();
    }

    /// After a commit: notes it, and starts a collection when the
    /// retention policy says one is due (and none is running).
    pub(crate) fn apply_retention(self: &Arc<Self>, commit: Hash) -> Result<()> {
        let Some((commits, every)) = self.read.options.retention.keep_last() else { return Ok(()) };
        let (keep_from, since) = {
            let mut recent = self.write.gc.recent.lock();
            if recent.back() != Some(&commit) {
                recent.push_back(commit);
            }
            while recent.len() as u64 > commits.max(1) {
                recent.pop_front();
            }
            let since = self.write.gc.since_retention.fetch_add(1, Ordering::Relaxed) + 1;
            if since < every.max(1) || (recent.len() as u64) < commits {
                return Ok(());
            }
            (*recent.front().expect("not empty"), since)
        };
        let running = self.write.gc.job.lock().as_ref().filter(|j| !j.handle.is_finished()).map(|j| (j.generation, j.started));
        if let Some((generation, started)) = running {
            // Said once per running collection: the first time one is due
            // while it runs.
            if self.write.gc.overdue_noted.swap(generation, Ordering::Relaxed) != generation {
                crate::telemetry::gc_overdue(generation, started.elapsed(), every, commits);
            }
            if since.is_multiple_of(every.max(1)) {
                // Due while one runs: a chunk starts here all the same, so
                // that the next collection's boundary, a chunk's start, can
                // fall within `every` commits of the commit it keeps from.
                self.read.pack.split();
            }
            return Ok(());
        }
        self.write.gc.since_retention.store(0, Ordering::Relaxed);
        match self.start_gc(&keep_from) {
            Ok(()) | Err(Error::GcRunning) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Stops a running collection (the store is closing): it stops at the
    /// next check, and what it had not made durable is removed.
    pub(crate) fn cancel_gc(&self) {
        self.write.gc.cancel.store(true, Ordering::Release);
        if let Some(job) = self.write.gc.job.lock().take() {
            let _ = job.handle.join();
        }
        self.write.gc.cancel.store(false, Ordering::Release);
    }

    pub(crate) fn take_gc_reports(&self) -> Vec<GcReport> {
        self.reap_quietly();
        std::mem::take(&mut *self.write.gc.finished.lock())
    }

    fn check_cancel(&self) -> Result<()> {
        if self.write.gc.cancel.load(Ordering::Relaxed) {
            return Err(Error::GcFailed("cancelled: the store is closing".into()));
        }
        Ok(())
    }

    /// Writes `next` (a state derived from `writer.control`) to the control
    /// file and syncs it: the commit point of a collection step. A failure
    /// poisons the store, since the slot may or may not have reached the disk.
    fn write_control(&self, writer: &mut Writer, next: crate::format::control::Control) -> Result<()> {
        // One collection runs at a time, and each of its steps names its own generation.
        assert_eq!(next.generation, writer.control.generation + 1, "each collection step names the next generation");
        self.write.guard(writer.write_synced_control(next))
    }

    /// The writer lock, for a collection's section under it: never taken
    /// on a thread `lower_priority` lowered (see the invariants above).
    fn lock_writer(&self) -> parking_lot::MutexGuard<'_, Writer> {
        assert!(!LOWERED.get(), "the collector takes the writer lock only at the priority of the thread that started it");
        self.write.writer.as_ref().expect("a collection runs on a writable store").lock()
    }

    /// Removes the files a switch replaced and (archive mode) renames the
    /// chunks that become cold. Best effort: the switch is durable, and the
    /// next open finishes what is left.
    fn retire(&self, remove: &[String], rename: &[(String, String)]) {
        let (chunks, collected) = (self.read.pack.chunk_sizes(), self.read.pack.collected());
        let in_use = |name: &String| {
            chunks.iter().any(|(chunk, _)| chunk == name)
                || collected.as_ref().is_some_and(|c| c.files.values().any(|f| f.name == *name))
        };
        assert!(!remove.iter().any(in_use), "a collection step removes only files the installed layout no longer uses");
        for name in remove {
            let _ = self.read.storage.remove(name);
        }
        for (name, cold) in rename {
            let _ = self.read.storage.rename(name, cold);
        }
        let _ = self.read.storage.sync_dir();
    }
}

thread_local! {
    /// Whether `lower_priority` lowered this thread.
    static LOWERED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The collector's long stages yield the processor to the writer and its
/// helpers: on a machine with as many busy threads as cores, a collection
/// at the writer's priority takes half the core that the commit's hashing
/// helper, the sync thread and the caller's own threads would use. Only
/// for a thread that takes no lock the writer waits for (see the
/// invariants above).
fn lower_priority() {
    LOWERED.set(true);
    // On Linux the nice value is a thread's, and `None` names the calling
    // thread. Best effort: a collection at the writer's priority is slower
    // to leave room, not wrong.
    #[cfg(target_os = "linux")]
    let _ = rustix::process::setpriority_process(None, 19);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemStorage;
    use crate::options::{Options, Retention};
    use crate::store::Store;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    /// The collector's lowering names its own thread only: the writer's
    /// thread keeps its priority.
    #[cfg(target_os = "linux")]
    #[test]
    fn lower_priority_is_the_calling_threads() {
        let before = rustix::process::getpriority_process(None).expect("own priority");
        let lowered = std::thread::spawn(|| {
            lower_priority();
            rustix::process::getpriority_process(None).expect("own priority")
        });
        assert_eq!(lowered.join().expect("no panic"), 19);
        assert_eq!(rustix::process::getpriority_process(None).expect("own priority"), before);
    }

    /// A collection due while the last one still runs is not started, and
    /// the store says so once for that collection: a warning, and the
    /// overdue counter.
    #[test]
    fn an_overdue_collection_is_said_once() {
        let options = Options { retention: Retention::KeepLast { commits: 2, every: 1 }, ..Options::default() };
        let store = Store::open_storage(Arc::new(MemStorage::new()), options).unwrap();
        let repo = &store.repo;
        // A running collection: a thread that ends when told to.
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            let _ = wait.recv();
            Ok(GcReport::default())
        });
        let progress = Arc::new(Progress::default());
        *repo.write.gc.job.lock() = Some(Job { generation: 7, keep_offset: 0, started: Instant::now(), progress, handle });

        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || WriteTo(sink.clone())).finish();
        let mut tree = store.empty_tree();
        let mut parents = Vec::new();
        metrics::with_local_recorder(&recorder, || {
            tracing::subscriber::with_default(subscriber, || {
                for block in 0..6u32 {
                    tree.add_mut(&["block"], &block.to_le_bytes()).unwrap();
                    parents = vec![
                        store
                            .commit(&tree, crate::CommitMeta { parents: &parents, date: 0, author: "Tezos", message: "block" })
                            .unwrap(),
                    ];
                }
            })
        });
        let overdue: Vec<u64> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| key.key().name() == crate::telemetry::GC_OVERDUE)
            .map(|(.., value)| match value {
                DebugValue::Counter(n) => n,
                other => panic!("a counter, not {other:?}"),
            })
            .collect();
        assert_eq!(overdue, [1], "counted once for the running collection");
        let logs = String::from_utf8(logs.lock().clone()).unwrap();
        assert_eq!(logs.matches("collections are behind the writer").count(), 1, "{logs}");
        assert!(logs.contains("WARN") && logs.contains("running_generation=7"), "{logs}");
        assert!(repo.write.gc.job.lock().as_ref().is_some_and(|job| job.generation == 7), "no other collection was started");
        release.send(()).unwrap();
        store.wait_gc().unwrap();
    }

    #[derive(Clone)]
    struct WriteTo(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for WriteTo {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
