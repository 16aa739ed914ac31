//! The flat read cache (`Options::read_cache_bytes`): reads it answers are
//! the trie's, across commits that turn contents into directories and
//! back, empty directories, copies, trees shared between clones, trees of
//! older commits, readers on other threads while the writer commits, and a
//! reader in another store instance; a cache that does not pay rests.

use pando_store::io::MemStorage;
use pando_store::{CommitMeta, Hash, Options, Store, SyncPolicy, Tree};
use std::sync::Arc;

fn open(storage: &MemStorage) -> Store {
    let options = Options { sync: SyncPolicy::EveryCommit, ..Options::default() };
    Store::open_storage(Arc::new(storage.clone()), options).unwrap()
}

/// What `path` holds, as seen by `find`, `mem` and `mem_tree`.
fn held(tree: &Tree, path: &[&str]) -> (Option<Vec<u8>>, bool, bool) {
    (tree.find(path).unwrap(), tree.mem(path).unwrap(), tree.mem_tree(path).unwrap())
}

fn value(v: &str) -> (Option<Vec<u8>>, bool, bool) {
    (Some(v.as_bytes().to_vec()), true, true)
}

const DIR: (Option<Vec<u8>>, bool, bool) = (None, false, true);
const ABSENT: (Option<Vec<u8>>, bool, bool) = (None, false, false);

/// Commits `tree` on `parent` and checks out the commit.
fn commit(store: &Store, tree: &Tree, parent: Option<Hash>) -> (Hash, Tree) {
    let parents: Vec<Hash> = parent.into_iter().collect();
    let hash = store.commit(tree, CommitMeta { parents: &parents, date: 0, author: "Tezos", message: "" }).unwrap();
    (hash, store.checkout(&hash).unwrap().unwrap())
}

#[test]
fn reads_follow_commits_that_reshape_the_tree() {
    let store = open(&MemStorage::new());
    let tree = store.empty_tree().add(&["a", "b", "c"], b"1").unwrap().add(&["x"], b"2").unwrap();
    let tree = tree.add(&["p", "q", "r"], b"0").unwrap();
    let (head, tree) = commit(&store, &tree, None);
    // Removing the only contents empties (and removes) the directories
    // above, which the cache holds as directories.
    for _ in 0..2 {
        assert_eq!(held(&tree, &["p"]), DIR);
        assert_eq!(held(&tree, &["p", "q"]), DIR);
        assert_eq!(held(&tree, &["p", "q", "r"]), value("0"));
    }
    let (head, tree) = commit(&store, &tree.remove(&["p", "q", "r"]).unwrap(), Some(head));
    for _ in 0..2 {
        assert_eq!(held(&tree, &["p"]), ABSENT);
        assert_eq!(held(&tree, &["p", "q"]), ABSENT);
        assert_eq!(held(&tree, &["p", "q", "r"]), ABSENT);
    }
    // Read twice: the second comes from the cache.
    for _ in 0..2 {
        assert_eq!(held(&tree, &["a"]), DIR);
        assert_eq!(held(&tree, &["a", "b"]), DIR);
        assert_eq!(held(&tree, &["a", "b", "c"]), value("1"));
        assert_eq!(held(&tree, &["a", "b", "c", "d"]), ABSENT);
        assert_eq!(held(&tree, &["x"]), value("2"));
        assert_eq!(held(&tree, &["x", "y"]), ABSENT);
    }
    assert!(store.info().read_cache_entries >= 6, "{:?}", store.info().read_cache_entries);

    // Removing the only contents empties (and removes) the directories above.
    let tree = tree.remove(&["a", "b", "c"]).unwrap();
    assert_eq!(held(&tree, &["a"]), ABSENT, "the tree's own update is seen before its commit");
    let (head, tree) = commit(&store, &tree, Some(head));
    for _ in 0..2 {
        assert_eq!(held(&tree, &["a"]), ABSENT);
        assert_eq!(held(&tree, &["a", "b"]), ABSENT);
        assert_eq!(held(&tree, &["a", "b", "c"]), ABSENT);
    }

    // A contents becomes a directory, then a directory becomes a contents.
    for _ in 0..2 {
        assert_eq!(held(&tree, &["x"]), value("2"));
    }
    let tree = tree.add(&["x", "y"], b"3").unwrap();
    let (head, tree) = commit(&store, &tree, Some(head));
    for _ in 0..2 {
        assert_eq!(held(&tree, &["x"]), DIR);
        assert_eq!(held(&tree, &["x", "y"]), value("3"));
    }
    let tree = tree.add(&["x"], b"4").unwrap();
    let (head, tree) = commit(&store, &tree, Some(head));
    for _ in 0..2 {
        assert_eq!(held(&tree, &["x"]), value("4"));
        assert_eq!(held(&tree, &["x", "y"]), ABSENT);
    }

    // A cached contents replaced by a longer one, then by one of the same
    // length (changed where the cache holds it), then by a shorter one.
    let (mut head, mut tree) = (head, tree);
    for next in ["44", "55", "6"] {
        (head, tree) = commit(&store, &tree.add(&["x"], next.as_bytes()).unwrap(), Some(head));
        for _ in 0..2 {
            assert_eq!(held(&tree, &["x"]), value(next));
        }
    }

    // A directory removed whole, and a copy of a directory.
    let tree = tree.add(&["d", "e"], b"5").unwrap().add(&["d", "f"], b"6").unwrap();
    let (head, tree) = commit(&store, &tree, Some(head));
    assert_eq!(held(&tree, &["d", "e"]), value("5"));
    let sub = tree.find_tree(&["d"]).unwrap().unwrap();
    let tree = tree.remove(&["d"]).unwrap().add_tree(&["g"], &sub).unwrap();
    let (_, tree) = commit(&store, &tree, Some(head));
    for _ in 0..2 {
        assert_eq!(held(&tree, &["d"]), ABSENT);
        assert_eq!(held(&tree, &["d", "e"]), ABSENT);
        assert_eq!(held(&tree, &["g", "e"]), value("5"));
        assert_eq!(held(&tree, &["g"]), DIR);
    }
}

