//! The commit record: a commit's root, parents and metadata.
//!
//! Payload: `varint root_delta ‖ root_hash ‖ varint k ‖ (parent_hash ‖
//! varint parent_offset)*k ‖ date: i64 BE ‖ varint len ‖ author ‖ varint
//! len ‖ message`. Its hash is not stored: it is the Tezos commit hash of
//! these fields, compared with the index's key when read.
//!
//! Invariants:
//! - The root and every held parent lie before the record: encoding
//!   asserts it of what it writes (asserted in `encode`), decoding refuses
//!   bytes that break it (tested by
//!   `a_root_or_parent_not_before_the_commit_is_refused`).
//! - A commit has at most [`MAX_PARENTS`] parents and an author and a
//!   message of at most [`MAX_TEXT_BYTES`] each: the one set of limits a
//!   commit is held to where it is made (`Store::commit` refuses more),
//!   read (`decode`) and carried (a snapshot's header), so that nothing
//!   written is refused when read (asserted in `encode`; tested by
//!   `the_limits_are_refused_past_them_and_kept_at_them`).

use pando_core::varint::write_u64;

use super::node::Reader;
use crate::dict::read_bytes;
use pando_core::Hash;

/// The parent offset of a commit whose parent the store never held (the
/// commit of an imported snapshot).
pub const ABSENT_PARENT: u64 = u64::MAX;

/// Most parents a commit may have (after removing repeated ones).
pub const MAX_PARENTS: usize = 1024;

/// Longest author, and longest message, of a commit, in bytes.
pub const MAX_TEXT_BYTES: usize = 1 << 20;

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
        assert!(
            self.parents.len() <= MAX_PARENTS && self.author.len() <= MAX_TEXT_BYTES && self.message.len() <= MAX_TEXT_BYTES,
            "a commit written is within the limits its readers hold it to"
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
        if count > MAX_PARENTS as u64 {
            return Err(format!("{count} parents (at most {MAX_PARENTS})"));
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
        let mut text = |what: &str| -> Result<String, String> {
            let bytes = read_bytes(payload, &mut r.pos)?;
            if bytes.len() > MAX_TEXT_BYTES {
                return Err(format!("{what} of {} bytes (at most {MAX_TEXT_BYTES})", bytes.len()));
            }
            String::from_utf8(bytes.to_vec()).map_err(|_| format!("{what} is not UTF-8"))
        };
        let author = text("author")?;
        let message = text("message")?;
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

    /// At its limits a commit encodes and decodes; one parent, or one byte
    /// of author or message, past them is refused by the decoder.
    #[test]
    fn the_limits_are_refused_past_them_and_kept_at_them() {
        let at_limits = CommitRecord {
            root_offset: 0,
            root_hash: Hash([1; 32]),
            parents: (0..MAX_PARENTS as u32).map(|i| (Hash([2; 32]), u64::from(i))).collect(),
            date: 7,
            author: "a".repeat(MAX_TEXT_BYTES),
            message: "m".repeat(MAX_TEXT_BYTES),
        };
        let at = 1 << 20;
        assert_eq!(CommitRecord::decode(&at_limits.encode(at), at).unwrap(), at_limits);
        // Past them: the fields the encoder refuses, written by hand.
        let past = |parents: usize, author: usize, message: usize| {
            let mut out = Vec::new();
            write_u64(&mut out, at);
            out.extend_from_slice(&[1; 32]);
            write_u64(&mut out, parents as u64);
            for i in 0..parents {
                out.extend_from_slice(&[2; 32]);
                write_u64(&mut out, i as u64);
            }
            out.extend_from_slice(&7i64.to_be_bytes());
            for len in [author, message] {
                write_u64(&mut out, len as u64);
                out.extend(std::iter::repeat_n(b'x', len));
            }
            CommitRecord::decode(&out, at).unwrap_err()
        };
        assert_eq!(past(MAX_PARENTS + 1, 1, 1), format!("{} parents (at most 1024)", MAX_PARENTS + 1));
        assert_eq!(past(1, MAX_TEXT_BYTES + 1, 1), format!("author of {} bytes (at most 1048576)", MAX_TEXT_BYTES + 1));
        assert_eq!(past(1, 1, MAX_TEXT_BYTES + 1), format!("message of {} bytes (at most 1048576)", MAX_TEXT_BYTES + 1));
    }
}
