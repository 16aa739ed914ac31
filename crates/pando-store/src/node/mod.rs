//! How the store holds the directory trie of `pando_core::dir`: pointers in
//! memory or on disk, contents as values or blobs, and beside each inode
//! where it was written.
//!
//! Boundary: the floor below both `format` (which encodes these nodes)
//! and `tree` (which updates them); it imports neither, and never touches
//! a file (what is on disk comes through a [`Loader`]).
//!
//! Invariants:
//! - Nodes are immutable once shared; `OnceLock` fields only memoise values
//!   that are functions of the node (hashes) or record where it was written
//!   (`stored`), set once by the single writer, who also notes a tree
//!   inode's [`ChainRoot`] in its pointers each time it writes it.
//! - A [`Ptr::Stored`] carries the hash of what it points to: the directory
//!   hash for a directory root, the inode hash for an inode below a root.
//!   A [`Ptr::Mem`]'s [`HashMemo`], once set, is that same hash of the inode
//!   it holds; [`Hold::as_mem_mut`], the only way to change the inode
//!   through the pointer, forgets it. The prefetch hint beside it may be
//!   stale (the inode changed in place or was copied since): it is only
//!   ever prefetched, never read through.
//! - A written inode changes in place only when nothing else holds it,
//!   and then forgets where it was written ([`Hold::thaw`]); an update of
//!   a shared one works on a copy. Either way the inode remembers what a
//!   patch against the written version needs ([`PatchBase`]), and its
//!   marks of changed entries start empty then: a tree inode's pointers'
//!   and a value inode's [`ValuesMarks`] count from the written version it
//!   derives from (any other tree body is new, all of it marked; a value
//!   inode built anew has no base).
//! - A [`Leaf::Staged`] names a blob record written before its commit; its
//!   offset stays in the store's [`StagedSet`] until a commit referring to
//!   it is in the index, or the last copy drops.

mod marks;
mod memo;
mod staged;

use pando_core::Hash;
use pando_core::dir::{self, Hold, Resolve};
use pando_core::tezos::contents_hash;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};

pub use marks::ValuesMarks;
pub use memo::HashMemo;
pub use staged::{Staged, StagedSet};
use crate::error::{Error, Result};

/// One step of a path, outside a trie (the dictionary, walks): names of up
/// to 48 bytes (all Tezos step names) are stored inline.
pub type Step = smallvec::SmallVec<[u8; 48]>;

/// The store's way of holding a trie.
pub struct Held;

pub type Inode = dir::Inode<Held>;
pub type Body = dir::Body<Held>;
pub type Child = dir::Child<Held>;
pub type Values = dir::Values<Held>;
pub type Pointers = dir::Pointers<Held>;
pub type ValuesBuilder = dir::ValuesBuilder<Held>;

/// A contents value held in memory.
pub struct Value {
    pub bytes: Box<[u8]>,
    hash: OnceLock<Hash>,
    /// The store instance and offset of the blob record holding it, once
    /// written (large values only).
    stored: OnceLock<(u64, u64)>,
}

impl Value {
    pub fn new(bytes: impl Into<Box<[u8]>>) -> Value {
        Value { bytes: bytes.into(), hash: OnceLock::new(), stored: OnceLock::new() }
    }

    /// A value read from disk whose hash is already known.
    pub(crate) fn with_hash(bytes: Box<[u8]>, hash: Hash) -> Value {
        let value = Value::new(bytes);
        let _ = value.hash.set(hash);
        value
    }

    pub fn hash(&self) -> Hash {
        *self.hash.get_or_init(|| contents_hash(&self.bytes))
    }

    /// Where store instance `instance` wrote this value, if it did.
    pub(crate) fn stored_offset(&self, instance: u64) -> Option<u64> {
        self.stored.get().filter(|(owner, _)| *owner == instance).map(|(_, offset)| *offset)
    }

    pub(crate) fn mark_stored(&self, instance: u64, offset: u64) {
        let _ = self.stored.set((instance, offset));
    }

    /// Bytes of memory held: the value, its `Arc`'s counts and its bytes.
    pub(crate) fn weight(&self) -> u64 {
        (std::mem::size_of::<Value>() + 16 + self.bytes.len()) as u64
    }
}

