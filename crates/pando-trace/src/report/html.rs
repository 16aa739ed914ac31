//! A self-contained HTML page of a replay: numbers, checks and SVG charts
//! drawn here (no script, no font, nothing fetched when it is viewed).
//!
//! Invariant: block times are coloured by their share of the report's
//! `block_budget_ms`, and every place that shows the colours names that
//! budget (and, at the default, that it is Tezos mainnet's block time).

use std::fmt::Write;

use super::svg::{Chart, STYLE, escape, histogram};

use super::{DEFAULT_BLOCK_BUDGET_MS, Report, human_bytes};

/// Colour of a block time by its share of the block budget: under 1%,
/// under 10%, under 50%, and at least half.
fn budget_color(ms: f64, budget_ms: f64) -> &'static str {
    let share = ms / budget_ms;
    if share < 0.01 {
        "#2a9d5c"
    } else if share < 0.1 {
        "#9bbf2a"
    } else if share < 0.5 {
        "#e9a21f"
    } else {
        "#d1392b"
    }
}

/// What the block chart and its legend compare against, in words: "a 6 s
/// block budget, Tezos mainnet's block time" at the default.
pub fn budget_words(budget_ms: f64) -> String {
    let seconds = budget_ms / 1_000.0;
    let shown = if seconds.fract() == 0.0 { format!("{seconds:.0}") } else { format!("{seconds}") };
    if budget_ms == DEFAULT_BLOCK_BUDGET_MS {
        format!("a {shown} s block budget, Tezos mainnet's block time")
    } else {
        format!("a {shown} s block budget")
    }
}

