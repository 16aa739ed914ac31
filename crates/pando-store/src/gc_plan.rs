//! The decisions of a garbage collection, as pure functions over a record
//! reader and run tables: which records below the boundary are live, where
//! they lie, which files to rewrite and how. `store::gc` acts on them
//! (files, threads, the switches).
//!
//! Liveness: a record refers only to records written before it (lower
//! offsets), so popping the highest pending offset from a max-heap visits
//! every live record once, each after all of its referrers. A tree inode
//! reached only through patches is needed without the children those
//! patches replaced: the masks of its referrers are intersected while it
//! is pending (see `format::node::references`). Memory is the frontier
//! (heap and pending masks) plus the output, coalesced into ranges of
//! records that touch as it is produced: no table of every object.
//!
//! Relocation: a collection first keeps live records where they are (runs
//! into the old files), then rewrites the files whose live share is low,
//! a group at a time, each group into one new segment.
//!
//! Invariants:
//! - Ranges and runs are sorted by logical offset and disjoint (asserted
//!   in `live_records` and `push_run`).
//! - Runs coalesce only bytes contiguous both in the pack and in one file
//!   (`push_run`, tested by
//!   `ranges_are_placed_where_they_lie_and_split_at_file_ends`).
//! - A relocated group's runs are laid out densely in a segment of its
//!   own, in logical order, covering the same logical bytes (asserted in
//!   `relocate`).

use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use foldhash::HashMap;

use crate::error::{Error, Result};
use crate::format::mapping::Run;
use crate::format::node::references;
use crate::format::record::RecordKind;

/// Reads the record at an offset: its kind and length in bytes, its
/// payload into the buffer given (emptied first; a blob's may be left
/// empty, since a blob refers to nothing).
pub type ReadRecord<'a> = dyn FnMut(u64, &mut Vec<u8>) -> Result<(RecordKind, u64)> + 'a;

/// Where a logical offset lies now: its file, the position there, and how
/// many bytes of the same region follow.
pub type Locate<'a> = dyn FnMut(u64) -> Result<(u64, u64, u64)> + 'a;

/// A file is rewritten when less than this share of it (in percent) is live.
pub const REWRITE_BELOW_PERCENT: u64 = 80;

/// What `live_records` found.
#[derive(Debug, Default)]
pub struct Live {
    /// Live records not already known, coalesced where they touch:
    /// `(offset, length)`, ascending.
    pub ranges: Vec<(u64, u64)>,
    /// Records visited with a mask, and records already known that were
    /// visited again: `(offset, mask)`.
    pub masks: Vec<(u64, u32)>,
}

/// Every record below `boundary` reachable from `roots` (offsets with
/// masks, see `format::node::references`; roots at or above the boundary
/// are ignored). Records for which `skip` is true (known live, with every
/// child needed) are not visited; records for which `known` is true are
/// visited (a referrer may now need children it did not) but not listed.
pub fn live_records(
    boundary: u64,
    roots: impl IntoIterator<Item = (u64, u32)>,
    skip: &dyn Fn(u64) -> bool,
    known: &dyn Fn(u64) -> bool,
    read: &mut ReadRecord<'_>,
) -> Result<Live> {
    let mut heap: BinaryHeap<u64> = BinaryHeap::new();
    // The pending offsets and the children none of their referrers needs.
    let mut masks: HashMap<u64, u32> = HashMap::default();
    let push = |heap: &mut BinaryHeap<u64>, masks: &mut HashMap<u64, u32>, (offset, mask): (u64, u32)| {
        if offset >= boundary || skip(offset) {
            return;
        }
        match masks.get_mut(&offset) {
            Some(pending) => *pending &= mask,
            None => {
                masks.insert(offset, mask);
                heap.push(offset);
            }
        }
    };
    for root in roots {
        push(&mut heap, &mut masks, root);
    }
    let mut live = Live::default();
    // The range being extended downwards.
    let mut current: Option<(u64, u64)> = None;
    let (mut refs, mut payload) = (Vec::new(), Vec::new());
    let mut last_visited = u64::MAX;
    while let Some(offset) = heap.pop() {
        // Pushed once while pending, and only below every record visited.
        debug_assert!(offset < last_visited, "live records are visited once each, in descending offset order");
        last_visited = offset;
        let mask = masks.remove(&offset).expect("pending offsets have a mask");
        let (kind, len) = read(offset, &mut payload)?;
        refs.clear();
        references(kind, &payload, offset, mask, &mut refs).map_err(|reason| Error::corrupt("pack", offset, reason))?;
        for &r in &refs {
            if r.0 >= offset {
                return Err(Error::corrupt("pack", offset, "a record refers to a later one"));
            }
            push(&mut heap, &mut masks, r);
        }
        let was_known = known(offset);
        if !was_known {
            current = match current {
                Some((start, n)) if offset + len == start => Some((offset, n + len)),
                Some(done) => {
                    live.ranges.push(done);
                    Some((offset, len))
                }
                None => Some((offset, len)),
            };
        }
        if mask != 0 || was_known {
            live.masks.push((offset, mask));
        }
    }
    live.ranges.extend(current);
    live.ranges.reverse();
    Ok(live)
}