/// Contents of at most this many bytes are held inside their entry, in
/// memory and on disk.
pub const INLINE_MAX: usize = 32;

/// Contents of at most [`INLINE_MAX`] bytes, held inside its entry: no
/// allocation, its hash computed when needed.
#[derive(Clone)]
pub struct Inline {
    len: u8,
    bytes: [u8; INLINE_MAX],
}

impl Inline {
    /// `None` for contents longer than [`INLINE_MAX`].
    pub fn new(bytes: &[u8]) -> Option<Inline> {
        let mut inline = Inline { len: u8::try_from(bytes.len()).ok()?, bytes: [0; INLINE_MAX] };
        inline.bytes.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(inline)
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// A contents entry.
#[derive(Clone)]
pub enum Leaf {
    /// Small contents, in place.
    Inline(Inline),
    /// Larger contents (over [`INLINE_MAX`] bytes) in memory.
    Value(Arc<Value>),
    /// Contents stored as a blob record, not loaded.
    Blob { offset: u64, hash: Hash },
    /// Contents written to the pack when added, before any commit refers
    /// to them (see [`Staged`]).
    Staged(Arc<Staged>),
}

impl Leaf {
    pub fn hash(&self) -> Hash {
        match self {
            Leaf::Inline(inline) => contents_hash(inline.bytes()),
            Leaf::Value(value) => value.hash(),
            Leaf::Blob { hash, .. } => *hash,
            Leaf::Staged(staged) => staged.hash(),
        }
    }

    /// The blob record holding the contents, when they are on disk.
    pub fn stored_blob(&self) -> Option<(u64, Hash)> {
        match self {
            Leaf::Blob { offset, hash } => Some((*offset, *hash)),
            Leaf::Staged(staged) => Some((staged.offset, staged.hash())),
            Leaf::Inline(_) | Leaf::Value(_) => None,
        }
    }

    /// Contents in memory: in place when small.
    pub fn of_bytes(bytes: &[u8]) -> Leaf {
        match Inline::new(bytes) {
            Some(inline) => Leaf::Inline(inline),
            None => Leaf::Value(Arc::new(Value::new(bytes))),
        }
    }
}

/// A contents entry in memory.
pub fn value_child(bytes: &[u8]) -> Child {
    Child::Contents(Leaf::of_bytes(bytes))
}

/// A pointer to an inode: in memory, or a record on disk. Either way it
/// carries the hash of what it points to once known (a memory pointer
/// from when it is first hashed until an update goes through it), so
/// that re-hashing a parent reads its unchanged children's hashes from
/// its own entries instead of from each child.
#[derive(Clone)]
pub enum Ptr {
    Mem(Arc<Inode>, HashMemo),
    Stored { offset: u64, hash: Hash },
}

impl Ptr {
    pub fn stored(offset: u64, hash: Hash) -> Ptr {
        Ptr::Stored { offset, hash }
    }

    /// A pointer to an inode in memory, its hash not yet known here.
    pub fn mem(inode: Arc<Inode>) -> Ptr {
        Ptr::Mem(inode, HashMemo::new(None, 0))
    }

    /// A pointer to an inode in memory whose hash is `hash`.
    pub fn mem_hashed(inode: Arc<Inode>, hash: Hash) -> Ptr {
        Ptr::Mem(inode, HashMemo::new(Some(hash), 0))
    }

    /// The inode in memory, when the pointer does not carry its hash yet.
    pub fn unhashed_mem(&self) -> Option<&Arc<Inode>> {
        match self {
            Ptr::Mem(inode, memo) if memo.get().is_none() => Some(inode),
            _ => None,
        }
    }
}

/// What the store keeps beside each inode. Its marks are set once, by the
/// writer; `patch_chain` and `kept_since` are read by the writer only.
pub struct Meta {
    /// The store instance that wrote this inode, and the record's offset.
    /// Offsets mean nothing to another instance (another store, or the same
    /// directory reopened after a failed write).
    stored: OnceLock<(u64, u64)>,
    /// For a written inode: how many patch records lead from its record
    /// to a full one (0 for a full record); [`UNSET`] before.
    patch_chain: AtomicU8,
    /// For an inode being updated: the written version it derives from,
    /// so that writing it can record only the difference. Taken when
    /// written.
    base: parking_lot::Mutex<Option<Box<PatchBase>>>,
    /// For an inode of the writer's kept tree (see `store::write::commit`): the
    /// oldest commit (by the writer's count, from 1) that wrote an inode of
    /// the kept subtree below it, itself included; 0 for other inodes.
    kept_since: AtomicU32,
    /// The commit that wrote a kept version and the weight the kept
    /// window counts for it there, in one word (0 for none): for a written
    /// inode, its own; for a new version of a kept inode changed in place
    /// (nothing else held it, so the kept tree cannot either), the version
    /// it replaced, whose weight leaves the window once this one is
    /// written. A copy of a shared written inode claims nothing: the
    /// original may stay in the kept tree. One claim per kept version, so
    /// the window never takes its weight out twice.
    counted: AtomicU64,
}

const UNSET: u8 = u8::MAX;

/// What a patch against a written inode needs of it: where it was
/// written, its chain of patches, and what changed since: a tree inode's
/// children's indices (which children the new version changed, its
/// pointers count from then on, [`Pointers::changed`]: the base's
/// children are never read), a value inode's marks ([`ValuesMarks`]).
#[derive(Clone, Debug)]
pub struct PatchBase {
    /// The store instance that wrote it, and the record's offset.
    pub instance: u64,
    pub offset: u64,
    pub chain: u8,
    /// The oldest commit of its kept subtree (0 if not kept): no child it
    /// kept is older.
    pub since: u32,
    pub shape: BaseShape,
}

/// The full record a written tree inode's chain of patches starts from
/// (the inode's own record when written in full), and the children its
/// patches changed since: a patch over that record naming them is the
/// inode too. The writer notes it beside the inode's pointers
/// ([`Pointers::note`]: copied with them, so a new version knows its
/// written version's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainRoot {
    pub offset: u64,
    pub changed: u32,
}

/// Where a [`ChainRoot`] is kept ([`Hold::TreeNote`]): atomics, so that
/// the writer notes it in an inode already shared; `offset` is the root's
/// offset plus one, 0 for none.
#[derive(Default)]
pub struct ChainNote {
    offset: AtomicU64,
    changed: AtomicU32,
}

impl ChainNote {
    /// The root noted, if the writer noted one.
    pub fn get(&self) -> Option<ChainRoot> {
        let offset = self.offset.load(Ordering::Relaxed);
        (offset != 0).then(|| ChainRoot { offset: offset - 1, changed: self.changed.load(Ordering::Relaxed) })
    }

