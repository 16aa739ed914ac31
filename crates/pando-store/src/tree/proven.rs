//! Trees of what a verified proof shows: a [`Tree`] holding the parts a
//! tree proof or a stream proof reveals, in memory, and a blinded pointer
//! for each part it hides, served by a [`Source`] that refuses to load
//! them ("the proof blinds the directory at /a/b").
//!
//! The store's trie already carries the hash of what a stored pointer
//! names (`Ptr::Stored`, `Leaf::Blob`), so a blinded part is a stored
//! pointer whose offset is an index into this source's table of blinded
//! parts: hashing never loads it, and reading it is the error that names
//! its path.
//!
//! Invariants:
//! - Only a partial tree checked against its hash comes in (`pando_core`'s
//!   [`verify_tree_proof_bytes`], [`verify_stream_proof_bytes`]), and the
//!   tree made of it hashes to the proof's `before` (checked once made;
//!   tested by `tree_proofs_verify_into_a_tree_of_what_they_show`).
//! - Reading a blinded part is an [`Error::Proof`] of
//!   [`ProofError::Blinded`], never an answer: the source loads nothing,
//!   and each blinded pointer's offset names a hidden part (asserted in
//!   `refuse`).
//! - The source is an instance of its own: such a tree cannot be grafted
//!   into a store's tree nor committed ([`Error::ForeignTree`]), so a
//!   blinded pointer's offset never reaches a pack (tested by
//!   `a_proofs_tree_updates_in_memory_and_stays_apart_from_stores`).
//! - Inodes the proof shares (a stream's tree has one node per hash) stay
//!   shared: the tree's size is the proof's (tested by
//!   `inodes_a_stream_shares_stay_shared`).

use std::collections::HashMap;
use std::sync::Arc;

use pando_core::Hash;
use pando_core::dir::{self, Body, Child as PChild, Pointers, Values};
use pando_core::proof::partial::{Cell, Entry, Inode as PInode, show_path};
use pando_core::proof::stream::Path;
use pando_core::proof::{Encoding, KindedHash, ProofError, Proven, verify_stream_proof_bytes, verify_tree_proof_bytes};

use super::flat::FlatCache;
use super::{Refs, Source, Tree};
use crate::error::{Error, Result};
use crate::node::{self, Child, Inode, Leaf, Loader, Ptr, Value};
use crate::tracer::TraceSink;

/// A tree a proof shows, checked against the hash it is about.
#[derive(Clone)]
pub struct ProvenTree {
    /// The tree: what the proof reveals; reading the rest is an error.
    pub tree: Tree,
    /// The proof's `before`: the kind and hash of `tree`.
    pub before: KindedHash,
    /// The proof's `after`, unchecked: what the computation the proof is
    /// of leaves (for a proof of reads, `before` again).
    pub after: KindedHash,
}

/// Decodes the tree proof `bytes` (Octez's `Proof.tree Proof.t` in
/// `encoding`), checks it against `root`, the hash of the tree it is about
/// (its `before`), and returns the tree it shows.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// use pando_core::proof::Encoding;
/// use pando_store::{CommitMeta, Options, Store};
///
/// let store = Store::open(dir.path(), Options::default())?;
/// let tree = store.empty_tree().add(&["a", "b"], b"1")?.add(&["c"], b"2")?;
/// let commit = store.commit(&tree, CommitMeta { parents: &[], date: 1_600_000_000, author: "Tezos", message: "block 0" })?;
/// let bytes = store.produce_tree_proof_of_paths(&commit, &[&["a", "b"][..]], Encoding::V2)?;
/// let proven = pando_store::verify_tree_proof(Encoding::V2, &bytes, &tree.hash()?)?;
/// assert_eq!(proven.tree.find(&["a", "b"])?.as_deref(), Some(&b"1"[..]));
/// assert!(proven.tree.find(&["c"]).is_err(), "not read, so blinded");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn verify_tree_proof(encoding: Encoding, bytes: &[u8], root: &Hash) -> Result<ProvenTree> {
    proven_tree(verify_tree_proof_bytes(encoding, bytes, root)?)
}

