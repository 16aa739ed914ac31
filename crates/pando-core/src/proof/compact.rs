//! The compact binary encoding of tree proofs: Octez's
//! `Merkle_proof_encoding.V2.Tree32.tree_proof_encoding` (light mode's
//! `merkle_tree_v2`), byte for byte. It is `Data_encoding.Compact`: the
//! tags of a value's parts are packed into one byte ahead of it, and
//! small lists and integers carry their size in those tag bits.
//!
//! ```text
//! proof      = u8 (bit 0: before is a node, bit 1: after is a node)
//!              ‖ int16 version ‖ hash ‖ hash ‖ tree
//! tree       = 0ppppp ll ‖ inode                    Inode
//!            | 10 cccccc ‖ entries                  Node
//!            | 110000 tt ‖ value                    Value
//!            | 11001000 ‖ hash                      Blinded_value
//!            | 11010000 ‖ hash                      Blinded_node
//!            | 110110 ll ‖ extender                 Extender
//! inode_tree = 0ppppp ll ‖ inode                    Inode_tree
//!            | 10 cccccc ‖ entries                  Inode_values
//!            | 11000000 ‖ hash                      Blinded_inode
//!            | 110100 ll ‖ extender                 Inode_extender
//!            | 11100000                             none (a dense array's hole)
//! inode      = length(ll) ‖ (ppppp = 0nnnn: n × (u8 index ‖ inode_tree)
//!                           | ppppp = 10000: 32 × inode_tree)
//! entries    = cccccc < 63: c × (step ‖ tree)
//!            | cccccc = 63: u30 size ‖ (step ‖ tree)*   (63 entries or more)
//! extender   = length(ll) ‖ u8 n ‖ n bytes of 5-bit indices ‖ inode_tree
//! length(ll) = 00: u8 | 01: u16 | 10: u32 | 11: int64, the shortest that fits
//! value(tt)  = 00: u8 n | 01: u16 n (n ≥ 256) | 11: u30 n (n ≥ 65536); n bytes
//! step       = u8 n ‖ n bytes
//! ```
//!
//! Integers are big-endian. The tag bits are Data_encoding's: an object's
//! first field in the lowest bits, a union's case index above its cases'
//! own bits. (Octez's comments beside the stream encoding name tags that
//! its code does not produce; the code is what this follows.) An inode
//! lists its children sparsely below 15 of them, densely from 15.
//!
//! Invariants: as [`super::encoding`]: decoding never panics, never nests
//! deeper than [`super::encoding::MAX_NESTING`], and accepts exactly the bytes the encoder
//! writes (a non-minimal length or size, a sparse list of 15 children or
//! more, a dense one of fewer, a long list of fewer than 63 entries are
//! errors), so a proof has one encoding.

use super::encoding::{EncodingError, MAX_SHORT, MAX_U30, Reader, dense_children, hash, sized};
use super::types::{ExtenderOf, InodeOf, InodeTree, KindedHash, Tree, TreeProof};
use crate::hash::Hash;

/// Children from which an inode is encoded densely (Octez: "due to the
/// limitation of tag bits, we encode lists whose length is 15 as an array").
pub(super) const DENSE_FROM: usize = 15;
/// Entries a list carries in its tag (6 bits); the last tag value says the
/// list is sized instead.
const SHORT_LIST: usize = 63;

const TREE_VALUE: u8 = 0b1100_0000;
const TREE_BLINDED_VALUE: u8 = 0b1100_1000;
const TREE_BLINDED_NODE: u8 = 0b1101_0000;
const TREE_EXTENDER: u8 = 0b1101_1000;
const INODE_BLINDED: u8 = 0b1100_0000;
const INODE_EXTENDER: u8 = 0b1101_0000;
/// A dense array's hole, and the `None` case of both unions.
const NONE: u8 = 0b1110_0000;

// ---------------------------------------------------------------- encoding

