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
//! as `Merkle_proof_encoding.V1.Tree32` ([`encoding`]). [`keys`] wraps one
//! proof of a set of paths, with the commit it belongs to, in a file.
//!
//! Invariants:
//! - Soundness rests on the hash alone: a proof is accepted only if the
//!   partial tree it shows hashes to `before`, and that tree's shape is
//!   checked before hashing, so a damaged or hostile proof is an error,
//!   never a wrong answer and never a panic.
//! - Pure: no files, no threads, no clock; builds for
//!   `wasm32-unknown-unknown`.

pub mod convert;
pub mod encoding;
pub mod keys;
pub mod partial;
pub mod types;

pub use encoding::EncodingError;
pub use partial::{Cell, Contents, Entry, Partial, PartialTree, Reveal, Revealed};
pub use types::{KindedHash, TREE32_VERSION, TreeProof};

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