/// Decodes the stream proof `bytes` (Octez's `Proof.stream Proof.t` in
/// `encoding`), checks it against `root` by reading `paths` in order as
/// irmin's `find` does, and returns the tree of what the reads loaded.
pub fn verify_stream_proof(encoding: Encoding, bytes: &[u8], root: &Hash, paths: &[Path]) -> Result<ProvenTree> {
    proven_tree(verify_stream_proof_bytes(encoding, bytes, root, paths)?)
}

/// [`verify_stream_proof`] of the reads made so far: the tree of what
/// `paths` read from the first elements of the stream, and how many
/// elements are left (see `pando_core::proof::stream::verify_stream_reads`).
pub fn verify_stream_proof_reads(encoding: Encoding, bytes: &[u8], root: &Hash, paths: &[Path]) -> Result<(ProvenTree, usize)> {
    let (proven, unread) = pando_core::proof::verify_stream_reads_bytes(encoding, bytes, root, paths)?;
    Ok((proven_tree(proven)?, unread))
}

/// The store tree of a verified partial tree.
pub(crate) fn proven_tree(proven: Proven) -> Result<ProvenTree> {
    let mut making = Making { blinded: Vec::new(), inodes: HashMap::new(), values: HashMap::new() };
    let node = making.child(&proven.root, &mut Vec::new())?;
    let source: Arc<dyn Source> =
        Arc::new(Blinded { id: crate::store::fresh_instance_id(), parts: making.blinded, flat: FlatCache::new(0) });
    let tree = Tree::from_parts(node, Some(source), None, Refs::Unknown);
    let hash = tree.hash()?;
    let actual = match tree.kind() {
        pando_core::Kind::Contents => KindedHash::Value(hash),
        pando_core::Kind::Dir => KindedHash::Node(hash),
    };
    if actual != proven.before {
        return Err(ProofError::BeforeMismatch { expected: proven.before, actual }.into());
    }
    Ok(ProvenTree { tree, before: proven.before, after: proven.after })
}

/// A part the proof hides: what it is, and a path it is reached by.
struct Hidden {
    what: &'static str,
    path: String,
}

struct Making {
    blinded: Vec<Hidden>,
    /// The store's copy of each inode of the partial tree, by address:
    /// what the proof shares stays shared.
    inodes: HashMap<usize, Arc<Inode>>,
    /// Values by hash, each held once.
    values: HashMap<Hash, Leaf>,
}

impl Making {
    fn hide(&mut self, what: &'static str, path: &[Vec<u8>]) -> u64 {
        let steps: Vec<&[u8]> = path.iter().map(Vec::as_slice).collect();
        self.blinded.push(Hidden { what, path: show_path(&steps) });
        self.blinded.len() as u64 - 1
    }

    fn child(&mut self, entry: &Entry, path: &mut Vec<Vec<u8>>) -> Result<Child> {
        Ok(match entry {
            PChild::Contents(c) => match (c.known_bytes(), c.known_hash()) {
                (Some(bytes), _) => {
                    let leaf = Leaf::of_bytes(bytes);
                    match &leaf {
                        Leaf::Value(value) => Child::Contents(self.values.entry(value.hash()).or_insert(leaf.clone()).clone()),
                        _ => Child::Contents(leaf),
                    }
                }
                (None, Some(hash)) => Child::Contents(Leaf::Blob { offset: self.hide("the value", path), hash }),
                (None, None) => return Err(ProofError::Malformed("a contents with neither bytes nor hash".into()).into()),
            },
            PChild::Dir(cell) => Child::Dir(self.ptr(cell, 0, path)?),
        })
    }

    fn ptr(&mut self, cell: &Arc<Cell>, depth: u32, path: &mut Vec<Vec<u8>>) -> Result<Ptr> {
        let Some(inode) = cell.known_inode() else {
            let hash = cell.blinded_hash().ok_or_else(|| ProofError::Malformed("an inode with neither body nor hash".into()))?;
            let what = if depth == 0 { "the directory" } else { "an inode of the directory" };
            return Ok(Ptr::stored(self.hide(what, path), hash));
        };
        let inode = self.inode(inode, path)?;
        Ok(match cell.blinded_hash() {
            Some(hash) => Ptr::mem_hashed(inode, hash),
            None => Ptr::mem(inode),
        })
    }

