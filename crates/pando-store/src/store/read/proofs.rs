//! Proofs of reading paths at a commit, in Octez's binary encodings: what
//! the OCaml binding's `produce_tree_proof` and `produce_stream_proof`
//! call. The reads are irmin's `find` of each path, in order: the
//! directories on the way and the value at the end are revealed; a
//! directory at the end of a path shows only its hash.
//!
//! Invariant: a proof is produced from the commit's own tree, outside the
//! recorded trace (a proof is not an operation the trace replays; tested
//! by `proofs_are_not_recorded_in_the_trace`).

use pando_core::Hash;
use pando_core::proof::stream::Path;
use pando_core::proof::{Encoding, ProofError};

use crate::error::{Error, Result};
use crate::store::Store;

/// Paths given as lists of steps, owned.
fn owned<P: AsRef<[S]>, S: AsRef<[u8]>>(paths: &[P]) -> Vec<Path> {
    paths.iter().map(|path| path.as_ref().iter().map(|step| step.as_ref().to_vec()).collect()).collect()
}

impl Store {
    /// Octez's tree proof (`Proof.tree Proof.t`) of reading `paths` in the
    /// tree of `commit`, in `encoding`. Its `before` and `after` are the
    /// tree's hash (not the commit's); [`crate::verify_tree_proof`]
    /// checks it against that hash.
    pub fn produce_tree_proof_of_paths<P, S>(&self, commit: &Hash, paths: &[P], encoding: Encoding) -> Result<Vec<u8>>
    where
        P: AsRef<[S]>,
        S: AsRef<[u8]>,
    {
        let paths = owned(paths);
        let (proof, ()) = self.produce_tree_proof(commit, |tree| {
            for path in &paths {
                tree.find(path)?;
            }
            Ok(())
        })?;
        Ok(encoding.encode_tree_proof(&proof).map_err(ProofError::from)?)
    }

    /// Octez's stream proof (`Proof.stream Proof.t`) of reading `paths`
    /// in order in the tree of `commit`, in `encoding`, with the elements
    /// in the order irmin 3.7.2 streams them (see
    /// `pando_core::proof::stream`); [`crate::verify_stream_proof`]
    /// replays the same reads against the tree's hash.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use pando_core::proof::Encoding;
    /// use pando_store::{CommitMeta, Options, Store};
    ///
    /// let store = Store::open(dir.path(), Options::default())?;
    /// let tree = store.empty_tree().add(&["a", "b"], b"1")?.add(&["c"], b"2")?;
    /// let commit = store.commit(&tree, CommitMeta { parents: &[], date: 1_600_000_000, author: "Tezos", message: "block 0" })?;
    /// let paths = vec![vec![b"a".to_vec(), b"b".to_vec()]];
    /// let bytes = store.produce_stream_proof(&commit, &paths, Encoding::V1)?;
    /// let proven = pando_store::verify_stream_proof(Encoding::V1, &bytes, &tree.hash()?, &paths)?;
    /// assert_eq!(proven.tree.find(&["a", "b"])?.as_deref(), Some(&b"1"[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn produce_stream_proof<P, S>(&self, commit: &Hash, paths: &[P], encoding: Encoding) -> Result<Vec<u8>>
    where
        P: AsRef<[S]>,
        S: AsRef<[u8]>,
    {
        let Some(record) = self.repo.read.commit_record(commit)? else { return Err(Error::UnknownCommit(*commit)) };
        let proof = self.tree_at(&record, None).produce_stream_proof(&owned(paths))?;
        Ok(encoding.encode_stream_proof(&proof).map_err(ProofError::from)?)
    }
}

#[cfg(test)]
mod tests {
    use crate::{CommitMeta, Options, Store};
    use pando_core::proof::Encoding;

    /// The rows and gaps a recording of a few calls holds, with proofs
    /// produced among them or not.
    fn recorded(dir: &std::path::Path, prove: bool) -> (u64, u64) {
        let options = Options { trace_file: Some(dir.join("trace")), ..Options::default() };
        let store = Store::open(dir.join("store"), options).unwrap();
        let tree = store.empty_tree().add(&["a", "b"], b"1").unwrap().add(&["c"], b"2").unwrap();
        let commit = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "block" }).unwrap();
        let read = store.checkout(&commit).unwrap().unwrap();
        assert_eq!(read.find(&["a", "b"]).unwrap().as_deref(), Some(&b"1"[..]));
        if prove {
            let paths = vec![vec![b"a".to_vec(), b"b".to_vec()], vec![b"c".to_vec()]];
            store.produce_tree_proof_of_paths(&commit, &paths, Encoding::V2).unwrap();
            store.produce_stream_proof(&commit, &paths, Encoding::V1).unwrap();
            store.prove_keys(&commit, &paths).unwrap();
        }
        let summary = store.finish_trace().unwrap().unwrap();
        (summary.rows, summary.gaps)
    }

    #[test]
    fn proofs_are_not_recorded_in_the_trace() {
        let (with, without) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let rows = recorded(without.path(), false);
        assert!(rows.0 >= 4, "the calls were recorded: {rows:?}");
        assert_eq!(recorded(with.path(), true), rows);
    }
}
