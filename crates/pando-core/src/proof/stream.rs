//! Stream proofs of reading paths: Octez's `Proof.stream Proof.t`, as
//! irmin 3.7.2 produces and verifies them (`Tree.produce_stream`,
//! `Tree.verify_stream`, with irmin-pack's inodes).
//!
//! A stream is the list of the objects a computation loaded from the
//! store, in the order it loaded them, each the first time its hash was
//! met: a contents value ([`Elt::Value`]), a directory of at most 256
//! entries or a value inode (every entry with its kinded hash,
//! [`Elt::Node`]), a tree inode with its children's hashes
//! ([`Elt::Inode`]). The verifier replays the same computation on a tree
//! that is only the root's hash, and takes the next element whenever the
//! computation loads an object whose hash it has not met, checking that
//! the element hashes to it.
//!
//! The computation here is reading paths, in order, as irmin's
//! `Tree.find` does: the directories on the way are loaded, then the
//! entry's parent, and the value if the entry is a contents (a directory
//! at the end of a path is not loaded: its hash is in its parent). How
//! irmin orders the loads, read in its sources (`src/irmin/proof.ml`'s
//! `Env`, `src/irmin/tree.ml`'s `find_tree`/`find`, and
//! `src/irmin-pack/inode.ml`'s `Val.head`, `seq` and `Proof.of_proof`):
//! - a directory is loaded as one element: all its entries if it has at
//!   most 256 (irmin's `head` of a "stable" node), else its root inode;
//!   a directory of 33 to 256 entries is kept as a trie of inodes, and
//!   `head` lists its entries by loading every inode below the root, in
//!   pre-order by index: those inodes follow its element in the stream
//!   (the verifier rebuilds the directory shallow and loads them again);
//! - finding a step in a larger directory loads the inodes on the step's
//!   index path, one element each;
//! - a hash is streamed once: the producer keeps the set of hashes
//!   streamed, the verifier the objects it took, by hash;
//! - at the end, a tree inode with a single child that was itself loaded
//!   and has a single child is written as an extender
//!   ([`Elt::InodeExtender`]) down the chain of such inodes, whose own
//!   elements are dropped; the verifier rebuilds the chain in memory, so
//!   reaching the inodes inside it takes no element.
//!
//! Invariants:
//! - Verification never trusts an element: each is checked against the
//!   hash the computation expected before it is used, so a stream is
//!   accepted only if it is what the tree of hash `before` yields; a
//!   missing, extra, out-of-order or wrong element is a [`ProofError`].
//! - The tree returned shares one node per hash, so its size is linear in
//!   the stream's.
//! - No recursion deeper than a path's steps times [`MAX_DEPTH`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::ProofError;
use super::partial::{Cell, Entry, Partial, PartialTree, show_path};
use super::types::{Elt, ExtenderOf, InodeOf, KindedHash, STREAM32_VERSION, StreamProof};
use crate::dir::{self, Body, Child, Hold, MAX_DEPTH, Pointers, Resolve, Values, values_hash};
use crate::hash::Hash;
use crate::inode::{ENTRIES, Layout, STABLE_HASH, hashed_flat, index};
use crate::tezos::{Kind, contents_hash};

/// A path to read, as steps.
pub type Path = Vec<Vec<u8>>;

fn check_paths(paths: &[Path]) -> Result<(), ProofError> {
    if let Some(long) = paths.iter().find(|p| p.len() > crate::trace::MAX_KEY_STEPS) {
        return Err(ProofError::InvalidPath(format!("a path of {} steps (at most {})", long.len(), crate::trace::MAX_KEY_STEPS)));
    }
    Ok(())
}

fn kinded(kind: Kind, hash: Hash) -> KindedHash {
    match kind {
        Kind::Contents => KindedHash::Value(hash),
        Kind::Dir => KindedHash::Node(hash),
    }
}

// ---------------------------------------------------------------- producing

/// How a producer reads a contents' bytes.
pub type ValueOf<'a, H, E> = &'a dyn Fn(&<H as Hold>::Leaf) -> Result<Vec<u8>, E>;

