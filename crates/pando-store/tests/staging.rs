//! Contents staged when added (`Options::stage_bytes`): written to the pack
//! before any commit refers to them, they read back, hash and commit as if
//! held in memory; a crash before the commit loses only them; collections
//! keep them while a tree holds them.

mod common;

use common::held::{HeldStorage, Hold};
use common::*;
use pando_core::Hash;
use pando_core::proof::keys::Found;
use pando_store::io::{FaultKind, FaultPlan, FaultyStorage, MemStorage};
use pando_store::{CheckScope, CommitMeta, Error, Options, Store, Tree};
use std::sync::Arc;
use std::time::Duration;

/// Every collection traces all: these tests count on one dropping each
/// record nothing needs any more.
fn options(stage_bytes: u64) -> Options {
    Options {
        chunk_target_bytes: 8 << 10,
        checkpoint_commits: 4,
        cache_bytes: 64 << 10,
        stage_bytes,
        gc_whole_trace_growth_percent: 0,
        ..Options::default()
    }
}

fn code(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

fn path(steps: &[&str]) -> Vec<Vec<u8>> {
    steps.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// Adds a long value and a short one under each of `n` contracts.
fn add_contracts(tree: &mut Tree, model: &mut Model, n: u8, seed: u8) {
    for i in 0..n {
        let id = format!("KT{seed:02}{i:03}");
        let long = path(&["contracts", "index", &id, "code"]);
        let value = code(seed.wrapping_add(i), 3000 + usize::from(i) * 100);
        tree.add_mut(&long, &value).unwrap();
        model_add(model, &long, &value);
        let short = path(&["contracts", "index", &id, "balance"]);
        tree.add_mut(&short, &[i; 8]).unwrap();
        model_add(model, &short, &[i; 8]);
    }
}

#[test]
fn staged_contents_are_on_disk_before_the_commit_and_hash_the_same() {
    let staging = Store::open_storage(Arc::new(MemStorage::new()), options(2048)).unwrap();
    let in_memory = Store::open_storage(Arc::new(MemStorage::new()), options(0)).unwrap();
    let (mut staged, mut held, mut model) = (staging.empty_tree(), in_memory.empty_tree(), Model::new());
    let before = staging.pack_bytes();
    add_contracts(&mut staged, &mut model, 20, 1);
    add_contracts(&mut held, &mut Model::new(), 20, 1);
    // Values of 3,000 bytes and more went to the pack as they were added
    // (written on the staging thread, which hashes each once written: the
    // tree's hash waits for them); the store holding them in memory wrote
    // nothing yet.
    assert_eq!(staged.hash().unwrap(), held.hash().unwrap());
    let code_bytes: u64 = (0..20).map(|i| 3000 + i * 100).sum();
    assert!(staging.pack_bytes() - before >= code_bytes, "{} bytes staged", staging.pack_bytes() - before);
    assert_eq!(in_memory.pack_bytes(), before);
    let report = staging.check(CheckScope::All, 10, &mut |_| {}).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    // They read back before the commit.
    check_tree(&staged, &model).unwrap();
    assert_eq!(staged.hash().unwrap(), model_hash(&model));

    let commit = staging.commit(&staged, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "genesis" }).unwrap();
    assert_eq!(
        commit,
        in_memory.commit(&held, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "genesis" }).unwrap()
    );
    // The commit wrote each staged value once: the two packs differ only
    // in how long the encodings of the blobs' offsets are (a value written
    // twice would add 3,000 bytes).
    assert!(
        staging.pack_bytes().abs_diff(in_memory.pack_bytes()) < 100,
        "{} against {}",
        staging.pack_bytes(),
        in_memory.pack_bytes()
    );
    let tree = staging.checkout(&commit).unwrap().unwrap();
    check_tree(&tree, &model).unwrap();
    let report = staging.check(CheckScope::All, 10, &mut |_| {}).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);

    // The newest commit's tree in memory still holds the staged pointers:
    // a proof and a snapshot made from it show the values.
    let paths = vec![path(&["contracts", "index", "KT01007", "code"]), path(&["contracts", "index", "KT01007", "balance"])];
    let values = staging.prove_keys(&commit, &paths).unwrap().verify(&commit).unwrap();
    assert_eq!(values, vec![Found::Value(code(8, 3700)), Found::Value(vec![7; 8])]);
    let mut snapshot = Vec::new();
    staging.export_snapshot(&commit, &mut snapshot).unwrap();
    let imported = Store::open_storage(Arc::new(MemStorage::new()), options(2048)).unwrap();
    imported.import_snapshot(&mut &snapshot[..]).unwrap();
    check_tree(&imported.checkout(&commit).unwrap().unwrap(), &model).unwrap();
}

