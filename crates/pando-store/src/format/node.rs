//! Encoding of inodes, blobs and commits in pack records.
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
//! Invariant: decoding checks every structural rule (sorted unique entries,
//! counts, depths, deltas) so damaged bytes that pass the checksum still
//! cannot produce an inode that breaks the tree's invariants.

use pando_core::Hash;
use pando_core::inode::{ENTRIES, index};
use pando_core::varint::{self, write_u64};

use crate::dict::{Dict, RawSteps, read_bytes};
use crate::format::record::RecordKind;
use crate::node::{BaseChild, BaseEntries, Body, Child, Held, Inline, Inode, Leaf, PatchBase, Pointers, Ptr, Values, ValuesBuilder};
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

/// Writes `step` as binary (`LEB128 byte_len ‖ bytes`) if it is lower-case
/// hex of an even length of at least 2, in one pass; otherwise writes
/// nothing and returns false.
fn write_hex_step(out: &mut Vec<u8>, step: &[u8]) -> bool {
    if step.len() < 2 || !step.len().is_multiple_of(2) {
        return false;
    }
    let start = out.len();
    write_u64(out, (step.len() / 2) as u64);
    // The bytes written in place: no capacity check per byte.
    let at = out.len();
    out.resize(at + step.len() / 2, 0);
    let mut bad = 0;
    for (byte, pair) in out[at..].iter_mut().zip(step.chunks_exact(2)) {
        let (high, low) = (HEX_VALUES[usize::from(pair[0])], HEX_VALUES[usize::from(pair[1])]);
        bad |= high | low;
        *byte = high << 4 | (low & 15);
    }
    if bad > 15 {
        out.truncate(start);
        return false;
    }
    true
}

/// Writes a step; one written raw is noted in `raw_steps` (if given: a
/// record that may not be written notes them once chosen, with
/// [`note_raw_steps`]).
fn write_step(out: &mut Vec<u8>, step: &[u8], dict: &Dict, raw_steps: Option<&mut RawSteps>) -> u8 {
    if write_hex_step(out, step) {
        STEP_HEX
    } else if let Some(id) = dict.id_of(step) {
        write_u64(out, u64::from(id));
        STEP_DICT
    } else {
        write_u64(out, step.len() as u64);
        out.extend_from_slice(step);
        if let Some(raw_steps) = raw_steps {
            raw_steps.note(step);
        }
        STEP_RAW
    }
}

/// Notes in `raw_steps` the steps of `steps` a record writes raw (neither
/// hex nor in the dictionary), as [`write_step`] would have.
pub fn note_raw_steps<'s>(steps: impl Iterator<Item = &'s [u8]>, dict: &Dict, raw_steps: &mut RawSteps) {
    let mut scratch = Vec::new();
    for step in steps {
        scratch.clear();
        if !write_hex_step(&mut scratch, step) && dict.id_of(step).is_none() {
            raw_steps.note(step);
        }
    }
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
    values
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
        .collect()
}

