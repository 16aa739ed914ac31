//! The bytes on disk: record framing, node and commit encodings, the control
//! file. `docs/FORMAT.md` describes the same bytes in prose.
//!
//! Boundary: this module encodes and decodes; it never opens a file, and
//! of the in-memory nodes it knows only `crate::node`, never the trees.

pub mod commit;
pub mod control;
pub mod mapping;
pub mod node;
pub mod patch;
pub mod record;

/// The format version written by this build: 5 added value patches.
pub const FORMAT_VERSION: u32 = 5;
/// The oldest format version this build reads: a version 4 store holds no
/// value patch, and a version 3 store differs from it only in its mapping
/// files' runs, read as they are; the next control write and collection
/// step write version 5 (a build reading only up to 4 then refuses it,
/// naming both versions).
pub const OLDEST_READ_VERSION: u32 = 3;
/// The control file's version for a store of the binary layout
/// ([`control::FLAG_BINARY`]): version 5 plus that flag. A store of L1's
/// layout keeps writing version 5, which builds that know no layout read;
/// they refuse a binary store (naming version 6) instead of reading its
/// tries as L1's.
pub const BINARY_LAYOUT_VERSION: u32 = 6;
