//! Named crash points for the kill test (RELIABILITY.md, test 1).
//!
//! With `PANDO_CRASH_POINT=<name>` and `PANDO_CRASH_AFTER=<n>` in the
//! environment, the process aborts the n-th time (from 1) it reaches the
//! point `<name>`. Unset, a crash point costs one relaxed atomic load.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The points, in the order a commit reaches them.
pub const POINTS: &[&str] = &[
    "chunk-created",
    "after-spill",
    "after-append",
    "after-data-sync",
    "after-control-hint",
    "after-checkpoint",
    "after-control-write",
    "after-control-sync",
];

/// The points of a garbage collection, in order: its files written and
/// synced; the new index completed (in the switch); the switch's control
/// write synced; the old files removed.
pub const GC_POINTS: &[&str] =
    &["gc-planned", "gc-index-written", "gc-switched", "gc-removed", "gc-segment-written", "gc-relocated"];

struct Armed {
    name: String,
    after: u64,
    seen: AtomicU64,
}

fn armed() -> Option<&'static Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let name = std::env::var("PANDO_CRASH_POINT").ok()?;
            let after = std::env::var("PANDO_CRASH_AFTER").ok().and_then(|n| n.parse().ok()).unwrap_or(1);
            Some(Armed { name, after, seen: AtomicU64::new(0) })
        })
        .as_ref()
}

/// Aborts the process here if this point is armed and its turn has come.
#[inline]
pub fn reach(name: &str) {
    if let Some(armed) = armed()
        && armed.name == name
        && armed.seen.fetch_add(1, Ordering::Relaxed) + 1 == armed.after
    {
        std::process::abort();
    }
}
