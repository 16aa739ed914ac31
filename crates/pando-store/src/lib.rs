//! pando-store: a versioned Merkle store, bit-exact with the Tezos context
//! hash, on append-only files.
//!
//! Module map (dependency order): [`io`] (all file access) → [`format`]
//! (bytes on disk) → [`tree`] (immutable trees over a loader) → [`pack`],
//! [`cache`], [`dict`], [`gc_plan`], [`inspect`] → [`store`] (open, commit,
//! checkout, recovery, garbage collection, inspection).
//!
//! Invariants kept across modules:
//! - A commit that returned is durable under the default sync policy.
//! - Everything read from disk is checked (record checksum) before use.
//! - No panic on any bytes read from disk: damage is an [`Error`].

pub mod cache;
pub mod crash_point;
pub mod dict;
pub mod error;
pub mod format;
pub mod gc_plan;
pub mod inspect;
pub mod io;
pub mod options;
pub mod pack;
pub mod record;
pub mod snapshot;
pub mod store;
mod sync;
pub mod tree;

pub use error::{Error, Result};
pub use inspect::{InspectOptions, Inspection};
pub use options::{Options, Retention, SyncPolicy};
pub use pando_core::{CommitInfo, Hash, Kind};
pub use snapshot::SnapshotSummary;
pub use store::{
    CheckPhase, CheckProgress, CheckReport, CheckScope, Commit, GcPhase, GcReport, GcStatus, Problem, Store, StoreStats,
};
pub use tree::{Depth, Order, Tree};
