//! Patch records: a tree inode or a value inode written as what changed
//! over an earlier version of it (its base), and what a reader, the
//! check and a collection need to resolve one.
//!
//! Tree patch payload: `u8 depth ‖ varint len ‖ varint base_delta ‖ u32
//! changed ‖ u32 present ‖ (varint delta ‖ inode hash)*`. Value patch
//! payload: see [`ValuesPatch`].
//!
//! Invariants:
//! - A chain from a patch to a full record is at most [`MAX_PATCH_CHAIN`]
//!   patches long (the writer chooses, the reader refuses longer; tested
//!   by `a_chain_starts_again_over_its_full_record`).
//! - A value patch's masks and positions say, without reading any step,
//!   which entry of the version it gives comes from its base and which
//!   from itself ([`layout`]), so that a collection maps a mask over the
//!   one to a mask over the other (asserted in `layout`).
//! - A patch is written only as decoding reads it: a child for each
//!   present entry, changes within its base, insertions in order (asserted
//!   in `encode_values_patch`); a tree patch's changes in index order
//!   (asserted in `TreePatch::encode`).

use pando_core::Hash;
use pando_core::inode::ENTRIES;
use pando_core::varint::write_u64;

use super::node::{
    Reader, Resolved, StoredChild, StoredEntry, read_child, read_step, read_stored_child, read_stored_entry, write_child,
    write_delta, write_entry,
};
use crate::dict::Dict;
use crate::node::{Body, Child, Inode, Ptr, Values, ValuesBuilder, ValuesMarks};

/// Longest chain of patch records from a full record (a patch at its end
/// is followed by a full record, or by a patch over the chain's full
/// record); also bounds how deep decoding follows bases.
pub const MAX_PATCH_CHAIN: u8 = 4;
/// Most changed children a tree patch record holds (31 was measured:
/// 1.6 MB less on `small`'s 341 MB, about 3% slower).
pub const MAX_PATCH_CHANGES: usize = 8;
/// Most changed children a tree patch over its chain's root (a full
/// record) holds: one naming 16 of 32 children is about 600 bytes
/// against the full record's 1.1 KB.
pub const MAX_ROOT_CHANGES: usize = 16;

/// A tree inode recorded as changes to a base tree inode.
///
/// Payload: `u8 depth ‖ varint len ‖ varint base_delta ‖ u32 changed ‖
/// u32 present ‖ (varint delta ‖ inode hash)*` for the children that changed
/// and are present, in index order; a changed child that is not present was
/// removed.
#[derive(Debug)]
pub struct TreePatch {
    pub depth: u32,
    pub len: u64,
    pub base: u64,
    /// Changed children: index, and the new pointer (offset, hash) if present.
    pub changes: Vec<(usize, Option<(u64, Hash)>)>,
}

impl TreePatch {
    pub fn encode(&self, at: u64, out: &mut Vec<u8>) {
        assert!(self.depth < 256 && self.base < at, "patch of an earlier tree inode");
        // Decoding reads the changes in index order, from the masks.
        debug_assert!(
            !self.changes.is_empty() && self.changes.windows(2).all(|w| w[0].0 < w[1].0),
            "a tree patch names its changed children in increasing index order"
        );
        out.push(self.depth as u8);
        write_u64(out, self.len);
        write_u64(out, at - self.base);
        let (mut changed, mut present) = (0u32, 0u32);
        for (index, pointer) in &self.changes {
            changed |= 1 << index;
            if pointer.is_some() {
                present |= 1 << index;
            }
        }
        out.extend_from_slice(&changed.to_le_bytes());
        out.extend_from_slice(&present.to_le_bytes());
        for (_, pointer) in &self.changes {
            if let Some((offset, hash)) = pointer {
                write_delta(out, at, *offset, hash);
            }
        }
    }

    pub fn decode(payload: &[u8], at: u64, depth: u32) -> Result<TreePatch, String> {
        let mut r = Reader { bytes: payload, pos: 0 };
        r.depth(depth, "tree patch")?;
        let len = r.varint()?;
        let base_delta = r.varint()?;
        if base_delta == 0 || base_delta > at {
            return Err(format!("base delta {base_delta} invalid for a record at {at}"));
        }
        let changed = u32::from_le_bytes(r.take(4)?.try_into().expect("4 bytes"));
        let present = u32::from_le_bytes(r.take(4)?.try_into().expect("4 bytes"));
        if changed == 0 || present & !changed != 0 {
            return Err("tree patch without changes, or with a present child that did not change".into());
        }
        let mut changes = Vec::new();
        for index in 0..ENTRIES {
            if changed & (1 << index) != 0 {
                let pointer = if present & (1 << index) != 0 { Some(r.pointer(at)?) } else { None };
                changes.push((index, pointer));
            }
        }
        r.finish()?;
        Ok(TreePatch { depth, len, base: at - base_delta, changes })
    }

