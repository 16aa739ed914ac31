//! The inode layout of large directories, as Tezos defines it.
//!
//! A directory with more than [`STABLE_HASH`] entries is hashed as a tree of
//! inodes. The entry named `s` at depth `d` goes to child
//! `ocaml_hash(d, s) mod 32`; a subtree with at most [`ENTRIES`] entries is a
//! "value" inode, a larger one a "tree" inode. The layout is therefore a
//! function of the set of entries alone, never of the order of operations.
//!
//! Encodings (hashed with BLAKE2b-256):
//! - value: `00 ‖ LEB128 n ‖ [LEB128 len(name) ‖ name ‖ kind ‖ hash]*`, sorted;
//! - tree: `01 ‖ LEB128 depth ‖ LEB128 total ‖ u8 k ‖ [u8 index ‖ hash]*`.

use crate::hash::Hash;
use crate::ocaml_hash::ocaml_hash;
use crate::tezos::Kind;
use crate::varint::write_u64;

/// Fan-out of a tree inode, and the largest number of entries of a value inode.
pub const ENTRIES: usize = 32;
/// Directories with at most this many entries are hashed as flat nodes.
pub const STABLE_HASH: usize = 256;

/// The shape of a context's inodes: their fan-out and the size up to which
/// a directory is hashed flat. Irmin calls these `entries` and
/// `stable_hash` (its `Irmin_pack.Conf.S`); both named layouts choose a
/// child by the seeded OCaml hash of its step (`Seeded_hash`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    pub entries: usize,
    pub stable_hash: usize,
    /// The deepest inode (a directory's root is at depth 0); an update
    /// that would go deeper fails: only steps chosen to collide get there.
    pub max_depth: u32,
}

impl Layout {
    /// The L1 context: Octez's `Context.Conf`, irmin's `Irmin_tezos.Conf`.
    /// A billion entries need depth 5 of its 12.
    pub const TEZOS: Layout = Layout { entries: ENTRIES, stable_hash: STABLE_HASH, max_depth: 12 };
    /// The smart rollup node's and Etherlink's context: Octez's
    /// `Context_binary.Conf` (inodes of 2, every directory of more than
    /// 2 entries hashed as an inode tree).
    /// Three of a million steps meet below depth 40 with odds of about
    /// 10⁻¹³: 64 levels are far beyond any directory not built to collide.
    pub const TEZOS_BINARY: Layout = Layout { entries: 2, stable_hash: 2, max_depth: 64 };
    /// Every layout a store or a trace may name, with its name.
    pub const NAMED: [(&'static str, Layout); 2] = [("tezos", Layout::TEZOS), ("tezos-binary", Layout::TEZOS_BINARY)];

    /// The layout named `name` (`tezos`, `tezos-binary`), if any.
    pub fn named(name: &str) -> Option<Layout> {
        Layout::NAMED.iter().find(|(n, _)| *n == name).map(|&(_, layout)| layout)
    }

    /// This layout's name, or `None` for a shape no store uses (irmin's
    /// test configurations).
    pub fn name(self) -> Option<&'static str> {
        Layout::NAMED.iter().find(|(_, l)| *l == self).map(|&(n, _)| n)
    }

    /// Child index of `name` at `depth` in an inode of this layout: the
    /// hash modulo `entries`, taken as a mask (both named layouts' fan-outs
    /// are powers of two), since the trie's search gets the layout at run
    /// time and a division would cost it more than the hash's tail.
    #[inline]
    pub fn index(self, depth: u32, name: &[u8]) -> usize {
        debug_assert!(self.entries.is_power_of_two(), "a fan-out of {} entries", self.entries);
        ocaml_hash(depth, name) as usize & (self.entries - 1)
    }

    /// Whether a directory of `len` entries is hashed flat in this layout.
    #[inline]
    pub fn hashed_flat(self, len: u64) -> bool {
        len <= self.stable_hash as u64
    }
}

/// The hashing rule of an L1 directory of `len` entries: `true` for its
/// flat node encoding (at most [`STABLE_HASH`] entries), `false` for the
/// inode hash of its root ([`Layout::hashed_flat`] of [`Layout::TEZOS`]).
#[inline]
pub fn hashed_flat(len: u64) -> bool {
    Layout::TEZOS.hashed_flat(len)
}

/// Child index of `name` at `depth` with a fan-out of `entries`, as irmin
/// writes it (`abs (seeded_hash depth step) mod entries`): the reference
/// hasher's, which checks [`Layout::index`]'s mask against it.
#[inline]
pub fn index_with(entries: usize, depth: u32, name: &[u8]) -> usize {
    ocaml_hash(depth, name) as usize % entries
}

/// Child index of `name` at `depth` in an L1 inode.
#[inline]
pub fn index(depth: u32, name: &[u8]) -> usize {
    Layout::TEZOS.index(depth, name)
}

/// Appends the encoding of a value inode; `entries` sorted by name.
pub fn encode_values<'a>(out: &mut Vec<u8>, count: usize, entries: impl Iterator<Item = (&'a [u8], Kind, &'a Hash)>) {
    out.push(0);
    write_u64(out, count as u64);
    let mut previous: Option<&[u8]> = None;
    let mut seen = 0;
    for (name, kind, hash) in entries {
        assert!(previous.is_none_or(|p| p < name), "inode entries must be sorted and unique");
        previous = Some(name);
        write_u64(out, name.len() as u64);
        out.extend_from_slice(name);
        out.push(kind.inode_tag());
        out.extend_from_slice(hash.as_bytes());
        seen += 1;
    }
    assert_eq!(seen, count, "inode entry count does not match its entries");
}

/// Appends the encoding of a tree inode; `pointers` in increasing index order.
pub fn encode_tree<'a>(out: &mut Vec<u8>, depth: u32, total: u64, pointers: impl ExactSizeIterator<Item = (usize, &'a Hash)>) {
    out.push(1);
    write_u64(out, u64::from(depth));
    write_u64(out, total);
    let count = pointers.len();
    assert!(count <= ENTRIES, "a tree inode has at most 32 pointers");
    out.push(count as u8);
    let mut previous: Option<usize> = None;
    for (index, hash) in pointers {
        assert!(index < ENTRIES && previous.is_none_or(|p| p < index), "pointers sorted by index");
        previous = Some(index);
        out.push(index as u8);
        out.extend_from_slice(hash.as_bytes());
    }
}
