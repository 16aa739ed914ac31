//! What an operator watches: structured logs through `tracing` and metrics
//! through the `metrics` facade, named here in one place.
//!
//! Both are facades: the application installs a subscriber (logs) and a
//! recorder (for example a Prometheus exporter; see the `telemetry`
//! example). Without them an event or a metric costs a check of a global.
//!
//! Invariants:
//! - Nothing here runs per operation of a tree; a commit records its
//!   metrics once, and a collection once per stage (tested by
//!   `a_store_reports_what_it_does`).
//! - Metric names are `pando_*` with Prometheus units (seconds, bytes,
//!   totals) (tested by `metric_names_are_pando_with_prometheus_units`).

use std::time::Duration;

/// Histogram: how long `Store::commit` took, fsync included.
pub const COMMIT_SECONDS: &str = "pando_commit_seconds";
/// Counter: commits made.
pub const COMMITS: &str = "pando_commits_total";
/// Counter: bytes appended to the pack.
pub const BYTES_WRITTEN: &str = "pando_bytes_written_total";
/// Gauge: bytes of the pack's files (what a collection frees shows here).
pub const PACK_BYTES: &str = "pando_pack_bytes";
/// Counters: lookups of the node cache that found the node, and that did not.
pub const CACHE_HITS: &str = "pando_cache_hits_total";
pub const CACHE_MISSES: &str = "pando_cache_misses_total";
/// Gauge: the running collection's phase (0 none, 1 scanning, 2 tracing,
/// 3 catching up, 4 relocating).
pub const GC_PHASE: &str = "pando_gc_phase";
/// Counter: collections finished, and failed.
pub const GC_COLLECTIONS: &str = "pando_gc_collections_total";
pub const GC_FAILURES: &str = "pando_gc_failures_total";
/// Counter: collections the retention policy found due while the last one
/// still ran (each running collection counted once): the collector is
/// behind the writer, and the store holds more than its retention.
pub const GC_OVERDUE: &str = "pando_gc_overdue_total";
/// Histograms: a collection's duration, and the longest the writer waited for it.
pub const GC_SECONDS: &str = "pando_gc_seconds";
pub const GC_PAUSE_SECONDS: &str = "pando_gc_writer_pause_seconds";

/// A commit slower than this is logged as a warning, by default
/// (`Options::slow_commit_warning`).
pub const SLOW_COMMIT: Duration = Duration::from_millis(500);

/// What one commit did, for the metrics.
pub(crate) struct CommitDone {
    pub took: Duration,
    pub bytes_written: u64,
    pub pack_bytes: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// `Options::slow_commit_warning`.
    pub warn_after: Option<Duration>,
}

pub(crate) fn commit_done(commit: &pando_core::Hash, done: &CommitDone) {
    metrics::histogram!(COMMIT_SECONDS).record(done.took.as_secs_f64());
    metrics::counter!(COMMITS).increment(1);
    metrics::counter!(BYTES_WRITTEN).increment(done.bytes_written);
    metrics::gauge!(PACK_BYTES).set(done.pack_bytes as f64);
    metrics::counter!(CACHE_HITS).absolute(done.cache_hits);
    metrics::counter!(CACHE_MISSES).absolute(done.cache_misses);
    if done.warn_after.is_some_and(|after| done.took >= after) {
        tracing::warn!(%commit, ms = done.took.as_millis() as u64, bytes = done.bytes_written, "slow commit");
    } else {
        tracing::debug!(%commit, us = done.took.as_micros() as u64, bytes = done.bytes_written, "commit");
    }
}

pub(crate) fn opened(dir: &str, writable: bool, commits: u64, generation: u64, recovered_bytes: u64, took: Duration) {
    if recovered_bytes > 0 {
        tracing::warn!(
            dir,
            recovered_bytes,
            "recovery: took in whole batches written after the last durable control write (a crash came before it)"
        );
    }
    tracing::info!(dir, writable, commits, generation, ms = took.as_millis() as u64, "store opened");
}

pub(crate) fn damaged_control_slot(slot: usize, error: &str, read_at_seq: u64) {
    tracing::warn!(
        slot,
        error,
        read_at_seq,
        "control: a synced slot is damaged (a crash during a control write, or damage): the store is read at the \
         newest valid state; a writable open or `pando check --repair` writes the slot again"
    );
}

