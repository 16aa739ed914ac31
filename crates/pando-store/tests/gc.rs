//! Garbage collection: what is kept reads back right (before and after a
//! reopen), what is collected errors cleanly, the writer commits while a
//! collection runs, and disk shrinks.

mod common;

use common::held::{HeldStorage, Hold};
use common::*;
use pando_core::Hash;
use pando_store::io::{MemStorage, Storage};
use pando_store::{CommitMeta, Error, Options, Store};
use std::sync::Arc;

fn options() -> Options {
    Options { chunk_target_bytes: 8 << 10, checkpoint_commits: 4, cache_bytes: 64 << 10, ..Options::default() }
}

/// Commits `n` blocks on top of `head`, each rewriting some accounts and
/// adding new ones; returns the commits and their models.
fn blocks(store: &Store, head: Option<(Hash, Model)>, n: usize, seed: u32) -> Vec<(Hash, Model)> {
    let (mut tree, mut model, mut parent) = match head {
        Some((h, m)) => (store.checkout(&h).unwrap().unwrap(), m, Some(h)),
        None => (store.empty_tree(), Model::new(), None),
    };
    let mut out = Vec::new();
    for b in 0..n as u32 {
        for i in 0..40u32 {
            let account = (b * 7 + i * 13 + seed) % 300;
            let path = vec![b"contracts".to_vec(), format!("{account:04}").into_bytes(), b"balance".to_vec()];
            let value = format!("{}-{}-{}", seed, b, i).into_bytes();
            tree.add_mut(&path, &value).unwrap();
            model_add(&mut model, &path, &value);
        }
        let big = vec![b"big".to_vec(), format!("{}", b % 5).into_bytes()];
        let value = vec![(b % 251) as u8; 100];
        tree.add_mut(&big, &value).unwrap();
        model_add(&mut model, &big, &value);
        let hash = store
            .commit(
                &tree,
                CommitMeta {
                    parents: &parent.into_iter().collect::<Vec<_>>(),
                    date: b as i64,
                    author: "Tezos",
                    message: "block",
                },
            )
            .unwrap();
        parent = Some(hash);
        out.push((hash, model.clone()));
        tree = store.checkout(&hash).unwrap().unwrap();
    }
    out
}

fn check_kept_and_collected(store: &Store, commits: &[(Hash, Model)], first_kept: usize) {
    for (i, (hash, model)) in commits.iter().enumerate() {
        if i >= first_kept {
            let tree = store.checkout(hash).unwrap().expect("kept");
            check_tree(&tree, model).unwrap_or_else(|e| panic!("commit {i}: {e}"));
            assert!(store.exists(hash));
        } else {
            assert!(matches!(store.checkout(hash), Err(Error::CollectedCommit(h)) if h == *hash), "commit {i} collected");
            assert!(!store.exists(hash));
        }
    }
}

#[test]
fn collection_keeps_recent_commits_and_frees_space() {
    let storage = MemStorage::new();
    let store = Store::open_storage(Arc::new(storage.clone()), options()).unwrap();
    let commits = blocks(&store, None, 60, 1);
    let before = store.pack_bytes();
    store.gc(&commits[40].0).unwrap();
    let report = store.wait_gc().unwrap().expect("a collection ran");
    assert_eq!(report.generation, 1);
    assert_eq!(report.collected_commits, 40);
    assert!(store.pack_bytes() < before / 2, "{} -> {}", before, store.pack_bytes());
    // Mostly dead chunks were rewritten; the disk never held more than the
    // store before plus one segment.
    assert!(report.segments >= 1 && report.last_generation == 1 + report.segments, "{report:?}");
    assert!(report.peak_bytes <= before + report.copied_bytes, "{report:?}");
    // What `pando info` shows is where the collection ended, relocations included.
    assert_eq!(store.info().generation, report.last_generation);
    check_kept_and_collected(&store, &commits, 40);
    assert_eq!(store.commit_count(), 20);
    let stats = store.info();
    assert!(stats.collected_file_bytes * 80 / 100 <= stats.collected_live_bytes, "{stats:?}");

    // The store goes on, and a second collection works over the first.
    let more = blocks(&store, commits.last().cloned(), 30, 2);
    let all: Vec<(Hash, Model)> = commits.iter().chain(&more).cloned().collect();
    store.gc(&all[75].0).unwrap();
    let second = store.wait_gc().unwrap().unwrap();
    assert_eq!(second.generation, report.last_generation + 1);
    check_kept_and_collected(&store, &all, 75);
    drop(store);

    let store = Store::open_storage(Arc::new(storage.clone()), options()).unwrap();
    check_kept_and_collected(&store, &all, 75);
    let names = storage.list().unwrap();
    let current = format!("mapping-{:016x}", second.last_generation);
    assert!(names.iter().all(|n| n != "index" && (!n.starts_with("mapping-") || *n == current)), "old files removed: {names:?}");
    // And commits continue after a reopen.
    blocks(&store, all.last().cloned(), 5, 3);
}

