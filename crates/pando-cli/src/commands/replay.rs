//! `pando replay`: replay a trace into a store and report on it.

use anyhow::{Context, bail};
use indicatif::ProgressBar;
use pando_core::trace::RowRef;
use pando_store::{Create, Options, Store, SyncPolicy};
use pando_trace::TraceReader;
use pando_trace::replay::metrics::peak_rss_bytes;
use pando_trace::replay::{Applied, ReplayError, Replayer};
use pando_trace::report::{self, GenerationMemory, Report};
use signal_hook::consts::{SIGINT, SIGTERM};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::trace as trace_cmd;
use crate::scratch::Scratch;
use pando_store::io::NewFile;

/// What `pando replay` was asked to do.
pub struct ReplayArgs {
    pub trace: Option<PathBuf>,
    pub store: Option<PathBuf>,
    /// The layout of the trace's hashes, and so of the store.
    pub layout: pando_core::inode::Layout,
    pub report: PathBuf,
    pub label: Option<String>,
    pub preset: String,
    pub seed: u64,
    pub blocks: Option<u64>,
    pub sync: SyncPolicy,
    pub cache_mb: u64,
    /// `Options::read_cache_bytes`, in MiB.
    pub read_cache_mb: u64,
    pub retention: pando_store::Retention,
    /// `Options::gc_whole_trace_growth_percent`.
    pub whole_trace_growth: u64,
    /// Into a store with commits, if the trace starts from one of them.
    pub append: bool,
    /// Replay a trace that ends inside a block up to its last whole block.
    pub ignore_partial_tail: bool,
    /// What the report page colours block times against, ms.
    pub block_budget_ms: f64,
}

/// The names of replays' scratch directories in the temporary folder.
const SCRATCH_PREFIX: &str = "pando-replay-";

