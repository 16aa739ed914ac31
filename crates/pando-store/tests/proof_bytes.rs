//! Proofs of reading paths at a commit, as the OCaml binding asks for
//! them: tree proofs and stream proofs in Octez's V1 and V2 encodings,
//! produced by the store and verified into a `Tree` of what they show.
//!
//! Checked here: each proof verifies against the commit's tree hash into
//! a tree that hashes to it and reads the store's values at the paths
//! read; any other read names the blinded part; the store's stream equals
//! the one `pando_core` produces from the same tree held in memory (the
//! order does not depend on how the tree is held); a wrong hash, cut or
//! extended bytes and other paths are precise errors; a step too long for
//! the encodings (256 bytes or more) is an error, never a panic; a proof's
//! tree never mixes with a store's.

use pando_core::proof::partial::{Entry, PartialTree};
use pando_core::proof::stream::{Path, produce_stream_of_entry};
use pando_core::proof::types::Elt;
use pando_core::proof::{Encoding, ProofError};
use pando_store::io::MemStorage;
use pando_store::{
    CommitMeta, Error, Hash, Options, Store, SyncPolicy, Tree, verify_stream_proof, verify_stream_proof_reads, verify_tree_proof,
};
use proptest::prelude::*;
#[path = "../../pando-core/tests/support/seeds.rs"]
mod seeds;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

fn p(steps: &[&str]) -> Path {
    steps.iter().map(|s| s.as_bytes().to_vec()).collect()
}

type Model = BTreeMap<Path, Vec<u8>>;

/// A store whose tree has a small directory, one of 100 entries (hashed
/// flat over tree inodes), one of 700 (an inode root), values large
/// enough for blobs, and values shared between paths.
fn store() -> &'static (Store, Hash, Hash, Model) {
    static STORE: OnceLock<(Store, Hash, Hash, Model)> = OnceLock::new();
    STORE.get_or_init(|| {
        let mut model = Model::new();
        for i in 0..700 {
            model.insert(p(&["contracts", "index", &format!("{i:06x}"), "balance"]), format!("{}", i % 40).into_bytes());
        }
        for i in 0..100 {
            model.insert(p(&["mid", &format!("m{i:03}")]), vec![i as u8; 3]);
        }
        for i in 0..5 {
            model.insert(p(&["small", &format!("s{i}")]), vec![i as u8; 100 + 5000 * i]);
        }
        model.insert(p(&["version"]), b"genesis".to_vec());
        let options = Options { sync: SyncPolicy::Never, ..Options::default() };
        let store = Store::open_storage(Arc::new(MemStorage::new()), options).unwrap();
        let mut tree = store.empty_tree();
        for (k, v) in &model {
            tree.add_mut(k, v).unwrap();
        }
        let commit =
            store.commit(&tree, CommitMeta { parents: &[], date: 1_600_000_000, author: "Tezos", message: "block 0" }).unwrap();
        let root = tree.hash().unwrap();
        (store, commit, root, model)
    })
}

fn paths() -> Vec<Path> {
    vec![
        p(&["contracts", "index", "00000a", "balance"]),
        p(&["contracts", "index", "0002bc", "balance"]),
        p(&["contracts", "index", "ffffff", "balance"]),
        p(&["mid", "m042"]),
        p(&["small", "s3"]),
        p(&["small", "s1"]),
        p(&["version"]),
        p(&["mid"]),
        p(&["version", "below"]),
    ]
}

fn check_reads(tree: &Tree, model: &Model, paths: &[Path]) {
    for path in paths {
        assert_eq!(tree.find(path).unwrap(), model.get(path).cloned(), "{path:?}");
    }
}

fn assert_blinded(result: pando_store::Result<Option<Vec<u8>>>, path_part: &str) {
    match result {
        Err(Error::Proof(ProofError::Blinded { path, .. })) => assert!(path.contains(path_part), "{path}"),
        other => panic!("expected a blinded part, got {other:?}"),
    }
}