/// The V2 encoding of `proof`.
pub fn encode(proof: &TreeProof) -> Result<Vec<u8>, EncodingError> {
    let mut out = header(proof.version, &proof.before, &proof.after);
    tree(&mut out, &proof.state)?;
    Ok(out)
}

/// The tag byte, version and hashes every V2 proof starts with.
pub(super) fn header(version: i16, before: &KindedHash, after: &KindedHash) -> Vec<u8> {
    let node = |h: &KindedHash| u8::from(matches!(h, KindedHash::Node(_)));
    let mut out = vec![node(before) | node(after) << 1];
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(before.hash().as_bytes());
    out.extend_from_slice(after.hash().as_bytes());
    out
}

fn tree(out: &mut Vec<u8>, t: &Tree) -> Result<(), EncodingError> {
    match t {
        Tree::Inode(i) => inode(out, i, NONE, inode_tree)?,
        Tree::Node(entries) => steps(out, entries)?,
        Tree::Value(bytes) => value(out, TREE_VALUE, bytes)?,
        Tree::BlindedValue(h) => hash(out, TREE_BLINDED_VALUE, h),
        Tree::BlindedNode(h) => hash(out, TREE_BLINDED_NODE, h),
        Tree::Extender(e) => extender(out, TREE_EXTENDER, e, |out| inode_tree(out, &e.proof))?,
    }
    Ok(())
}

fn inode_tree(out: &mut Vec<u8>, t: &InodeTree) -> Result<(), EncodingError> {
    match t {
        InodeTree::InodeTree(i) => inode(out, i, NONE, inode_tree),
        InodeTree::InodeValues(entries) => steps(out, entries),
        InodeTree::BlindedInode(h) => {
            hash(out, INODE_BLINDED, h);
            Ok(())
        }
        InodeTree::InodeExtender(e) => extender(out, INODE_EXTENDER, e, |out| inode_tree(out, &e.proof)),
    }
}

/// The 2 tag bits of a compact `int64` and its bytes.
pub(super) fn length_bits(length: u64) -> Result<(u8, Vec<u8>), EncodingError> {
    Ok(match length {
        0..=0xff => (0, vec![length as u8]),
        0x100..=0xffff => (1, (length as u16).to_be_bytes().to_vec()),
        0x1_0000..=0xffff_ffff => (2, (length as u32).to_be_bytes().to_vec()),
        _ => {
            let length = i64::try_from(length).map_err(|_| EncodingError::Unencodable(format!("an inode length of {length}")))?;
            (3, length.to_be_bytes().to_vec())
        }
    })
}

/// Writes an inode (tag byte `0ppppp ll`) whose children `child` writes;
/// `hole` stands for an absent child in a dense array.
pub(super) fn inode<T>(
    out: &mut Vec<u8>,
    i: &InodeOf<T>,
    hole: u8,
    mut child: impl FnMut(&mut Vec<u8>, &T) -> Result<(), EncodingError>,
) -> Result<(), EncodingError> {
    let (bits, length) = length_bits(i.length)?;
    let dense = i.proofs.len() >= DENSE_FROM;
    let proofs_tag = if dense { 0b1_0000 } else { i.proofs.len() as u8 };
    out.push(bits | proofs_tag << 2);
    out.extend_from_slice(&length);
    if dense {
        dense_children(out, i, hole, child)?;
    } else {
        for (index, c) in &i.proofs {
            out.push(*index);
            child(out, c)?;
        }
    }
    Ok(())
}

/// Writes an extender (tag byte `tag | ll`) ending in what `proof` writes.
pub(super) fn extender<T>(
    out: &mut Vec<u8>,
    tag: u8,
    e: &ExtenderOf<T>,
    proof: impl FnOnce(&mut Vec<u8>) -> Result<(), EncodingError>,
) -> Result<(), EncodingError> {
    let (bits, length) = length_bits(e.length)?;
    out.push(tag | bits);
    out.extend_from_slice(&length);
    super::encoding::segment(out, &e.segment)?;
    proof(out)
}

