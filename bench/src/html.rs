//! The page of a benchmark run: the table of `run`, the floor, charts of
//! throughput, latency and resources per backend, block time over the run,
//! and pando's profile when one was taken in the same directory. Drawn with
//! the replay report's SVG charts: one self-contained file, nothing fetched.

use pando_trace::report::human_bytes;
use pando_trace::report::svg::{Chart, PALETTE, STYLE, escape, hbars};
use std::fmt::Write;

use crate::profile::Profile;
use crate::{RunResult, Stats};

/// Mean block time (ms) over windows of about 1% of the run: (block, ms).
fn windowed(block_us: &[u64]) -> Vec<(f64, f64)> {
    let window = (block_us.len() / 100).max(1);
    block_us
        .chunks(window)
        .enumerate()
        .map(|(i, w)| ((i * window + w.len()) as f64, w.iter().sum::<u64>() as f64 / w.len() as f64 / 1e3))
        .collect()
}

/// Cumulative seconds at each window's end: (block, s).
fn cumulative(block_us: &[u64]) -> Vec<(f64, f64)> {
    let window = (block_us.len() / 200).max(1);
    let mut total = 0u64;
    block_us
        .chunks(window)
        .enumerate()
        .map(|(i, w)| {
            total += w.iter().sum::<u64>();
            ((i * window + w.len()) as f64, total as f64 / 1e6)
        })
        .collect()
}

pub fn render(workload: &str, results: &[RunResult], floor: &Stats, profile: Option<&Profile>) -> String {
    let pando = results.iter().find(|r| r.backend.starts_with("pando")).cloned().unwrap_or_default();
    let names: Vec<&str> = results.iter().map(|r| r.backend.as_str()).collect();
    let legend: Vec<(&str, &str)> = names.iter().enumerate().map(|(i, n)| (*n, PALETTE[i % PALETTE.len()])).collect();
    let bars = |title: &str, unit: &str, value: &dyn Fn(&RunResult) -> f64| {
        hbars(title, unit, &results.iter().map(|r| (r.backend.clone(), value(r))).collect::<Vec<_>>())
    };
    let mut charts = vec![
        bars("Blocks per second (higher is better)", "blocks/s", &RunResult::blocks_per_s),
        bars("Commit latency p99, ms (lower is better)", "ms", &|r| r.commit_ms.p99),
        bars("Written, MB (lower is better)", "MB", &|r| r.bytes_written as f64 / 1e6),
        bars("Disk at the end, MB", "MB", &|r| r.disk_bytes as f64 / 1e6),
        bars("Peak resident memory, MB", "MB", &|r| r.peak_rss_bytes as f64 / 1e6),
    ];
    let max_blocks = results.iter().map(|r| r.block_us.len()).max().unwrap_or(0) as f64;
    if max_blocks > 0.0 {
        let series: Vec<Vec<(f64, f64)>> = results.iter().map(|r| windowed(&r.block_us)).collect();
        // The first window holds genesis (the whole initial state): scaled on the rest.
        let y_max = series.iter().flat_map(|s| s.iter().skip(1)).map(|p| p.1).fold(0.0, f64::max);
        let mut chart = Chart::new(
            "Block time, mean per 1% of the run (the first 1%, with genesis, off scale)",
            "block",
            "ms",
            max_blocks,
            y_max,
        );
        for (i, points) in series.iter().enumerate() {
            chart = chart.line(points, PALETTE[i % PALETTE.len()]);
        }
        charts.push(chart.legend(&legend).finish());
        let series: Vec<Vec<(f64, f64)>> = results.iter().map(|r| cumulative(&r.block_us)).collect();
        let y_max = series.iter().flatten().map(|p| p.1).fold(0.0, f64::max);
        let mut chart = Chart::new("Cumulative time", "block", "seconds", max_blocks, y_max);
        for (i, points) in series.iter().enumerate() {
            chart = chart.line(points, PALETTE[i % PALETTE.len()]);
        }
        charts.push(chart.legend(&legend).finish());
    }

    let mut rows = String::new();
    let pando_bps = pando.blocks_per_s();
    for r in results {
        let bps = r.blocks_per_s();
        let _ = write!(
            rows,
            "<tr><td>{}</td><td>{bps:.1}</td><td>{}</td><td>{:.0}</td><td>{:.0}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&r.backend),
            if pando_bps > 0.0 { format!("{:.2}x", bps / pando_bps) } else { "-".into() },
            r.updates_per_s(),
            r.reads_per_s(),
            r.block_ms.p50,
            r.commit_ms.p50,
            r.commit_ms.p99,
            r.commit_ms.max,
            human_bytes(r.bytes_written as f64),
            human_bytes(r.disk_bytes as f64),
            human_bytes(r.peak_rss_bytes as f64),
        );
    }

    let profile_html = profile.map_or_else(String::new, |p| {
        let mut rows = String::new();
        for (category, ms) in &p.split {
            let _ = write!(
                rows,
                "<tr><td>{}</td><td>{ms:.3}</td><td>{:.1}%</td></tr>",
                escape(category),
                100.0 * ms / p.block_ms.max(1e-9)
            );
        }
        format!(
            r#"<h2>Where {backend}'s time goes on {workload}</h2>
<p>A separate run of {blocks} blocks under <code>perf record</code> (mean {block_ms:.2} ms per block, {samples} CPU samples). Reads, writes and fsyncs: the wall time the store measured around each system call. The rest of the block: split by where the CPU samples fell outside those calls, each sample by its innermost frame.</p>
<div class="grid2"><table><tr><th>where</th><th>ms per block</th><th>share</th></tr>{rows}</table>{chart}</div>"#,
            backend = escape(&p.backend),
            workload = escape(&p.workload),
            blocks = p.blocks,
            block_ms = p.block_ms,
            samples = p.samples,
            chart = hbars("ms per block", "ms", &p.split),
        )
    });

    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>pando-bench: {workload}</title>
<style>
{STYLE}</style></head><body>
<h1 id="title">pando-bench: {workload}</h1>
<p class="sub">{blocks} measured blocks per backend, fsync per commit, each backend in a process of its own; ratios are to {pando_name}.</p>
<table><tr><th>backend</th><th>blocks/s</th><th>ratio</th><th>updates/s</th><th>reads/s</th><th>block p50 ms</th><th>commit p50 ms</th><th>commit p99 ms</th><th>commit max ms</th><th>written</th><th>disk</th><th>peak RSS</th></tr>{rows}</table>
<p>The floor, measured on the same machine after the run: BLAKE2b over the bytes {pando_name} wrote per block (in 128-byte messages) and one fsync; genesis left out. Median {floor:.2} ms per block; {pando_name}'s median block takes {pando_p50:.2} ms, <b>{multiple:.1}x the floor</b>.</p>
<div class="grid2">{charts}</div>
{profile_html}
</body></html>
"#,
        workload = escape(workload),
        blocks = pando.blocks,
        pando_name = escape(&pando.backend),
        floor = floor.p50,
        pando_p50 = pando.block_ms.p50,
        multiple = pando.block_ms.p50 / floor.p50.max(1e-9),
        charts = charts.join(""),
    )
}
