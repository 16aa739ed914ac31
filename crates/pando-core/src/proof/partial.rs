//! Partial trees: a context tree of which only some parts are known, the
//! rest standing as hashes. The same structure serves both sides of a proof:
//!
//! - to **produce** a proof, a partial tree starts as a single hash whose
//!   parts a [`Reveal`] (the store) supplies on demand; what the computation
//!   revealed is exactly what the proof must show;
//! - to **verify** one, the partial tree is what the proof shows, and
//!   reaching a part it blinds is an error ([`ProofError::Blinded`]), never
//!   a guess.
//!
//! A partial tree is the directory trie of [`crate::dir`], held by
//! [`Partial`]: a pointer is a [`Cell`], an inode's hash with a handle to
//! reveal it, its inode once revealed, or both; a contents is a
//! [`Contents`], its hash, its bytes or both. Building, finding, updating,
//! listing and hashing are `dir`'s; this module reveals cells (the
//! [`Resolve`] of an `Access`) and runs the Octez operations on top.
//! Updates copy the inodes on one path and share the rest, so the tree a
//! computation started from is never changed, except that revealing a cell
//! fills it in place (a `OnceLock`), which every tree sharing the cell then
//! sees.
//!
//! Invariants:
//! - A cell knows its hash or its inode (or both); a cell made here from an
//!   inode has no hash of its own, and its hash is computed from the inode.
//! - A revealed part is checked against the layout rules before it is
//!   taken (sorted steps, at most 256 entries in a flat directory, a tree
//!   inode of more than 32 entries at the depth asked for), and a revealed
//!   value against its hash; updates keep the canonical layout (`dir`'s
//!   invariant), so the hash of a partial tree equals the hash of the full
//!   tree it stands for.
//! - No thread, no file: this builds for `wasm32-unknown-unknown`.

use std::sync::{Arc, LazyLock, OnceLock};

use super::ProofError;
use super::types::KindedHash;
use crate::dir::{self, Body, Child, Hold, Resolve, Values};
use crate::hash::Hash;
use crate::inode::{ENTRIES, Layout, hashed_flat};
use crate::tezos::{Kind, contents_hash};

/// Supplies the parts of a tree that a partial tree does not hold yet:
/// what a store implements to produce proofs. A `handle` is the store's own
/// name for a part, given when the part was handed out.
pub trait Reveal {
    /// The root of the directory `handle`: every entry when it has at most
    /// 256 of them, its depth-0 tree inode otherwise.
    fn dir(&self, handle: u64) -> Result<Revealed, String>;
    /// The inode `handle` below a directory's root, at `depth` ≥ 1.
    fn inode(&self, handle: u64, depth: u32) -> Result<Arc<Inode>, String>;
    /// The bytes of the contents `handle`.
    fn value(&self, handle: u64) -> Result<Vec<u8>, String>;
}

/// A directory's root as a [`Reveal`] gives it.
pub enum Revealed {
    /// All entries, sorted by step: a directory of at most 256 entries.
    Entries(Vec<(Vec<u8>, Entry)>),
    /// The tree inode at depth 0 of a larger directory.
    Root(Arc<Inode>),
}

/// How a partial tree holds the directory trie.
pub struct Partial;

/// What a directory entry (or a whole tree) is.
pub type Entry = Child<Partial>;
/// An inode of a partial tree.
pub type Inode = dir::Inode<Partial>;

/// A contents value: its hash, its bytes, or both.
pub struct Contents {
    hash: OnceLock<Hash>,
    bytes: OnceLock<Arc<[u8]>>,
    handle: Option<u64>,
}

impl Contents {
    /// The bytes, if known (revealed, or never blinded).
    pub fn known_bytes(&self) -> Option<&Arc<[u8]>> {
        self.bytes.get()
    }

    /// The hash, if known (blinded, or computed already).
    pub fn known_hash(&self) -> Option<Hash> {
        self.hash.get().copied()
    }
}

/// A pointer to an inode (a directory's root at depth 0): its hash (the
/// directory hash at depth 0), its inode, or both.
pub struct Cell {
    hash: Option<Hash>,
    inode: OnceLock<Arc<Inode>>,
    handle: Option<u64>,
}

impl Cell {
    /// An inode known by its hash, which `handle` can reveal.
    pub fn blinded(hash: Hash, handle: Option<u64>) -> Arc<Cell> {
        Arc::new(Cell { hash: Some(hash), inode: OnceLock::new(), handle })
    }

    /// The inode, if known (revealed, or never blinded).
    pub fn known_inode(&self) -> Option<&Arc<Inode>> {
        self.inode.get()
    }