#[test]
fn trees_of_other_commits_and_clones_read_their_own() {
    let store = open(&MemStorage::new());
    let mut tree = store.empty_tree();
    for i in 0..100 {
        tree.add_mut(&["index", &i.to_string(), "balance"], b"0").unwrap();
    }
    let (first, tree) = commit(&store, &tree, None);
    for i in 0..100 {
        assert_eq!(held(&tree, &["index", &i.to_string(), "balance"]), value("0"));
    }
    // A clone updated many times while the original stays alive (each
    // functional update starts a link of the log, after those it shares):
    // the commit carries the cache over with all of them.
    let mut clone = tree.clone();
    for i in 0..2000 {
        clone = clone.add(&["index", &(i % 100).to_string(), "balance"], i.to_string().as_bytes()).unwrap();
    }
    assert_eq!(held(&tree, &["index", "7", "balance"]), value("0"), "the original is unchanged");
    let (_, second) = commit(&store, &clone, Some(first));
    assert!(store.info().read_cache_entries >= 100, "carried over: {}", store.info().read_cache_entries);
    for i in 0..100 {
        assert_eq!(held(&second, &["index", &i.to_string(), "balance"]), value(&(1900 + i).to_string()));
    }
    // The first commit's tree, checked out again, reads the first values.
    let again = store.checkout(&first).unwrap().unwrap();
    for i in 0..100 {
        assert_eq!(held(&again, &["index", &i.to_string(), "balance"]), value("0"));
    }
    assert_eq!(held(&tree, &["index", "3", "balance"]), value("0"));
}

#[test]
fn a_reader_in_another_instance_follows_the_writer() {
    let storage = MemStorage::new();
    let writer = open(&storage);
    let tree = writer.empty_tree().add(&["a"], b"1").unwrap();
    let (head, tree) = commit(&writer, &tree, None);
    let reader = Store::open_storage(Arc::new(storage.clone()), Options { read_only: true, ..Options::default() }).unwrap();
    let theirs = reader.checkout(&head).unwrap().unwrap();
    assert_eq!(held(&theirs, &["a"]), value("1"));
    assert_eq!(held(&theirs, &["a"]), value("1"));
    let (next, _) = commit(&writer, &tree.add(&["a"], b"2").unwrap(), Some(head));
    let theirs = reader.checkout(&next).unwrap().unwrap();
    assert_eq!(held(&theirs, &["a"]), value("2"));
    assert_eq!(held(&reader.checkout(&head).unwrap().unwrap(), &["a"]), value("1"));
}

#[test]
fn a_cache_over_its_budget_empties_and_reads_stay_right() {
    let options = Options { read_cache_bytes: 2 << 10, ..Options::default() };
    let store = Store::open_storage(Arc::new(MemStorage::new()), options).unwrap();
    let mut tree = store.empty_tree();
    for i in 0..500 {
        tree.add_mut(&["index", &i.to_string()], i.to_string().as_bytes()).unwrap();
    }
    let (_, tree) = commit(&store, &tree, None);
    for _ in 0..2 {
        for i in 0..500 {
            assert_eq!(held(&tree, &["index", &i.to_string()]), value(&i.to_string()));
        }
    }
    let stats = store.info();
    assert!(stats.read_cache_bytes <= 2 << 10 && stats.read_cache_entries < 500, "{} entries", stats.read_cache_entries);
}

