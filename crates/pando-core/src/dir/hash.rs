//! The one hashing rule: a directory of up to [`STABLE_HASH`] entries
//! hashes as the flat Tezos node encoding, a larger one by its inode
//! encoding; a child's hash is its memo, or computed once and kept.
//! [`values_hash`] and [`tree_hash`] hash an inode from its children's
//! hashes: the tries here, and the readers that meet inodes as a stream of
//! records (snapshot import, the integrity check, irmin's files), use them.

use super::*;
use crate::inode::{encode_tree, encode_values};
use crate::tezos::encode_node;

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
/// encoding of all its entries up to [`STABLE_HASH`] of them, the root's
/// inode hash above.
pub fn dir_hash<H: Hold, R: Resolve<H> + ?Sized>(root: &Inode<H>, r: &R) -> Result<Hash, R::Error> {
    if let Some(hash) = root.dir_hash.get() {
        return Ok(*hash);
    }
    let hash = if hashed_flat(root.len()) {
        match &root.body {
            Body::Values(values) => {
                let hashes = values.children().map(|c| child_hash(c, r)).collect::<Result<Vec<_>, _>>()?;
                with_buffer(|buf| {
                    values_hash(buf, true, values.len(), values.iter().zip(&hashes).map(|((s, c), h)| (s, c.kind(), h)))
                })
            }
            Body::Tree(_) => {
                let entries = collect_sorted(root, r)?;
                let hashes = entries.iter().map(|(_, c)| child_hash(c, r)).collect::<Result<Vec<_>, _>>()?;
                with_buffer(|buf| {
                    values_hash(buf, true, entries.len(), entries.iter().zip(&hashes).map(|((s, c), h)| (&s[..], c.kind(), h)))
                })
            }
        }
    } else {
        inode_hash(root, r)?
    };
    let _ = root.dir_hash.set(hash);
    Ok(hash)
}

/// The inode hash (values or tree encoding) of an inode.
pub fn inode_hash<H: Hold, R: Resolve<H> + ?Sized>(inode: &Inode<H>, r: &R) -> Result<Hash, R::Error> {
    if let Some(hash) = inode.hash.get() {
        return Ok(*hash);
    }
    let hash = match &inode.body {
        Body::Values(values) => {
            let hashes = values.children().map(|c| child_hash(c, r)).collect::<Result<Vec<_>, _>>()?;
            with_buffer(|buf| {
                values_hash(buf, false, values.len(), values.iter().zip(&hashes).map(|((s, c), h)| (s, c.kind(), h)))
            })
        }
        Body::Tree(pointers) => {
            let hashes = pointers
                .iter()
                .map(|(i, ptr)| Ok((i, inode_ptr_hash(ptr, pointers.depth + 1, r)?)))
                .collect::<Result<Vec<_>, _>>()?;
            with_buffer(|buf| tree_hash(buf, pointers.depth, pointers.len, hashes.iter().map(|(i, h)| (*i, h))))
        }
    };
    let _ = inode.hash.set(hash);
    Ok(hash)
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
    if root {
        encode_node(buf, count, entries);
    } else {
        encode_values(buf, count, entries);
    }
    Hash::of_bytes(buf)
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
