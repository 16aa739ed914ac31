//! Encoding of value and tree inodes in pack records, and what each
//! record refers to (patches: `patch`; commits: `commit`).
//!
//! Value inode payload: `LEB128 n ‖ entry*`, each entry
//! `tag: u8 ‖ step ‖ child`, where `tag = step_kind | child_kind << 2`:
//! - step kinds: 0 dictionary id (`LEB128 id`), 1 raw (`LEB128 len ‖ bytes`),
//!   2 lower-case hex stored as binary (`LEB128 byte_len ‖ bytes`);
//! - child kinds: 0 directory (`LEB128 delta ‖ hash`), 1 inline contents
//!   (`LEB128 len ‖ bytes`, at most [`INLINE_MAX`] bytes), 2 blob
//!   (`LEB128 delta ‖ hash`).
//!
//! Tree inode payload: `u8 depth ‖ LEB128 len ‖ u32 LE bitmap ‖
//! (LEB128 delta ‖ inode hash)*` in index order.
//!
//! A `delta` is the record's own offset minus the child's offset: children
//! are always written before their parents, so it is positive and small.
//!
//! Invariants:
//! - Decoding checks every structural rule (sorted unique entries, counts,
//!   depths, deltas) so damaged bytes that pass the checksum still cannot
//!   produce an inode that breaks the tree's invariants (tested by
//!   `the_fuzz_seeds_decode_without_a_panic`, which also encodes again
//!   what decodes).
//! - Encoding writes only what decoding accepts: a value inode of at most
//!   32 entries, each with its child (asserted in `encode_values`); a tree
//!   inode of more than 32 entries whose children come in index order
//!   (asserted in `encode_tree`); children before their parent (asserted
//!   in `write_delta`).

use pando_core::Hash;
use pando_core::inode::{ENTRIES, index};
use pando_core::varint::{self, len_u64, write_u64};

use crate::dict::{Dict, RawSteps, read_bytes};
use crate::format::record::RecordKind;
use super::commit::CommitRecord;
use super::patch::{PatchSource, StoredPatch, TreePatch};
use crate::node::{Body, Child, Held, Inline, Inode, Leaf, Pointers, Ptr, Values, ValuesBuilder};
use pando_core::dir::Hold;

pub use crate::node::INLINE_MAX;

const STEP_DICT: u8 = 0;
const STEP_RAW: u8 = 1;
const STEP_HEX: u8 = 2;
const CHILD_DIR: u8 = 0;
const CHILD_INLINE: u8 = 1;
const CHILD_BLOB: u8 = 2;