/// Staged contents are hashed on a thread of their own: a tree asked for
/// its hash right after many of them were added (more than that thread's
/// queue holds) waits for them and hashes as one holding them in memory;
/// so does a commit, and a read of each value gives it back.
#[test]
fn staged_contents_hashed_on_their_thread_hash_as_in_memory() {
    let staging = Store::open_storage(Arc::new(MemStorage::new()), options(2048)).unwrap();
    let in_memory = Store::open_storage(Arc::new(MemStorage::new()), options(0)).unwrap();
    let (mut staged, mut held, mut model) = (staging.empty_tree(), in_memory.empty_tree(), Model::new());
    for round in 0..3u8 {
        add_contracts(&mut staged, &mut model, 100, round);
        add_contracts(&mut held, &mut Model::new(), 100, round);
        assert_eq!(staged.hash().unwrap(), held.hash().unwrap(), "round {round}");
    }
    assert_eq!(staged.hash().unwrap(), model_hash(&model));
    let commit = staging.commit(&staged, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "genesis" }).unwrap();
    assert_eq!(
        commit,
        in_memory.commit(&held, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "genesis" }).unwrap()
    );
    check_tree(&staging.checkout(&commit).unwrap().unwrap(), &model).unwrap();
}

/// The staging thread writes a staged record: adding the value does not
/// wait for the write, but a read of it and the commit do.
#[test]
fn a_staged_value_is_read_and_committed_once_its_thread_wrote_it() {
    let storage = Arc::new(HeldStorage::new("pando-hash", Hold::Writes));
    let store = Store::open_storage(storage.clone(), options(2048)).unwrap();
    let mut tree = store.empty_tree();
    let code = code(9, 5000);
    // Returns while the write waits.
    tree.add_mut(&["contracts", "code"], &code).unwrap();
    tree.add_mut(&["contracts", "balance"], b"12").unwrap();
    let mut waited = 0;
    while storage.stopped() == 0 && waited < 10_000 {
        std::thread::sleep(Duration::from_millis(1));
        waited += 1;
    }
    let (read, committed) = std::thread::scope(|scope| {
        let read = scope.spawn(|| tree.find(&["contracts", "code"]));
        let committed =
            scope.spawn(|| store.commit(&tree, CommitMeta { parents: &[], date: 0, author: "Tezos", message: "genesis" }));
        std::thread::sleep(Duration::from_millis(100));
        let waiting = !read.is_finished() && !committed.is_finished();
        storage.release();
        assert!(waiting, "a read and a commit of a staged value wait for its write");
        (read.join().unwrap(), committed.join().unwrap())
    });
    assert_eq!(storage.stopped(), 1, "the staging thread wrote the record");
    assert_eq!(read.unwrap(), Some(code.clone()));
    let commit = committed.unwrap();
    drop(tree);
    drop(store);
    let store = Store::open_storage(storage, options(2048)).unwrap();
    assert_eq!(store.checkout(&commit).unwrap().unwrap().find(&["contracts", "code"]).unwrap(), Some(code));
}

