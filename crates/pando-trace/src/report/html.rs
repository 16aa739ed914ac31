//! A self-contained HTML page of a replay: numbers, checks and SVG charts
//! drawn here (no script, no font, nothing fetched when it is viewed).

use std::fmt::Write;

use super::{BLOCK_BUDGET_MS, Report, human_bytes};

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 240.0;
const LEFT: f64 = 64.0;
const BOTTOM: f64 = 36.0;
const TOP: f64 = 28.0;
const RIGHT: f64 = 16.0;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A "nice" axis maximum and its tick step.
fn axis(max: f64) -> (f64, f64) {
    if max <= 0.0 || !max.is_finite() {
        return (1.0, 0.25);
    }
    let magnitude = 10f64.powf(max.log10().floor());
    for step in [0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 2.5, 5.0, 10.0] {
        let step = step * magnitude;
        if max / step <= 5.0 {
            return ((max / step).ceil() * step, step);
        }
    }
    (max, max / 5.0)
}

fn tick_label(value: f64) -> String {
    if value == 0.0 {
        "0".into()
    } else if value.abs() >= 1e9 {
        format!("{:.1}G", value / 1e9)
    } else if value.abs() >= 1e6 {
        format!("{:.1}M", value / 1e6)
    } else if value.abs() >= 1e3 {
        format!("{:.1}k", value / 1e3)
    } else if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

/// Colour of a block time by how close it comes to the block budget.
fn budget_color(ms: f64) -> &'static str {
    let share = ms / BLOCK_BUDGET_MS;
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

struct Chart {
    svg: String,
    x_max: f64,
    y_max: f64,
}

impl Chart {
    fn new(title: &str, x_label: &str, y_label: &str, x_max: f64, y_max: f64) -> Chart {
        Chart::with_axes(title, x_label, y_label, x_max, y_max, true)
    }

    fn with_axes(title: &str, x_label: &str, y_label: &str, x_max: f64, y_max: f64, x_ticks: bool) -> Chart {
        let (x_max, x_step) = axis(x_max);
        let (y_max, y_step) = axis(y_max);
        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{t}"><text x="{LEFT}" y="16" class="title">{t}</text>"#,
            t = escape(title)
        );
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        let mut y = 0.0;
        while y <= y_max + y_step / 2.0 {
            let py = TOP + plot_h * (1.0 - y / y_max);
            let _ = write!(
                svg,
                r#"<line x1="{LEFT}" x2="{}" y1="{py:.1}" y2="{py:.1}" class="grid"/><text x="{}" y="{:.1}" class="tick" text-anchor="end">{}</text>"#,
                WIDTH - RIGHT,
                LEFT - 6.0,
                py + 4.0,
                tick_label(y)
            );
            y += y_step;
        }
        let mut x = 0.0;
        while x_ticks && x <= x_max + x_step / 2.0 {
            let px = LEFT + plot_w * x / x_max;
            let _ = write!(
                svg,
                r#"<text x="{px:.1}" y="{:.1}" class="tick" text-anchor="middle">{}</text>"#,
                HEIGHT - BOTTOM + 16.0,
                tick_label(x)
            );
            x += x_step;
        }
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" class="label" text-anchor="middle">{}</text><text x="14" y="{:.1}" class="label" text-anchor="middle" transform="rotate(-90 14 {:.1})">{}</text>"#,
            LEFT + plot_w / 2.0,
            HEIGHT - 4.0,
            escape(x_label),
            TOP + plot_h / 2.0,
            TOP + plot_h / 2.0,
            escape(y_label)
        );
        Chart { svg, x_max, y_max }
    }

    fn point(&self, x: f64, y: f64) -> (f64, f64) {
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        (LEFT + plot_w * (x / self.x_max).clamp(0.0, 1.0), TOP + plot_h * (1.0 - (y / self.y_max).clamp(0.0, 1.0)))
    }

    fn line(mut self, points: &[(f64, f64)], color: &str) -> Chart {
        if points.is_empty() {
            return self;
        }
        let path: Vec<String> = points
            .iter()
            .map(|&(x, y)| {
                let (px, py) = self.point(x, y);
                format!("{px:.1},{py:.1}")
            })
            .collect();
        let _ = write!(self.svg, r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{}"/>"#, path.join(" "));
        self
    }

    fn dots(mut self, points: &[(f64, f64)], color: impl Fn(f64) -> &'static str) -> Chart {
        for &(x, y) in points {
            let (px, py) = self.point(x, y);
            let _ = write!(self.svg, r#"<circle cx="{px:.1}" cy="{py:.1}" r="1.6" fill="{}"/>"#, color(y));
        }
        self
    }

    fn finish(mut self) -> String {
        self.svg.push_str("</svg>");
        self.svg
    }
}

/// Bars of a histogram whose buckets are labelled by their upper bound.
fn bars(title: &str, buckets: &[(f64, u64)]) -> String {
    let max = buckets.iter().map(|b| b.1).max().unwrap_or(0) as f64;
    let mut chart = Chart::with_axes(
        title,
        "latency, µs (upper bound of a power-of-two bucket)",
        "operations",
        buckets.len() as f64,
        max,
        false,
    );
    chart.x_max = buckets.len().max(1) as f64;
    let plot_w = WIDTH - LEFT - RIGHT;
    let bar_w = plot_w / chart.x_max;
    for (i, &(upper, count)) in buckets.iter().enumerate() {
        let (_, py) = chart.point(0.0, count as f64);
        let x = LEFT + bar_w * i as f64;
        let _ = write!(
            chart.svg,
            r##"<rect x="{x:.1}" y="{py:.1}" width="{:.1}" height="{:.1}" fill="#4f7cac"><title>≤ {upper} µs: {count}</title></rect>"##,
            (bar_w - 1.0).max(1.0),
            HEIGHT - BOTTOM - py
        );
    }
    // Bucket labels replace the numeric x axis.
    for (i, &(upper, _)) in buckets.iter().enumerate().step_by((buckets.len() / 8).max(1)) {
        let x = LEFT + bar_w * (i as f64 + 0.5);
        let _ = write!(
            chart.svg,
            r#"<text x="{x:.1}" y="{:.1}" class="tick small" text-anchor="middle">{}</text>"#,
            HEIGHT - BOTTOM + 16.0,
            tick_label(upper)
        );
    }
    chart.finish()
}

pub fn render(report: &Report) -> String {
    let samples = &report.samples;
    let block_points: Vec<(f64, f64)> = samples.iter().map(|s| (s.block as f64, s.wall_us as f64 / 1_000.0)).collect();
    let max_block = samples.last().map_or(1.0, |s| s.block as f64);
    // Genesis writes the whole initial state: scale on the other blocks.
    let max_ms = block_points.iter().skip(1).map(|p| p.1).fold(0.0, f64::max);
    let genesis_ms = block_points.first().map_or(0.0, |p| p.1);
    let title = if genesis_ms > max_ms && block_points.len() > 1 {
        format!("Time per block, against the 30 s budget (genesis, {genesis_ms:.0} ms, off scale)")
    } else {
        "Time per block, against the 30 s budget".to_string()
    };
    let per_block = Chart::new(&title, "block", "ms", max_block, if max_ms > 0.0 { max_ms } else { genesis_ms })
        .dots(&block_points, budget_color)
        .finish();
    let cumulative_points: Vec<(f64, f64)> = samples.iter().map(|s| (s.block as f64, s.at_s)).collect();
    let cumulative =
        Chart::new("Cumulative time", "block", "seconds", max_block, report.total_s).line(&cumulative_points, "#4f7cac").finish();
    let disk_points: Vec<(f64, f64)> = samples.iter().map(|s| (s.block as f64, s.pack_bytes as f64)).collect();
    let disk = Chart::new("Disk (pack bytes)", "block", "bytes", max_block, report.final_pack_bytes as f64)
        .line(&disk_points, "#8a5aa8")
        .finish();
    let rss_points: Vec<(f64, f64)> = samples.iter().map(|s| (s.block as f64, s.rss_bytes as f64)).collect();
    let memory_chart = Chart::new("Memory (resident set)", "block", "bytes", max_block, report.peak_rss_bytes as f64)
        .line(&rss_points, "#c0642f")
        .finish();
    let histograms: Vec<String> = report
        .ops
        .iter()
        .filter(|op| op.latency_us.count > 0)
        .map(|op| bars(&format!("{} latency", op.kind), &op.buckets))
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
<html lang="en"><head><meta charset="utf-8"><title>pando replay: {label}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1360px; }}
h1 {{ font-size: 22px; margin-bottom: 4px; }} .sub {{ color: #666; margin-top: 0; }}
table {{ border-collapse: collapse; margin: 8px 0 16px; }} td, th {{ padding: 3px 10px; border-bottom: 1px solid #ddd; text-align: right; }}
td:first-child, th:first-child {{ text-align: left; }}
.grid2 {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(620px, 1fr)); gap: 12px; }}
.chart {{ width: 100%; background: #fafafa; border: 1px solid #e4e4e4; }}
.chart .title {{ font-size: 13px; font-weight: 600; }} .chart .tick {{ font-size: 10px; fill: #555; }} .chart .small {{ font-size: 9px; }}
.chart .label {{ font-size: 11px; fill: #333; }} .chart .grid {{ stroke: #e2e2e2; }}
.ok {{ color: #2a9d5c; font-weight: 600; }} .bad {{ color: #d1392b; font-weight: 600; }}
.legend span {{ display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px; }}
</style></head><body>
<h1 id="title">pando replay: {label}</h1>
<p class="sub">trace {trace} · store {store} · pando {version} · {cores} cores, {memory} memory</p>
<table>
<tr><th>blocks</th><td>{blocks}</td><th>blocks/s</th><td>{bps:.1}</td><th>operations/s</th><td>{ops:.0}</td></tr>
<tr><th>total</th><td>{total:.1} s</td><th>worst block</th><td>{worst:.1} ms (#{worst_block})</td><th>block p99 / p99.9</th><td>{bp99:.2} / {bp999:.2} ms</td></tr>
<tr><th>commit mean / p99</th><td>{cmean:.2} / {cp99:.2} ms</td><th>disk</th><td>{disk_final} ({disk_block}/block)</td><th>peak RSS</th><td>{rss}</td></tr>
<tr><th>read</th><td>{read} in {reads} calls</td><th>written</th><td>{written} in {writes} calls</td><th>checks</th><td>{verdict}</td></tr>
</table>
<p>Checked {hashes} commit hashes ({hash_bad} mismatches) and {reads_checked} reads ({read_bad} mismatches).</p>
<ul>{examples}</ul>
<p class="legend">Block time against the 30 s budget:<span style="background:#2a9d5c"></span>&lt; 1%<span style="background:#9bbf2a"></span>&lt; 10%<span style="background:#e9a21f"></span>&lt; 50%<span style="background:#d1392b"></span>≥ 50%</p>
<div class="grid2">{per_block}{cumulative}{disk}{memory_chart}</div>
<h2>Latency per operation</h2>
<table><tr><th>operation</th><th>count</th><th>mean µs</th><th>p50 µs</th><th>p99 µs</th><th>p99.9 µs</th><th>max µs</th></tr>{rows}</table>
<div class="grid2">{histograms}</div>
</body></html>
"#,
        label = escape(&report.label),
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
        read = human_bytes(report.read_bytes as f64),
        reads = report.read_syscalls,
        written = human_bytes(report.write_bytes as f64),
        writes = report.write_syscalls,
        hashes = checks.hashes_checked,
        hash_bad = checks.hash_mismatches,
        reads_checked = checks.reads_checked,
        read_bad = checks.read_mismatches,
        histograms = histograms.join(""),
    )
}