/// A collection makes the next batch start a chunk (a collection's
/// boundary is a chunk's start): with chunks larger than the whole store,
/// the next collection still discards what lies before the commits it
/// keeps, as irmin's `split` before each collection does.
#[test]
fn a_collection_splits_the_chunk_so_the_next_discards_before_it() {
    let storage = MemStorage::new();
    let chunks = || storage.list().unwrap().into_iter().filter(|n| n.starts_with("chunk-")).count();
    let store = Store::open_storage(Arc::new(storage.clone()), Options { chunk_target_bytes: 1 << 30, ..options() }).unwrap();
    let commits = blocks(&store, None, 60, 1);
    store.gc(&commits[59].0).unwrap();
    store.wait_gc().unwrap().expect("a collection ran");
    assert_eq!(chunks(), 1, "nothing lies below the only chunk");
    let more = blocks(&store, commits.last().cloned(), 30, 2);
    assert_eq!(chunks(), 2, "the first batch after the collection started a chunk");
    let all: Vec<(Hash, Model)> = commits.iter().chain(&more).cloned().collect();
    let before = store.pack_bytes();
    store.gc(&all[60].0).unwrap();
    store.wait_gc().unwrap().expect("a collection ran");
    assert!(store.pack_bytes() < before * 3 / 4, "{before} -> {}", store.pack_bytes());
    check_kept_and_collected(&store, &all, 60);
    drop(store);
    let store = Store::open_storage(Arc::new(storage.clone()), options()).unwrap();
    check_kept_and_collected(&store, &all, 60);
}

#[test]
fn writer_commits_while_collection_runs() {
    let storage = MemStorage::new();
    let store = Store::open_storage(Arc::new(storage.clone()), options()).unwrap();
    let mut commits = blocks(&store, None, 50, 1);
    store.gc(&commits[30].0).unwrap();
    // Commits made during the collection, some refer to old subtrees.
    commits.extend(blocks(&store, commits.last().cloned(), 20, 4));
    store.wait_gc().unwrap();
    check_kept_and_collected(&store, &commits, 30);
    drop(store);
    let store = Store::open_storage(Arc::new(storage), options()).unwrap();
    check_kept_and_collected(&store, &commits, 30);
}

#[test]
fn pinned_commits_survive_and_stale_trees_are_refused() {
    let store = Store::open_storage(Arc::new(MemStorage::new()), options()).unwrap();
    let commits = blocks(&store, None, 50, 1);
    store.pin(&commits[3].0).unwrap();
    let stale = store.checkout(&commits[5].0).unwrap().unwrap();
    // Changed, its root is in memory, its children still stored.
    let stale_changed = stale.add(&["x"], b"z").unwrap();
    store.gc(&commits[40].0).unwrap();
    store.wait_gc().unwrap();
    let pinned = store.checkout(&commits[3].0).unwrap().expect("pinned commits are kept");
    check_tree(&pinned, &commits[3].1).unwrap();
    assert!(matches!(store.checkout(&commits[5].0), Err(Error::CollectedCommit(_))));
    // A tree of a collected commit: reading what was collected, or
    // committing it, is a clear error, never wrong data.
    let changed = stale.add(&["x"], b"y");
    let committed = changed.and_then(|tree| {
        store.commit(&tree, CommitMeta { parents: &[commits[49].0], date: 0, author: "Tezos", message: "stale" })
    });
    assert!(matches!(committed, Err(Error::Collected { .. })), "expected Collected, got {committed:?}");
    // Even when the stale root is still in memory, its collected subtrees are refused.
    let loaded = store.checkout(&commits[45].0).unwrap().unwrap();
    let mut mixed = loaded.clone();
    mixed.add_tree_mut(&["old"], &pinned.find_tree(&["contracts"]).unwrap().unwrap()).unwrap();
    store
        .commit(&mixed, CommitMeta { parents: &[commits[49].0], date: 0, author: "Tezos", message: "pinned subtree" })
        .expect("a pinned commit's subtree is kept");
    // A tree taken from a kept commit after the collection, with a stale
    // tree (taken before it, its commit collected) grafted in: refused,
    // though each part was taken from a commit not collected then.
    let mut grafted = store.checkout(&commits[45].0).unwrap().unwrap();
    grafted.add_tree_mut(&["old"], &stale_changed).unwrap();
    let committed =
        store.commit(&grafted, CommitMeta { parents: &[commits[49].0], date: 0, author: "Tezos", message: "stale subtree" });
    assert!(matches!(committed, Err(Error::Collected { .. })), "expected Collected, got {committed:?}");
    // A collected parent is refused too.
    let fresh = store.checkout(&commits[49].0).unwrap().unwrap();
    assert!(matches!(
        store.commit(&fresh, CommitMeta { parents: &[commits[5].0], date: 0, author: "Tezos", message: "" }),
        Err(Error::CollectedCommit(_))
    ));
    // The store still works.
    blocks(&store, commits.last().cloned(), 3, 5);
    assert!(matches!(store.gc(&commits[5].0), Err(Error::CollectedCommit(_))));
}

