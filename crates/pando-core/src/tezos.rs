//! The Tezos context encodings that are hashed (the "pre-hash" forms).
//!
//! - contents: `be64 len ‖ bytes`;
//! - a directory of at most 256 entries ("node"): `be64 n ‖ entries`, each
//!   entry `kind(8 bytes) ‖ LEB128 len(name) ‖ name ‖ be64 32 ‖ hash`,
//!   sorted by name;
//! - inodes of larger directories: see [`crate::inode`];
//! - commits: `be64 32 ‖ root ‖ be64 k ‖ (be64 32 ‖ parent)* ‖ be64 date ‖
//!   be64 len ‖ author ‖ be64 len ‖ message`, parents sorted.
//!
//! Invariant: callers pass node entries sorted by name with no duplicates;
//! the functions assert it, because hashing an unsorted list would produce a
//! hash that no Tezos node agrees with.

use crate::hash::{HASH_SIZE, Hash};
use crate::varint::{write_be64, write_u64};

/// What an entry of a directory points to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Contents,
    Dir,
}

impl Kind {
    /// The 8-byte kind tag of a node entry.
    fn node_tag(self) -> [u8; 8] {
        match self {
            Kind::Contents => [0xff, 0, 0, 0, 0, 0, 0, 0],
            Kind::Dir => [0; 8],
        }
    }

    /// The 1-byte kind tag of an inode value entry.
    pub fn inode_tag(self) -> u8 {
        match self {
            Kind::Contents => 1,
            Kind::Dir => 0,
        }
    }
}

/// Hash of a contents value: BLAKE2b-256 of `be64 len ‖ bytes`.
pub fn contents_hash(bytes: &[u8]) -> Hash {
    Hash::of_parts(&[&(bytes.len() as u64).to_be_bytes(), bytes])
}

/// Appends the pre-hash of a directory of at most 256 entries to `out`.
/// `entries` yields `(name, kind, hash)` sorted by name.
pub fn encode_node<'a>(out: &mut Vec<u8>, count: usize, entries: impl Iterator<Item = (&'a [u8], Kind, &'a Hash)>) {
    write_be64(out, count as u64);
    let mut previous: Option<&[u8]> = None;
    let mut seen = 0;
    for (name, kind, hash) in entries {
        assert!(previous.is_none_or(|p| p < name), "node entries must be sorted and unique");
        previous = Some(name);
        out.extend_from_slice(&kind.node_tag());
        write_u64(out, name.len() as u64);
        out.extend_from_slice(name);
        write_be64(out, HASH_SIZE as u64);
        out.extend_from_slice(hash.as_bytes());
        seen += 1;
    }
    assert_eq!(seen, count, "node entry count does not match its entries");
}

/// Hash of a directory of at most 256 entries, sorted by name.
pub fn node_hash(entries: &[(&[u8], Kind, Hash)]) -> Hash {
    let mut buf = Vec::with_capacity(8 + entries.len() * 64);
    encode_node(&mut buf, entries.len(), entries.iter().map(|(n, k, h)| (*n, *k, h)));
    Hash::of_bytes(&buf)
}

/// The metadata and links of a commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitInfo {
    /// Hash of the root directory.
    pub root: Hash,
    /// Parent commits; hashed in sorted order whatever the order here.
    pub parents: Vec<Hash>,
    /// Seconds since the epoch.
    pub date: i64,
    pub author: String,
    pub message: String,
}

impl CommitInfo {
    /// The pre-hash encoding of the commit.
    pub fn encode(&self) -> Vec<u8> {
        let mut parents = self.parents.clone();
        parents.sort();
        let mut out = Vec::with_capacity(64 + 40 * parents.len() + self.author.len() + self.message.len());
        write_be64(&mut out, HASH_SIZE as u64);
        out.extend_from_slice(self.root.as_bytes());
        write_be64(&mut out, parents.len() as u64);
        for parent in &parents {
            write_be64(&mut out, HASH_SIZE as u64);
            out.extend_from_slice(parent.as_bytes());
        }
        write_be64(&mut out, self.date as u64);
        write_be64(&mut out, self.author.len() as u64);
        out.extend_from_slice(self.author.as_bytes());
        write_be64(&mut out, self.message.len() as u64);
        out.extend_from_slice(self.message.as_bytes());
        out
    }

    /// The commit hash.
    pub fn hash(&self) -> Hash {
        Hash::of_bytes(&self.encode())
    }
}
