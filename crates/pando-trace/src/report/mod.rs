//! The report of a replay: a summary computed from the metrics (serialised
//! as JSON), a text rendering for people, a self-contained HTML page with
//! charts, and the side-by-side comparison of two runs.
//!
//! Boundary: pure formatting of numbers already measured; no I/O here
//! except through the caller.

pub mod compare;
pub mod html;
pub mod svg;
pub mod text;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::replay::Checks;
use crate::replay::metrics::{BlockSample, Metrics, OpKind};

/// The block budget a report compares block times against unless told
/// otherwise: 6 s, Tezos mainnet's block time since the T protocol.
pub const DEFAULT_BLOCK_BUDGET_MS: f64 = 6_000.0;

fn default_block_budget_ms() -> f64 {
    DEFAULT_BLOCK_BUDGET_MS
}
/// At most this many per-block samples are kept in a report.
pub const MAX_SAMPLES: usize = 2_000;

/// Summary statistics of a distribution, in a given unit.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Percentiles {
    /// From a histogram of nanoseconds, in `unit_ns` units.
    pub fn of_histogram(histogram: &Histogram<u64>, unit_ns: f64) -> Percentiles {
        if histogram.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: histogram.len(),
            mean: histogram.mean() / unit_ns,
            p50: histogram.value_at_quantile(0.5) as f64 / unit_ns,
            p99: histogram.value_at_quantile(0.99) as f64 / unit_ns,
            p999: histogram.value_at_quantile(0.999) as f64 / unit_ns,
            max: histogram.max() as f64 / unit_ns,
        }
    }

    fn of_values(values: impl Iterator<Item = u64>, unit_ns: f64) -> Percentiles {
        let mut histogram = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds");
        for v in values {
            histogram.record(v.clamp(1, 3_600_000_000_000)).expect("within bounds");
        }
        Percentiles::of_histogram(&histogram, unit_ns)
    }
}

/// One operation kind's latencies, with a log-scale histogram for charts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OpLatency {
    pub kind: String,
    /// Microseconds.
    pub latency_us: Percentiles,
    /// `(upper bound in µs, count)` per power-of-two bucket.
    pub buckets: Vec<(f64, u64)>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Machine {
    pub cores: usize,
    pub memory_bytes: u64,
    pub os: String,
}

impl Machine {
    pub fn current() -> Machine {
        let memory_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()))
            })
            .map_or(0, |kb| kb * 1024);
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes,
            os: std::env::consts::OS.to_string(),
        }
    }
}

/// Everything a replay reports.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub pando_version: String,
    pub label: String,
    pub trace: String,
    pub store: String,
    pub machine: Machine,
    pub blocks: u64,
    pub rows: u64,
    pub total_s: f64,
    pub blocks_per_s: f64,
    pub ops_per_s: f64,
    pub worst_block: u64,
    pub worst_block_ms: f64,
    pub block_ms: Percentiles,
    pub commit_ms: Percentiles,
    pub ops: Vec<OpLatency>,
    pub final_pack_bytes: u64,
    pub pack_bytes_per_block: f64,
    pub peak_rss_bytes: u64,
    pub final_rss_bytes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_syscalls: u64,
    pub write_syscalls: u64,
    pub checks: Checks,
    /// Per-block samples, evenly thinned to at most [`MAX_SAMPLES`].
    pub samples: Vec<BlockSample>,
    /// Garbage collections that ran during the replay.
    #[serde(default)]
    pub gc: Vec<GcEvent>,
    /// True if a signal (SIGINT, SIGTERM) stopped the replay before the
    /// end of its trace: only `blocks` blocks were replayed.
    #[serde(default)]
    pub interrupted: bool,
    /// Why the replay stopped before the end of its trace (an interrupt,
    /// an error); `None` for a whole run. A partial run's figures are not
    /// those of the whole trace.
    #[serde(default)]
    pub stopped_early: Option<String>,
    /// The time a block may take, ms, against which the HTML page colours
    /// block times (`pando replay --block-budget`); a report written
    /// before the option existed reads as the default.
    #[serde(default = "default_block_budget_ms")]
    pub block_budget_ms: f64,
    /// When the trace was generated in the same process before the replay
    /// (`pando replay` without a trace): what that took in memory, and
    /// whether `peak_rss_bytes` includes it.
    #[serde(default)]
    pub generation: Option<GenerationMemory>,
}

/// The memory of generating a trace before replaying it, in the same process.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct GenerationMemory {
    /// The process's peak resident memory while generating.
    pub peak_rss_bytes: u64,
    /// True if the replay's `peak_rss_bytes` includes the generation's
    /// (where the kernel's high-water mark could not be reset after it);
    /// false if it is the replay's own.
    pub included: bool,
}

impl Report {
    /// What the peak RSS figure includes, when it is not plainly the
    /// replay's: for the text and the page.
    pub fn peak_rss_note(&self) -> Option<String> {
        let generation = self.generation?;
        Some(if generation.included {
            "generating the trace first, in the same process, included".to_string()
        } else {
            format!(
                "the replay's own; generating the trace first, in the same process, peaked at {}",
                human_bytes(generation.peak_rss_bytes as f64)
            )
        })
    }
}