#[test]
fn a_second_collection_waits_for_the_first() {
    let store = Store::open_storage(Arc::new(MemStorage::new()), options()).unwrap();
    let commits = blocks(&store, None, 30, 1);
    store.gc(&commits[10].0).unwrap();
    // Refused while the first runs; once it has finished, the second starts.
    match store.gc(&commits[20].0) {
        Ok(()) | Err(Error::GcRunning) => {}
        Err(e) => panic!("{e}"),
    }
    store.wait_gc().unwrap().expect("a report");
    assert!(store.wait_gc().unwrap().is_none());
    assert!(store.gc_status().is_none());
}

#[test]
fn retention_policy_collects_on_its_own() {
    use pando_store::Retention;
    let storage = MemStorage::new();
    let options = Options { retention: Retention::KeepLast { commits: 10, every: 5 }, ..options() };
    let store = Store::open_storage(Arc::new(storage.clone()), options.clone()).unwrap();
    let mut commits = blocks(&store, None, 60, 1);
    settle(&store, &mut commits);
    // A collection started at one of the last 6 commits, keeping its 10 last.
    for (i, (hash, model)) in commits.iter().enumerate().skip(55) {
        check_tree(&store.checkout(hash).unwrap().unwrap(), model).unwrap_or_else(|e| panic!("commit {i}: {e}"));
    }
    let kept: Vec<usize> =
        (0..51).filter(|&i| !matches!(store.checkout(&commits[i].0), Err(Error::CollectedCommit(_)))).collect();
    assert!(kept.is_empty(), "kept {kept:?} of {}", commits.len());
    // After a reopen the policy knows the recent commits again.
    drop(store);
    let store = Store::open_storage(Arc::new(storage), options).unwrap();
    let mut more = blocks(&store, commits.last().cloned(), 20, 2);
    settle(&store, &mut more);
    assert!(matches!(store.checkout(&commits[60].0), Err(Error::CollectedCommit(_))));
    check_tree(&store.checkout(&more[24].0).unwrap().unwrap(), &more[24].1).unwrap();
    assert_eq!(store.ancestor(&more[24].0, 5).unwrap(), more[20].0);
}

