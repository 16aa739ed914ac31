//! The in-memory nodes of a tree, shared between trees and the cache.
//!
//! A directory is a trie of inodes with the Tezos layout (see
//! `pando_core::inode`): a [`Body::Values`] inode holds at most 32 entries
//! sorted by step, a [`Body::Tree`] inode at depth `d` holds more than 32
//! entries spread over 32 children by `ocaml_hash(d, step) mod 32`. Every
//! directory, small or large, uses this one shape, so growing past 256
//! entries changes only how the hash is computed, never the structure.
//!
//! Invariants:
//! - Nodes are immutable once built; `OnceLock` fields only memoise values
//!   that are functions of the node (its hashes) or record where it was
//!   written (`stored`), set once by the single writer.
//! - A `Tree` inode has more than 32 entries below it; a `Values` inode at
//!   most 32, sorted and unique. No inode below a directory root is empty.
//! - A [`Ptr::Stored`] carries the hash of what it points to: the directory
//!   hash for a directory root, the inode hash for an inode below a root.

use pando_core::Hash;
use pando_core::inode::ENTRIES;
use pando_core::tezos::{Kind, contents_hash};
use std::sync::{Arc, OnceLock, Weak};

use crate::error::Result;

/// One step of a path: a file or directory name. Names of up to 48 bytes
/// (all Tezos step names, hex addresses included) are stored inline, so
/// searching a directory compares bytes inside the node, without following
/// a pointer per entry.
pub type Step = smallvec::SmallVec<[u8; 48]>;

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
}

/// What a directory entry points to.
#[derive(Clone)]
pub enum Child {
    /// Contents in memory.
    Value(Arc<Value>),
    /// Contents stored as a blob record, not loaded.
    Blob { offset: u64, hash: Hash },
    /// A directory.
    Dir(Ptr),
}

impl Child {
    pub fn kind(&self) -> Kind {
        match self {
            Child::Value(_) | Child::Blob { .. } => Kind::Contents,
            Child::Dir(_) => Kind::Dir,
        }
    }
}

/// A pointer to an inode: in memory, or a record on disk.
#[derive(Clone)]
pub enum Ptr {
    Mem(Arc<Inode>),
    Stored { offset: u64, hash: Hash, memo: Memo },
}

impl Ptr {
    pub fn stored(offset: u64, hash: Hash) -> Ptr {
        Ptr::Stored { offset, hash, memo: Memo::default() }
    }

    /// A stored pointer whose inode is already in memory.
    pub fn stored_as(offset: u64, hash: Hash, inode: &Arc<Inode>) -> Ptr {
        Ptr::Stored { offset, hash, memo: Memo(parking_lot::Mutex::new(Arc::downgrade(inode))) }
    }
}

/// The inode a stored pointer was last resolved to, if it is still alive
/// somewhere (the cache, a tree). Following it skips the cache's lookup; it
/// never keeps the inode alive, so memory stays bounded by the cache.
#[derive(Default)]
pub struct Memo(parking_lot::Mutex<Weak<Inode>>);

impl Clone for Memo {
    fn clone(&self) -> Memo {
        Memo(parking_lot::Mutex::new(self.0.lock().clone()))
    }
}

impl Memo {
    fn get(&self) -> Option<Arc<Inode>> {
        self.0.lock().upgrade()
    }

    fn set(&self, inode: &Arc<Inode>) {
        *self.0.lock() = Arc::downgrade(inode);
    }
}

/// Memory a dead memo can pin: the allocation of an `Arc<Inode>`.
pub const MEMO_PIN_BYTES: u64 = std::mem::size_of::<Inode>() as u64 + 16;

/// An inode of a directory trie.
pub struct Inode {
    pub body: Body,
    /// The inode hash (value or tree encoding).
    pub(crate) hash: OnceLock<Hash>,
    /// For a directory root: the Tezos hash of the directory.
    pub(crate) dir_hash: OnceLock<Hash>,
    /// The store instance that wrote this inode, and the record's offset.
    /// Offsets mean nothing to another instance (another store, or the same
    /// directory reopened after a failed write).
    stored: OnceLock<(u64, u64)>,
    /// For a written tree inode: how many patch records lead from its
    /// record to a full one (0 for a full record).
    pub(crate) patch_chain: OnceLock<u8>,
    /// For an inode being updated: the written version it derives from, so
    /// that writing it can record only the difference. Taken when written.
    pub(crate) base: parking_lot::Mutex<Option<Arc<Inode>>>,
}

pub enum Body {
    /// At most 32 entries, sorted by step, unique.
    Values(Vec<(Step, Child)>),
    /// More than 32 entries below, spread by index at `depth`.
    Tree { depth: u32, len: u64, children: Box<[Option<Ptr>; ENTRIES]> },
}

impl Inode {
    pub fn new(body: Body) -> Inode {
        Inode {
            body,
            hash: OnceLock::new(),
            dir_hash: OnceLock::new(),
            stored: OnceLock::new(),
            patch_chain: OnceLock::new(),
            base: parking_lot::Mutex::new(None),
        }
    }