/// Writes a child as an entry stores it; returns its child kind.
fn write_child(out: &mut Vec<u8>, at: u64, child: &Resolved<'_>) -> u8 {
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
fn write_entry(out: &mut Vec<u8>, at: u64, step: &[u8], child: &Resolved<'_>, dict: &Dict, raw_steps: Option<&mut RawSteps>) {
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
    write_u64(out, values.len() as u64);
    for ((step, _), child) in values.iter().zip(resolved) {
        write_entry(out, at, step, child, dict, raw_steps.as_deref_mut());
    }
}

/// Encodes a tree inode of `len` entries at `depth` from its children's
/// index, offset and inode hash, in index order.
pub fn encode_tree(depth: u32, len: u64, children: &[(usize, u64, Hash)], at: u64, out: &mut Vec<u8>) {
    assert!(depth < 256, "inode depth fits a byte");
    out.push(depth as u8);
    write_u64(out, len);
    let bitmap = children.iter().fold(0u32, |bits, (i, _, _)| bits | 1 << i);
    out.extend_from_slice(&bitmap.to_le_bytes());
    for (_, offset, hash) in children {
        write_delta(out, at, *offset, hash);
    }
}

fn write_delta(out: &mut Vec<u8>, at: u64, offset: u64, hash: &Hash) {
    assert!(offset < at, "a child is written before its parent");
    write_u64(out, at - offset);
    out.extend_from_slice(hash.as_bytes());
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        varint::read_u64(self.bytes, &mut self.pos).map_err(|e| e.to_string())
    }
    fn byte(&mut self) -> Result<u8, String> {
        let b = *self.bytes.get(self.pos).ok_or("truncated payload")?;
        self.pos += 1;
        Ok(b)
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or("truncated payload")?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    fn hash(&mut self) -> Result<Hash, String> {
        Ok(Hash::from_slice(self.take(32)?).expect("32 bytes"))
    }
    fn pointer(&mut self, at: u64) -> Result<(u64, Hash), String> {
        let delta = self.varint()?;
        if delta == 0 || delta > at {
            return Err(format!("child offset delta {delta} invalid for a record at {at}"));
        }
        Ok((at - delta, self.hash()?))
    }
    /// Reads a depth byte and checks it is the expected one.
    fn depth(&mut self, expected: u32, what: &str) -> Result<(), String> {
        let found = u32::from(self.byte()?);
        if found != expected {
            return Err(format!("{what} of depth {found} found at depth {expected}"));
        }
        Ok(())
    }
    fn finish(&self) -> Result<(), String> {
        if self.pos != self.bytes.len() {
            return Err(format!("{} trailing bytes", self.bytes.len() - self.pos));
        }
        Ok(())
    }
}

/// Reads an entry's step of kind `tag & 3` into `step`.
fn read_step(r: &mut Reader<'_>, tag: u8, dict: &Dict, step: &mut Vec<u8>) -> Result<(), String> {
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
fn read_child(r: &mut Reader<'_>, kind: u8, at: u64) -> Result<Child, String> {
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
fn read_stored_entry<'a>(r: &mut Reader<'a>, at: u64) -> Result<StoredEntry<'a>, String> {
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
fn read_stored_child<'a>(r: &mut Reader<'a>, kind: u8, at: u64) -> Result<StoredChild<'a>, String> {
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
    if len <= ENTRIES as u64 {
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

/// The parent offset of a commit whose parent the store never held (the
/// commit of an imported snapshot).
pub const ABSENT_PARENT: u64 = u64::MAX;

/// A commit as recorded in the pack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitRecord {
    pub root_offset: u64,
    pub root_hash: Hash,
    /// Parents with the offsets of their commit records ([`ABSENT_PARENT`]
    /// for a parent the store never held).
    pub parents: Vec<(Hash, u64)>,
    pub date: i64,
    pub author: String,
    pub message: String,
}

impl CommitRecord {
    pub fn encode(&self, at: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + 40 * self.parents.len() + self.message.len());
        assert!(self.root_offset < at, "root written before its commit");
        write_u64(&mut out, at - self.root_offset);
        out.extend_from_slice(self.root_hash.as_bytes());
        write_u64(&mut out, self.parents.len() as u64);
        for (hash, offset) in &self.parents {
            out.extend_from_slice(hash.as_bytes());
            write_u64(&mut out, *offset);
        }
        out.extend_from_slice(&self.date.to_be_bytes());
        write_u64(&mut out, self.author.len() as u64);
        out.extend_from_slice(self.author.as_bytes());
        write_u64(&mut out, self.message.len() as u64);
        out.extend_from_slice(self.message.as_bytes());
        out
    }

    pub fn decode(payload: &[u8], at: u64) -> Result<CommitRecord, String> {
        let mut r = Reader { bytes: payload, pos: 0 };
        let (root_offset, root_hash) = r.pointer(at)?;
        let count = r.varint()?;
        if count > 1024 {
            return Err(format!("{count} parents"));
        }
        let mut parents = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let hash = r.hash()?;
            let offset = r.varint()?;
            if offset >= at && offset != ABSENT_PARENT {
                return Err(format!("parent offset {offset} not before the commit at {at}"));
            }
            parents.push((hash, offset));
        }
        let date = i64::from_be_bytes(r.take(8)?.try_into().expect("8 bytes"));
        let author = String::from_utf8(read_bytes(payload, &mut r.pos)?.to_vec()).map_err(|_| "author is not UTF-8")?;
        let message = String::from_utf8(read_bytes(payload, &mut r.pos)?.to_vec()).map_err(|_| "message is not UTF-8")?;
        r.finish()?;
        Ok(CommitRecord { root_offset, root_hash, parents, date, author, message })
    }

    pub fn info(&self) -> pando_core::CommitInfo {
        pando_core::CommitInfo {
            root: self.root_hash,
            parents: self.parents.iter().map(|(h, _)| *h).collect(),
            date: self.date,
            author: self.author.clone(),
            message: self.message.clone(),
        }
    }
}