/// A collection after the first traces only the records written since the
/// last boundary and keeps the older live ones as they were, garbage
/// included, until they have grown past the share allowed over what the
/// last whole trace found; a whole trace then drops that garbage. What is
/// kept reads back right all along, and `check` finds nothing.
#[test]
fn a_collection_traces_what_was_written_since_the_last_boundary() {
    let storage = MemStorage::new();
    let minor = Options { gc_whole_trace_growth_percent: u64::MAX, ..options() };
    let store = Store::open_storage(Arc::new(storage.clone()), minor.clone()).unwrap();
    // Entries no block changes: their records stay below every boundary.
    let (mut tree, mut model) = (store.empty_tree(), Model::new());
    for i in 0..50 {
        let path = vec![b"static".to_vec(), format!("s{i:02}").into_bytes()];
        tree.add_mut(&path, format!("code {i}").as_bytes()).unwrap();
        model_add(&mut model, &path, format!("code {i}").as_bytes());
    }
    let genesis = store.commit(&tree, CommitMeta { parents: &[], date: 0, author: "Tezos", message: "genesis" }).unwrap();
    let mut commits = blocks(&store, Some((genesis, model)), 40, 1);
    let collect = |store: &Store, keep: &Hash| {
        store.gc(keep).unwrap();
        store.wait_gc().unwrap().unwrap()
    };
    let first = collect(&store, &commits[20].0);
    assert_eq!(first.traced_from, 0, "the first collection since the store opened traces all");
    let mut boundary = first.boundary;
    for (round, keep) in [(2, 50), (3, 70)] {
        let head = commits.last().cloned();
        commits.extend(blocks(&store, head, 20, round));
        let report = collect(&store, &commits[keep].0);
        assert_eq!(report.traced_from, boundary, "round {round}: only what lies above the last boundary is traced");
        assert!(report.boundary > boundary);
        boundary = report.boundary;
        check_kept_and_collected(&store, &commits, keep);
        let check = store.check(pando_store::CheckScope::All, 10, &mut |_| {}).unwrap();
        assert!(check.is_clean(), "round {round}: {:?}", check.problems);
    }
    let kept_after_minor = store.info().pack_bytes;
    drop(store);
    // Reopened: its first collection traces all, and drops what the
    // older runs held that nothing needs any more.
    let store = Store::open_storage(Arc::new(storage.clone()), minor).unwrap();
    check_kept_and_collected(&store, &commits, 70);
    let whole = collect(&store, &commits[70].0);
    assert_eq!(whole.traced_from, 0);
    assert!(store.info().pack_bytes < kept_after_minor, "a whole trace drops the garbage minor ones kept");
    check_kept_and_collected(&store, &commits, 70);
    // With no growth allowed, every collection traces all.
    drop(store);
    let every = Options { gc_whole_trace_growth_percent: 0, ..options() };
    let store = Store::open_storage(Arc::new(storage), every).unwrap();
    for (round, keep) in [(4, 90), (5, 110)] {
        let head = commits.last().cloned();
        commits.extend(blocks(&store, head, 20, round));
        assert_eq!(collect(&store, &commits[keep].0).traced_from, 0);
        check_kept_and_collected(&store, &commits, keep);
    }
}

/// A store of format version 3, whose mapping holds fixed runs of 32
/// bytes, opens and reads back; its next collection writes a mapping of
/// the current version and its control slots say so.
#[test]
fn a_version_3_store_is_read_and_upgraded() {
    use pando_store::format::{control, mapping};
    use pando_store::io::{File, read_all};
    let storage = MemStorage::new();
    let store = Store::open_storage(Arc::new(storage.clone()), options()).unwrap();
    let mut commits = blocks(&store, None, 60, 1);
    store.gc(&commits[30].0).unwrap();
    store.wait_gc().unwrap();
    let generation = store.info().generation;
    drop(store);
    // Rewrite the mapping with version 3's runs, and every control slot as
    // version 3 (their bytes are otherwise the same).
    let name = mapping::file_name(generation);
    let file = storage.open(&name, false).unwrap();
    let runs = mapping::decode(&read_all(&*file).unwrap(), u64::MAX).unwrap();
    assert!(!runs.is_empty());
    file.truncate(0).unwrap();
    file.write_all_at(&mapping::encode_version_3(&runs), 0).unwrap();
    let version = |slot: &[u8]| u32::from_le_bytes(slot[8..12].try_into().unwrap());
    let slots = |f: &dyn File| -> Vec<Vec<u8>> {
        (0..3u64)
            .map(|i| {
                let mut slot = vec![0u8; control::SLOT_SIZE];
                f.read_exact_at(&mut slot, i * control::SLOT_SIZE as u64).unwrap();
                slot
            })
            .filter(|slot| control::decode_slot(slot).is_ok())
            .collect()
    };
    let control_file = storage.open("control", false).unwrap();
    rewrite_control_version(&*control_file, 3);
    assert!(slots(&*control_file).iter().all(|slot| version(slot) == 3));

    let store = Store::open_storage(Arc::new(storage.clone()), options()).unwrap();
    check_kept_and_collected(&store, &commits, 30);
    let head = commits.last().cloned();
    commits.extend(blocks(&store, head, 20, 2));
    store.gc(&commits[60].0).unwrap();
    store.wait_gc().unwrap();
    let upgraded = read_all(&*storage.open(&mapping::file_name(store.info().generation), false).unwrap()).unwrap();
    assert_eq!(version(&upgraded), pando_store::format::FORMAT_VERSION);
    drop(store);
    let newest = slots(&*control_file).into_iter().max_by_key(|slot| control::decode_slot(slot).unwrap().seq).unwrap();
    assert_eq!(version(&newest), pando_store::format::FORMAT_VERSION);
    let store = Store::open_storage(Arc::new(storage), options()).unwrap();
    check_kept_and_collected(&store, &commits, 60);
}