/// A staged record's write fails on the staging thread: the next commit
/// fails with that error, later writes are refused naming it, a read of
/// the value is an error (never other bytes), and the commits before it
/// are intact.
#[test]
fn a_failed_staged_write_fails_the_next_commit() {
    let storage = FaultyStorage::new();
    let store = Store::open_storage(Arc::new(storage.clone()), options(2048)).unwrap();
    let genesis = store
        .commit(
            &store.empty_tree().add(&["a"], b"1").unwrap(),
            CommitMeta { parents: &[], date: 0, author: "Tezos", message: "genesis" },
        )
        .unwrap();
    let mut tree = store.checkout(&genesis).unwrap().unwrap();
    // The staged record's write is the next mutating operation.
    storage.set_plan(FaultPlan { fail_op: Some((0, FaultKind::NoSpace)), fail_reads_after: None });
    tree.add_mut(&["contracts", "code"], &code(3, 4000)).unwrap();
    let failed = store.commit(&tree, CommitMeta { parents: &[genesis], date: 1, author: "Tezos", message: "block" }).unwrap_err();
    assert!(failed.to_string().contains("injected ENOSPC"), "{failed}");
    match store.commit(&tree, CommitMeta { parents: &[genesis], date: 1, author: "Tezos", message: "block" }) {
        Err(Error::PreviousIo { first }) => assert_eq!(first, failed.to_string()),
        other => panic!("expected a refusal naming {failed}, got {other:?}"),
    }
    match tree.find(&["contracts", "code"]) {
        Err(Error::PreviousIo { first }) => assert_eq!(first, failed.to_string()),
        other => panic!("expected the read of a value never written to name {failed}, got {other:?}"),
    }
    match tree.add_mut(&["contracts", "more"], &code(4, 4000)) {
        Err(Error::PreviousIo { first }) => assert_eq!(first, failed.to_string()),
        other => panic!("expected a refusal naming {failed}, got {:?}", other.map(drop)),
    }
    assert_eq!(store.checkout(&genesis).unwrap().unwrap().find(&["a"]).unwrap(), Some(b"1".to_vec()));
}

#[test]
fn a_crash_before_the_commit_loses_only_the_staged_contents() {
    let storage = MemStorage::new();
    let store = Store::open_storage(Arc::new(storage.clone()), options(2048)).unwrap();
    let mut model = Model::new();
    let mut tree = store.empty_tree();
    add_contracts(&mut tree, &mut model, 5, 1);
    let first = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "one" }).unwrap();
    let committed_bytes = store.pack_bytes();
    let mut next = store.checkout(&first).unwrap().unwrap();
    add_contracts(&mut next, &mut Model::new(), 5, 2);
    assert!(store.pack_bytes() > committed_bytes, "the second block's values are staged");
    // Their writes done (the hash waits for them: the files are shared
    // with the store opened next, so a late write must not land there).
    next.hash().unwrap();
    // The process dies: no close, no flush.
    std::mem::forget((next, store));

    let store = Store::open_storage(Arc::new(storage.clone()), options(2048)).unwrap();
    assert_eq!(store.pack_bytes(), committed_bytes, "the staged tail is truncated");
    assert_eq!(store.commit_count(), 1);
    check_tree(&store.checkout(&first).unwrap().unwrap(), &model).unwrap();
    // The store goes on, staging again where the lost values were.
    let mut again = store.checkout(&first).unwrap().unwrap();
    add_contracts(&mut again, &mut model, 5, 3);
    let second = store.commit(&again, CommitMeta { parents: &[first], date: 2, author: "Tezos", message: "two" }).unwrap();
    drop(store);
    let store = Store::open_storage(Arc::new(storage), options(2048)).unwrap();
    check_tree(&store.checkout(&second).unwrap().unwrap(), &model).unwrap();
}

#[test]
fn a_crash_after_the_commit_keeps_the_staged_contents() {
    let storage = MemStorage::new();
    let store = Store::open_storage(Arc::new(storage.clone()), options(2048)).unwrap();
    let mut model = Model::new();
    let mut tree = store.empty_tree();
    add_contracts(&mut tree, &mut model, 8, 1);
    let commit = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "one" }).unwrap();
    std::mem::forget((tree, store));
    let store = Store::open_storage(Arc::new(storage), options(2048)).unwrap();
    check_tree(&store.checkout(&commit).unwrap().unwrap(), &model).unwrap();
}

/// Commits `n` blocks of short values on top of `parent`.
fn blocks(store: &Store, parent: Hash, n: u32) -> Hash {
    let mut parent = parent;
    for b in 0..n {
        let mut tree = store.checkout(&parent).unwrap().unwrap();
        for i in 0..30u32 {
            let key = format!("{:04}", (b * 17 + i) % 200);
            tree.add_mut(&["accounts", &key], format!("{b}-{i}").as_bytes()).unwrap();
        }
        parent = store
            .commit(&tree, CommitMeta { parents: &[parent], date: i64::from(b), author: "Tezos", message: "block" })
            .unwrap();
    }
    parent
}