    fn inode(&mut self, inode: &Arc<PInode>, path: &mut Vec<Vec<u8>>) -> Result<Arc<Inode>> {
        let key = Arc::as_ptr(inode) as usize;
        if let Some(made) = self.inodes.get(&key) {
            return Ok(made.clone());
        }
        let made = match &inode.body {
            Body::Values(values) => {
                let mut entries = Vec::with_capacity(values.len());
                for (step, entry) in values.iter() {
                    path.push(step.to_vec());
                    let child = self.child(entry, path);
                    path.pop();
                    entries.push((step, child?));
                }
                Inode::values(Values::from_sorted(entries))
            }
            Body::Tree(pointers) => {
                let mut children = Vec::with_capacity(pointers.count());
                for (i, cell) in pointers.iter() {
                    children.push((i, self.ptr(cell, pointers.depth + 1, path)?));
                }
                Arc::new(dir::Inode::new(Body::Tree(Pointers::new(pointers.depth, pointers.len, children))))
            }
        };
        self.inodes.insert(key, made.clone());
        Ok(made)
    }
}

/// The source of a proof's tree: it has nothing to load, and says which
/// part of the proof a read needed.
struct Blinded {
    id: u64,
    parts: Vec<Hidden>,
    flat: FlatCache,
}

impl Blinded {
    fn refuse(&self, offset: u64) -> Error {
        // Only `Making::hide` makes the stored pointers of this source.
        let part = self.parts.get(offset as usize);
        assert!(part.is_some(), "a blinded pointer's offset {offset} names one of the proof's hidden parts");
        match part {
            Some(part) => ProofError::Blinded { what: part.what.to_string(), path: part.path.clone() }.into(),
            None => Error::Invalid(format!("a proof's tree has no part {offset}")),
        }
    }
}

impl Loader for Blinded {
    fn load_inode(&self, offset: u64, _hash: &Hash, _depth: u32) -> Result<Arc<Inode>> {
        Err(self.refuse(offset))
    }

    fn load_blob(&self, offset: u64, _hash: &Hash) -> Result<Arc<Value>> {
        Err(self.refuse(offset))
    }
}

impl Source for Blinded {
    fn instance_id(&self) -> u64 {
        self.id
    }

    fn trace_sink(&self) -> Option<&dyn TraceSink> {
        None
    }

    fn stage(&self, _bytes: &[u8]) -> Result<Option<node::Leaf>> {
        // Values added to a proof's tree stay in memory.
        Ok(None)
    }

    fn give_back_kept(&self, _root: Arc<Inode>) {}

    fn flat(&self) -> &FlatCache {
        &self.flat
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CommitMeta, Options, Store};

    /// Two directories with the same contents are one node of a stream
    /// proof, and one inode of the tree made of it.
    #[test]
    fn inodes_a_stream_shares_stay_shared() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Options::default()).unwrap();
        let tree = store.empty_tree().add(&["a", "x"], b"1").unwrap().add(&["b", "x"], b"1").unwrap();
        let commit = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "shared" }).unwrap();
        let paths: Vec<Path> = vec![vec![b"a".to_vec(), b"x".to_vec()], vec![b"b".to_vec(), b"x".to_vec()]];
        let bytes = store.produce_stream_proof(&commit, &paths, Encoding::V1).unwrap();
        let proven = verify_stream_proof(Encoding::V1, &bytes, &tree.hash().unwrap(), &paths).unwrap();
        let inode = |step: &str| match proven.tree.get(&[step]).unwrap() {
            Some(Child::Dir(Ptr::Mem(inode, _))) => inode,
            _ => panic!("/{step} is a directory in memory"),
        };
        assert!(Arc::ptr_eq(&inode("a"), &inode("b")), "/a and /b are one inode");
        assert_eq!(proven.tree.find(&["b", "x"]).unwrap().as_deref(), Some(&b"1"[..]));
    }
}
