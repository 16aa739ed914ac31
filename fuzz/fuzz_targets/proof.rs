//! Fuzzes the proof verifier with arbitrary bytes: a keys proof file or a
//! bare Octez tree proof. Nothing may panic; bytes that decode must encode
//! back to themselves (one encoding per proof); a proof that verifies must
//! verify again with the same answers.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pando_core::proof::encoding::{decode, encode};
use pando_core::proof::keys::{KeysProof, read_paths};
use pando_core::proof::verify_tree_proof;

fuzz_target!(|data: &[u8]| {
    if let Ok(keys) = KeysProof::decode(data) {
        assert_eq!(keys.encode().unwrap(), data, "keys proofs have one encoding");
        let root = keys.proof.before.hash();
        if let Ok(first) = keys.verify(&root) {
            assert_eq!(keys.verify(&root).unwrap(), first);
        }
        return;
    }
    if let Ok(proof) = decode(data) {
        assert_eq!(encode(&proof).unwrap(), data, "tree proofs have one encoding");
        // Read, list, update and remove a few paths of the proof's tree.
        let paths: Vec<Vec<Vec<u8>>> = vec![vec![], vec![b"a".to_vec()], vec![b"a".to_vec(), b"b".to_vec()]];
        let _ = verify_tree_proof(&proof, |tree| {
            let values = read_paths(tree, &paths)?;
            let listed = tree.list(&paths[1])?;
            tree.add(&paths[2], b"fuzz")?;
            tree.remove(&paths[1])?;
            Ok((values, listed, tree.length::<&[u8]>(&[])?))
        });
    }
});