#[test]
fn tree_proofs_verify_into_a_tree_of_what_they_show() {
    let (store, commit, root, model) = store();
    for encoding in [Encoding::V1, Encoding::V2] {
        let bytes = store.produce_tree_proof_of_paths(commit, &paths(), encoding).unwrap();
        let proven = verify_tree_proof(encoding, &bytes, root).unwrap();
        assert_eq!(proven.tree.hash().unwrap(), *root);
        assert_eq!(proven.before.hash(), *root);
        assert_eq!(proven.after, proven.before);
        check_reads(&proven.tree, model, &paths());
        assert_blinded(proven.tree.find(&["mid", "m043"]), "mid");
        assert_blinded(proven.tree.find(&["contracts", "index", "000001", "balance"]), "contracts/index");
        let err = proven.tree.find(&["small", "s2"]).unwrap_err();
        assert!(err.to_string().contains("the proof blinds the value at /small/s2"), "{err}");
        // The other encoding of the same proof is refused, never misread.
        let other = if encoding == Encoding::V1 { Encoding::V2 } else { Encoding::V1 };
        assert!(verify_tree_proof(other, &bytes, root).is_err());
    }
    let v1 = store.produce_tree_proof_of_paths(commit, &paths(), Encoding::V1).unwrap();
    let v2 = store.produce_tree_proof_of_paths(commit, &paths(), Encoding::V2).unwrap();
    assert!(v2.len() < v1.len(), "V2 is the compact one: {} against {}", v2.len(), v1.len());
}

#[test]
fn stream_proofs_verify_into_a_tree_of_what_was_read() {
    let (store, commit, root, model) = store();
    for encoding in [Encoding::V1, Encoding::V2] {
        let bytes = store.produce_stream_proof(commit, &paths(), encoding).unwrap();
        let proven = verify_stream_proof(encoding, &bytes, root, &paths()).unwrap();
        assert_eq!(proven.tree.hash().unwrap(), *root);
        check_reads(&proven.tree, model, &paths());
        assert_blinded(proven.tree.find(&["mid", "m043"]), "/mid/m043");
        assert_blinded(proven.tree.find(&["small", "s2"]), "/small/s2");
    }
}

/// A stream checked one read at a time, as a callback makes its reads:
/// each prefix of the reads takes the first elements of the stream and
/// answers from them, no more elements are left after each (a read of an
/// absent path may take none), none after the last; reads out of order
/// fail.
#[test]
fn stream_proofs_verify_read_by_read() {
    let (store, commit, root, model) = store();
    let all = paths();
    for encoding in [Encoding::V1, Encoding::V2] {
        let bytes = store.produce_stream_proof(commit, &all, encoding).unwrap();
        let mut left_before = usize::MAX;
        for n in 1..=all.len() {
            let (proven, left) = verify_stream_proof_reads(encoding, &bytes, root, &all[..n]).unwrap();
            check_reads(&proven.tree, model, &all[..n]);
            assert!(left <= left_before, "{n} reads leave {left}, {left_before} before");
            left_before = left;
        }
        assert_eq!(left_before, 0);
        let mut swapped = all.clone();
        swapped.swap(0, 3);
        assert!(verify_stream_proof_reads(encoding, &bytes, root, &swapped[..1]).is_err());
    }
}

/// The store's stream and pando-core's, from the same tree held in memory,
/// are element for element the same: the order is the reads', not the
/// holder's.
#[test]
fn the_store_streams_what_a_tree_in_memory_streams() {
    let (store, commit, _, model) = store();
    let mut memory = PartialTree::of_entry(Entry::empty_dir());
    for (k, v) in model {
        memory.add(k, v).unwrap();
    }
    let expected = produce_stream_of_entry(memory.root(), &paths()).unwrap();
    let bytes = store.produce_stream_proof(commit, &paths(), Encoding::V1).unwrap();
    assert_eq!(Encoding::V1.decode_stream_proof(&bytes).unwrap(), expected);
}

