//! The one hashing rule: a directory of up to [`STABLE_HASH`] entries
//! hashes as the flat Tezos node encoding, a larger one by its inode
//! encoding; a child's hash is its memo, or computed once and kept.

use super::*;
use crate::inode::{encode_tree, encode_values};
use crate::tezos::encode_node;

std::thread_local! {
    /// The buffer the bytes to hash are encoded in, reused by the thread's
    /// hashes (all children are hashed before a parent takes it).
    static BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The hash of what `encode` writes, encoded in the thread's buffer.
fn hash_encoded(encode: impl FnOnce(&mut Vec<u8>)) -> Hash {
    let mut buf = BUFFER.take();
    buf.clear();
    encode(&mut buf);
    let hash = Hash::of_bytes(&buf);
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
        (None, Some(root)) => dir_hash(root, r),
        (None, None) => dir_hash(&*r.load(ptr, 0)?, r),
    }
}

/// The inode hash of the inode a pointer below a root names.
pub fn inode_ptr_hash<H: Hold, R: Resolve<H> + ?Sized>(ptr: &H::Ptr, depth: u32, r: &R) -> Result<Hash, R::Error> {
    match (H::known_hash(ptr), H::as_mem(ptr)) {
        (Some(hash), _) => Ok(hash),
        (None, Some(inode)) => inode_hash(inode, r),
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
                let hashes = values.iter().map(|(_, c)| child_hash(c, r)).collect::<Result<Vec<_>, _>>()?;
                hash_encoded(|buf| encode_node(buf, values.len(), values.iter().zip(&hashes).map(|((s, c), h)| (s, c.kind(), h))))
            }
            Body::Tree(_) => {
                let entries = collect_sorted(root, r)?;
                let hashes = entries.iter().map(|(_, c)| child_hash(c, r)).collect::<Result<Vec<_>, _>>()?;
                hash_encoded(|buf| {
                    encode_node(buf, entries.len(), entries.iter().zip(&hashes).map(|((s, c), h)| (&s[..], c.kind(), h)))
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
            let hashes = values.iter().map(|(_, c)| child_hash(c, r)).collect::<Result<Vec<_>, _>>()?;
            hash_encoded(|buf| encode_values(buf, values.len(), values.iter().zip(&hashes).map(|((s, c), h)| (s, c.kind(), h))))
        }
        Body::Tree(pointers) => {
            let hashes = pointers
                .iter()
                .map(|(i, ptr)| Ok((i, inode_ptr_hash(ptr, pointers.depth + 1, r)?)))
                .collect::<Result<Vec<_>, _>>()?;
            hash_encoded(|buf| encode_tree(buf, pointers.depth, pointers.len, hashes.iter().map(|(i, h)| (*i, h))))
        }
    };
    let _ = inode.hash.set(hash);
    Ok(hash)
}