/// The stream proof of reading `paths` in the tree `root` (a commit's
/// tree, resolved through `r`); `value` gives a contents' bytes.
pub fn produce_stream<H: Hold, R: Resolve<H> + ?Sized>(
    root: &Child<H>,
    r: &R,
    value: ValueOf<'_, H, R::Error>,
    paths: &[Path],
) -> Result<StreamProof, R::Error>
where
    R::Error: From<ProofError>,
{
    check_paths(paths)?;
    let before = kinded(root.kind(), dir::child_hash(root, r)?);
    let mut producer = Producer { r, value, seen: HashSet::new(), elts: Vec::new(), singletons: HashMap::new() };
    for path in paths {
        producer.read(root, path)?;
    }
    let state = post_process(producer.elts, &producer.singletons);
    Ok(StreamProof { version: STREAM32_VERSION, before, after: before, state })
}

/// The stream proof of reading `paths` in a partial tree that holds every
/// part the reads reach (a tree built in memory, or one a proof showed).
pub fn produce_stream_of_entry(root: &Entry, paths: &[Path]) -> Result<StreamProof, ProofError> {
    let access = super::partial::Access { reveal: None };
    let at = access.at(&[]);
    let value = |leaf: &Arc<super::partial::Contents>| Ok(at.bytes(leaf)?.to_vec());
    produce_stream(root, &at, &value, paths)
}

struct Producer<'a, H: Hold, R: Resolve<H> + ?Sized> {
    r: &'a R,
    value: ValueOf<'a, H, R::Error>,
    /// Hashes streamed already (irmin's `set`).
    seen: HashSet<Hash>,
    elts: Vec<(Hash, Elt)>,
    /// Tree inodes streamed with a single child, to that child.
    singletons: HashMap<Hash, (u8, Hash)>,
}

impl<H: Hold, R: Resolve<H> + ?Sized> Producer<'_, H, R>
where
    R::Error: From<ProofError>,
{
    /// Streams `elt` unless `hash` was.
    fn push(&mut self, hash: Hash, elt: impl FnOnce(&Self) -> Result<Elt, R::Error>) -> Result<(), R::Error> {
        if self.seen.insert(hash) {
            let elt = elt(self)?;
            if let Elt::Inode(InodeOf { proofs, .. }) = &elt
                && let [only] = proofs[..]
            {
                self.singletons.insert(hash, only);
            }
            self.elts.push((hash, elt));
        }
        Ok(())
    }

    fn read(&mut self, root: &Child<H>, path: &[Vec<u8>]) -> Result<(), R::Error> {
        let Some((last, dirs)) = path.split_last() else {
            return self.load_value(root);
        };
        let mut at = root.clone();
        for step in dirs {
            match self.find(&at, step)? {
                Some(child @ Child::Dir(_)) => at = child,
                _ => return Ok(()),
            }
        }
        if let Some(child) = self.find(&at, last)? {
            self.load_value(&child)?;
        }
        Ok(())
    }

    fn load_value(&mut self, child: &Child<H>) -> Result<(), R::Error> {
        if let Child::Contents(leaf) = child {
            let hash = self.r.leaf_hash(leaf)?;
            self.push(hash, |p| Ok(Elt::Value((p.value)(leaf)?)))?;
        }
        Ok(())
    }

    /// The entry `step` of the directory `dir` (nothing in a contents),
    /// streaming what irmin loads to find it.
    fn find(&mut self, dir: &Child<H>, step: &[u8]) -> Result<Option<Child<H>>, R::Error> {
        let Child::Dir(ptr) = dir else { return Ok(None) };
        let hash = dir::dir_ptr_hash(ptr, self.r)?;
        let root = dir::load(ptr, 0, self.r)?;
        if hashed_flat(root.len()) {
            if !self.seen.contains(&hash) {
                let entries = dir::collect_sorted(&root, self.r)?;
                let entries = entries
                    .iter()
                    .map(|(s, c)| Ok((s.to_vec(), kinded(c.kind(), dir::child_hash(c, self.r)?))))
                    .collect::<Result<Vec<_>, R::Error>>()?;
                self.push(hash, |_| Ok(Elt::Node(entries)))?;
                // `head` listed the entries through every inode below.
                self.seq(&root)?;
            }
            // Every inode below was loaded with the directory.
            return dir::find(&root, step, self.r);
        }
        self.push(hash, |p| p.inode_elt(&root))?;
        let mut inode = root;
        loop {
            let next = match &inode.body {
                Body::Values(values) => return Ok(values.search(step).ok().map(|i| values.child(i).clone())),
                Body::Tree(pointers) => {
                    let Some(ptr) = pointers.get(index(pointers.depth, step)) else { return Ok(None) };
                    self.load_inode(ptr, pointers.depth + 1)?
                }
            };
            inode = next;
        }
    }

    fn load_inode(&mut self, ptr: &H::Ptr, depth: u32) -> Result<Arc<dir::Inode<H>>, R::Error> {
        let hash = dir::inode_ptr_hash(ptr, depth, self.r)?;
        let inode = dir::load(ptr, depth, self.r)?;
        self.push(hash, |p| p.inode_elt(&inode))?;
        Ok(inode)
    }

    /// Loads every inode below `inode`, in pre-order by index (irmin-pack's
    /// `seq`).
    fn seq(&mut self, inode: &dir::Inode<H>) -> Result<(), R::Error> {
        if let Body::Tree(pointers) = &inode.body {
            for (_, ptr) in pointers.iter() {
                let child = self.load_inode(ptr, pointers.depth + 1)?;
                self.seq(&child)?;
            }
        }
        Ok(())
    }

    fn inode_elt(&self, inode: &dir::Inode<H>) -> Result<Elt, R::Error> {
        Ok(match &inode.body {
            Body::Values(values) => Elt::Node(
                values
                    .iter()
                    .map(|(s, c)| Ok((s.to_vec(), kinded(c.kind(), dir::child_hash(c, self.r)?))))
                    .collect::<Result<_, R::Error>>()?,
            ),
            Body::Tree(pointers) => Elt::Inode(InodeOf {
                length: pointers.len,
                proofs: pointers
                    .iter()
                    .map(|(i, p)| Ok((i as u8, dir::inode_ptr_hash(p, pointers.depth + 1, self.r)?)))
                    .collect::<Result<_, R::Error>>()?,
            }),
        })
    }
}

