//! The mapping file of a collected store (`mapping-<generation>`): where
//! each live record below the first chunk lies, as *runs* of contiguous
//! live bytes, each in one file: a segment written by a collection
//! (`segment-<g>.pack`) or a chunk kept in place (`chunk-<start>.pack`, or
//! `cold-<start>.pack` in archive mode).
//!
//! Bytes: `magic "PANDOMAP" ‖ u32 format version ‖ u64 run count ‖ runs ‖
//! u32 crc32c` (integers little-endian, the checksum over everything
//! before it). A run says: logical pack bytes `old..old + len` are at
//! `new..new + len` in `file`. Since format version 4 each run is
//! `varint gap ‖ varint len ‖ file ‖ varint zigzag(skip)`: `gap` is `old`
//! less the end of the run before (0 for the first), `file` is one byte 0
//! for the file of the run before, or 1 then the file as a u64, and `skip`
//! is `new` less the end of the last run in the same file (0 for its
//! first): a segment's runs follow each other (skip 0), a chunk kept in
//! place skips what died. Some 5 bytes a run instead of the 32 of version
//! 3's `(u64 old ‖ u64 new ‖ u64 len ‖ u64 file)*`, still read: a
//! collected store's mapping is written again at every collection step.
//!
//! Invariants:
//! - Runs are sorted by `old` and do not overlap in the pack, and no run is
//!   empty: what is written is (asserted in `encode`), what is read must be
//!   (tested by `round_trip_lookup_and_damage`).
//! - Every run lies below the first chunk and inside its file, and no two
//!   overlap in a file: `decode` and `check_files` refuse others (tested by
//!   `runs_must_fit_their_files`).

use std::collections::BTreeMap;

use pando_core::varint;

use super::FORMAT_VERSION;

const MAGIC: &[u8; 8] = b"PANDOMAP";
const HEADER: usize = 8 + 4 + 8;
/// Bytes of a run in version 3 mappings.
const FIXED_RUN: usize = 32;
/// The first format version with varint runs.
const VARINT_RUNS: u32 = 4;

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

fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

