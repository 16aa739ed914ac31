//! The one hashing rule: a directory of up to its layout's `stable_hash`
//! entries ([`STABLE_HASH`] in L1's, 2 in the binary one, as the
//! [`Resolve`]r names it) hashes as the flat Tezos node encoding, a larger
//! one by its inode encoding; a child's hash is its memo, or computed once
//! and kept.
//! The tries here hash an inode ([`inode_hash`], [`dir_hash`]) from its
//! children's memos; [`hash_subtree`] hashes what a commit changed level
//! by level instead, several inodes at once, to the same memos. The
//! readers that meet inodes as a stream of records (snapshot import, the
//! integrity check, irmin's files) hash one from its children's hashes
//! ([`values_hash`], [`tree_hash`]). All of them encode with the same
//! functions (`crate::inode`, `crate::tezos::encode_node`).

use super::*;
use crate::inode::{encode_tree, encode_values};
use crate::tezos::encode_node;
use smallvec::SmallVec;

std::thread_local! {
    /// The buffer the bytes to hash are encoded in, reused by the thread's
    /// hashes (all children are hashed before a parent takes it).
    static BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// `hash` run with the thread's buffer.
fn with_buffer(hash: impl FnOnce(&mut Vec<u8>) -> Hash) -> Hash {
    let mut buf = BUFFER.take();
    let hash = hash(&mut buf);
    // A huge flat directory's buffer is not kept.
    if buf.capacity() <= 64 << 10 {
        BUFFER.set(buf);
    }
    hash
}

/// The hash of what an entry is.
pub fn child_hash<H: Hold, R: Resolve<H> + ?Sized>(child: &Child<H>, r: &R) -> Result<Hash, R::Error> {
    match child {
        Child::Contents(leaf) => r.leaf_hash(leaf),
        Child::Dir(ptr) => dir_ptr_hash(ptr, r),
    }
}

/// The hash of the directory a pointer to its root names.
pub fn dir_ptr_hash<H: Hold, R: Resolve<H> + ?Sized>(ptr: &H::Ptr, r: &R) -> Result<Hash, R::Error> {
    match (H::known_hash(ptr), H::as_mem(ptr)) {
        (Some(hash), _) => Ok(hash),
        (None, Some(root)) => {
            let hash = dir_hash(root, r)?;
            H::remember_hash(ptr, hash);
            Ok(hash)
        }
        (None, None) => dir_hash(&*r.load(ptr, 0)?, r),
    }
}

/// The inode hash of the inode a pointer below a root names.
pub fn inode_ptr_hash<H: Hold, R: Resolve<H> + ?Sized>(ptr: &H::Ptr, depth: u32, r: &R) -> Result<Hash, R::Error> {
    match (H::known_hash(ptr), H::as_mem(ptr)) {
        (Some(hash), _) => Ok(hash),
        (None, Some(inode)) => {
            let hash = inode_hash(inode, r)?;
            H::remember_hash(ptr, hash);
            Ok(hash)
        }
        (None, None) => inode_hash(&*r.load(ptr, depth)?, r),
    }
}

/// The Tezos hash of the directory whose root is `root`: the flat node
/// encoding of all its entries up to the layout's `stable_hash` of them,
/// the root's inode hash above.
pub fn dir_hash<H: Hold, R: Resolve<H> + ?Sized>(root: &Inode<H>, r: &R) -> Result<Hash, R::Error> {
    if let Some(hash) = root.dir_hash.get() {
        return Ok(*hash);
    }
    let layout = r.layout();
    let hash = if layout.hashed_flat(root.len()) {
        let hashes = child_hashes(root, true, r)?;
        with_buffer(|buf| {
            buf.clear();
            encode(root, true, &hashes, buf);
            Hash::of_bytes(buf)
        })
    } else {
        inode_hash(root, r)?
    };
    root.remember_hash(layout, 0, hash);
    Ok(hash)
}

/// The inode hash (values or tree encoding) of an inode.
pub fn inode_hash<H: Hold, R: Resolve<H> + ?Sized>(inode: &Inode<H>, r: &R) -> Result<Hash, R::Error> {
    if let Some(hash) = inode.hash.get() {
        return Ok(*hash);
    }
    let hashes = child_hashes(inode, false, r)?;
    let hash = with_buffer(|buf| {
        buf.clear();
        encode(inode, false, &hashes, buf);
        Hash::of_bytes(buf)
    });
    let _ = inode.hash.set(hash);
    Ok(hash)
}

/// What encoding an inode for its hash needs of its children, computed
/// before the encoding starts (so that hashing a child in between does
/// not take the thread's buffer). Small, since hashing recurses through
/// it: a proof's nested directories are hashed on a 1 MiB stack.
enum ChildHashes<H: Hold> {
    /// A values inode's entries, in order (most directories have one or
    /// two).
    Values(SmallVec<[Hash; 2]>),
    /// A tree inode's children, with their indices.
    Tree(Vec<(usize, Hash)>),
    /// All the entries of a directory hashed flat whose root is a tree
    /// inode, sorted.
    Flat(Entries<H>, Vec<Hash>),
}

/// The children's hashes `inode` is encoded with: for its directory's flat
/// hash if `flat` (a root), for its inode hash otherwise.
fn child_hashes<H: Hold, R: Resolve<H> + ?Sized>(inode: &Inode<H>, flat: bool, r: &R) -> Result<ChildHashes<H>, R::Error> {
    // Allocated once at their size: collected through `Result`, they grew
    // from 4 entries, 0.9% of a `small` replay's instructions.
    Ok(match &inode.body {
        Body::Values(values) => {
            let mut hashes = SmallVec::with_capacity(values.len());
            for child in values.children() {
                hashes.push(child_hash(child, r)?);
            }
            ChildHashes::Values(hashes)
        }
        Body::Tree(_) if flat => flat_hashes(inode, r)?,
        Body::Tree(pointers) => {
            let mut hashes = Vec::with_capacity(pointers.count());
            for (i, ptr) in pointers.iter() {
                hashes.push((i, inode_ptr_hash(ptr, pointers.depth + 1, r)?));
            }
            ChildHashes::Tree(hashes)
        }
    })
}

/// [`child_hashes`] of a directory hashed flat whose root is a tree inode:
/// all its entries, sorted. Not inlined: its frame is large, and hashing
/// recurses through `child_hashes` (a 1 MiB stack holds the deepest proof).
#[inline(never)]
fn flat_hashes<H: Hold, R: Resolve<H> + ?Sized>(root: &Inode<H>, r: &R) -> Result<ChildHashes<H>, R::Error> {
    let entries = collect_sorted(root, r)?;
    let mut hashes = Vec::with_capacity(entries.len());
    for (_, child) in &entries {
        hashes.push(child_hash(child, r)?);
    }
    Ok(ChildHashes::Flat(entries, hashes))
}

/// Appends the bytes hashed for `inode` given its children's `hashes`: the
/// node encoding of its directory (flat hashes, from a root), or its
/// values or tree encoding.
fn encode<H: Hold>(inode: &Inode<H>, flat: bool, hashes: &ChildHashes<H>, buf: &mut Vec<u8>) {
    match (&inode.body, hashes) {
        (Body::Values(values), ChildHashes::Values(hashes)) => {
            encode_entries(buf, flat, values.len(), values.iter().zip(hashes).map(|((s, c), h)| (s, c.kind(), h)));
        }
        (_, ChildHashes::Flat(entries, hashes)) => {
            encode_node(buf, entries.len(), entries.iter().zip(hashes).map(|((s, c), h)| (&s[..], c.kind(), h)));
        }
        (Body::Tree(pointers), ChildHashes::Tree(hashes)) => {
            encode_tree(buf, pointers.depth, pointers.len, hashes.iter().map(|(i, h)| (*i, h)));
        }
        _ => unreachable!("hashes gathered for this inode's body"),
    }
}

/// An inode [`hash_subtree`] hashes: at `depth`, reached through `via`
/// (none for the top).
struct Unhashed<'a, H: Hold> {
    inode: &'a Inode<H>,
    depth: u32,
    via: Option<&'a H::Ptr>,
}