#[test]
fn hostile_proof_bytes_are_precise_errors() {
    let (store, commit, root, _) = store();
    let other = Hash::of_bytes(b"another tree");
    for encoding in [Encoding::V1, Encoding::V2] {
        let tree_bytes = store.produce_tree_proof_of_paths(commit, &paths(), encoding).unwrap();
        assert!(matches!(verify_tree_proof(encoding, &tree_bytes, &other), Err(Error::Proof(ProofError::WrongRoot { .. }))));
        for cut in [0, 3, tree_bytes.len() / 2, tree_bytes.len() - 1] {
            assert!(matches!(verify_tree_proof(encoding, &tree_bytes[..cut], root), Err(Error::Proof(ProofError::Encoding(_)))));
        }

        let bytes = store.produce_stream_proof(commit, &paths(), encoding).unwrap();
        assert!(matches!(
            verify_stream_proof(encoding, &bytes, &other, &paths()),
            Err(Error::Proof(ProofError::WrongRoot { .. }))
        ));
        for cut in [0, 3, bytes.len() / 2, bytes.len() - 1] {
            assert!(verify_stream_proof(encoding, &bytes[..cut], root, &paths()).is_err());
        }
        let mut proof = encoding.decode_stream_proof(&bytes).unwrap();
        proof.state.push(Elt::Value(b"extra".to_vec()));
        let long = encoding.encode_stream_proof(&proof).unwrap();
        assert!(matches!(
            verify_stream_proof(encoding, &long, root, &paths()),
            Err(Error::Proof(ProofError::StreamTooLong { unread: 1 }))
        ));
        // Fewer reads than the stream was made of leave elements unread;
        // more need elements it lacks.
        assert!(verify_stream_proof(encoding, &bytes, root, &paths()[..3]).is_err());
        let mut more = paths();
        more.push(p(&["mid", "m001"]));
        assert!(matches!(
            verify_stream_proof(encoding, &bytes, root, &more),
            Err(Error::Proof(ProofError::StreamTooShort { .. }))
        ));
        // A tree proof is not a stream proof.
        assert!(verify_stream_proof(encoding, &tree_bytes, root, &paths()).is_err());
    }
    assert!(matches!(store.produce_stream_proof(&other, &paths(), Encoding::V2), Err(Error::UnknownCommit(_))));
}

#[test]
fn a_proofs_tree_updates_in_memory_and_stays_apart_from_stores() {
    let (store, commit, root, _) = store();
    let bytes = store.produce_tree_proof_of_paths(commit, &paths(), Encoding::V2).unwrap();
    let proven = verify_tree_proof(Encoding::V2, &bytes, root).unwrap();
    let updated = proven.tree.add(&["mid", "m042"], b"new").unwrap();
    assert_eq!(updated.find(&["mid", "m042"]).unwrap().as_deref(), Some(&b"new"[..]));
    let expected = store.checkout(commit).unwrap().unwrap().add(&["mid", "m042"], b"new").unwrap().hash().unwrap();
    assert_eq!(updated.hash().unwrap(), expected, "an update of revealed parts hashes as the store's");
    assert!(matches!(
        store.commit(&updated, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "x" }),
        Err(Error::ForeignTree)
    ));
    let mut mine = store.empty_tree();
    assert!(matches!(mine.add_tree_mut(&["graft"], &proven.tree), Err(Error::ForeignTree)));
}

fn arb_paths() -> impl Strategy<Value = Vec<Path>> {
    let step = prop_oneof![
        Just(b"contracts".to_vec()),
        Just(b"index".to_vec()),
        Just(b"balance".to_vec()),
        Just(b"mid".to_vec()),
        Just(b"small".to_vec()),
        Just(b"version".to_vec()),
        (0usize..800).prop_map(|i| format!("{i:06x}").into_bytes()),
        (0usize..110).prop_map(|i| format!("m{i:03}").into_bytes()),
        (0usize..6).prop_map(|i| format!("s{i}").into_bytes()),
    ];
    let path = prop_oneof![
        prop::collection::vec(step.clone(), 0..5),
        (0usize..800).prop_map(|i| p(&["contracts", "index", &format!("{i:06x}"), "balance"])),
    ];
    prop::collection::vec(path, 1..6)
}

