//! pando-core: the pure bottom of pando.
//!
//! Everything here is a function of its arguments: Tezos context hashing
//! (BLAKE2b-256 over the encodings of the Tezos context hash specification),
//! the OCaml string hash that places entries in inodes, LEB128 integers and
//! base58check printing. No files, no threads, no global state (only a
//! per-thread scratch buffer the hashing encodes into, which carries
//! nothing from one call to the next), so that a light client can verify
//! hashes with this crate alone.
//!
//! Invariants:
//! - Every function producing a hash is bit-exact with irmin 3.7.2's
//!   `Irmin_tezos` schema; the tests under `tests/` check the published
//!   vectors.
//! - Decoders never panic on any input; they return [`Error`].

// Unsafe code only where a site says why (`#[expect(unsafe_code)]`): the
// values inode's block, the in-place update's uniqueness and prefetches;
// scripts/unsafe-check.sh runs them under Miri, AddressSanitizer and
// Shuttle.
#![deny(unsafe_code)]

pub mod dir;
pub mod error;
pub mod hash;
pub mod inode;
pub mod ocaml_hash;
// The proofs hold the trie by the standard library's `Arc` beside their
// own: a model build (`--cfg pando_shuttle`, see `arc`) leaves them out.
pub mod arc;
#[cfg(not(pando_shuttle))]
pub mod proof;
pub mod reference;
pub mod tezos;
pub mod trace;
pub mod varint;

pub use error::Error;
pub use hash::Hash;
pub use tezos::{CommitInfo, Kind};