/// irmin's `post_processing`: a tree inode whose single child was streamed
/// as a single-child tree inode becomes an extender down the chain of
/// such inodes, whose elements are dropped (all but the chain's end).
fn post_process(elts: Vec<(Hash, Elt)>, singletons: &HashMap<Hash, (u8, Hash)>) -> Vec<Elt> {
    let mut skips = HashSet::new();
    let mut out = Vec::with_capacity(elts.len());
    for (hash, elt) in elts {
        if skips.contains(&hash) {
            continue;
        }
        let elt = match elt {
            Elt::Inode(InodeOf { length, proofs }) if proofs.len() == 1 => {
                let (first, mut end) = proofs[0];
                let mut segment = vec![first];
                // A chain of hashes cannot loop; the bound only guards
                // against a table that is not one.
                while let Some(&(i, next)) = singletons.get(&end).filter(|_| segment.len() <= MAX_DEPTH as usize) {
                    skips.insert(end);
                    segment.push(i);
                    end = next;
                }
                if segment.len() == 1 {
                    Elt::Inode(InodeOf { length, proofs })
                } else {
                    Elt::InodeExtender(ExtenderOf { length, segment, proof: end })
                }
            }
            other => other,
        };
        out.push(elt);
    }
    out
}

// ---------------------------------------------------------------- verifying

/// What the verifier took from the stream, by hash.
enum Obj {
    /// A directory of at most 256 entries, all of them.
    Flat(Vec<(Vec<u8>, KindedHash)>),
    /// A value inode below a directory's root.
    Values(Vec<(Vec<u8>, KindedHash)>),
    /// A tree inode (its depth is where it was met: its hash covers it).
    Tree { length: u64, children: Vec<(u8, Hash)> },
    /// A chain of single-child tree inodes, ending in `proof`.
    Chain { length: u64, segment: Vec<u8>, proof: Hash },
}

/// Checks `proof` against `root` (the hash of the tree it is about) by
/// reading `paths` in order, and returns the tree it shows: what the reads
/// loaded, the rest blinded.
pub fn verify_stream(proof: &StreamProof, root: &Hash, paths: &[Path]) -> Result<Entry, ProofError> {
    let (entry, unread) = verify_stream_reads(proof, root, paths)?;
    if unread > 0 {
        return Err(ProofError::StreamTooLong { unread });
    }
    Ok(entry)
}

