//! The names of the pack's files: chunks, cold chunks and segments, each
//! named by 16 hex digits (a start offset or a generation).

/// The file name of the chunk starting at `start`.
pub fn chunk_name(start: u64) -> String {
    format!("chunk-{start:016x}.pack")
}

/// The 16 hex digits of a name `<kind><digits><suffix>`, as a number.
pub(crate) fn parse_hex_name(name: &str, kind: &str, suffix: &str) -> Option<u64> {
    let hex = name.strip_prefix(kind)?.strip_suffix(suffix)?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

pub(super) fn parse_chunk_name(name: &str) -> Option<u64> {
    parse_hex_name(name, "chunk-", ".pack")
}

/// The name a chunk takes when an archive-mode collection moves it out of
/// the hot set: still readable, never written again.
pub fn cold_name(start: u64) -> String {
    format!("cold-{start:016x}.pack")
}

pub(super) fn parse_cold_name(name: &str) -> Option<u64> {
    parse_hex_name(name, "cold-", ".pack")
}

/// The name of the segment a collection wrote at `generation`.
pub fn segment_name(generation: u64) -> String {
    format!("segment-{generation:016x}.pack")
}

pub(super) fn parse_segment_name(name: &str) -> Option<u64> {
    parse_hex_name(name, "segment-", ".pack")
}
