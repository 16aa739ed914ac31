//! Merkle proofs of the context, compatible with Octez's tree proofs.
//!
//! A computation runs on a [`PartialTree`]. To **produce** a proof
//! ([`produce_tree_proof`]), the tree starts as the hash of a context whose
//! parts a [`Reveal`] (a store) supplies as the computation reaches them;
//! the proof is what was revealed, with everything else blinded, plus the
//! hashes before and after. To **verify** one ([`verify_tree_proof`]), the
//! tree is rebuilt from the proof, its hash must be `before`, the same
//! computation runs on it, and the hash of the result must be `after`;
//! reaching a blinded part is [`ProofError::Blinded`].
//!
//! Proofs are Octez's `Proof_types.tree Proof_types.t` ([`types`]), encoded
//! as `Merkle_proof_encoding.V1.Tree32` ([`encoding`]) or `V2.Tree32`
//! ([`compact`]). [`keys`] wraps one proof of a set of paths, with the
//! commit it belongs to, in a file. Stream proofs (`Proof.stream
//! Proof.t`) of reading paths are produced and verified by [`stream`] and
//! encoded by [`stream_encoding`]; [`Encoding`] names the two binary
//! forms of both kinds.
//!
//! Invariants:
//! - Soundness rests on the hash alone: a proof is accepted only if the
//!   partial tree it shows hashes to `before`, and that tree's shape is
//!   checked before hashing, so a damaged or hostile proof is an error,
//!   never a wrong answer and never a panic.
//! - Pure: no files, no threads, no clock; builds for
//!   `wasm32-unknown-unknown`.

pub mod compact;
pub mod convert;
pub mod encoding;
pub mod keys;
pub mod partial;
pub mod stream;
pub mod stream_encoding;
pub mod types;

pub use encoding::EncodingError;
pub use partial::{Cell, Contents, Entry, Partial, PartialTree, Reveal, Revealed};
pub use types::{Elt, STREAM32_VERSION, StreamProof};
pub use types::{KindedHash, TREE32_VERSION, TreeProof};

use crate::hash::Hash;

/// Why a proof could not be produced or was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProofError {
    #[error(transparent)]
    Encoding(#[from] EncodingError),
    #[error("proof version {0} is not a tree proof of the 32-ary context (version 0)")]
    UnsupportedVersion(i16),
    #[error("malformed proof: {0}")]
    Malformed(String),
    #[error("the proof blinds {what} at {path}, which the computation needs")]
    Blinded { what: String, path: String },
    #[error("the proof's tree hashes to {actual:?}, not to its `before` {expected:?}")]
    BeforeMismatch { expected: KindedHash, actual: KindedHash },
    #[error("the computation ends on {actual:?}, not on the proof's `after` {expected:?}")]
    AfterMismatch { expected: KindedHash, actual: KindedHash },
    #[error("the proof is for {actual}, not for {expected}")]
    WrongRoot { expected: String, actual: String },
    #[error("invalid path: {0}")]
    InvalidPath(String),
    #[error("the store could not supply part of the tree: {0}")]
    Unavailable(String),
    #[error("the stream ends where the reads need {needed} at {path}")]
    StreamTooShort { needed: String, path: String },
    #[error("{unread} stream elements are left after the reads")]
    StreamTooLong { unread: usize },
    #[error("stream element {element}: {reason}")]
    StreamMismatch { element: usize, reason: String },
}

/// Octez's two binary encodings of proofs of the 32-ary context
/// (`Merkle_proof_encoding.V1.Tree32` and `V2.Tree32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// Plain `Data_encoding` (what `pando prove` writes inside a keys proof).
    V1,
    /// `Data_encoding.Compact`: light mode's `merkle_tree_v2`.
    V2,
}

impl Encoding {
    /// The bytes of a tree proof.
    pub fn encode_tree_proof(self, proof: &TreeProof) -> Result<Vec<u8>, EncodingError> {
        match self {
            Encoding::V1 => encoding::encode(proof),
            Encoding::V2 => compact::encode(proof),
        }
    }

    /// The tree proof `bytes` hold, exactly.
    pub fn decode_tree_proof(self, bytes: &[u8]) -> Result<TreeProof, EncodingError> {
        match self {
            Encoding::V1 => encoding::decode(bytes),
            Encoding::V2 => compact::decode(bytes),
        }
    }

    /// The bytes of a stream proof.
    pub fn encode_stream_proof(self, proof: &StreamProof) -> Result<Vec<u8>, EncodingError> {
        match self {
            Encoding::V1 => stream_encoding::encode_v1(proof),
            Encoding::V2 => stream_encoding::encode_v2(proof),
        }
    }

