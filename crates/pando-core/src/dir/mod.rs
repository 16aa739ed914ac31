//! The directory trie, once for every tree of pando: the store's trees
//! (`pando_store::node`) and the partial trees of proofs
//! ([`crate::proof::partial`]); snapshot import and the integrity check
//! stream records and share its hashing rule and depth bound. It builds, finds, sets,
//! removes and enumerates entries, walks and updates paths of directories
//! ([`with_path`], [`update_path`]), and hashes a directory by the one
//! Tezos rule: the flat node encoding up to the layout's `stable_hash`
//! entries, the inode encoding above.
//!
//! A directory is the Tezos inode trie (see [`crate::inode`]) of a
//! [`Layout`], which the [`Resolve`]r names (L1's unless it says
//! otherwise): a values inode holds at most `entries` entries (32, or 2 in
//! the binary layout) sorted by step; a tree inode at depth `d` spreads
//! more over `entries` children by `layout.index(d, step)`. The shape is
//! a function of the layout and the set of entries, so one shape serves
//! memory, disk and hash.
//!
//! Nodes are compact: a values inode keeps its steps' ends, its steps and
//! its children in one block beside it (inside it, for one short entry);
//! a tree inode keeps only the children it has, found by a bitmap. Nothing
//! per pointer is locked. A pointer may carry a hint of where its inode's
//! block or children lie ([`hint`]), so that an update asks for them with
//! the inode, not one cache miss after it.
//!
//! What children are is the holder's choice ([`Hold`]): a store holds
//! pointers that are in memory or on disk and contents that are values or
//! blobs; loading what a pointer names is the [`Resolve`]r's job. The trie
//! itself does no I/O and no locking.
//!
//! Invariants:
//! - Any sequence of [`set`] and [`remove`] yields exactly the shape
//!   [`build`] gives for the same set of entries (a tree inode iff more than
//!   `entries` entries below it), so the hash depends only on the entries.
//! - No inode lies deeper than the layout's `max_depth` ([`MAX_DEPTH`] in
//!   L1's); an update that would go deeper fails (only steps chosen on
//!   purpose to collide get there).
//! - Updates copy the inodes on one path, or change them in place when the
//!   holder says nobody else can see them ([`make_mut`]); every other inode
//!   is shared. Memoised hashes are cleared by any change.

mod hash;
mod node;
mod ops;
mod values;

pub use hash::*;
pub use node::*;
pub use ops::*;
pub use values::*;

use std::sync::OnceLock;

use crate::arc::Arc;

use crate::hash::Hash;
pub use crate::inode::{ENTRIES, Layout, STABLE_HASH, hashed_flat};
use crate::tezos::Kind;

/// The deepest inode (the root is at depth 0): deeper than any directory
/// not built of steps chosen to collide (a billion entries need depth 5).
/// Updates, snapshot import, proofs and the integrity check share it.
pub const MAX_DEPTH: u32 = Layout::TEZOS.max_depth;

/// How a trie holds its children.
pub trait Hold: Sized {
    /// A contents entry.
    type Leaf: Clone;
    /// A pointer to an inode: a directory's root (depth 0) or an inode below.
    type Ptr: Clone;
    /// What the holder keeps beside each inode: opaque to the trie, which
    /// tells the holder of each change through [`Hold::changing`].
    type Meta: Default;

