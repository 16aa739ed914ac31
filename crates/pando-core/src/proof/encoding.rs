//! The binary encoding of tree proofs: Octez's
//! `Merkle_proof_encoding.V1.Tree32.tree_proof_encoding`, byte for byte.
//!
//! ```text
//! proof        = int16 version ‖ kinded before ‖ kinded after ‖ tree
//! kinded       = 00 ‖ hash (value) | 01 ‖ hash (node)
//! tree         = 00 ‖ u30 n ‖ n bytes                 Value
//!              | 01 ‖ hash                            Blinded_value
//!              | 02 ‖ u30 size ‖ (step ‖ tree)*       Node
//!              | 03 ‖ hash                            Blinded_node
//!              | 04 ‖ inode                           Inode
//!              | 05 ‖ extender                        Extender
//! inode_tree   = 00 ‖ hash | 01 ‖ u30 size ‖ (step ‖ tree)* | 02 ‖ inode
//!              | 03 ‖ extender                        (04 = none, in arrays)
//! inode        = int64 length ‖ (00 ‖ u30 size ‖ (u8 index ‖ inode_tree)*
//!                                | 01 ‖ 32 × (inode_tree | 04))
//! extender     = int64 length ‖ u8 n ‖ n bytes of 5-bit indices ‖ inode_tree
//! step         = u8 n ‖ n bytes
//! ```
//!
//! Integers are big-endian; `u30` is the 4-byte size of what follows, at
//! most 2³⁰ − 1 as in `Data_encoding`. An inode lists its children sparsely
//! when it has fewer than 16, densely otherwise. Segment indices are packed
//! 5 bits each, most significant first, then a 1 bit and zero padding.
//!
//! Invariants: decoding never panics and never recurses deeper than
//! [`MAX_NESTING`]; it accepts exactly the canonical bytes the encoder
//! writes (a dense list of fewer than 16 children, unsorted indices or
//! trailing bytes are errors), so a proof has one encoding.

use super::types::{Extender, ExtenderOf, Inode, InodeOf, InodeTree, KindedHash, Tree, TreeProof};
use crate::hash::{HASH_SIZE, Hash};
use crate::inode::ENTRIES;

/// Deepest nesting of trees, inodes and extender segments a decoded proof
/// may have. Real proofs nest a few dozen levels; at this bound decoding,
/// checking and hashing fit in a 1 MiB stack (WebAssembly's default).
pub const MAX_NESTING: usize = 512;
/// Largest size field of `Data_encoding` (a `uint30`).
pub(super) const MAX_U30: usize = (1 << 30) - 1;
/// Longest step and longest segment field (a length on one byte).
pub(super) const MAX_SHORT: usize = 255;
/// Children from which an inode is encoded densely.
const DENSE_FROM: usize = ENTRIES / 2;

/// Why bytes are not a proof, or a proof cannot be encoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodingError {
    #[error("proof truncated at byte {at}: {needed} more bytes needed")]
    Truncated { at: usize, needed: usize },
    #[error("invalid proof at byte {at}: {reason}")]
    Invalid { at: usize, reason: String },
    #[error("{trailing} bytes after the end of the proof")]
    Trailing { trailing: usize },
    #[error("proof nested deeper than {MAX_NESTING} levels at byte {at}")]
    TooDeep { at: usize },
    #[error("cannot encode: {0}")]
    Unencodable(String),
}

// ---------------------------------------------------------------- encoding

/// The encoding of `proof`.
pub fn encode(proof: &TreeProof) -> Result<Vec<u8>, EncodingError> {
    let mut out = Vec::new();
    out.extend_from_slice(&proof.version.to_be_bytes());
    kinded(&mut out, &proof.before);
    kinded(&mut out, &proof.after);
    tree(&mut out, &proof.state)?;
    Ok(out)
}

pub(super) fn kinded(out: &mut Vec<u8>, hash: &KindedHash) {
    match hash {
        KindedHash::Value(_) => out.push(0),
        KindedHash::Node(_) => out.push(1),
    }
    out.extend_from_slice(hash.hash().as_bytes());
}

