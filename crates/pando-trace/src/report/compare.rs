//! Two replay reports side by side, with ratios (second / first).

use std::fmt::Write;

use super::Report;

fn ratio(a: f64, b: f64) -> String {
    if a == 0.0 { "-".into() } else { format!("{:.2}x", b / a) }
}

/// Warnings for `a` and `b` compared: one for each run that stopped
/// before the end of its trace (its figures are not the whole trace's).
pub fn warnings(a: &Report, b: &Report) -> Vec<String> {
    [("A", a), ("B", b)]
        .into_iter()
        .filter_map(|(name, report)| {
            report.partial_note().map(|note| format!("{name} is a partial run ({note}): its figures are not the whole trace's"))
        })
        .collect()
}

/// `a` and `b` side by side; the columns are headed A and B, and a legend
/// above gives each run's label (with a partial run's note).
pub fn render(a: &Report, b: &Report) -> String {
    let mut out = String::new();
    let legend = |report: &Report| match report.partial_note() {
        Some(note) => format!("{} ({note})", report.label),
        None => report.label.clone(),
    };
    let _ = writeln!(out, "A: {}\nB: {}\n", legend(a), legend(b));
    let _ = writeln!(out, "{:<28} {:>16} {:>16} {:>8}", "", "A", "B", "B/A");
    let mut row = |name: &str, x: f64, y: f64, digits: usize| {
        let _ = writeln!(out, "{name:<28} {x:>16.digits$} {y:>16.digits$} {:>8}", ratio(x, y));
    };
    row("blocks", a.blocks as f64, b.blocks as f64, 0);
    row("blocks/s", a.blocks_per_s, b.blocks_per_s, 1);
    row("operations/s", a.ops_per_s, b.ops_per_s, 0);
    row("total s", a.total_s, b.total_s, 1);
    row("block mean ms", a.block_ms.mean, b.block_ms.mean, 2);
    row("block p99 ms", a.block_ms.p99, b.block_ms.p99, 2);
    row("block p99.9 ms", a.block_ms.p999, b.block_ms.p999, 2);
    row("worst block ms", a.worst_block_ms, b.worst_block_ms, 2);
    row("commit mean ms", a.commit_ms.mean, b.commit_ms.mean, 2);
    row("commit p99 ms", a.commit_ms.p99, b.commit_ms.p99, 2);
    row("disk bytes", a.final_pack_bytes as f64, b.final_pack_bytes as f64, 0);
    row("disk bytes/block", a.pack_bytes_per_block, b.pack_bytes_per_block, 0);
    row("peak RSS bytes", a.peak_rss_bytes as f64, b.peak_rss_bytes as f64, 0);
    row("bytes read", a.read_bytes as f64, b.read_bytes as f64, 0);
    row("bytes written", a.write_bytes as f64, b.write_bytes as f64, 0);
    for (x, y) in a.ops.iter().zip(&b.ops) {
        if x.latency_us.count + y.latency_us.count > 0 {
            row(&format!("{} mean µs", x.kind), x.latency_us.mean, y.latency_us.mean, 2);
            row(&format!("{} p99 µs", x.kind), x.latency_us.p99, y.latency_us.p99, 2);
        }
    }
    out
}