proptest! {
    #![proptest_config(seeds::config(32))]

    #[test]
    fn random_reads_prove_in_both_encodings(paths in arb_paths()) {
        let (store, commit, root, model) = store();
        for encoding in [Encoding::V1, Encoding::V2] {
            let bytes = store.produce_tree_proof_of_paths(commit, &paths, encoding).unwrap();
            let tree = verify_tree_proof(encoding, &bytes, root).unwrap().tree;
            prop_assert_eq!(tree.hash().unwrap(), *root);
            for path in &paths {
                prop_assert_eq!(tree.find(path).unwrap(), model.get(path).cloned());
            }
            let bytes = store.produce_stream_proof(commit, &paths, encoding).unwrap();
            let tree = verify_stream_proof(encoding, &bytes, root, &paths).unwrap().tree;
            prop_assert_eq!(tree.hash().unwrap(), *root);
            for path in &paths {
                prop_assert_eq!(tree.find(path).unwrap(), model.get(path).cloned());
            }
        }
    }
}

/// Directories nested as deep as the decoders accept become a store tree,
/// hashed and read, on a 1 MiB stack in both encodings.
#[test]
fn the_deepest_accepted_proof_becomes_a_tree_on_a_small_stack() {
    use pando_core::proof::types::{KindedHash, Tree as Shown, TreeProof};
    fn nested(levels: usize) -> Shown {
        let mut t = Shown::Value(b"leaf".to_vec());
        for _ in 0..levels {
            t = Shown::Node(vec![(b"a".to_vec(), t)]);
        }
        t
    }
    let deepest = pando_core::proof::encoding::MAX_NESTING - 1;
    let handle = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            let state = nested(deepest);
            let root = pando_core::proof::convert::entry_of_tree(&state).unwrap();
            let hash = PartialTree::of_entry(root).hash().unwrap();
            let proof = TreeProof { version: 0, before: KindedHash::Node(hash), after: KindedHash::Node(hash), state };
            for encoding in [Encoding::V1, Encoding::V2] {
                let bytes = encoding.encode_tree_proof(&proof).unwrap();
                let proven = verify_tree_proof(encoding, &bytes, &hash).unwrap();
                assert_eq!(proven.tree.hash().unwrap(), hash);
                assert_eq!(proven.tree.length(&["a"]).unwrap(), 1);
            }
        })
        .unwrap();
    handle.join().unwrap();
}

