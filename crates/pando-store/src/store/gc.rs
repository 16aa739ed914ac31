//! Online garbage collection: keep the commits from a chosen one onwards
//! (and pinned ones), discard the rest, while the writer keeps committing
//! and readers keep reading.
//!
//! A collection's *boundary* is the start of the chunk holding the oldest
//! kept commit; records at or after it stay where they are. In a background
//! thread, the worker finds the records below the boundary that are still
//! reachable (`gc_plan`), copies them densely into `prefix-<g+1>.pack`,
//! writes `mapping-<g+1>` (where each now lies) and `index-<g+1>` (collected
//! commits marked as such), and syncs them. Records the writer adds
//! meanwhile are scanned in catch-up rounds, so anything they refer to
//! below the boundary is copied too. The switch, made by the writer between
//! two commits, is one durable step: a control slot naming generation
//! `g+1` and the boundary. Only then are the old chunks removed.
//!
//! Invariants:
//! - Logical offsets never change: a live record below the boundary is
//!   found through the mapping, every pointer in the store stays valid.
//! - Until the switch's control write is durable, the previous generation
//!   is the store; files of an unfinished collection are removed on open.
//! - After the switch, no commit may refer to a record that is gone: the
//!   tree is checked before its batch is built (`commit::check_refs`).
//! - A reader that located a record before the switch reads it from its
//!   open file handle; old files disappear from the directory only.
//! - Crash points: `gc-copied`, `gc-index-written`, `gc-switched`,
//!   `gc-removed` (see the kill test).

use pando_core::Hash;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Repo, Writer, index_file, open};
use crate::crash_point;
use crate::error::{Error, Result};
use crate::format::mapping::{self, Run};
use crate::gc_plan;
use crate::io::File;
use crate::pack::{Prefix, prefix_name};

/// Catch-up rounds stop once fewer new bytes than this remain to scan; the
/// writer scans the rest during the switch.
const CATCH_UP_BYTES: u64 = 1 << 20;
/// At most this many catch-up rounds (a writer faster than the collector
/// would keep it catching up forever): the switch scans what remains.
const CATCH_UP_ROUNDS: usize = 16;

/// Reports of finished collections kept for `take_gc_reports`, at most.
const MAX_REPORTS: usize = 64;

/// What a collection is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcPhase {
    /// Reading the records at and after the boundary for references below it.
    Scanning,
    /// Following references below the boundary.
    Tracing,
    /// Copying live records into the new prefix file.
    Copying,
    /// Scanning what the writer added meanwhile.
    CatchingUp,
    /// Done; waiting for the writer to switch to the new generation.
    Ready,
}

/// The progress of a running collection.
#[derive(Clone, Debug)]
pub struct GcStatus {
    pub generation: u64,
    pub phase: GcPhase,
    /// Bytes of the current phase done, and to do (0 when unknown).
    pub done: u64,
    pub total: u64,
    pub elapsed: Duration,
}

/// What a finished collection did.
#[derive(Clone, Debug, Default)]
pub struct GcReport {
    pub generation: u64,
    /// Records below this offset were collected or copied.
    pub boundary: u64,
    /// Runs of contiguous live records copied.
    pub live_runs: u64,
    /// Bytes copied into the new prefix.
    pub live_bytes: u64,
    /// Pack bytes before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub collected_commits: u64,
    pub duration: Duration,
    /// How long the writer was held: to start the collection, and by the switch.
    pub start_pause: Duration,
    pub switch_pause: Duration,
}

#[derive(Default)]
struct Progress {
    phase: AtomicU8,
    done: AtomicU64,
    total: AtomicU64,
}

