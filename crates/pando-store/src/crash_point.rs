//! Named crash points for the kill test (docs/TESTING.md, test 1).
//!
//! Built with the feature `test-hooks` (the crate's own tests turn it on;
//! nothing an embedder links does): with `PANDO_CRASH_POINT=<name>` and
//! `PANDO_CRASH_AFTER=<n>` in the environment, the process aborts the n-th
//! time (from 1) it reaches the point `<name>`. Unset, a crash point costs
//! one relaxed atomic load. Without the feature, a crash point is nothing
//! and the environment is never read.
//!
//! Invariant: every point reached is listed in `POINTS` or `GC_POINTS`,
//! which the kill test arms one by one (asserted in `reach`).

#[cfg(feature = "test-hooks")]
use std::sync::OnceLock;
#[cfg(feature = "test-hooks")]
use std::sync::atomic::{AtomicU64, Ordering};

/// The points, in the order a commit reaches them.
#[cfg(feature = "test-hooks")]
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
#[cfg(feature = "test-hooks")]
pub const GC_POINTS: &[&str] =
    &["gc-planned", "gc-index-written", "gc-switched", "gc-removed", "gc-segment-written", "gc-relocated"];

#[cfg(feature = "test-hooks")]
struct Armed {
    name: String,
    after: u64,
    seen: AtomicU64,
}

#[cfg(feature = "test-hooks")]
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

/// Does nothing: crash points exist only with the feature `test-hooks`.
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn reach(_name: &str) {}

/// Aborts the process here if this point is armed and its turn has come.
#[cfg(feature = "test-hooks")]
#[inline]
pub fn reach(name: &str) {
    debug_assert!(POINTS.contains(&name) || GC_POINTS.contains(&name), "crash point `{name}` is listed for the kill test");
    if let Some(armed) = armed()
        && armed.name == name
        && armed.seen.fetch_add(1, Ordering::Relaxed) + 1 == armed.after
    {
        std::process::abort();
    }
}