    /// The tree inode this patch describes, given its base.
    pub fn apply(&self, base: &Inode) -> Result<Inode, String> {
        let Body::Tree(base) = &base.body else {
            return Err("the base of a tree patch is not a tree inode".into());
        };
        if base.depth != self.depth {
            return Err(format!("tree patch at depth {} has a base at depth {}", self.depth, base.depth));
        }
        if self.len <= super::node::MIN_FAN_OUT {
            return Err(format!("tree inode with only {} entries", self.len));
        }
        let mut pointers = base.clone();
        pointers.len = self.len;
        for (index, pointer) in &self.changes {
            pointers.put(*index, pointer.map(|(offset, hash)| Ptr::stored(offset, hash)));
        }
        if pointers.count() == 0 {
            return Err("tree inode without children".into());
        }
        Ok(Inode::new(Body::Tree(pointers)))
    }
}

/// A value inode recorded as changes to an earlier version of it, its
/// base (a value inode or value patch record, found `base_delta` bytes
/// before it).
///
/// Payload: `varint base_delta ‖ varint count ‖ varint changed ‖ varint
/// present ‖ (u8 child_kind ‖ child)* ‖ varint inserted ‖ (varint
/// position ‖ entry)*`. `changed` and `present` are masks over the base's
/// entries (bit `i` for its `i`-th entry, in step order): an entry in
/// `changed` is replaced by the next child that follows if it is also in
/// `present`, else removed; the others are kept as they are. The
/// `inserted` entries (tag, step and child, as in a value inode) are new
/// steps, in order, each before the base's entry at its `position` (the
/// base's length: after them all), so that which entry of the result
/// comes from where is known without comparing steps. `count` is the
/// number of entries the result holds. A replaced entry keeps its step, so
/// a patch never writes again the name of an entry it does not add.
#[derive(Clone)]
pub struct ValuesPatch {
    pub base: u64,
    pub count: usize,
    pub changed: u32,
    pub present: u32,
    /// The children of the replaced entries, in base order.
    pub replaced: Vec<Child>,
    /// The new entries, in step order, each with its position in the base.
    pub inserted: Vec<(usize, Vec<u8>, Child)>,
}

