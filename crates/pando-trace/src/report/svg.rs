//! SVG charts drawn as text: axes with "nice" ticks, lines, dots and bars,
//! and the page style they share. Used by the replay report and by the
//! benchmark harness's page, so every page of the project looks alike.
//!
//! Invariant: the output is self-contained SVG (no script, no font, nothing
//! fetched); every text drawn from data is escaped.

use std::fmt::Write;

pub const WIDTH: f64 = 640.0;
pub const HEIGHT: f64 = 240.0;
pub const LEFT: f64 = 64.0;
pub const BOTTOM: f64 = 36.0;
pub const TOP: f64 = 28.0;
pub const RIGHT: f64 = 16.0;

pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A "nice" axis maximum and its tick step.
pub fn axis(max: f64) -> (f64, f64) {
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

pub fn tick_label(value: f64) -> String {
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

pub struct Chart {
    svg: String,
    x_max: f64,
    y_max: f64,
}

impl Chart {
    pub fn new(title: &str, x_label: &str, y_label: &str, x_max: f64, y_max: f64) -> Chart {
        Chart::with_axes(title, x_label, y_label, x_max, y_max, true)
    }

    pub fn with_axes(title: &str, x_label: &str, y_label: &str, x_max: f64, y_max: f64, x_ticks: bool) -> Chart {
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

    pub fn point(&self, x: f64, y: f64) -> (f64, f64) {
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        (LEFT + plot_w * (x / self.x_max).clamp(0.0, 1.0), TOP + plot_h * (1.0 - (y / self.y_max).clamp(0.0, 1.0)))
    }

    pub fn line(mut self, points: &[(f64, f64)], color: &str) -> Chart {
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

    pub fn dots(mut self, points: &[(f64, f64)], color: impl Fn(f64) -> &'static str) -> Chart {
        for &(x, y) in points {
            let (px, py) = self.point(x, y);
            let _ = write!(self.svg, r#"<circle cx="{px:.1}" cy="{py:.1}" r="1.6" fill="{}"/>"#, color(y));
        }
        self
    }

    pub fn finish(mut self) -> String {
        self.svg.push_str("</svg>");
        self.svg
    }
}

/// Bars of a histogram whose buckets are labelled by their upper bound.
pub fn histogram(title: &str, x_label: &str, y_label: &str, buckets: &[(f64, u64)]) -> String {
    let max = buckets.iter().map(|b| b.1).max().unwrap_or(0) as f64;
    let mut chart = Chart::with_axes(title, x_label, y_label, buckets.len() as f64, max, false);
    chart.x_max = buckets.len().max(1) as f64;
    let plot_w = WIDTH - LEFT - RIGHT;
    let bar_w = plot_w / chart.x_max;
    for (i, &(upper, count)) in buckets.iter().enumerate() {
        let (_, py) = chart.point(0.0, count as f64);
        let x = LEFT + bar_w * i as f64;
        let _ = write!(
            chart.svg,
            r##"<rect x="{x:.1}" y="{py:.1}" width="{:.1}" height="{:.1}" fill="#4f7cac"><title>≤ {upper}: {count}</title></rect>"##,
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

/// The style sheet of the project's pages (tables, chart grid, legends).
pub const STYLE: &str = "body { font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1360px; }
h1 { font-size: 22px; margin-bottom: 4px; } .sub { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: 8px 0 16px; } td, th { padding: 3px 10px; border-bottom: 1px solid #ddd; text-align: right; }
td:first-child, th:first-child { text-align: left; }
.grid2 { display: grid; grid-template-columns: repeat(auto-fill, minmax(620px, 1fr)); gap: 12px; }
.chart { width: 100%; background: #fafafa; border: 1px solid #e4e4e4; }
.chart .title { font-size: 13px; font-weight: 600; } .chart .tick { font-size: 10px; fill: #555; } .chart .small { font-size: 9px; }
.chart .label { font-size: 11px; fill: #333; } .chart .grid { stroke: #e2e2e2; }
.ok { color: #2a9d5c; font-weight: 600; } .bad { color: #d1392b; font-weight: 600; }
.legend span { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px; }
";

/// Colours for series drawn side by side, in order.
pub const PALETTE: [&str; 8] = ["#4f7cac", "#c0642f", "#2a9d5c", "#8a5aa8", "#d1392b", "#9bbf2a", "#e9a21f", "#555555"];

impl Chart {
    /// A shaded band from `x0` to `x1` (such as the time a collection ran).
    pub fn band(mut self, x0: f64, x1: f64, color: &str) -> Chart {
        let (px0, top) = self.point(x0, self.y_max);
        let (px1, bottom) = self.point(x1, 0.0);
        let _ = write!(
            self.svg,
            r#"<rect x="{px0:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{color}" fill-opacity="0.18"/>"#,
            (px1 - px0).max(1.0),
            bottom - top
        );
        self
    }

    /// A legend of `(name, colour)` in the top right corner.
    pub fn legend(mut self, series: &[(&str, &str)]) -> Chart {
        for (i, (name, color)) in series.iter().enumerate() {
            let y = TOP + 4.0 + 13.0 * i as f64;
            let x = WIDTH - RIGHT - 120.0;
            let _ = write!(
                self.svg,
                r#"<rect x="{x:.1}" y="{y:.1}" width="10" height="10" fill="{color}"/><text x="{:.1}" y="{:.1}" class="tick">{}</text>"#,
                x + 14.0,
                y + 9.0,
                escape(name)
            );
        }
        self
    }
}

/// Horizontal bars, one per `(label, value)`, each with its value written
/// after it (`unit` appended) and drawn in `PALETTE` order.
pub fn hbars(title: &str, unit: &str, items: &[(String, f64)]) -> String {
    const ROW: f64 = 22.0;
    // About 6 px per character of an 11 px label.
    let label_w = items.iter().map(|i| i.0.chars().count() as f64 * 6.0 + 12.0).fold(96.0, f64::max).min(WIDTH / 2.0);
    let height = TOP + ROW * items.len().max(1) as f64 + 8.0;
    let max = items.iter().map(|i| i.1).fold(0.0, f64::max);
    let (x_max, _) = axis(max);
    let plot_w = WIDTH - label_w - RIGHT - 80.0;
    let mut svg = format!(
        r#"<svg class="chart" viewBox="0 0 {WIDTH} {height:.0}" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{t}"><text x="8" y="16" class="title">{t}</text>"#,
        t = escape(title)
    );
    for (i, (label, value)) in items.iter().enumerate() {
        let y = TOP + ROW * i as f64;
        let text = match *value {
            v if v >= 1000.0 => tick_label(v),
            v if v >= 100.0 => format!("{v:.0}"),
            v if v >= 10.0 => format!("{v:.1}"),
            v => format!("{v:.2}"),
        };
        let w = if x_max > 0.0 && value.is_finite() { plot_w * (value / x_max).clamp(0.0, 1.0) } else { 0.0 };
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" class="label" text-anchor="end">{}</text><rect x="{label_w:.1}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{}"/><text x="{:.1}" y="{:.1}" class="tick">{} {}</text>"#,
            label_w - 6.0,
            y + 13.0,
            escape(label),
            ROW - 6.0,
            PALETTE[i % PALETTE.len()],
            label_w + w + 4.0,
            y + 13.0,
            text,
            escape(unit)
        );
    }
    svg.push_str("</svg>");
    svg
}