/// A garbage collection during a replay, as the report shows it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct GcEvent {
    /// The block during which it started, and the one after which it had finished.
    pub start_block: u64,
    pub end_block: u64,
    pub seconds: f64,
    /// The writer's longest wait caused by the collection (start, switch or
    /// a relocation step), ms.
    pub max_pause_ms: f64,
    /// The liveness switch's pause and the longest relocation step's, ms.
    #[serde(default)]
    pub switch_pause_ms: f64,
    #[serde(default)]
    pub step_pause_ms: f64,
    pub collected_commits: u64,
    /// Pack bytes before, at most during, and after.
    pub bytes_before: u64,
    #[serde(default)]
    pub peak_bytes: u64,
    pub bytes_after: u64,
    /// Bytes rewritten into new segment files.
    #[serde(default)]
    pub copied_bytes: u64,
    /// True if it traced every live record, false if only those written
    /// since the last collection's boundary (reports before this field
    /// was added traced every one).
    #[serde(default = "traced_whole")]
    pub whole_trace: bool,
}

fn traced_whole() -> bool {
    true
}

fn buckets(histogram: &Histogram<u64>) -> Vec<(f64, u64)> {
    let mut out = Vec::new();
    if histogram.is_empty() {
        return out;
    }
    let mut upper = 1_000u64; // 1 µs
    let mut below = 0;
    loop {
        let count = histogram.count_between(0, upper) - below;
        below += count;
        out.push((upper as f64 / 1_000.0, count));
        if below >= histogram.len() {
            break;
        }
        upper *= 2;
    }
    out
}

impl Report {
    pub fn build(label: &str, trace: &str, store: &str, metrics: &Metrics, checks: &Checks, rows: u64) -> Report {
        let blocks = metrics.blocks.len() as u64;
        let total_s = metrics.blocks.last().map_or(0.0, |b| b.at_s);
        let (worst_block, worst_us) =
            metrics.blocks.iter().map(|b| (b.block, b.wall_us)).max_by_key(|(_, us)| *us).unwrap_or((0, 0));
        let last = metrics.blocks.last().copied().unwrap_or_default();
        let first_pack = metrics.blocks.first().map_or(0, |b| b.pack_bytes);
        let io0 = metrics.io_at_start;
        let step = metrics.blocks.len().div_ceil(MAX_SAMPLES).max(1);
        let mut samples: Vec<BlockSample> = metrics.blocks.iter().step_by(step).copied().collect();
        if samples.last().map(|s| s.block) != metrics.blocks.last().map(|s| s.block) {
            samples.extend(metrics.blocks.last().copied());
        }
        Report {
            pando_version: env!("CARGO_PKG_VERSION").to_string(),
            label: label.to_string(),
            trace: trace.to_string(),
            store: store.to_string(),
            machine: Machine::current(),
            blocks,
            rows,
            total_s,
            blocks_per_s: if total_s > 0.0 { blocks as f64 / total_s } else { 0.0 },
            ops_per_s: if total_s > 0.0 { rows as f64 / total_s } else { 0.0 },
            worst_block,
            worst_block_ms: worst_us as f64 / 1_000.0,
            block_ms: Percentiles::of_values(metrics.blocks.iter().map(|b| b.wall_us * 1_000), 1e6),
            commit_ms: Percentiles::of_histogram(metrics.histogram(OpKind::Commit), 1e6),
            ops: OpKind::ALL
                .iter()
                .map(|&kind| OpLatency {
                    kind: kind.name().to_string(),
                    latency_us: Percentiles::of_histogram(metrics.histogram(kind), 1e3),
                    buckets: buckets(metrics.histogram(kind)),
                })
                .collect(),
            final_pack_bytes: last.pack_bytes,
            pack_bytes_per_block: if blocks > 1 { (last.pack_bytes - first_pack) as f64 / (blocks - 1) as f64 } else { 0.0 },
            peak_rss_bytes: metrics.blocks.iter().map(|b| b.rss_bytes).max().unwrap_or(0),
            final_rss_bytes: last.rss_bytes,
            read_bytes: last.read_bytes.saturating_sub(io0.read_bytes),
            write_bytes: last.write_bytes.saturating_sub(io0.write_bytes),
            read_syscalls: last.read_syscalls.saturating_sub(io0.read_syscalls),
            write_syscalls: last.write_syscalls.saturating_sub(io0.write_syscalls),
            checks: checks.clone(),
            samples,
            gc: Vec::new(),
            interrupted: false,
            stopped_early: None,
            block_budget_ms: DEFAULT_BLOCK_BUDGET_MS,
            generation: None,
        }
    }

    /// How a partial run is named in a title ("interrupted after 57
    /// blocks"); `None` for a whole run.
    pub fn partial_note(&self) -> Option<String> {
        let why = if self.interrupted { "interrupted" } else { "stopped by an error" };
        (self.interrupted || self.stopped_early.is_some()).then(|| format!("partial: {why} after {} blocks", self.blocks))
    }
}

/// Bytes in a human unit.
pub fn human_bytes(bytes: f64) -> String {
    let units = ["B", "KB", "MB", "GB", "TB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < units.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 { format!("{value:.0} {}", units[unit]) } else { format!("{value:.1} {}", units[unit]) }
}
