//! The mapping file of a collected store (`mapping-<generation>`): where
//! each live record below the first chunk lies, as *runs* of contiguous
//! live bytes, each in one file: a segment written by a collection
//! (`segment-<g>.pack`) or a chunk kept in place (`chunk-<start>.pack`, or
//! `cold-<start>.pack` in archive mode).
//!
//! Bytes: `magic "PANDOMAP" ‖ u32 format version ‖ u64 run count ‖
//! (u64 old ‖ u64 new ‖ u64 len ‖ u64 file)* ‖ u32 crc32c` (integers
//! little-endian, the checksum over everything before it). A run says:
//! logical pack bytes `old..old + len` are at `new..new + len` in `file`.
//!
//! Invariants (checked by `decode` and `check_files`): runs are sorted by
//! `old` and overlap neither in the pack nor in a file; no run is empty;
//! every run lies below the first chunk and inside its file.

use std::collections::BTreeMap;

use super::FORMAT_VERSION;

const MAGIC: &[u8; 8] = b"PANDOMAP";
const HEADER: usize = 8 + 4 + 8;
const RUN: usize = 32;

/// The bit of [`Run::file`] marking a chunk kept in place (the other bits
/// are its start); without it, `file` is the generation of a segment.
pub const IN_CHUNK: u64 = 1 << 63;

/// The name of the mapping file of `generation`.
pub fn file_name(generation: u64) -> String {
    format!("mapping-{generation:016x}")
}

/// Contiguous live bytes of the pack and the file holding them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub old: u64,
    pub new: u64,
    pub len: u64,
    pub file: u64,
}

impl Run {
    pub fn end(&self) -> u64 {
        self.old + self.len
    }
}

pub fn encode(runs: &[Run]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + RUN * runs.len() + 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(runs.len() as u64).to_le_bytes());
    for run in runs {
        for field in [run.old, run.new, run.len, run.file] {
            out.extend_from_slice(&field.to_le_bytes());
        }
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a mapping and checks its runs are sorted, disjoint, non-empty
/// and below `boundary` (the first chunk's start). Errors give the byte
/// offset of the damage.
pub fn decode(bytes: &[u8], boundary: u64) -> Result<Vec<Run>, (u64, String)> {
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
        let run = Run { old: u64_at(at), new: u64_at(at + 8), len: u64_at(at + 16), file: u64_at(at + 24) };
        let below = run.old.checked_add(run.len).is_some_and(|end| end <= boundary);
        if run.len == 0 || !below || run.new.checked_add(run.len).is_none() {
            return Err((at as u64, format!("run {run:?} is empty or not below the first chunk ({boundary})")));
        }
        if runs.last().is_some_and(|last| last.end() > run.old) {
            return Err((at as u64, "runs not sorted or overlapping".into()));
        }
        runs.push(run);
    }
    Ok(runs)
}

/// Checks every run lies inside its file (`len_of` gives a file's length,
/// `None` for a file that does not exist) and no two runs overlap in one
/// file. Errors give the index of the run at fault.
pub fn check_files(runs: &[Run], len_of: impl Fn(u64) -> Option<u64>) -> Result<(), (usize, String)> {
    let mut by_file: BTreeMap<u64, Vec<(u64, u64, usize)>> = BTreeMap::new();
    for (i, run) in runs.iter().enumerate() {
        by_file.entry(run.file).or_default().push((run.new, run.new + run.len, i));
    }
    for (file, mut spans) in by_file {
        let len = len_of(file).ok_or_else(|| (spans[0].2, format!("file {} is missing", describe(file))))?;
        spans.sort_unstable();
        if let Some(&(_, end, i)) = spans.iter().find(|s| s.1 > len) {
            return Err((i, format!("run ends at {end}, past the end of {} ({len} bytes)", describe(file))));
        }
        if let Some(w) = spans.windows(2).find(|w| w[0].1 > w[1].0) {
            return Err((w[1].2, format!("runs overlap in {}", describe(file))));
        }
    }
    Ok(())
}

/// A run's file, for messages.
pub fn describe(file: u64) -> String {
    if file & IN_CHUNK != 0 { format!("the chunk at {}", file & !IN_CHUNK) } else { format!("segment {file}") }
}

/// The run holding logical offset `offset`, if any.
fn find(runs: &[Run], offset: u64) -> Option<&Run> {
    let i = runs.partition_point(|r| r.old <= offset);
    runs[..i].last().filter(|r| offset < r.end())
}