/// [`verify_stream`] of the reads made so far: the first elements of the
/// stream are checked against the reads of `paths` as they are taken,
/// and the rest are left unread (their number is returned). A caller that
/// learns its reads one at a time (Octez's `verify_stream_proof` runs a
/// callback) answers each from the tree returned here, and checks with
/// [`verify_stream`] at the end that the whole stream was read.
pub fn verify_stream_reads(proof: &StreamProof, root: &Hash, paths: &[Path]) -> Result<(Entry, usize), ProofError> {
    check_paths(paths)?;
    if proof.version != STREAM32_VERSION {
        return Err(ProofError::UnsupportedVersion(proof.version));
    }
    if proof.before.hash() != *root {
        return Err(ProofError::WrongRoot { expected: root.to_string(), actual: proof.before.hash().to_string() });
    }
    if proof.after != proof.before {
        return Err(ProofError::AfterMismatch { expected: proof.after, actual: proof.before });
    }
    let mut v = Verifier { stream: &proof.state, next: 0, nodes: HashMap::new(), contents: HashMap::new(), path: Vec::new() };
    for path in paths {
        v.read(proof.before, path)?;
    }
    let unread = proof.state.len() - v.next;
    let entry = Shower { v: &v, entries: HashMap::new(), values: HashMap::new(), cells: HashMap::new() }.entry(proof.before)?;
    // Every object was checked against its hash as it was taken; the
    // tree they make must hash to `before`.
    let hash = PartialTree::of_entry(entry.clone()).kinded_hash()?;
    if hash != proof.before {
        return Err(ProofError::BeforeMismatch { expected: proof.before, actual: hash });
    }
    Ok((entry, unread))
}

struct Verifier<'a> {
    stream: &'a [Elt],
    next: usize,
    nodes: HashMap<Hash, Arc<Obj>>,
    contents: HashMap<Hash, Arc<[u8]>>,
    /// The path being read, for messages.
    path: Vec<Vec<u8>>,
}

fn mismatch(at: usize, reason: impl Into<String>) -> ProofError {
    ProofError::StreamMismatch { element: at, reason: reason.into() }
}

/// Strictly sorted entries, none longer than a step may be.
fn check_entries(at: usize, entries: &[(Vec<u8>, KindedHash)]) -> Result<(), ProofError> {
    if let Some(w) = entries.windows(2).find(|w| w[0].0 >= w[1].0) {
        return Err(mismatch(at, format!("entries not sorted: {} before {}", show_path(&[&w[0].0]), show_path(&[&w[1].0]))));
    }
    Ok(())
}

fn entry_hashes(entries: &[(Vec<u8>, KindedHash)]) -> impl Iterator<Item = (&[u8], Kind, &Hash)> {
    entries.iter().map(|(s, h)| {
        let kind = if matches!(h, KindedHash::Value(_)) { Kind::Contents } else { Kind::Dir };
        (
            s.as_slice(),
            kind,
            match h {
                KindedHash::Value(h) | KindedHash::Node(h) => h,
            },
        )
    })
}

fn tree_inode_hash(depth: u32, length: u64, children: &[(u8, Hash)]) -> Hash {
    dir::tree_hash(&mut Vec::new(), depth, length, children.iter().map(|(i, h)| (usize::from(*i), h)))
}

fn chain_hash(depth: u32, length: u64, segment: &[u8], proof: Hash) -> Hash {
    let mut hash = proof;
    for (k, i) in segment.iter().enumerate().rev() {
        hash = tree_inode_hash(depth + k as u32, length, &[(*i, hash)]);
    }
    hash
}

impl<'a> Verifier<'a> {
    fn here(&self) -> String {
        show_path(&self.path.iter().map(Vec::as_slice).collect::<Vec<_>>())
    }

    /// The next element, for an object of hash `hash` described by `what`.
    fn take(&mut self, what: &str, hash: &Hash) -> Result<(usize, &'a Elt), ProofError> {
        let at = self.next;
        let stream: &'a [Elt] = self.stream;
        let elt =
            stream.get(at).ok_or_else(|| ProofError::StreamTooShort { needed: format!("{what} {hash}"), path: self.here() })?;
        self.next += 1;
        Ok((at, elt))
    }

