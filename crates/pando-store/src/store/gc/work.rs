//! The collector thread's work: the liveness stage, its switch, and the
//! relocation steps (see the parent module for the design and invariants).

use foldhash::HashMap;
use pando_core::Hash;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::{GcPhase, GcReport, Progress};
use crate::crash_point;
use crate::error::{Error, Result};
use crate::format::mapping::{self, IN_CHUNK, Run, RunIndex};
use crate::format::record::RecordKind;
use crate::gc_plan;
use crate::io::File;
use crate::pack::window::Window;
use crate::pack::{Layout, PackFile, Resolved, segment_name};
use crate::store::{Repo, index_file};

/// Catch-up rounds stop once fewer new bytes than this remain to scan; the
/// liveness switch scans the rest.
const CATCH_UP_BYTES: u64 = 1 << 20;
/// At most this many catch-up rounds (a writer faster than the collector
/// would keep it catching up forever): the switch scans what remains.
const CATCH_UP_ROUNDS: usize = 16;
/// The switch lets go of the writer lock and catches up again at most this
/// many times (the writer wrote much since the last round, or the last
/// catch-up found more live records); then it scans what remains under it.
const MAX_SWITCH_ATTEMPTS: usize = 8;

/// A collection's liveness stage, ready for its switch.
struct Prepared {
    generation: u64,
    boundary: u64,
    /// The records below this offset (the current layout's boundary, or 0
    /// for a whole trace) are kept as they are, not traced: the current
    /// layout's runs, with the records it holds without some children
    /// (`Pack::holds_whole`). A record written since needs only what they
    /// hold: it refers to records held when it was written, and it needs a
    /// child of one held without some only if a version live at that
    /// collection needed it (a commit refuses a pointer straight to such a
    /// record). What they hold that is no longer live stays until a whole
    /// trace.
    traced_from: u64,
    /// The live records below the boundary, where they lie now.
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
    /// Live records some of whose children were not needed (patch bases),
    /// with the mask of those children.
    masked: HashMap<u64, u32>,
}

/// Scans `prepared.scanned_end..end` for references below the boundary to
/// records not yet known live, and adds what they reach to the runs (the
/// mapping file is then stale).
fn catch_up(repo: &Repo, prepared: &mut Prepared, end: u64) -> Result<()> {
    let boundary = prepared.boundary;
    assert!(end >= prepared.scanned_end, "catch-up scans forward from what was scanned");
    let mut roots = Vec::new();
    repo.read.pack.scan(prepared.scanned_end, end, &mut |offset, kind, payload| {
        gc_plan::references_in(prepared.traced_from..boundary, offset, kind, payload, &mut roots)
    })?;
    prepared.scanned_end = end;
    let (runs, masked) = (&prepared.runs, &prepared.masked);
    let index = RunIndex::new(runs);
    let known = |offset: u64| index.find(runs, offset).is_some();
    // Records below `traced_from` are in the runs and never masked here:
    // skipped like every record known whole.
    let skip = |offset: u64| known(offset) && !masked.contains_key(&offset);
    let mut window = Window::default();
    let found =
        gc_plan::live_records(boundary, roots, &skip, &known, &mut |offset, payload| read(&mut window, repo, offset, payload))?;
    note_masks(&mut prepared.masked, &found.masks);
    if found.ranges.is_empty() {
        return Ok(());
    }
    let placed = gc_plan::place(&found.ranges, &mut |o| repo.read.pack.whereabouts(o))?;
    prepared.runs = gc_plan::merge(std::mem::take(&mut prepared.runs), placed);
    prepared.mapping_stale = true;
    Ok(())
}

/// Catch-up rounds until less than `CATCH_UP_BYTES` remain to scan, at
/// most `CATCH_UP_ROUNDS` of them (a writer faster than the collector
/// would keep it catching up forever).
fn catch_up_rounds(repo: &Repo, prepared: &mut Prepared) -> Result<()> {
    for _ in 0..CATCH_UP_ROUNDS {
        let end = repo.read.pack.end();
        if end - prepared.scanned_end < CATCH_UP_BYTES {
            break;
        }
        repo.check_cancel()?;
        catch_up(repo, prepared, end)?;
    }
    Ok(())
}

