//! The commit index file: fixed 44-byte entries
//! `hash ‖ offset (u64 LE) ‖ crc32c (u32 LE) of the 40 bytes before it`.
//!
//! Invariant: only the first `control.index_entries` entries are trusted;
//! each is checked to point inside the durable pack, or to be `COLLECTED`
//! (an error in `decode`: damage on disk, never an assertion; tested by
//! `bit_flips_at_rest_are_detected`).

use pando_core::Hash;

pub const ENTRY_BYTES: usize = 44;

/// The offset of a commit that a garbage collection discarded: the index
/// keeps its hash, so checking it out is a clear error, not "unknown".
pub const COLLECTED: u64 = u64::MAX;

/// The index file of collection generation `generation`.
pub fn name(generation: u64) -> String {
    if generation == 0 { "index".to_string() } else { format!("index-{generation:016x}") }
}

pub fn encode(entries: &[(Hash, u64)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * ENTRY_BYTES);
    for (hash, offset) in entries {
        out.extend_from_slice(hash.as_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        let crc = crc32c::crc32c(&out[out.len() - 40..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }
    out
}

/// Decodes entries; `Err((entry number, reason))` on a bad one.
pub fn decode(bytes: &[u8], durable_end: u64) -> Result<Vec<(Hash, u64)>, (usize, String)> {
    bytes
        .chunks_exact(ENTRY_BYTES)
        .enumerate()
        .map(|(i, entry)| {
            let hash = Hash::from_slice(&entry[..32]).expect("32 bytes");
            let offset = u64::from_le_bytes(entry[32..40].try_into().expect("8 bytes"));
            let crc = u32::from_le_bytes(entry[40..].try_into().expect("4 bytes"));
            if crc32c::crc32c(&entry[..40]) != crc {
                return Err((i, "index entry checksum mismatch".to_string()));
            }
            if offset >= durable_end && offset != COLLECTED {
                return Err((i, format!("offset {offset} past the durable end {durable_end}")));
            }
            Ok((hash, offset))
        })
        .collect()
}