pub fn replay(args: &ReplayArgs) -> anyhow::Result<()> {
    let interrupted = on_interrupt()?;
    // Refused before a trace is generated or anything written.
    if let Some(dir) = &args.store {
        may_replay_into(dir, args.trace.as_deref(), args.append)?;
    } else if args.append {
        bail!("--append adds to a store named by --store or PANDO_STORE; none was given");
    }
    // What killed replays left in the temporary folder goes first.
    crate::scratch::sweep(&std::env::temp_dir(), SCRATCH_PREFIX);
    // For a generated trace or a temporary store only.
    let scratch = match (&args.trace, &args.store) {
        (Some(_), Some(_)) => None,
        _ => Some(Scratch::new_in(&std::env::temp_dir(), SCRATCH_PREFIX)?),
    };
    let scratch_path = || scratch.as_ref().map(Scratch::path).context("no scratch directory");
    // Blocks to replay, when known: `--blocks`, or a generated preset's.
    let mut total_blocks = args.blocks;
    let mut generation = None;
    let trace = match &args.trace {
        Some(path) => path.clone(),
        None => {
            let preset = trace_cmd::preset(&args.preset)?;
            total_blocks = Some(total_blocks.map_or(preset.blocks, |n| n.min(preset.blocks)));
            let path = scratch_path()?.join(format!("{}-{}.repr", preset.name, args.seed));
            trace_cmd::generate(preset, args.seed, &path, false, Some(&interrupted))?;
            // The replay's peak memory is its own, where it can be measured apart.
            generation = Some(GenerationMemory {
                peak_rss_bytes: peak_rss_bytes("self"),
                included: !pando_trace::replay::metrics::reset_peak_rss(),
            });
            path
        }
    };
    let store_dir = match &args.store {
        Some(dir) => dir.clone(),
        None => scratch_path()?.join("store"),
    };
    let options = Options {
        create: Create::IfMissing,
        sync: args.sync,
        // A temporary store's commits are the tool's own, measured in the
        // report: a slow one is nothing an operator can act on.
        slow_commit_warning: if args.store.is_some() { Options::default().slow_commit_warning } else { None },
        cache_bytes: args.cache_mb << 20,
        read_cache_bytes: args.read_cache_mb << 20,
        retention: args.retention,
        gc_whole_trace_growth_percent: args.whole_trace_growth,
        layout: Some(args.layout),
        ..Options::default()
    };
    // The trace is opened first: one that is missing or not a trace
    // leaves no store behind.
    let mut reader = trace_cmd::open(&trace, args.ignore_partial_tail)?;
    let store = Store::open(&store_dir, options).map_err(|e| super::open_error(&store_dir, e))?;
    if !args.append && store.commit_count() > 0 {
        // Commits made since the check above, by another process.
        bail!("{} holds {} commits now; nothing was replayed", store_dir.display(), store.commit_count());
    }

    // In blocks when their number is known; otherwise in the share of the
    // trace read, which is all a trace file tells before it is read.
    let (progress, in_blocks) = match total_blocks {
        Some(total) => (ProgressBar::new(total), true),
        None => (ProgressBar::new(std::fs::metadata(&trace).map(|m| m.len()).unwrap_or(0)), false),
    };
    let template = if in_blocks {
        "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} blocks {msg} ETA {eta}"
    } else {
        "{spinner} [{elapsed_precise}] {wide_bar} {percent:>3}% of the trace {msg} ETA {eta}"
    };
    progress.set_style(crate::progress::style(template));
    crate::progress::show(&progress);
    let position = |blocks: u64, offset: u64| if in_blocks { blocks } else { offset };
    // The spinner and the clock move inside a long block (a genesis of
    // millions of writes) too.
    progress.enable_steady_tick(std::time::Duration::from_millis(250));
    let mut replayer = Replayer::new(&store);
    let mut failure = None;
    // True once a signal stopped the replay (the report says it is partial).
    let mut stopped_by_signal = false;
    let mut blocks = 0u64;
    let mut block_rows = 0u64;
    let mut gc = GcWatch::default();
    loop {
        // Where the row starts (the progress in bytes of a trace whose
        // number of blocks is unknown); the row borrows the reader.
        let offset = reader.offset();
        let Some(row) = reader.next_row_ref() else { break };
        if interrupted.load(Ordering::Relaxed) {
            failure = Some(anyhow::anyhow!("interrupted"));
            stopped_by_signal = true;
            break;
        }
        let row = match row {
            Ok(row) => row,
            Err(e) => {
                failure = Some(trace_cmd::partial_tail_hint(e.into()));
                break;
            }
        };
        block_rows += 1;
        // A large block (a genesis of millions of writes) moves the bar as
        // it goes, and says so while it commits.
        if block_rows.is_multiple_of(1 << 14) {
            progress.set_position(position(blocks, offset));
            progress.set_message(format!("block {}: {block_rows} operations", blocks + 1));
        }
        if block_rows >= 1 << 14 && matches!(row, RowRef::Commit { .. }) {
            progress.set_message(format!("block {}: committing {block_rows} operations", blocks + 1));
        }
        match replayer.apply_ref(row) {
            Ok(Applied::Block(_)) => {
                blocks += 1;
                block_rows = 0;
                gc.after_block(&store, blocks - 1);
                if blocks.is_multiple_of(16) {
                    progress.set_position(position(blocks, offset));
                    let elapsed = replayer.metrics.elapsed().as_secs_f64();
                    let rates = format!("{} operations, {:.1} blocks/s", replayer.rows(), blocks as f64 / elapsed.max(1e-9));
                    progress.set_message(if in_blocks { rates } else { format!("{blocks} blocks, {rates}") });
                }
                if args.blocks.is_some_and(|limit| blocks >= limit) {
                    break;
                }
            }
            Ok(Applied::Op) => {}
            // A row the trace cannot mean (an unknown context, say): where
            // it lies in the file.
            Err(e @ ReplayError::Trace { .. }) => {
                failure = Some(anyhow::Error::new(e).context(format!("{}: the row at byte {offset}", trace.display())));
                break;
            }
            Err(e) => {
                failure = Some(e.into());
                break;
            }
        }
    }
    progress.finish_and_clear();
    if failure.is_none() {
        trace_cmd::say_dropped_tail(&reader);
    }
    // A collection still running is finished, so the report shows it whole.
    // After a failure the first error is the one reported: a store that
    // failed a write refuses the flush as well.
    let finished = store.wait_gc().map(drop).and_then(|()| {
        gc.after_block(&store, blocks.saturating_sub(1));
        store.flush()
    });
    // The last block's counters and the pack's size, the collection and
    // the flush included.
    replayer.metrics.reread_last_block(store.pack_bytes());
    if let Err(e) = finished
        && failure.is_none()
    {
        failure = Some(e.into());
    }

    let label = args.label.clone().unwrap_or_else(|| {
        let name = trace.file_name().map_or_else(|| trace.display().to_string(), |n| n.to_string_lossy().into_owned());
        format!("{name}, sync {}", sync_name(args.sync))
    });
    let store_shown = match &args.store {
        Some(dir) => dir.display().to_string(),
        None => "a temporary store (removed on exit)".to_string(),
    };
    let mut report =
        Report::build(&label, &trace.display().to_string(), &store_shown, &replayer.metrics, &replayer.checks, replayer.rows());
    report.gc = gc.events;
    report.block_budget_ms = args.block_budget_ms;
    report.interrupted = stopped_by_signal;
    report.stopped_early = failure
        .as_ref()
        .map(|e| if stopped_by_signal { "by a signal (SIGINT or SIGTERM)".to_string() } else { format!("by an error: {e:#}") });
    // The kernel's high-water mark also sees a peak inside a block (a
    // genesis commit), which samples between blocks miss.
    report.peak_rss_bytes = report.peak_rss_bytes.max(peak_rss_bytes("self"));
    report.generation = generation;
    out_or_gone!("{}", report::text::render(&report))?;
    write_report(&args.report, &report)?;
    if let Some(e) = failure {
        // What came before the error was replayed and reported.
        let mut context = format!("the replay stopped after {blocks} blocks");
        if let Some(kind) = store_io_kind(&e) {
            if matches!(kind, ErrorKind::StorageFull | ErrorKind::FileTooLarge | ErrorKind::QuotaExceeded) {
                context.push_str(": the disk is full or a file size limit was reached; free space or raise the limit");
            }
            if let Some(dir) = &args.store {
                context.push_str(&format!(
                    "; the store in {} keeps its commits up to the last durable one, and recovers to it when reopened",
                    dir.display()
                ));
            }
        }
        return Err(e.context(context));
    }
    if !report.checks.all_passed() {
        bail!("the replay disagrees with the trace (see the checks above)");
    }
    Ok(())
}

