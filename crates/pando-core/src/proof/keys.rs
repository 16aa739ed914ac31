//! Proofs of a set of paths at a commit: which value each path holds, that
//! it is a directory (with its hash), or that it holds nothing. One tree proof of reading every path (see
//! [`super::produce_tree_proof`]), with the paths and the rest of the commit
//! so that the proof checks against a commit hash as well as a tree hash.
//!
//! ```text
//! file    = "PANDOKP1" ‖ commit ‖ u32 n ‖ path* ‖ u32 size ‖ tree proof (V1.Tree32)
//! commit  = 00 (none: the proof is for a tree hash)
//!         | 01 ‖ u32 k ‖ parent hash* ‖ i64 date ‖ u32 n ‖ author ‖ u32 n ‖ message
//! path    = u16 k ‖ (u32 n ‖ step)*
//! ```
//!
//! Integers are big-endian. Invariant: the answers are never read from the
//! file; the verifier recomputes them by reading each path in the proof's
//! tree, and only after that tree hashes to the expected root.

use super::encoding::{self, EncodingError};
use super::partial::PartialTree;
use super::{ProofError, TreeProof, verify_tree_proof};
use crate::hash::{HASH_SIZE, Hash};
use crate::tezos::{CommitInfo, Kind};

const MAGIC: &[u8; 8] = b"PANDOKP1";

/// The fields of a commit other than its root tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitLinks {
    pub parents: Vec<Hash>,
    pub date: i64,
    pub author: String,
    pub message: String,
}

/// A proof of what a set of paths holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeysProof {
    /// The commit whose tree the proof is of, if it is of a commit.
    pub commit: Option<CommitLinks>,
    pub paths: Vec<Vec<Vec<u8>>>,
    pub proof: TreeProof,
}

/// What a path holds, as a keys proof shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// Nothing is at the path.
    Absent,
    /// A contents, and its value.
    Value(Vec<u8>),
    /// A directory, and its hash (its entries are not in the proof).
    Dir(Hash),
}

/// What each path holds, the computation a keys proof proves.
pub fn read_paths(tree: &mut PartialTree<'_>, paths: &[Vec<Vec<u8>>]) -> Result<Vec<Found>, ProofError> {
    paths
        .iter()
        .map(|path| match tree.find_hash(path)? {
            None => Ok(Found::Absent),
            Some((Kind::Dir, hash)) => Ok(Found::Dir(hash)),
            Some((Kind::Contents, _)) => match tree.find(path)? {
                Some(value) => Ok(Found::Value(value)),
                None => Err(ProofError::Malformed("a contents without a value".into())),
            },
        })
        .collect()
}

impl KeysProof {
    /// The hash of the commit the proof is of, if it is of one.
    pub fn commit_hash(&self) -> Option<Hash> {
        self.commit.as_ref().map(|c| {
            CommitInfo {
                root: self.proof.before.hash(),
                parents: c.parents.clone(),
                date: c.date,
                author: c.author.clone(),
                message: c.message.clone(),
            }
            .hash()
        })
    }

    /// Checks the proof against `root`, a commit hash or a tree hash, and
    /// returns what each path holds.
    pub fn verify(&self, root: &Hash) -> Result<Vec<Found>, ProofError> {
        let tree_root = self.proof.before.hash();
        let commit = self.commit_hash();
        if *root != tree_root && commit != Some(*root) {
            let actual = match commit {
                Some(commit) => format!("commit {commit} (tree {tree_root})"),
                None => format!("tree {tree_root}"),
            };
            return Err(ProofError::WrongRoot { expected: root.to_string(), actual });
        }
        if self.proof.after != self.proof.before {
            return Err(ProofError::Malformed("a proof of reads whose tree changes".into()));
        }
        let (_, values) = verify_tree_proof(&self.proof, |tree| read_paths(tree, &self.paths))?;
        Ok(values)
    }