/// A directory whose 300 names all collide at depths 0 and 1: its root
/// inode and the one below have a single child, so the stream folds them
/// into one extender; from the committed store as from memory.
#[test]
fn colliding_names_stream_an_extender_from_the_store() {
    use pando_core::inode::index;
    let names: Vec<Vec<u8>> =
        (0u32..).map(|i| format!("c{i}").into_bytes()).filter(|s| index(0, s) == 0 && index(1, s) == 0).take(300).collect();
    let options = Options { sync: SyncPolicy::Never, ..Options::default() };
    let store = Store::open_storage(Arc::new(MemStorage::new()), options).unwrap();
    let mut tree = store.empty_tree();
    let mut memory = PartialTree::of_entry(Entry::empty_dir());
    for (i, name) in names.iter().enumerate() {
        let path = [b"d".to_vec(), name.clone()];
        tree.add_mut(&path, &[i as u8]).unwrap();
        memory.add(&path, &[i as u8]).unwrap();
    }
    let commit = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "collisions" }).unwrap();
    let root = tree.hash().unwrap();
    let paths: Vec<Path> = vec![vec![b"d".to_vec(), names[7].clone()], vec![b"d".to_vec(), names[250].clone()], p(&["d", "zz"])];
    for encoding in [Encoding::V1, Encoding::V2] {
        let bytes = store.produce_stream_proof(&commit, &paths, encoding).unwrap();
        let proof = encoding.decode_stream_proof(&bytes).unwrap();
        assert_eq!(proof, produce_stream_of_entry(memory.root(), &paths).unwrap());
        assert!(proof.state.iter().any(|e| matches!(e, Elt::InodeExtender(x) if x.segment == [0, 0])));
        let proven = verify_stream_proof(encoding, &bytes, &root, &paths).unwrap();
        assert_eq!(proven.tree.find(&paths[0]).unwrap(), Some(vec![7]));
        assert_eq!(proven.tree.find(&paths[1]).unwrap(), Some(vec![250]));
        assert_eq!(proven.tree.hash().unwrap(), root);
        // A tree proof of the same reads shows the chain as an extender too.
        let bytes = store.produce_tree_proof_of_paths(&commit, &paths, encoding).unwrap();
        let proven = verify_tree_proof(encoding, &bytes, &root).unwrap();
        assert_eq!(proven.tree.find(&paths[1]).unwrap(), Some(vec![250]));
    }
}

/// A step's length is one byte in both encodings: a proof showing a step
/// of 256 bytes or more is refused with an error, never a panic (Octez's
/// encoder refuses it too, and the duo checks that irmin's side does),
/// while one of 255 bytes is proved; a proof that does not show the long
/// step (its directory blinded) is unaffected, in a flat directory as in
/// one hashed over inodes.
#[test]
fn a_step_too_long_for_the_encoding_is_an_error() {
    let options = Options { sync: SyncPolicy::Never, ..Options::default() };
    let store = Store::open_storage(Arc::new(MemStorage::new()), options).unwrap();
    let mut tree = store.empty_tree();
    let step = |n: usize, c: u8| vec![c; n];
    let path = |dir: &str, s: Vec<u8>| vec![dir.as_bytes().to_vec(), s];
    let max = path("max", step(255, b'a'));
    let long = path("long", step(256, b'b'));
    let longer = path("long", step(65536, b'd'));
    let in_inodes = path("big", step(300, b'e'));
    for (i, p) in [&max, &long, &longer, &in_inodes].into_iter().enumerate() {
        tree.add_mut(p, &[i as u8]).unwrap();
    }
    for i in 0..700 {
        tree.add_mut(&path("big", format!("k{i:04}").into_bytes()), b"v").unwrap();
    }
    let commit = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "long steps" }).unwrap();
    let root = tree.hash().unwrap();
    for encoding in [Encoding::V1, Encoding::V2] {
        for refused in [&long, &longer, &in_inodes] {
            let paths = vec![refused.clone()];
            let err = store.produce_tree_proof_of_paths(&commit, &paths, encoding).unwrap_err();
            assert!(err.to_string().contains("cannot encode"), "{err}");
            let err = store.produce_stream_proof(&commit, &paths, encoding).unwrap_err();
            assert!(err.to_string().contains("cannot encode"), "{err}");
        }
        let proved = vec![max.clone(), path("big", b"k0001".to_vec())];
        let bytes = store.produce_tree_proof_of_paths(&commit, &proved, encoding).unwrap();
        let proven = verify_tree_proof(encoding, &bytes, &root).unwrap();
        assert_eq!(proven.tree.find(&max).unwrap(), Some(vec![0]));
        assert_eq!(proven.tree.find(&proved[1]).unwrap(), Some(b"v".to_vec()));
        let bytes = store.produce_stream_proof(&commit, &proved, encoding).unwrap();
        let proven = verify_stream_proof(encoding, &bytes, &root, &proved).unwrap();
        assert_eq!(proven.tree.find(&max).unwrap(), Some(vec![0]));
    }
}
