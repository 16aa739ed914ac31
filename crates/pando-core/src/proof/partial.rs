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
//! A directory is the Tezos inode trie (see [`crate::inode`]): a values
//! inode of at most 32 entries or a tree inode at depth `d` spreading more
//! than 32 entries over 32 children by `index(d, step)`. Updates copy the
//! cells on one path and share the rest, so the tree a computation started
//! from is never changed, except that revealing a cell fills it in place
//! (a `OnceCell`), which every tree sharing the cell then sees.
//!
//! Invariants:
//! - A cell knows its hash or its body (or both); a cell built here from a
//!   body computes its hash from that body, never from anything else.
//! - Updates keep the canonical layout of their set of entries (a tree
//!   inode iff more than 32 entries below it), so the hash of a partial tree
//!   equals the hash of the full tree it stands for.
//! - No thread, no file: `Rc` and `OnceCell`, so that this builds for
//!   `wasm32-unknown-unknown`.

use std::cell::OnceCell;
use std::rc::Rc;

use super::ProofError;
use super::types::KindedHash;
use crate::hash::Hash;
use crate::inode::{ENTRIES, encode_tree, encode_values, hashed_flat, index};
use crate::tezos::{Kind, contents_hash, encode_node};

/// Supplies the parts of a tree that a partial tree does not hold yet:
/// what a store implements to produce proofs. A `handle` is the store's own
/// name for a part, given when the part was handed out.
pub trait Reveal {
    /// The root of the directory `handle`: every entry when it has at most
    /// 256 of them, its depth-0 tree inode otherwise.
    fn dir(&self, handle: u64) -> Result<Revealed, String>;
    /// The inode `handle` below a directory's root, at `depth` ≥ 1.
    fn inode(&self, handle: u64, depth: u32) -> Result<Body, String>;
    /// The bytes of the contents `handle`.
    fn value(&self, handle: u64) -> Result<Vec<u8>, String>;
}

/// A directory's root as a [`Reveal`] gives it.
pub enum Revealed {
    /// All entries, sorted by step: a directory of at most 256 entries.
    Entries(Vec<(Vec<u8>, Entry)>),
    /// The tree inode at depth 0 of a larger directory.
    Root(Body),
}

/// What a directory entry (or a whole tree) is.
#[derive(Clone)]
pub enum Entry {
    Contents(Rc<Contents>),
    /// A directory, by the cell of its root inode (depth 0).
    Dir(Rc<Cell>),
}

impl Entry {
    /// A contents known by its hash, which `handle` can reveal.
    pub fn blinded_contents(hash: Hash, handle: Option<u64>) -> Entry {
        Entry::Contents(Rc::new(Contents { hash: OnceCell::from(hash), bytes: OnceCell::new(), handle }))
    }

    /// A contents known by its bytes.
    pub fn contents(bytes: &[u8]) -> Entry {
        Entry::Contents(Rc::new(Contents { hash: OnceCell::new(), bytes: OnceCell::from(Rc::from(bytes)), handle: None }))
    }

    /// A directory known by its hash, which `handle` can reveal.
    pub fn blinded_dir(hash: Hash, handle: Option<u64>) -> Entry {
        Entry::Dir(Cell::blinded(hash, handle))
    }

    /// The empty directory.
    pub fn empty_dir() -> Entry {
        Entry::Dir(Cell::of_body(Body::Values(Vec::new())))
    }

    pub fn kind(&self) -> Kind {
        match self {
            Entry::Contents(_) => Kind::Contents,
            Entry::Dir(_) => Kind::Dir,
        }
    }
}

/// A contents value: its hash, its bytes, or both.
pub struct Contents {
    pub(crate) hash: OnceCell<Hash>,
    pub(crate) bytes: OnceCell<Rc<[u8]>>,
    handle: Option<u64>,
}

