//! pando-store: a versioned Merkle store, bit-exact with the Tezos context
//! hash, on append-only files.
//!
//! Module map (dependency order): [`io`] (all file access) → `node` (the
//! trie's nodes as the store holds them in memory) → `format` (bytes on
//! disk) → [`tree`] (immutable trees over a loader) → `pack`,
//! `cache`, `dict`, `gc_plan`, [`inspection`] → [`store`] (open and recovery;
//! in folders by role, the writer's commit pipeline `write`, the readers
//! `read`, garbage collection `gc`, and the tools `tools`: check,
//! inspect, import, repair). The modules without
//! links are private; the crate's own tests reach them through the feature
//! `test-hooks`, which also arms crash points and builds the fault-injecting
//! storage. An embedder's build has none of these.
//!
//! Invariants kept across modules:
//! - A commit that returned is durable under the default sync policy
//!   (tested by `kill_at_random_moments_and_crash_points` and
//!   `every_operation_fails_in_turn_then_crash`).
//! - Everything read from disk is checked (record checksum) before use
//!   (tested by `bit_flips_at_rest_are_detected`).
//! - What is accepted reads back: a contents value, a commit's parents,
//!   author or message past what a record holds is refused where it is
//!   given, and nothing changes (tested by
//!   `a_value_over_a_record_is_refused_where_it_is_added`,
//!   `a_commit_of_too_many_parents_is_refused` and
//!   `a_commit_author_or_message_over_the_limit_is_refused`).
//! - No panic on any bytes read from disk: damage is an [`Error`] (tested
//!   by `truncated_files_are_rejected_precisely` and
//!   `the_fuzz_seeds_decode_without_a_panic`).

// Unsafe code only where a site says why (`#[expect(unsafe_code)]`): the
// hash memo's cell and one system call; scripts/unsafe-check.sh runs them
// under Miri and AddressSanitizer.
#![deny(unsafe_code)]

/// Declares modules private to the crate that its own tests reach: public
/// with the feature `test-hooks` (which only this crate's tests turn on),
/// `pub(crate)` in what an embedder links.
macro_rules! internal {
    ($($name:ident;)*) => {$(
        #[cfg(feature = "test-hooks")]
        pub mod $name;
        #[cfg(not(feature = "test-hooks"))]
        pub(crate) mod $name;
    )*};
}

internal! {
    cache;
    crash_point;
    dict;
    format;
    gc_plan;
    node;
    pack;
}
pub mod error;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod inspection;
pub mod io;
/// Checks that redo a result the slow way (a flat cache hit against a
/// descent, a proof against its own hash): in the crate's tests only
/// (debug builds with `test-hooks`), not in a build measuring what the
/// hot path's `debug_assert!`s cost (`--profile release-asserts`).
pub(crate) const DEEP_CHECKS: bool = cfg!(all(debug_assertions, feature = "test-hooks"));

mod locks;
pub mod options;
pub mod snapshot;
pub mod store;
pub mod telemetry;
pub mod tracer;
pub mod tree;

pub use error::{Error, Result};
pub use format::commit::{MAX_PARENTS, MAX_TEXT_BYTES};
pub use format::record::RecordKind;
pub use inspection::{InspectOptions, Inspection};
pub use node::refused_transitions;
pub use options::{Create, Options, Retention, SyncPolicy};
pub use pando_core::{CommitInfo, Hash, Kind};
pub use snapshot::SnapshotSummary;
pub use store::{
    CheckPhase, CheckProgress, CheckReport, CheckScope, Commit, CommitMeta, GcPhase, GcReport, GcStatus, Problem, REPAIR_HINT,
    RecordCounts, RepairReport, Store, StoreInfo,
};
pub use tree::{
    Depth, Order, ProvenTree, Tree, Update, Versions, verify_stream_proof, verify_stream_proof_reads, verify_tree_proof,
};

/// Turns transparent huge pages off for the whole process, for a process
/// whose memory is mostly pando's (the `pando` command, a host through the
/// OCaml binding): trees grow by many small allocations, and with huge
/// pages each first touch zeroes 2 MiB (`medium`'s genesis block took
/// 7.2-8.3 s with them instead of 5.9-6.2 s; docs/PERFORMANCE.md).
/// Returns whether the kernel took it (Linux 3.15 or later).
pub fn disable_transparent_huge_pages() -> bool {
    #[cfg(target_os = "linux")]
    let taken = rustix::thread::disable_transparent_huge_pages(true).is_ok();
    #[cfg(not(target_os = "linux"))]
    let taken = false;
    taken
}
