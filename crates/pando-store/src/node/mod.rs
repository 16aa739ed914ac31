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
//!   that are functions of the node (hashes) or where a record holds it
//!   (the writer's [`State`], whose transitions are all in `state`;
//!   asserted in `State::write`, which refuses a second write).
//! - A [`Ptr::Stored`] carries the hash of what it points to: the directory
//!   hash for a directory root, the inode hash for an inode below a root.
//!   A [`Ptr::Mem`]'s [`HashMemo`], once set, is that same hash of the inode
//!   it holds; [`Hold::as_mem_mut`], the only way to change the inode
//!   through the pointer, forgets it (asserted in `remember_hash`). The
//!   prefetch hint beside it may be stale (the inode changed in place or
//!   was copied since): it is only ever prefetched, never read through.
//! - A written inode changes in place only when nothing else holds it,
//!   and then becomes Changed over the version it was; an update of a
//!   shared one works on a Changed copy (asserted in `State::thaw` and
//!   `State::derive`). A tree inode's pointers and a value inode's
//!   [`ValuesMarks`] count changes from the written version it derives
//!   from (any other tree body is new, all of it marked; a value inode
//!   built anew has no base).
//! - A [`Leaf::Staged`] names a blob record written before its commit; its
//!   offset stays in the store's [`StagedSet`] until a commit referring to
//!   it is in the index, or the last copy drops (tested by
//!   `collections_keep_what_an_uncommitted_tree_staged`).

mod marks;
mod memo;
mod staged;
mod state;

use pando_core::Hash;
use pando_core::dir::{self, Hold, Resolve};
use pando_core::tezos::contents_hash;
use std::sync::{Arc, LazyLock, OnceLock};

pub use marks::ValuesMarks;
pub use memo::HashMemo;
pub use staged::{Staged, StagedSet};
pub use state::{BaseShape, ChainRoot, Claim, KeptMark, PatchBase, State, Written, refused_transitions};
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

    /// A value read from the blob record at `offset` by store instance
    /// `instance`, whose hash is known.
    pub(crate) fn loaded(bytes: Box<[u8]>, hash: Hash, instance: u64, offset: u64) -> Value {
        Value { bytes, hash: OnceLock::from(hash), stored: OnceLock::from((instance, offset)) }
    }

    pub fn hash(&self) -> Hash {
        *self.hash.get_or_init(|| contents_hash(&self.bytes))
    }

    /// Where store instance `instance` wrote this value, if it did.
    pub(crate) fn stored_offset(&self, instance: u64) -> Option<u64> {
        self.stored.get().filter(|(owner, _)| *owner == instance).map(|(_, offset)| *offset)
    }

    /// The writer wrote the value at `offset`. Returns `false` when it
    /// was written before (its record collected since, so written again):
    /// its mark stays the old one.
    pub(crate) fn write(&self, instance: u64, offset: u64) -> bool {
        self.stored.set((instance, offset)).is_ok()
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
            dir::prefetch(&child.meta);
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

static EMPTY: LazyLock<Arc<Inode>> = LazyLock::new(|| Inode::values(Values::new()));

impl Hold for Held {
    type Leaf = Leaf;
    type Ptr = Ptr;
    type Meta = State;

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
            debug_assert!(memo.get().is_none_or(|known| known == hash), "a pointer's memo holds its inode's one hash");
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

    #[inline]
    fn changing(change: dir::Change<'_, Held>) {
        match change {
            dir::Change::InPlace(inode) => State::thaw(inode),
            dir::Change::NewVersion { from, body, copied, meta } => *meta = State::derive(from, body, copied),
            dir::Change::Values { meta, change } => meta.note_values(change),
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

/// Bytes of memory a cached copy of an inode costs, for the cache's
/// budget. A cached inode holds nothing else in memory: its contents are
/// inline or blobs, its children offsets. Beside the inode and its
/// buffers: the Arc's counts, the rounding of three allocations and the
/// cache's own entry (measured: resident memory then follows the budget
/// within about 10%).
pub fn cache_weight(inode: &Inode) -> u64 {
    Inode::weight(inode) as u64 + ENTRY_OVERHEAD
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
    /// The layout of the tries it serves (a store's, recorded in its
    /// control file): every update and hash of them follows it.
    fn layout(&self) -> dir::Layout {
        dir::Layout::TEZOS
    }
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
        Error::corrupt("pack", inode.meta.get().map_or(0, |written| written.offset()), reason)
    }

    fn layout(&self) -> dir::Layout {
        Loader::layout(self)
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
        assert!(std::mem::size_of::<Inode>() <= 216);
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
