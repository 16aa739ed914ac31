//! Stream proofs of reading paths, without a store: trees built in
//! memory, streams produced from them, encoded in V1 and V2, verified, cut,
//! extended and shuffled.
//!
//! Checked here: every produced stream verifies against its root and
//! shows each path's value as the `BTreeMap` model has it; both encodings
//! round-trip; a stream missing an element, with one too many, with two
//! swapped or against another root is a precise error; mutated bytes never
//! panic.
//!
//! What the order is checked against: irmin's sources at tag 3.7.2, read
//! (not run): `src/irmin/proof.ml` (`Env`: `add_node_from_store` pushes a
//! node before what its `head` loads, `add_recnode_from_store` and
//! `add_contents_from_store` push on first sight of a hash,
//! `post_processing` folds single-child chains into extenders;
//! `find_pnode`/`find_recpnode`/`find_contents` consume in the same
//! order), `src/irmin/tree.ml` (`find` walks `sub` then `findv`, loading
//! the value last; `produce_stream`/`verify_stream`), and
//! `src/irmin-pack/inode.ml` (`Val.head` lists a root of at most 256
//! entries through `seq`, pre-order by index; `Proof.of_proof` rebuilds
//! such a root with its inodes blinded). The tests below pin those rules:
//! one element per hash, the 33-256 directory's node then its inodes, a
//! larger directory's root inode then the inodes on the index path, a
//! chain as one extender. No irmin run produced these streams, so they are
//! not compared with irmin's bytes.

use std::collections::BTreeMap;

use pando_core::Hash;
use pando_core::proof::partial::{Entry, PartialTree};
use pando_core::proof::stream::{Path, produce_stream_of_entry, verify_stream};
use pando_core::proof::types::{Elt, KindedHash, StreamProof};
use pando_core::proof::{Encoding, ProofError, verify_stream_proof_bytes};
use proptest::prelude::*;
#[path = "support/seeds.rs"]
mod seeds;

type Model = BTreeMap<Path, Vec<u8>>;

fn full_tree(model: &Model) -> Entry {
    let mut tree = PartialTree::of_entry(Entry::empty_dir());
    for (k, v) in model {
        tree.add(k, v).unwrap();
    }
    tree.root().clone()
}

fn root_hash(entry: &Entry) -> Hash {
    PartialTree::of_entry(entry.clone()).hash().unwrap()
}

