//! pando-trace: the instrument by which context stores are compared.
//!
//! - [`file`](mod@file): reading and writing irmin's replayable traces (`IrmRepBT`);
//! - [`generate`]: a deterministic generator of Tezos-like traces;
//! - [`replay`]: replaying a trace into a pando store, checking recorded
//!   results and measuring what docs/MEASUREMENTS.md describes;
//! - [`report`]: the text summary, JSON and HTML page of a replay.
//!
//! Boundary: everything goes through `pando-store`'s public API; this crate
//! never touches a store's files.

#![forbid(unsafe_code)]

pub mod file;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod generate;
pub mod replay;
pub mod report;
pub mod stats;

pub use file::{TraceError, TraceReader, TraceWriter};