pub fn render(report: &Report) -> String {
    let budget_ms = report.block_budget_ms;
    let budget = budget_words(budget_ms);
    let samples = &report.samples;
    let block_points: Vec<(f64, f64)> = samples.iter().map(|s| (s.block as f64, s.wall_us as f64 / 1_000.0)).collect();
    let max_block = samples.last().map_or(1.0, |s| s.block as f64);
    // Genesis writes the whole initial state: scale on the other blocks.
    let max_ms = block_points.iter().skip(1).map(|p| p.1).fold(0.0, f64::max);
    let genesis_ms = block_points.first().map_or(0.0, |p| p.1);
    let title = if genesis_ms > max_ms && block_points.len() > 1 {
        format!("Time per block, against {budget} (genesis, {genesis_ms:.0} ms, off scale)")
    } else {
        format!("Time per block, against {budget}")
    };
    let mut per_block = Chart::new(&title, "block", "ms", max_block, if max_ms > 0.0 { max_ms } else { genesis_ms });
    for gc in &report.gc {
        per_block = per_block.band(gc.start_block as f64, gc.end_block as f64, "#8a5aa8");
    }
    let per_block = per_block.dots(&block_points, |ms| budget_color(ms, budget_ms)).finish();
    let gc_rows: String = report
        .gc
        .iter()
        .map(|g| {
            format!(
                "<tr><td>{}..{}</td><td>{:.1}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                g.start_block,
                g.end_block,
                g.seconds,
                if g.whole_trace { "all" } else { "new" },
                g.max_pause_ms,
                g.collected_commits,
                human_bytes(g.bytes_before as f64),
                human_bytes(g.peak_bytes as f64),
                human_bytes(g.bytes_after as f64),
                human_bytes(g.copied_bytes as f64)
            )
        })
        .collect();
    let gc_table = if gc_rows.is_empty() {
        String::new()
    } else {
        format!(
            "<h2>Garbage collections (shaded in the block chart)</h2><table><tr><th>blocks</th><th>seconds</th><th>traced</th><th>writer pause ms</th><th>commits collected</th><th>pack before</th><th>at most</th><th>after</th><th>rewritten</th></tr>{gc_rows}</table>"
        )
    };
    let cumulative_points: Vec<(f64, f64)> = samples.iter().map(|s| (s.block as f64, s.at_s)).collect();
    let cumulative =
        Chart::new("Cumulative time", "block", "seconds", max_block, report.total_s).line(&cumulative_points, "#4f7cac").finish();
    let disk_points: Vec<(f64, f64)> = samples.iter().map(|s| (s.block as f64, s.pack_bytes as f64)).collect();
    // A collection shrinks the pack: the scale is the largest sample's.
    let disk_max = disk_points.iter().map(|p| p.1).fold(report.final_pack_bytes as f64, f64::max);
    let disk = Chart::new("Disk (pack bytes)", "block", "bytes", max_block, disk_max).line(&disk_points, "#8a5aa8").finish();
    let rss_points: Vec<(f64, f64)> = samples.iter().map(|s| (s.block as f64, s.rss_bytes as f64)).collect();
    let memory_chart = Chart::new("Memory (resident set)", "block", "bytes", max_block, report.peak_rss_bytes as f64)
        .line(&rss_points, "#c0642f")
        .finish();
    let histograms: Vec<String> = report
        .ops
        .iter()
        .filter(|op| op.latency_us.count > 0)
        .map(|op| {
            histogram(
                &format!("{} latency", op.kind),
                "latency, µs (upper bound of a power-of-two bucket)",
                "operations",
                &op.buckets,
            )
        })
        .collect();

    let mut rows = String::new();
    for op in report.ops.iter().filter(|op| op.latency_us.count > 0) {
        let l = &op.latency_us;
        let _ = write!(
            rows,
            "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td></tr>",
            op.kind, l.count, l.mean, l.p50, l.p99, l.p999, l.max
        );
    }
    let checks = &report.checks;
    let verdict =
        if checks.all_passed() { "<span class=\"ok\">all checks passed</span>" } else { "<span class=\"bad\">mismatches</span>" };
    let examples: String = checks.examples.iter().map(|e| format!("<li>{}</li>", escape(e))).collect();
    let b = &report.block_ms;
    let c = &report.commit_ms;
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>pando replay{partial}: {label}</title>
<style>
{style}</style></head><body>
<h1 id="title">pando replay{partial}: {label}</h1>
{stopped}<p class="sub">trace {trace} · store {store} · pando {version} · {cores} cores, {memory} memory</p>
<table>
<tr><th>blocks</th><td>{blocks}</td><th>blocks/s</th><td>{bps:.1}</td><th>operations/s</th><td>{ops:.0}</td></tr>
<tr><th>total</th><td>{total:.1} s</td><th>worst block</th><td>{worst:.1} ms (#{worst_block})</td><th>block p99 / p99.9</th><td>{bp99:.2} / {bp999:.2} ms</td></tr>
<tr><th>commit mean / p99</th><td>{cmean:.2} / {cp99:.2} ms</td><th>disk</th><td>{disk_final} ({disk_block}/block)</td><th>peak RSS</th><td>{rss}</td></tr>
<tr><th>read</th><td>{read} in {reads} calls</td><th>written</th><td>{written} in {writes} calls</td><th>checks</th><td>{verdict}</td></tr>
</table>
{rss_note}<p>Checked {hashes} commit hashes ({hash_bad} mismatches) and {reads_checked} reads ({read_bad} mismatches).</p>
<ul>{examples}</ul>
<p class="legend" id="budget">Block time against {budget_html}:<span style="background:#2a9d5c"></span>&lt; 1%<span style="background:#9bbf2a"></span>&lt; 10%<span style="background:#e9a21f"></span>&lt; 50%<span style="background:#d1392b"></span>≥ 50%</p>
<div class="grid2">{per_block}{cumulative}{disk}{memory_chart}</div>
{gc_table}
<h2>Latency per operation</h2>
<table><tr><th>operation</th><th>count</th><th>mean µs</th><th>p50 µs</th><th>p99 µs</th><th>p99.9 µs</th><th>max µs</th></tr>{rows}</table>
<div class="grid2">{histograms}</div>
</body></html>
"#,
        label = escape(&report.label),
        partial = report.partial_note().map_or_else(String::new, |note| format!(" ({note})")),
        stopped = report.stopped_early.as_ref().map_or_else(String::new, |why| format!(
            "<p class=\"bad\">Stopped {}: the figures are those of the blocks replayed, not of the whole trace.</p>\n",
            escape(why)
        )),
        trace = escape(&report.trace),
        store = escape(&report.store),
        version = report.pando_version,
        cores = report.machine.cores,
        memory = human_bytes(report.machine.memory_bytes as f64),
        blocks = report.blocks,
        bps = report.blocks_per_s,
        ops = report.ops_per_s,
        total = report.total_s,
        worst = report.worst_block_ms,
        worst_block = report.worst_block,
        bp99 = b.p99,
        bp999 = b.p999,
        cmean = c.mean,
        cp99 = c.p99,
        disk_final = human_bytes(report.final_pack_bytes as f64),
        disk_block = human_bytes(report.pack_bytes_per_block),
        rss = human_bytes(report.peak_rss_bytes as f64),
        rss_note = report
            .peak_rss_note()
            .map_or_else(String::new, |note| format!("<p class=\"sub\">Peak RSS: {}.</p>\n", escape(&note))),
        read = human_bytes(report.read_bytes as f64),
        reads = report.read_syscalls,
        written = human_bytes(report.write_bytes as f64),
        writes = report.write_syscalls,
        hashes = checks.hashes_checked,
        hash_bad = checks.hash_mismatches,
        reads_checked = checks.reads_checked,
        read_bad = checks.read_mismatches,
        histograms = histograms.join(""),
        style = STYLE,
        budget_html = escape(&budget),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_follow_the_budget_given() {
        // The thresholds are shares of the budget: 1%, 10%, 50%.
        let six = DEFAULT_BLOCK_BUDGET_MS;
        assert_eq!(budget_color(59.9, six), "#2a9d5c");
        assert_eq!(budget_color(60.0, six), "#9bbf2a");
        assert_eq!(budget_color(599.0, six), "#9bbf2a");
        assert_eq!(budget_color(600.0, six), "#e9a21f");
        assert_eq!(budget_color(2_999.0, six), "#e9a21f");
        assert_eq!(budget_color(3_000.0, six), "#d1392b");
        // The same block time is coloured differently against another budget.
        assert_eq!(budget_color(2_999.0, 30_000.0), "#9bbf2a");
        assert_eq!(budget_color(3_000.0, 1_000.0), "#d1392b");
    }

    #[test]
    fn the_budget_is_named_in_words() {
        assert_eq!(budget_words(6_000.0), "a 6 s block budget, Tezos mainnet's block time");
        assert_eq!(budget_words(30_000.0), "a 30 s block budget");
        assert_eq!(budget_words(500.0), "a 0.5 s block budget");
    }
}