/// An inode: its hash (the directory hash at depth 0), its body, or both.
pub struct Cell {
    pub(crate) hash: OnceCell<Hash>,
    pub(crate) body: OnceCell<Body>,
    handle: Option<u64>,
}

impl Cell {
    /// An inode known by its hash, which `handle` can reveal.
    pub fn blinded(hash: Hash, handle: Option<u64>) -> Rc<Cell> {
        Rc::new(Cell { hash: OnceCell::from(hash), body: OnceCell::new(), handle })
    }

    pub(crate) fn of_body(body: Body) -> Rc<Cell> {
        Rc::new(Cell { hash: OnceCell::new(), body: OnceCell::from(body), handle: None })
    }

    /// The body, if known (revealed, or never blinded).
    pub fn known_body(&self) -> Option<&Body> {
        self.body.get()
    }
}

/// The body of an inode.
pub enum Body {
    /// At most 32 entries, sorted by step, unique.
    Values(Vec<(Vec<u8>, Entry)>),
    /// More than 32 entries below, spread by `index(depth, step)`.
    Tree { depth: u32, len: u64, children: Box<[Option<Rc<Cell>>; ENTRIES]> },
}

impl Body {
    pub fn len(&self) -> u64 {
        match self {
            Body::Values(entries) => entries.len() as u64,
            Body::Tree { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Deepest inode a partial tree holds: a tree inode at depth `d` needs
/// more than 32 names agreeing on `d` indices of 5 bits, so real
/// directories stay far below this; names crafted to collide at every depth
/// are an error here, not a recursion without end (irmin bounds it too).
pub const MAX_INODE_DEPTH: u32 = 64;

/// The canonical trie at `depth` of entries sorted by step.
pub fn build(depth: u32, entries: Vec<(Vec<u8>, Entry)>) -> Result<Body, ProofError> {
    if entries.len() <= ENTRIES {
        return Ok(Body::Values(entries));
    }
    if depth >= MAX_INODE_DEPTH {
        return Err(ProofError::Malformed(format!("more than {ENTRIES} names colliding down to inode depth {depth}")));
    }
    let len = entries.len() as u64;
    let mut buckets: Vec<Vec<(Vec<u8>, Entry)>> = (0..ENTRIES).map(|_| Vec::new()).collect();
    for (step, entry) in entries {
        buckets[index(depth, &step)].push((step, entry));
    }
    let mut children: Box<[Option<Rc<Cell>>; ENTRIES]> = Box::new(std::array::from_fn(|_| None));
    for (i, bucket) in buckets.into_iter().enumerate() {
        if !bucket.is_empty() {
            children[i] = Some(Cell::of_body(build(depth + 1, bucket)?));
        }
    }
    Ok(Body::Tree { depth, len, children })
}

/// How parts of a tree are reached: through a [`Reveal`] when producing a
/// proof, not at all when verifying one.
#[derive(Clone, Copy)]
pub(crate) struct Access<'r> {
    pub reveal: Option<&'r dyn Reveal>,
}

impl<'r> Access<'r> {
    fn blinded(&self, what: &str, path: &[&[u8]]) -> ProofError {
        ProofError::Blinded { what: what.to_string(), path: show_path(path) }
    }

    /// The body of `cell`, an inode at `depth` (a directory root at 0).
    pub fn body<'c>(&self, cell: &'c Cell, depth: u32, path: &[&[u8]]) -> Result<&'c Body, ProofError> {
        if let Some(body) = cell.body.get() {
            return Ok(body);
        }
        let (Some(reveal), Some(handle)) = (self.reveal, cell.handle) else {
            let what = if depth == 0 { "the directory" } else { "an inode of the directory" };
            return Err(self.blinded(what, path));
        };
        let body = if depth == 0 {
            match reveal.dir(handle).map_err(ProofError::Unavailable)? {
                Revealed::Entries(entries) => {
                    if !hashed_flat(entries.len() as u64) || !sorted(&entries) {
                        return Err(ProofError::Unavailable("revealed directory entries are unsorted or too many".into()));
                    }
                    build(0, entries)?
                }
                Revealed::Root(body @ Body::Tree { depth: 0, len, .. }) if !hashed_flat(len) => body,
                Revealed::Root(_) => return Err(ProofError::Unavailable("revealed a directory root that is not one".into())),
            }
        } else {
            match reveal.inode(handle, depth).map_err(ProofError::Unavailable)? {
                Body::Tree { depth: d, len, .. } if d != depth || len <= ENTRIES as u64 => {
                    return Err(ProofError::Unavailable(format!(
                        "revealed a tree inode of {len} entries at depth {d}, not {depth}"
                    )));
                }
                Body::Values(entries) if entries.len() > ENTRIES || !sorted(&entries) => {
                    return Err(ProofError::Unavailable("revealed a value inode unsorted or too large".into()));
                }
                body => body,
            }
        };
        Ok(cell.body.get_or_init(|| body))
    }

    /// The bytes of a contents.
    pub fn bytes(&self, contents: &Contents, path: &[&[u8]]) -> Result<Rc<[u8]>, ProofError> {
        if let Some(bytes) = contents.bytes.get() {
            return Ok(bytes.clone());
        }
        let (Some(reveal), Some(handle)) = (self.reveal, contents.handle) else {
            return Err(self.blinded("the value", path));
        };
        let bytes: Rc<[u8]> = reveal.value(handle).map_err(ProofError::Unavailable)?.into();
        if let Some(hash) = contents.hash.get()
            && contents_hash(&bytes) != *hash
        {
            return Err(ProofError::Unavailable(format!("revealed value at {} does not match its hash", show_path(path))));
        }
        Ok(contents.bytes.get_or_init(|| bytes).clone())
    }

    // ------------------------------------------------------------ hashing

    pub fn entry_hash(&self, entry: &Entry, path: &[&[u8]]) -> Result<Hash, ProofError> {
        match entry {
            Entry::Contents(c) => match c.hash.get() {
                Some(h) => Ok(*h),
                None => {
                    let bytes = self.bytes(c, path)?;
                    Ok(*c.hash.get_or_init(|| contents_hash(&bytes)))
                }
            },
            Entry::Dir(cell) => self.dir_hash(cell, path),
        }
    }

    pub fn kinded_hash(&self, entry: &Entry) -> Result<KindedHash, ProofError> {
        let hash = self.entry_hash(entry, &[])?;
        Ok(match entry {
            Entry::Contents(_) => KindedHash::Value(hash),
            Entry::Dir(_) => KindedHash::Node(hash),
        })
    }

    /// The Tezos hash of the directory whose root is `cell`.
    pub fn dir_hash(&self, cell: &Cell, path: &[&[u8]]) -> Result<Hash, ProofError> {
        if let Some(hash) = cell.hash.get() {
            return Ok(*hash);
        }
        let body = self.body(cell, 0, path)?;
        let hash = match body {
            // A value inode is already sorted: hashed without a copy.
            Body::Values(entries) => self.node_hash(entries, path)?,
            Body::Tree { len, .. } if hashed_flat(*len) => self.node_hash(&self.entries(body, path)?, path)?,
            Body::Tree { .. } => self.inode_body_hash(body, path)?,
        };
        Ok(*cell.hash.get_or_init(|| hash))
    }

    /// The flat hash of a directory of at most 256 entries, sorted.
    fn node_hash(&self, entries: &[(Vec<u8>, Entry)], path: &[&[u8]]) -> Result<Hash, ProofError> {
        let hashes = self.child_hashes(entries, path)?;
        let mut buf = Vec::with_capacity(8 + 80 * entries.len());
        encode_node(&mut buf, entries.len(), entries.iter().zip(&hashes).map(|((s, e), h)| (&s[..], e.kind(), h)));
        Ok(Hash::of_bytes(&buf))
    }

    /// The hashes of entries; the path of an entry, for an error, is built
    /// only for an entry whose hash is not known yet.
    fn child_hashes(&self, entries: &[(Vec<u8>, Entry)], path: &[&[u8]]) -> Result<Vec<Hash>, ProofError> {
        entries
            .iter()
            .map(|(step, entry)| {
                let known = match entry {
                    Entry::Contents(c) => c.hash.get(),
                    Entry::Dir(cell) => cell.hash.get(),
                };
                match known {
                    Some(hash) => Ok(*hash),
                    None => self.entry_hash(entry, &extend(path, step)),
                }
            })
            .collect()
    }

    pub fn inode_hash(&self, cell: &Cell, depth: u32, path: &[&[u8]]) -> Result<Hash, ProofError> {
        if let Some(hash) = cell.hash.get() {
            return Ok(*hash);
        }
        let hash = self.inode_body_hash(self.body(cell, depth, path)?, path)?;
        Ok(*cell.hash.get_or_init(|| hash))
    }

    fn inode_body_hash(&self, body: &Body, path: &[&[u8]]) -> Result<Hash, ProofError> {
        let mut buf = Vec::new();
        match body {
            Body::Values(entries) => {
                let hashes = self.child_hashes(entries, path)?;
                encode_values(&mut buf, entries.len(), entries.iter().zip(&hashes).map(|((s, e), h)| (&s[..], e.kind(), h)));
            }
            Body::Tree { depth, len, children } => {
                let mut pointers = Vec::with_capacity(ENTRIES);
                for (i, child) in children.iter().enumerate() {
                    if let Some(child) = child {
                        pointers.push((i, self.inode_hash(child, depth + 1, path)?));
                    }
                }
                encode_tree(&mut buf, *depth, *len, pointers.iter().map(|(i, h)| (*i, h)));
            }
        }
        Ok(Hash::of_bytes(&buf))
    }

    // ------------------------------------------------------------ reading

    /// Every entry below `body`, sorted by step.
    pub fn entries(&self, body: &Body, path: &[&[u8]]) -> Result<Vec<(Vec<u8>, Entry)>, ProofError> {
        fn walk(a: &Access<'_>, body: &Body, path: &[&[u8]], out: &mut Vec<(Vec<u8>, Entry)>) -> Result<(), ProofError> {
            match body {
                Body::Values(entries) => out.extend(entries.iter().cloned()),
                Body::Tree { depth, children, .. } => {
                    for child in children.iter().flatten() {
                        walk(a, a.body(child, depth + 1, path)?, path, out)?;
                    }
                }
            }
            Ok(())
        }
        let mut out = Vec::new();
        walk(self, body, path, &mut out)?;
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The entry `step` of the directory `dir`.
    pub fn find_step(&self, dir: &Cell, step: &[u8], path: &[&[u8]]) -> Result<Option<Entry>, ProofError> {
        let mut body = self.body(dir, 0, path)?;
        loop {
            match body {
                Body::Values(entries) => {
                    return Ok(entries.binary_search_by(|(s, _)| s[..].cmp(step)).ok().map(|i| entries[i].1.clone()));
                }
                Body::Tree { depth, children, .. } => match &children[index(*depth, step)] {
                    None => return Ok(None),
                    Some(child) => body = self.body(child, depth + 1, path)?,
                },
            }
        }
    }

    // ------------------------------------------------------------ updates

    /// The inode `cell` at `depth` with `step` set to `entry`, and whether
    /// the entry is new.
    pub fn set(
        &self,
        cell: &Cell,
        depth: u32,
        step: &[u8],
        entry: Entry,
        path: &[&[u8]],
    ) -> Result<(Rc<Cell>, bool), ProofError> {
        match self.body(cell, depth, path)? {
            Body::Values(entries) => {
                let mut entries = entries.clone();
                let added = match entries.binary_search_by(|(s, _)| s[..].cmp(step)) {
                    Ok(i) => {
                        entries[i].1 = entry;
                        false
                    }
                    Err(i) => {
                        entries.insert(i, (step.to_vec(), entry));
                        true
                    }
                };
                Ok((Cell::of_body(build(depth, entries)?), added))
            }
            Body::Tree { len, children, .. } => {
                let mut children = children.clone();
                let slot = &mut children[index(depth, step)];
                let added = match slot {
                    None => {
                        *slot = Some(Cell::of_body(Body::Values(vec![(step.to_vec(), entry)])));
                        true
                    }
                    Some(child) => {
                        let (new, added) = self.set(child, depth + 1, step, entry, path)?;
                        *slot = Some(new);
                        added
                    }
                };
                Ok((Cell::of_body(Body::Tree { depth, len: len + u64::from(added), children }), added))
            }
        }
    }

    /// The inode `cell` at `depth` without `step`, or `None` when it has no
    /// such entry. The result may be empty.
    pub fn remove(&self, cell: &Cell, depth: u32, step: &[u8], path: &[&[u8]]) -> Result<Option<Rc<Cell>>, ProofError> {
        match self.body(cell, depth, path)? {
            Body::Values(entries) => {
                let Ok(i) = entries.binary_search_by(|(s, _)| s[..].cmp(step)) else { return Ok(None) };
                let mut entries = entries.clone();
                entries.remove(i);
                Ok(Some(Cell::of_body(Body::Values(entries))))
            }
            Body::Tree { len, children, .. } => {
                let i = index(depth, step);
                let Some(child) = &children[i] else { return Ok(None) };
                let Some(new_child) = self.remove(child, depth + 1, step, path)? else { return Ok(None) };
                let mut children = children.clone();
                let emptied = new_child.body.get().is_some_and(Body::is_empty);
                children[i] = if emptied { None } else { Some(new_child) };
                let body = Body::Tree { depth, len: len - 1, children };
                if len - 1 <= ENTRIES as u64 {
                    // Back to a value inode: every sibling is needed.
                    return Ok(Some(Cell::of_body(Body::Values(self.entries(&body, path)?))));
                }
                Ok(Some(Cell::of_body(body)))
            }
        }
    }
}

fn sorted(entries: &[(Vec<u8>, Entry)]) -> bool {
    entries.windows(2).all(|w| w[0].0 < w[1].0)
}

fn extend<'a>(path: &[&'a [u8]], step: &'a [u8]) -> Vec<&'a [u8]> {
    let mut out = path.to_vec();
    out.push(step);
    out
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
/// Octez operations on a [`Entry`] reached through an [`Access`].
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
        self.access.entry_hash(entry, &[])
    }