/// Longest chain of patch records before a full tree record is written;
/// also bounds how deep decoding follows bases.
pub const MAX_PATCH_CHAIN: u8 = 4;
/// Most changed children a tree patch record holds (31 was measured:
/// 1.6 MB less on `small`'s 341 MB, about 3% slower).
pub const MAX_PATCH_CHANGES: usize = 8;

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
        if self.len <= ENTRIES as u64 {
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

/// Whether `child` is what the base entry `id` holds, so that a patch
/// keeps the base's entry: the same record (offsets are never reused), or
/// the same inline bytes.
fn same_child(id: &BaseChild, child: &Resolved<'_>) -> bool {
    match (id, child) {
        (BaseChild::Dir(a), Resolved::Dir(b, _)) | (BaseChild::Blob(a), Resolved::Blob(b, _)) => a == b,
        (BaseChild::Inline(a), Resolved::Inline(b)) => a.bytes() == *b,
        _ => false,
    }
}

/// Encodes the value inode `values` (its children `resolved`) as a patch
/// over `over`, the written version it derives from.
/// Returns the indices of the entries it inserts (whose steps it writes;
/// the writer notes those written raw once it chooses the patch), and how
/// many entries it names (replaced or inserted).
pub fn encode_values_patch(
    over: &PatchBase,
    base: &BaseEntries,
    values: &Values,
    resolved: &[Resolved<'_>],
    at: u64,
    dict: &Dict,
    out: &mut Vec<u8>,
) -> (smallvec::SmallVec<[usize; ENTRIES]>, usize) {
    let (base_offset, instance) = (over.offset, over.instance);
    assert!(base_offset < at && base.count() <= ENTRIES, "a patch of an earlier value inode");
    let (mut changed, mut present) = (0u32, 0u32);
    let mut replaced: smallvec::SmallVec<[usize; ENTRIES]> = smallvec::SmallVec::new();
    // Each new entry, and the base's entry it comes before.
    let mut inserted: smallvec::SmallVec<[(usize, usize); ENTRIES]> = smallvec::SmallVec::new();
    let (mut i, mut j) = (0, 0);
    let base_len = base.count();
    let mut entry = (i < base_len).then(|| base.get(i, instance));
    while i < base_len || j < values.len() {
        let order = match (&entry, j < values.len()) {
            (Some((step, _)), true) => (*step).cmp(values.step(j)),
            (Some(_), false) => std::cmp::Ordering::Less,
            (None, _) => std::cmp::Ordering::Greater,
        };
        match order {
            std::cmp::Ordering::Less => {
                changed |= 1 << i;
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                inserted.push((j, i));
                j += 1;
                continue;
            }
            std::cmp::Ordering::Equal => {
                if !entry.as_ref().is_some_and(|(_, id)| same_child(id, &resolved[j])) {
                    changed |= 1 << i;
                    present |= 1 << i;
                    replaced.push(j);
                }
                i += 1;
                j += 1;
            }
        }
        entry = (i < base_len).then(|| base.get(i, instance));
    }
    write_u64(out, at - base_offset);
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

    fn parse<'a>(payload: &'a [u8], at: u64) -> Result<StoredPatch<'a>, String> {
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
    let mut out = smallvec::SmallVec::new();
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

/// Reads the structure of a value patch at `at` (see [`StoredPatch`]).
pub fn stored_patch(payload: &[u8], at: u64) -> Result<StoredPatch<'_>, String> {
    StoredPatch::parse(payload, at)
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
            let patch = stored_patch(payload, at)?;
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
    use crate::node::{BaseEntries, BaseHeld, value_child};
    use std::sync::Arc;

    /// A value patch names only what changed (a replaced child, a removed
    /// entry, an inserted one), gives back the new version over its base,
    /// and tells a collection which of the base's entries it still needs:
    /// those it keeps, minus those a mask over its own entries names.
    #[test]
    fn a_value_patch_names_what_changed_and_maps_masks_to_its_base() {
        let dir = |offset: u64| Child::Dir(Ptr::stored(offset, Hash::of_bytes(&offset.to_le_bytes())));
        let base_values = Values::from_sorted([(&b"a"[..], dir(10)), (b"b", dir(20)), (b"c", dir(30)), (b"d", dir(40))]);
        let base = Inode::new(Body::Values(base_values.clone()));
        // b replaced, c removed, "bb" and "e" inserted; a and d kept.
        let new = Values::from_sorted([(&b"a"[..], dir(10)), (b"b", dir(50)), (b"bb", dir(60)), (b"d", dir(40)), (b"e", dir(70))]);
        let entries = BaseEntries::Shared(Arc::new(Inode::new(Body::Values(base_values))));
        let over = PatchBase { instance: 1, offset: 100, chain: 0, since: 0, held: BaseHeld::Values(entries.clone()) };
        let (dict, mut out) = (Dict::default(), Vec::new());
        let resolved = resolve_children(&new, &[]);
        let (inserted, named) = encode_values_patch(&over, &entries, &new, &resolved, 1_000, &dict, &mut out);
        assert_eq!((inserted.to_vec(), named), (vec![2, 4], 3));
        let patch = ValuesPatch::decode(&out, 1_000, &dict).unwrap();
        assert_eq!((patch.base, patch.changed, patch.present), (100, 0b0110, 0b0010));
        let Body::Values(applied) = patch.apply(&base).unwrap().body else { panic!("a value inode") };
        assert!(applied.iter().map(|(s, _)| s).eq(new.iter().map(|(s, _)| s)));
        assert_eq!(resolve_children(&applied, &[]), resolve_children(&new, &[]));
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
    }

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
}