/// The value of each lower-case hex digit; 0xff for every other byte.
const HEX_VALUES: [u8; 256] = {
    let mut table = [0xff; 256];
    let mut i = 0;
    while i < 16 {
        table[b"0123456789abcdef"[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// How a value inode's record stores a step: the one rule for writing
/// it, measuring it and noting the raw ones.
#[derive(Clone, Copy)]
enum StepForm {
    /// Lower-case hex digits of an even length of at least 2, as binary.
    Hex,
    /// Its id in the dictionary.
    Dict(u32),
    /// As it is.
    Raw,
}

impl StepForm {
    fn of(step: &[u8], dict: &Dict) -> StepForm {
        if step.len() >= 2 && step.len().is_multiple_of(2) && step.iter().all(|&b| HEX_VALUES[usize::from(b)] <= 15) {
            StepForm::Hex
        } else if let Some(id) = dict.id_of(step) {
            StepForm::Dict(id)
        } else {
            StepForm::Raw
        }
    }

    /// Bytes it takes for `step`.
    fn len(self, step: &[u8]) -> usize {
        match self {
            StepForm::Hex => len_u64(step.len() as u64 / 2) + step.len() / 2,
            StepForm::Dict(id) => len_u64(u64::from(id)),
            StepForm::Raw => len_u64(step.len() as u64) + step.len(),
        }
    }
}

/// Writes a step; one written raw is noted in `raw_steps` (if given: a
/// record that may not be written notes them once chosen, with
/// [`note_raw_steps`]).
fn write_step(out: &mut Vec<u8>, step: &[u8], dict: &Dict, raw_steps: Option<&mut RawSteps>) -> u8 {
    match StepForm::of(step, dict) {
        StepForm::Hex => {
            write_u64(out, (step.len() / 2) as u64);
            // The bytes written in place: no capacity check per byte.
            let at = out.len();
            out.resize(at + step.len() / 2, 0);
            for (byte, pair) in out[at..].iter_mut().zip(step.chunks_exact(2)) {
                *byte = HEX_VALUES[usize::from(pair[0])] << 4 | HEX_VALUES[usize::from(pair[1])];
            }
            STEP_HEX
        }
        StepForm::Dict(id) => {
            write_u64(out, u64::from(id));
            STEP_DICT
        }
        StepForm::Raw => {
            write_u64(out, step.len() as u64);
            out.extend_from_slice(step);
            if let Some(raw_steps) = raw_steps {
                raw_steps.note(step);
            }
            STEP_RAW
        }
    }
}

/// Notes in `raw_steps` the steps of `steps` a record writes raw (neither
/// hex nor in the dictionary), as [`write_step`] would have.
pub fn note_raw_steps<'s>(steps: impl Iterator<Item = &'s [u8]>, dict: &Dict, raw_steps: &mut RawSteps) {
    for step in steps.filter(|step| matches!(StepForm::of(step, dict), StepForm::Raw)) {
        raw_steps.note(step);
    }
}

/// The length of what [`encode_values`] writes, without writing it.
pub fn values_len(values: &Values, at: u64, resolved: &[Resolved<'_>], dict: &Dict) -> usize {
    let entries = values.iter().zip(resolved).map(|((step, _), child)| 1 + StepForm::of(step, dict).len(step) + child_len(at, child));
    len_u64(values.len() as u64) + entries.sum::<usize>()
}

/// A value inode's child as a record stores it: what a full record and
/// a patch write, and what a patch compares with its base's entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolved<'a> {
    /// A directory: its root inode's offset and the directory's hash.
    Dir(u64, Hash),
    /// Contents of at most [`INLINE_MAX`] bytes.
    Inline(&'a [u8]),
    /// Contents in a blob record: its offset and the contents' hash.
    Blob(u64, Hash),
}

/// The children of a value inode as its record stores them. Every child
/// is written already: inline contents, a blob or a directory, each
/// stored (a pointer carrying the hash it writes) or in memory; for those
/// in memory (large values and directory roots), `written` gives the
/// offsets they were written at, in entry order; a value's hash is its
/// memo, a directory's the one its pointer keeps since the writer hashed it.
pub fn resolve_children<'v>(values: &'v Values, written: &[u64]) -> smallvec::SmallVec<[Resolved<'v>; ENTRIES]> {
    let mut written = written.iter().copied();
    let mut next_written = || written.next().expect("an offset for each child in memory");
    let resolved = values
        .children()
        .map(|child| match child {
            Child::Contents(Leaf::Inline(inline)) => Resolved::Inline(inline.bytes()),
            Child::Contents(Leaf::Value(value)) => Resolved::Blob(next_written(), value.hash()),
            Child::Contents(leaf @ (Leaf::Blob { .. } | Leaf::Staged(_))) => {
                let (offset, hash) = leaf.stored_blob().expect("a blob");
                Resolved::Blob(offset, hash)
            }
            Child::Dir(Ptr::Stored { offset, hash }) => Resolved::Dir(*offset, *hash),
            Child::Dir(ptr @ Ptr::Mem(..)) => {
                // The writer hashed it through this pointer, which keeps the hash.
                let hash = Held::known_hash(ptr).expect("a directory is hashed before it is written");
                Resolved::Dir(next_written(), hash)
            }
        })
        .collect();
    // An offset left over means one given for another child.
    debug_assert!(written.next().is_none(), "an offset for each child in memory, and no more");
    resolved
}

/// Bytes [`write_child`] writes for `child`.
fn child_len(at: u64, child: &Resolved<'_>) -> usize {
    match child {
        Resolved::Inline(bytes) => len_u64(bytes.len() as u64) + bytes.len(),
        Resolved::Blob(offset, _) | Resolved::Dir(offset, _) => len_u64(at - offset) + std::mem::size_of::<Hash>(),
    }
}

/// Writes a child as an entry stores it; returns its child kind.
pub(super) fn write_child(out: &mut Vec<u8>, at: u64, child: &Resolved<'_>) -> u8 {
    match child {
        Resolved::Inline(bytes) => {
            write_u64(out, bytes.len() as u64);
            out.extend_from_slice(bytes);
            CHILD_INLINE
        }
        Resolved::Blob(offset, hash) => {
            write_delta(out, at, *offset, hash);
            CHILD_BLOB
        }
        Resolved::Dir(offset, hash) => {
            write_delta(out, at, *offset, hash);
            CHILD_DIR
        }
    }
}

/// Writes an entry: its tag, step and child.
pub(super) fn write_entry(out: &mut Vec<u8>, at: u64, step: &[u8], child: &Resolved<'_>, dict: &Dict, raw_steps: Option<&mut RawSteps>) {
    // The entry's tag byte, set once its step and child are written.
    let tag = out.len();
    out.push(0);
    let step_kind = write_step(out, step, dict, raw_steps);
    let child_kind = write_child(out, at, child);
    out[tag] = step_kind | child_kind << 2;
}

/// Encodes a value inode whose children are `resolved` (see
/// [`resolve_children`]); `raw_steps` as [`write_step`] takes it.
pub fn encode_values(
    values: &Values,
    at: u64,
    resolved: &[Resolved<'_>],
    dict: &Dict,
    mut raw_steps: Option<&mut RawSteps>,
    out: &mut Vec<u8>,
) {
    debug_assert!(values.len() <= ENTRIES, "a value inode holds at most {ENTRIES} entries");
    // `zip` would drop the entries past the shorter list, under a count that names them.
    debug_assert_eq!(values.len(), resolved.len(), "a resolved child for each entry");
    write_u64(out, values.len() as u64);
    for ((step, _), child) in values.iter().zip(resolved) {
        write_entry(out, at, step, child, dict, raw_steps.as_deref_mut());
    }
}

/// The smallest fan-out of a layout (the binary one's): a tree inode of
/// any layout holds more entries than that. The framing checks it;
/// [`misshapen`] holds an inode to the store's own layout.
pub const MIN_FAN_OUT: u64 = pando_core::inode::Layout::TEZOS_BINARY.entries as u64;

/// Why `inode` cannot be an inode of `layout`, if it cannot: the records'
/// framing admits the shapes of every layout (tree inodes of more than 2
/// entries, values inodes of at most 32), the store's layout only its own.
/// Every reader of a store's inodes asks here: the read side before it
/// caches or uses one, the integrity check as it walks the records.
pub fn misshapen(inode: &Inode, layout: pando_core::inode::Layout) -> Option<String> {
    match &inode.body {
        Body::Values(values) if values.len() > layout.entries => {
            Some(format!("value inode with {} entries (at most {} in this layout)", values.len(), layout.entries))
        }
        Body::Tree(pointers) if pointers.len <= layout.entries as u64 => {
            Some(format!("tree inode with only {} entries (more than {} in this layout)", pointers.len, layout.entries))
        }
        Body::Tree(pointers) if pointers.iter().any(|(i, _)| i >= layout.entries) || pointers.depth >= layout.max_depth => {
            Some(format!(
                "tree inode with a child index or a depth beyond this layout's ({} children, depth {})",
                layout.entries, pointers.depth
            ))
        }
        _ => None,
    }
}

/// Encodes a tree inode of `len` entries at `depth` from its children's
/// index, offset and inode hash, in index order.
pub fn encode_tree(depth: u32, len: u64, children: &[(usize, u64, Hash)], at: u64, out: &mut Vec<u8>) {
    assert!(depth < 256, "inode depth fits a byte");
    debug_assert!(len > MIN_FAN_OUT && !children.is_empty(), "a tree inode holds more than {MIN_FAN_OUT} entries");
    // Decoding gives the pointers to the bitmap's indices in increasing order.
    debug_assert!(children.windows(2).all(|w| w[0].0 < w[1].0), "tree inode children in increasing index order");
    out.push(depth as u8);
    write_u64(out, len);
    let bitmap = children.iter().fold(0u32, |bits, (i, _, _)| bits | 1 << i);
    out.extend_from_slice(&bitmap.to_le_bytes());
    for (_, offset, hash) in children {
        write_delta(out, at, *offset, hash);
    }
}

pub(super) fn write_delta(out: &mut Vec<u8>, at: u64, offset: u64, hash: &Hash) {
    assert!(offset < at, "a child is written before its parent");
    write_u64(out, at - offset);
    out.extend_from_slice(hash.as_bytes());
}

pub(super) struct Reader<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn varint(&mut self) -> Result<u64, String> {
        varint::read_u64(self.bytes, &mut self.pos).map_err(|e| e.to_string())
    }
    pub(super) fn byte(&mut self) -> Result<u8, String> {
        let b = *self.bytes.get(self.pos).ok_or("truncated payload")?;
        self.pos += 1;
        Ok(b)
    }
    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or("truncated payload")?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    pub(super) fn hash(&mut self) -> Result<Hash, String> {
        Ok(Hash::from_slice(self.take(32)?).expect("32 bytes"))
    }
    pub(super) fn pointer(&mut self, at: u64) -> Result<(u64, Hash), String> {
        let delta = self.varint()?;
        if delta == 0 || delta > at {
            return Err(format!("child offset delta {delta} invalid for a record at {at}"));
        }
        Ok((at - delta, self.hash()?))
    }
    /// Reads a depth byte and checks it is the expected one.
    pub(super) fn depth(&mut self, expected: u32, what: &str) -> Result<(), String> {
        let found = u32::from(self.byte()?);
        if found != expected {
            return Err(format!("{what} of depth {found} found at depth {expected}"));
        }
        Ok(())
    }
    pub(super) fn finish(&self) -> Result<(), String> {
        if self.pos != self.bytes.len() {
            return Err(format!("{} trailing bytes", self.bytes.len() - self.pos));
        }
        Ok(())
    }
}

/// Reads an entry's step of kind `tag & 3` into `step`.
pub(super) fn read_step(r: &mut Reader<'_>, tag: u8, dict: &Dict, step: &mut Vec<u8>) -> Result<(), String> {
    match tag & 3 {
        STEP_DICT => {
            let id = r.varint()?;
            step.extend_from_slice(dict.step_of(id).ok_or_else(|| format!("unknown dictionary id {id}"))?);
        }
        STEP_RAW => step.extend_from_slice(read_bytes(r.bytes, &mut r.pos)?),
        STEP_HEX => {
            let bytes = read_bytes(r.bytes, &mut r.pos)?;
            if bytes.is_empty() {
                return Err("empty hex step".into());
            }
            for b in bytes {
                step.push(b"0123456789abcdef"[(b >> 4) as usize]);
                step.push(b"0123456789abcdef"[(b & 15) as usize]);
            }
        }
        other => return Err(format!("unknown step kind {other}")),
    }
    Ok(())
}

/// Reads a child of kind `kind` in a record at `at`.
pub(super) fn read_child(r: &mut Reader<'_>, kind: u8, at: u64) -> Result<Child, String> {
    Ok(match kind {
        CHILD_DIR => {
            let (offset, hash) = r.pointer(at)?;
            Child::Dir(Ptr::stored(offset, hash))
        }
        CHILD_INLINE => {
            let bytes = read_bytes(r.bytes, &mut r.pos)?;
            if bytes.len() > INLINE_MAX {
                return Err(format!("inline contents of {} bytes", bytes.len()));
            }
            Child::Contents(Leaf::Inline(Inline::new(bytes).ok_or("inline contents too long")?))
        }
        CHILD_BLOB => {
            let (offset, hash) = r.pointer(at)?;
            Child::Contents(Leaf::Blob { offset, hash })
        }
        other => return Err(format!("unknown child kind {other}")),
    })
}

/// Decodes a value inode recorded at `at`.
pub fn decode_values(payload: &[u8], at: u64, dict: &Dict) -> Result<Inode, String> {
    let mut r = Reader { bytes: payload, pos: 0 };
    let count = r.varint()?;
    if count > ENTRIES as u64 {
        return Err(format!("value inode with {count} entries (at most {ENTRIES})"));
    }
    // Steps are written straight into the inode's buffer.
    let mut values = ValuesBuilder::new(payload.len(), count as usize);
    for _ in 0..count {
        let tag = r.byte()?;
        read_step(&mut r, tag, dict, values.step_buf())?;
        let child = read_child(&mut r, tag >> 2, at)?;
        if values.last_step().is_some_and(|last| last >= values.pending_step()) {
            return Err("entries not sorted or not unique".into());
        }
        values.push_written(child);
    }
    r.finish()?;
    Ok(Inode::new(Body::Values(values.finish())))
}

/// How a value inode's entry is stored: its step and child as encoded,
/// without the dictionary (for the GC's references and for inspection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredEntry<'a> {
    pub step: StoredStep<'a>,
    /// Bytes of the encoded step (length or id varint and bytes; not the tag).
    pub step_bytes: usize,
    pub child: StoredChild<'a>,
}

/// A step as stored in a value inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoredStep<'a> {
    /// A dictionary id.
    Dict(u64),
    /// The name's bytes.
    Raw(&'a [u8]),
    /// Lower-case hex digits as binary: the name is twice as long.
    Hex(&'a [u8]),
}

/// A child as stored in a value inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoredChild<'a> {
    /// A directory: the offset of its root inode.
    Dir(u64),
    /// Contents inline.
    Inline(&'a [u8]),
    /// Contents in a blob record at this offset.
    Blob(u64),
}

/// Calls `f` on every entry of the value inode recorded at `at`, as stored.
/// Checks the framing (counts, lengths, pointers, trailing bytes), not the
/// order of steps nor the dictionary ids.
pub fn stored_entries<'a>(
    payload: &'a [u8],
    at: u64,
    f: &mut dyn FnMut(StoredEntry<'a>) -> Result<(), String>,
) -> Result<(), String> {
    let mut r = Reader { bytes: payload, pos: 0 };
    let count = r.varint()?;
    if count > ENTRIES as u64 {
        return Err(format!("value inode with {count} entries (at most {ENTRIES})"));
    }
    for _ in 0..count {
        f(read_stored_entry(&mut r, at)?)?;
    }
    r.finish()
}

/// Reads an entry as stored (tag, step, child).
pub(super) fn read_stored_entry<'a>(r: &mut Reader<'a>, at: u64) -> Result<StoredEntry<'a>, String> {
    let tag = r.byte()?;
    let step_start = r.pos;
    let step = match tag & 3 {
        STEP_DICT => StoredStep::Dict(r.varint()?),
        STEP_RAW => StoredStep::Raw(read_bytes(r.bytes, &mut r.pos)?),
        STEP_HEX => {
            let bytes = read_bytes(r.bytes, &mut r.pos)?;
            if bytes.is_empty() {
                return Err("empty hex step".into());
            }
            StoredStep::Hex(bytes)
        }
        other => return Err(format!("unknown step kind {other}")),
    };
    let step_bytes = r.pos - step_start;
    let child = read_stored_child(r, tag >> 2, at)?;
    Ok(StoredEntry { step, step_bytes, child })
}

/// Reads a child of kind `kind` as stored.
pub(super) fn read_stored_child<'a>(r: &mut Reader<'a>, kind: u8, at: u64) -> Result<StoredChild<'a>, String> {
    Ok(match kind {
        CHILD_DIR => StoredChild::Dir(r.pointer(at)?.0),
        CHILD_INLINE => {
            let bytes = read_bytes(r.bytes, &mut r.pos)?;
            if bytes.len() > INLINE_MAX {
                return Err(format!("inline contents of {} bytes", bytes.len()));
            }
            StoredChild::Inline(bytes)
        }
        CHILD_BLOB => StoredChild::Blob(r.pointer(at)?.0),
        other => return Err(format!("unknown child kind {other}")),
    })
}