    /// The hash of an inode at `depth` ≥ 1 below a directory root.
    pub fn inode_hash(&self, cell: &Cell, depth: u32) -> Result<Hash, ProofError> {
        self.access.inode_hash(cell, depth, &[])
    }

    /// The root entry: a directory or a contents.
    pub fn root(&self) -> &Entry {
        &self.root
    }

    /// The Tezos hash of the tree, with its kind.
    pub fn kinded_hash(&self) -> Result<KindedHash, ProofError> {
        self.access.kinded_hash(&self.root)
    }

    /// The Tezos hash of the tree.
    pub fn hash(&self) -> Result<Hash, ProofError> {
        Ok(self.kinded_hash()?.hash())
    }

    fn get(&self, path: &[&[u8]]) -> Result<Option<Entry>, ProofError> {
        let mut current = self.root.clone();
        for (n, step) in path.iter().enumerate() {
            let Entry::Dir(cell) = &current else { return Ok(None) };
            match self.access.find_step(cell, step, &path[..n])? {
                Some(entry) => current = entry,
                None => return Ok(None),
            }
        }
        Ok(Some(current))
    }

    /// The contents at `path`, if `path` holds a contents.
    pub fn find<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<Option<Vec<u8>>, ProofError> {
        let path = steps(path)?;
        match self.get(&path)? {
            Some(Entry::Contents(c)) => Ok(Some(self.access.bytes(&c, &path)?.to_vec())),
            _ => Ok(None),
        }
    }

