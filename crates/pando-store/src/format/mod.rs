//! The bytes on disk: record framing, node and commit encodings, the control
//! file. `docs/FORMAT.md` describes the same bytes in prose.
//!
//! Boundary: this module encodes and decodes; it never opens a file.

pub mod control;
pub mod mapping;
pub mod node;
pub mod record;

/// The format version written by this build; readers refuse other versions.
pub const FORMAT_VERSION: u32 = 3;
