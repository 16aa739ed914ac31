//! A tree never holds an empty directory, whatever the public API does to
//! it, and hashes as irmin 3.7.2 does for the same operations: removing
//! the last entry of a directory removes the directory from its parent
//! (at every level it empties), adding an empty tree at a path removes
//! what is there, and the empty directory hashes as the empty node's
//! encoding (a count of 0). Each tree is also committed and checked out,
//! so what the disk holds hashes the same.

mod common;

use common::*;
use pando_store::io::MemStorage;
use pando_store::{CommitMeta, Hash, Options, Store, Tree};
use std::sync::Arc;

fn store() -> Store {
    Store::open_storage(Arc::new(MemStorage::new()), Options::default()).unwrap()
}

fn path(steps: &[&str]) -> Path {
    steps.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// The empty node's hash: BLAKE2b-256 of its encoding, a 64-bit count of 0.
fn empty_hash() -> Hash {
    Hash::of_bytes(&[0; 8])
}

/// `tree` against `model` (hash and values), then the same once committed
/// and checked out; returns the checked-out tree.
fn check(store: &Store, tree: &Tree, model: &Model) -> Tree {
    check_tree(tree, model).unwrap();
    let commit = store.commit(tree, CommitMeta { parents: &[], date: 0, author: "Tezos", message: "" }).unwrap();
    let back = store.checkout(&commit).unwrap().expect("the commit just made");
    check_tree(&back, model).unwrap();
    back
}

#[test]
fn the_empty_tree_hashes_as_the_empty_node() {
    let store = store();
    assert_eq!(Tree::empty().hash().unwrap(), empty_hash());
    assert_eq!(model_hash(&Model::new()), empty_hash());
    let back = check(&store, &store.empty_tree(), &Model::new());
    assert!(back.is_empty().unwrap());
}

#[test]
fn removing_the_last_entry_prunes_every_directory_it_empties() {
    let store = store();
    let mut model = Model::new();
    let mut tree = store.empty_tree();
    for (steps, value) in [(&["a", "b", "c", "d"][..], "1"), (&["a", "e"], "2"), (&["x"], "3")] {
        tree.add_mut(steps, value.as_bytes()).unwrap();
        model_add(&mut model, &path(steps), value.as_bytes());
    }
    tree.remove_mut(&["a", "b", "c", "d"]).unwrap();
    model_remove(&mut model, &path(&["a", "b", "c", "d"]));
    assert!(!tree.mem_tree(&["a", "b"]).unwrap(), "`a/b` and `a/b/c` held only `d`");
    assert!(tree.mem_tree(&["a"]).unwrap(), "`a` still holds `e`");
    let mut tree = check(&store, &tree, &model);
    tree.remove_mut(&["a", "e"]).unwrap();
    model_remove(&mut model, &path(&["a", "e"]));
    assert!(!tree.mem_tree(&["a"]).unwrap());
    let tree = check(&store, &tree, &model);
    assert_eq!(tree.hash().unwrap(), store.empty_tree().add(&["x"], b"3").unwrap().hash().unwrap());
    let tree = tree.remove(&["x"]).unwrap();
    assert_eq!(tree.hash().unwrap(), empty_hash());
    check(&store, &tree, &Model::new());
}

/// Past 32 entries a directory is a tree of inodes, past 256 it hashes as
/// one: emptied one entry at a time, it still disappears.
#[test]
fn a_large_directory_emptied_is_pruned() {
    let store = store();
    let mut tree = store.empty_tree().add(&["other"], b"o").unwrap();
    for i in 0..300 {
        tree.add_mut(&["big".to_string(), format!("k{i}")], b"v").unwrap();
    }
    let mut tree = check(
        &store,
        &tree,
        &(0..300).map(|i| (path(&["big", &format!("k{i}")]), b"v".to_vec())).chain([(path(&["other"]), b"o".to_vec())]).collect(),
    );
    for i in 0..300 {
        tree.remove_mut(&["big".to_string(), format!("k{i}")]).unwrap();
    }
    assert!(!tree.mem_tree(&["big"]).unwrap());
    assert_eq!(tree.list::<&str>(&[], 0, None).unwrap().len(), 1, "only `other` is left");
    check(&store, &tree, &Model::from([(path(&["other"]), b"o".to_vec())]));
}

#[test]
fn adding_an_empty_tree_removes_the_path() {
    let store = store();
    let base = store.empty_tree().add(&["a", "b", "c"], b"1").unwrap().add(&["a", "d"], b"2").unwrap().add(&["x"], b"3").unwrap();
    let base = check(
        &store,
        &base,
        &Model::from([
            (path(&["a", "b", "c"]), b"1".to_vec()),
            (path(&["a", "d"]), b"2".to_vec()),
            (path(&["x"]), b"3".to_vec()),
        ]),
    );
    // Empty trees of every origin: new, emptied by removals, and checked
    // out of a commit of the empty tree (a root on disk).
    let emptied = Tree::empty().add(&["p", "q"], b"v").unwrap().remove(&["p", "q"]).unwrap();
    assert!(emptied.is_empty().unwrap());
    let committed = store
        .checkout(&store.commit(&store.empty_tree(), CommitMeta { parents: &[], date: 0, author: "Tezos", message: "" }).unwrap())
        .unwrap()
        .unwrap();
    for empty in [Tree::empty(), emptied, committed] {
        // Over a directory: it goes; `a` stays, it still holds `d`.
        let tree = base.add_tree(&["a", "b"], &empty).unwrap();
        assert!(!tree.mem_tree(&["a", "b"]).unwrap());
        check(&store, &tree, &Model::from([(path(&["a", "d"]), b"2".to_vec()), (path(&["x"]), b"3".to_vec())]));
        // Over the last entry of `a`, after `b` went: `a` goes too.
        let tree = tree.add_tree(&["a", "d"], &empty).unwrap();
        assert!(!tree.mem_tree(&["a"]).unwrap());
        check(&store, &tree, &Model::from([(path(&["x"]), b"3".to_vec())]));
        // Over a contents, and where nothing is: no directory is made.
        let tree = base.add_tree(&["x"], &empty).unwrap().add_tree(&["p", "q", "r"], &empty).unwrap();
        assert!(!tree.mem(&["x"]).unwrap() && !tree.mem_tree(&["p"]).unwrap());
        check(&store, &tree, &Model::from([(path(&["a", "b", "c"]), b"1".to_vec()), (path(&["a", "d"]), b"2".to_vec())]));
        // At the root: the empty tree.
        let tree = base.add_tree::<&str>(&[], &empty).unwrap();
        assert_eq!(tree.hash().unwrap(), empty_hash());
        check(&store, &tree, &Model::new());
    }
}

/// A copy of an emptied directory copies nothing: the source is gone, so
/// the target is left as it was.
#[test]
fn copying_from_an_emptied_directory_changes_nothing() {
    let store = store();
    let mut tree = store.empty_tree().add(&["a", "b"], b"1").unwrap().add(&["t", "u"], b"2").unwrap();
    tree.remove_mut(&["a", "b"]).unwrap();
    assert!(tree.find_tree(&["a"]).unwrap().is_none());
    tree.copy_mut(&["a"], &["t"]).unwrap();
    check(&store, &tree, &Model::from([(path(&["t", "u"]), b"2".to_vec())]));
}