/// The commits made since the collection started that the new index does
/// not hold yet (`since_start` only grows while a collection runs: the
/// index holds its first `since_written`).
fn unwritten_since(repo: &Repo, prepared: &Prepared) -> Vec<(Hash, u64)> {
    let since = repo.write.gc.since_start.lock();
    assert!(prepared.since_written <= since.len(), "the commits noted since a collection started only grow while it runs");
    since[prepared.since_written..].to_vec()
}

/// Appends `tail`, the next commits of `since_start`, to the new index
/// (unsynced); returns whether there were any.
fn append_since(prepared: &mut Prepared, tail: &[(Hash, u64)]) -> Result<bool> {
    if tail.is_empty() {
        return Ok(false);
    }
    let at = prepared.index_entries * index_file::ENTRY_BYTES as u64;
    prepared
        .index
        .write_all_at(&index_file::encode(tail), at)
        .map_err(Error::io(index_file::name(prepared.generation), "write"))?;
    prepared.index_entries += tail.len() as u64;
    prepared.since_written += tail.len();
    Ok(true)
}

fn sync_index(prepared: &Prepared) -> Result<()> {
    prepared.index.sync().map_err(Error::io(index_file::name(prepared.generation), "sync"))
}

/// Reads the record at `offset` through `window` (the trace visits records
/// in descending offset order, so one read serves many), its payload into
/// `payload`; a blob's is not copied: it refers to nothing.
fn read(window: &mut Window, repo: &Repo, offset: u64, payload: &mut Vec<u8>) -> Result<(RecordKind, u64)> {
    let found = window.read(&repo.read.pack, offset).map_err(|fault| fault.into_error(offset))?;
    payload.clear();
    if found.kind != RecordKind::Blob {
        payload.extend_from_slice(window.payload(&found));
    }
    Ok((found.kind, found.total))
}

/// Records the masks a traversal visited live records with.
fn note_masks(masked: &mut HashMap<u64, u32>, visits: &[(u64, u32)]) {
    for &(offset, mask) in visits {
        if mask == 0 {
            masked.remove(&offset);
        } else {
            *masked.entry(offset).or_insert(mask) &= mask;
        }
    }
}

/// The worker's side of a collection.
pub(super) struct Work<'a> {
    pub(super) repo: &'a Repo,
    pub(super) generation: u64,
    pub(super) boundary: u64,
    pub(super) progress: &'a Progress,
    pub(super) started: Instant,
    /// Files written for a step not yet durable: removed if the collection fails.
    pub(super) in_flight: Vec<String>,
    pub(super) report: GcReport,
}