/// Encodes the value inode `values` (its children `resolved`) as a patch
/// over the record at `base`, the written version it derives from,
/// `marks` saying which entries changed since. A child written at or after `start` (this
/// commit's first record) changed too: a directory changed below, or a
/// blob a collection removed, written again.
/// Returns the indices of the entries it inserts (whose steps it writes;
/// the writer notes those written raw once it chooses the patch), and how
/// many entries it names (replaced or inserted).
#[expect(clippy::too_many_arguments, reason = "the base and its marks, the inode, where it and its commit start, the dictionary")]
pub fn encode_values_patch(
    base: u64,
    marks: &ValuesMarks,
    values: &Values,
    resolved: &[Resolved<'_>],
    start: u64,
    at: u64,
    dict: &Dict,
    out: &mut Vec<u8>,
) -> (smallvec::SmallVec<[usize; ENTRIES]>, usize) {
    assert!(base < at, "a patch of an earlier value inode");
    let (mut changed, mut present) = (marks.removed | marks.replaced, marks.replaced);
    // The entries whose child is replaced (in the base's order too).
    let mut replaced: smallvec::SmallVec<[usize; ENTRIES]> = smallvec::SmallVec::new();
    // Each new entry, and the base's entry it comes before.
    let mut inserted: smallvec::SmallVec<[(usize, usize); ENTRIES]> = smallvec::SmallVec::new();
    for (j, source) in marks.sources(values.len()).enumerate() {
        match source {
            Ok(i) => {
                let written = match resolved[j] {
                    Resolved::Dir(offset, _) | Resolved::Blob(offset, _) => offset >= start,
                    Resolved::Inline(_) => false,
                };
                if written || marks.replaced & (1 << i) != 0 {
                    changed |= 1 << i;
                    present |= 1 << i;
                    replaced.push(j);
                }
            }
            Err(position) => inserted.push((j, position)),
        }
    }
    // What `parse_patch` checks of what it reads, true of what is written.
    debug_assert_eq!(replaced.len(), present.count_ones() as usize, "a replaced child for each present entry");
    debug_assert!(
        {
            let base_len = values.len() + (changed & !present).count_ones() as usize - inserted.len();
            base_len <= ENTRIES && (base_len == ENTRIES || changed >> base_len == 0)
                && inserted.windows(2).all(|w| w[0].1 <= w[1].1)
                && inserted.last().is_none_or(|&(_, position)| position <= base_len)
        },
        "a value patch changes entries of its base only, and inserts in order"
    );
    write_u64(out, at - base);
    write_u64(out, values.len() as u64);
    write_u64(out, u64::from(changed));
    write_u64(out, u64::from(present));
    for &j in &replaced {
        let at_kind = out.len();
        out.push(0);
        let kind = write_child(out, at, &resolved[j]);
        out[at_kind] = kind;
    }
    write_u64(out, inserted.len() as u64);
    for &(j, position) in &inserted {
        write_u64(out, position as u64);
        write_entry(out, at, values.step(j), &resolved[j], dict, None);
    }
    (inserted.iter().map(|&(j, _)| j).collect(), replaced.len() + inserted.len())
}

/// A value patch as stored: its structure, without the dictionary.
pub struct StoredPatch<'a> {
    pub base: u64,
    pub count: usize,
    pub changed: u32,
    pub present: u32,
    pub replaced: smallvec::SmallVec<[StoredChild<'a>; 4]>,
    /// The new entries, each with its position in the base.
    pub inserted: smallvec::SmallVec<[(usize, StoredEntry<'a>); 4]>,
}

/// Where an entry of a patch's result comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchSource {
    /// The base's entry at this index, kept.
    Kept(usize),
    /// The base's entry at this index, its child replaced by the patch's
    /// `k`-th replaced child.
    Replaced(usize, usize),
    /// The patch's `k`-th inserted entry.
    Inserted(usize),
}

impl StoredPatch<'_> {
    /// How many entries its base holds.
    pub fn base_len(&self) -> usize {
        self.count + (self.changed & !self.present).count_ones() as usize - self.inserted.len()
    }

    /// The source of each entry of the result, in order.
    pub fn layout(&self) -> smallvec::SmallVec<[PatchSource; ENTRIES]> {
        layout(self.base_len(), self.changed, self.present, self.inserted.iter().map(|(position, _)| *position))
    }

    /// Reads the structure of a value patch recorded at `at`.
    pub fn parse<'a>(payload: &'a [u8], at: u64) -> Result<StoredPatch<'a>, String> {
        let parts = parse_patch(payload, at, read_stored_child, |r| read_stored_entry(r, at))?;
        let PatchParts { base, count, changed, present, replaced, inserted } = parts;
        Ok(StoredPatch { base, count, changed, present, replaced, inserted })
    }
}

/// A value patch's fields, with its replaced children and its inserted
/// entries (each with its position) as `parse_patch` read them.
struct PatchParts<C, E> {
    base: u64,
    count: usize,
    changed: u32,
    present: u32,
    replaced: smallvec::SmallVec<[C; 4]>,
    inserted: smallvec::SmallVec<[(usize, E); 4]>,
}

