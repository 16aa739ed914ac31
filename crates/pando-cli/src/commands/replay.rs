//! `pando replay`: replay a trace into a store and report on it.

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use pando_store::{Options, Store, SyncPolicy};
use pando_trace::TraceReader;
use pando_trace::replay::{Applied, Replayer};
use pando_trace::report::{self, Report};
use std::path::{Path, PathBuf};

use super::trace as trace_cmd;

/// What `pando replay` was asked to do.
pub struct ReplayArgs {
    pub trace: Option<PathBuf>,
    pub store: Option<PathBuf>,
    pub report: PathBuf,
    pub label: Option<String>,
    pub preset: String,
    pub seed: u64,
    pub blocks: Option<u64>,
    pub sync: SyncPolicy,
    pub cache_mb: u64,
    pub retention: pando_store::Retention,
}

pub fn replay(args: &ReplayArgs) -> anyhow::Result<()> {
    let scratch = tempfile::Builder::new().prefix("pando-replay-").tempdir()?;
    let trace = match &args.trace {
        Some(path) => path.clone(),
        None => {
            let preset = trace_cmd::preset(&args.preset)?;
            let path = scratch.path().join(format!("{}-{}.repr", preset.name, args.seed));
            trace_cmd::generate(preset, args.seed, &path, false)?;
            path
        }
    };
    let store_dir = match &args.store {
        Some(dir) => dir.clone(),
        None => scratch.path().join("store"),
    };
    let options = Options { sync: args.sync, cache_bytes: args.cache_mb << 20, retention: args.retention, ..Options::default() };
    let store = Store::open(&store_dir, options).with_context(|| format!("cannot open the store in {}", store_dir.display()))?;

    let mut reader = TraceReader::open(&trace)?;
    let trace_bytes = std::fs::metadata(&trace).map(|m| m.len()).unwrap_or(0);
    let progress = ProgressBar::new(trace_bytes);
    progress.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {percent:>3}% {msg} ETA {eta}")
            .expect("valid progress template"),
    );
    let mut replayer = Replayer::new(&store);
    let mut failure = None;
    let mut blocks = 0u64;
    let mut gc = GcWatch::default();
    while let Some(row) = reader.next_row() {
        let row = match row {
            Ok(row) => row,
            Err(e) => {
                failure = Some(anyhow::Error::from(e));
                break;
            }
        };
        match replayer.apply(row) {
            Ok(Applied::Block(_)) => {
                blocks += 1;
                gc.after_block(&store, blocks - 1);
                if blocks.is_multiple_of(16) {
                    progress.set_position(reader.offset());
                    let elapsed = replayer.metrics.elapsed().as_secs_f64();
                    progress.set_message(format!("{blocks} blocks, {:.1} blocks/s", blocks as f64 / elapsed.max(1e-9)));
                }
                if args.blocks.is_some_and(|limit| blocks >= limit) {
                    break;
                }
            }
            Ok(Applied::Op) => {}
            Err(e) => {
                failure = Some(e.into());
                break;
            }
        }
    }
    progress.finish_and_clear();
    // A collection still running is finished, so the report shows it whole.
    store.wait_gc()?;
    gc.after_block(&store, blocks.saturating_sub(1));
    store.flush()?;

    let label = args.label.clone().unwrap_or_else(|| "pando".to_string());
    let mut report = Report::build(
        &label,
        &trace.display().to_string(),
        &store_dir.display().to_string(),
        &replayer.metrics,
        &replayer.checks,
        replayer.rows(),
    );
    report.gc = gc.events;
    // The kernel's high-water mark also sees a peak inside a block (a
    // genesis commit), which samples between blocks miss.
    report.peak_rss_bytes = report.peak_rss_bytes.max(pando_trace::replay::metrics::peak_rss_bytes("self"));
    print!("{}", report::text::render(&report));
    write_report(&args.report, &report)?;
    if let Some(e) = failure {
        // What came before the error was replayed and reported.
        return Err(e.context(format!("the replay stopped after {blocks} blocks")));
    }
    if !report.checks.all_passed() {
        bail!("the replay disagrees with the trace (see the checks above)");
    }
    Ok(())
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
            });
        }
    }
}

fn write_report(dir: &Path, report: &Report) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let json = dir.join("report.json");
    std::fs::write(&json, serde_json::to_vec_pretty(report)?).with_context(|| format!("cannot write {}", json.display()))?;
    let html = dir.join("report.html");
    std::fs::write(&html, report::html::render(report)).with_context(|| format!("cannot write {}", html.display()))?;
    println!("\nreport: {} and {}", json.display(), html.display());
    Ok(())
}

fn read_report(path: &Path) -> anyhow::Result<Report> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not a pando replay report", path.display()))
}

pub fn compare(first: &Path, second: &Path) -> anyhow::Result<()> {
    let (a, b) = (read_report(first)?, read_report(second)?);
    print!("{}", report::compare::render(&a, &b));
    Ok(())
}
