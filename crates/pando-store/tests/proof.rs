//! Proofs produced from a real store: random reads and writes run on a
//! committed tree through `Store::produce_tree_proof` answer as the store's
//! own `Tree` does, end on the hash the store computes, and verify with
//! `pando_core` alone (after an encode/decode round trip); a keys proof
//! checks against the commit hash; a damaged record is reported as such.

use pando_core::proof::encoding::{decode, encode};
use pando_core::proof::keys::{Found, KeysProof};
use pando_core::proof::{PartialTree, ProofError, verify_tree_proof};
use pando_store::io::{MemStorage, Storage};
use pando_store::{CommitMeta, Error, Hash, Kind, Options, Store, SyncPolicy, Tree};
use proptest::prelude::*;
#[path = "../../pando-core/tests/support/seeds.rs"]
mod seeds;
use std::sync::{Arc, OnceLock};

type Path = Vec<Vec<u8>>;

fn name(i: usize) -> Vec<u8> {
    format!("{i:06x}").into_bytes()
}

/// A store with directories of every shape: small, 33-256 entries (a
/// stable hash over tree inodes), more than 256 (an inode root), nested,
/// and values large enough to be blobs.
fn store() -> &'static (Store, Hash) {
    static STORE: OnceLock<(Store, Hash)> = OnceLock::new();
    STORE.get_or_init(|| {
        let options = Options { sync: SyncPolicy::Never, ..Options::default() };
        let store = Store::open_storage(Arc::new(MemStorage::new()), options).unwrap();
        let mut tree = store.empty_tree();
        for i in 0..2000 {
            tree.add_mut(&[b"contracts".to_vec(), b"index".to_vec(), name(i), b"balance".to_vec()], &i.to_le_bytes()).unwrap();
        }
        for i in 0..100 {
            tree.add_mut(&[b"mid".to_vec(), name(i)], &[i as u8; 3]).unwrap();
        }
        for i in 0..10 {
            tree.add_mut(&[b"small".to_vec(), name(i)], &vec![i as u8; 100 + 50 * i]).unwrap();
        }
        tree.add_mut(&[b"version"], b"genesis").unwrap();
        let commit = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "pando", message: "proof test" }).unwrap();
        (store, commit)
    })
}

#[derive(Clone, Debug)]
enum Op {
    Find(Path),
    Mem(Path),
    MemTree(Path),
    Length(Path),
    List(Path),
    Add(Path, Vec<u8>),
    Remove(Path),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Answer {
    Value(Option<Vec<u8>>),
    Bool(bool),
    Length(u64),
    List(Vec<(Vec<u8>, Kind)>),
    Done,
}

fn run_partial(tree: &mut PartialTree<'_>, ops: &[Op]) -> Result<Vec<Answer>, ProofError> {
    ops.iter()
        .map(|op| {
            Ok(match op {
                Op::Find(p) => Answer::Value(tree.find(p)?),
                Op::Mem(p) => Answer::Bool(tree.mem(p)?),
                Op::MemTree(p) => Answer::Bool(tree.mem_tree(p)?),
                Op::Length(p) => Answer::Length(tree.length(p)?),
                Op::List(p) => Answer::List(tree.list(p)?),
                Op::Add(p, v) => {
                    tree.add(p, v)?;
                    Answer::Done
                }
                Op::Remove(p) => {
                    tree.remove(p)?;
                    Answer::Done
                }
            })
        })
        .collect()
}

fn run_store(tree: &mut Tree, ops: &[Op]) -> Vec<Answer> {
    ops.iter()
        .map(|op| match op {
            Op::Find(p) => Answer::Value(tree.find(p).unwrap()),
            Op::Mem(p) => Answer::Bool(tree.mem(p).unwrap()),
            Op::MemTree(p) => Answer::Bool(tree.mem_tree(p).unwrap()),
            Op::Length(p) => Answer::Length(tree.length(p).unwrap()),
            Op::List(p) => {
                let mut names: Vec<(Vec<u8>, Kind)> =
                    tree.list(p, 0, None).unwrap().into_iter().map(|(n, t)| (n, t.kind())).collect();
                names.sort_by(|a, b| a.0.cmp(&b.0));
                Answer::List(names)
            }
            Op::Add(p, v) => {
                tree.add_mut(p, v).unwrap();
                Answer::Done
            }
            Op::Remove(p) => {
                tree.remove_mut(p).unwrap();
                Answer::Done
            }
        })
        .collect()
}

fn arb_path() -> impl Strategy<Value = Path> {
    let index = (0usize..2100).prop_map(|i| vec![b"contracts".to_vec(), b"index".to_vec(), name(i), b"balance".to_vec()]);
    let mid = (0usize..110).prop_map(|i| vec![b"mid".to_vec(), name(i)]);
    let small = (0usize..12).prop_map(|i| vec![b"small".to_vec(), name(i)]);
    let dirs = prop::sample::select(vec![
        vec![],
        vec![b"contracts".to_vec()],
        vec![b"contracts".to_vec(), b"index".to_vec()],
        vec![b"mid".to_vec()],
        vec![b"small".to_vec()],
        vec![b"version".to_vec()],
        vec![b"version".to_vec(), b"below".to_vec()],
        vec![b"absent".to_vec(), b"x".to_vec()],
    ]);
    prop_oneof![4 => index, 2 => mid, 2 => small, 1 => dirs]
}

fn arb_ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => arb_path().prop_map(Op::Find),
        1 => arb_path().prop_map(Op::Mem),
        1 => arb_path().prop_map(Op::MemTree),
        1 => arb_path().prop_map(Op::Length),
        1 => arb_path().prop_map(Op::List),
        3 => (arb_path(), prop::collection::vec(any::<u8>(), 0..6)).prop_map(|(p, v)| Op::Add(p, v)),
        2 => arb_path().prop_map(Op::Remove),
    ];
    prop::collection::vec(op, 1..16)
}