    /// Notes `root` (`None`: none).
    pub fn set(&self, root: Option<ChainRoot>) {
        let (offset, changed) = root.map_or((0, 0), |root| (root.offset + 1, root.changed));
        self.offset.store(offset, Ordering::Relaxed);
        self.changed.store(changed, Ordering::Relaxed);
    }
}

impl Clone for ChainNote {
    fn clone(&self) -> ChainNote {
        let note = ChainNote::default();
        note.set(self.get());
        note
    }
}

/// What a written inode held, as a patch against it needs it.
#[derive(Clone, Debug)]
pub enum BaseShape {
    /// A tree inode at `depth`, with its children's indices.
    Tree { depth: u32, bitmap: u32 },
    /// A value inode, and which of its entries changed since.
    Values(ValuesMarks),
}

impl PatchBase {
    /// For an inode a store wrote, about to change (in place, or a copy of
    /// it); `None` otherwise.
    fn of(inode: &Inode) -> Option<Box<PatchBase>> {
        let &(instance, offset) = inode.meta.stored.get()?;
        let chain = inode.patch_chain()?;
        let since = inode.kept_since().unwrap_or(0);
        let shape = match &inode.body {
            Body::Tree(pointers) => BaseShape::Tree { depth: pointers.depth, bitmap: pointers.bitmap() },
            Body::Values(_) => BaseShape::Values(ValuesMarks::default()),
        };
        Some(Box::new(PatchBase { instance, offset, chain, since, shape }))
    }
}

/// The pointers of an inode to the inodes below it, each with the depth
/// of what it points to: a values inode's directories (roots, at 0), a
/// tree inode's children (at its depth + 1).
pub fn child_pointers(inode: &Inode) -> smallvec::SmallVec<[(&Ptr, u32); 32]> {
    match &inode.body {
        Body::Values(values) => values
            .children()
            .filter_map(|child| match child {
                Child::Dir(ptr) => Some((ptr, 0)),
                Child::Contents(_) => None,
            })
            .collect(),
        Body::Tree(pointers) => pointers.iter().map(|(_, ptr)| (ptr, pointers.depth + 1)).collect(),
    }
}

/// Asks the processor to bring in what writing an inode reads of each of
/// its children in memory (where it was written, since when it is kept),
/// so that their cache misses overlap instead of following each other;
/// of a tree inode, only the children `only` names (bit `i` for child
/// `i`; `None`: all of them).
pub fn prefetch_children_meta(inode: &Inode, only: Option<u32>) {
    let ask = |ptr: &Ptr| {
        if let Ptr::Mem(child, _) = ptr {
            dir::prefetch(&child.meta.stored);
            dir::prefetch(&child.meta.kept_since);
        }
    };
    match &inode.body {
        Body::Values(values) => values.children().for_each(|child| {
            if let Child::Dir(ptr) = child {
                ask(ptr);
            }
        }),
        Body::Tree(pointers) => {
            pointers.iter().filter(|&(i, _)| only.is_none_or(|named| named & (1 << i) != 0)).for_each(|(_, ptr)| ask(ptr));
        }
    }
}

impl Default for Meta {
    fn default() -> Meta {
        Meta {
            stored: OnceLock::new(),
            patch_chain: AtomicU8::new(UNSET),
            base: parking_lot::Mutex::new(None),
            kept_since: AtomicU32::new(0),
            counted: AtomicU64::new(0),
        }
    }
}

static EMPTY: LazyLock<Arc<Inode>> = LazyLock::new(|| Inode::values(Values::new()));

impl Hold for Held {
    type Leaf = Leaf;
    type Ptr = Ptr;
    type Meta = Meta;
    type TreeNote = ChainNote;