#[test]
fn a_cache_that_does_not_pay_rests_then_starts_again() {
    let store = open(&MemStorage::new());
    let (mut head, mut tree) = commit(&store, &store.empty_tree().add(&["a"], b"0").unwrap(), None);
    let reads = |store: &Store, tree: &Tree| {
        let before = store.info();
        assert_eq!(held(tree, &["a"]), value("0"));
        let after = store.info();
        (after.read_cache_hits + after.read_cache_misses) - (before.read_cache_hits + before.read_cache_misses)
    };
    assert_eq!(reads(&store, &tree), 3, "find, mem and mem_tree look the cache up");
    // Blocks of many updates and no reads: the cache does not pay.
    let mut commits = 1;
    while reads(&store, &tree) > 0 {
        for i in 0..100 {
            tree.add_mut(&["b", &i.to_string()], &[commits as u8]).unwrap();
        }
        (head, tree) = commit(&store, &tree, Some(head));
        commits += 1;
        assert!(commits <= 40, "still looked up after {commits} commits");
    }
    assert_eq!(store.info().read_cache_entries, 0, "a resting cache holds nothing");
    // It starts again, empty, a few hundred commits later; reads meanwhile walk.
    let rested_at = commits;
    while reads(&store, &tree) == 0 {
        (head, tree) = commit(&store, &tree.add(&["c"], &[commits as u8]).unwrap(), Some(head));
        commits += 1;
        assert!(commits <= rested_at + 300, "still resting after {} commits", commits - rested_at);
    }
    assert!(commits - rested_at > 100, "rested {} commits", commits - rested_at);
    assert_eq!(held(&tree, &["b", "7"]), (Some(vec![(rested_at - 1) as u8]), true, true));
}

#[test]
fn readers_on_other_threads_read_their_commits_while_the_writer_moves_on() {
    let store = open(&MemStorage::new());
    let (mut head, mut tree) = commit(&store, &store.empty_tree().add(&["n"], b"0").unwrap(), None);
    // Each commit's number, which its tree holds at `n` and at `index/<i>`.
    let commits = parking_lot::Mutex::new(vec![(head, 0u32)]);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                for round in 0..400 {
                    let (hash, number) = {
                        let commits = commits.lock();
                        commits[round % commits.len()]
                    };
                    let tree = store.checkout(&hash).unwrap().unwrap();
                    let expected = number.to_string().into_bytes();
                    assert_eq!(tree.find(&["n"]).unwrap(), Some(expected.clone()));
                    if number > 0 {
                        assert_eq!(tree.find(&["index", &(number % 10).to_string()]).unwrap(), Some(expected));
                    }
                }
            });
        }
        for number in 1..60u32 {
            let text = number.to_string();
            tree.add_mut(&["n"], text.as_bytes()).unwrap();
            tree.add_mut(&["index", &(number % 10).to_string()], text.as_bytes()).unwrap();
            (head, tree) = commit(&store, &tree, Some(head));
            commits.lock().push((head, number));
        }
    });
}

#[test]
fn a_long_chain_of_functional_updates_drops_on_a_small_stack() {
    let store = open(&MemStorage::new());
    let (_, tree) = commit(&store, &store.empty_tree().add(&["a"], b"0").unwrap(), None);
    // 20,000 links of the log, dropped recursively, would need several
    // times this stack.
    std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            let mut tree = tree;
            for i in 0..20_000u32 {
                tree = tree.add(&["a"], &i.to_be_bytes()).unwrap();
            }
            assert_eq!(tree.find(&["a"]).unwrap(), Some(19_999u32.to_be_bytes().to_vec()));
            drop(tree);
        })
        .unwrap()
        .join()
        .unwrap();
}