/// A collection the policy finds due while another runs starts at a later
/// commit: five more commits (the policy's `every`), each made once the
/// running collection finished, make sure one starts and finishes.
fn settle(store: &Store, commits: &mut Vec<(Hash, Model)>) {
    for _ in 0..5 {
        store.wait_gc().unwrap();
        let next = blocks(store, commits.last().cloned(), 1, 3);
        commits.extend(next);
    }
    store.wait_gc().unwrap();
}

#[test]
fn a_collection_started_while_another_is_being_waited_for_is_refused() {
    let storage = MemStorage::new();
    let store = Arc::new(Store::open_storage(Arc::new(storage.clone()), options()).unwrap());
    let commits = blocks(&store, None, 60, 1);
    store.gc(&commits[20].0).unwrap();
    let waiter = {
        let store = store.clone();
        std::thread::spawn(move || store.wait_gc().unwrap().map(|r| r.last_generation))
    };
    // Until the first collection has switched, a second one is refused.
    loop {
        match store.gc(&commits[40].0) {
            Ok(()) => break,
            Err(Error::GcRunning) => std::thread::yield_now(),
            Err(e) => panic!("{e}"),
        }
    }
    // The waiter returns the report of the collection running when it
    // started waiting (either one); afterwards nothing runs.
    let waited = waiter.join().unwrap().expect("a collection ran");
    store.wait_gc().unwrap();
    assert!(store.gc_status().is_none());
    assert!(store.info().generation >= waited);
    check_kept_and_collected(&store, &commits, 40);
    drop(store);
    let store = Store::open_storage(Arc::new(storage), options()).unwrap();
    check_kept_and_collected(&store, &commits, 40);
}

#[test]
fn keeping_from_a_commit_in_the_prefix() {
    let storage = MemStorage::new();
    let store = Store::open_storage(Arc::new(storage.clone()), options()).unwrap();
    let commits = blocks(&store, None, 40, 1);
    store.pin(&commits[2].0).unwrap();
    store.gc(&commits[30].0).unwrap();
    store.wait_gc().unwrap();
    // commits[2] now lies in the prefix: keeping from it keeps it and what follows.
    store.gc(&commits[2].0).unwrap();
    store.wait_gc().unwrap();
    check_tree(&store.checkout(&commits[2].0).unwrap().unwrap(), &commits[2].1).unwrap();
    check_tree(&store.checkout(&commits[35].0).unwrap().unwrap(), &commits[35].1).unwrap();
    drop(store);
    let store = Store::open_storage(Arc::new(storage), options()).unwrap();
    check_tree(&store.checkout(&commits[2].0).unwrap().unwrap(), &commits[2].1).unwrap();
}

#[test]
fn recommitting_a_collected_commit_is_an_error() {
    let store = Store::open_storage(Arc::new(MemStorage::new()), options()).unwrap();
    let genesis_tree = store.empty_tree().add(&["a"], b"1").unwrap();
    let genesis = store.commit(&genesis_tree, CommitMeta { parents: &[], date: 0, author: "Tezos", message: "genesis" }).unwrap();
    let commits = blocks(&store, Some((genesis, model_of(&[("a", "1")]))), 30, 1);
    store.gc(&commits[20].0).unwrap();
    store.wait_gc().unwrap();
    let fresh = store.empty_tree().add(&["a"], b"1").unwrap();
    assert!(
        matches!(store.commit(&fresh, CommitMeta { parents: &[], date: 0, author: "Tezos", message: "genesis" }), Err(Error::CollectedCommit(h)) if h == genesis)
    );
}

fn model_of(entries: &[(&str, &str)]) -> Model {
    let mut model = Model::new();
    for (path, value) in entries {
        model_add(&mut model, &[path.as_bytes().to_vec()], value.as_bytes());
    }
    model
}