    /// The hash it was blinded with, if it was.
    pub fn blinded_hash(&self) -> Option<Hash> {
        self.hash
    }
}

static EMPTY: LazyLock<Arc<Inode>> = LazyLock::new(|| Inode::values(Values::new()));

impl Hold for Partial {
    type Leaf = Arc<Contents>;
    type Ptr = Arc<Cell>;
    type Meta = ();

    fn mem(inode: Arc<Inode>) -> Arc<Cell> {
        Arc::new(Cell { hash: None, inode: OnceLock::from(inode), handle: None })
    }

    fn as_mem(ptr: &Arc<Cell>) -> Option<&Arc<Inode>> {
        ptr.inode.get()
    }

    /// A cell shared with another tree, or carrying the hash it was
    /// blinded with, is replaced by a fresh one first: the update must not
    /// show in the other tree, nor keep a hash it no longer has.
    fn as_mem_mut(ptr: &mut Arc<Cell>) -> Option<&mut Arc<Inode>> {
        let inode = ptr.inode.get()?.clone();
        if ptr.hash.is_some() || Arc::get_mut(ptr).is_none() {
            *ptr = Partial::mem(inode);
        }
        Arc::get_mut(ptr).and_then(|cell| cell.inode.get_mut())
    }

    fn known_hash(ptr: &Arc<Cell>) -> Option<Hash> {
        ptr.hash
    }

    fn empty() -> Arc<Inode> {
        EMPTY.clone()
    }
}

impl Entry {
    /// A contents known by its hash, which `handle` can reveal.
    pub fn blinded_contents(hash: Hash, handle: Option<u64>) -> Entry {
        Child::Contents(Arc::new(Contents { hash: OnceLock::from(hash), bytes: OnceLock::new(), handle }))
    }

    /// A contents known by its bytes.
    pub fn contents(bytes: &[u8]) -> Entry {
        Child::Contents(Arc::new(Contents { hash: OnceLock::new(), bytes: OnceLock::from(Arc::from(bytes)), handle: None }))
    }

    /// A directory known by its hash, which `handle` can reveal.
    pub fn blinded_dir(hash: Hash, handle: Option<u64>) -> Entry {
        Child::Dir(Cell::blinded(hash, handle))
    }

    /// A directory whose root is `root`.
    pub fn dir(root: Arc<Inode>) -> Entry {
        Child::Dir(Partial::mem(root))
    }

    /// The empty directory.
    pub fn empty_dir() -> Entry {
        Entry::dir(Partial::empty())
    }
}

/// How parts of a tree are reached: through a [`Reveal`] when producing a
/// proof, not at all when verifying one.
#[derive(Clone, Copy)]
pub(crate) struct Access<'r> {
    pub reveal: Option<&'r dyn Reveal>,
}

impl<'r> Access<'r> {
    /// The resolver for work on the directory at `path` (named in errors).
    pub fn at<'p>(&self, path: &'p [&'p [u8]]) -> At<'r, 'p> {
        At { reveal: self.reveal, path }
    }
}

/// The [`Resolve`] of a partial tree, for work on the directory at `path`.
pub(crate) struct At<'r, 'p> {
    reveal: Option<&'r dyn Reveal>,
    path: &'p [&'p [u8]],
}

impl At<'_, '_> {
    fn blinded(&self, what: &str) -> ProofError {
        ProofError::Blinded { what: what.to_string(), path: show_path(self.path) }
    }

    /// The bytes of a contents at `path`.
    pub fn bytes(&self, contents: &Contents) -> Result<Arc<[u8]>, ProofError> {
        if let Some(bytes) = contents.bytes.get() {
            return Ok(bytes.clone());
        }
        let (Some(reveal), Some(handle)) = (self.reveal, contents.handle) else {
            return Err(self.blinded("the value"));
        };
        let bytes: Arc<[u8]> = reveal.value(handle).map_err(ProofError::Unavailable)?.into();
        if let Some(hash) = contents.hash.get()
            && contents_hash(&bytes) != *hash
        {
            return Err(ProofError::Unavailable(format!("revealed value at {} does not match its hash", show_path(self.path))));
        }
        Ok(contents.bytes.get_or_init(|| bytes).clone())
    }

    /// The root of the directory `cell` at `path`.
    pub fn root(&self, cell: &Arc<Cell>) -> Result<Arc<Inode>, ProofError> {
        dir::load(cell, 0, self)
    }
}

