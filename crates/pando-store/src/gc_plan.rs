//! The decisions of a garbage collection, as pure functions over a record
//! reader: which records below the boundary are live, and where they go in
//! the prefix file. `store::gc` acts on them (files, threads, the switch).
//!
//! Liveness: a record refers only to records written before it (lower
//! offsets), so popping the highest pending offset from a max-heap visits
//! every live record once, each after all of its referrers. A tree inode
//! reached only through patches is needed without the children those
//! patches replaced: the masks of its referrers are intersected while it
//! is pending (see `format::node::references`). Memory is the frontier
//! (heap and pending masks) plus the output list of 16 bytes per live
//! record: no hash table of every object in the store.
//!
//! Invariants: the live list is sorted and without duplicates; runs
//! coalesce only records that touch, and are laid out densely in the prefix
//! in order of their logical offsets, after the prefix's first `base` bytes.

use std::collections::{BinaryHeap, HashMap};

use crate::error::{Error, Result};
use crate::format::mapping::Run;
use crate::format::node::references;
use crate::format::record::RecordKind;

/// Reads the record at an offset: its kind, payload and length in bytes.
pub type ReadRecord<'a> = dyn FnMut(u64) -> Result<(RecordKind, Vec<u8>, u64)> + 'a;

/// What `live_records` found.
#[derive(Debug, Default)]
pub struct Live {
    /// Records to copy: `(offset, length)`, ascending.
    pub records: Vec<(u64, u64)>,
    /// Records visited with a mask, and records already copied that were
    /// visited again: `(offset, mask)`.
    pub masks: Vec<(u64, u32)>,
}

/// Every record below `boundary` reachable from `roots` (offsets with
/// masks, see `format::node::references`; roots at or above the boundary
/// are ignored). Records for which `skip` is true (copied, with every
/// child needed) are not visited; records for which `copied` is true are
/// visited (a referrer may now need children it did not) but not listed.
pub fn live_records(
    boundary: u64,
    roots: impl IntoIterator<Item = (u64, u32)>,
    skip: &dyn Fn(u64) -> bool,
    copied: &dyn Fn(u64) -> bool,
    read: &mut ReadRecord<'_>,
) -> Result<Live> {
    let mut heap: BinaryHeap<u64> = BinaryHeap::new();
    // The pending offsets and the children none of their referrers needs.
    let mut masks: HashMap<u64, u32> = HashMap::new();
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
    let mut refs = Vec::new();
    while let Some(offset) = heap.pop() {
        let mask = masks.remove(&offset).expect("pending offsets have a mask");
        let (kind, payload, len) = read(offset)?;
        refs.clear();
        references(kind, &payload, offset, mask, &mut refs).map_err(|reason| Error::corrupt("pack", offset, reason))?;
        for &r in &refs {
            if r.0 >= offset {
                return Err(Error::corrupt("pack", offset, "a record refers to a later one"));
            }
            push(&mut heap, &mut masks, r);
        }
        let was_copied = copied(offset);
        if !was_copied {
            live.records.push((offset, len));
        }
        if mask != 0 || was_copied {
            live.masks.push((offset, mask));
        }
    }
    live.records.reverse();
    Ok(live)
}

/// Appends to `out` what the record at `offset` (kept whole) needs below `boundary`.
pub fn references_below(boundary: u64, offset: u64, kind: RecordKind, payload: &[u8], out: &mut Vec<(u64, u32)>) -> Result<()> {
    let start = out.len();
    references(kind, payload, offset, 0, out).map_err(|reason| Error::corrupt("pack", offset, reason))?;
    let mut keep = start;
    for i in start..out.len() {
        if out[i].0 < boundary {
            out[keep] = out[i];
            keep += 1;
        }
    }
    out.truncate(keep);
    Ok(())
}

/// Lays out `live` (ascending) in the prefix from position `base`:
/// touching records share a run, unless the run would cross one of
/// `breaks` (chunk starts: a run is read from one file).
pub fn runs(live: &[(u64, u64)], base: u64, breaks: &[u64]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    let mut new = base;
    for &(old, len) in live {
        match runs.last_mut() {
            Some(run) if run.old + run.len == old && breaks.binary_search(&old).is_err() => run.len += len,
            _ => runs.push(Run { old, new, len }),
        }
        new += len;
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use pando_core::Hash;
    use std::collections::BTreeMap;

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

    #[test]
    fn live_set_is_what_roots_reach_below_the_boundary() {
        // 10 <- 30 <- 50 (root above the boundary 45); 20 is garbage; 40 <- 60 (root); 10 shared.
        let records = pack(&[(10, &[]), (20, &[10]), (30, &[10]), (40, &[10]), (50, &[30]), (60, &[40, 30])]);
        let reads = std::cell::Cell::new(0);
        let mut read = |offset: u64| {
            reads.set(reads.get() + 1);
            records.get(&offset).cloned().ok_or(Error::Collected { offset })
        };
        let live = live_records(45, [(30, 0), (40, 0), (99, 0)], &|_| false, &|_| false, &mut read).unwrap();
        assert_eq!(live.records, vec![(10, 10), (30, 10), (40, 10)]);
        assert_eq!(reads.get(), 3, "each live record read once");
        // Already copied records are not visited again.
        let live = live_records(45, [(30, 0), (40, 0)], &|o| o == 30, &|_| false, &mut read).unwrap();
        assert_eq!(live.records, vec![(10, 10), (40, 10)]);
        // Copied records are visited (for their children) but not listed again.
        let live = live_records(45, [(30, 0), (40, 0)], &|_| false, &|o| o == 10, &mut read).unwrap();
        assert_eq!(live.records, vec![(30, 10), (40, 10)]);
        assert_eq!(live.masks, vec![(10, 0)]);
    }

    #[test]
    fn damaged_reference_is_an_error() {
        let mut read = |_offset: u64| Ok((RecordKind::Tree, vec![0u8, 40, 1, 0, 0, 0, 99], 10));
        assert!(matches!(live_records(100, [(50, 0)], &|_| false, &|_| false, &mut read), Err(Error::Corrupt { .. })));
    }

    #[test]
    fn runs_coalesce_touching_records_within_a_chunk() {
        let live = [(0, 10), (10, 5), (20, 5), (25, 5), (30, 4)];
        let runs = runs(&live, 100, &[0, 30]);
        assert_eq!(
            runs,
            vec![Run { old: 0, new: 100, len: 15 }, Run { old: 20, new: 115, len: 10 }, Run { old: 30, new: 125, len: 4 }]
        );
    }
}
