//! The text summary of a replay, for people.

use std::fmt::Write;

use super::{Report, human_bytes};

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let w = &mut out;
    let partial = report.partial_note().map_or_else(String::new, |note| format!(" ({note})"));
    let _ = writeln!(w, "pando {} replay{partial}: {}", report.pando_version, report.label);
    let _ = writeln!(w, "  trace   {}", report.trace);
    let _ = writeln!(w, "  store   {}", report.store);
    let _ = writeln!(w, "  machine {} cores, {} memory", report.machine.cores, human_bytes(report.machine.memory_bytes as f64));
    if let Some(why) = &report.stopped_early {
        let _ = writeln!(w, "  stopped {why}: the figures below are those of the blocks replayed, not of the whole trace");
    }
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "{} blocks, {} operations in {:.1} s: {:.1} blocks/s, {:.0} operations/s",
        report.blocks, report.rows, report.total_s, report.blocks_per_s, report.ops_per_s
    );
    let b = &report.block_ms;
    let _ = writeln!(
        w,
        "block time (ms): mean {:.2}, p50 {:.2}, p99 {:.2}, p99.9 {:.2}, max {:.2} (block {})",
        b.mean, b.p50, b.p99, b.p999, b.max, report.worst_block
    );
    let c = &report.commit_ms;
    let _ = writeln!(
        w,
        "commit (ms):     mean {:.2}, p50 {:.2}, p99 {:.2}, p99.9 {:.2}, max {:.2}",
        c.mean, c.p50, c.p99, c.p999, c.max
    );
    if !report.gc.is_empty() {
        let longest = report.gc.iter().map(|g| g.max_pause_ms).fold(0.0, f64::max);
        let _ = writeln!(w, "garbage collections: {}, longest writer pause {longest:.2} ms", report.gc.len());
        for g in &report.gc {
            let _ = writeln!(
                w,
                "  blocks {}..{}: {:.1} s, {}, {} commits collected, pack {} -> {} (at most {}), {} rewritten, writer paused {:.2} ms (switch {:.2}, steps {:.2})",
                g.start_block,
                g.end_block,
                g.seconds,
                if g.whole_trace { "whole trace" } else { "new records traced" },
                g.collected_commits,
                human_bytes(g.bytes_before as f64),
                human_bytes(g.bytes_after as f64),
                human_bytes(g.peak_bytes as f64),
                human_bytes(g.copied_bytes as f64),
                g.max_pause_ms,
                g.switch_pause_ms,
                g.step_pause_ms
            );
        }
    }
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "{:<10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "operation", "count", "mean µs", "p50 µs", "p99 µs", "p99.9 µs", "max µs"
    );
    for op in &report.ops {
        let l = &op.latency_us;
        if l.count == 0 {
            continue;
        }
        let _ = writeln!(
            w,
            "{:<10} {:>10} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
            op.kind, l.count, l.mean, l.p50, l.p99, l.p999, l.max
        );
    }
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "disk: {} at the end, {} per block",
        human_bytes(report.final_pack_bytes as f64),
        human_bytes(report.pack_bytes_per_block)
    );
    let note = report.peak_rss_note().map_or_else(String::new, |note| format!(" ({note})"));
    let _ = writeln!(
        w,
        "memory: peak RSS {}{note}, final {}",
        human_bytes(report.peak_rss_bytes as f64),
        human_bytes(report.final_rss_bytes as f64)
    );
    let _ = writeln!(
        w,
        "I/O: read {} in {} calls, wrote {} in {} calls",
        human_bytes(report.read_bytes as f64),
        report.read_syscalls,
        human_bytes(report.write_bytes as f64),
        report.write_syscalls
    );
    let checks = &report.checks;
    let _ = writeln!(
        w,
        "checks: {} commit hashes ({} mismatches), {} reads ({} mismatches), {} copies from missing paths",
        checks.hashes_checked, checks.hash_mismatches, checks.reads_checked, checks.read_mismatches, checks.missing_copy_sources
    );
    if checks.refused_transitions > 0 {
        let _ = writeln!(w, "store: {} refused transitions of an inode's writer state (a bug)", checks.refused_transitions);
    }
    for example in &checks.examples {
        let _ = writeln!(w, "  {example}");
    }
    out
}