    /// True if `path` holds a contents (whose bytes are not read).
    pub fn mem<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<bool, ProofError> {
        Ok(matches!(self.get(&steps(path)?)?, Some(Entry::Contents(_))))
    }

    /// True if `path` holds anything.
    pub fn mem_tree<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<bool, ProofError> {
        Ok(self.get(&steps(path)?)?.is_some())
    }

    /// The kind and hash of what `path` holds, without reading it.
    pub fn find_hash<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<Option<(Kind, Hash)>, ProofError> {
        let path = steps(path)?;
        match self.get(&path)? {
            Some(entry) => Ok(Some((entry.kind(), self.access.entry_hash(&entry, &path)?))),
            None => Ok(None),
        }
    }

    /// Number of entries of the directory at `path` (0 if it is not one).
    pub fn length<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<u64, ProofError> {
        let path = steps(path)?;
        match self.get(&path)? {
            Some(Entry::Dir(cell)) => Ok(self.access.body(&cell, 0, &path)?.len()),
            _ => Ok(0),
        }
    }

    /// The names and kinds of the entries of the directory at `path`,
    /// sorted by name (empty if it is not a directory).
    pub fn list<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<Vec<(Vec<u8>, Kind)>, ProofError> {
        let path = steps(path)?;
        let Some(Entry::Dir(cell)) = self.get(&path)? else { return Ok(Vec::new()) };
        let body = self.access.body(&cell, 0, &path)?;
        Ok(self.access.entries(body, &path)?.into_iter().map(|(step, entry)| (step, entry.kind())).collect())
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
        if new.is_none() && self.get(path)?.is_none() {
            return Ok(());
        }
        let root = match &self.root {
            Entry::Dir(cell) => cell.clone(),
            Entry::Contents(_) => Cell::of_body(Body::Values(Vec::new())),
        };
        self.root = Entry::Dir(self.update_dir(&root, path, 0, new)?);
        Ok(())
    }