/// Commits large enough for a helper thread, which carries the cache over
/// each commit's updates while the committing thread encodes: readers of
/// older commits on other threads read what their commits hold all along.
#[test]
fn readers_follow_commits_whose_helper_carries_the_cache() {
    let store = open(&MemStorage::new());
    let path = |k: u32| ["index".to_string(), format!("{k:03}"), "v".to_string()];
    let mut tree = store.empty_tree();
    for k in 0..200 {
        tree.add_mut(&path(k), b"0").unwrap();
    }
    let (mut head, mut tree) = commit(&store, &tree, None);
    let commits = parking_lot::Mutex::new(vec![(head, 0u32)]);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for round in 0..300 {
                let (hash, number) = {
                    let commits = commits.lock();
                    commits[round % commits.len()]
                };
                let tree = store.checkout(&hash).unwrap().unwrap();
                for k in (0..200).step_by(7) {
                    // Commit `number` wrote the directories with k % 4 == number % 4.
                    let last = (0..=number).rev().find(|n| n % 4 == k % 4 || *n == 0).unwrap();
                    let found = tree.find(&path(k)).unwrap();
                    assert_eq!(found, Some(last.to_string().into_bytes()), "commit {number}, directory {k}");
                }
            }
        });
        // Fewer commits than the cache's window: it cannot come to rest.
        for number in 1..30u32 {
            // 50 directories a commit: more inodes than a commit hashes alone.
            for k in (number % 4..200).step_by(4) {
                tree.add_mut(&path(k), number.to_string().as_bytes()).unwrap();
            }
            (head, tree) = commit(&store, &tree, Some(head));
            commits.lock().push((head, number));
        }
    });
    // The newest commit's reads, twice: the second time from the cache,
    // which the helpers carried over every commit.
    let newest = store.checkout(&head).unwrap().unwrap();
    let expected = |k: u32| Some((1..30u32).rev().find(|n| n % 4 == k % 4).unwrap().to_string().into_bytes());
    for k in 0..200 {
        assert_eq!(newest.find(&path(k)).unwrap(), expected(k), "directory {k}");
    }
    let hits = store.info().read_cache_hits;
    for k in 0..200 {
        assert_eq!(newest.find(&path(k)).unwrap(), expected(k), "directory {k}");
    }
    assert_eq!(store.info().read_cache_hits, hits + 200, "the cache did not answer the newest commit's reads");
}

/// A commit whose write fails after its helper carried the cache over its
/// updates leaves nothing of them in the cache: its parent reads as it was.
#[test]
fn a_failed_commit_carries_nothing() {
    use pando_store::io::{FaultKind, FaultPlan, FaultyStorage};
    let storage = FaultyStorage::new();
    let options = Options { sync: SyncPolicy::EveryCommit, ..Options::default() };
    let store = Store::open_storage(Arc::new(storage.clone()), options).unwrap();
    let path = |k: u32| ["index".to_string(), format!("{k:03}"), "v".to_string()];
    let mut tree = store.empty_tree();
    for k in 0..200 {
        tree.add_mut(&path(k), b"old").unwrap();
    }
    let first = store.commit(&tree, CommitMeta { parents: &[], date: 0, author: "Tezos", message: "" }).unwrap();
    let reader = store.checkout(&first).unwrap().unwrap();
    for k in 0..200 {
        assert_eq!(reader.find(&path(k)).unwrap().as_deref(), Some(&b"old"[..]));
    }
    let mut next = store.checkout(&first).unwrap().unwrap();
    for k in 0..200 {
        next.add_mut(&path(k), b"new").unwrap();
    }
    // The commit's next write to the storage is its batch, after the helper.
    storage.set_plan(FaultPlan { fail_op: Some((0, FaultKind::Eio)), ..FaultPlan::default() });
    assert!(store.commit(&next, CommitMeta { parents: &[first], date: 1, author: "Tezos", message: "" }).is_err());
    assert!(storage.injected().iter().any(|fault| fault.contains("write")), "{:?}", storage.injected());
    for tree in [&reader, &store.checkout(&first).unwrap().unwrap()] {
        for k in 0..200 {
            assert_eq!(tree.find(&path(k)).unwrap().as_deref(), Some(&b"old"[..]), "directory {k}");
        }
    }
}

/// Two threads committing at once, each its own line of commits over the
/// same paths with its own values, each commit large enough for a helper:
/// a commit's carry may fall between the other's carry and its naming,
/// and every read of every commit, from the cache or not, is what that
/// commit holds.
#[test]
fn commits_on_two_threads_read_their_own() {
    let store = open(&MemStorage::new());
    let path = |k: u32| ["index".to_string(), format!("{k:03}"), "v".to_string()];
    std::thread::scope(|scope| {
        for side in ["left", "right"] {
            let store = &store;
            scope.spawn(move || {
                let mut tree = store.empty_tree();
                for k in 0..200 {
                    tree.add_mut(&path(k), b"0").unwrap();
                }
                let (mut head, mut tree) = commit(store, &tree, None);
                for number in 1..400u32 {
                    let value = format!("{side} {number}");
                    for k in 0..200 {
                        tree.add_mut(&path(k), value.as_bytes()).unwrap();
                    }
                    (head, tree) = commit(store, &tree, Some(head));
                    let read = store.checkout(&head).unwrap().unwrap();
                    for k in 0..200 {
                        assert_eq!(read.find(&path(k)).unwrap().as_deref(), Some(value.as_bytes()), "{value}, entry {k}");
                    }
                }
            });
        }
    });
}