    fn mem(inode: Arc<Inode>) -> Ptr {
        Ptr::mem(inode)
    }

    fn as_mem(ptr: &Ptr) -> Option<&Arc<Inode>> {
        match ptr {
            Ptr::Mem(inode, _) => Some(inode),
            Ptr::Stored { .. } => None,
        }
    }

    fn as_mem_mut(ptr: &mut Ptr) -> Option<&mut Arc<Inode>> {
        match ptr {
            Ptr::Mem(inode, memo) => {
                // The inode may change: its hash is no longer known here.
                // Its hint is taken as it is now (an update goes through
                // here on its way down; an update that rebuilds the
                // inode takes it again on its way back up).
                memo.forget(dir::hint(inode));
                Some(inode)
            }
            Ptr::Stored { .. } => None,
        }
    }

    fn known_hash(ptr: &Ptr) -> Option<Hash> {
        match ptr {
            Ptr::Mem(_, memo) => memo.get(),
            Ptr::Stored { hash, .. } => Some(*hash),
        }
    }

    fn remember_hash(ptr: &Ptr, hash: Hash) {
        if let Ptr::Mem(_, memo) = ptr {
            memo.set(hash);
        }
    }

    fn hint(ptr: &Ptr) -> usize {
        match ptr {
            Ptr::Mem(_, memo) => memo.hint(),
            Ptr::Stored { .. } => 0,
        }
    }

    fn refresh_hint(ptr: &mut Ptr) {
        if let Ptr::Mem(inode, memo) = ptr {
            memo.take_hint(dir::hint(inode));
        }
    }

    fn empty() -> Arc<Inode> {
        EMPTY.clone()
    }

    fn thaw(inode: &mut Inode) -> bool {
        // Written, and only this tree holds it: it becomes new again, and
        // remembers the version it was; its pointers mark what changes
        // from now on.
        if inode.is_stored() {
            // Changed in place, the version it was is gone: what the kept
            // window counted for it now counts as replaced.
            let counted = AtomicU64::new(*inode.meta.counted.get_mut());
            inode.meta = Meta { base: parking_lot::Mutex::new(PatchBase::of(inode)), counted, ..Meta::default() };
            forget_changes(&mut inode.body);
        }
        true
    }