/// Checks a revealed inode at `depth` against the layout rules.
fn check_revealed(inode: &Inode, depth: u32) -> Result<(), ProofError> {
    match &inode.body {
        Body::Tree(pointers)
            if pointers.depth != depth || pointers.len <= ENTRIES as u64 || (depth == 0 && hashed_flat(pointers.len)) =>
        {
            Err(ProofError::Unavailable(format!(
                "revealed a tree inode of {} entries at depth {}, not a tree inode at depth {depth}",
                pointers.len, pointers.depth
            )))
        }
        Body::Values(values) if values.len() > ENTRIES || !values.iter().zip(values.iter().skip(1)).all(|(a, b)| a.0 < b.0) => {
            Err(ProofError::Unavailable("revealed a value inode unsorted or too large".into()))
        }
        Body::Values(_) if depth == 0 => Err(ProofError::Unavailable("revealed a directory root that is not one".into())),
        _ => Ok(()),
    }
}

impl Resolve<Partial> for At<'_, '_> {
    type Error = ProofError;

    fn load(&self, cell: &Arc<Cell>, depth: u32) -> Result<Arc<Inode>, ProofError> {
        if let Some(inode) = cell.inode.get() {
            return Ok(inode.clone());
        }
        let (Some(reveal), Some(handle)) = (self.reveal, cell.handle) else {
            return Err(self.blinded(if depth == 0 { "the directory" } else { "an inode of the directory" }));
        };
        let inode = if depth == 0 {
            match reveal.dir(handle).map_err(ProofError::Unavailable)? {
                Revealed::Entries(entries) => {
                    if !hashed_flat(entries.len() as u64) || !entries.windows(2).all(|w| w[0].0 < w[1].0) {
                        return Err(ProofError::Unavailable("revealed directory entries are unsorted or too many".into()));
                    }
                    dir::build(Layout::TEZOS, 0, entries).ok_or_else(|| too_deep(0))?
                }
                Revealed::Root(root) => {
                    check_revealed(&root, 0)?;
                    root
                }
            }
        } else {
            let inode = reveal.inode(handle, depth).map_err(ProofError::Unavailable)?;
            check_revealed(&inode, depth)?;
            inode
        };
        Ok(cell.inode.get_or_init(|| inode).clone())
    }

    fn leaf_hash(&self, contents: &Arc<Contents>) -> Result<Hash, ProofError> {
        if let Some(hash) = contents.hash.get() {
            return Ok(*hash);
        }
        let bytes = self.bytes(contents)?;
        Ok(*contents.hash.get_or_init(|| contents_hash(&bytes)))
    }

    fn broken(&self, _inode: &Inode, reason: String) -> ProofError {
        ProofError::Malformed(format!("{reason} at {}", show_path(self.path)))
    }
}

fn too_deep(depth: u32) -> ProofError {
    ProofError::Malformed(format!("more than {ENTRIES} names colliding down to inode depth {depth} or deeper"))
}

/// A path for messages: `/a/b`, steps that are not text in hex.
pub fn show_path(path: &[&[u8]]) -> String {
    if path.is_empty() {
        return "/".into();
    }
    let mut out = String::new();
    for step in path {
        out.push('/');
        match std::str::from_utf8(step) {
            Ok(text) if text.chars().all(|c| !c.is_control()) => out.push_str(text),
            _ => step.iter().for_each(|b| out.push_str(&format!("{b:02x}"))),
        }
    }
    out
}

/// A tree a computation runs on while a proof is produced or verified: the
/// Octez operations on an [`Entry`] reached through an `Access`.
///
/// Reads and updates reach only the parts they need; when verifying, a part
/// the proof blinds is an error. Updates never change the tree this one
/// started from.
pub struct PartialTree<'r> {
    pub(crate) root: Entry,
    pub(crate) access: Access<'r>,
}

impl<'r> PartialTree<'r> {
    pub(crate) fn new(root: Entry, reveal: Option<&'r dyn Reveal>) -> PartialTree<'r> {
        PartialTree { root, access: Access { reveal } }
    }

    /// A tree of the parts `root` holds, with nothing to reveal the rest.
    pub fn of_entry(root: Entry) -> PartialTree<'static> {
        PartialTree::new(root, None)
    }

    /// The hash of any entry reachable from this tree's access.
    pub fn entry_hash(&self, entry: &Entry) -> Result<Hash, ProofError> {
        dir::child_hash(entry, &self.access.at(&[]))
    }

    /// The hash of an inode at `depth` ≥ 1 below a directory root.
    pub fn inode_hash(&self, cell: &Arc<Cell>, depth: u32) -> Result<Hash, ProofError> {
        dir::inode_ptr_hash(cell, depth, &self.access.at(&[]))
    }

