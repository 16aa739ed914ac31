//! The binary encodings of stream proofs: Octez's
//! `Merkle_proof_encoding.{V1,V2}.Tree32.stream_proof_encoding`, byte for
//! byte.
//!
//! ```text
//! V1:
//! proof  = int16 version ‖ kinded before ‖ kinded after ‖ u30 size ‖ elt*
//! elt    = 00 ‖ u30 n ‖ n bytes                                    Value
//!        | 01 ‖ u30 size ‖ (step ‖ kinded)*                        Node
//!        | 02 ‖ int64 length ‖ (00 ‖ u30 size ‖ (u8 index ‖ 01 ‖ hash)*
//!                               | 01 ‖ 32 × (00 | 01 ‖ hash))     Inode
//!        | 03 ‖ int64 length ‖ u8 n ‖ segment ‖ hash               Inode_extender
//! kinded = 00 ‖ hash (value) | 01 ‖ hash (node)
//!
//! V2 (Data_encoding.Compact, see [`super::compact`]):
//! proof  = u8 (bit 0: before is a node, bit 1: after is a node)
//!          ‖ int16 version ‖ hash ‖ hash ‖ u30 size ‖ elt*
//! elt    = 0ppppp ll ‖ length(ll) ‖ (n × (u8 index ‖ 01 ‖ hash)
//!                                   | 32 × (00 | 01 ‖ hash))       Inode
//!        | 10 cccccc ‖ entries of (step ‖ kinded)                  Node
//!        | 110000 tt ‖ value(tt)                                   Value
//!        | 111000 ll ‖ length(ll) ‖ u8 n ‖ segment ‖ hash          Inode_extender
//! ```
//!
//! A V1 inode lists its children densely from 16 of them, a V2 one from
//! 15. In V2 the extender's tag is `111000ll`: Octez's comment beside
//! `elt_encoding` says `11011xxx`, but its unions (one bit, then one, then
//! one above the two bits of the length) give `111000ll`, and the bytes
//! are what the code writes.
//!
//! Invariants: decoding never panics, bounds every element, and accepts
//! exactly the bytes the encoder writes (one encoding per proof).

use super::compact;
use super::encoding::{self, EncodingError, Reader, kinded, short, sized};
use super::types::{Elt, KindedHash, StreamProof};
use crate::hash::Hash;

/// V2's tag bytes of the cases other than an inode and a node.
const V2_VALUE: u8 = 0b1100_0000;
const V2_EXTENDER: u8 = 0b1110_0000;

// ---------------------------------------------------------------- V1

/// The V1 encoding of a stream proof.
pub fn encode_v1(proof: &StreamProof) -> Result<Vec<u8>, EncodingError> {
    let mut out = Vec::new();
    out.extend_from_slice(&proof.version.to_be_bytes());
    kinded(&mut out, &proof.before);
    kinded(&mut out, &proof.after);
    sized(&mut out, |out| proof.state.iter().try_for_each(|elt| elt_v1(out, elt)))?;
    Ok(out)
}

fn elt_v1(out: &mut Vec<u8>, elt: &Elt) -> Result<(), EncodingError> {
    match elt {
        Elt::Value(bytes) => {
            out.push(0);
            sized(out, |out| {
                out.extend_from_slice(bytes);
                Ok(())
            })
        }
        Elt::Node(entries) => {
            out.push(1);
            sized(out, |out| {
                for (step, h) in entries {
                    short(out, step, "step")?;
                    kinded(out, h);
                }
                Ok(())
            })
        }
        Elt::Inode(i) => {
            out.push(2);
            encoding::inode_with(out, i, 0, some_hash)
        }
        Elt::InodeExtender(e) => {
            out.push(3);
            encoding::length(out, e.length)?;
            encoding::segment(out, &e.segment)?;
            out.extend_from_slice(e.proof.as_bytes());
            Ok(())
        }
    }
}

/// A child of a stream's inode: `Some hash` of Data_encoding's option.
fn some_hash(out: &mut Vec<u8>, h: &Hash) -> Result<(), EncodingError> {
    encoding::hash(out, 1, h);
    Ok(())
}

