//! Progress bars, and the logs written while one is shown.
//!
//! Invariants:
//! - While a bar is drawn, every log line goes through it
//!   (`ProgressBar::suspend`: the bar is cleared, the line written, the
//!   bar drawn again below it), so a log never lands inside the bar's
//!   line. With no bar, or a hidden one (standard error is not a
//!   terminal), a line is written as it is.
//! - The ETA shown is the run's average rate so far applied to what is
//!   left, and `?` until enough is done for that average to mean
//!   something: indicatif's own ETA follows the last few seconds' rate,
//!   which swings wildly around a heavy first block (`ETA 0s`, then
//!   `ETA 7m`, then settling).

use indicatif::{HumanDuration, ProgressBar, ProgressState, ProgressStyle, WeakProgressBar};
use std::io::Write;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The bar shown last, while it lives (a weak reference, so that the bar
/// goes when its command drops it): logs go through it.
static SHOWN: Mutex<Option<WeakProgressBar>> = Mutex::new(None);

/// No ETA before this share of the work is done...
const ETA_AFTER_SHARE: f64 = 0.01;
/// ...nor before this much time has passed.
const ETA_AFTER: Duration = Duration::from_secs(3);

/// `{eta}`: the time left at the average rate so far.
fn steady_eta(state: &ProgressState, w: &mut dyn std::fmt::Write) {
    let (pos, elapsed) = (state.pos(), state.elapsed());
    let eta = state.len().filter(|&len| pos > 0 && pos as f64 >= len as f64 * ETA_AFTER_SHARE && elapsed >= ETA_AFTER);
    let _ = match eta {
        Some(len) => {
            let left = elapsed.mul_f64(len.saturating_sub(pos) as f64 / pos as f64);
            write!(w, "{:#}", HumanDuration(left))
        }
        None => write!(w, "?"),
    };
}

/// A style from `template`, with the steady `{eta}`.
pub fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).expect("valid progress template").with_key("eta", steady_eta)
}

/// Makes `bar` the one logs go through.
pub fn show(bar: &ProgressBar) {
    *SHOWN.lock().unwrap_or_else(PoisonError::into_inner) = Some(bar.downgrade());
}

/// A bar of `len` steps drawn with `template`, shown (see `show`).
pub fn bar(len: u64, template: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(style(template));
    show(&bar);
    bar
}

/// A spinner drawn with `template`, shown (see `show`).
pub fn spinner(template: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(style(template));
    show(&bar);
    bar
}

/// Where `tracing` writes: standard error, around the bar shown.
pub struct Logs;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = LogLine;
    fn make_writer(&'a self) -> LogLine {
        LogLine(Vec::new())
    }
}

/// One event's text, written at once when dropped.
pub struct LogLine(Vec<u8>);

impl Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let bar = SHOWN.lock().unwrap_or_else(PoisonError::into_inner).as_ref().and_then(WeakProgressBar::upgrade);
        // As `errln!`: when standard error is closed there is nowhere left to say it.
        let write = || {
            let _ = std::io::stderr().lock().write_all(&self.0);
        };
        match bar {
            Some(bar) if !bar.is_finished() => bar.suspend(write),
            _ => write(),
        }
    }
}