impl Progress {
    fn enter(&self, phase: GcPhase, total: u64) {
        self.done.store(0, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
        self.phase.store(phase as u8, Ordering::Release);
    }

    fn phase(&self) -> GcPhase {
        match self.phase.load(Ordering::Acquire) {
            0 => GcPhase::Scanning,
            1 => GcPhase::Tracing,
            2 => GcPhase::Copying,
            3 => GcPhase::CatchingUp,
            _ => GcPhase::Ready,
        }
    }
}

/// A collection's work, ready for the switch.
struct Prepared {
    generation: u64,
    boundary: u64,
    prefix: Arc<dyn File>,
    prefix_len: u64,
    runs: Vec<Run>,
    /// Records before this offset have been scanned for references.
    scanned_end: u64,
    index: Arc<dyn File>,
    index_entries: u64,
    /// How many of the commits made since the start the worker already
    /// appended to the new index (the switch appends the rest).
    since_written: usize,
    /// Commits marked collected in the new index.
    collected: Vec<Hash>,
    /// True when runs were added after the mapping file was written.
    mapping_stale: bool,
    /// Copied records some of whose children were not needed (patch
    /// bases), with the mask of those children.
    masked: HashMap<u64, u32>,
    bytes_before: u64,
}

struct Job {
    generation: u64,
    started: Instant,
    start_pause: Duration,
    progress: Arc<Progress>,
    handle: JoinHandle<Result<Prepared>>,
}

/// The collector's state in a store.
#[derive(Default)]
pub(crate) struct GcState {
    job: Mutex<Option<Job>>,
    /// Commits kept by every collection, with a count of pins.
    pinned: Mutex<HashMap<Hash, usize>>,
    /// True while a job runs: commits are then also noted in `since_start`.
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
}

impl Repo {
    pub(crate) fn pin(&self, commit: &Hash) -> Result<()> {
        if !self.live_commit(commit)? {
            return Err(Error::UnknownCommit(*commit));
        }
        *self.gc.pinned.lock().entry(*commit).or_insert(0) += 1;
        Ok(())
    }

    pub(crate) fn unpin(&self, commit: &Hash) {
        let mut pinned = self.gc.pinned.lock();
        if let Some(count) = pinned.get_mut(commit) {
            *count -= 1;
            if *count == 0 {
                pinned.remove(commit);
            }
        }
    }

    /// True if `commit` is in the store and not collected.
    fn live_commit(&self, commit: &Hash) -> Result<bool> {
        match self.index.read().get(commit) {
            None => Ok(false),
            Some(&index_file::COLLECTED) => Err(Error::CollectedCommit(*commit)),
            Some(_) => Ok(true),
        }
    }

    pub(crate) fn gc_status(&self) -> Option<GcStatus> {
        let job = self.gc.job.lock();
        job.as_ref().map(|job| GcStatus {
            generation: job.generation,
            phase: if job.handle.is_finished() { GcPhase::Ready } else { job.progress.phase() },
            done: job.progress.done.load(Ordering::Relaxed),
            total: job.progress.total.load(Ordering::Relaxed),
            elapsed: job.started.elapsed(),
        })
    }

