//! Hashing of in-memory trees, memoised in the nodes.
//!
//! Invariant: a hash is computed once per node; stored pointers carry their
//! hash so unchanged subtrees are never loaded to be hashed, except the
//! siblings needed to hash a directory of at most 256 entries as a flat list.

use pando_core::Hash;
use pando_core::inode::{STABLE_HASH, encode_tree, encode_values};
use pando_core::tezos::{Kind, encode_node};
use std::sync::Arc;

use super::node::{Body, Child, Inode, Loader, Ptr, Value, load};
use super::ops::collect_sorted;
use crate::error::Result;

/// Hash of what a directory entry points to.
pub fn child_hash(child: &Child, loader: &dyn Loader) -> Result<Hash> {
    match child {
        Child::Value(value) => Ok(value.hash()),
        Child::Blob { hash, .. } => Ok(*hash),
        Child::Dir(ptr) => dir_ptr_hash(ptr, loader),
    }
}

/// Hash of a directory given by a pointer to its root inode.
pub fn dir_ptr_hash(ptr: &Ptr, loader: &dyn Loader) -> Result<Hash> {
    match ptr {
        Ptr::Stored { hash, .. } => Ok(*hash),
        Ptr::Mem(root) => dir_hash(root, loader),
    }
}

/// The Tezos hash of the directory whose root inode is `root`.
pub fn dir_hash(root: &Inode, loader: &dyn Loader) -> Result<Hash> {
    if let Some(hash) = root.dir_hash.get() {
        return Ok(*hash);
    }
    let hash = if root.len() as usize <= STABLE_HASH {
        let mut buf = Vec::with_capacity(8 + 80 * root.len() as usize);
        match &root.body {
            Body::Values(entries) => {
                let hashes = entry_hashes(entries, loader)?;
                encode_node(&mut buf, entries.len(), entries.iter().zip(&hashes).map(|((s, c), h)| (&s[..], c.kind(), h)));
            }
            Body::Tree { .. } => {
                let entries = collect_sorted(root, loader)?;
                let hashes = entry_hashes(&entries, loader)?;
                encode_node(&mut buf, entries.len(), entries.iter().zip(&hashes).map(|((s, c), h)| (&s[..], c.kind(), h)));
            }
        }
        Hash::of_bytes(&buf)
    } else {
        inode_hash(root, loader)?
    };
    let _ = root.dir_hash.set(hash);
    Ok(hash)
}

fn entry_hashes(entries: &[(super::node::Step, Child)], loader: &dyn Loader) -> Result<Vec<Hash>> {
    entries.iter().map(|(_, child)| child_hash(child, loader)).collect()
}

/// The inode hash (value or tree encoding) of an inode.
pub fn inode_hash(inode: &Inode, loader: &dyn Loader) -> Result<Hash> {
    if let Some(hash) = inode.hash.get() {
        return Ok(*hash);
    }
    let mut buf = Vec::new();
    match &inode.body {
        Body::Values(entries) => {
            let hashes = entry_hashes(entries, loader)?;
            encode_values(&mut buf, entries.len(), entries.iter().zip(&hashes).map(|((s, c), h)| (&s[..], c.kind(), h)));
        }
        Body::Tree { depth, len, children } => {
            let mut pointers = Vec::with_capacity(children.len());
            for (index, child) in children.iter().enumerate() {
                if let Some(ptr) = child {
                    pointers.push((index, inode_ptr_hash(ptr, loader)?));
                }
            }
            encode_tree(&mut buf, *depth, *len, pointers.iter().map(|(i, h)| (*i, h)));
        }
    }
    let hash = Hash::of_bytes(&buf);
    let _ = inode.hash.set(hash);
    Ok(hash)
}

/// Hash of an inode below a directory root, given by a pointer.
pub fn inode_ptr_hash(ptr: &Ptr, loader: &dyn Loader) -> Result<Hash> {
    match ptr {
        Ptr::Stored { hash, .. } => Ok(*hash),
        Ptr::Mem(inode) => inode_hash(inode, loader),
    }
}

/// The kind of a child, and its hash.
pub fn entry(child: &Child, loader: &dyn Loader) -> Result<(Kind, Hash)> {
    Ok((child.kind(), child_hash(child, loader)?))
}

/// Loads a contents value, from memory or from its blob.
pub fn value_of(child: &Child, loader: &dyn Loader) -> Result<Option<Arc<Value>>> {
    match child {
        Child::Value(value) => Ok(Some(value.clone())),
        Child::Blob { offset, hash } => loader.load_blob(*offset, hash).map(Some),
        Child::Dir(_) => Ok(None),
    }
}

/// Loads the root inode of a directory pointer.
pub fn dir_root(ptr: &Ptr, loader: &dyn Loader) -> Result<Arc<Inode>> {
    load(ptr, 0, loader)
}