    /// The directory `dir` with the path below it (from `path[at]`) set to
    /// `new`, or removed. The result may be empty.
    fn update_dir(&self, dir: &Rc<Cell>, path: &[&[u8]], at: usize, new: Option<Entry>) -> Result<Rc<Cell>, ProofError> {
        let a = &self.access;
        let step = path[at];
        let here = &path[..at];
        if at + 1 == path.len() {
            return match new {
                Some(entry) => Ok(a.set(dir, 0, step, entry, here)?.0),
                None => Ok(a.remove(dir, 0, step, here)?.unwrap_or_else(|| dir.clone())),
            };
        }
        let sub = match a.find_step(dir, step, here)? {
            Some(Entry::Dir(sub)) => sub,
            // A contents on the way, or nothing: a new directory goes there.
            _ => Cell::of_body(Body::Values(Vec::new())),
        };
        let sub = self.update_dir(&sub, path, at + 1, new)?;
        if a.body(&sub, 0, &path[..=at])?.is_empty() {
            Ok(a.remove(dir, 0, step, here)?.unwrap_or_else(|| dir.clone()))
        } else {
            Ok(a.set(dir, 0, step, Entry::Dir(sub), here)?.0)
        }
    }
}

fn steps<S: AsRef<[u8]>>(path: &[S]) -> Result<Vec<&[u8]>, ProofError> {
    if path.len() > crate::trace::MAX_KEY_STEPS {
        return Err(ProofError::InvalidPath(format!("a path of {} steps (at most {})", path.len(), crate::trace::MAX_KEY_STEPS)));
    }
    Ok(path.iter().map(|s| s.as_ref()).collect())
}