#[test]
fn archive_mode_keeps_every_commit_in_cold_files() {
    use pando_store::Retention;
    let storage = MemStorage::new();
    let options = Options { retention: Retention::Archive { commits: 10, every: 1_000_000 }, ..options() };
    let store = Store::open_storage(Arc::new(storage.clone()), options.clone()).unwrap();
    let commits = blocks(&store, None, 60, 1);
    store.gc(&commits[40].0).unwrap();
    let report = store.wait_gc().unwrap().unwrap();
    assert_eq!(report.collected_commits, 0);
    check_kept_and_collected(&store, &commits, 0);
    let names = storage.list().unwrap();
    assert!(names.iter().any(|n| n.starts_with("cold-")), "{names:?}");
    let more = blocks(&store, commits.last().cloned(), 10, 2);
    store.gc(&more[5].0).unwrap();
    store.wait_gc().unwrap();
    drop(store);
    let store = Store::open_storage(Arc::new(storage.clone()), options.clone()).unwrap();
    let all: Vec<(Hash, Model)> = commits.iter().chain(&more).cloned().collect();
    check_kept_and_collected(&store, &all, 0);
    drop(store);
    // A crash after the switch, before a chunk was moved to its cold name:
    // a reader reads it where it is; the writer finishes the move.
    let cold = storage.list().unwrap().into_iter().find(|n| n.starts_with("cold-")).unwrap();
    let chunk = cold.replace("cold-", "chunk-");
    storage.rename(&cold, &chunk).unwrap();
    let reader = Store::open_storage(Arc::new(storage.clone()), Options { read_only: true, ..options.clone() }).unwrap();
    check_kept_and_collected(&reader, &all, 0);
    drop(reader);
    let store = Store::open_storage(Arc::new(storage.clone()), options).unwrap();
    check_kept_and_collected(&store, &all, 0);
    let names = storage.list().unwrap();
    assert!(names.contains(&cold) && !names.contains(&chunk), "{names:?}");
}

#[test]
fn leftover_and_damaged_collection_files() {
    let storage = MemStorage::new();
    let store = Store::open_storage(Arc::new(storage.clone()), options()).unwrap();
    let commits = blocks(&store, None, 50, 1);
    store.gc(&commits[30].0).unwrap();
    let last = store.wait_gc().unwrap().unwrap().last_generation;
    drop(store);
    // Leftovers of an unfinished next step, and an old chunk (if no run
    // keeps it in place): removed on open.
    let next = last + 1;
    let mut leftovers = vec![format!("segment-{next:016x}.pack"), format!("mapping-{next:016x}"), format!("index-{next:016x}")];
    if !storage.exists("chunk-0000000000000000.pack").unwrap() {
        leftovers.push("chunk-0000000000000000.pack".into());
    }
    for name in &leftovers {
        storage.open(name, true).unwrap().write_all_at(b"garbage", 0).unwrap();
    }
    let store = Store::open_storage(Arc::new(storage.clone()), options()).unwrap();
    check_kept_and_collected(&store, &commits, 30);
    drop(store);
    let names = storage.list().unwrap();
    assert!(leftovers.iter().all(|l| !names.contains(l)), "{names:?}");
    // Damage to the current generation's files is a precise error.
    let mapping_name = format!("mapping-{last:016x}");
    let mapping = storage.open(&mapping_name, false).unwrap();
    let mut byte = [0u8; 1];
    mapping.read_exact_at(&mut byte, 30).unwrap();
    mapping.write_all_at(&[byte[0] ^ 0x40], 30).unwrap();
    match Store::open_storage(Arc::new(storage.clone()), options()) {
        Err(Error::Corrupt { file, .. }) => assert_eq!(file, mapping_name),
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(_) => panic!("a damaged mapping was accepted"),
    }
    mapping.write_all_at(&byte, 30).unwrap();
    // A segment shorter than its runs.
    let segment = storage.open(&format!("segment-{last:016x}.pack"), false).unwrap();
    segment.truncate(segment.len().unwrap() - 1).unwrap();
    assert!(matches!(Store::open_storage(Arc::new(storage), options()), Err(Error::Corrupt { .. })));
}

#[test]
fn archive_then_rolling_refuses_a_tree_into_removed_chunks() {
    // Found by review: cold files need not touch. After an archive-mode
    // collection and a rolling one, a tree of a collected commit points
    // between cold files; committing it must be refused, not accepted.
    use pando_store::Retention;
    let storage = MemStorage::new();
    let archive = Options { retention: Retention::Archive { commits: 10, every: 1_000_000 }, ..options() };
    let store = Store::open_storage(Arc::new(storage.clone()), archive).unwrap();
    let commits = blocks(&store, None, 60, 1);
    store.gc(&commits[40].0).unwrap();
    store.wait_gc().unwrap().unwrap();
    drop(store);
    let store = Store::open_storage(Arc::new(storage.clone()), options()).unwrap();
    let more = blocks(&store, commits.last().cloned(), 40, 2);
    let stale = store.checkout(&more[2].0).unwrap().unwrap().add(&["x"], b"y").unwrap();
    store.gc(&more[35].0).unwrap();
    store.wait_gc().unwrap().unwrap();
    match store.commit(&stale, CommitMeta { parents: &[more[39].0], date: 0, author: "Tezos", message: "stale" }) {
        Err(Error::Collected { .. }) => {}
        Err(e) => panic!("expected Collected, got {e}"),
        Ok(hash) => panic!("a tree into removed chunks was committed as {hash}"),
    }
    // The rolling collection collected every older commit, archived ones too.
    assert!(matches!(store.checkout(&commits[5].0), Err(Error::CollectedCommit(_))));
    check_kept_and_collected(&store, &more, 35);
}