    pub fn values(entries: Vec<(Step, Child)>) -> Arc<Inode> {
        assert!(entries.len() <= ENTRIES, "a value inode holds at most 32 entries");
        Arc::new(Inode::new(Body::Values(entries)))
    }

    pub fn empty() -> Arc<Inode> {
        Inode::values(Vec::new())
    }

    /// Number of entries below this inode.
    pub fn len(&self) -> u64 {
        match &self.body {
            Body::Values(entries) => entries.len() as u64,
            Body::Tree { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy that is not written and has no memoised hash, for updating.
    pub fn fresh_copy(&self) -> Inode {
        let body = match &self.body {
            Body::Values(entries) => Body::Values(entries.clone()),
            Body::Tree { depth, len, children } => Body::Tree { depth: *depth, len: *len, children: children.clone() },
        };
        Inode::new(body)
    }

    /// Mutable access for an update: in place when nobody else holds this
    /// inode and it was never written, otherwise on a fresh copy. Memoised
    /// hashes are cleared either way.
    pub fn make_mut(this: &mut Arc<Inode>) -> &mut Inode {
        let in_place = !this.is_stored() && Arc::get_mut(this).is_some();
        if !in_place {
            let copy = this.fresh_copy();
            // Remember the written version this one derives from.
            let base = if this.is_stored() { Some(this.clone()) } else { this.base.lock().clone() };
            *copy.base.lock() = base;
            *this = Arc::new(copy);
        }
        let inode = Arc::get_mut(this).expect("unique after copy");
        inode.hash = OnceLock::new();
        inode.dir_hash = OnceLock::new();
        inode
    }

    /// Records where store instance `instance` wrote this inode; forgets its base.
    pub(crate) fn mark_stored(&self, instance: u64, offset: u64, patch_chain: u8) {
        let _ = self.stored.set((instance, offset));
        let _ = self.patch_chain.set(patch_chain);
        self.base.lock().take();
    }

    /// Where store instance `instance` wrote this inode, if it did.
    pub fn stored_offset(&self, instance: u64) -> Option<u64> {
        self.stored.get().filter(|(owner, _)| *owner == instance).map(|(_, offset)| *offset)
    }

    /// The offset of the record it was read from or written to, by any
    /// store instance (for error messages).
    pub fn stored_at(&self) -> Option<u64> {
        self.stored.get().map(|(_, offset)| *offset)
    }

    /// Whether any store wrote this inode (it must then never change in place).
    pub fn is_stored(&self) -> bool {
        self.stored.get().is_some()
    }

    /// Approximate bytes of memory held, for the cache's budget.
    pub fn weight(&self) -> u64 {
        let base = std::mem::size_of::<Inode>() as u64;
        match &self.body {
            Body::Values(entries) => {
                base + entries
                    .iter()
                    .map(|(step, child)| {
                        let child_bytes = match child {
                            Child::Value(v) => 64 + v.bytes.len() as u64,
                            Child::Dir(_) => MEMO_PIN_BYTES,
                            Child::Blob { .. } => 0,
                        };
                        48 + step.len() as u64 + child_bytes
                    })
                    .sum::<u64>()
            }
            Body::Tree { children, .. } => {
                let present = children.iter().flatten().count() as u64;
                base + (ENTRIES * std::mem::size_of::<Option<Ptr>>()) as u64 + present * MEMO_PIN_BYTES
            }
        }
    }
}

/// Access to what is stored on disk; the store implements it.
pub trait Loader {
    /// Loads the inode recorded at `offset`. `hash` is what the pointer says
    /// the inode hashes to (directory hash when `depth == 0`).
    fn load_inode(&self, offset: u64, hash: &Hash, depth: u32) -> Result<Arc<Inode>>;
    /// Loads a blob.
    fn load_blob(&self, offset: u64, hash: &Hash) -> Result<Arc<Value>>;
}

/// A loader for trees that were never stored: every pointer is in memory.
pub struct NoLoader;

impl Loader for NoLoader {
    fn load_inode(&self, offset: u64, _hash: &Hash, _depth: u32) -> Result<Arc<Inode>> {
        Err(crate::Error::Invalid(format!("tree has no store to load offset {offset} from")))
    }
    fn load_blob(&self, offset: u64, _hash: &Hash) -> Result<Arc<Value>> {
        Err(crate::Error::Invalid(format!("tree has no store to load blob {offset} from")))
    }
}

/// Resolves a pointer to an inode at `depth`.
pub fn load(ptr: &Ptr, depth: u32, loader: &dyn Loader) -> Result<Arc<Inode>> {
    match ptr {
        Ptr::Mem(inode) => Ok(inode.clone()),
        Ptr::Stored { offset, hash, memo } => {
            if let Some(inode) = memo.get() {
                return Ok(inode);
            }
            let inode = loader.load_inode(*offset, hash, depth)?;
            memo.set(&inode);
            Ok(inode)
        }
    }
}