fn p(steps: &[&str]) -> Path {
    steps.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// What a path holds, read in a verified tree.
fn read(entry: &Entry, path: &Path) -> Result<Option<Vec<u8>>, ProofError> {
    PartialTree::of_entry(entry.clone()).find(path)
}

/// A model with a small directory, one of 33 to 256 entries (a trie hashed
/// flat), one of more than 256 (hashed by its root inode), shared values
/// and shared subtrees.
fn sample() -> Model {
    let mut model = Model::new();
    for i in 0..20 {
        model.insert(p(&["small", &format!("k{i}")]), format!("s{i}").into_bytes());
    }
    for i in 0..100 {
        model.insert(p(&["mid", &format!("k{i:03}")]), vec![(i % 7) as u8; 3]);
    }
    for i in 0..600 {
        model.insert(p(&["big", &format!("k{i:04}"), "balance"]), format!("{}", i * 3).into_bytes());
    }
    for side in ["left", "right"] {
        model.insert(p(&["twin", side, "a"]), b"same".to_vec());
        model.insert(p(&["twin", side, "b"]), b"same too".to_vec());
    }
    model.insert(p(&["top"]), b"x".to_vec());
    model
}

fn sample_paths() -> Vec<Path> {
    vec![
        p(&["small", "k3"]),
        p(&["mid", "k042"]),
        p(&["mid", "k043"]),
        p(&["big", "k0100", "balance"]),
        p(&["big", "k0599", "balance"]),
        p(&["big", "k9999", "balance"]),
        p(&["twin", "left", "a"]),
        p(&["twin", "right", "a"]),
        p(&["twin", "right", "b"]),
        p(&["top", "below"]),
        p(&["top"]),
        p(&["mid"]),
        p(&["absent", "x"]),
    ]
}

#[test]
fn a_stream_verifies_and_shows_what_was_read() {
    let model = sample();
    let tree = full_tree(&model);
    let paths = sample_paths();
    let proof = produce_stream_of_entry(&tree, &paths).unwrap();
    assert_eq!(proof.version, 1, "a stream proof of the 32-ary context");
    assert_eq!(proof.before, KindedHash::Node(root_hash(&tree)));
    let shown = verify_stream(&proof, &root_hash(&tree), &paths).unwrap();
    for path in &paths {
        assert_eq!(read(&shown, path).unwrap(), model.get(path).cloned(), "{path:?}");
    }
    // A value reached twice is streamed once (`same` under both twins),
    // and so is a directory met twice: the twins are the same directory.
    let values = proof.state.iter().filter(|e| matches!(e, Elt::Value(v) if v == b"same")).count();
    assert_eq!(values, 1);
    // What the reads did not load stays blinded, and says so.
    let err = read(&shown, &p(&["small", "k4"])).unwrap_err();
    assert!(matches!(err, ProofError::Blinded { .. }), "{err}");
    let err = read(&shown, &p(&["big", "k0101", "balance"])).unwrap_err();
    assert!(matches!(err, ProofError::Blinded { .. }), "{err}");
}

#[test]
fn the_order_follows_irmins_loads() {
    let model = sample();
    let tree = full_tree(&model);
    // The directory of 100 entries: its node, then its value inodes (every
    // one of them, pre-order), then the value.
    let proof = produce_stream_of_entry(&tree, &[p(&["mid", "k042"])]).unwrap();
    let kinds: Vec<&str> = proof.state.iter().map(kind).collect();
    assert_eq!(kinds[0], "node", "the root");
    assert_eq!(kinds[1], "node", "`mid`, all its entries");
    assert!(matches!(&proof.state[1], Elt::Node(entries) if entries.len() == 100));
    assert!(kinds[2..kinds.len() - 1].iter().all(|k| *k == "node"), "its value inodes: {kinds:?}");
    let buckets: std::collections::BTreeSet<usize> =
        (0..100).map(|i| pando_core::inode::index(0, format!("k{i:03}").as_bytes())).collect();
    assert_eq!(kinds.len() - 3, buckets.len(), "one element per inode of the 100-entry directory");
    assert_eq!(*kinds.last().unwrap(), "value");

    // The directory of 600 entries: its root inode, the inodes on the
    // step's index path, then the entry's directory and value.
    let proof = produce_stream_of_entry(&tree, &[p(&["big", "k0007", "balance"])]).unwrap();
    let kinds: Vec<&str> = proof.state.iter().map(kind).collect();
    assert_eq!(kinds[..2], ["node", "inode"]);
    assert_eq!(kinds[kinds.len() - 2..], ["node", "value"]);
}

fn kind(e: &Elt) -> &'static str {
    match e {
        Elt::Value(_) => "value",
        Elt::Node(_) => "node",
        Elt::Inode(_) => "inode",
        Elt::InodeExtender(_) => "extender",
    }
}

/// Names whose index is 0 at depths 0 and 1: a directory of them has a
/// root inode with one child, itself with one child.
fn colliding(n: usize) -> Vec<Vec<u8>> {
    use pando_core::inode::index;
    (0u32..).map(|i| format!("c{i}").into_bytes()).filter(|s| index(0, s) == 0 && index(1, s) == 0).take(n).collect()
}

#[test]
fn a_chain_of_single_child_inodes_is_one_extender() {
    let names = colliding(300);
    let mut model = Model::new();
    for (i, name) in names.iter().enumerate() {
        model.insert(vec![b"d".to_vec(), name.clone()], vec![i as u8]);
    }
    let tree = full_tree(&model);
    let paths: Vec<Path> = vec![vec![b"d".to_vec(), names[5].clone()], vec![b"d".to_vec(), names[200].clone()], p(&["d", "zz"])];
    let proof = produce_stream_of_entry(&tree, &paths).unwrap();
    // `d`'s root inode and its single child (itself single-child) are one
    // extender of segment [0, 0]; the inode below it follows.
    let Elt::InodeExtender(e) = &proof.state[1] else { panic!("an extender, not {:?}", kind(&proof.state[1])) };
    assert_eq!((e.length, &e.segment[..]), (300, &[0u8, 0][..]));
    assert!(!proof.state.iter().any(|e| matches!(e, Elt::Inode(i) if i.proofs.len() == 1)), "the chain's inodes are dropped");
    let shown = verify_stream(&proof, &root_hash(&tree), &paths).unwrap();
    for path in &paths {
        assert_eq!(read(&shown, path).unwrap(), model.get(path).cloned());
    }
    for encoding in [Encoding::V1, Encoding::V2] {
        let bytes = encoding.encode_stream_proof(&proof).unwrap();
        assert_eq!(encoding.decode_stream_proof(&bytes).unwrap(), proof);
    }
}