    /// The root entry: a directory or a contents.
    pub fn root(&self) -> &Entry {
        &self.root
    }

    /// The Tezos hash of the tree, with its kind.
    pub fn kinded_hash(&self) -> Result<KindedHash, ProofError> {
        let hash = self.entry_hash(&self.root)?;
        Ok(match &self.root {
            Child::Contents(_) => KindedHash::Value(hash),
            Child::Dir(_) => KindedHash::Node(hash),
        })
    }

    /// The Tezos hash of the tree.
    pub fn hash(&self) -> Result<Hash, ProofError> {
        Ok(self.kinded_hash()?.hash())
    }

    fn get(&self, path: &[&[u8]]) -> Result<Option<Entry>, ProofError> {
        dir::with_path(&self.root, path, &|n| self.access.at(&path[..n]), |entry| entry.cloned())
    }

    /// The contents at `path`, if `path` holds a contents.
    pub fn find<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<Option<Vec<u8>>, ProofError> {
        let path = steps(path)?;
        match self.get(&path)? {
            Some(Child::Contents(c)) => Ok(Some(self.access.at(&path).bytes(&c)?.to_vec())),
            _ => Ok(None),
        }
    }

    /// True if `path` holds a contents (whose bytes are not read).
    pub fn mem<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<bool, ProofError> {
        Ok(matches!(self.get(&steps(path)?)?, Some(Child::Contents(_))))
    }

    /// True if `path` holds anything.
    pub fn mem_tree<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<bool, ProofError> {
        Ok(self.get(&steps(path)?)?.is_some())
    }

    /// The kind and hash of what `path` holds, without reading it.
    pub fn find_hash<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<Option<(Kind, Hash)>, ProofError> {
        let path = steps(path)?;
        match self.get(&path)? {
            Some(entry) => Ok(Some((entry.kind(), dir::child_hash(&entry, &self.access.at(&path))?))),
            None => Ok(None),
        }
    }

    /// Number of entries of the directory at `path` (0 if it is not one).
    pub fn length<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<u64, ProofError> {
        let path = steps(path)?;
        match self.get(&path)? {
            Some(Child::Dir(cell)) => Ok(self.access.at(&path).root(&cell)?.len()),
            _ => Ok(0),
        }
    }

    /// The names and kinds of the entries of the directory at `path`,
    /// sorted by name (empty if it is not a directory).
    pub fn list<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<Vec<(Vec<u8>, Kind)>, ProofError> {
        let path = steps(path)?;
        let Some(Child::Dir(cell)) = self.get(&path)? else { return Ok(Vec::new()) };
        let at = self.access.at(&path);
        let entries = dir::collect_sorted(&*at.root(&cell)?, &at)?;
        Ok(entries.into_iter().map(|(step, entry)| (step.into_vec(), entry.kind())).collect())
    }

    /// Sets `path` to the contents `value`; contents met on the way become
    /// directories.
    pub fn add<S: AsRef<[u8]>>(&mut self, path: &[S], value: &[u8]) -> Result<(), ProofError> {
        self.replace(&steps(path)?, Some(Entry::contents(value)))
    }

    /// Removes `path`; directories left empty are removed too.
    pub fn remove<S: AsRef<[u8]>>(&mut self, path: &[S]) -> Result<(), ProofError> {
        self.replace(&steps(path)?, None)
    }

    fn replace(&mut self, path: &[&[u8]], new: Option<Entry>) -> Result<(), ProofError> {
        if path.is_empty() {
            self.root = new.unwrap_or_else(Entry::empty_dir);
            return Ok(());
        }
        let mut root = match &self.root {
            Child::Dir(cell) => self.access.at(&[]).root(cell)?,
            // Nothing below a contents to remove.
            Child::Contents(_) if new.is_none() => return Ok(()),
            Child::Contents(_) => Partial::empty(),
        };
        // A copy of the root: on error the tree stays as it was.
        if dir::update_path(&mut root, path, new, &|n| self.access.at(&path[..n]), None)? {
            self.root = Child::Dir(Partial::mem(root));
        }
        Ok(())
    }
}

fn steps<S: AsRef<[u8]>>(path: &[S]) -> Result<Vec<&[u8]>, ProofError> {
    if path.len() > crate::trace::MAX_KEY_STEPS {
        return Err(ProofError::InvalidPath(format!("a path of {} steps (at most {})", path.len(), crate::trace::MAX_KEY_STEPS)));
    }
    Ok(path.iter().map(|s| s.as_ref()).collect())
}