/// Writes a list (tag byte `10 cccccc`) of `items`, each by `item`.
pub(super) fn list<T>(
    out: &mut Vec<u8>,
    items: &[T],
    mut item: impl FnMut(&mut Vec<u8>, &T) -> Result<(), EncodingError>,
) -> Result<(), EncodingError> {
    if items.len() < SHORT_LIST {
        out.push(0b1000_0000 | items.len() as u8);
        items.iter().try_for_each(|i| item(out, i))
    } else {
        out.push(0b1000_0000 | SHORT_LIST as u8);
        sized(out, |out| items.iter().try_for_each(|i| item(out, i)))
    }
}

fn steps(out: &mut Vec<u8>, entries: &[(Vec<u8>, Tree)]) -> Result<(), EncodingError> {
    list(out, entries, |out, (step, t)| {
        super::encoding::short(out, step, "step")?;
        tree(out, t)
    })
}

/// Writes a value (tag byte `tag | tt`).
pub(super) fn value(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) -> Result<(), EncodingError> {
    let n = bytes.len();
    if n < 0x100 {
        out.push(tag);
        out.push(n as u8);
    } else if n < 0x1_0000 {
        out.push(tag | 1);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else if n <= MAX_U30 {
        out.push(tag | 3);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        return Err(EncodingError::Unencodable(format!("a value of {n} bytes (at most {MAX_U30})")));
    }
    out.extend_from_slice(bytes);
    Ok(())
}

// ---------------------------------------------------------------- decoding

/// Decodes a V2 proof, requiring the bytes to hold exactly one.
pub fn decode(bytes: &[u8]) -> Result<TreeProof, EncodingError> {
    let mut r = Reader { bytes, pos: 0, nesting: 0 };
    let (version, before, after) = read_header(&mut r)?;
    let state = read_tree(&mut r)?;
    r.finish()?;
    Ok(TreeProof { version, before, after, state })
}

pub(super) fn read_header(r: &mut Reader<'_>) -> Result<(i16, KindedHash, KindedHash), EncodingError> {
    let tag = r.u8()?;
    if tag > 0b11 {
        return Err(r.invalid(0, format!("proof tag {tag:#04x}")));
    }
    let version = i16::from_be_bytes(r.array()?);
    let kinded = |node: bool, h: Hash| if node { KindedHash::Node(h) } else { KindedHash::Value(h) };
    let before = kinded(tag & 1 != 0, r.hash()?);
    let after = kinded(tag & 2 != 0, r.hash()?);
    Ok((version, before, after))
}

impl Reader<'_> {
    /// Checks that nothing follows the proof.
    pub(super) fn finish(&self) -> Result<(), EncodingError> {
        if self.pos != self.bytes.len() {
            return Err(EncodingError::Trailing { trailing: self.bytes.len() - self.pos });
        }
        Ok(())
    }

    /// A compact `int64` length of tag bits `bits`, in its shortest form.
    pub(super) fn compact_length(&mut self, bits: u8) -> Result<u64, EncodingError> {
        let at = self.pos;
        let (length, least) = match bits & 0b11 {
            0 => (u64::from(self.u8()?), 0),
            1 => (u64::from(u16::from_be_bytes(self.array()?)), 0x100),
            2 => (u64::from(u32::from_be_bytes(self.array()?)), 0x1_0000),
            _ => {
                let length = i64::from_be_bytes(self.array()?);
                let length = u64::try_from(length).map_err(|_| self.invalid(at, format!("negative inode length {length}")))?;
                (length, 0x1_0000_0000)
            }
        };
        if length < least {
            return Err(self.invalid(at, format!("length {length} not in its shortest form")));
        }
        Ok(length)
    }

    /// A list whose tag bits `bits` (6) give its length or say it is sized.
    pub(super) fn compact_list<T>(
        &mut self,
        bits: u8,
        mut item: impl FnMut(&mut Self) -> Result<T, EncodingError>,
    ) -> Result<Vec<T>, EncodingError> {
        let at = self.pos;
        let count = usize::from(bits & 0b11_1111);
        if count < SHORT_LIST {
            return (0..count).map(|_| item(self)).collect();
        }
        let out = self.sized_items(item)?;
        if out.len() < SHORT_LIST {
            return Err(self.invalid(at, format!("a list of {} items sized (counted below {SHORT_LIST})", out.len())));
        }
        Ok(out)
    }

    /// An inode whose tag byte is `tag`, its children read by `child`
    /// (`None` for a dense array's hole).
    pub(super) fn compact_inode<T>(
        &mut self,
        tag: u8,
        mut child: impl FnMut(&mut Self) -> Result<Option<T>, EncodingError>,
    ) -> Result<InodeOf<T>, EncodingError> {
        let at = self.pos - 1;
        let length = self.compact_length(tag)?;
        let proofs_tag = (tag >> 2) & 0b1_1111;
        let mut proofs = Vec::new();
        if proofs_tag == 0b1_0000 {
            proofs = self.dense_children(child)?;
            if proofs.len() < DENSE_FROM {
                return Err(self.invalid(at, format!("{} children listed densely (sparse below {DENSE_FROM})", proofs.len())));
            }
        } else if usize::from(proofs_tag) < DENSE_FROM {
            for _ in 0..proofs_tag {
                let last = proofs.last().map(|(index, _)| *index);
                proofs.push(self.indexed_child(last, &mut child)?);
            }
        } else {
            return Err(self.invalid(at, format!("inode proofs tag {proofs_tag:#07b}")));
        }
        Ok(InodeOf { length, proofs })
    }

    /// An extender whose tag byte is `tag`, ending in what `proof` reads.
    pub(super) fn compact_extender<T>(
        &mut self,
        tag: u8,
        proof: impl FnOnce(&mut Self) -> Result<T, EncodingError>,
    ) -> Result<ExtenderOf<T>, EncodingError> {
        let length = self.compact_length(tag)?;
        self.extender_with(length, proof)
    }

    /// A value whose tag byte is `tag` (2 low bits: the size's width).
    pub(super) fn compact_value(&mut self, tag: u8) -> Result<Vec<u8>, EncodingError> {
        let at = self.pos;
        let (n, least) = match tag & 0b11 {
            0 => (usize::from(self.u8()?), 0),
            1 => (usize::from(u16::from_be_bytes(self.array()?)), 0x100),
            3 => (u32::from_be_bytes(self.array()?) as usize, 0x1_0000),
            _ => return Err(self.invalid(at - 1, "the void `long_bytes` case")),
        };
        if n < least || n > MAX_U30 {
            return Err(self.invalid(at, format!("a value size of {n} not in its shortest form")));
        }
        Ok(self.take(n)?.to_vec())
    }

    fn compact_step(&mut self) -> Result<Vec<u8>, EncodingError> {
        let step = self.short()?;
        debug_assert!(step.len() <= MAX_SHORT);
        Ok(step.to_vec())
    }
}