/// Refuses a replay into the store in `dir` that it was not asked to
/// make: into a store with commits without `append`, or with `append`
/// when the commit the trace's first block checks out is not in it.
/// Looks with a read-only open, so that a refused replay changes nothing;
/// an absent or empty directory is left to the replay's own open.
fn may_replay_into(dir: &Path, trace: Option<&Path>, append: bool) -> anyhow::Result<()> {
    let options = Options { read_only: true, create: Create::Never, cache_bytes: 16 << 20, ..Options::default() };
    let store = match Store::open(dir, options) {
        Ok(store) => store,
        Err(e @ pando_store::Error::NotADirectory { .. }) => return Err(e.into()),
        Err(_) if !append => return Ok(()),
        Err(e) => return Err(super::open_error(dir, e).context("--append adds to an existing store")),
    };
    let Some(last) = store.last_commit()? else {
        return if append {
            Err(anyhow::anyhow!("--append adds to a store with commits; {} has none", dir.display()))
        } else {
            Ok(())
        };
    };
    let held = format!("{} holds {} commits (the last {last})", dir.display(), store.commit_count());
    if !append {
        bail!(
            "{held}; a replay adds its commits to a store with commits only with --append, \
             which first checks that the commit the trace's first block checks out is in the store; nothing was replayed"
        );
    }
    let Some(trace) = trace else {
        bail!(
            "{held}; --append needs a trace file that starts from one of its commits (a generated trace starts from an empty tree)"
        );
    };
    let first = pando_trace::replay::first_checkout(&mut TraceReader::open(trace)?)
        .with_context(|| format!("cannot read the first block of {}", trace.display()))?;
    match first {
        None => bail!(
            "{held}; the trace {} starts from an empty tree, not from a commit of the store: nothing to append to",
            trace.display()
        ),
        Some(name) => match pando_trace::replay::recorded_hash(&name) {
            Some(hash) if store.exists(&hash) => Ok(()),
            Some(hash) => bail!(
                "the trace {} starts from commit {hash} (its first block checks it out), which is not in the store: {held}; nothing was replayed",
                trace.display()
            ),
            None => bail!(
                "the trace {} starts from {:?} (its first block checks it out), which names no commit hash, so no commit of the store: {held}; nothing was replayed",
                trace.display(),
                String::from_utf8_lossy(&name)
            ),
        },
    }
}

