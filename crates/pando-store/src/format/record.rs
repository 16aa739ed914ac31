//! Record framing in pack chunks.
//!
//! A record is `kind: u8 ‖ LEB128 payload length ‖ payload ‖ crc32c: u32 LE`,
//! the checksum covering kind, length and payload. A record is addressed by
//! the logical offset of its first byte.
//!
//! Invariant: [`parse`] returns a payload only if its checksum matched, and
//! never allocates more than the bytes it was given (tested by
//! `round_trip_and_damage`).

use pando_core::varint;

/// Largest payload accepted, so a damaged length cannot ask for gigabytes.
pub const MAX_PAYLOAD: u64 = 64 << 20;

/// What a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// A value inode: up to 32 entries of a directory.
    Values = 1,
    /// A tree inode: up to 32 pointers to deeper inodes.
    Tree = 2,
    /// A contents value too large to inline in its parent.
    Blob = 3,
    /// A commit.
    Commit = 4,
    /// New dictionary entries.
    Dict = 5,
    /// A tree inode given as changes to an earlier tree inode.
    TreePatch = 6,
    /// A value inode given as changes to an earlier value inode.
    ValuesPatch = 7,
}

impl RecordKind {
    pub fn from_byte(byte: u8) -> Option<RecordKind> {
        Some(match byte {
            1 => RecordKind::Values,
            2 => RecordKind::Tree,
            3 => RecordKind::Blob,
            4 => RecordKind::Commit,
            5 => RecordKind::Dict,
            6 => RecordKind::TreePatch,
            7 => RecordKind::ValuesPatch,
            _ => return None,
        })
    }

    /// Every kind, in the order reports list them.
    pub const ALL: [RecordKind; 7] = [
        RecordKind::Values,
        RecordKind::ValuesPatch,
        RecordKind::Tree,
        RecordKind::TreePatch,
        RecordKind::Blob,
        RecordKind::Commit,
        RecordKind::Dict,
    ];

    /// The kind's name in the glossary's words.
    pub fn name(self) -> &'static str {
        match self {
            RecordKind::Values => "value inode",
            RecordKind::Tree => "tree inode",
            RecordKind::TreePatch => "tree patch",
            RecordKind::ValuesPatch => "value patch",
            RecordKind::Blob => "blob",
            RecordKind::Commit => "commit",
            RecordKind::Dict => "dictionary",
        }
    }
}

/// Appends a framed record holding `payload` to `out`.
pub fn append(out: &mut Vec<u8>, kind: RecordKind, payload: &[u8]) {
    let start = out.len();
    // Grown once to the record's size: a large value's record grew by
    // doubling, copying what it held each time (2% of a `small` add).
    out.reserve(header_len(payload.len() as u64) + payload.len() + 4);
    out.push(kind as u8);
    varint::write_u64(out, payload.len() as u64);
    out.extend_from_slice(payload);
    let crc = crc32c::crc32c(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
    // Callers locate the payload in the record with `header_len`.
    debug_assert_eq!(out.len() - start, header_len(payload.len() as u64) + payload.len() + 4, "a record is its header, payload and checksum");
}

/// Size of the header (kind and length) for a payload of `len` bytes.
pub fn header_len(len: u64) -> usize {
    1 + varint::len_u64(len)
}

/// The result of looking at the start of a record.
#[derive(Debug, PartialEq, Eq)]
pub enum Parse<'a> {
    /// A whole, checksummed record of `total` bytes.
    Record { kind: RecordKind, payload: &'a [u8], total: usize },
    /// The record is `total` bytes long; more bytes are needed.
    NeedMore { total: usize },
    /// Not a valid record.
    Invalid { reason: String },
}

/// Parses the record at the start of `bytes`.
pub fn parse(bytes: &[u8]) -> Parse<'_> {
    let Some(&kind_byte) = bytes.first() else {
        return Parse::NeedMore { total: 16 };
    };
    let Some(kind) = RecordKind::from_byte(kind_byte) else {
        return Parse::Invalid { reason: format!("unknown record kind {kind_byte}") };
    };
    let mut pos = 1;
    let len = match varint::read_u64(bytes, &mut pos) {
        Ok(len) => len,
        Err(pando_core::Error::Truncated { .. }) if bytes.len() < 11 => return Parse::NeedMore { total: 16 },
        Err(e) => return Parse::Invalid { reason: format!("bad record length: {e}") },
    };
    if len > MAX_PAYLOAD {
        return Parse::Invalid { reason: format!("record length {len} exceeds the maximum {MAX_PAYLOAD}") };
    }
    let total = pos + len as usize + 4;
    if bytes.len() < total {
        return Parse::NeedMore { total };
    }
    let body_end = pos + len as usize;
    let expected = u32::from_le_bytes(bytes[body_end..total].try_into().expect("4 bytes"));
    let found = crc32c::crc32c(&bytes[..body_end]);
    if expected != found {
        return Parse::Invalid { reason: format!("checksum mismatch: stored {expected:#010x}, computed {found:#010x}") };
    }
    Parse::Record { kind, payload: &bytes[pos..body_end], total }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let mut out = Vec::new();
        append(&mut out, RecordKind::Blob, b"hello world");
        match parse(&out) {
            Parse::Record { kind, payload, total } => {
                assert_eq!(kind, RecordKind::Blob);
                assert_eq!(payload, b"hello world");
                assert_eq!(total, out.len());
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse(&out[..5]), Parse::NeedMore { .. }));
        for bit in 0..out.len() * 8 {
            let mut damaged = out.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(!matches!(parse(&damaged), Parse::Record { .. }), "bit {bit} flipped was accepted");
        }
    }
}