#[test]
fn hostile_streams_are_precise_errors() {
    let tree = full_tree(&sample());
    let root = root_hash(&tree);
    let paths = sample_paths();
    let proof = produce_stream_of_entry(&tree, &paths).unwrap();

    let mut short = proof.clone();
    short.state.pop();
    assert!(matches!(verify_stream(&short, &root, &paths), Err(ProofError::StreamTooShort { .. })));

    let mut long = proof.clone();
    long.state.push(Elt::Value(b"extra".to_vec()));
    assert!(matches!(verify_stream(&long, &root, &paths), Err(ProofError::StreamTooLong { unread: 1 })));

    let mut swapped = proof.clone();
    swapped.state.swap(1, 2);
    assert!(matches!(verify_stream(&swapped, &root, &paths), Err(ProofError::StreamMismatch { element: 1, .. })));

    let other = Hash::of_bytes(b"another root");
    assert!(matches!(verify_stream(&proof, &other, &paths), Err(ProofError::WrongRoot { .. })));

    // The same stream replayed with other reads does not fit them.
    assert!(verify_stream(&proof, &root, &paths[1..]).is_err());

    let mut changed = proof.clone();
    changed.after = KindedHash::Node(other);
    assert!(matches!(verify_stream(&changed, &root, &paths), Err(ProofError::AfterMismatch { .. })));

    let mut tree_version = proof.clone();
    tree_version.version = 0;
    assert!(matches!(verify_stream(&tree_version, &root, &paths), Err(ProofError::UnsupportedVersion(0))));

    for encoding in [Encoding::V1, Encoding::V2] {
        let bytes = encoding.encode_stream_proof(&proof).unwrap();
        for cut in [0, 1, 40, bytes.len() / 2, bytes.len() - 1] {
            assert!(encoding.decode_stream_proof(&bytes[..cut]).is_err());
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(encoding.decode_stream_proof(&trailing).is_err());
    }
}

fn arb_model() -> impl Strategy<Value = Model> {
    (1usize..40, prop_oneof![Just(0usize), 30usize..60, 250usize..300, 400usize..500]).prop_map(|(small, big)| {
        let mut model = Model::new();
        for i in 0..small {
            let name = format!("k{i:04}");
            let path = if i % 3 == 0 { p(&["a", &name]) } else { p(&["a", "s", &name]) };
            model.insert(path, vec![i as u8; 1 + i % 5]);
        }
        for i in 0..big {
            model.insert(p(&["big", &format!("k{i:04}")]), format!("v{}", i % 50).into_bytes());
        }
        model.insert(p(&["top"]), b"x".to_vec());
        model
    })
}

fn arb_path() -> impl Strategy<Value = Path> {
    let step = prop_oneof![
        Just(b"a".to_vec()),
        Just(b"s".to_vec()),
        Just(b"big".to_vec()),
        Just(b"top".to_vec()),
        (0usize..520).prop_map(|i| format!("k{i:04}").into_bytes()),
        Just(b"zz".to_vec()),
    ];
    prop::collection::vec(step, 0..4)
}

fn check_round_trip(proof: &StreamProof) -> Result<(), TestCaseError> {
    for encoding in [Encoding::V1, Encoding::V2] {
        let bytes = encoding.encode_stream_proof(proof).unwrap();
        prop_assert_eq!(&encoding.decode_stream_proof(&bytes).unwrap(), proof);
    }
    Ok(())
}

proptest! {
    #![proptest_config(seeds::config(64))]

    #[test]
    fn produced_streams_verify_like_the_model(model in arb_model(), paths in prop::collection::vec(arb_path(), 1..8)) {
        let tree = full_tree(&model);
        let root = root_hash(&tree);
        let proof = produce_stream_of_entry(&tree, &paths).unwrap();
        check_round_trip(&proof)?;
        for encoding in [Encoding::V1, Encoding::V2] {
            let bytes = encoding.encode_stream_proof(&proof).unwrap();
            let proven = verify_stream_proof_bytes(encoding, &bytes, &root, &paths).unwrap();
            prop_assert_eq!(root_hash(&proven.root), root);
            for path in &paths {
                prop_assert_eq!(read(&proven.root, path).unwrap(), model.get(path).cloned());
            }
        }
    }

    #[test]
    fn mutated_stream_bytes_never_panic(model in arb_model(), paths in prop::collection::vec(arb_path(), 1..5), at in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let tree = full_tree(&model);
        let root = root_hash(&tree);
        let proof = produce_stream_of_entry(&tree, &paths).unwrap();
        for encoding in [Encoding::V1, Encoding::V2] {
            let mut bytes = encoding.encode_stream_proof(&proof).unwrap();
            let i = at.index(bytes.len());
            bytes[i] ^= flip;
            // Either rejected, or a stream that still proves the model's
            // values (a flip in a hash the reads do not check).
            if let Ok(proven) = verify_stream_proof_bytes(encoding, &bytes, &root, &paths) {
                for path in &paths {
                    prop_assert_eq!(read(&proven.root, path).unwrap(), model.get(path).cloned());
                }
            }
        }
    }
}