    /// The file's bytes.
    pub fn encode(&self) -> Result<Vec<u8>, ProofError> {
        let mut out = MAGIC.to_vec();
        match &self.commit {
            None => out.push(0),
            Some(c) => {
                out.push(1);
                put_u32(&mut out, c.parents.len())?;
                for parent in &c.parents {
                    out.extend_from_slice(parent.as_bytes());
                }
                out.extend_from_slice(&c.date.to_be_bytes());
                put_bytes(&mut out, c.author.as_bytes())?;
                put_bytes(&mut out, c.message.as_bytes())?;
            }
        }
        put_u32(&mut out, self.paths.len())?;
        for path in &self.paths {
            let steps = u16::try_from(path.len()).map_err(|_| ProofError::InvalidPath(format!("{} steps", path.len())))?;
            out.extend_from_slice(&steps.to_be_bytes());
            for step in path {
                put_bytes(&mut out, step)?;
            }
        }
        put_bytes(&mut out, &encoding::encode(&self.proof)?)?;
        Ok(out)
    }

    /// Reads a file written by [`KeysProof::encode`].
    pub fn decode(bytes: &[u8]) -> Result<KeysProof, ProofError> {
        let mut r = Reader { bytes, pos: 0 };
        if r.take(MAGIC.len())? != MAGIC {
            return Err(invalid(0, "not a pando keys proof (bad magic)"));
        }
        let at = r.pos;
        let commit = match r.take(1)?[0] {
            0 => None,
            1 => {
                let n = r.u32()?;
                let mut parents = Vec::with_capacity(n.min(r.remaining() / HASH_SIZE));
                for _ in 0..n {
                    parents.push(Hash::from_slice(r.take(HASH_SIZE)?).expect("32 bytes"));
                }
                let date = i64::from_be_bytes(r.take(8)?.try_into().expect("8 bytes"));
                let author = r.text()?;
                let message = r.text()?;
                Some(CommitLinks { parents, date, author, message })
            }
            tag => return Err(invalid(at, format!("commit tag {tag}"))),
        };
        let n = r.u32()?;
        let mut paths = Vec::with_capacity(n.min(r.remaining() / 2));
        for _ in 0..n {
            let k = u16::from_be_bytes(r.take(2)?.try_into().expect("2 bytes"));
            let mut path = Vec::with_capacity(usize::from(k).min(r.remaining() / 4));
            for _ in 0..k {
                path.push(r.bytes()?.to_vec());
            }
            paths.push(path);
        }
        let proof_at = r.pos;
        let proof = encoding::decode(r.bytes()?).map_err(|e| shift(e, proof_at + 4))?;
        if r.pos != bytes.len() {
            return Err(EncodingError::Trailing { trailing: bytes.len() - r.pos }.into());
        }
        Ok(KeysProof { commit, paths, proof })
    }
}

fn invalid(at: usize, reason: impl Into<String>) -> ProofError {
    EncodingError::Invalid { at, reason: reason.into() }.into()
}

/// An error of the embedded tree proof, with offsets in the whole file.
fn shift(e: EncodingError, by: usize) -> ProofError {
    match e {
        EncodingError::Truncated { at, needed } => EncodingError::Truncated { at: at + by, needed },
        EncodingError::Invalid { at, reason } => EncodingError::Invalid { at: at + by, reason },
        EncodingError::TooDeep { at } => EncodingError::TooDeep { at: at + by },
        other => other,
    }
    .into()
}

fn put_u32(out: &mut Vec<u8>, n: usize) -> Result<(), ProofError> {
    let n = u32::try_from(n).map_err(|_| EncodingError::Unencodable(format!("a count of {n}")))?;
    out.extend_from_slice(&n.to_be_bytes());
    Ok(())
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), ProofError> {
    put_u32(out, bytes.len())?;
    out.extend_from_slice(bytes);
    Ok(())
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProofError> {
        if n > self.remaining() {
            return Err(EncodingError::Truncated { at: self.pos, needed: n - self.remaining() }.into());
        }
        self.pos += n;
        Ok(&self.bytes[self.pos - n..self.pos])
    }

    fn u32(&mut self) -> Result<usize, ProofError> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("4 bytes")) as usize)
    }

    fn bytes(&mut self) -> Result<&'a [u8], ProofError> {
        let n = self.u32()?;
        self.take(n)
    }

    fn text(&mut self) -> Result<String, ProofError> {
        let at = self.pos;
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| invalid(at, "commit text is not UTF-8"))
    }
}
