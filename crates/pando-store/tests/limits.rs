//! What a record holds is what the store accepts: a contents value over
//! `MAX_VALUE_BYTES` is refused where it is given, with an error naming
//! its size and the maximum, and leaves the tree and the store as they
//! were (they commit and read normally after). At the limit, it is
//! written and read back after a reopen. Before this check it was
//! accepted and then failed to read (`find`: a record too long).

use pando_store::tree::MAX_VALUE_BYTES;
use pando_store::{CheckScope, CommitMeta, Error, Hash, Options, Result, Store, Tree};

fn meta<'a>(parents: &'a [Hash], author: &'a str, message: &'a str) -> CommitMeta<'a> {
    CommitMeta { parents, date: 1_600_000_000, author, message }
}

/// The error of what must have been refused.
fn refused<T>(result: Result<T>) -> Error {
    match result {
        Ok(_) => panic!("accepted what no record holds"),
        Err(e) => e,
    }
}

/// Every record of the store checks clean.
fn assert_clean(store: &Store) {
    let report = store.check(CheckScope::All, 10, &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems.iter().map(ToString::to_string).collect::<Vec<_>>());
}

/// A value one byte over the limit is refused by `add`, `add_mut` and
/// `add_tree` of a `Tree::of_value`, staged or held in memory: the tree
/// is unchanged, nothing reached the pack, and the store commits the tree
/// and reads it back after a reopen.
#[test]
fn a_value_over_a_record_is_refused_where_it_is_added() {
    let max = usize::try_from(MAX_VALUE_BYTES).unwrap();
    let over = vec![7u8; max + 1];
    let over_tree = Tree::of_value(&over);
    // The default stages a value that long; 0 holds it until the commit.
    for stage_bytes in [Options::default().stage_bytes, 0] {
        let dir = tempfile::tempdir().unwrap();
        let options = || Options { stage_bytes, ..Options::default() };
        let store = Store::open(dir.path(), options()).unwrap();
        let mut tree = store.empty_tree();
        tree.add_mut(&["kept"], &[1; 100]).unwrap();
        let genesis = store.commit(&tree, meta(&[], "t", "genesis")).unwrap();
        let (hash, pack_bytes) = (tree.hash().unwrap(), store.info().pack_bytes);

        let is_refused = |e: &Error| matches!(e, Error::ValueTooLarge { bytes, max: m } if *bytes == MAX_VALUE_BYTES + 1 && *m == MAX_VALUE_BYTES);
        let e = refused(tree.add_mut(&["big"], &over));
        assert!(is_refused(&e), "{e}");
        assert_eq!(e.to_string(), "a contents value of 67108865 bytes is over the maximum of 67108864 bytes");
        let e = refused(tree.add(&["dir", "big"], &over));
        assert!(is_refused(&e), "{e}");
        let e = refused(tree.add_tree_mut(&["big"], &over_tree));
        assert!(is_refused(&e), "{e}");
        assert_eq!(tree.hash().unwrap(), hash, "the tree is as it was");
        assert_eq!(store.info().pack_bytes, pack_bytes, "nothing was staged (stage_bytes {stage_bytes})");

        tree.add_mut(&["next"], &[2; 5_000]).unwrap();
        let next = store.commit(&tree, meta(&[genesis], "t", "next")).unwrap();
        drop(tree);
        store.close().unwrap();
        let store = Store::open(dir.path(), options()).unwrap();
        let tree = store.checkout(&next).unwrap().unwrap();
        assert_eq!(tree.find(&["kept"]).unwrap(), Some(vec![1; 100]));
        assert_eq!(tree.find(&["next"]).unwrap(), Some(vec![2; 5_000]));
        assert!(!tree.mem_tree(&["big"]).unwrap() && !tree.mem_tree(&["dir"]).unwrap());
        assert_clean(&store);
    }
}

/// A value of exactly the limit is staged, committed and read back after
/// a reopen (about 200 MB at the most: the value, its staged record, and
/// the copy read back).
#[test]
fn a_value_at_the_limit_is_committed_and_read_back() {
    let max = usize::try_from(MAX_VALUE_BYTES).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let mut tree = store.empty_tree();
    tree.add_mut(&["big"], &vec![0xa5; max]).unwrap();
    let commit = store.commit(&tree, meta(&[], "t", "big")).unwrap();
    drop(tree);
    store.close().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let found = store.checkout(&commit).unwrap().unwrap().find(&["big"]).unwrap().expect("the value is there");
    assert_eq!(found.len(), max);
    assert!(found.iter().all(|&b| b == 0xa5), "the value read back is the one added");
}
