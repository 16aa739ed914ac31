//! A naive reference hasher: builds the hash of a directory from its sorted
//! entry list from scratch, following the specification's `partition`
//! literally. The store's incremental hasher is checked against it.
//!
//! Parameterised by the [`Layout`] (fan-out and stable-hash threshold):
//! the L1 layout, the binary one of rollups, and irmin's
//! small-configuration vector (`entries = 2`, `stable_hash = 3`).

use crate::hash::Hash;
pub use crate::inode::Layout;
use crate::inode::{encode_tree, encode_values, index_with};
use crate::tezos::{Kind, contents_hash, node_hash};

/// A tree given in full, for reference hashing.
#[derive(Clone, Debug)]
pub enum RefTree {
    Contents(Vec<u8>),
    /// Entries in any order; names must be unique.
    Dir(Vec<(Vec<u8>, RefTree)>),
}

impl RefTree {
    pub fn hash(&self) -> Hash {
        self.hash_with(Layout::TEZOS)
    }

    pub fn hash_with(&self, layout: Layout) -> Hash {
        match self {
            RefTree::Contents(bytes) => contents_hash(bytes),
            RefTree::Dir(entries) => {
                let mut hashed: Vec<(Vec<u8>, Kind, Hash)> = entries
                    .iter()
                    .map(|(name, child)| {
                        let kind = match child {
                            RefTree::Contents(_) => Kind::Contents,
                            RefTree::Dir(_) => Kind::Dir,
                        };
                        (name.clone(), kind, child.hash_with(layout))
                    })
                    .collect();
                hashed.sort_by(|a, b| a.0.cmp(&b.0));
                dir_hash_with(layout, &hashed)
            }
        }
    }
}

/// Hash of a directory given its entries sorted by name.
pub fn dir_hash_with(layout: Layout, sorted: &[(Vec<u8>, Kind, Hash)]) -> Hash {
    if layout.hashed_flat(sorted.len() as u64) {
        let borrowed: Vec<(&[u8], Kind, Hash)> = sorted.iter().map(|(n, k, h)| (n.as_slice(), *k, *h)).collect();
        node_hash(&borrowed)
    } else {
        partition(layout, 0, sorted)
    }
}

/// The specification's `partition(d, X)`, returning the inode's hash.
fn partition(layout: Layout, depth: u32, sorted: &[(Vec<u8>, Kind, Hash)]) -> Hash {
    let mut buf = Vec::new();
    if sorted.len() <= layout.entries {
        encode_values(&mut buf, sorted.len(), sorted.iter().map(|(n, k, h)| (n.as_slice(), *k, h)));
        return Hash::of_bytes(&buf);
    }
    let mut buckets: Vec<Vec<(Vec<u8>, Kind, Hash)>> = vec![Vec::new(); layout.entries];
    for entry in sorted {
        buckets[index_with(layout.entries, depth, &entry.0)].push(entry.clone());
    }
    let pointers: Vec<(usize, Hash)> = buckets
        .iter()
        .enumerate()
        .filter(|(_, bucket)| !bucket.is_empty())
        .map(|(i, bucket)| (i, partition(layout, depth + 1, bucket)))
        .collect();
    encode_tree(&mut buf, depth, sorted.len() as u64, pointers.iter().map(|(i, h)| (*i, h)));
    Hash::of_bytes(&buf)
}
