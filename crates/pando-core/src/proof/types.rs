//! The tree proofs of Octez (`Tezos_context_sigs.Context.Proof_types`), as
//! plain data: what a proof says, before it is checked.
//!
//! A proof shows the parts of a tree that a computation read. Contents and
//! directories it did not read appear *blinded*, as their hash only. A
//! directory of at most 256 entries appears as a [`Tree::Node`] listing every
//! entry; a larger one as a [`Tree::Inode`] of its trie (see
//! [`crate::inode`]), whose child inodes are blinded unless read, and where
//! a chain of inodes with a single child is compressed into an extender.
//!
//! Invariant: these types carry no guarantee; [`super::convert::entry_of_tree`] turns them
//! into a partial tree only after checking every structural rule, and the
//! hash of that tree is what binds a proof to a context.

use crate::hash::Hash;

/// The version field of a tree proof of the 32-ary context: not a stream
/// proof (bit 0 clear) and not binary (bit 1 clear).
pub const TREE32_VERSION: i16 = 0;

/// A proof: the hashes before and after the computation, and the tree it read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeProof {
    pub version: i16,
    pub before: KindedHash,
    pub after: KindedHash,
    pub state: Tree,
}

/// The hash of a tree's root, with its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KindedHash {
    Value(Hash),
    Node(Hash),
}

impl KindedHash {
    pub fn hash(&self) -> Hash {
        match self {
            KindedHash::Value(h) | KindedHash::Node(h) => *h,
        }
    }
}

/// A tree as a proof shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tree {
    /// A contents value that was read.
    Value(Vec<u8>),
    /// A contents value that was not read.
    BlindedValue(Hash),
    /// A directory of at most 256 entries, every entry listed, sorted by step.
    Node(Vec<(Vec<u8>, Tree)>),
    /// A directory that was not read.
    BlindedNode(Hash),
    /// The root inode of a directory of more than 256 entries.
    Inode(Inode),
    /// The root of such a directory when it is a chain of single-child inodes.
    Extender(Extender),
}

/// An inode below a directory's root inode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InodeTree {
    BlindedInode(Hash),
    /// A value inode: at most 32 entries, sorted by step.
    InodeValues(Vec<(Vec<u8>, Tree)>),
    InodeTree(Inode),
    InodeExtender(Extender),
}

/// A tree inode: the number of entries below it and its non-empty children,
/// by increasing index, each shown as a `T` (Octez's `'a inode`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InodeOf<T> {
    pub length: u64,
    pub proofs: Vec<(u8, T)>,
}

/// A tree inode of a tree proof.
pub type Inode = InodeOf<InodeTree>;

/// A chain of tree inodes that each have `length` entries below them and a
/// single child, at the indices of `segment`, ending in `proof` (Octez's
/// `'a inode_extender`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtenderOf<T> {
    pub length: u64,
    pub segment: Vec<u8>,
    pub proof: T,
}

/// An extender of a tree proof.
pub type Extender = ExtenderOf<Box<InodeTree>>;

/// The version field of a stream proof of the 32-ary context (bit 0 set).
pub const STREAM32_VERSION: i16 = 1;

/// A stream proof (Octez's `Proof.stream Proof.t`): the hashes before and
/// after, and the parts of the tree in the order a computation read them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamProof {
    pub version: i16,
    pub before: KindedHash,
    pub after: KindedHash,
    pub state: Vec<Elt>,
}

/// One part of a stream proof (Octez's `Proof.Stream.elt`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Elt {
    /// A contents value.
    Value(Vec<u8>),
    /// A directory of at most 256 entries, or a value inode: every entry,
    /// sorted by step, with its kind and hash.
    Node(Vec<(Vec<u8>, KindedHash)>),
    /// A tree inode, with its children's hashes.
    Inode(InodeOf<Hash>),
    /// A chain of single-child tree inodes, ending in the inode `proof`.
    InodeExtender(ExtenderOf<Hash>),
}