    fn read(&mut self, root: KindedHash, path: &[Vec<u8>]) -> Result<(), ProofError> {
        self.path.clear();
        let Some((last, dirs)) = path.split_last() else {
            return self.load_value(root);
        };
        let mut at = root;
        for step in dirs {
            match self.find(at, step)? {
                Some(child @ KindedHash::Node(_)) => at = child,
                _ => return Ok(()),
            }
            self.path.push(step.clone());
        }
        if let Some(child) = self.find(at, last)? {
            self.path.push(last.clone());
            self.load_value(child)?;
        }
        Ok(())
    }

    fn load_value(&mut self, entry: KindedHash) -> Result<(), ProofError> {
        let KindedHash::Value(hash) = entry else { return Ok(()) };
        if self.contents.contains_key(&hash) {
            return Ok(());
        }
        let (at, elt) = self.take("the value", &hash)?;
        let Elt::Value(bytes) = elt else { return Err(mismatch(at, format!("a value {hash} expected at {}", self.here()))) };
        if contents_hash(bytes) != hash {
            return Err(mismatch(at, format!("the value does not hash to {hash} (at {})", self.here())));
        }
        self.contents.insert(hash, Arc::from(bytes.as_slice()));
        Ok(())
    }

    fn find(&mut self, dir: KindedHash, step: &[u8]) -> Result<Option<KindedHash>, ProofError> {
        let KindedHash::Node(hash) = dir else { return Ok(None) };
        let mut obj = self.load_dir(hash)?;
        let mut depth = 0;
        loop {
            let next = match &*obj {
                Obj::Flat(entries) | Obj::Values(entries) => {
                    return Ok(entries.binary_search_by(|(s, _)| s.as_slice().cmp(step)).ok().map(|i| entries[i].1));
                }
                Obj::Tree { children, .. } => {
                    let i = index(depth, step) as u8;
                    let Some((_, child)) = children.iter().find(|(j, _)| *j == i) else { return Ok(None) };
                    depth += 1;
                    *child
                }
                Obj::Chain { segment, proof, .. } => {
                    for i in segment {
                        if index(depth, step) != usize::from(*i) {
                            return Ok(None);
                        }
                        depth += 1;
                    }
                    *proof
                }
            };
            obj = self.load_inode(next, depth)?;
        }
    }

    /// The directory of hash `hash` (irmin's `find_pnode`).
    fn load_dir(&mut self, hash: Hash) -> Result<Arc<Obj>, ProofError> {
        if let Some(obj) = self.nodes.get(&hash) {
            return Ok(obj.clone());
        }
        let (at, elt) = self.take("the directory", &hash)?;
        let (obj, actual) = match elt {
            Elt::Node(entries) => {
                check_entries(at, entries)?;
                if entries.len() > STABLE_HASH {
                    return Err(mismatch(at, format!("a directory of {} entries listed (at most {STABLE_HASH})", entries.len())));
                }
                let actual = values_hash(&mut Vec::new(), true, entries.len(), entry_hashes(entries));
                (Obj::Flat(entries.clone()), actual)
            }
            Elt::Inode(InodeOf { length, proofs }) => {
                if hashed_flat(*length) {
                    return Err(mismatch(
                        at,
                        format!("a directory root inode of {length} entries (more than {STABLE_HASH} needed)"),
                    ));
                }
                check_children(at, proofs)?;
                (Obj::Tree { length: *length, children: proofs.clone() }, tree_inode_hash(0, *length, proofs))
            }
            Elt::InodeExtender(ExtenderOf { length, segment, proof }) => {
                if hashed_flat(*length) {
                    return Err(mismatch(
                        at,
                        format!("a directory root extender of {length} entries (more than {STABLE_HASH} needed)"),
                    ));
                }
                check_segment(at, 0, segment)?;
                let obj = Obj::Chain { length: *length, segment: segment.clone(), proof: *proof };
                (obj, chain_hash(0, *length, segment, *proof))
            }
            Elt::Value(_) => {
                return Err(mismatch(at, format!("a value where the directory {hash} at {} was expected", self.here())));
            }
        };
        if actual != hash {
            return Err(mismatch(at, format!("the directory at {} hashes to {actual}, not {hash}", self.here())));
        }
        let obj = Arc::new(obj);
        self.nodes.insert(hash, obj.clone());
        if let Obj::Flat(entries) = &*obj
            && entries.len() > ENTRIES
        {
            // irmin rebuilds the directory with its inodes blinded, then
            // lists its entries (`head`), loading every inode below.
            self.seq_layout(entries)?;
        }
        Ok(obj)
    }