#[test]
fn retention_starts_a_chunk_every_period_while_a_collection_runs() {
    use pando_store::Retention;
    // The collector's reads wait until released.
    let storage = Arc::new(HeldStorage::new("pando-gc", Hold::Reads));
    // Chunks large enough that only splits start new ones.
    let options = Options { retention: Retention::KeepLast { commits: 10, every: 5 }, chunk_target_bytes: 64 << 20, ..options() };
    let store = Store::open_storage(storage.clone(), options).unwrap();
    // The first collection starts at commit 10, then holds on its reads.
    let mut commits = blocks(&store, None, 10, 1);
    assert!(store.gc_status().is_some(), "the policy started a collection");
    let before = storage.chunks_created();
    commits.extend(blocks(&store, commits.last().cloned(), 30, 2));
    let running = store.gc_status().is_some();
    let created = storage.chunks_created() - before;
    // Released before any assertion: a panic would otherwise wait forever
    // for the collection when the store closes.
    storage.release();
    assert!(running, "the collection still runs");
    // Due at commits 15, 20, ..., 40 while it runs: a chunk from each on.
    assert!(created >= 5, "{created} chunks created in 30 commits with a collection running, every 5");
    settle(&store, &mut commits);
    for (i, (hash, model)) in commits.iter().enumerate().skip(commits.len() - 5) {
        check_tree(&store.checkout(hash).unwrap().unwrap(), model).unwrap_or_else(|e| panic!("commit {i}: {e}"));
    }
}

/// A tree taken from a commit that a collection then collected, whose
/// directory points straight at a tree inode that the kept commits reach
/// only through a patch (which replaced one of its children: the
/// collection did not keep that child), is refused at its commit or
/// commits a tree that reads back whole; never a commit whose reads fail.
///
/// With `minor` a second collection, which traces only what was written
/// since the first one's boundary, runs before those commits: the inodes
/// the first one kept without some children must stay known as such.
#[test]
fn a_stale_tree_sharing_a_patched_inode_is_refused_or_whole() {
    stale_tree_sharing_a_patched_inode(false);
    stale_tree_sharing_a_patched_inode(true);
}