impl<H: Hold> Unhashed<'_, H> {
    /// Whether it is hashed as its directory's flat node (a root of at
    /// most the layout's `stable_hash` entries).
    fn flat(&self, layout: Layout) -> bool {
        self.depth == 0 && layout.hashed_flat(self.inode.len())
    }

    fn memo(&self) -> Option<Hash> {
        self.inode.memo_hash(self.depth)
    }
}

/// Hashes `top`, an inode at `depth` (0: a directory's root, whose
/// directory hash it is), and every inode in memory below it whose
/// pointer does not carry its hash, as [`inode_hash`] and [`dir_hash`]
/// would, but level by level from the bottom, the inputs of a level
/// hashed together ([`Hash::of_many`]: with AVX2, about twice the
/// throughput of one at a time). A commit hashes what it changed this way, a subtree at a
/// time (every pointer to an inode hashed remembers its hash).
pub fn hash_subtree<H: Hold, R: Resolve<H> + ?Sized>(top: &Inode<H>, depth: u32, r: &R) -> Result<Hash, R::Error> {
    let mut levels: Vec<Vec<Unhashed<'_, H>>> = Vec::new();
    let mut room = GATHERED;
    gather(Unhashed { inode: top, depth, via: None }, &mut levels, &mut room, r)?;
    let mut buf = Vec::new();
    let layout = r.layout();
    for level in &levels {
        // Each inode not hashed meanwhile (by another thread), encoded end
        // to end in `buf`: which one, and where its bytes end.
        buf.clear();
        let mut encoded = Vec::with_capacity(level.len());
        for (k, node) in level.iter().enumerate() {
            if node.memo().is_none() {
                let flat = node.flat(layout);
                encode(node.inode, flat, &child_hashes(node.inode, flat, r)?, &mut buf);
                encoded.push((k, buf.len()));
            }
        }
        let inputs = encoded.iter().scan(0, |start, &(_, end)| Some(&buf[std::mem::replace(start, end)..end]));
        for (&(k, _), hash) in encoded.iter().zip(Hash::of_many(inputs)) {
            let node = &level[k];
            node.inode.remember_hash(layout, node.depth, hash);
        }
        for node in level {
            if let (Some(via), Some(hash)) = (node.via, node.memo()) {
                H::remember_hash(via, hash);
            }
        }
    }
    if depth == 0 { dir_hash(top, r) } else { inode_hash(top, r) }
}

