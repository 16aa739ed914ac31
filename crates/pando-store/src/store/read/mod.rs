//! The readers' side of the store: how trees load what lies on disk
//! (`source`), how a read-only store follows the writer of another
//! process (`follow`), and proofs of reads at a commit (`proofs`).
//!
//! Invariant: a read here waits for the writer only to take a snapshot
//! of the index or the dictionary, and never writes a file. (The one
//! write a tree asks of its source, staging large contents, is the
//! writer's: `Source::stage` is declared here with the other methods of
//! that trait, and a read-only store stages nothing.)

pub(super) mod follow;
pub(super) mod proofs;
pub(super) mod source;