impl Work<'_> {
    /// Removes the files of a step that did not become durable: the store
    /// is still the last durable step's.
    pub(super) fn remove_in_flight(&mut self) {
        for name in self.in_flight.drain(..) {
            let _ = self.repo.read.storage.remove(&name);
        }
        let _ = self.repo.read.storage.sync_dir();
    }

    fn create(&mut self, name: &str) -> Result<Arc<dyn File>> {
        self.in_flight.push(name.to_string());
        let file = self.repo.read.storage.open(name, true).map_err(Error::io(name, "create"))?;
        file.truncate(0).map_err(Error::io(name, "truncate"))?;
        Ok(file)
    }

    /// Writes `bytes` as the whole of `file` and syncs it.
    fn write_whole(file: &dyn File, name: &str, bytes: &[u8]) -> Result<()> {
        file.truncate(0).and_then(|()| file.write_all_at(bytes, 0)).and_then(|()| file.sync()).map_err(Error::io(name, "write"))
    }

    pub(super) fn run(
        &mut self,
        scan_end: u64,
        roots: Vec<u64>,
        entries: Vec<(Hash, u64)>,
        collected: Vec<Hash>,
    ) -> Result<GcReport> {
        self.report.bytes_before = self.repo.read.pack.size_bytes();
        let mut prepared = self.aside(move |work| work.find_live(scan_end, roots, entries, collected))?;
        self.write_plan(&mut prepared)?;
        self.switch(prepared)?;
        // The collection has taken effect: a failed relocation step (or a
        // cancel at close) leaves the store at the previous step, and the
        // report says so.
        if let Err(e) = self.relocate() {
            if self.repo.write.is_poisoned() {
                return Err(e);
            }
            self.remove_in_flight();
            self.report.relocation_error = Some(e.to_string());
        }
        let report = &mut self.report;
        report.bytes_after = self.repo.read.pack.size_bytes();
        report.peak_bytes = report.peak_bytes.max(report.bytes_before).max(report.bytes_after);
        report.duration = self.started.elapsed();
        Ok(std::mem::take(report))
    }

    /// Runs `stage` on a thread of the lowest priority (unless the options
    /// say otherwise) and waits for it. Such a stage takes no lock the
    /// writer waits for, beyond a lookup's: the writer never waits for a
    /// thread the machine's other work can starve.
    fn aside<T: Send>(&mut self, stage: impl FnOnce(&mut Self) -> Result<T> + Send) -> Result<T> {
        if !self.repo.read.options.gc_low_priority {
            return stage(self);
        }
        std::thread::scope(|scope| {
            let worker = std::thread::Builder::new()
                .name("pando-gc-work".into())
                .spawn_scoped(scope, || {
                    super::lower_priority();
                    stage(self)
                })
                .map_err(Error::io("pando-gc-work", "spawn thread"))?;
            // Joined here, so a panic is this collection's error, not the scope's.
            worker.join().unwrap_or_else(|_| Err(Error::GcFailed("the collector's worker thread panicked".into())))
        })
    }

    /// Stage 1 up to the switch (a low-priority stage): the live records
    /// below the boundary and where they lie, the new index's collected
    /// and kept commits, catch-up rounds.
    fn find_live(&mut self, scan_end: u64, roots: Vec<u64>, entries: Vec<(Hash, u64)>, collected: Vec<Hash>) -> Result<Prepared> {
        let (repo, boundary) = (self.repo, self.boundary);
        // The layout below the first chunk: none is installed until this
        // collection's switch.
        let current = repo.read.pack.collected();
        let traced_from = if repo.trace_whole(current.as_deref()) { 0 } else { repo.read.pack.first_chunk_start() };
        // Else the records between them would be neither kept nor traced.
        assert!(traced_from <= boundary, "a collection traces from at or below its boundary");
        // 1. References into the region traced, from the records kept in
        //    place and from the kept commits below the boundary.
        self.progress.enter(GcPhase::Scanning, scan_end - boundary);
        let mut pending: Vec<(u64, u32)> = roots.into_iter().filter(|&o| o < boundary).map(|o| (o, 0)).collect();
        let progress = self.progress;
        repo.read.pack.scan(boundary, scan_end, &mut |offset, kind, payload| {
            progress.done.store(offset - boundary, Ordering::Relaxed);
            repo.check_cancel()?;
            gc_plan::references_in(traced_from..boundary, offset, kind, payload, &mut pending)
        })?;
        // 2. The live records below the boundary, where they lie now.
        self.progress.enter(GcPhase::Tracing, 0);
        let mut window = Window::default();
        let found = gc_plan::live_records(boundary, pending, &|o| o < traced_from, &|_| false, &mut |offset, payload| {
            progress.done.fetch_add(1, Ordering::Relaxed);
            repo.check_cancel()?;
            read(&mut window, repo, offset, payload)
        })?;
        let mut masked = HashMap::default();
        note_masks(&mut masked, &found.masks);
        let placed = gc_plan::place(&found.ranges, &mut |o| repo.read.pack.whereabouts(o))?;
        drop(found);
        // What an earlier collection found live below `traced_from`, then
        // what this one found above it.
        let runs = match current {
            Some(current) if traced_from > 0 => gc_plan::concat(&current.runs, placed),
            _ => placed,
        };
        // 3. The new index.
        let index_name = index_file::name(self.generation);
        let index = self.create(&index_name)?;
        index.write_all_at(&index_file::encode(&entries), 0).map_err(Error::io(&index_name, "write"))?;
        let mut prepared = Prepared {
            generation: self.generation,
            boundary,
            traced_from,
            runs,
            scanned_end: scan_end,
            index,
            index_entries: entries.len() as u64,
            since_written: 0,
            collected,
            mapping_stale: true,
            masked,
        };
        // 4. Catch up with the writer until little is left for the switch.
        self.progress.enter(GcPhase::CatchingUp, 0);
        catch_up_rounds(repo, &mut prepared)?;
        Ok(prepared)
    }

    /// Makes the plan durable before the switch, off the writer's path but
    /// at the collection's own priority (it takes the lock the writer
    /// notes new commits under): the commits made so far join the new
    /// index, and the mapping of the runs is written.
    fn write_plan(&mut self, prepared: &mut Prepared) -> Result<()> {
        let repo = self.repo;
        let tail = unwritten_since(repo, prepared);
        append_since(prepared, &tail)?;
        // With the entries `find_live` wrote, whether or not a commit came
        // since (the fault test's collection of a quiet store).
        sync_index(prepared)?;
        let mapping_name = mapping::file_name(self.generation);
        let file = self.create(&mapping_name)?;
        Self::write_whole(&*file, &mapping_name, &mapping::encode(&prepared.runs))?;
        prepared.mapping_stale = false;
        repo.read.storage.sync_dir().map_err(Error::io(repo.read.storage.describe(), "sync directory"))?;
        crash_point::reach("gc-planned");
        Ok(())
    }

    /// The liveness switch, under the writer lock: the last catch-up, then
    /// one durable control write names the new generation, its index and
    /// the boundary.
    fn switch(&mut self, mut prepared: Prepared) -> Result<()> {
        let repo = self.repo;
        let archive = repo.read.options.retention.archive();
        let (generation, boundary) = (prepared.generation, prepared.boundary);
        let layout = |runs: Vec<Run>| Layout { generation, runs, new_files: Vec::new(), boundary, archive };
        // Every run's file is found before the commit point, and (the
        // usual case) outside the writer lock: the runs are only copied
        // again if the last catch-up adds some.
        let mut install = repo.read.pack.resolve(layout(prepared.runs.clone()))?;
        let mut attempts = 0;
        let (mut writer, pause) = loop {
            // Caught up at this thread's priority, without the writer lock,
            // until less than `CATCH_UP_BYTES` is left to scan under it: on
            // a busy machine the low-priority rounds fall behind the writer.
            catch_up_rounds(repo, &mut prepared)?;
            if prepared.mapping_stale {
                install = Self::rewrite_mapping(repo, &mut prepared, &layout)?;
            }
            // What the writer would sync under the lock is mostly synced
            // here: the commits made so far join the new index, and the
            // pack's bytes reach the disk (the switch's own fsyncs then
            // have little left to write).
            let tail = unwritten_since(repo, &prepared);
            if append_since(&mut prepared, &tail)? {
                sync_index(&prepared)?;
            }
            // A failed fsync of the pack is the writer's too: the store
            // refuses further writes, as after its own.
            repo.write.guard(repo.read.pack.sync())?;
            let mut writer = repo.lock_writer();
            let pause = Instant::now();
            repo.write.check_writable()?;
            repo.check_cancel()?;
            if repo.read.pack.end() - prepared.scanned_end >= CATCH_UP_BYTES && attempts < MAX_SWITCH_ATTEMPTS {
                // The writer wrote much since: catch up again first.
                drop(writer);
                attempts += 1;
                continue;
            }
            // Everything committed so far becomes durable first.
            repo.flush_locked(&mut writer, false)?;
            let end = repo.read.pack.end();
            // The last catch-up: the records committed since the last round
            // (a failure here changes nothing durable: no poisoning).
            catch_up(repo, &mut prepared, end)?;
            if !prepared.mapping_stale || attempts >= MAX_SWITCH_ATTEMPTS {
                break (writer, pause);
            }
            // It found more live records: the mapping is rewritten without
            // holding the writer, then the switch tries again.
            drop(writer);
            attempts += 1;
        };
        if prepared.mapping_stale {
            install = Self::rewrite_mapping(repo, &mut prepared, &layout)?;
        }
        // The new index: what was written before, then the commits made
        // since. Failures up to the control write leave the store as it
        // was: the new files are removed, the writer goes on.
        let since: Vec<(Hash, u64)> = std::mem::take(&mut *repo.write.gc.since_start.lock());
        repo.write.gc.running.store(false, Ordering::Release);
        let tail = &since[prepared.since_written.min(since.len())..];
        if append_since(&mut prepared, tail)? {
            sync_index(&prepared)?;
        }
        assert_eq!(prepared.since_written, since.len(), "the new index holds every commit made since the collection started");
        crash_point::reach("gc-index-written");

        let mut next = writer.control.clone();
        next.generation = prepared.generation;
        next.index_generation = prepared.generation;
        next.first_chunk_start = prepared.boundary;
        use crate::format::control::FLAG_ARCHIVE;
        next.flags = (next.flags & !FLAG_ARCHIVE) | if archive { FLAG_ARCHIVE } else { 0 };
        next.index_entries = prepared.index_entries;
        // The new index holds every commit: the checkpoint is complete.
        writer.unflushed_index.clear();
        repo.write.guard(repo.checkpoint_dict(&writer, &mut next))?;
        next.checkpoint_end = next.durable_end;
        let old_index = index_file::name(writer.control.index_generation);
        let old_mapping = (writer.control.generation > 0).then(|| mapping::file_name(writer.control.generation));
        assert!(!prepared.mapping_stale, "the mapping file holds the runs the switch installs");
        repo.write_control(&mut writer, next)?;
        self.in_flight.clear();
        crash_point::reach("gc-switched");
        writer.index_file = prepared.index.clone();

        // Publish: collected commits, then the new layout.
        {
            let mut index = repo.read.index.write();
            for hash in &prepared.collected {
                index.insert(*hash, index_file::COLLECTED);
            }
        }
        repo.read.collected_commits.fetch_add(prepared.collected.len() as u64, Ordering::Relaxed);
        // Patch bases kept without the children their patches replaced (in
        // archive mode those stay, in cold files), added to those the runs
        // kept as they were still hold.
        let masked = if archive { HashSet::new() } else { prepared.masked.keys().copied().collect() };
        repo.read.pack.set_partial(masked, prepared.traced_from > 0);
        let (mut remove, rename) = repo.read.pack.install(install);
        self.report.switch_pause = pause.elapsed();
        drop(writer);
        remove.push(old_index);
        remove.extend(old_mapping);
        repo.retire(&remove, &rename);
        crash_point::reach("gc-removed");
        let report = &mut self.report;
        report.generation = prepared.generation;
        report.last_generation = prepared.generation;
        report.boundary = prepared.boundary;
        report.traced_from = prepared.traced_from;
        report.live_runs = prepared.runs.len() as u64;
        report.live_bytes = prepared.runs.iter().map(|r| r.len).sum();
        if prepared.traced_from == 0 {
            *repo.write.gc.whole_live_bytes.lock() = Some(report.live_bytes);
        }
        report.collected_commits = prepared.collected.len() as u64;
        Ok(())
    }

    /// Writes the mapping of runs the catch-up grew (the file is already
    /// in flight) and resolves their files again.
    fn rewrite_mapping(repo: &Repo, prepared: &mut Prepared, layout: &dyn Fn(Vec<Run>) -> Layout) -> Result<Resolved> {
        let name = mapping::file_name(prepared.generation);
        let file = repo.read.storage.open(&name, true).map_err(Error::io(&name, "create"))?;
        Self::write_whole(&*file, &name, &mapping::encode(&prepared.runs))?;
        prepared.mapping_stale = false;
        repo.read.pack.resolve(layout(prepared.runs.clone()))
    }

    /// Stage 2: rewrites the files whose live share is low, a group at a
    /// time, each group into one segment made the layout by its own step.
    /// The runs are the pack's: the worker keeps no copy of its own.
    fn relocate(&mut self) -> Result<()> {
        let repo = self.repo;
        let Some(current) = repo.read.pack.collected() else { return Ok(()) };
        let sizes: BTreeMap<u64, u64> = current.files.iter().map(|(key, f)| (*key, f.len)).collect();
        // Archive mode keeps old segments as they are: records their runs
        // no longer need may belong to archived commits.
        let archive = repo.read.options.retention.archive();
        let may_rewrite = |key: u64| !archive || key & IN_CHUNK != 0;
        let groups = gc_plan::rewrite_groups(&current.runs, &sizes, &may_rewrite, repo.read.options.chunk_target_bytes);
        let total: u64 = {
            let live = mapping::live_bytes(&current.runs);
            groups.iter().flatten().map(|key| live[key]).sum()
        };
        drop(current);
        self.progress.enter(GcPhase::Relocating, total);
        for group in groups {
            let sources: BTreeSet<u64> = group.into_iter().collect();
            let (generation, install, len) = self.aside(|work| work.write_segment(&sources))?;
            self.relocation_step(generation, install, len)?;
        }
        Ok(())
    }

    /// The first half of a relocation step (a low-priority stage): the
    /// runs of `sources` copied into a new segment and its mapping, both
    /// durable; returns the generation, the layout to install and the
    /// segment's length.
    fn write_segment(&mut self, sources: &BTreeSet<u64>) -> Result<(u64, Resolved, u64)> {
        let repo = self.repo;
        let generation = self.report.last_generation + 1;
        let current = repo.read.pack.collected().expect("relocation follows a switch");
        let (next_runs, len) = gc_plan::relocate(&current.runs, sources, generation);
        drop(current);
        let name = segment_name(generation);
        let segment = self.create(&name)?;
        let mut buf = Vec::new();
        for run in next_runs.iter().filter(|r| r.file == generation) {
            let mut done = 0;
            while done < run.len {
                let n = (run.len - done).min(8 << 20);
                buf.resize(n as usize, 0);
                repo.check_cancel()?;
                repo.read.pack.read_raw(run.old + done, &mut buf)?;
                segment.write_all_at(&buf, run.new + done).map_err(Error::io(&name, "write"))?;
                done += n;
                self.progress.done.fetch_add(n, Ordering::Relaxed);
            }
        }
        segment.sync().map_err(Error::io(&name, "sync"))?;
        let mapping_name = mapping::file_name(generation);
        let file = self.create(&mapping_name)?;
        Self::write_whole(&*file, &mapping_name, &mapping::encode(&next_runs))?;
        repo.read.storage.sync_dir().map_err(Error::io(repo.read.storage.describe(), "sync directory"))?;
        crash_point::reach("gc-segment-written");
        self.report.peak_bytes = self.report.peak_bytes.max(repo.read.pack.size_bytes() + len);
        let install = repo.read.pack.resolve(Layout {
            generation,
            runs: next_runs,
            new_files: vec![(generation, PackFile { name: name.clone(), file: segment, len })],
            boundary: repo.read.pack.first_chunk_start(),
            archive: repo.read.options.retention.archive(),
        })?;
        Ok((generation, install, len))
    }

    /// The second half of a relocation step: one durable control write,
    /// under the writer lock, names the segment's generation.
    fn relocation_step(&mut self, generation: u64, install: Resolved, len: u64) -> Result<()> {
        let repo = self.repo;
        let mut writer = repo.lock_writer();
        let pause = Instant::now();
        repo.write.check_writable()?;
        // The writer's state counts the commits made since its last sync
        // (any policy but `EveryCommit`): they become durable first, or
        // the slot below would name a last commit past its durable end,
        // which an open rejects for the slot before, of the generation
        // whose mapping this step removes.
        repo.flush_locked(&mut writer, false)?;
        let mut next = writer.control.clone();
        next.generation = generation;
        let old_mapping = mapping::file_name(writer.control.generation);
        repo.write_control(&mut writer, next)?;
        self.in_flight.clear();
        crash_point::reach("gc-relocated");
        let (mut remove, rename) = repo.read.pack.install(install);
        self.report.step_pause = self.report.step_pause.max(pause.elapsed());
        drop(writer);
        remove.push(old_mapping);
        repo.retire(&remove, &rename);
        self.report.last_generation = generation;
        self.report.copied_bytes += len;
        self.report.segments += 1;
        Ok(())
    }
}
