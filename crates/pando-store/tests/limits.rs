//! What a record holds is what the store accepts: a contents value over
//! `MAX_VALUE_BYTES`, a commit of more than `MAX_PARENTS` parents, or an
//! author or message over `MAX_TEXT_BYTES` is refused where it is given,
//! with an error naming its size and the maximum, and leaves the tree and
//! the store as they were (they commit and read normally after). At the
//! limits, everything is written, read back after a reopen, and carried
//! by a snapshot. Before these checks each was accepted and then failed
//! to read (a checkout, a `find`, or a snapshot import).

use pando_store::io::MemStorage;
use pando_store::tree::MAX_VALUE_BYTES;
use pando_store::{CheckScope, CommitMeta, Error, Hash, MAX_PARENTS, MAX_TEXT_BYTES, Options, Result, Store, SyncPolicy, Tree};
use std::sync::Arc;

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

/// A commit of one parent over the limit is refused before anything is
/// written; repeated parents count once, so the limit's parents plus a
/// repeat commit, check out after a reopen, and go through a snapshot.
#[test]
fn a_commit_of_too_many_parents_is_refused() {
    let storage = Arc::new(MemStorage::new());
    let options = || Options { sync: SyncPolicy::Never, ..Options::default() };
    let store = Store::open_storage(storage.clone(), options()).unwrap();
    let mut tree = store.empty_tree();
    tree.add_mut(&["a"], b"1").unwrap();
    let commits: Vec<Hash> =
        (0..=MAX_PARENTS).map(|i| store.commit(&tree, meta(&[], "t", &format!("head {i}"))).unwrap()).collect();
    let (count, pack_bytes) = (store.commit_count(), store.info().pack_bytes);

    let e = refused(store.commit(&tree, meta(&commits, "t", "merge")));
    assert!(matches!(e, Error::TooManyParents { count: 1025, max: 1024 }), "{e}");
    assert_eq!(e.to_string(), "a commit of 1025 parents is over the maximum of 1024");
    assert_eq!((store.commit_count(), store.info().pack_bytes), (count, pack_bytes), "nothing was written");

    let mut at_limit = commits[..MAX_PARENTS].to_vec();
    at_limit.push(commits[0]);
    tree.add_mut(&["b"], b"2").unwrap();
    let merge = store.commit(&tree, meta(&at_limit, "t", "merge")).unwrap();
    drop(tree);
    store.close().unwrap();
    let store = Store::open_storage(storage, options()).unwrap();
    let info = store.commit_info(&merge).unwrap().unwrap();
    let mut expected = commits[..MAX_PARENTS].to_vec();
    expected.sort();
    assert_eq!(info.parents, expected);
    assert_eq!(store.checkout(&merge).unwrap().unwrap().find(&["b"]).unwrap(), Some(b"2".to_vec()));
    assert_clean(&store);

    let mut snapshot = Vec::new();
    store.export_snapshot(&merge, &mut snapshot).unwrap();
    let imported = Store::open_storage(Arc::new(MemStorage::new()), Options::default()).unwrap();
    assert_eq!(imported.import_snapshot(&mut &snapshot[..]).unwrap().commit, merge);
    assert_eq!(imported.commit_info(&merge).unwrap().unwrap().parents, expected);
}

/// An author or a message one byte over the limit is refused before
/// anything is written; at the limit both commit, read back after a
/// reopen, and go through a snapshot (export once wrote what import
/// refused).
#[test]
fn a_commit_author_or_message_over_the_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let mut tree = store.empty_tree();
    tree.add_mut(&["a"], b"1").unwrap();
    let genesis = store.commit(&tree, meta(&[], "t", "genesis")).unwrap();
    let (count, pack_bytes) = (store.commit_count(), store.info().pack_bytes);

    let over = "é".repeat(MAX_TEXT_BYTES / 2) + "x";
    assert_eq!(over.len(), MAX_TEXT_BYTES + 1);
    for (author, message, expected) in [(over.as_str(), "m", "author"), ("t", over.as_str(), "message")] {
        let e = refused(store.commit(&tree, meta(&[genesis], author, message)));
        assert!(matches!(e, Error::CommitTextTooLong { field, bytes: 1_048_577, max: 1_048_576 } if field == expected), "{e}");
        assert_eq!(e.to_string(), format!("a commit {expected} of 1048577 bytes is over the maximum of 1048576 bytes"));
    }
    assert_eq!((store.commit_count(), store.info().pack_bytes), (count, pack_bytes), "nothing was written");

    let (author, message) = ("a".repeat(MAX_TEXT_BYTES), "é".repeat(MAX_TEXT_BYTES / 2));
    tree.add_mut(&["b"], b"2").unwrap();
    let commit = store.commit(&tree, meta(&[genesis], &author, &message)).unwrap();
    drop(tree);
    store.close().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let info = store.commit_info(&commit).unwrap().unwrap();
    assert_eq!((info.parents, &info.author, &info.message), (vec![genesis], &author, &message));
    assert_clean(&store);

    let mut snapshot = Vec::new();
    store.export_snapshot(&commit, &mut snapshot).unwrap();
    let imported = Store::open_storage(Arc::new(MemStorage::new()), Options::default()).unwrap();
    assert_eq!(imported.import_snapshot(&mut &snapshot[..]).unwrap().commit, commit);
    let info = imported.commit_info(&commit).unwrap().unwrap();
    assert_eq!((&info.author, &info.message), (&author, &message));
    assert_eq!(imported.checkout(&commit).unwrap().unwrap().find(&["b"]).unwrap(), Some(b"2".to_vec()));
}
