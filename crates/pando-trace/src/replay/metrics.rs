//! What a replay measures: latency histograms per operation kind, and per
//! block its time, its commit time, disk size, memory and I/O.
//!
//! Boundary: measures and keeps numbers; the report module presents them.

use hdrhistogram::Histogram;
use pando_core::trace::RowRef;
use pando_store::Store;
use std::time::{Duration, Instant};

/// The kinds of rows, in trace order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Checkout,
    Add,
    Remove,
    Copy,
    Find,
    Mem,
    MemTree,
    Commit,
}

impl OpKind {
    pub const ALL: [OpKind; 8] =
        [OpKind::Checkout, OpKind::Add, OpKind::Remove, OpKind::Copy, OpKind::Find, OpKind::Mem, OpKind::MemTree, OpKind::Commit];

    pub fn of(row: &RowRef<'_>) -> OpKind {
        match row {
            RowRef::Checkout { .. } => OpKind::Checkout,
            RowRef::Add { .. } => OpKind::Add,
            RowRef::Remove { .. } => OpKind::Remove,
            RowRef::Copy { .. } => OpKind::Copy,
            RowRef::Find { .. } => OpKind::Find,
            RowRef::Mem { .. } => OpKind::Mem,
            RowRef::MemTree { .. } => OpKind::MemTree,
            RowRef::Commit { .. } => OpKind::Commit,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            OpKind::Checkout => "checkout",
            OpKind::Add => "add",
            OpKind::Remove => "remove",
            OpKind::Copy => "copy",
            OpKind::Find => "find",
            OpKind::Mem => "mem",
            OpKind::MemTree => "mem_tree",
            OpKind::Commit => "commit",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One block's numbers.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct BlockSample {
    pub block: u64,
    pub ops: u32,
    /// Wall time from the block's first row to the end of its commit.
    pub wall_us: u64,
    pub commit_us: u64,
    /// Seconds since the replay started, at the end of the block.
    pub at_s: f64,
    pub pack_bytes: u64,
    pub rss_bytes: u64,
    /// From /proc/self/io, cumulative since the process started.
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_syscalls: u64,
    pub write_syscalls: u64,
}

/// Process counters from /proc/self/io; zero where unavailable.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcIo {
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_syscalls: u64,
    pub write_syscalls: u64,
}

impl ProcIo {
    pub fn now() -> ProcIo {
        ProcIo::of("self")
    }

    /// The counters of `process` (a pid, or `self`).
    pub fn of(process: &str) -> ProcIo {
        let mut io = ProcIo::default();
        if let Ok(text) = std::fs::read_to_string(format!("/proc/{process}/io")) {
            for line in text.lines() {
                let mut parts = line.split(':');
                let (Some(name), Some(value)) = (parts.next(), parts.next()) else { continue };
                let value = value.trim().parse().unwrap_or(0);
                match name {
                    "rchar" => io.read_bytes = value,
                    "wchar" => io.write_bytes = value,
                    "syscr" => io.read_syscalls = value,
                    "syscw" => io.write_syscalls = value,
                    _ => {}
                }
            }
        }
        io
    }
}

/// The highest resident memory `process` (a pid, or `self`) has had, as
/// the kernel counts it (`VmHWM`); zero where unavailable. Unlike samples
/// taken between blocks, it sees the peak inside a block.
pub fn peak_rss_bytes(process: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{process}/status"))
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

/// Resets this process's high-water mark of resident memory (`VmHWM`) to
/// what it holds now, so that `peak_rss_bytes("self")` sees only what
/// comes after (Linux 4.0 or later); false where that is not possible.
/// What the process's parent sees of its peak (`ru_maxrss`, as
/// `/usr/bin/time` prints it) is reset too.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Resident memory of this process, from /proc/self/statm; zero where unavailable.
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|text| text.split_whitespace().nth(1).and_then(|pages| pages.parse::<u64>().ok()))
        .map_or(0, |pages| pages * 4096)
}

/// The process's counters (I/O, resident memory) are read after a block
/// at most this often: the two `/proc` reads cost about 14 µs, 1-2% of a
/// `small` replay if done after every block. The blocks between carry the
/// last reading; the last block is read again at the end
/// ([`Metrics::reread_last_block`]).
const COUNTERS_EVERY: Duration = Duration::from_millis(10);

pub struct Metrics {
    histograms: Vec<Histogram<u64>>,
    pub blocks: Vec<BlockSample>,
    start: Instant,
    pub io_at_start: ProcIo,
    /// When the counters were last read, and what they said.
    counters: Option<(Instant, ProcIo, u64)>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let histograms = OpKind::ALL
            .iter()
            // Nanoseconds, from 1 ns to an hour, 3 significant digits.
            .map(|_| Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds"))
            .collect();
        Metrics { histograms, blocks: Vec::new(), start: Instant::now(), io_at_start: ProcIo::now(), counters: None }
    }

    pub fn record_op(&mut self, kind: OpKind, elapsed: Duration) {
        let ns = (elapsed.as_nanos() as u64).clamp(1, 3_600_000_000_000);
        self.histograms[kind.index()].record(ns).expect("value within the histogram's bounds");
    }

    pub fn histogram(&self, kind: OpKind) -> &Histogram<u64> {
        &self.histograms[kind.index()]
    }

    pub fn end_block(&mut self, ops: u32, wall: Duration, commit: Duration, store: &Store) -> BlockSample {
        let now = Instant::now();
        let (io, rss) = match self.counters {
            Some((at, io, rss)) if now - at < COUNTERS_EVERY => (io, rss),
            _ => {
                let (io, rss) = (ProcIo::now(), rss_bytes());
                self.counters = Some((now, io, rss));
                (io, rss)
            }
        };
        let sample = BlockSample {
            block: self.blocks.len() as u64,
            ops,
            wall_us: wall.as_micros() as u64,
            commit_us: commit.as_micros() as u64,
            at_s: self.start.elapsed().as_secs_f64(),
            pack_bytes: store.pack_bytes(),
            rss_bytes: rss,
            read_bytes: io.read_bytes,
            write_bytes: io.write_bytes,
            read_syscalls: io.read_syscalls,
            write_syscalls: io.write_syscalls,
        };
        self.blocks.push(sample);
        sample
    }

    /// Reads the process's counters again for the last block, so that the
    /// totals a report takes from it are exact, and takes `pack_bytes` as
    /// its pack size: read once the replay is over (a collection still
    /// running at the last block finished), it is the final disk, as
    /// irmin's driver measures it after its last collection.
    pub fn reread_last_block(&mut self, pack_bytes: u64) {
        if let Some(last) = self.blocks.last_mut() {
            let io = ProcIo::now();
            last.pack_bytes = pack_bytes;
            last.rss_bytes = rss_bytes();
            last.read_bytes = io.read_bytes;
            last.write_bytes = io.write_bytes;
            last.read_syscalls = io.read_syscalls;
            last.write_syscalls = io.write_syscalls;
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
}