    /// The stream proof `bytes` hold, exactly.
    pub fn decode_stream_proof(self, bytes: &[u8]) -> Result<StreamProof, EncodingError> {
        match self {
            Encoding::V1 => stream_encoding::decode_v1(bytes),
            Encoding::V2 => stream_encoding::decode_v2(bytes),
        }
    }
}

/// A tree shown by a proof checked against the hash it is about: the
/// parts the proof reveals, the rest blinded.
#[derive(Clone)]
pub struct Proven {
    /// The tree (a directory or a contents), hashing to `before`.
    pub root: Entry,
    /// The proof's `before`: the kind and hash of `root`.
    pub before: KindedHash,
    /// The proof's `after`: what the computation it proves leaves (for a
    /// proof of reads, `before` again). Not checked here: only a replay of
    /// that computation on `root` can.
    pub after: KindedHash,
}

/// Decodes the tree proof `bytes` in `encoding` and checks it against
/// `root`, the hash of the tree it is about: its version, its structure,
/// and that what it shows hashes to `before`, which must be `root`.
pub fn verify_tree_proof_bytes(encoding: Encoding, bytes: &[u8], root: &Hash) -> Result<Proven, ProofError> {
    let proof = encoding.decode_tree_proof(bytes)?;
    if proof.before.hash() != *root {
        return Err(ProofError::WrongRoot { expected: root.to_string(), actual: proof.before.hash().to_string() });
    }
    if proof.version != TREE32_VERSION {
        return Err(ProofError::UnsupportedVersion(proof.version));
    }
    let tree = PartialTree::new(convert::entry_of_tree(&proof.state)?, None);
    let before = tree.kinded_hash()?;
    if before != proof.before {
        return Err(ProofError::BeforeMismatch { expected: proof.before, actual: before });
    }
    Ok(Proven { root: tree.root, before, after: proof.after })
}

/// Decodes the stream proof `bytes` in `encoding` and checks it against
/// `root` by reading `paths` in order (see [`stream`]); returns the tree
/// of what the reads loaded.
pub fn verify_stream_proof_bytes(
    encoding: Encoding,
    bytes: &[u8],
    root: &Hash,
    paths: &[stream::Path],
) -> Result<Proven, ProofError> {
    let proof = encoding.decode_stream_proof(bytes)?;
    let root = stream::verify_stream(&proof, root, paths)?;
    Ok(Proven { root, before: proof.before, after: proof.after })
}

/// [`verify_stream_proof_bytes`] of the reads made so far (see
/// [`stream::verify_stream_reads`]): also returns how many elements are
/// left unread.
pub fn verify_stream_reads_bytes(
    encoding: Encoding,
    bytes: &[u8],
    root: &Hash,
    paths: &[stream::Path],
) -> Result<(Proven, usize), ProofError> {
    let proof = encoding.decode_stream_proof(bytes)?;
    let (root, unread) = stream::verify_stream_reads(&proof, root, paths)?;
    Ok((Proven { root, before: proof.before, after: proof.after }, unread))
}

/// Runs `f` on the tree `root` (blinded parts revealed by `reveal` as `f`
/// reaches them) and returns the proof of what it read, with its result.
pub fn produce_tree_proof<R>(
    root: Entry,
    reveal: &dyn Reveal,
    f: impl FnOnce(&mut PartialTree<'_>) -> Result<R, ProofError>,
) -> Result<(TreeProof, R), ProofError> {
    let mut tree = PartialTree::new(root.clone(), Some(reveal));
    let before = tree.kinded_hash()?;
    let result = f(&mut tree)?;
    // Hashing the result may reveal more (a directory shrinking to 256
    // entries is hashed from all of them): the proof must show it too.
    let after = tree.kinded_hash()?;
    let state = convert::tree_of_entry(&root)?;
    Ok((TreeProof { version: TREE32_VERSION, before, after, state }, result))
}

/// Checks `proof` and runs `f` on the tree it shows; returns the tree `f`
/// left and its result. Rejected when the proof is malformed, when its tree
/// does not hash to `before`, when `f` reaches a blinded part or fails, or
/// when the result does not hash to `after`.
pub fn verify_tree_proof<R>(
    proof: &TreeProof,
    f: impl FnOnce(&mut PartialTree<'_>) -> Result<R, ProofError>,
) -> Result<(PartialTree<'static>, R), ProofError> {
    if proof.version != TREE32_VERSION {
        return Err(ProofError::UnsupportedVersion(proof.version));
    }
    let mut tree = PartialTree::new(convert::entry_of_tree(&proof.state)?, None);
    let before = tree.kinded_hash()?;
    if before != proof.before {
        return Err(ProofError::BeforeMismatch { expected: proof.before, actual: before });
    }
    let result = f(&mut tree)?;
    let after = tree.kinded_hash()?;
    if after != proof.after {
        return Err(ProofError::AfterMismatch { expected: proof.after, actual: after });
    }
    Ok((tree, result))
}