    /// Starts a collection keeping `keep_from`, the commits after it and
    /// the pinned commits.
    pub(crate) fn start_gc(self: &Arc<Self>, keep_from: &Hash) -> Result<()> {
        self.check_writable()?;
        // Locks in the writer's order: the writer, then the job.
        let started = Instant::now();
        let writer = self.writer.as_ref().expect("checked writable").lock();
        let mut job = self.gc.job.lock();
        if job.is_some() {
            return Err(Error::GcRunning);
        }
        let keep_offset = match self.index.read().get(keep_from) {
            None => return Err(Error::UnknownCommit(*keep_from)),
            Some(&index_file::COLLECTED) => return Err(Error::CollectedCommit(*keep_from)),
            Some(&offset) => offset,
        };
        // From here on, commits are noted for the new index; those before
        // are all below `scan_end`.
        let generation = writer.control.generation.checked_add(1).ok_or(Error::Invalid("generation overflow".into()))?;
        self.gc.since_start.lock().clear();
        self.gc.running.store(true, Ordering::Release);
        let scan_end = self.pack.end();
        drop(writer);
        // The chunk holding `keep_from`; a commit kept in the prefix (pinned
        // by an earlier collection) keeps the boundary where it is, and is a root.
        let first = self.pack.first_chunk_start();
        let boundary = self.pack.chunk_bounds().iter().rev().find(|(start, _)| *start <= keep_offset).map_or(first, |c| c.0);
        let pinned: std::collections::HashSet<Hash> = self.gc.pinned.lock().keys().copied().collect();
        let progress = Arc::new(Progress::default());
        let repo = self.clone();
        let worker_progress = progress.clone();
        let handle = std::thread::Builder::new()
            .name("pando-gc".into())
            .spawn(move || {
                // Kept: commits from `keep_from` on, and pinned ones (their
                // records are roots). Commits after `scan_end` are in
                // `since_start`; no switch can happen while this job runs.
                let archive = repo.options.retention.archive();
                let (mut entries, mut collected, mut roots) = (Vec::new(), Vec::new(), Vec::new());
                for (hash, &offset) in repo.index.read().iter() {
                    if offset != index_file::COLLECTED && offset >= scan_end {
                        continue;
                    }
                    // Archive mode keeps every commit: older ones are read from cold files.
                    if offset == index_file::COLLECTED || (!archive && offset < keep_offset && !pinned.contains(hash)) {
                        entries.push((*hash, index_file::COLLECTED));
                        if offset != index_file::COLLECTED {
                            collected.push(*hash);
                        }
                    } else {
                        entries.push((*hash, offset));
                        roots.push(offset);
                    }
                }
                let work = Work { repo: &repo, generation, boundary, progress: &worker_progress };
                work.run(scan_end, roots, entries, collected)
            })
            .map_err(|e| {
                self.gc.running.store(false, Ordering::Release);
                Error::io("pando-gc", "spawn thread")(e)
            })?;
        // On the caller's thread (the writer's, when the retention policy starts it).
        let start_pause = started.elapsed();
        *job = Some(Job { generation, started, start_pause, progress, handle });
        Ok(())
    }