fn tree(out: &mut Vec<u8>, t: &Tree) -> Result<(), EncodingError> {
    match t {
        Tree::Value(bytes) => {
            out.push(0);
            sized(out, |out| {
                out.extend_from_slice(bytes);
                Ok(())
            })?;
        }
        Tree::BlindedValue(h) => hash(out, 1, h),
        Tree::Node(entries) => {
            out.push(2);
            sized(out, |out| steps(out, entries))?;
        }
        Tree::BlindedNode(h) => hash(out, 3, h),
        Tree::Inode(i) => {
            out.push(4);
            inode(out, i)?;
        }
        Tree::Extender(e) => {
            out.push(5);
            extender(out, e)?;
        }
    }
    Ok(())
}

fn inode_tree(out: &mut Vec<u8>, t: &InodeTree) -> Result<(), EncodingError> {
    match t {
        InodeTree::BlindedInode(h) => hash(out, 0, h),
        InodeTree::InodeValues(entries) => {
            out.push(1);
            sized(out, |out| steps(out, entries))?;
        }
        InodeTree::InodeTree(i) => {
            out.push(2);
            inode(out, i)?;
        }
        InodeTree::InodeExtender(e) => {
            out.push(3);
            extender(out, e)?;
        }
    }
    Ok(())
}

pub(super) fn hash(out: &mut Vec<u8>, tag: u8, h: &Hash) {
    out.push(tag);
    out.extend_from_slice(h.as_bytes());
}

/// Writes what `body` appends, preceded by its size on 4 bytes.
pub(super) fn sized(
    out: &mut Vec<u8>,
    body: impl FnOnce(&mut Vec<u8>) -> Result<(), EncodingError>,
) -> Result<(), EncodingError> {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    body(out)?;
    let size = out.len() - at - 4;
    if size > MAX_U30 {
        return Err(EncodingError::Unencodable(format!("a field of {size} bytes (at most {MAX_U30})")));
    }
    out[at..at + 4].copy_from_slice(&(size as u32).to_be_bytes());
    Ok(())
}

fn steps(out: &mut Vec<u8>, entries: &[(Vec<u8>, Tree)]) -> Result<(), EncodingError> {
    for (step, t) in entries {
        short(out, step, "step")?;
        tree(out, t)?;
    }
    Ok(())
}

pub(super) fn short(out: &mut Vec<u8>, bytes: &[u8], what: &str) -> Result<(), EncodingError> {
    if bytes.len() > MAX_SHORT {
        return Err(EncodingError::Unencodable(format!("a {what} of {} bytes (at most {MAX_SHORT})", bytes.len())));
    }
    out.push(bytes.len() as u8);
    out.extend_from_slice(bytes);
    Ok(())
}

pub(super) fn length(out: &mut Vec<u8>, length: u64) -> Result<(), EncodingError> {
    let length = i64::try_from(length).map_err(|_| EncodingError::Unencodable(format!("an inode length of {length}")))?;
    out.extend_from_slice(&length.to_be_bytes());
    Ok(())
}

fn inode(out: &mut Vec<u8>, i: &Inode) -> Result<(), EncodingError> {
    inode_with(out, i, 4, inode_tree)
}

/// Writes an inode whose children `child` writes; `hole` stands for an
/// absent child in a dense array.
pub(super) fn inode_with<T>(
    out: &mut Vec<u8>,
    i: &InodeOf<T>,
    hole: u8,
    mut child: impl FnMut(&mut Vec<u8>, &T) -> Result<(), EncodingError>,
) -> Result<(), EncodingError> {
    length(out, i.length)?;
    if i.proofs.len() < DENSE_FROM {
        out.push(0);
        sized(out, |out| {
            for (index, c) in &i.proofs {
                out.push(*index);
                child(out, c)?;
            }
            Ok(())
        })
    } else {
        out.push(1);
        dense_children(out, i, hole, child)?;
        Ok(())
    }
}