/// Decodes a tree inode recorded at `at`, expected at `depth`.
pub fn decode_tree(payload: &[u8], at: u64, depth: u32) -> Result<Inode, String> {
    let mut r = Reader { bytes: payload, pos: 0 };
    r.depth(depth, "tree inode")?;
    let len = r.varint()?;
    if len <= MIN_FAN_OUT {
        return Err(format!("tree inode with only {len} entries"));
    }
    let bitmap = u32::from_le_bytes(r.take(4)?.try_into().expect("4 bytes"));
    if bitmap == 0 {
        return Err("tree inode without children".into());
    }
    let mut children = Vec::with_capacity(bitmap.count_ones() as usize);
    for i in 0..ENTRIES {
        if bitmap & (1 << i) != 0 {
            let (offset, hash) = r.pointer(at)?;
            children.push((i, Ptr::stored(offset, hash)));
        }
    }
    r.finish()?;
    Ok(Inode::new(Body::Tree(Pointers::new(depth, len, children))))
}

/// Checks that every entry of a decoded value inode at `depth` belongs there
/// (its index at every depth above matches the path taken), given the
/// indices taken from the root. Used by the integrity checker.
pub fn entries_belong(inode: &Inode, path: &[usize]) -> bool {
    match &inode.body {
        Body::Values(values) => {
            values.iter().all(|(step, _)| path.iter().enumerate().all(|(depth, &i)| index(depth as u32, step) == i))
        }
        Body::Tree(_) => true,
    }
}