/// Appends to `out` what the record at `offset` (kept whole) needs in
/// `traced` (below the boundary, from where the collection traces).
pub fn references_in(
    traced: std::ops::Range<u64>,
    offset: u64,
    kind: RecordKind,
    payload: &[u8],
    out: &mut Vec<(u64, u32)>,
) -> Result<()> {
    let start = out.len();
    references(kind, payload, offset, 0, out).map_err(|reason| Error::corrupt("pack", offset, reason))?;
    let mut keep = start;
    for i in start..out.len() {
        if traced.contains(&out[i].0) {
            out[keep] = out[i];
            keep += 1;
        }
    }
    out.truncate(keep);
    Ok(())
}

/// Appends `run` to `runs`, merging it into the last one when the bytes
/// continue it both in the pack and in its file.
fn push_run(runs: &mut Vec<Run>, run: Run) {
    debug_assert!(runs.last().is_none_or(|last| last.end() <= run.old), "runs are added in logical order, disjoint");
    match runs.last_mut() {
        Some(last) if last.file == run.file && last.end() == run.old && last.new + last.len == run.new => last.len += run.len,
        _ => runs.push(run),
    }
}

/// The runs holding `ranges` (ascending) where they lie now.
pub fn place(ranges: &[(u64, u64)], locate: &mut Locate<'_>) -> Result<Vec<Run>> {
    let mut runs = Vec::new();
    for &(start, len) in ranges {
        let mut offset = start;
        while offset < start + len {
            let (file, pos, avail) = locate(offset)?;
            let n = avail.min(start + len - offset);
            if n == 0 {
                return Err(Error::corrupt("pack", offset, "a live record lies in no file"));
            }
            push_run(&mut runs, Run { old: offset, new: pos, len: n, file });
            offset += n;
        }
    }
    Ok(runs)
}

/// `below` followed by `above`, whose runs all start at or after the end
/// of `below`'s (a collection's kept runs, then those it traced above
/// them): one table, copied once.
pub fn concat(below: &[Run], above: Vec<Run>) -> Vec<Run> {
    debug_assert!(
        match (below.last(), above.first()) {
            (Some(last), Some(first)) => last.end() <= first.old,
            _ => true,
        },
        "the runs traced above the kept ones start after them"
    );
    let mut out = Vec::with_capacity(below.len() + above.len());
    out.extend_from_slice(below);
    for run in above {
        push_run(&mut out, run);
    }
    out
}

/// The union of two disjoint run tables.
pub fn merge(a: Vec<Run>, b: Vec<Run>) -> Vec<Run> {
    let mut all = a;
    all.extend(b);
    all.sort_unstable_by_key(|r| r.old);
    let mut out = Vec::with_capacity(all.len());
    for run in all {
        push_run(&mut out, run);
    }
    out
}