    /// Loads the inodes of a directory of 33 to 256 entries in pre-order.
    fn seq_layout(&mut self, entries: &[(Vec<u8>, KindedHash)]) -> Result<(), ProofError> {
        let blinded = entries
            .iter()
            .map(|(s, h)| {
                let e = match h {
                    KindedHash::Value(h) => Entry::blinded_contents(*h, None),
                    KindedHash::Node(h) => Entry::blinded_dir(*h, None),
                };
                (s.as_slice(), e)
            })
            .collect();
        let root = dir::build(Layout::TEZOS, 0, blinded)
            .ok_or_else(|| ProofError::Malformed("a directory whose steps collide too deep".into()))?;
        let Body::Tree(pointers) = &root.body else { return Ok(()) };
        let hasher = PartialTree::of_entry(Entry::empty_dir());
        let children =
            pointers.iter().map(|(i, cell)| Ok((i, hasher.inode_hash(cell, 1)?))).collect::<Result<Vec<_>, ProofError>>()?;
        for (_, hash) in children {
            let child = self.load_inode(hash, 1)?;
            self.seq(&child, 1)?;
        }
        Ok(())
    }

    fn seq(&mut self, obj: &Obj, depth: u32) -> Result<(), ProofError> {
        match obj {
            Obj::Flat(_) | Obj::Values(_) => Ok(()),
            Obj::Tree { children, .. } => {
                for (_, hash) in children {
                    let child = self.load_inode(*hash, depth + 1)?;
                    self.seq(&child, depth + 1)?;
                }
                Ok(())
            }
            Obj::Chain { segment, proof, .. } => {
                let depth = depth + segment.len() as u32;
                let child = self.load_inode(*proof, depth)?;
                self.seq(&child, depth)
            }
        }
    }

    /// The inode of hash `hash` at `depth` ≥ 1 (irmin's `find_recpnode`).
    fn load_inode(&mut self, hash: Hash, depth: u32) -> Result<Arc<Obj>, ProofError> {
        if let Some(obj) = self.nodes.get(&hash) {
            return Ok(obj.clone());
        }
        if depth > MAX_DEPTH {
            return Err(ProofError::Malformed(format!("an inode at depth {depth} (at most {MAX_DEPTH})")));
        }
        let (at, elt) = self.take("an inode of the directory", &hash)?;
        let (obj, actual) = match elt {
            Elt::Node(entries) => {
                check_entries(at, entries)?;
                if entries.is_empty() || entries.len() > ENTRIES {
                    return Err(mismatch(at, format!("a value inode of {} entries", entries.len())));
                }
                let actual = values_hash(&mut Vec::new(), false, entries.len(), entry_hashes(entries));
                (Obj::Values(entries.clone()), actual)
            }
            Elt::Inode(InodeOf { length, proofs }) => {
                check_children(at, proofs)?;
                (Obj::Tree { length: *length, children: proofs.clone() }, tree_inode_hash(depth, *length, proofs))
            }
            Elt::InodeExtender(ExtenderOf { length, segment, proof }) => {
                check_segment(at, depth, segment)?;
                let obj = Obj::Chain { length: *length, segment: segment.clone(), proof: *proof };
                (obj, chain_hash(depth, *length, segment, *proof))
            }
            Elt::Value(_) => return Err(mismatch(at, format!("a value where an inode {hash} at {} was expected", self.here()))),
        };
        if actual != hash {
            return Err(mismatch(at, format!("an inode at depth {depth} below {} hashes to {actual}, not {hash}", self.here())));
        }
        let obj = Arc::new(obj);
        self.nodes.insert(hash, obj.clone());
        Ok(obj)
    }
}

fn check_children(at: usize, proofs: &[(u8, Hash)]) -> Result<(), ProofError> {
    if proofs.is_empty() || proofs.iter().any(|(i, _)| usize::from(*i) >= ENTRIES) || proofs.windows(2).any(|w| w[0].0 >= w[1].0)
    {
        return Err(mismatch(at, "a tree inode without children, or with indices out of range or order"));
    }
    Ok(())
}