    /// Waits for the running collection, if any, and switches to its
    /// generation.
    pub(crate) fn wait_gc(&self) -> Result<Option<GcReport>> {
        // The job stays in its slot until the switch, so no other
        // collection can start meanwhile.
        loop {
            match self.gc.job.lock().as_ref() {
                None => {
                    return match self.gc.last_error.lock().take() {
                        Some(e) => Err(Error::GcFailed(e)),
                        None => Ok(None),
                    };
                }
                Some(job) if job.handle.is_finished() => break,
                Some(_) => {}
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut writer = self.writer.as_ref().expect("a collection runs on a writable store").lock();
        match self.finish_job(&mut writer)? {
            Some(report) => Ok(Some(report)),
            // The writer switched first (at a commit): its report, or its error.
            None => match self.gc.last_error.lock().take() {
                Some(e) => Err(Error::GcFailed(e)),
                None => Ok(self.gc.finished.lock().last().cloned()),
            },
        }
    }

    /// Called by the writer before a commit: switches if a collection is ready.
    pub(crate) fn switch_if_ready(&self, writer: &mut Writer) -> Result<()> {
        // `running` is set exactly while a job exists: most commits stop here.
        if !self.gc.running.load(Ordering::Acquire) {
            return Ok(());
        }
        self.finish_job(writer).map(drop)
    }

    /// With the writer lock held: if the job is finished, takes it and
    /// switches to its generation. A failed (or panicked) collection leaves
    /// the store as it was: its files are removed and its error kept for
    /// `wait_gc`, and the commit that found it goes on.
    fn finish_job(&self, writer: &mut Writer) -> Result<Option<GcReport>> {
        let job = {
            let mut job = self.gc.job.lock();
            if !job.as_ref().is_some_and(|j| j.handle.is_finished()) {
                return Ok(None);
            }
            job.take().expect("checked")
        };
        let (started, start_pause, generation) = (job.started, job.start_pause, job.generation);
        let outcome = match job.handle.join() {
            Ok(Ok(prepared)) => self.switch(writer, prepared, started, start_pause),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::GcFailed("the collector thread panicked".into())),
        };
        match outcome {
            Ok(report) => Ok(Some(report)),
            Err(e) => {
                self.gc.running.store(false, Ordering::Release);
                // A failed switch poisoned the store; its control slot may
                // have reached the disk: the files stay, and the next open
                // keeps or removes them by what the control file says.
                if writer.control.generation < generation && !self.poisoned.load(Ordering::Acquire) {
                    self.remove_generation_files(generation);
                }
                *self.gc.last_error.lock() = Some(e.to_string());
                Ok(None)
            }
        }
    }

    /// Loads the most recent commits for the retention policy (at open).
    pub(crate) fn init_retention(&self) {
        let Some((commits, _)) = self.options.retention.keep_last() else { return };
        let mut live: Vec<(u64, Hash)> =
            self.index.read().iter().filter(|(_, o)| **o != index_file::COLLECTED).map(|(h, o)| (*o, *h)).collect();
        live.sort_unstable();
        let keep = live.len().saturating_sub(commits as usize);
        *self.gc.recent.lock() = live[keep..].iter().map(|(_, h)| *h).collect();
    }

    /// After a commit: notes it, and starts a collection when the
    /// retention policy says one is due (and none is running).
    pub(crate) fn apply_retention(self: &Arc<Self>, commit: Hash) -> Result<()> {
        let Some((commits, every)) = self.options.retention.keep_last() else { return Ok(()) };
        let keep_from = {
            let mut recent = self.gc.recent.lock();
            if recent.back() != Some(&commit) {
                recent.push_back(commit);
            }
            while recent.len() as u64 > commits.max(1) {
                recent.pop_front();
            }
            let due = self.gc.since_retention.fetch_add(1, Ordering::Relaxed) + 1 >= every.max(1);
            if !due || (recent.len() as u64) < commits || self.gc.job.lock().is_some() {
                return Ok(());
            }
            *recent.front().expect("not empty")
        };
        self.gc.since_retention.store(0, Ordering::Relaxed);
        match self.start_gc(&keep_from) {
            Ok(()) | Err(Error::GcRunning) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Stops a running collection without switching (the store is closing);
    /// its files are removed.
    pub(crate) fn cancel_gc(&self) {
        if self.gc.job.lock().as_ref().is_some_and(|j| j.handle.is_finished()) {
            if let Some(writer) = &self.writer {
                let _ = self.finish_job(&mut writer.lock());
            }
            return;
        }
        let Some(job) = self.gc.job.lock().take() else { return };
        self.gc.cancel.store(true, Ordering::Release);
        let _ = job.handle.join();
        self.gc.cancel.store(false, Ordering::Release);
        self.gc.running.store(false, Ordering::Release);
        self.remove_generation_files(job.generation);
    }

    fn remove_generation_files(&self, generation: u64) {
        for name in [prefix_name(generation), open::mapping_name(generation), index_file::name(generation)] {
            let _ = self.storage.remove(&name);
        }
        let _ = self.storage.sync_dir();
    }

    /// The switch: one durable control write names the new generation.
    fn switch(&self, writer: &mut Writer, mut prepared: Prepared, started: Instant, start_pause: Duration) -> Result<GcReport> {
        let pause = Instant::now();
        self.check_writable()?;
        if !self.pack.chunk_bounds().iter().any(|(start, _)| *start == prepared.boundary) {
            return Err(Error::GcFailed(format!("the boundary {} is not a chunk start", prepared.boundary)));
        }
        // Everything committed so far becomes durable first.
        self.flush_locked(writer, false)?;
        let end = self.pack.end();
        // The last catch-up: the records committed since the worker's last round.
        self.guard(catch_up(self, &mut prepared, end))?;
        if prepared.mapping_stale {
            let bytes = mapping::encode(&prepared.runs);
            let name = open::mapping_name(prepared.generation);
            let file = self.guard(self.storage.open(&name, true).map_err(Error::io(&name, "create")))?;
            self.guard(
                file.truncate(0)
                    .and_then(|()| file.write_all_at(&bytes, 0))
                    .and_then(|()| file.sync())
                    .map_err(Error::io(&name, "write")),
            )?;
        }
        // The new index: what the worker wrote, then the commits made since.
        let since: Vec<(Hash, u64)> = std::mem::take(&mut *self.gc.since_start.lock());
        self.gc.running.store(false, Ordering::Release);
        let since = &since[prepared.since_written.min(since.len())..];
        let index_name = index_file::name(prepared.generation);
        let bytes = index_file::encode(since);
        let at = prepared.index_entries * index_file::ENTRY_BYTES as u64;
        self.guard(prepared.index.write_all_at(&bytes, at).map_err(Error::io(&index_name, "write")))?;
        self.guard(prepared.index.sync().map_err(Error::io(&index_name, "sync")))?;
        crash_point::reach("gc-index-written");

        let mut next = writer.control.clone();
        next.seq += 1;
        next.generation = prepared.generation;
        next.first_chunk_start = prepared.boundary;
        next.flags = if self.options.retention.archive() { crate::format::control::FLAG_ARCHIVE } else { 0 };
        next.index_entries = prepared.index_entries + since.len() as u64;
        // The new index holds every commit: the checkpoint is complete.
        writer.unflushed_index.clear();
        self.guard(self.checkpoint_dict(writer, &mut next))?;
        next.checkpoint_end = next.durable_end;
        let control = next.encode();
        self.guard(writer.control_file.write_all_at(&control, next.slot_offset()).map_err(Error::io("control", "write")))?;
        self.guard(writer.control_file.sync().map_err(Error::io("control", "sync")))?;
        crash_point::reach("gc-switched");
        writer.control = next;
        writer.index_file = prepared.index.clone();

        // Publish: collected commits, then the new layout.
        {
            let mut index = self.index.write();
            for hash in &prepared.collected {
                index.insert(*hash, index_file::COLLECTED);
            }
        }
        self.collected_commits.fetch_add(prepared.collected.len() as u64, Ordering::Relaxed);
        let live_runs = prepared.runs.len() as u64;
        let live_bytes = prepared.prefix_len;
        let (replaced, to_cold) = self.pack.switch(
            Prefix {
                generation: prepared.generation,
                file: prepared.prefix,
                name: prefix_name(prepared.generation),
                runs: prepared.runs,
            },
            prepared.boundary,
            self.options.retention.archive(),
        );
        let switch_pause = pause.elapsed();
        // The old files leave the directory; readers holding them keep their handles.
        let mut old = replaced;
        if prepared.generation > 1 {
            old.push(open::mapping_name(prepared.generation - 1));
        }
        old.push(index_file::name(prepared.generation - 1));
        // Best effort: the switch is durable; what is left is removed (or
        // moved to cold files) at the next open.
        for name in &old {
            let _ = self.storage.remove(name);
        }
        for (name, cold) in &to_cold {
            let _ = self.storage.rename(name, cold);
        }
        let _ = self.storage.sync_dir();
        crash_point::reach("gc-removed");
        let report = GcReport {
            generation: prepared.generation,
            boundary: prepared.boundary,
            live_runs,
            live_bytes,
            bytes_before: prepared.bytes_before,
            bytes_after: self.pack.size_bytes(),
            collected_commits: prepared.collected.len() as u64,
            duration: started.elapsed(),
            start_pause,
            switch_pause,
        };
        let mut finished = self.gc.finished.lock();
        if finished.len() == MAX_REPORTS {
            finished.remove(0);
        }
        finished.push(report.clone());
        drop(finished);
        Ok(report)
    }

    pub(crate) fn take_gc_reports(&self) -> Vec<GcReport> {
        std::mem::take(&mut *self.gc.finished.lock())
    }

    fn check_cancel(&self) -> Result<()> {
        if self.gc.cancel.load(Ordering::Relaxed) {
            return Err(Error::GcFailed("cancelled: the store is closing".into()));
        }
        Ok(())
    }
}

/// Scans `prepared.scanned_end..end` for references below the boundary
/// that are not copied yet, and copies what they reach (the mapping file
/// is then stale).
fn catch_up(repo: &Repo, prepared: &mut Prepared, end: u64) -> Result<()> {
    let boundary = prepared.boundary;
    let mut roots = Vec::new();
    repo.pack.scan(prepared.scanned_end, end, &mut |offset, kind, payload| {
        gc_plan::references_below(boundary, offset, kind, payload, &mut roots)
    })?;
    prepared.scanned_end = end;
    let (runs, masked) = (&prepared.runs, &prepared.masked);
    let copied = |offset: u64| mapping::find(runs, offset).is_some();
    let skip = |offset: u64| copied(offset) && !masked.contains_key(&offset);
    let found = gc_plan::live_records(boundary, roots, &skip, &copied, &mut |o| repo.pack.read_record_sized(o))?;
    note_masks(&mut prepared.masked, &found.masks);
    let live = found.records;
    if live.is_empty() {
        return Ok(());
    }
    let new_runs = gc_plan::runs(&live, prepared.prefix_len, &chunk_starts(repo));
    let name = prefix_name(prepared.generation);
    copy_runs(repo, &*prepared.prefix, &name, &new_runs, &Progress::default())?;
    prepared.prefix.sync().map_err(Error::io(&name, "sync"))?;
    prepared.prefix_len += live.iter().map(|l| l.1).sum::<u64>();
    prepared.runs.extend(new_runs);
    prepared.runs.sort_unstable_by_key(|r| r.old);
    prepared.mapping_stale = true;
    Ok(())
}

/// Records the masks a traversal visited copied records with.
fn note_masks(masked: &mut HashMap<u64, u32>, visits: &[(u64, u32)]) {
    for &(offset, mask) in visits {
        if mask == 0 {
            masked.remove(&offset);
        } else {
            *masked.entry(offset).or_insert(mask) &= mask;
        }
    }
}

fn chunk_starts(repo: &Repo) -> Vec<u64> {
    repo.pack.chunk_bounds().iter().map(|c| c.0).collect()
}

/// Copies each run's bytes from the pack into the prefix file.
fn copy_runs(repo: &Repo, prefix: &dyn File, name: &str, runs: &[Run], progress: &Progress) -> Result<()> {
    let mut buf = Vec::new();
    for run in runs {
        let mut done = 0;
        while done < run.len {
            let n = (run.len - done).min(8 << 20);
            buf.resize(n as usize, 0);
            repo.check_cancel()?;
            repo.pack.read_raw(run.old + done, &mut buf)?;
            prefix.write_all_at(&buf, run.new + done).map_err(Error::io(name, "write"))?;
            done += n;
            progress.done.fetch_add(n, Ordering::Relaxed);
        }
    }
    Ok(())
}

/// The worker's side of a collection.
struct Work<'a> {
    repo: &'a Repo,
    generation: u64,
    boundary: u64,
    progress: &'a Progress,
}

impl Work<'_> {
    fn create(&self, name: &str) -> Result<Arc<dyn File>> {
        let file = self.repo.storage.open(name, true).map_err(Error::io(name, "create"))?;
        file.truncate(0).map_err(Error::io(name, "truncate"))?;
        Ok(file)
    }

    fn run(&self, scan_end: u64, roots: Vec<u64>, entries: Vec<(Hash, u64)>, collected: Vec<Hash>) -> Result<Prepared> {
        let (repo, boundary) = (self.repo, self.boundary);
        let bytes_before = repo.pack.size_bytes();
        // 1. References into the region below the boundary, from the records
        //    kept in place and from the kept commits below it.
        self.progress.enter(GcPhase::Scanning, scan_end - boundary);
        let mut pending: Vec<(u64, u32)> = roots.into_iter().filter(|&o| o < boundary).map(|o| (o, 0)).collect();
        repo.pack.scan(boundary, scan_end, &mut |offset, kind, payload| {
            self.progress.done.store(offset - boundary, Ordering::Relaxed);
            repo.check_cancel()?;
            gc_plan::references_below(boundary, offset, kind, payload, &mut pending)
        })?;
        // 2. The live records below the boundary.
        self.progress.enter(GcPhase::Tracing, 0);
        let progress = self.progress;
        let found = gc_plan::live_records(boundary, pending, &|_| false, &|_| false, &mut |offset| {
            progress.done.fetch_add(1, Ordering::Relaxed);
            repo.check_cancel()?;
            repo.pack.read_record_sized(offset)
        })?;
        let mut masked = HashMap::new();
        note_masks(&mut masked, &found.masks);
        let live = found.records;
        // 3. Copy them; write the mapping and the new index.
        let runs = gc_plan::runs(&live, 0, &chunk_starts(repo));
        let prefix_len: u64 = live.iter().map(|l| l.1).sum();
        drop(live);
        self.progress.enter(GcPhase::Copying, prefix_len);
        let name = prefix_name(self.generation);
        let prefix = self.create(&name)?;
        copy_runs(repo, &*prefix, &name, &runs, self.progress)?;
        prefix.sync().map_err(Error::io(&name, "sync"))?;
        let mapping_name = open::mapping_name(self.generation);
        let mapping = self.create(&mapping_name)?;
        mapping.write_all_at(&mapping::encode(&runs), 0).map_err(Error::io(&mapping_name, "write"))?;
        mapping.sync().map_err(Error::io(&mapping_name, "sync"))?;
        let index_name = index_file::name(self.generation);
        let index = self.create(&index_name)?;
        index.write_all_at(&index_file::encode(&entries), 0).map_err(Error::io(&index_name, "write"))?;
        index.sync().map_err(Error::io(&index_name, "sync"))?;
        repo.storage.sync_dir().map_err(Error::io(repo.storage.describe(), "sync directory"))?;
        crash_point::reach("gc-copied");
        let mut prepared = Prepared {
            generation: self.generation,
            boundary,
            prefix,
            prefix_len,
            runs,
            scanned_end: scan_end,
            index,
            index_entries: entries.len() as u64,
            since_written: 0,
            collected,
            mapping_stale: false,
            masked,
            bytes_before,
        };
        // 4. Catch up with the writer until little is left for the switch.
        self.progress.enter(GcPhase::CatchingUp, 0);
        for _ in 0..CATCH_UP_ROUNDS {
            let end = repo.pack.end();
            if end - prepared.scanned_end < CATCH_UP_BYTES {
                break;
            }
            repo.check_cancel()?;
            catch_up(repo, &mut prepared, end)?;
        }
        // The commits made so far go into the new index now, off the writer's path.
        let since: Vec<(Hash, u64)> = self.repo.gc.since_start.lock().clone();
        let at = prepared.index_entries * index_file::ENTRY_BYTES as u64;
        prepared.index.write_all_at(&index_file::encode(&since), at).map_err(Error::io(&index_name, "write"))?;
        prepared.index.sync().map_err(Error::io(&index_name, "sync"))?;
        prepared.index_entries += since.len() as u64;
        prepared.since_written = since.len();
        if prepared.mapping_stale {
            mapping.truncate(0).map_err(Error::io(&mapping_name, "truncate"))?;
            mapping.write_all_at(&mapping::encode(&prepared.runs), 0).map_err(Error::io(&mapping_name, "write"))?;
            mapping.sync().map_err(Error::io(&mapping_name, "sync"))?;
            prepared.mapping_stale = false;
        }
        self.progress.enter(GcPhase::Ready, 0);
        Ok(prepared)
    }
}
