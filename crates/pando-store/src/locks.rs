//! The locks and atomics the pack's readers, its writer and a collection's
//! switch share: parking_lot's and std's, or, with the `shuttle` feature,
//! Shuttle's, so that a test can explore their interleavings
//! (`pack::shuttle_tests`: `cargo test -p pando-store --features shuttle --lib shuttle`).
//!
//! Invariant: the two variants have the same API (guards, no poisoning;
//! tested by `shuttle_readers_never_see_a_switch`, which builds the pack
//! on Shuttle's).

#[cfg(not(feature = "shuttle"))]
pub use parking_lot::RwLock;
#[cfg(not(feature = "shuttle"))]
pub use std::sync::atomic::{AtomicBool, AtomicU64};

#[cfg(feature = "shuttle")]
pub use shuttle::sync::atomic::{AtomicBool, AtomicU64};

/// Shuttle's `RwLock` with parking_lot's API (a panic while holding it
/// fails the test anyway).
#[cfg(feature = "shuttle")]
pub struct RwLock<T>(shuttle::sync::RwLock<T>);

#[cfg(feature = "shuttle")]
impl<T> RwLock<T> {
    pub fn new(value: T) -> RwLock<T> {
        RwLock(shuttle::sync::RwLock::new(value))
    }

    pub fn read(&self) -> shuttle::sync::RwLockReadGuard<'_, T> {
        self.0.read().expect("not poisoned")
    }

    pub fn write(&self) -> shuttle::sync::RwLockWriteGuard<'_, T> {
        self.0.write().expect("not poisoned")
    }
}