pub(crate) fn cut_tail(file: &str, durable: u64, found: u64) {
    assert!(found > durable, "a tail is cut only past the durable end");
    tracing::warn!(
        file,
        durable,
        cut = found - durable,
        "recovery: cut bytes past the durable end (a write a crash interrupted)"
    );
}

pub(crate) fn poisoned(first: &str) {
    tracing::error!(first, "a write failed: the store refuses further writes until it is reopened");
}

/// A snapshot import failed: the caller has its error (often the
/// snapshot's damage, not a failed write), so only the debug log says
/// that the store now refuses writes.
pub(crate) fn import_failed(first: &str) {
    tracing::debug!(first, "snapshot import failed: the store refuses further writes until it is reopened");
}

pub(crate) fn gc_started(generation: u64, keep_offset: u64, boundary: u64) {
    metrics::gauge!(GC_PHASE).set(1.0);
    tracing::info!(generation, keep_offset, boundary, "collection started");
}

pub(crate) fn gc_phase(phase: crate::GcPhase) {
    metrics::gauge!(GC_PHASE).set(f64::from(phase as u8 + 1));
    tracing::info!(phase = ?phase, "collection phase");
}

pub(crate) fn gc_done(report: &crate::GcReport) {
    metrics::gauge!(GC_PHASE).set(0.0);
    metrics::counter!(GC_COLLECTIONS).increment(1);
    metrics::histogram!(GC_SECONDS).record(report.duration.as_secs_f64());
    metrics::histogram!(GC_PAUSE_SECONDS).record(report.longest_pause().as_secs_f64());
    tracing::info!(
        generation = report.last_generation,
        collected_commits = report.collected_commits,
        bytes_before = report.bytes_before,
        bytes_after = report.bytes_after,
        rewritten = report.copied_bytes,
        seconds = report.duration.as_secs_f64(),
        longest_pause_ms = report.longest_pause().as_secs_f64() * 1e3,
        "collection finished"
    );
    if let Some(error) = &report.relocation_error {
        tracing::warn!(error, "collection: a relocation step failed; the store stays at the step before");
    }
}

/// A collection came due `gc_every` commits after the running one
/// started, `running_for` ago.
pub(crate) fn gc_overdue(running: u64, running_for: Duration, gc_every: u64, keep_last: u64) {
    metrics::counter!(GC_OVERDUE).increment(1);
    tracing::warn!(
        running_generation = running,
        running_s = running_for.as_secs_f64(),
        gc_every,
        keep_last,
        "collections are behind the writer: one is due, the last is still running; the store holds more than its \
         retention until it finishes (a busy machine, or a slow disk)"
    );
}

pub(crate) fn gc_failed(error: &crate::Error) {
    metrics::gauge!(GC_PHASE).set(0.0);
    metrics::counter!(GC_FAILURES).increment(1);
    tracing::error!(%error, "collection failed; the store is as it was before it");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GcPhase;

    #[test]
    fn metric_names_are_pando_with_prometheus_units() {
        let counters = [COMMITS, BYTES_WRITTEN, CACHE_HITS, CACHE_MISSES, GC_COLLECTIONS, GC_FAILURES, GC_OVERDUE];
        let histograms = [COMMIT_SECONDS, GC_SECONDS, GC_PAUSE_SECONDS];
        let gauges = [PACK_BYTES, GC_PHASE];
        for name in counters {
            assert!(name.ends_with("_total"), "the counter {name} ends in _total");
        }
        for name in histograms {
            assert!(name.ends_with("_seconds"), "the histogram {name} ends in _seconds");
        }
        assert!(PACK_BYTES.ends_with("_bytes"));
        let mut all: Vec<&str> = counters.iter().chain(&histograms).chain(&gauges).copied().collect();
        assert!(all.iter().all(|name| name.starts_with("pando_") && !name["pando_".len()..].contains("pando")));
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), counters.len() + histograms.len() + gauges.len(), "each name names one metric");
        // The phase gauge's values, as `GC_PHASE` documents them.
        let phases = [GcPhase::Scanning, GcPhase::Tracing, GcPhase::CatchingUp, GcPhase::Relocating];
        assert_eq!(phases.map(|phase| phase as u8 + 1), [1, 2, 3, 4]);
    }
}