/// The groups of files to rewrite, each group into one segment: the files
/// `may_rewrite` allows whose live share is under
/// [`REWRITE_BELOW_PERCENT`], in the order of their first live byte, a
/// group closed once it holds `target` live bytes. `sizes` gives each
/// file's length.
pub fn rewrite_groups(runs: &[Run], sizes: &BTreeMap<u64, u64>, may_rewrite: &dyn Fn(u64) -> bool, target: u64) -> Vec<Vec<u64>> {
    let live = crate::format::mapping::live_bytes(runs);
    let mut first: Vec<(u64, u64)> = Vec::new();
    let mut seen = BTreeSet::new();
    for run in runs {
        if seen.insert(run.file) {
            first.push((run.old, run.file));
        }
    }
    let mut groups: Vec<Vec<u64>> = Vec::new();
    let mut filled = 0;
    for (_, file) in first {
        let (bytes, size) = (live[&file], sizes.get(&file).copied().unwrap_or(0));
        if !may_rewrite(file) || bytes * 100 >= size * REWRITE_BELOW_PERCENT {
            continue;
        }
        match groups.last_mut() {
            Some(group) if filled < target => group.push(file),
            _ => {
                groups.push(vec![file]);
                filled = 0;
            }
        }
        filled += bytes;
    }
    groups
}