proptest! {
    #![proptest_config(seeds::config(64))]

    #[test]
    fn store_proofs_answer_as_the_store_and_verify(ops in arb_ops()) {
        let (store, commit) = store();
        let mut expected_tree = store.checkout(commit).unwrap().unwrap();
        let expected = run_store(&mut expected_tree, &ops);
        let (proof, answers) = store.produce_tree_proof(commit, |t| run_partial(t, &ops)).unwrap();
        prop_assert_eq!(&answers, &expected);
        prop_assert_eq!(proof.before.hash(), store.checkout(commit).unwrap().unwrap().hash().unwrap());
        prop_assert_eq!(proof.after.hash(), expected_tree.hash().unwrap());

        let decoded = decode(&encode(&proof).unwrap()).unwrap();
        let (after, verified) = verify_tree_proof(&decoded, |t| run_partial(t, &ops)).unwrap();
        prop_assert_eq!(&verified, &expected);
        prop_assert_eq!(after.hash().unwrap(), expected_tree.hash().unwrap());
    }
}

#[test]
fn a_tree_with_uncommitted_changes_proves_too() {
    let (store, commit) = store();
    let mut tree = store.checkout(commit).unwrap().unwrap();
    tree.add_mut(&[b"mid".to_vec(), b"fresh".to_vec()], b"new").unwrap();
    tree.remove_mut(&[b"small".to_vec(), name(3)]).unwrap();
    let (proof, value) = tree.produce_proof(|t| t.find(&[b"mid".to_vec(), b"fresh".to_vec()])).unwrap();
    assert_eq!(value, Some(b"new".to_vec()));
    assert_eq!(proof.before.hash(), tree.hash().unwrap());
    let (_, verified) = verify_tree_proof(&proof, |t| t.find(&[b"mid".to_vec(), b"fresh".to_vec()])).unwrap();
    assert_eq!(verified, Some(b"new".to_vec()));
}

#[test]
fn keys_proofs_check_against_the_commit() {
    let (store, commit) = store();
    let paths: Vec<Path> = vec![
        vec![b"contracts".to_vec(), b"index".to_vec(), name(17), b"balance".to_vec()],
        vec![b"contracts".to_vec(), b"index".to_vec(), name(5000), b"balance".to_vec()],
        vec![b"small".to_vec(), name(9)],
        vec![b"version".to_vec()],
        vec![b"mid".to_vec()],
    ];
    let proof = store.prove_keys(commit, &paths).unwrap();
    let bytes = proof.encode().unwrap();
    let decoded = KeysProof::decode(&bytes).unwrap();
    assert_eq!(decoded, proof);
    let values = decoded.verify(commit).unwrap();
    // A directory is shown as one, with its hash.
    let mid = store.checkout(commit).unwrap().unwrap().find_tree(&[b"mid".to_vec()]).unwrap().unwrap().hash().unwrap();
    assert_eq!(
        values,
        vec![
            Found::Value(17usize.to_le_bytes().to_vec()),
            Found::Absent,
            Found::Value(vec![9; 550]),
            Found::Value(b"genesis".to_vec()),
            Found::Dir(mid)
        ]
    );
    // The root tree hash is accepted too; any other hash is not.
    assert_eq!(decoded.verify(&proof.proof.before.hash()).unwrap(), values);
    assert!(matches!(decoded.verify(&Hash::of_bytes(b"other")), Err(ProofError::WrongRoot { .. })));
    // Asking the proof about another path than it was made for fails cleanly.
    let mut other = decoded.clone();
    other.paths[0] = vec![b"contracts".to_vec(), b"index".to_vec(), name(18), b"balance".to_vec()];
    assert!(matches!(other.verify(commit), Err(ProofError::Blinded { .. })));
    // Every truncation of the file is a clean error.
    for cut in 0..bytes.len() {
        assert!(KeysProof::decode(&bytes[..cut]).is_err(), "truncated at {cut} accepted");
    }
}

#[test]
fn unknown_commits_and_damaged_records_are_errors() {
    let (store, _) = store();
    assert!(matches!(store.prove_keys(&Hash::of_bytes(b"nope"), &[] as &[&[&str]]), Err(Error::UnknownCommit(_))));

    // A store whose index directory record is damaged: the proof reports the
    // store's own corruption error, with its file and offset.
    let storage = Arc::new(MemStorage::new());
    let options = Options { sync: SyncPolicy::EveryCommit, cache_bytes: 0, checkpoint_commits: 1, ..Options::default() };
    let store = Store::open_storage(storage.clone(), options.clone()).unwrap();
    let mut tree = store.empty_tree();
    for i in 0..300 {
        tree.add_mut(&[b"dir".to_vec(), name(i)], &[7u8; 40]).unwrap();
    }
    let commit = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "pando", message: "damaged" }).unwrap();
    store.close().unwrap();
    // One byte in the middle of the pack, among the directory's records.
    let names = storage.list().unwrap();
    let pack = names.iter().find(|n| n.ends_with(".pack")).expect("a pack file");
    let file = storage.open(pack, false).unwrap();
    let middle = file.len().unwrap() / 2;
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, middle).unwrap();
    file.write_all_at(&[byte[0] ^ 0xff], middle).unwrap();
    let store = Store::open_storage(storage, options).unwrap();
    let paths: Vec<Path> = (0..300).map(|i| vec![b"dir".to_vec(), name(i)]).collect();
    match store.prove_keys(&commit, &paths) {
        Err(Error::Corrupt { .. } | Error::ChecksumMismatch { .. }) => {}
        other => panic!("expected a corruption error, got {:?}", other.map(|_| ())),
    }
}