fn stale_tree_sharing_a_patched_inode(minor: bool) {
    let options = Options { gc_whole_trace_growth_percent: u64::MAX, ..options() };
    let store = Store::open_storage(Arc::new(MemStorage::new()), options).unwrap();
    let mut model = Model::new();
    let mut tree = store.empty_tree();
    for i in 0..200 {
        let (path, value) = (vec![b"d".to_vec(), format!("k{i}").into_bytes()], format!("v{i}").into_bytes());
        tree.add_mut(&path, &value).unwrap();
        model_add(&mut model, &path, &value);
    }
    tree.add_mut(&["other"], b"x").unwrap();
    model_add(&mut model, &[b"other".to_vec()], b"x");
    // A batch longer than a chunk: the next commit's starts one, which is
    // where the collection's boundary then falls.
    for i in 0..40u8 {
        let (path, value) = (vec![b"big".to_vec(), vec![b'a' + i % 26, b'0' + i / 26]], vec![i; 300]);
        tree.add_mut(&path, &value).unwrap();
        model_add(&mut model, &path, &value);
    }
    let first = store.commit(&tree, CommitMeta { parents: &[], date: 0, author: "Tezos", message: "first" }).unwrap();
    // The next commit changes one entry of `d`: its root becomes a patch
    // of the first commit's, which replaces one child.
    let mut next = store.checkout(&first).unwrap().unwrap();
    next.add_mut(&["d", "k7"], b"changed").unwrap();
    let second = store.commit(&next, CommitMeta { parents: &[first], date: 1, author: "Tezos", message: "second" }).unwrap();
    // A tree of the first commit, changed beside `d`: its root in memory
    // points at the first commit's `d` as stored.
    let mut stale = store.checkout(&first).unwrap().unwrap();
    stale.add_mut(&["other"], b"y").unwrap();
    // And one changed inside `d`: its root in memory, a patch base's copy.
    let (mut inside, mut inside_model) = (store.checkout(&first).unwrap().unwrap(), model.clone());
    inside.add_mut(&["d", "k100"], b"new").unwrap();
    model_add(&mut inside_model, &[b"d".to_vec(), b"k100".to_vec()], b"new");
    model_add(&mut model, &[b"other".to_vec()], b"y");
    let mut head = second;
    for b in 0..6 {
        let mut t = store.checkout(&head).unwrap().unwrap();
        t.add_mut(&["e", &format!("{b}")], &[b as u8; 300]).unwrap();
        head = store.commit(&t, CommitMeta { parents: &[head], date: 2 + b, author: "Tezos", message: "more" }).unwrap();
    }
    store.gc(&second).unwrap();
    assert_eq!(store.wait_gc().unwrap().unwrap().traced_from, 0, "the first collection traces all");
    assert!(matches!(store.checkout(&first), Err(Error::CollectedCommit(_))));
    if minor {
        for b in 0..6 {
            let mut t = store.checkout(&head).unwrap().unwrap();
            t.add_mut(&["f", &format!("{b}")], &[b as u8; 300]).unwrap();
            head = store.commit(&t, CommitMeta { parents: &[head], date: 10 + b, author: "Tezos", message: "more" }).unwrap();
        }
        store.gc(&head).unwrap();
        assert!(store.wait_gc().unwrap().unwrap().traced_from > 0, "the second traces what is new");
    }
    for (tree, model) in [(&stale, &model), (&inside, &inside_model)] {
        match store.commit(tree, CommitMeta { parents: &[head], date: 9, author: "Tezos", message: "stale" }) {
            Err(Error::Collected { .. }) => {}
            Err(e) => panic!("expected Collected, got {e}"),
            Ok(hash) => check_tree(&store.checkout(&hash).unwrap().unwrap(), model).unwrap(),
        }
    }
}

/// A tree taken from a commit before a collection collected it, changed in
/// memory and committed after: refused, or written whole again; then a
/// commit of the tree checked out from it reads back whole after a reopen.
/// (The value of `a`, written again, kept the mark of its collected record;
/// the kept tree held it, and the next commit referred to that record.)
#[test]
fn a_stale_tree_committed_after_its_base_is_collected_reads_back_whole() {
    let storage = MemStorage::new();
    let store = Store::open_storage(Arc::new(storage.clone()), options()).unwrap();
    let value = vec![7u8; 41];
    let c0 = store
        .commit(
            &store.empty_tree().add(&["a"], &value).unwrap(),
            CommitMeta { parents: &[], date: 0, author: "Tezos", message: "c0" },
        )
        .unwrap();
    // This collection removes nothing, but the next batch starts a chunk
    // of its own, so that the next collection can discard `c0`'s records.
    store.gc(&c0).unwrap();
    store.wait_gc().unwrap();
    let stale = store.checkout(&c0).unwrap().unwrap().add(&["b", "c"], &[8u8; 38]).unwrap();
    let c1 = store.commit(&store.empty_tree(), CommitMeta { parents: &[c0], date: 1, author: "Tezos", message: "c1" }).unwrap();
    store.gc(&c1).unwrap();
    store.wait_gc().unwrap();
    let mut model = Model::new();
    model_add(&mut model, &[b"a".to_vec()], &value);
    model_add(&mut model, &[b"b".to_vec(), b"c".to_vec()], &[8u8; 38]);
    let c2 = match store.commit(&stale, CommitMeta { parents: &[c1], date: 2, author: "Tezos", message: "stale" }) {
        Ok(hash) => hash,
        Err(Error::Collected { .. }) => return,
        Err(e) => panic!("stale commit: {e}"),
    };
    check_tree(&store.checkout(&c2).unwrap().unwrap(), &model).unwrap();
    let next = store.checkout(&c2).unwrap().unwrap().add(&["index"], b"xyz").unwrap();
    model_add(&mut model, &[b"index".to_vec()], b"xyz");
    let c3 = store.commit(&next, CommitMeta { parents: &[c2], date: 3, author: "Tezos", message: "on top" }).unwrap();
    drop(store);
    let store = Store::open_storage(Arc::new(storage), options()).unwrap();
    check_tree(&store.checkout(&c3).unwrap().unwrap(), &model).unwrap_or_else(|e| panic!("after a reopen: {e}"));
}