    fn derive(from: &Arc<Inode>, copy: Option<&mut Body>) -> Meta {
        // Remember the written version this one derives from (a copy of a
        // written inode has changed nothing yet), or the one `from` does.
        // A written `from` is shared, so it may stay in the kept tree
        // (another path or another tree holds it): the copy claims nothing
        // of it. A new `from` hands on the claim it holds, once.
        let (base, counted) = if from.is_stored() {
            if let Some(body) = copy {
                forget_changes(body);
            }
            (PatchBase::of(from), 0)
        } else {
            (from.meta.base.lock().clone(), from.meta.counted.swap(0, Ordering::Relaxed))
        };
        Meta { base: parking_lot::Mutex::new(base), counted: AtomicU64::new(counted), ..Meta::default() }
    }

    fn note_values(meta: &mut Meta, change: dir::ValuesChange) {
        if let Some(PatchBase { shape: BaseShape::Values(marks), .. }) = meta.base.get_mut().as_deref_mut() {
            marks.note(change);
        }
    }
}

/// A tree inode's children count as unchanged from now on.
pub fn forget_changes(body: &mut Body) {
    if let Body::Tree(pointers) = body {
        pointers.forget_changes();
    }
}

/// The empty directory's root (shared).
pub fn empty() -> Arc<Inode> {
    Held::empty()
}

/// Where an inode was written: the store's bookkeeping beside the trie.
pub trait Written {
    /// Records where store instance `instance` wrote this inode; forgets its base.
    fn mark_stored(&self, instance: u64, offset: u64, patch_chain: u8);
    /// Where store instance `instance` wrote this inode, if it did.
    fn stored_offset(&self, instance: u64) -> Option<u64>;
    /// The offset of the record it was read from or written to, by any
    /// store instance (for error messages).
    fn stored_at(&self) -> Option<u64>;
    /// Whether any store wrote this inode (it must then never change in place).
    fn is_stored(&self) -> bool;
    /// For a written tree inode, the length of its chain of patch records.
    fn patch_chain(&self) -> Option<u8>;
    /// What a patch against the written version an updated tree inode
    /// derives from needs, taken: the writer asks once, as it writes it.
    fn take_patch_base(&self) -> Option<Box<PatchBase>>;
    /// Bytes of memory a cached copy costs, for the cache's budget.
    fn cache_weight(&self) -> u64;
    /// For an inode of the kept tree: the oldest commit its kept subtree
    /// holds an inode of.
    fn kept_since(&self) -> Option<u32>;
    /// Makes a written inode part of the kept tree.
    fn keep_since(&self, commit: u32);
    /// Records that the kept window counts `weight` for this kept inode
    /// in commit `seq`.
    fn count_kept(&self, seq: u32, weight: u64);
    /// For a new version of a kept inode, the commit and weight counted
    /// for the version it replaces, taken.
    fn take_replaced(&self) -> Option<(u32, u64)>;
}

impl Written for Inode {
    fn mark_stored(&self, instance: u64, offset: u64, patch_chain: u8) {
        let _ = self.meta.stored.set((instance, offset));
        let _ = self.meta.patch_chain.compare_exchange(UNSET, patch_chain, Ordering::Relaxed, Ordering::Relaxed);
        self.meta.base.lock().take();
    }

    fn stored_offset(&self, instance: u64) -> Option<u64> {
        self.meta.stored.get().filter(|(owner, _)| *owner == instance).map(|(_, offset)| *offset)
    }

    fn stored_at(&self) -> Option<u64> {
        self.meta.stored.get().map(|(_, offset)| *offset)
    }

    fn is_stored(&self) -> bool {
        self.meta.stored.get().is_some()
    }

    fn patch_chain(&self) -> Option<u8> {
        Some(self.meta.patch_chain.load(Ordering::Relaxed)).filter(|&chain| chain != UNSET)
    }

    fn take_patch_base(&self) -> Option<Box<PatchBase>> {
        self.meta.base.lock().take()
    }

    fn cache_weight(&self) -> u64 {
        // A cached inode holds nothing else in memory: its contents are
        // inline or blobs, its children offsets. Beside the inode and its
        // buffers: the Arc's counts, the rounding of three allocations and
        // the cache's own entry (measured: resident memory then follows
        // the budget within about 10%).
        Inode::weight(self) as u64 + ENTRY_OVERHEAD
    }

    fn kept_since(&self) -> Option<u32> {
        Some(self.meta.kept_since.load(Ordering::Relaxed)).filter(|&since| since != 0)
    }