/// The kind of the I/O error a store write failed with, if that is why
/// the replay stopped.
fn store_io_kind(error: &anyhow::Error) -> Option<ErrorKind> {
    match error.downcast_ref::<ReplayError>()? {
        ReplayError::Store { error: pando_store::Error::Io { error, .. }, .. } => Some(error.kind()),
        _ => match error.downcast_ref::<pando_store::Error>()? {
            pando_store::Error::Io { error, .. } => Some(error.kind()),
            _ => None,
        },
    }
}

/// A flag that SIGINT or SIGTERM sets, so that a command stops between
/// rows or writes and removes what it made (a replay's temporary
/// directory, a temporary file, a store it created); a second signal ends
/// the process at once, leaving them.
pub fn on_interrupt() -> anyhow::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        // Registered first, so it sees the flag as the previous signal left it.
        signal_hook::flag::register_conditional_shutdown(signal, 130, flag.clone())?;
        signal_hook::flag::register(signal, flag.clone())?;
    }
    Ok(flag)
}

/// Notes when background collections start and finish, by block.
#[derive(Default)]
struct GcWatch {
    started_at: Option<u64>,
    events: Vec<pando_trace::report::GcEvent>,
}

impl GcWatch {
    fn after_block(&mut self, store: &Store, block: u64) {
        if self.started_at.is_none() && store.gc_status().is_some() {
            self.started_at = Some(block);
        }
        for done in store.take_gc_reports() {
            self.events.push(pando_trace::report::GcEvent {
                start_block: self.started_at.take().unwrap_or(block),
                end_block: block,
                seconds: done.duration.as_secs_f64(),
                max_pause_ms: done.longest_pause().as_secs_f64() * 1e3,
                switch_pause_ms: done.switch_pause.as_secs_f64() * 1e3,
                step_pause_ms: done.step_pause.as_secs_f64() * 1e3,
                collected_commits: done.collected_commits,
                bytes_before: done.bytes_before,
                peak_bytes: done.peak_bytes,
                bytes_after: done.bytes_after,
                copied_bytes: done.copied_bytes,
                whole_trace: done.traced_from == 0,
            });
        }
    }
}

/// Writes `bytes` to `path` whole or not at all.
fn write_whole(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let new = NewFile::create(path)?;
    new.file().write_all(bytes).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(new.persist()?)
}

fn write_report(dir: &Path, report: &Report) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let json = dir.join("report.json");
    write_whole(&json, &serde_json::to_vec_pretty(report)?)?;
    let html = dir.join("report.html");
    write_whole(&html, report::html::render(report).as_bytes())?;
    outln_or_gone!("\nreport: {} and {}", json.display(), html.display())?;
    Ok(())
}

fn read_report(path: &Path) -> anyhow::Result<Report> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not a pando replay report", path.display()))
}

/// How `--sync` spells `policy`.
fn sync_name(policy: SyncPolicy) -> String {
    match policy {
        SyncPolicy::EveryCommit => "every".into(),
        SyncPolicy::Pipelined => "pipelined".into(),
        SyncPolicy::Never => "never".into(),
        SyncPolicy::EveryN(n) => format!("every {n}"),
    }
}

pub fn compare(first: &Path, second: &Path) -> anyhow::Result<()> {
    let (mut a, mut b) = (read_report(first)?, read_report(second)?);
    a.label = format!("{} ({})", a.label, first.display());
    b.label = format!("{} ({})", b.label, second.display());
    for warning in report::compare::warnings(&a, &b) {
        errln!("warning: {warning}");
    }
    out!("{}", report::compare::render(&a, &b))?;
    Ok(())
}