/// Writes the 32 children of a dense inode in index order, `hole` for an
/// absent one (the same in V1 and V2).
pub(super) fn dense_children<T>(
    out: &mut Vec<u8>,
    i: &InodeOf<T>,
    hole: u8,
    mut child: impl FnMut(&mut Vec<u8>, &T) -> Result<(), EncodingError>,
) -> Result<(), EncodingError> {
    let mut slots: [Option<&T>; ENTRIES] = [None; ENTRIES];
    for (index, c) in &i.proofs {
        let slot = slots
            .get_mut(usize::from(*index))
            .ok_or_else(|| EncodingError::Unencodable(format!("an inode child at index {index}")))?;
        *slot = Some(c);
    }
    for slot in slots {
        match slot {
            Some(c) => child(out, c)?,
            None => out.push(hole),
        }
    }
    Ok(())
}

/// Writes a segment of 5-bit indices, packed (the same in every encoding).
pub(super) fn segment(out: &mut Vec<u8>, indices: &[u8]) -> Result<(), EncodingError> {
    if let Some(bad) = indices.iter().find(|i| usize::from(**i) >= ENTRIES) {
        return Err(EncodingError::Unencodable(format!("a segment index of {bad}")));
    }
    short(out, &pack_segment(indices), "segment")
}

fn extender(out: &mut Vec<u8>, e: &Extender) -> Result<(), EncodingError> {
    length(out, e.length)?;
    segment(out, &e.segment)?;
    inode_tree(out, &e.proof)
}