/// The run table after moving the runs of `sources` into the new segment
/// `segment`, laid out densely in logical order; and the segment's length.
pub fn relocate(runs: &[Run], sources: &BTreeSet<u64>, segment: u64) -> (Vec<Run>, u64) {
    // A run into an older file of that key would merge with the copies.
    assert!(!runs.iter().any(|r| r.file == segment), "a relocation writes a segment of a new generation");
    let mut out = Vec::with_capacity(runs.len());
    let mut len = 0;
    for run in runs {
        if sources.contains(&run.file) {
            push_run(&mut out, Run { new: len, file: segment, ..*run });
            len += run.len;
        } else {
            push_run(&mut out, *run);
        }
    }
    assert_eq!(
        out.iter().map(|r| r.len).sum::<u64>(),
        runs.iter().map(|r| r.len).sum::<u64>(),
        "a relocation moves records, never adds or drops one"
    );
    (out, len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::mapping::IN_CHUNK;
    use pando_core::Hash;

    /// A pack of tree records, each referring to the given earlier records.
    fn pack(records: &[(u64, &[u64])]) -> BTreeMap<u64, (RecordKind, Vec<u8>, u64)> {
        let mut out = BTreeMap::new();
        for &(at, children) in records {
            let mut payload = vec![0u8];
            pando_core::varint::write_u64(&mut payload, 40);
            let bitmap: u32 = (1u32 << children.len()) - 1;
            payload.extend_from_slice(&bitmap.to_le_bytes());
            for child in children {
                pando_core::varint::write_u64(&mut payload, at - child);
                payload.extend_from_slice(Hash::of_bytes(b"x").as_bytes());
            }
            out.insert(at, (RecordKind::Tree, payload, 10));
        }
        out
    }

    fn run(old: u64, new: u64, len: u64, file: u64) -> Run {
        Run { old, new, len, file }
    }

    #[test]
    fn live_set_is_what_roots_reach_below_the_boundary() {
        // 10 <- 30 <- 50 (root above the boundary 45); 20 is garbage; 40 <- 60 (root); 10 shared.
        let records = pack(&[(10, &[]), (20, &[10]), (30, &[10]), (40, &[10]), (50, &[30]), (60, &[40, 30])]);
        let reads = std::cell::Cell::new(0);
        let mut read = |offset: u64, payload: &mut Vec<u8>| {
            reads.set(reads.get() + 1);
            let (kind, bytes, len) = records.get(&offset).ok_or(Error::Collected { offset })?;
            payload.clone_from(bytes);
            Ok((*kind, *len))
        };
        let live = live_records(45, [(30, 0), (40, 0), (99, 0)], &|_| false, &|_| false, &mut read).unwrap();
        assert_eq!(live.ranges, vec![(10, 10), (30, 20)], "touching records coalesce");
        assert_eq!(reads.get(), 3, "each live record read once");
        // Known records with every child needed are not visited again.
        let live = live_records(45, [(30, 0), (40, 0)], &|o| o == 30, &|_| false, &mut read).unwrap();
        assert_eq!(live.ranges, vec![(10, 10), (40, 10)]);
        // Known records are visited (for their children) but not listed again.
        let live = live_records(45, [(30, 0), (40, 0)], &|_| false, &|o| o == 10, &mut read).unwrap();
        assert_eq!(live.ranges, vec![(30, 20)]);
        assert_eq!(live.masks, vec![(10, 0)]);
    }

    #[test]
    fn damaged_reference_is_an_error() {
        let mut read = |_offset: u64, payload: &mut Vec<u8>| {
            payload.clone_from(&vec![0u8, 40, 1, 0, 0, 0, 99]);
            Ok((RecordKind::Tree, 10))
        };
        assert!(matches!(live_records(100, [(50, 0)], &|_| false, &|_| false, &mut read), Err(Error::Corrupt { .. })));
    }

    #[test]
    fn ranges_are_placed_where_they_lie_and_split_at_file_ends() {
        // Chunks at 0 and 100 in place; 100..130 of the pack are in segment 7 at 50.
        let mut locate = |offset: u64| -> Result<(u64, u64, u64)> {
            Ok(match offset {
                0..100 => (IN_CHUNK, offset, 100 - offset),
                100..130 => (7, 50 + offset - 100, 130 - offset),
                _ => (IN_CHUNK | 130, offset - 130, 1000),
            })
        };
        let runs = place(&[(10, 5), (15, 5), (90, 50)], &mut locate).unwrap();
        assert_eq!(
            runs,
            vec![run(10, 10, 10, IN_CHUNK), run(90, 90, 10, IN_CHUNK), run(100, 50, 30, 7), run(130, 0, 10, IN_CHUNK | 130)]
        );
        let mut nowhere = |_offset: u64| -> Result<(u64, u64, u64)> { Ok((1, 0, 0)) };
        assert!(place(&[(10, 5)], &mut nowhere).is_err());
        let merged = merge(runs.clone(), vec![run(20, 20, 5, IN_CHUNK), run(150, 0, 5, 7)]);
        assert_eq!(merged[0], run(10, 10, 15, IN_CHUNK), "contiguous in pack and file: one run");
        assert_eq!(merged.len(), runs.len() + 1);
        assert!(merged.windows(2).all(|w| w[0].end() <= w[1].old));
        let joined = concat(&[run(10, 10, 5, IN_CHUNK)], vec![run(15, 15, 5, IN_CHUNK), run(30, 0, 5, 7)]);
        assert_eq!(joined, vec![run(10, 10, 10, IN_CHUNK), run(30, 0, 5, 7)], "contiguous at the junction: one run");
    }

    #[test]
    fn mostly_dead_files_are_rewritten_in_groups() {
        // File 1: 100 bytes, 10 live; file 2: 100 bytes, 90 live (kept); file 3 and 4: 10 live of 100.
        let runs = vec![run(0, 0, 10, 1), run(100, 0, 90, 2), run(200, 0, 5, 3), run(250, 50, 5, 3), run(300, 0, 10, 4)];
        let sizes = BTreeMap::from([(1, 100), (2, 100), (3, 100), (4, 100)]);
        assert_eq!(rewrite_groups(&runs, &sizes, &|_| true, 20), vec![vec![1, 3], vec![4]]);
        assert_eq!(rewrite_groups(&runs, &sizes, &|_| true, 1000), vec![vec![1, 3, 4]]);
        assert_eq!(rewrite_groups(&runs, &sizes, &|f| f != 3, 1000), vec![vec![1, 4]]);
        let (moved, len) = relocate(&runs, &BTreeSet::from([1, 3]), 9);
        assert_eq!(len, 20);
        assert_eq!(moved, vec![run(0, 0, 10, 9), run(100, 0, 90, 2), run(200, 10, 5, 9), run(250, 15, 5, 9), run(300, 0, 10, 4)]);
    }
}