/// The mapping of `runs` (sorted, disjoint: a collection's run table).
pub fn encode(runs: &[Run]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + 6 * runs.len() + 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(runs.len() as u64).to_le_bytes());
    // The end of the run before, its file, and where each file's last run ends.
    let (mut end, mut file) = (0u64, None);
    let mut file_ends: foldhash::HashMap<u64, u64> = foldhash::HashMap::default();
    for run in runs {
        // Decoding refuses what these would let through (or wraps the gap).
        assert!(run.old >= end, "a run table is sorted and disjoint");
        assert!(run.len > 0, "no run is empty");
        varint::write_u64(&mut out, run.old - end);
        varint::write_u64(&mut out, run.len);
        if file == Some(run.file) {
            out.push(0);
        } else {
            out.push(1);
            out.extend_from_slice(&run.file.to_le_bytes());
        }
        let file_end = file_ends.entry(run.file).or_insert(0);
        varint::write_u64(&mut out, zigzag(run.new.wrapping_sub(*file_end) as i64));
        *file_end = run.new + run.len;
        (end, file) = (run.end(), Some(run.file));
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The mapping of `runs` as format version 3 wrote it: fixed runs of four
/// u64 (for the tests that read such stores).
#[cfg(any(test, feature = "test-hooks"))]
pub fn encode_version_3(runs: &[Run]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&3u32.to_le_bytes());
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

/// Decodes a mapping (format version 3 or 4) and checks its runs are
/// sorted, disjoint, non-empty and below `boundary` (the first chunk's
/// start). Errors give the byte offset of the damage.
pub fn decode(bytes: &[u8], boundary: u64) -> Result<Vec<Run>, (u64, String)> {
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    if bytes.len() < HEADER + 4 || &bytes[..8] != MAGIC {
        return Err((0, "not a mapping file".into()));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if !(super::OLDEST_READ_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err((
            8,
            format!("format version {version}, this build reads {} to {FORMAT_VERSION}", super::OLDEST_READ_VERSION),
        ));
    }
    let count = u64_at(12);
    let body = bytes.len() - 4;
    let fits = if version < VARINT_RUNS {
        count.checked_mul(FIXED_RUN as u64) == Some((body - HEADER) as u64)
    } else {
        // A run takes four bytes at least.
        count.checked_mul(4).is_some_and(|least| least <= (body - HEADER) as u64)
    };
    if !fits {
        return Err((12, format!("{count} runs do not fit a file of {} bytes", bytes.len())));
    }
    let crc = u32::from_le_bytes(bytes[body..].try_into().expect("4 bytes"));
    if crc32c::crc32c(&bytes[..body]) != crc {
        return Err((body as u64, "checksum mismatch".into()));
    }
    let mut runs: Vec<Run> = Vec::with_capacity(count as usize);
    let (mut at, mut end, mut file) = (HEADER, 0u64, None);
    let mut file_ends: foldhash::HashMap<u64, u64> = foldhash::HashMap::default();
    for _ in 0..count {
        let start = at;
        let run = if version < VARINT_RUNS {
            at += FIXED_RUN;
            Run { old: u64_at(start), new: u64_at(start + 8), len: u64_at(start + 16), file: u64_at(start + 24) }
        } else {
            let damaged = |what: &str| (start as u64, format!("run {}: {what}", runs.len()));
            let read = |at: &mut usize| varint::read_u64(&bytes[..body], at).map_err(|_| damaged("truncated"));
            let old = end.checked_add(read(&mut at)?).ok_or_else(|| damaged("offset overflows"))?;
            let len = read(&mut at)?;
            let same = match bytes[..body].get(at) {
                Some(0) => true,
                Some(1) => false,
                _ => return Err(damaged("no file tag")),
            };
            at += 1;
            let file = match (same, file) {
                (true, Some(file)) => file,
                (true, None) => return Err(damaged("no file before")),
                (false, _) => {
                    let Some(file) = bytes[..body].get(at..at + 8) else { return Err(damaged("truncated")) };
                    at += 8;
                    u64::from_le_bytes(file.try_into().expect("8 bytes"))
                }
            };
            let file_end = file_ends.get(&file).copied().unwrap_or(0);
            let new = file_end.wrapping_add(unzigzag(read(&mut at)?) as u64);
            Run { old, new, len, file }
        };
        let below = run.old.checked_add(run.len).is_some_and(|end| end <= boundary);
        if run.len == 0 || !below || run.new.checked_add(run.len).is_none() {
            return Err((start as u64, format!("run {run:?} is empty or not below the first chunk ({boundary})")));
        }
        if runs.last().is_some_and(|last| last.end() > run.old) {
            return Err((start as u64, "runs not sorted or overlapping".into()));
        }
        file_ends.insert(run.file, run.new + run.len);
        (end, file) = (run.end(), Some(run.file));
        runs.push(run);
    }
    if at != body {
        return Err((at as u64, format!("{} bytes after the last run", body - at)));
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
        // Version 4 cannot say it (gaps are unsigned); version 3 can.
        let overlapping = encode_version_3(&[run(10, 0, 5, 1), run(12, 5, 5, 1)]);
        assert!(decode(&overlapping, 100).is_err());
    }

    fn with_crc(mut body: Vec<u8>) -> Vec<u8> {
        let crc = crc32c::crc32c(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    }

    #[test]
    fn version_3_mappings_are_read_and_runs_take_a_few_bytes() {
        let runs = vec![run(10, 0, 5, 1), run(40, 5, 20, 1), run(70, 0, 1, IN_CHUNK | 64)];
        assert_eq!(decode(&encode_version_3(&runs), 100).unwrap(), runs);
        // A relocated segment: its runs follow each other in the file.
        let mut dense = Vec::new();
        let (mut old, mut new) = (0, 0);
        for i in 0..1000u64 {
            old += 37 + i % 500;
            dense.push(run(old, new, 120 + i % 90, 7));
            (old, new) = (old + 120 + i % 90, new + 120 + i % 90);
        }
        let bytes = encode(&dense);
        assert_eq!(decode(&bytes, u64::MAX).unwrap(), dense);
        assert!(bytes.len() < 6 * dense.len(), "{} bytes for {} runs", bytes.len(), dense.len());
    }

    #[test]
    fn damaged_varint_runs_are_errors() {
        let runs = vec![run(10, 0, 5, 1), run(40, 5, 20, IN_CHUNK | 64)];
        let bytes = encode(&runs);
        let body = &bytes[..bytes.len() - 4];
        // Truncated, or with bytes after the last run, under a valid checksum.
        for cut in HEADER..body.len() {
            assert!(decode(&with_crc(body[..cut].to_vec()), 100).is_err(), "cut at {cut}");
        }
        let mut longer = body.to_vec();
        longer.push(0);
        assert!(decode(&with_crc(longer), 100).is_err());
        // A count no file of that size can hold.
        let mut counted = body.to_vec();
        counted[12..20].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&with_crc(counted), 100).is_err());
        // The first run naming no file, and a file tag other than 0 or 1.
        let mut untagged = body.to_vec();
        untagged[HEADER + 2] = 0;
        assert!(decode(&with_crc(untagged), 100).is_err());
        let mut tagged = body.to_vec();
        tagged[HEADER + 2] = 2;
        assert!(decode(&with_crc(tagged), 100).is_err());
    }

    proptest::proptest! {
        // No file beside the source: a failure prints its input, never
        // writes into the checkout (see pando-core's tests/support/seeds.rs).
        #![proptest_config(proptest::test_runner::Config { failure_persistence: None, ..proptest::test_runner::Config::default() })]
        /// Any sorted, disjoint run table comes back as it was, its files
        /// and positions in them whatever they are.
        #[test]
        fn run_tables_round_trip(table in proptest::collection::vec((0u64..1 << 20, 1u64..1 << 16, 0u64..4, proptest::num::u64::ANY), 0..60)) {
            let files = [3, 9, IN_CHUNK, IN_CHUNK | 1 << 40];
            let mut runs = Vec::new();
            let mut end = 0;
            for (gap, len, file, new) in table {
                runs.push(run(end + gap, new >> 1, len, files[file as usize]));
                end += gap + len;
            }
            proptest::prop_assert_eq!(decode(&encode(&runs), u64::MAX).unwrap(), runs);
        }

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
