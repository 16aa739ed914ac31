//! Fuzzes the proof verifier with arbitrary bytes: a keys proof file, a
//! bare Octez tree proof (V1 or V2), or a stream proof (V1 or V2). Nothing
//! may panic; bytes that decode must encode back to themselves (one
//! encoding per proof); a proof that verifies must verify again with the
//! same answers.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pando_core::proof::encoding::{decode, encode};
use pando_core::proof::keys::{KeysProof, read_paths};
use pando_core::proof::stream::verify_stream;
use pando_core::proof::{Encoding, verify_tree_proof};

fuzz_target!(|data: &[u8]| {
    if let Ok(keys) = KeysProof::decode(data) {
        assert_eq!(keys.encode().unwrap(), data, "keys proofs have one encoding");
        let root = keys.proof.before.hash();
        if let Ok(first) = keys.verify(&root) {
            assert_eq!(keys.verify(&root).unwrap(), first);
        }
        return;
    }
    for encoding in [Encoding::V1, Encoding::V2] {
        if let Ok(proof) = encoding.decode_stream_proof(data) {
            assert_eq!(encoding.encode_stream_proof(&proof).unwrap(), data, "stream proofs have one encoding");
            let paths: Vec<Vec<Vec<u8>>> = vec![vec![b"a".to_vec()], vec![b"a".to_vec(), b"b".to_vec()], vec![]];
            let root = proof.before.hash();
            if verify_stream(&proof, &root, &paths).is_ok() {
                assert!(verify_stream(&proof, &root, &paths).is_ok());
            }
        }
    }
    if let Ok(proof) = Encoding::V2.decode_tree_proof(data) {
        assert_eq!(Encoding::V2.encode_tree_proof(&proof).unwrap(), data, "V2 tree proofs have one encoding");
        let _ = verify_tree_proof(&proof, |tree| read_paths(tree, &[vec![b"a".to_vec()]]));
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