/// Runs per entry of a [`RunIndex`]: eight runs are four cache lines.
const STRIDE: usize = 8;

/// The start of every [`STRIDE`]th run of a run table. A lookup searches
/// this array, an eighth of the table's runs in 8-byte entries, which
/// stays in cache, then at most `STRIDE` runs: a cache miss or two where
/// a search of the whole table of a collected store (a hundred thousand
/// runs and more) took one per halving. Every commit after a collection
/// looks up the stored records its new nodes refer to.
#[derive(Debug, Default)]
pub struct RunIndex {
    starts: Vec<u64>,
}

impl RunIndex {
    pub fn new(runs: &[Run]) -> RunIndex {
        RunIndex { starts: runs.iter().step_by(STRIDE).map(|r| r.old).collect() }
    }

    /// The run holding `offset` in `runs`, the table the index was built
    /// from: as [`find`] answers.
    pub fn find<'a>(&self, runs: &'a [Run], offset: u64) -> Option<&'a Run> {
        let block = self.starts.partition_point(|&start| start <= offset).checked_sub(1)?;
        let from = block * STRIDE;
        find(&runs[from..runs.len().min(from + STRIDE)], offset)
    }
}

/// Live bytes per file.
pub fn live_bytes(runs: &[Run]) -> BTreeMap<u64, u64> {
    let mut live = BTreeMap::new();
    for run in runs {
        *live.entry(run.file).or_insert(0) += run.len;
    }
    live
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(old: u64, new: u64, len: u64, file: u64) -> Run {
        Run { old, new, len, file }
    }

    #[test]
    fn round_trip_lookup_and_damage() {
        let runs = vec![run(10, 0, 5, 1), run(40, 5, 20, 1), run(70, 0, 1, IN_CHUNK | 64)];
        let bytes = encode(&runs);
        assert_eq!(decode(&bytes, 100).unwrap(), runs);
        assert_eq!(find(&runs, 12).map(|r| r.old), Some(10));
        assert_eq!(find(&runs, 15), None);
        assert_eq!(find(&runs, 59).map(|r| r.old), Some(40));
        assert_eq!(find(&runs, 70).map(|r| r.old), Some(70));
        assert_eq!(find(&runs, 5), None);
        assert!(decode(&bytes, 70).is_err(), "a run past the boundary");
        assert!(decode(&bytes[..bytes.len() - 1], 100).is_err());
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x10;
            assert!(decode(&damaged, 100).is_err(), "flip at byte {i} accepted");
        }
        let overlapping = encode(&[run(10, 0, 5, 1), run(12, 5, 5, 1)]);
        assert!(decode(&overlapping, 100).is_err());
    }

    proptest::proptest! {
        /// The index answers as the search of the whole table, at, inside,
        /// between, before and after runs.
        #[test]
        fn index_finds_what_the_table_holds(gaps in proptest::collection::vec((0u64..3, 1u64..4), 0..40), probes in proptest::collection::vec(0u64..300, 1..60)) {
            let mut runs = Vec::new();
            let mut at = 0;
            for (gap, len) in gaps {
                at += gap;
                runs.push(run(at, 0, len, 1));
                at += len;
            }
            let index = RunIndex::new(&runs);
            for offset in probes.into_iter().chain(runs.iter().flat_map(|r| [r.old, r.end() - 1, r.end()])) {
                proptest::prop_assert_eq!(index.find(&runs, offset), find(&runs, offset), "offset {}", offset);
            }
        }
    }

    #[test]
    fn runs_must_fit_their_files() {
        let runs = vec![run(10, 0, 5, 1), run(40, 5, 20, 1), run(70, 0, 1, IN_CHUNK | 64)];
        let lens = |file: u64| match file {
            1 => Some(25),
            f if f == IN_CHUNK | 64 => Some(10),
            _ => None,
        };
        assert!(check_files(&runs, lens).is_ok());
        assert!(check_files(&runs, |f| lens(f).map(|l| l - 1)).is_err(), "a run past its file's end");
        assert!(check_files(&runs, |f| if f == 1 { Some(25) } else { None }).is_err(), "a missing file");
        let overlapping = [run(10, 0, 5, 1), run(20, 3, 5, 1)];
        assert_eq!(check_files(&overlapping, |_| Some(100)).unwrap_err().0, 1);
        assert_eq!(live_bytes(&runs).get(&1), Some(&25));
    }
}