    /// A pointer to an inode in memory.
    fn mem(inode: Arc<Inode<Self>>) -> Self::Ptr;
    /// The inode, when the pointer holds it in memory.
    fn as_mem(ptr: &Self::Ptr) -> Option<&Arc<Inode<Self>>>;
    /// The same, for updating it.
    fn as_mem_mut(ptr: &mut Self::Ptr) -> Option<&mut Arc<Inode<Self>>>;
    /// The hash the pointer carries, if it carries one: the directory hash
    /// for a root, the inode hash below.
    fn known_hash(ptr: &Self::Ptr) -> Option<Hash>;
    /// Lets a pointer to an inode in memory carry the hash just computed
    /// for it (the same kind of hash as [`Hold::known_hash`] gives), if the
    /// holder keeps one there; [`Hold::as_mem_mut`] must then forget it.
    fn remember_hash(_ptr: &Self::Ptr, _hash: Hash) {}
    /// The [`hint`] a pointer to an inode in memory keeps of it, if it
    /// keeps one (0: none): where to prefetch what a search of the inode
    /// reads first, at the same time as the inode itself. It may be stale
    /// (the inode changed since): a prefetch never faults. (The store
    /// takes it in [`Hold::as_mem_mut`], as each update goes down, and
    /// again in [`Hold::refresh_hint`].)
    fn hint(_ptr: &Self::Ptr) -> usize {
        0
    }
    /// Takes the [`hint`] of the inode a pointer in memory holds again,
    /// if the holder keeps one: an update calls it on its way back up,
    /// after changing the inode (an entry added or removed rebuilds its
    /// block, a shared inode is copied).
    fn refresh_hint(_ptr: &mut Self::Ptr) {}
    /// A shared empty values inode (cloning it allocates nothing).
    fn empty() -> Arc<Inode<Self>>;
    /// The one hook of a holder into updates: an inode is about to change
    /// (in place, or as a new version), or a values inode's entries just
    /// changed. A holder that keeps nothing beside its inodes ignores it.
    fn changing(_change: Change<'_, Self>) {}
}

/// What [`Hold::changing`] is told.
pub enum Change<'a, H: Hold> {
    /// An inode nothing else holds is about to change in place (its
    /// memoised hashes are cleared next).
    InPlace(&'a mut Inode<H>),
    /// A new version of `from`, about to be changed, gets its `meta`
    /// (default until the holder fills it). `body` is the new version's:
    /// a copy of `from`'s if `copied` (a holder may then forget which
    /// children `from` had changed, [`Pointers::forget_changes`]), built
    /// anew otherwise.
    NewVersion { from: &'a Arc<Inode<H>>, body: &'a mut Body<H>, copied: bool, meta: &'a mut H::Meta },
    /// A values inode's entries just changed (an update in place, or the
    /// new version just made): a holder may mark which, as
    /// [`Pointers::changed`] marks a tree inode's children.
    Values { meta: &'a mut H::Meta, change: ValuesChange },
}

/// How an update changed a values inode's entries, by position: in the
/// entries before the change for a replaced or removed entry, after it for
/// an inserted one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValuesChange {
    Replaced(usize),
    Inserted(usize),
    Removed(usize),
}

/// Loads what pointers name and hashes what leaves hold.
pub trait Resolve<H: Hold> {
    type Error;
    /// The inode a pointer that is not in memory names, at `depth`.
    fn load(&self, ptr: &H::Ptr, depth: u32) -> Result<Arc<Inode<H>>, Self::Error>;
    /// The same inode, loaded to be changed: a resolver that shares what it
    /// loads (a cache) may hand over its own copy instead, so that the
    /// update can change it in place rather than copy it.
    fn load_to_update(&self, ptr: &H::Ptr, depth: u32) -> Result<Arc<Inode<H>>, Self::Error> {
        self.load(ptr, depth)
    }
    /// The hash of a contents.
    fn leaf_hash(&self, leaf: &H::Leaf) -> Result<Hash, Self::Error>;
    /// The error for a trie that breaks a rule: two children holding one
    /// step (only damage can do that), or an inode deeper than the
    /// layout's `max_depth`.
    fn broken(&self, inode: &Inode<H>, reason: String) -> Self::Error;
    /// The layout of the tries this resolver serves: every update and
    /// hash of them follows it.
    fn layout(&self) -> Layout {
        Layout::TEZOS
    }
}

/// A reference to a resolver resolves as it does.
impl<H: Hold, R: Resolve<H> + ?Sized> Resolve<H> for &R {
    type Error = R::Error;
    fn load(&self, ptr: &H::Ptr, depth: u32) -> Result<Arc<Inode<H>>, Self::Error> {
        (**self).load(ptr, depth)
    }
    fn load_to_update(&self, ptr: &H::Ptr, depth: u32) -> Result<Arc<Inode<H>>, Self::Error> {
        (**self).load_to_update(ptr, depth)
    }
    fn leaf_hash(&self, leaf: &H::Leaf) -> Result<Hash, Self::Error> {
        (**self).leaf_hash(leaf)
    }
    fn broken(&self, inode: &Inode<H>, reason: String) -> Self::Error {
        (**self).broken(inode, reason)
    }
    fn layout(&self) -> Layout {
        (**self).layout()
    }
}

/// What a directory entry is.
pub enum Child<H: Hold> {
    Contents(H::Leaf),
    /// A directory, by a pointer to its root inode.
    Dir(H::Ptr),
}

impl<H: Hold> Clone for Child<H> {
    fn clone(&self) -> Self {
        match self {
            Child::Contents(leaf) => Child::Contents(leaf.clone()),
            Child::Dir(ptr) => Child::Dir(ptr.clone()),
        }
    }
}

impl<H: Hold> Child<H> {
    pub fn kind(&self) -> Kind {
        match self {
            Child::Contents(_) => Kind::Contents,
            Child::Dir(_) => Kind::Dir,
        }
    }
}
