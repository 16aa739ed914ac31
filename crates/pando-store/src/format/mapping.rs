//! The mapping file of a collected store (`mapping-<generation>`): where
//! the live records below the first chunk now lie in the prefix file
//! (`prefix-<generation>.pack`).
//!
//! Bytes: `magic "PANDOMAP" ‖ u32 format version ‖ u64 run count ‖
//! (u64 old ‖ u64 new ‖ u64 len)* ‖ u32 crc32c` (integers little-endian, the
//! checksum over everything before it). A run says: logical pack bytes
//! `old..old + len` are at `new..new + len` in the prefix file.
//!
//! Invariants (checked by `decode`): runs are sorted by `old` and do not
//! overlap, neither in the pack nor in the prefix file; no run is empty.

use super::FORMAT_VERSION;

const MAGIC: &[u8; 8] = b"PANDOMAP";
const HEADER: usize = 8 + 4 + 8;
const RUN: usize = 24;

/// Contiguous live bytes of the pack, copied into the prefix file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub old: u64,
    pub new: u64,
    pub len: u64,
}

pub fn encode(runs: &[Run]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + RUN * runs.len() + 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(runs.len() as u64).to_le_bytes());
    for run in runs {
        for field in [run.old, run.new, run.len] {
            out.extend_from_slice(&field.to_le_bytes());
        }
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes and checks a mapping; `prefix_len` is the prefix file's length
/// and `boundary` the first chunk's start, which every run must lie within.
pub fn decode(bytes: &[u8], prefix_len: u64, boundary: u64) -> Result<Vec<Run>, (u64, String)> {
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    if bytes.len() < HEADER + 4 || &bytes[..8] != MAGIC {
        return Err((0, "not a mapping file".into()));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err((8, format!("format version {version}, this build reads {FORMAT_VERSION}")));
    }
    let count = u64_at(12);
    let expected = count.checked_mul(RUN as u64).and_then(|n| n.checked_add((HEADER + 4) as u64));
    if expected != Some(bytes.len() as u64) {
        return Err((12, format!("{count} runs do not fit a file of {} bytes", bytes.len())));
    }
    let body = bytes.len() - 4;
    let crc = u32::from_le_bytes(bytes[body..].try_into().expect("4 bytes"));
    if crc32c::crc32c(&bytes[..body]) != crc {
        return Err((body as u64, "checksum mismatch".into()));
    }
    let mut runs: Vec<Run> = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        let at = HEADER + RUN * i;
        let run = Run { old: u64_at(at), new: u64_at(at + 8), len: u64_at(at + 16) };
        let fits = |start: u64, limit: u64| start.checked_add(run.len).is_some_and(|end| end <= limit);
        if run.len == 0 || !fits(run.old, boundary) || !fits(run.new, prefix_len) {
            return Err((
                at as u64,
                format!("run {run:?} is empty or outside the prefix ({prefix_len} bytes, boundary {boundary})"),
            ));
        }
        if runs.last().is_some_and(|last| last.old + last.len > run.old) {
            return Err((at as u64, "runs not sorted or overlapping".into()));
        }
        runs.push(run);
    }
    let mut by_new: Vec<&Run> = runs.iter().collect();
    by_new.sort_unstable_by_key(|r| r.new);
    if by_new.windows(2).any(|w| w[0].new + w[0].len > w[1].new) {
        return Err((HEADER as u64, "runs overlap in the prefix file".into()));
    }
    Ok(runs)
}

/// The run holding logical offset `offset`, if any.
pub fn find(runs: &[Run], offset: u64) -> Option<&Run> {
    let i = runs.partition_point(|r| r.old <= offset);
    runs[..i].last().filter(|r| offset < r.old + r.len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_lookup_and_damage() {
        let runs = vec![Run { old: 10, new: 0, len: 5 }, Run { old: 40, new: 5, len: 20 }, Run { old: 70, new: 25, len: 1 }];
        let bytes = encode(&runs);
        assert_eq!(decode(&bytes, 26, 100).unwrap(), runs);
        assert_eq!(find(&runs, 12).map(|r| r.old), Some(10));
        assert_eq!(find(&runs, 15), None);
        assert_eq!(find(&runs, 59).map(|r| r.old), Some(40));
        assert_eq!(find(&runs, 70).map(|r| r.old), Some(70));
        assert_eq!(find(&runs, 5), None);
        assert!(decode(&bytes, 25, 100).is_err(), "a run past the prefix's end");
        assert!(decode(&bytes, 26, 70).is_err(), "a run past the boundary");
        assert!(decode(&bytes[..bytes.len() - 1], 26, 100).is_err());
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x10;
            assert!(decode(&damaged, 26, 100).is_err(), "flip at byte {i} accepted");
        }
        let overlapping = encode(&[Run { old: 10, new: 0, len: 5 }, Run { old: 12, new: 5, len: 5 }]);
        assert!(decode(&overlapping, 10, 100).is_err());
        let overlapping_new = encode(&[Run { old: 10, new: 0, len: 5 }, Run { old: 20, new: 3, len: 5 }]);
        assert!(decode(&overlapping_new, 10, 100).is_err());
    }
}