/// Inodes [`hash_subtree`] hashes level by level at most: the levels of
/// a larger subtree (a huge commit's) would not stay in the cache from
/// one pass to the next, so its later parts are hashed as subtrees of
/// their own.
const GATHERED: usize = 2048;

/// Puts `node` and the inodes below it not hashed yet in `levels` by
/// height (an inode after all its children); returns its height, or
/// `None` if it is hashed (its pointer then learns the hash). Once `room`
/// inodes are gathered, the subtrees below are hashed on their own. An
/// inode reached by two paths (a subtree copied) is gathered, and hashed,
/// twice: the same hash.
fn gather<'a, H: Hold, R: Resolve<H> + ?Sized>(
    node: Unhashed<'a, H>,
    levels: &mut Vec<Vec<Unhashed<'a, H>>>,
    room: &mut usize,
    r: &R,
) -> Result<Option<usize>, R::Error> {
    if let Some(hash) = node.memo() {
        if let Some(via) = node.via {
            H::remember_hash(via, hash);
        }
        return Ok(None);
    }
    *room = room.saturating_sub(1);
    let mut height = 0;
    let mut below = |ptr: &'a H::Ptr, depth: u32, levels: &mut Vec<Vec<Unhashed<'a, H>>>| -> Result<(), R::Error> {
        let (None, Some(inode)) = (H::known_hash(ptr), H::as_mem(ptr)) else { return Ok(()) };
        if *room == 0 {
            let hash = hash_subtree(inode, depth, r)?;
            H::remember_hash(ptr, hash);
        } else if let Some(h) = gather(Unhashed { inode: &**inode, depth, via: Some(ptr) }, levels, room, r)? {
            height = height.max(h + 1);
        }
        Ok(())
    };
    match &node.inode.body {
        Body::Values(values) => {
            for child in values.children() {
                if let Child::Dir(ptr) = child {
                    below(ptr, 0, levels)?;
                }
            }
        }
        Body::Tree(pointers) => {
            for (_, ptr) in pointers.iter() {
                below(ptr, pointers.depth + 1, levels)?;
            }
        }
    }
    if levels.len() <= height {
        levels.resize_with(height + 1, Vec::new);
    }
    levels[height].push(node);
    Ok(Some(height))
}

/// The hash of a values inode from its entries' hashes (sorted by step,
/// unique), as a stream of records meets it (snapshot import, the
/// integrity check, irmin's files): the flat node hash of its directory
/// for a root, its inode hash below. `buf` is cleared and holds the bytes
/// hashed.
pub fn values_hash<'a>(
    buf: &mut Vec<u8>,
    root: bool,
    count: usize,
    entries: impl Iterator<Item = (&'a [u8], Kind, &'a Hash)>,
) -> Hash {
    buf.clear();
    encode_entries(buf, root, count, entries);
    Hash::of_bytes(buf)
}

/// Appends a values inode's entries (sorted by step, unique) as hashed:
/// the flat node encoding of its directory for a root, its values
/// encoding below.
fn encode_entries<'a>(buf: &mut Vec<u8>, root: bool, count: usize, entries: impl Iterator<Item = (&'a [u8], Kind, &'a Hash)>) {
    if root {
        encode_node(buf, count, entries);
    } else {
        encode_values(buf, count, entries);
    }
}

/// The inode hash of a tree inode at `depth` of `len` entries from its
/// children's inode hashes, in index order, as a stream meets it. (The
/// root of a directory of at most [`STABLE_HASH`] entries hashes flat
/// instead: [`values_hash`] of all its entries.) `buf` is cleared and
/// holds the bytes hashed.
pub fn tree_hash<'a>(
    buf: &mut Vec<u8>,
    depth: u32,
    len: u64,
    children: impl ExactSizeIterator<Item = (usize, &'a Hash)>,
) -> Hash {
    buf.clear();
    encode_tree(buf, depth, len, children);
    Hash::of_bytes(buf)
}