fn check_segment(at: usize, depth: u32, segment: &[u8]) -> Result<(), ProofError> {
    if segment.is_empty() || segment.iter().any(|i| usize::from(*i) >= ENTRIES) {
        return Err(mismatch(at, "an extender with an empty segment or an index out of range"));
    }
    if depth.saturating_add(segment.len() as u32) > MAX_DEPTH {
        return Err(mismatch(at, format!("an extender reaching below depth {MAX_DEPTH}")));
    }
    Ok(())
}

/// Builds the partial tree of what the verifier took, one node per hash.
struct Shower<'a, 'v> {
    v: &'a Verifier<'v>,
    entries: HashMap<Hash, Entry>,
    values: HashMap<Hash, Entry>,
    cells: HashMap<Hash, Arc<Cell>>,
}

impl Shower<'_, '_> {
    fn entry(&mut self, kinded: KindedHash) -> Result<Entry, ProofError> {
        Ok(match kinded {
            // One entry per value: a value met under many names is held once.
            KindedHash::Value(h) => self
                .values
                .entry(h)
                .or_insert_with(|| match self.v.contents.get(&h) {
                    Some(bytes) => Entry::contents(bytes),
                    None => Entry::blinded_contents(h, None),
                })
                .clone(),
            KindedHash::Node(h) => {
                if let Some(entry) = self.entries.get(&h) {
                    return Ok(entry.clone());
                }
                let entry = match self.v.nodes.get(&h).cloned() {
                    None => Entry::blinded_dir(h, None),
                    Some(obj) => match &*obj {
                        Obj::Flat(entries) => {
                            let shown = entries.iter().map(|(s, k)| Ok((s.as_slice(), self.entry(*k)?))).collect::<Result<
                                Vec<_>,
                                ProofError,
                            >>(
                            )?;
                            let root = dir::build(Layout::TEZOS, 0, shown)
                                .ok_or_else(|| ProofError::Malformed("steps collide too deep".into()))?;
                            Entry::dir(root)
                        }
                        _ => Child::Dir(Partial::mem(self.inode(&obj, 0)?)),
                    },
                };
                self.entries.insert(h, entry.clone());
                entry
            }
        })
    }

    fn cell(&mut self, hash: Hash, depth: u32) -> Result<Arc<Cell>, ProofError> {
        if let Some(cell) = self.cells.get(&hash) {
            return Ok(cell.clone());
        }
        let cell = match self.v.nodes.get(&hash).cloned() {
            None => Cell::blinded(hash, None),
            Some(obj) => Partial::mem(self.inode(&obj, depth)?),
        };
        self.cells.insert(hash, cell.clone());
        Ok(cell)
    }

    fn inode(&mut self, obj: &Obj, depth: u32) -> Result<Arc<dir::Inode<Partial>>, ProofError> {
        Ok(match obj {
            Obj::Flat(_) => return Err(ProofError::Malformed("a directory where an inode was expected".into())),
            Obj::Values(entries) => {
                let shown =
                    entries.iter().map(|(s, k)| Ok((s.as_slice(), self.entry(*k)?))).collect::<Result<Vec<_>, ProofError>>()?;
                dir::Inode::values(Values::from_sorted(shown))
            }
            Obj::Tree { length, children, .. } => {
                let cells = children
                    .iter()
                    .map(|(i, h)| Ok((usize::from(*i), self.cell(*h, depth + 1)?)))
                    .collect::<Result<Vec<_>, ProofError>>()?;
                Arc::new(dir::Inode::new(Body::Tree(Pointers::new(depth, *length, cells))))
            }
            Obj::Chain { length, segment, proof, .. } => {
                let mut cell = self.cell(*proof, depth + segment.len() as u32)?;
                for (k, i) in segment.iter().enumerate().rev() {
                    let pointers = Pointers::new(depth + k as u32, *length, [(usize::from(*i), cell)]);
                    cell = Partial::mem(Arc::new(dir::Inode::new(Body::Tree(pointers))));
                }
                return cell.known_inode().cloned().ok_or_else(|| ProofError::Malformed("an empty chain".into()));
            }
        })
    }
}