/// Packs indices below 32 in 5 bits each, most significant bit first, then
/// a closing 1 bit and zero padding to the byte.
pub fn pack_segment(indices: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity((indices.len() * 5 + 8) / 8);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for &i in indices {
        acc = (acc << 5) | u32::from(i & 31);
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // The closing bit, then zeros to the end of the byte.
    acc = (acc << 1) | 1;
    bits += 1;
    out.push((acc << (8 - bits)) as u8);
    out
}

/// The indices of a packed segment, or `None` if the bytes are not one.
pub fn unpack_segment(bytes: &[u8]) -> Option<Vec<u8>> {
    let last = *bytes.last()?;
    if last == 0 {
        return None;
    }
    let bits = bytes.len() * 8 - (last.trailing_zeros() as usize + 1);
    if !bits.is_multiple_of(5) {
        return None;
    }
    let mut out = Vec::with_capacity(bits / 5);
    for n in 0..bits / 5 {
        let mut index = 0u8;
        for bit in n * 5..n * 5 + 5 {
            index = (index << 1) | ((bytes[bit / 8] >> (7 - bit % 8)) & 1);
        }
        out.push(index);
    }
    Some(out)
}

// ---------------------------------------------------------------- decoding

/// Decodes a proof, requiring the bytes to hold exactly one.
pub fn decode(bytes: &[u8]) -> Result<TreeProof, EncodingError> {
    let mut r = Reader { bytes, pos: 0, nesting: 0 };
    let version = i16::from_be_bytes(r.array()?);
    let before = r.kinded()?;
    let after = r.kinded()?;
    let state = r.tree()?;
    if r.pos != bytes.len() {
        return Err(EncodingError::Trailing { trailing: bytes.len() - r.pos });
    }
    Ok(TreeProof { version, before, after, state })
}

/// A cursor over bytes to decode, shared by the proof encodings: every
/// read is bounds-checked and nesting is counted against [`MAX_NESTING`].
pub(super) struct Reader<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) pos: usize,
    pub(super) nesting: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], EncodingError> {
        let available = self.bytes.len() - self.pos;
        if n > available {
            return Err(EncodingError::Truncated { at: self.pos, needed: n - available });
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N], EncodingError> {
        Ok(self.take(N)?.try_into().expect("took N bytes"))
    }

    pub(super) fn u8(&mut self) -> Result<u8, EncodingError> {
        Ok(self.array::<1>()?[0])
    }

    pub(super) fn invalid(&self, at: usize, reason: impl Into<String>) -> EncodingError {
        EncodingError::Invalid { at, reason: reason.into() }
    }

    pub(super) fn hash(&mut self) -> Result<Hash, EncodingError> {
        Ok(Hash(self.array::<HASH_SIZE>()?))
    }

    pub(super) fn kinded(&mut self) -> Result<KindedHash, EncodingError> {
        let at = self.pos;
        match self.u8()? {
            0 => Ok(KindedHash::Value(self.hash()?)),
            1 => Ok(KindedHash::Node(self.hash()?)),
            tag => Err(self.invalid(at, format!("kinded hash tag {tag}"))),
        }
    }

    /// The end of a field whose 4-byte size comes next.
    pub(super) fn size(&mut self) -> Result<usize, EncodingError> {
        let at = self.pos;
        let size = u32::from_be_bytes(self.array()?) as usize;
        if size > MAX_U30 {
            return Err(self.invalid(at, format!("size {size} above 2^30 - 1")));
        }
        let end = self.pos + size;
        if end > self.bytes.len() {
            return Err(EncodingError::Truncated { at: self.pos, needed: end - self.bytes.len() });
        }
        Ok(end)
    }

    pub(super) fn short(&mut self) -> Result<&'a [u8], EncodingError> {
        let n = usize::from(self.u8()?);
        self.take(n)
    }

    pub(super) fn length(&mut self) -> Result<u64, EncodingError> {
        let at = self.pos;
        let length = i64::from_be_bytes(self.array()?);
        u64::try_from(length).map_err(|_| self.invalid(at, format!("negative inode length {length}")))
    }

    pub(super) fn enter(&mut self, levels: usize) -> Result<(), EncodingError> {
        self.nesting += levels;
        if self.nesting > MAX_NESTING {
            return Err(EncodingError::TooDeep { at: self.pos });
        }
        Ok(())
    }

    fn tree(&mut self) -> Result<Tree, EncodingError> {
        self.enter(1)?;
        let at = self.pos;
        let t = match self.u8()? {
            0 => {
                let end = self.size()?;
                Tree::Value(self.take(end - self.pos)?.to_vec())
            }
            1 => Tree::BlindedValue(self.hash()?),
            2 => Tree::Node(self.steps()?),
            3 => Tree::BlindedNode(self.hash()?),
            4 => Tree::Inode(self.inode()?),
            5 => Tree::Extender(self.extender()?),
            tag => return Err(self.invalid(at, format!("tree tag {tag}"))),
        };
        self.nesting -= 1;
        Ok(t)
    }

    /// An inode tree, or `None` for the absent child of a dense inode.
    fn inode_tree(&mut self) -> Result<Option<InodeTree>, EncodingError> {
        self.enter(1)?;
        let at = self.pos;
        let t = match self.u8()? {
            0 => InodeTree::BlindedInode(self.hash()?),
            1 => InodeTree::InodeValues(self.steps()?),
            2 => InodeTree::InodeTree(self.inode()?),
            3 => InodeTree::InodeExtender(self.extender()?),
            4 => {
                self.nesting -= 1;
                return Ok(None);
            }
            tag => return Err(self.invalid(at, format!("inode tree tag {tag}"))),
        };
        self.nesting -= 1;
        Ok(Some(t))
    }

    fn required_inode_tree(&mut self) -> Result<InodeTree, EncodingError> {
        let at = self.pos;
        self.inode_tree()?.ok_or_else(|| self.invalid(at, "an absent inode where one is required"))
    }

    fn steps(&mut self) -> Result<Vec<(Vec<u8>, Tree)>, EncodingError> {
        self.sized_items(|r| Ok((r.short()?.to_vec(), r.tree()?)))
    }

    /// A list whose 4-byte size comes next, each item read by `item`; the
    /// items must end exactly at the size.
    pub(super) fn sized_items<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<T, EncodingError>,
    ) -> Result<Vec<T>, EncodingError> {
        let end = self.size()?;
        let mut out = Vec::new();
        while self.pos < end {
            out.push(item(self)?);
        }
        if self.pos != end {
            return Err(self.invalid(end, "a list overruns its size"));
        }
        Ok(out)
    }

    /// A sparse inode's child: its index, after `last`'s, then the child.
    pub(super) fn indexed_child<T>(
        &mut self,
        last: Option<u8>,
        child: impl FnOnce(&mut Self) -> Result<Option<T>, EncodingError>,
    ) -> Result<(u8, T), EncodingError> {
        let at = self.pos;
        let index = self.u8()?;
        if usize::from(index) >= ENTRIES || last.is_some_and(|last| last >= index) {
            return Err(self.invalid(at, format!("inode child index {index} out of range or order")));
        }
        let c = child(self)?.ok_or_else(|| self.invalid(at, "an absent inode where one is required"))?;
        Ok((index, c))
    }

    /// A dense inode's 32 children, holes left out.
    pub(super) fn dense_children<T>(
        &mut self,
        mut child: impl FnMut(&mut Self) -> Result<Option<T>, EncodingError>,
    ) -> Result<Vec<(u8, T)>, EncodingError> {
        let mut proofs = Vec::new();
        for index in 0..ENTRIES as u8 {
            if let Some(c) = child(self)? {
                proofs.push((index, c));
            }
        }
        Ok(proofs)
    }

    fn inode(&mut self) -> Result<Inode, EncodingError> {
        self.inode_with(Self::inode_tree)
    }

    /// An inode whose children `child` reads (`None` for a dense array's
    /// hole).
    pub(super) fn inode_with<T>(
        &mut self,
        mut child: impl FnMut(&mut Self) -> Result<Option<T>, EncodingError>,
    ) -> Result<InodeOf<T>, EncodingError> {
        let length = self.length()?;
        let at = self.pos;
        let mut proofs = Vec::new();
        match self.u8()? {
            0 => {
                let end = self.size()?;
                while self.pos < end {
                    let last = proofs.last().map(|(index, _)| *index);
                    proofs.push(self.indexed_child(last, &mut child)?);
                }
                if self.pos != end {
                    return Err(self.invalid(end, "a list overruns its size"));
                }
                if proofs.len() >= DENSE_FROM {
                    return Err(self.invalid(at, format!("{} children listed sparsely (dense from 16)", proofs.len())));
                }
            }
            1 => {
                proofs = self.dense_children(child)?;
                if proofs.len() < DENSE_FROM {
                    return Err(self.invalid(at, format!("{} children listed densely (sparse below 16)", proofs.len())));
                }
            }
            tag => return Err(self.invalid(at, format!("inode proofs tag {tag}"))),
        }
        Ok(InodeOf { length, proofs })
    }

    /// An extender of `length` (read by the caller, as its encoding has
    /// it): its segment, then what `proof` reads, one nesting level per
    /// index of the segment.
    pub(super) fn extender_with<T>(
        &mut self,
        length: u64,
        proof: impl FnOnce(&mut Self) -> Result<T, EncodingError>,
    ) -> Result<ExtenderOf<T>, EncodingError> {
        let segment = self.segment()?;
        self.enter(segment.len())?;
        let proof = proof(self)?;
        self.nesting -= segment.len();
        Ok(ExtenderOf { length, segment, proof })
    }

    /// A packed segment of 5-bit indices, in its canonical packing.
    pub(super) fn segment(&mut self) -> Result<Vec<u8>, EncodingError> {
        let at = self.pos;
        let packed = self.short()?;
        let segment = unpack_segment(packed).ok_or_else(|| self.invalid(at, "invalid 5-bit segment list"))?;
        if pack_segment(&segment) != packed {
            return Err(self.invalid(at, "non-canonical segment padding"));
        }
        Ok(segment)
    }

    fn extender(&mut self) -> Result<Extender, EncodingError> {
        let length = self.length()?;
        self.extender_with(length, |r| r.required_inode_tree().map(Box::new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_pack_like_octez() {
        // One index: aaaaa100.
        assert_eq!(pack_segment(&[0b10101]), vec![0b1010_1100]);
        // Eight indices fill five bytes exactly: a closing byte 0x80 follows.
        assert_eq!(pack_segment(&[31; 8]), vec![0xff, 0xff, 0xff, 0xff, 0xff, 0x80]);
        assert_eq!(pack_segment(&[]), vec![0x80]);
        for n in 0..40u8 {
            let indices: Vec<u8> = (0..n).map(|i| ((u32::from(i) * 7 + 3) % 32) as u8).collect();
            let packed = pack_segment(&indices);
            assert_eq!(packed.len(), (indices.len() * 5 + 8) / 8, "Octez's size");
            assert_eq!(unpack_segment(&packed), Some(indices));
        }
        assert_eq!(unpack_segment(&[]), None);
        assert_eq!(unpack_segment(&[0]), None);
        // 7 bits before the closing bit are not a multiple of 5.
        assert_eq!(unpack_segment(&[0b0000_0001]), None);
    }
}