    fn keep_since(&self, commit: u32) {
        debug_assert!(commit > 0, "commits are counted from 1");
        let _ = self.meta.kept_since.compare_exchange(0, commit, Ordering::Relaxed, Ordering::Relaxed);
    }

    fn count_kept(&self, seq: u32, weight: u64) {
        debug_assert!(seq > 0, "commits are counted from 1");
        // The weight saturates at u32::MAX (a single inode never weighs that).
        self.meta.counted.store(u64::from(seq) << 32 | weight.min(u64::from(u32::MAX)), Ordering::Relaxed);
    }

    fn take_replaced(&self) -> Option<(u32, u64)> {
        let replaced = self.meta.counted.swap(0, Ordering::Relaxed);
        (replaced != 0).then(|| ((replaced >> 32) as u32, replaced & u64::from(u32::MAX)))
    }
}

/// Memory a cached record costs beyond its own bytes: the allocations'
/// headers and rounding, and the cache's entry.
pub const ENTRY_OVERHEAD: u64 = 224;

/// Access to what is stored on disk; the store implements it.
pub trait Loader {
    /// Loads the inode recorded at `offset`. `hash` is what the pointer says
    /// the inode hashes to (directory hash when `depth == 0`).
    fn load_inode(&self, offset: u64, hash: &Hash, depth: u32) -> Result<Arc<Inode>>;
    /// The same, to be changed: the loader may hand over the copy it would
    /// otherwise keep (its cache's), so that the update changes it in place.
    fn load_inode_to_update(&self, offset: u64, hash: &Hash, depth: u32) -> Result<Arc<Inode>> {
        self.load_inode(offset, hash, depth)
    }
    /// Loads a blob.
    fn load_blob(&self, offset: u64, hash: &Hash) -> Result<Arc<Value>>;
}

impl Resolve<Held> for dyn Loader + '_ {
    type Error = Error;

    fn load(&self, ptr: &Ptr, depth: u32) -> Result<Arc<Inode>> {
        match ptr {
            Ptr::Mem(inode, _) => Ok(inode.clone()),
            Ptr::Stored { offset, hash } => self.load_inode(*offset, hash, depth),
        }
    }

    fn load_to_update(&self, ptr: &Ptr, depth: u32) -> Result<Arc<Inode>> {
        match ptr {
            Ptr::Mem(inode, _) => Ok(inode.clone()),
            Ptr::Stored { offset, hash } => self.load_inode_to_update(*offset, hash, depth),
        }
    }

    fn leaf_hash(&self, leaf: &Leaf) -> Result<Hash> {
        Ok(leaf.hash())
    }

    fn broken(&self, inode: &Inode, reason: String) -> Error {
        Error::corrupt("pack", inode.stored_at().unwrap_or(0), reason)
    }
}

/// A loader for trees that were never stored: every pointer is in memory.
pub struct NoLoader;

impl Loader for NoLoader {
    fn load_inode(&self, offset: u64, _hash: &Hash, _depth: u32) -> Result<Arc<Inode>> {
        Err(Error::Invalid(format!("tree has no store to load offset {offset} from")))
    }
    fn load_blob(&self, offset: u64, _hash: &Hash) -> Result<Arc<Value>> {
        Err(Error::Invalid(format!("tree has no store to load blob {offset} from")))
    }
}

/// Resolves a pointer to an inode at `depth`.
pub fn load(ptr: &Ptr, depth: u32, loader: &dyn Loader) -> Result<Arc<Inode>> {
    dir::load(ptr, depth, loader)
}

/// Calls `f` on the bytes of a contents, in memory or in its blob, without
/// copying them; `None` for a directory.
pub fn with_value<T>(child: &Child, loader: &dyn Loader, f: impl FnOnce(&[u8]) -> T) -> Result<Option<T>> {
    match child {
        Child::Contents(Leaf::Inline(inline)) => Ok(Some(f(inline.bytes()))),
        Child::Contents(Leaf::Value(value)) => Ok(Some(f(&value.bytes))),
        Child::Contents(leaf @ (Leaf::Blob { .. } | Leaf::Staged(_))) => {
            if let Leaf::Staged(staged) = leaf {
                staged.written()?;
            }
            let (offset, hash) = leaf.stored_blob().expect("a blob");
            Ok(Some(f(&loader.load_blob(offset, &hash)?.bytes)))
        }
        Child::Dir(_) => Ok(None),
    }
}