/// Decodes a V1 stream proof, requiring the bytes to hold exactly one.
pub fn decode_v1(bytes: &[u8]) -> Result<StreamProof, EncodingError> {
    let mut r = Reader { bytes, pos: 0, nesting: 0 };
    let version = i16::from_be_bytes(r.array()?);
    let before = r.kinded()?;
    let after = r.kinded()?;
    let state = r.sized_items(read_elt_v1)?;
    r.finish()?;
    Ok(StreamProof { version, before, after, state })
}

fn read_elt_v1(r: &mut Reader<'_>) -> Result<Elt, EncodingError> {
    let at = r.pos;
    Ok(match r.u8()? {
        0 => {
            let end = r.size()?;
            Elt::Value(r.take(end - r.pos)?.to_vec())
        }
        1 => Elt::Node(r.sized_items(step_and_kinded)?),
        2 => Elt::Inode(r.inode_with(option_hash)?),
        3 => {
            let length = r.length()?;
            Elt::InodeExtender(r.extender_with(length, |r| r.hash())?)
        }
        tag => return Err(r.invalid(at, format!("stream element tag {tag}"))),
    })
}

/// A node element's entry: its step and the kinded hash it names.
fn step_and_kinded(r: &mut Reader<'_>) -> Result<(Vec<u8>, KindedHash), EncodingError> {
    Ok((r.short()?.to_vec(), r.kinded()?))
}

/// Data_encoding's `option hash`: `00` or `01 ‖ hash`.
fn option_hash(r: &mut Reader<'_>) -> Result<Option<Hash>, EncodingError> {
    let at = r.pos;
    match r.u8()? {
        0 => Ok(None),
        1 => Ok(Some(r.hash()?)),
        tag => Err(r.invalid(at, format!("option tag {tag}"))),
    }
}

// ---------------------------------------------------------------- V2

/// The V2 encoding of a stream proof.
pub fn encode_v2(proof: &StreamProof) -> Result<Vec<u8>, EncodingError> {
    let mut out = compact::header(proof.version, &proof.before, &proof.after);
    sized(&mut out, |out| proof.state.iter().try_for_each(|elt| elt_v2(out, elt)))?;
    Ok(out)
}

fn elt_v2(out: &mut Vec<u8>, elt: &Elt) -> Result<(), EncodingError> {
    match elt {
        // The hole of a dense array is the option's `00` here too.
        Elt::Inode(i) => compact::inode(out, i, 0, some_hash),
        Elt::Node(entries) => compact::list(out, entries, |out, (step, h)| {
            short(out, step, "step")?;
            kinded(out, h);
            Ok(())
        }),
        Elt::Value(bytes) => compact::value(out, V2_VALUE, bytes),
        Elt::InodeExtender(e) => compact::extender(out, V2_EXTENDER, e, |out| {
            out.extend_from_slice(e.proof.as_bytes());
            Ok(())
        }),
    }
}

/// Decodes a V2 stream proof, requiring the bytes to hold exactly one.
pub fn decode_v2(bytes: &[u8]) -> Result<StreamProof, EncodingError> {
    let mut r = Reader { bytes, pos: 0, nesting: 0 };
    let (version, before, after) = compact::read_header(&mut r)?;
    let state = r.sized_items(read_elt_v2)?;
    r.finish()?;
    Ok(StreamProof { version, before, after, state })
}

fn read_elt_v2(r: &mut Reader<'_>) -> Result<Elt, EncodingError> {
    let at = r.pos;
    let tag = r.u8()?;
    Ok(match tag {
        0x00..=0x7f => Elt::Inode(r.compact_inode(tag, option_hash)?),
        0x80..=0xbf => Elt::Node(r.compact_list(tag, step_and_kinded)?),
        0xc0 | 0xc1 | 0xc3 => Elt::Value(r.compact_value(tag)?),
        0xe0..=0xe3 => Elt::InodeExtender(r.compact_extender(tag, |r| r.hash())?),
        _ => return Err(r.invalid(at, format!("stream element tag {tag:#04x}"))),
    })
}