/// Appends to `out` the records that the record of `kind` at `at` needs,
/// each with a mask of the child indices its reader does not need (a tree
/// inode's children that a later patch replaced).
///
/// - A directory needs its children and blobs; a commit its root tree. A
///   commit's parents are not references: a commit can outlive its parents
///   (garbage collection keeps commits from a chosen one onwards).
/// - A tree inode reached with `mask` needs its children outside `mask`;
///   a value inode, its entries outside `mask` (bit `i`: its `i`-th).
/// - A value patch reached with `mask` needs its own children outside
///   `mask`, and its base with the mask of the entries it changed or
///   keeps inside `mask`.
/// - A tree patch reached with `mask` needs its changed children outside
///   `mask`, and its base with `mask` plus the indices it changed: what the
///   patch replaced in its base is not needed through it.
///
/// Reads only the structure, so it needs no dictionary.
pub fn references(kind: RecordKind, payload: &[u8], at: u64, mask: u32, out: &mut Vec<(u64, u32)>) -> Result<(), String> {
    let mut r = Reader { bytes: payload, pos: 0 };
    match kind {
        RecordKind::Values => {
            let mut index = 0;
            stored_entries(payload, at, &mut |entry| {
                if let StoredChild::Dir(offset) | StoredChild::Blob(offset) = entry.child
                    && mask & (1 << index) == 0
                {
                    out.push((offset, 0));
                }
                index += 1;
                Ok(())
            })
        }
        RecordKind::ValuesPatch => {
            // The entries of the version it gives (what `mask` counts) come
            // from its own children or from its base's: it needs those of
            // its own outside `mask`, and its base without the entries it
            // changed and those it keeps that `mask` names.
            let patch = StoredPatch::parse(payload, at)?;
            let mut base_mask = patch.changed;
            for (r, source) in patch.layout().into_iter().enumerate() {
                let own = match source {
                    PatchSource::Kept(b) => {
                        if mask & (1 << r) != 0 {
                            base_mask |= 1 << b;
                        }
                        None
                    }
                    PatchSource::Replaced(_, k) => Some(patch.replaced[k]),
                    PatchSource::Inserted(k) => Some(patch.inserted[k].1.child),
                };
                if let Some(StoredChild::Dir(offset) | StoredChild::Blob(offset)) = own
                    && mask & (1 << r) == 0
                {
                    out.push((offset, 0));
                }
            }
            out.push((patch.base, base_mask));
            Ok(())
        }
        RecordKind::Tree => {
            r.byte()?;
            r.varint()?;
            let bitmap = u32::from_le_bytes(r.take(4)?.try_into().expect("4 bytes"));
            for index in 0..ENTRIES {
                if bitmap & (1 << index) != 0 {
                    let offset = r.pointer(at)?.0;
                    if mask & (1 << index) == 0 {
                        out.push((offset, 0));
                    }
                }
            }
            r.finish()
        }
        RecordKind::TreePatch => {
            let depth = u32::from(*payload.first().ok_or("truncated payload")?);
            let patch = TreePatch::decode(payload, at, depth)?;
            let mut changed = 0u32;
            for (index, pointer) in &patch.changes {
                changed |= 1 << index;
                if let Some((offset, _)) = pointer
                    && mask & (1 << index) == 0
                {
                    out.push((*offset, 0));
                }
            }
            out.push((patch.base, mask | changed));
            Ok(())
        }
        RecordKind::Commit => {
            out.push((CommitRecord::decode(payload, at)?.root_offset, 0));
            Ok(())
        }
        RecordKind::Blob | RecordKind::Dict => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::value_child;

    /// Steps of lower-case hex of an even length are stored as binary,
    /// every other step as it is, and each decodes to the same step.
    #[test]
    fn hex_steps_are_stored_as_binary_and_read_back() {
        let steps: [&[u8]; 9] = [b"0", b"00", b"0a1f", b"0A1F", b"abc", b"abcdef", b"balance", b"g0", b"ff"];
        let mut sorted = steps.to_vec();
        sorted.sort();
        let values = Values::from_sorted(sorted.iter().map(|s| (*s, value_child(b"v"))));
        let dict = Dict::default();
        let (mut raw, mut out) = (RawSteps::default(), Vec::new());
        encode_values(&values, 1_000, &resolve_children(&values, &[]), &dict, Some(&mut raw), &mut out);
        let mut kinds = Vec::new();
        stored_entries(&out, 1_000, &mut |entry| {
            kinds.push(matches!(entry.step, StoredStep::Hex(_)));
            Ok(())
        })
        .unwrap();
        let expected: Vec<bool> = sorted.iter().map(|s| [&b"00"[..], b"0a1f", b"abcdef", b"ff"].contains(s)).collect();
        assert_eq!(kinds, expected);
        let Body::Values(decoded) = decode_values(&out, 1_000, &dict).unwrap().body else { panic!("a values inode") };
        assert_eq!(decoded.iter().map(|(s, _)| s.to_vec()).collect::<Vec<_>>(), sorted.iter().map(|s| s.to_vec()).collect::<Vec<_>>());
    }

    /// What a value inode's record would take is measured exactly: steps
    /// hex, in the dictionary and raw; children inline, blobs and
    /// directories at near and far offsets.
    #[test]
    fn a_value_record_is_measured_as_written() {
        let mut dict = Dict::default();
        dict.push(crate::node::Step::from_slice(b"balance"));
        let child = |k: usize| match k % 4 {
            0 => value_child(&vec![7; k % 33]),
            1 => Child::Dir(Ptr::stored(1_000_000 - 100 * k as u64, Hash([1; 32]))),
            2 => Child::Contents(Leaf::Blob { offset: 10 * k as u64, hash: Hash([2; 32]) }),
            _ => value_child(b""),
        };
        let steps: [&[u8]; 8] = [b"00", b"0a1f", b"0A1F", b"abc", b"balance", b"counter", b"ff", &[0xff; 40]];
        for n in 0..=steps.len() {
            for shift in 0..4 {
                let values = Values::from_sorted(steps[..n].iter().enumerate().map(|(k, s)| (*s, child(k + shift))));
                let resolved = resolve_children(&values, &[]);
                let mut out = Vec::new();
                encode_values(&values, 1_000_000, &resolved, &dict, None, &mut out);
                assert_eq!(values_len(&values, 1_000_000, &resolved, &dict), out.len(), "{n} entries, shift {shift}");
            }
        }
    }
}