/// Reads a value patch recorded at `at`, its children with `child` (given
/// their kind) and its inserted entries with `entry`, and checks its
/// shape: masks, counts and positions that fit its base.
fn parse_patch<'a, C, E>(
    payload: &'a [u8],
    at: u64,
    mut child: impl FnMut(&mut Reader<'a>, u8, u64) -> Result<C, String>,
    mut entry: impl FnMut(&mut Reader<'a>) -> Result<E, String>,
) -> Result<PatchParts<C, E>, String> {
    let mut r = Reader { bytes: payload, pos: 0 };
    let base_delta = r.varint()?;
    if base_delta == 0 || base_delta > at {
        return Err(format!("base delta {base_delta} invalid for a record at {at}"));
    }
    let count = r.varint()?;
    if count > ENTRIES as u64 {
        return Err(format!("value inode with {count} entries (at most {ENTRIES})"));
    }
    let mask = |v: u64| u32::try_from(v).map_err(|_| format!("entry mask {v:#x} wider than {ENTRIES} entries"));
    let changed = mask(r.varint()?)?;
    let present = mask(r.varint()?)?;
    if present & !changed != 0 {
        return Err("value patch with a replaced entry that did not change".into());
    }
    let mut replaced = smallvec::SmallVec::new();
    for _ in 0..present.count_ones() {
        let kind = r.byte()?;
        replaced.push(child(&mut r, kind, at)?);
    }
    let n = r.varint()?;
    if n > count {
        return Err(format!("value patch inserting {n} entries into {count}"));
    }
    let removed = u64::from((changed & !present).count_ones());
    let base_len = count + removed - n;
    if base_len > ENTRIES as u64 || (base_len < ENTRIES as u64 && changed >> base_len != 0) {
        return Err(format!("value patch changing entries past its base's {base_len}"));
    }
    let mut inserted: smallvec::SmallVec<[(usize, E); 4]> = smallvec::SmallVec::new();
    for _ in 0..n {
        let position = r.varint()?;
        if inserted.last().is_some_and(|&(last, _)| position < last as u64) || position > base_len {
            return Err(format!("inserted entry at position {position}, out of order or past its base's {base_len} entries"));
        }
        inserted.push((position as usize, entry(&mut r)?));
    }
    r.finish()?;
    Ok(PatchParts { base: at - base_delta, count: count as usize, changed, present, replaced, inserted })
}

/// The source of each entry of a patch's result: `positions` are its
/// inserted entries' (nondecreasing, at most `base_len`).
fn layout(base_len: usize, changed: u32, present: u32, positions: impl Iterator<Item = usize>) -> smallvec::SmallVec<[PatchSource; ENTRIES]> {
    let mut out: smallvec::SmallVec<[PatchSource; ENTRIES]> = smallvec::SmallVec::new();
    let mut positions = positions.enumerate().peekable();
    let mut replaced = 0;
    for b in 0..=base_len {
        while let Some((k, _)) = positions.next_if(|&(_, position)| position == b) {
            out.push(PatchSource::Inserted(k));
        }
        if b == base_len {
            break;
        }
        if changed & (1 << b) == 0 {
            out.push(PatchSource::Kept(b));
        } else if present & (1 << b) != 0 {
            out.push(PatchSource::Replaced(b, replaced));
            replaced += 1;
        }
    }
    // A position out of order or past the base would lose its entry.
    debug_assert!(positions.next().is_none(), "every inserted entry placed: positions in order, within the base");
    debug_assert_eq!(replaced, present.count_ones() as usize, "a replaced child for each present entry of the base");
    out
}

impl ValuesPatch {
    pub fn decode(payload: &[u8], at: u64, dict: &Dict) -> Result<ValuesPatch, String> {
        let entry = |r: &mut Reader<'_>| -> Result<(Vec<u8>, Child), String> {
            let tag = r.byte()?;
            let mut step = Vec::new();
            read_step(r, tag, dict, &mut step)?;
            Ok((step, read_child(r, tag >> 2, at)?))
        };
        let parts = parse_patch(payload, at, read_child, entry)?;
        if parts.inserted.windows(2).any(|pair| pair[0].1.0 >= pair[1].1.0) {
            return Err("inserted entries not sorted or not unique".into());
        }
        let PatchParts { base, count, changed, present, replaced, inserted } = parts;
        let inserted = inserted.into_iter().map(|(position, (step, child))| (position, step, child)).collect();
        Ok(ValuesPatch { base, count, changed, present, replaced: replaced.into_vec(), inserted })
    }

    /// The value inode this patch describes, given its base.
    pub fn apply(&self, base: &Inode) -> Result<Inode, String> {
        let Body::Values(base) = &base.body else {
            return Err("the base of a value patch is not a value inode".into());
        };
        let removed = (self.changed & !self.present).count_ones() as usize;
        if self.count + removed != base.len() + self.inserted.len() {
            return Err(format!("value patch over {} entries, for a base of {}", self.count + removed - self.inserted.len(), base.len()));
        }
        let names = base.iter().map(|(step, _)| step.len()).sum::<usize>() + self.inserted.iter().map(|(_, s, _)| s.len()).sum::<usize>();
        let mut values = ValuesBuilder::new(names, self.count);
        for source in layout(base.len(), self.changed, self.present, self.inserted.iter().map(|(position, _, _)| *position)) {
            let (step, child) = match source {
                PatchSource::Kept(b) => (base.step(b), base.child(b)),
                PatchSource::Replaced(b, k) => (base.step(b), &self.replaced[k]),
                PatchSource::Inserted(k) => (&self.inserted[k].1[..], &self.inserted[k].2),
            };
            if values.last_step().is_some_and(|last| last >= step) {
                return Err("value patch giving entries not sorted or not unique".into());
            }
            values.push(step, child.clone());
        }
        if values.len() != self.count {
            return Err(format!("value patch says {} entries, gives {}", self.count, values.len()));
        }
        Ok(Inode::new(Body::Values(values.finish())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dict::RawSteps;
    use crate::format::node::{encode_values, references, resolve_children};
    use crate::format::record::RecordKind;
    use crate::node::{BaseShape, Loader, NoLoader, State};
    use std::sync::Arc;

    /// A value patch names only what changed (a replaced child, a removed
    /// entry, an inserted one, a directory written again), gives back the
    /// new version over its base, and tells a collection which of the
    /// base's entries it still needs: those it keeps, minus those a mask
    /// over its own entries names.
    #[test]
    fn a_value_patch_names_what_changed_and_maps_masks_to_its_base() {
        let dir = |offset: u64| Child::Dir(Ptr::stored(offset, Hash::of_bytes(&offset.to_le_bytes())));
        let base_values = Values::from_sorted([(&b"a"[..], dir(10)), (b"b", dir(20)), (b"c", dir(30)), (b"d", dir(40))]);
        let base = Inode::new(Body::Values(base_values.clone()));
        // b replaced, c removed, "bb" and "e" inserted; a and d kept. The
        // updates mark what they change, on the written version.
        let mut now = Arc::new(Inode::new(Body::Values(base_values)));
        Arc::get_mut(&mut now).expect("not shared").meta = State::loaded(1, 100, 0);
        let r = &NoLoader as &dyn Loader;
        for (step, child) in [(&b"b"[..], dir(50)), (b"bb", dir(60)), (b"e", dir(70))] {
            pando_core::dir::set(&mut now, 0, step, child, r).unwrap();
        }
        assert!(pando_core::dir::remove(&mut now, 0, b"c", r).unwrap());
        let over = now.meta.begin_write().expect("a written version changed").base;
        let BaseShape::Values(marks) = over.shape else { panic!("a value inode's marks") };
        let Body::Values(new) = &now.body else { panic!("a value inode") };
        let (dict, mut out) = (Dict::default(), Vec::new());
        let resolved = resolve_children(new, &[]);
        let (inserted, named) = encode_values_patch(over.offset, &marks, new, &resolved, 1_000, 1_000, &dict, &mut out);
        assert_eq!((inserted.to_vec(), named), (vec![2, 4], 3));
        let patch = ValuesPatch::decode(&out, 1_000, &dict).unwrap();
        assert_eq!((patch.base, patch.changed, patch.present), (100, 0b0110, 0b0010));
        let Body::Values(applied) = patch.apply(&base).unwrap().body else { panic!("a value inode") };
        assert!(applied.iter().map(|(s, _)| s).eq(new.iter().map(|(s, _)| s)));
        assert_eq!(resolve_children(&applied, &[]), resolve_children(new, &[]));
        // Reached whole: its own children (b, bb, e), and the base without
        // the entries it changed (b, c). Reached with d and bb masked (its
        // entries 3 and 2): not bb, and the base without d either.
        let mut refs = Vec::new();
        references(RecordKind::ValuesPatch, &out, 1_000, 0, &mut refs).unwrap();
        assert_eq!(refs, vec![(50, 0), (60, 0), (70, 0), (100, 0b0110)]);
        refs.clear();
        references(RecordKind::ValuesPatch, &out, 1_000, 0b1100, &mut refs).unwrap();
        assert_eq!(refs, vec![(50, 0), (70, 0), (100, 0b1110)]);
        // The base reached with that mask needs a only.
        let (mut full, mut raw) = (Vec::new(), RawSteps::default());
        let Body::Values(base_values) = &base.body else { unreachable!() };
        encode_values(base_values, 100, &resolve_children(base_values, &[]), &dict, Some(&mut raw), &mut full);
        refs.clear();
        references(RecordKind::Values, &full, 100, 0b1110, &mut refs).unwrap();
        assert_eq!(refs, vec![(10, 0)]);
        // A directory written again since (at or after the commit's first
        // record) is named, though no update marked it.
        out.clear();
        let (_, named) = encode_values_patch(over.offset, &marks, new, &resolved, 35, 1_000, &dict, &mut out);
        let again = ValuesPatch::decode(&out, 1_000, &dict).unwrap();
        assert_eq!((named, again.changed, again.present), (4, 0b1110, 0b1010));
    }
}
