//! The commit record: a commit's root, parents and metadata.
//!
//! Payload: `varint root_delta ‖ root_hash ‖ varint k ‖ (parent_hash ‖
//! varint parent_offset)*k ‖ date: i64 BE ‖ varint len ‖ author ‖ varint
//! len ‖ message`. Its hash is not stored: it is the Tezos commit hash of
//! these fields, compared with the index's key when read.
//!
//! Invariant: the root and every held parent lie before the record:
//! encoding asserts it of what it writes (asserted in `encode`), decoding
//! refuses bytes that break it (tested by
//! `a_root_or_parent_not_before_the_commit_is_refused`).

use pando_core::varint::write_u64;

use super::node::Reader;
use crate::dict::read_bytes;
use pando_core::Hash;

/// The parent offset of a commit whose parent the store never held (the
/// commit of an imported snapshot).
pub const ABSENT_PARENT: u64 = u64::MAX;

/// A commit as recorded in the pack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitRecord {
    pub root_offset: u64,
    pub root_hash: Hash,
    /// Parents with the offsets of their commit records ([`ABSENT_PARENT`]
    /// for a parent the store never held).
    pub parents: Vec<(Hash, u64)>,
    pub date: i64,
    pub author: String,
    pub message: String,
}

impl CommitRecord {
    pub fn encode(&self, at: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + 40 * self.parents.len() + self.message.len());
        assert!(self.root_offset < at, "root written before its commit");
        assert!(
            self.parents.iter().all(|&(_, offset)| offset < at || offset == ABSENT_PARENT),
            "a held parent written before its child commit"
        );
        write_u64(&mut out, at - self.root_offset);
        out.extend_from_slice(self.root_hash.as_bytes());
        write_u64(&mut out, self.parents.len() as u64);
        for (hash, offset) in &self.parents {
            out.extend_from_slice(hash.as_bytes());
            write_u64(&mut out, *offset);
        }
        out.extend_from_slice(&self.date.to_be_bytes());
        write_u64(&mut out, self.author.len() as u64);
        out.extend_from_slice(self.author.as_bytes());
        write_u64(&mut out, self.message.len() as u64);
        out.extend_from_slice(self.message.as_bytes());
        out
    }

    pub fn decode(payload: &[u8], at: u64) -> Result<CommitRecord, String> {
        let mut r = Reader { bytes: payload, pos: 0 };
        let (root_offset, root_hash) = r.pointer(at)?;
        let count = r.varint()?;
        if count > 1024 {
            return Err(format!("{count} parents"));
        }
        let mut parents = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let hash = r.hash()?;
            let offset = r.varint()?;
            if offset >= at && offset != ABSENT_PARENT {
                return Err(format!("parent offset {offset} not before the commit at {at}"));
            }
            parents.push((hash, offset));
        }
        let date = i64::from_be_bytes(r.take(8)?.try_into().expect("8 bytes"));
        let author = String::from_utf8(read_bytes(payload, &mut r.pos)?.to_vec()).map_err(|_| "author is not UTF-8")?;
        let message = String::from_utf8(read_bytes(payload, &mut r.pos)?.to_vec()).map_err(|_| "message is not UTF-8")?;
        r.finish()?;
        Ok(CommitRecord { root_offset, root_hash, parents, date, author, message })
    }

    pub fn info(&self) -> pando_core::CommitInfo {
        pando_core::CommitInfo {
            root: self.root_hash,
            parents: self.parents.iter().map(|(h, _)| *h).collect(),
            date: self.date,
            author: self.author.clone(),
            message: self.message.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A root or a held parent at or after the commit's own offset is an
    /// error; a parent the store never held is not.
    #[test]
    fn a_root_or_parent_not_before_the_commit_is_refused() {
        let record = CommitRecord {
            root_offset: 600,
            root_hash: Hash([1; 32]),
            parents: vec![(Hash([2; 32]), 500), (Hash([3; 32]), ABSENT_PARENT)],
            date: 7,
            author: "a".into(),
            message: "m".into(),
        };
        let payload = record.encode(1_000);
        assert_eq!(CommitRecord::decode(&payload, 1_000).unwrap(), record);
        // The root's delta (400) read at 300 points before the pack's start.
        assert!(CommitRecord::decode(&payload, 300).unwrap_err().contains("delta"));
        // Read at 450, the root is at 50 but the parent at 500 is after it.
        assert!(CommitRecord::decode(&payload, 450).unwrap_err().contains("parent offset 500"));
        assert!(CommitRecord::decode(&payload, 500).unwrap_err().contains("parent offset 500"));
    }
}