/// The bytes of a contents, copied; `None` for a directory.
pub fn value_of(child: &Child, loader: &dyn Loader) -> Result<Option<Vec<u8>>> {
    with_value(child, loader, <[u8]>::to_vec)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memory of an entry and an inode, as docs/PERFORMANCE.md states it:
    /// an entry of a values inode is its step's bytes, a 4-byte end and a
    /// child of 56 bytes (a 32-byte hash and an offset for what is stored;
    /// contents of up to 32 bytes in place), in one block beside an inode
    /// of at most 208 bytes; a directory of one entry whose end and step
    /// fit 16 bytes holds them inside its inode.
    #[test]
    fn nodes_are_compact() {
        assert_eq!(std::mem::size_of::<Leaf>(), 48);
        assert_eq!(std::mem::size_of::<Ptr>(), 48);
        assert!(std::mem::size_of::<Child>() <= 56);
        assert!(std::mem::size_of::<Inode>() <= 208);
        let mut root = empty();
        pando_core::dir::set(&mut root, 0, b"balance", value_child(&[0; 8]), &NoLoader as &dyn Loader).unwrap();
        let Body::Values(values) = &root.body else { unreachable!("one entry makes a values inode") };
        assert_eq!(values.weight(), 0, "a one-entry directory holds nothing outside its inode");
        for (i, step) in [&b"counter"[..], b"delegate"].iter().enumerate() {
            pando_core::dir::set(&mut root, 0, step, value_child(&[i as u8; 8]), &NoLoader as &dyn Loader).unwrap();
        }
        let Body::Values(values) = &root.body else { unreachable!("three entries make a values inode") };
        // One block beside the inode: the steps' ends (4 bytes each) and
        // the steps, then the children (aligned).
        let names = (3 * 4 + b"balancecounterdelegate".len()).next_multiple_of(std::mem::align_of::<Child>());
        assert_eq!(values.weight(), names + 3 * std::mem::size_of::<Child>());
    }

    /// A pointer takes its inode's hint as an update goes through it,
    /// forgetting the hash it carried, and again on the update's way back
    /// up: after inserts that rebuild the children's blocks and removals,
    /// every pointer of a directory names where its inode's entries are
    /// now; a pointer to a stored record keeps none.
    #[test]
    fn pointers_keep_their_inodes_hints_fresh_through_updates() {
        let r = &NoLoader as &dyn Loader;
        let step = |k: u32| format!("{k:08x}").into_bytes();
        let fresh = |root: &Arc<Inode>| {
            let Body::Tree(pointers) = &root.body else { panic!("a tree inode at the root") };
            for (_, ptr) in pointers.iter() {
                let inode = Held::as_mem(ptr).expect("in memory");
                assert_ne!(dir::hint(inode), 0, "a block of entries beside each child");
                assert_eq!(Held::hint(ptr), dir::hint(inode), "the pointer names where its inode's entries are now");
            }
        };
        let mut root = empty();
        for k in 0..200 {
            dir::set(&mut root, 0, &step(k), value_child(&[1]), r).unwrap();
        }
        fresh(&root);
        for k in 200..260 {
            dir::set(&mut root, 0, &step(k), value_child(&[2]), r).unwrap();
        }
        fresh(&root);
        for k in (0..260).step_by(9) {
            assert!(dir::remove(&mut root, 0, &step(k), r).unwrap());
        }
        fresh(&root);

        let hash = Hash::of_bytes(b"a");
        let mut ptr = Ptr::mem_hashed(root.clone(), hash);
        assert_eq!((Held::known_hash(&ptr), Held::hint(&ptr)), (Some(hash), 0), "a pointer made takes no hint");
        Held::as_mem_mut(&mut ptr).expect("in memory");
        assert_eq!((Held::known_hash(&ptr), Held::hint(&ptr)), (None, dir::hint(&root)), "taken on the way down");
        let mut stored = Ptr::stored(4096, hash);
        Held::refresh_hint(&mut stored);
        assert_eq!((Held::known_hash(&stored), Held::hint(&stored)), (Some(hash), 0));
    }
}