fn read_tree(r: &mut Reader<'_>) -> Result<Tree, EncodingError> {
    r.enter(1)?;
    let at = r.pos;
    let tag = r.u8()?;
    let t = match tag {
        0x00..=0x7f => Tree::Inode(r.compact_inode(tag, read_inode_tree)?),
        0x80..=0xbf => Tree::Node(read_steps(r, tag)?),
        0xc0 | 0xc1 | 0xc3 => Tree::Value(r.compact_value(tag)?),
        TREE_BLINDED_VALUE => Tree::BlindedValue(r.hash()?),
        TREE_BLINDED_NODE => Tree::BlindedNode(r.hash()?),
        0xd8..=0xdb => Tree::Extender(r.compact_extender(tag, |r| required_inode_tree(r).map(Box::new))?),
        _ => return Err(r.invalid(at, format!("tree tag {tag:#04x}"))),
    };
    r.nesting -= 1;
    Ok(t)
}

fn read_steps(r: &mut Reader<'_>, tag: u8) -> Result<Vec<(Vec<u8>, Tree)>, EncodingError> {
    r.compact_list(tag, |r| Ok((r.compact_step()?, read_tree(r)?)))
}

/// An inode tree, or `None` for a dense array's hole.
fn read_inode_tree(r: &mut Reader<'_>) -> Result<Option<InodeTree>, EncodingError> {
    r.enter(1)?;
    let at = r.pos;
    let tag = r.u8()?;
    let t = match tag {
        0x00..=0x7f => InodeTree::InodeTree(r.compact_inode(tag, read_inode_tree)?),
        0x80..=0xbf => InodeTree::InodeValues(read_steps(r, tag)?),
        INODE_BLINDED => InodeTree::BlindedInode(r.hash()?),
        0xd0..=0xd3 => InodeTree::InodeExtender(r.compact_extender(tag, |r| required_inode_tree(r).map(Box::new))?),
        NONE => {
            r.nesting -= 1;
            return Ok(None);
        }
        _ => return Err(r.invalid(at, format!("inode tree tag {tag:#04x}"))),
    };
    r.nesting -= 1;
    Ok(Some(t))
}