/// A store staging values of 2 KiB and more, its genesis commit holding
/// two contracts.
fn store_with_genesis() -> (Store, Hash) {
    let store = Store::open_storage(Arc::new(MemStorage::new()), options(2048)).unwrap();
    let mut tree = store.empty_tree();
    add_contracts(&mut tree, &mut Model::new(), 2, 1);
    let genesis = store.commit(&tree, CommitMeta { parents: &[], date: 0, author: "Tezos", message: "genesis" }).unwrap();
    (store, genesis)
}

#[test]
fn collections_keep_what_an_uncommitted_tree_staged() {
    let (store, genesis) = store_with_genesis();
    // A tree stages a value, and waits while many blocks are committed and
    // the chunk holding the value falls below every kept commit.
    let mut waiting = store.checkout(&genesis).unwrap().unwrap();
    let long = path(&["contracts", "index", "late", "code"]);
    let value = code(9, 5000);
    waiting.add_mut(&long, &value).unwrap();
    let head = blocks(&store, genesis, 60);
    store.gc(&head).unwrap();
    let report = store.wait_gc().unwrap().expect("a collection ran");
    assert!(report.collected_commits >= 60, "{report:?}");
    // The staged value is still there: the tree reads it and commits.
    assert_eq!(waiting.find(&long).unwrap().as_deref(), Some(&value[..]));
    let late = store.commit(&waiting, CommitMeta { parents: &[head], date: 99, author: "Tezos", message: "late" }).unwrap();
    let tree = store.checkout(&late).unwrap().unwrap();
    assert_eq!(tree.find(&long).unwrap().as_deref(), Some(&value[..]));
    let report = store.check(CheckScope::All, 10, &mut |_| {}).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// Once a commit refers to a staged value, the value is traced from the
/// commits like any other record: a tree that still holds it (the replay's
/// and a node's trees do, block after block) no longer holds back the
/// boundary of every collection. A tree that outlives the commits that
/// kept it is refused at its commit, as for any collected record.
#[test]
fn a_committed_staged_value_does_not_hold_back_collections() {
    let (store, genesis) = store_with_genesis();
    let mut holding = store.checkout(&genesis).unwrap().unwrap();
    let staged_at = store.pack_bytes();
    let long = path(&["contracts", "index", "late", "code"]);
    let value = code(9, 5000);
    holding.add_mut(&long, &value).unwrap();
    let with_value =
        store.commit(&holding, CommitMeta { parents: &[genesis], date: 1, author: "Tezos", message: "value" }).unwrap();
    // Many blocks later, the value is still in the newest tree: the
    // collection keeps it by tracing, past a boundary beyond its offset.
    let head = blocks(&store, with_value, 60);
    store.gc(&head).unwrap();
    let report = store.wait_gc().unwrap().expect("a collection ran");
    assert!(report.boundary > staged_at, "boundary {} against the staged value at {staged_at}", report.boundary);
    assert!(report.bytes_after < report.bytes_before, "{report:?}");
    assert_eq!(holding.find(&long).unwrap().as_deref(), Some(&value[..]));
    let tree = store.checkout(&head).unwrap().unwrap();
    assert_eq!(tree.find(&long).unwrap().as_deref(), Some(&value[..]));

    // Removed, and its last commit collected: the old tree that still
    // holds it cannot commit it again.
    let mut without = store.checkout(&head).unwrap().unwrap();
    without.remove_mut(&long).unwrap();
    let removed = store.commit(&without, CommitMeta { parents: &[head], date: 70, author: "Tezos", message: "removed" }).unwrap();
    let head = blocks(&store, removed, 60);
    store.gc(&head).unwrap();
    let report = store.wait_gc().unwrap().expect("a collection ran");
    assert!(report.boundary > staged_at, "{report:?}");
    holding.add_mut(&["accounts", "late"], b"late").unwrap();
    match store.commit(&holding, CommitMeta { parents: &[head], date: 200, author: "Tezos", message: "stale" }) {
        Err(pando_store::Error::Collected { offset }) => assert!(offset < report.boundary, "{offset}"),
        other => panic!("a tree holding collected records committed: {other:?}"),
    }
    let report = store.check(CheckScope::All, 10, &mut |_| {}).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}