fn required_inode_tree(r: &mut Reader<'_>) -> Result<InodeTree, EncodingError> {
    let at = r.pos;
    read_inode_tree(r)?.ok_or_else(|| r.invalid(at, "an absent inode where one is required"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proof::types::Inode;

    fn h(b: u8) -> Hash {
        Hash([b; 32])
    }

    /// Tag bytes computed by hand from Octez's unions (see the module
    /// header), checked on the encoder's output.
    #[test]
    fn tags_follow_data_encodings_compact_layout() {
        let proof = TreeProof {
            version: 0,
            before: KindedHash::Node(h(1)),
            after: KindedHash::Value(h(2)),
            state: Tree::Node(vec![(b"a".to_vec(), Tree::Value(b"xy".to_vec())), (b"b".to_vec(), Tree::BlindedNode(h(3)))]),
        };
        let bytes = encode(&proof).unwrap();
        let mut expected = vec![0b01, 0, 0];
        expected.extend_from_slice(&[1; 32]);
        expected.extend_from_slice(&[2; 32]);
        expected.extend_from_slice(&[0x82, 1, b'a', 0xc0, 2, b'x', b'y', 1, b'b', 0xd0]);
        expected.extend_from_slice(&[3; 32]);
        assert_eq!(bytes, expected);
        assert_eq!(decode(&bytes).unwrap(), proof);

        // An inode of length 300 (u16: ll = 01) with one sparse child.
        let inode = Tree::Inode(Inode { length: 300, proofs: vec![(7, InodeTree::BlindedInode(h(4)))] });
        let mut out = Vec::new();
        tree(&mut out, &inode).unwrap();
        assert_eq!(&out[..5], &[0b0000_0101, 0x01, 0x2c, 7, 0xc0]);
        // An extender of length 40 (u8), segment [1]: 00001 1 00 → 0x0c.
        let ext = Tree::Extender(crate::proof::types::Extender {
            length: 40,
            segment: vec![1],
            proof: Box::new(InodeTree::BlindedInode(h(5))),
        });
        let mut out = Vec::new();
        tree(&mut out, &ext).unwrap();
        assert_eq!(&out[..5], &[0xd8, 40, 1, 0x0c, 0xc0]);
    }

    #[test]
    fn non_canonical_forms_are_rejected() {
        let mut r = Reader { bytes: &[0x00, 0x05], pos: 0, nesting: 0 };
        assert!(r.compact_length(1).is_err(), "5 on two bytes");
        let mut r = Reader { bytes: &[0x00, 0x05], pos: 0, nesting: 0 };
        assert!(r.compact_value(1).is_err(), "5 bytes with a u16 size");
        let mut r = Reader { bytes: &[0, 0, 0, 0], pos: 0, nesting: 0 };
        assert!(r.compact_list(63, |r| r.u8()).is_err(), "an empty sized list");
    }
}
