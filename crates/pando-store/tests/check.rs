//! `Store::check`: a clean store checks clean (one commit, and all), before
//! and after collections (rolling and archive); damage is found and
//! located: a flipped byte (the checksum finds it), a record rewritten with
//! a valid checksum but wrong contents (only re-hashing finds it), a wrong
//! entry count the hash does not cover, a truncated chunk, a damaged index
//! entry; no damaged byte makes the check panic; and neither the check nor
//! the inspection writes a byte.

use pando_core::Hash;
use pando_core::varint;
use pando_store::format::record::{self, Parse, RecordKind};
use pando_store::io::{MemStorage, Storage};
use pando_store::pack::chunk_name;
use pando_store::{CheckReport, CheckScope, CommitMeta, Error, InspectOptions, Options, Problem, Retention, Store};
use std::collections::BTreeMap;
use std::sync::Arc;

fn options() -> Options {
    Options { chunk_target_bytes: 64 << 10, checkpoint_commits: 4, cache_bytes: 1 << 20, ..Options::default() }
}

fn read_only() -> Options {
    Options { read_only: true, ..options() }
}

/// Commits `blocks` blocks: directories of every shape (5 entries, 100
/// subdirectories, 2,000 entries), blobs, then small updates to each, so
/// big directories are written as tree patches.
fn build(store: &Store, blocks: std::ops::Range<u32>, head: Option<Hash>) -> Vec<Hash> {
    let mut tree = head.map_or_else(|| store.empty_tree(), |h| store.checkout(&h).unwrap().unwrap());
    let mut commits: Vec<Hash> = head.into_iter().collect();
    for b in blocks {
        if b == 0 {
            for i in 0..5 {
                tree.add_mut(&["small", &format!("{i}")], b"s").unwrap();
            }
            for i in 0..100u32 {
                tree.add_mut(&["medium", &format!("{i:03}"), "balance"], &i.to_be_bytes()).unwrap();
            }
            for i in 0..2000 {
                tree.add_mut(&["big", &format!("{i:04}")], format!("value {i}").as_bytes()).unwrap();
            }
            for i in 0..10u8 {
                tree.add_mut(&["blobs", &format!("{i}")], &[i; 100]).unwrap();
            }
        } else {
            tree.add_mut(&["big", &format!("{:04}", b * 7 % 2000)], format!("block {b}").as_bytes()).unwrap();
            tree.add_mut(&["medium", &format!("{:03}", b * 3 % 100), "balance"], &b.to_be_bytes()).unwrap();
            tree.add_mut(&["small", &format!("x{}", b % 3)], &b.to_be_bytes()).unwrap();
            tree.add_mut(&["blobs", &format!("{}", b % 10)], &[b as u8; 64]).unwrap();
            if b % 5 == 0 {
                tree.remove_mut(&["big", &format!("{:04}", b * 11 % 2000)]).unwrap();
            }
        }
        let parents: Vec<Hash> = commits.last().copied().into_iter().collect();
        commits.push(
            store
                .commit(
                    &tree,
                    CommitMeta { parents: &parents, date: i64::from(b), author: "Tezos", message: &format!("block {b}") },
                )
                .unwrap(),
        );
        tree = store.checkout(commits.last().unwrap()).unwrap().unwrap();
    }
    commits.into_iter().skip(usize::from(head.is_some())).collect()
}

fn check(store: &Store, scope: CheckScope) -> CheckReport {
    store.check(scope, 100, &mut |_| {}).unwrap()
}

fn assert_clean(report: &CheckReport) {
    let problems: Vec<String> = report.problems.iter().map(Problem::to_string).collect();
    assert!(report.is_clean(), "{}", problems.join("\n"));
}

fn built(blocks: u32) -> (MemStorage, Vec<Hash>) {
    let storage = MemStorage::new();
    let store = Store::open_storage(Arc::new(storage.clone()), options()).unwrap();
    let commits = build(&store, 0..blocks, None);
    store.close().unwrap();
    (storage, commits)
}

/// A record of a file: position, kind, payload, length.
type Record = (u64, RecordKind, Vec<u8>, usize);

/// The records of a file.
fn records(storage: &MemStorage, name: &str) -> Vec<Record> {
    let bytes = pando_store::io::read_all(&*storage.open(name, false).unwrap()).unwrap();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let Parse::Record { kind, payload, total } = record::parse(&bytes[pos..]) else { panic!("damaged {name} at {pos}") };
        out.push((pos as u64, kind, payload.to_vec(), total));
        pos += total;
    }
    out
}

fn chunks(storage: &MemStorage) -> Vec<String> {
    let mut names: Vec<String> = storage.list().unwrap().into_iter().filter(|n| n.starts_with("chunk-")).collect();
    names.sort();
    names
}

/// The records of the last commit's batch (after the commit before it) in the last chunk.
fn last_batch(storage: &MemStorage) -> (String, Vec<Record>) {
    let name = chunks(storage).pop().unwrap();
    let all = records(storage, &name);
    let commits: Vec<usize> = (0..all.len()).filter(|&i| all[i].1 == RecordKind::Commit).collect();
    let from = commits.len().checked_sub(2).map_or(0, |i| commits[i] + 1);
    (name, all[from..].to_vec())
}

fn rewrite(storage: &MemStorage, name: &str, position: u64, bytes: &[u8]) {
    storage.open(name, false).unwrap().write_all_at(bytes, position).unwrap();
}

/// Writes `payload` as a `kind` record at `position` of `name`, with a
/// valid checksum: damage only re-hashing or counting can find.
fn reseal(storage: &MemStorage, name: &str, position: u64, kind: RecordKind, payload: &[u8]) {
    let mut bytes = Vec::new();
    record::append(&mut bytes, kind, payload);
    rewrite(storage, name, position, &bytes);
}

/// The first chunk's record of the root of the directory of 100 entries
/// (a tree inode hashed flat): its file, position and payload.
fn root_of_100(storage: &MemStorage) -> (String, u64, Vec<u8>) {
    let name = chunks(storage).remove(0);
    let (position, payload) = records(storage, &name)
        .into_iter()
        .find(|r| r.1 == RecordKind::Tree && r.2[0] == 0 && r.2[1] == 100)
        .map(|r| (r.0, r.2))
        .expect("the root of the directory of 100 entries");
    (name, position, payload)
}

fn has_problem(report: &CheckReport, file: &str, position: u64, what: &str) -> bool {
    report.problems.iter().any(|p| p.file == file && p.position == position && p.what.contains(what))
}

#[test]
fn a_clean_store_checks_clean() {
    let (storage, commits) = built(30);
    let store = Store::open_storage(Arc::new(storage), read_only()).unwrap();
    let all = check(&store, CheckScope::All);
    assert_clean(&all);
    assert_eq!(all.commits, 30);
    assert_eq!(all.scanned.commits, 30);
    let walked = all.walked;
    assert!(walked.values > 0 && walked.trees > 0 && walked.patches > 0 && walked.blobs > 0, "{walked:?}");
    // Every record but the dictionary's is reachable from some commit.
    assert_eq!(walked.records(), all.scanned.records() - all.scanned.dicts, "{:?}", all.scanned);
    let one = check(&store, CheckScope::Commit(commits[20]));
    assert_clean(&one);
    assert_eq!(one.commits, 1);
    assert!(one.walked.records() < walked.records());
    let unknown = Hash::of_bytes(b"no such commit");
    assert!(matches!(store.check(CheckScope::Commit(unknown), 10, &mut |_| {}), Err(Error::UnknownCommit(_))));
}

/// Every file of `storage`, by name.
fn files(storage: &MemStorage) -> BTreeMap<String, Vec<u8>> {
    let names = storage.list().unwrap();
    names.into_iter().map(|n| (n.clone(), pando_store::io::read_all(&*storage.open(&n, false).unwrap()).unwrap())).collect()
}

/// `check` and `inspect` read only (`store::tools`): on a collected store,
/// opened read-only or writable, no file changes, appears or goes.
#[test]
fn checking_and_inspecting_write_nothing() {
    let storage = MemStorage::new();
    let store = Store::open_storage(Arc::new(storage.clone()), options()).unwrap();
    let commits = build(&store, 0..12, None);
    store.gc(&commits[8]).unwrap();
    store.wait_gc().unwrap().unwrap();
    store.close().unwrap();
    let read = |store: &Store| {
        assert_clean(&check(store, CheckScope::All));
        assert_clean(&check(store, CheckScope::Commit(commits[10])));
        store.inspect(&InspectOptions::default(), &mut |_| {}).unwrap();
    };
    let before = files(&storage);
    let reader = Store::open_storage(Arc::new(storage.clone()), read_only()).unwrap();
    read(&reader);
    drop(reader);
    assert_eq!(files(&storage), before, "a read-only open, checked and inspected");
    let writer = Store::open_storage(Arc::new(storage.clone()), options()).unwrap();
    let opened = files(&storage);
    read(&writer);
    assert_eq!(files(&storage), opened, "a writable open, checked and inspected");
    writer.close().unwrap();
}

#[test]
fn collected_stores_check_clean() {
    for retention in [Retention::KeepAll, Retention::Archive { commits: 10, every: u64::MAX }] {
        let storage = MemStorage::new();
        let options = Options { retention, ..options() };
        let store = Store::open_storage(Arc::new(storage.clone()), options.clone()).unwrap();
        let mut commits = build(&store, 0..40, None);
        store.gc(&commits[30]).unwrap();
        store.wait_gc().unwrap().unwrap();
        assert!(store.info().generation > 0);
        assert_clean(&check(&store, CheckScope::All));
        assert_clean(&check(&store, CheckScope::Commit(commits[35])));
        if retention.archive() {
            assert!(storage.list().unwrap().iter().any(|n| n.starts_with("cold-")));
            assert_clean(&check(&store, CheckScope::Commit(commits[2])));
        } else {
            assert!(matches!(store.check(CheckScope::Commit(commits[2]), 10, &mut |_| {}), Err(Error::CollectedCommit(_))));
        }
        // Commits after the collection, and a second one over the first.
        let more = build(&store, 40..43, commits.last().copied());
        commits.extend(more);
        store.gc(&commits[38]).unwrap();
        store.wait_gc().unwrap().unwrap();
        store.close().unwrap();
        let store = Store::open_storage(Arc::new(storage), Options { read_only: true, ..options }).unwrap();
        let report = check(&store, CheckScope::All);
        assert_clean(&report);
        let expected = if retention.archive() { 43 } else { 43 - 38 };
        assert_eq!(report.commits, expected, "{retention:?}");
    }
}

#[test]
fn a_flipped_byte_is_found_where_it_is() {
    let (storage, commits) = built(10);
    let clean = check(&Store::open_storage(Arc::new(storage.clone()), read_only()).unwrap(), CheckScope::All);
    let (name, batch) = last_batch(&storage);
    let &(position, _, _, _) = batch.iter().find(|r| r.1 == RecordKind::Values).unwrap();
    let file = storage.open(&name, false).unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, position + 3).unwrap();
    rewrite(&storage, &name, position + 3, &[byte[0] ^ 0x20]);
    let store = Store::open_storage(Arc::new(storage), read_only()).unwrap();
    for scope in [CheckScope::All, CheckScope::Commit(commits[9])] {
        let report = check(&store, scope);
        assert!(has_problem(&report, &name, position, "checksum mismatch"), "{scope:?}: {:?}", report.problems);
    }
    // The scan skips the damaged record and goes on; the walk skips what
    // only it leads to.
    let report = check(&store, CheckScope::All);
    assert_eq!(report.scanned.records(), clean.scanned.records() - 1);
    assert_eq!(report.commits, 10);
    assert!(report.walked.records() < clean.walked.records() && report.walked.records() > clean.walked.records() * 9 / 10);
    // The other commits are not damaged; those before do not reach it.
    assert_clean(&check(&store, CheckScope::Commit(commits[8])));
}

#[test]
fn problems_stop_at_the_cap() {
    let (storage, _) = built(10);
    let name = chunk_name(0);
    let all = records(&storage, &name);
    for &(position, ..) in all.iter().step_by(all.len() / 5) {
        let file = storage.open(&name, false).unwrap();
        let mut byte = [0u8];
        file.read_exact_at(&mut byte, position + 2).unwrap();
        rewrite(&storage, &name, position + 2, &[byte[0] ^ 0x04]);
    }
    let store = Store::open_storage(Arc::new(storage), read_only()).unwrap();
    let report = store.check(CheckScope::All, 3, &mut |_| {}).unwrap();
    assert_eq!(report.problems.len(), 3, "{:?}", report.problems);
    assert!(report.stopped);
    let report = store.check(CheckScope::All, 1000, &mut |_| {}).unwrap();
    assert!(report.problems.len() >= 5 && !report.stopped, "{:?}", report.problems);
}

/// Rewrites the inline contents of the first value inode of `payload` that
/// has one: the same length, other bytes.
fn change_inline_value(payload: &mut [u8]) -> bool {
    let mut pos = 0;
    let count = varint::read_u64(payload, &mut pos).unwrap();
    for _ in 0..count {
        let tag = payload[pos];
        pos += 1;
        let step_len = varint::read_u64(payload, &mut pos).unwrap();
        if tag & 3 != 0 {
            pos += step_len as usize;
        }
        let child_len = varint::read_u64(payload, &mut pos).unwrap() as usize;
        match tag >> 2 {
            1 if child_len > 0 => {
                payload[pos + child_len - 1] ^= 1;
                return true;
            }
            1 => {}
            _ => pos += 32,
        }
        if tag >> 2 == 1 {
            pos += child_len;
        }
    }
    false
}

#[test]
fn content_with_a_valid_checksum_is_found_by_rehashing() {
    let (storage, commits) = built(10);
    let (name, batch) = last_batch(&storage);
    let (position, payload) = batch
        .iter()
        .filter(|r| r.1 == RecordKind::Values)
        .find_map(|r| {
            let mut payload = r.2.clone();
            change_inline_value(&mut payload).then_some((r.0, payload))
        })
        .expect("a value inode with inline contents in the last batch");
    reseal(&storage, &name, position, RecordKind::Values, &payload);
    let store = Store::open_storage(Arc::new(storage), read_only()).unwrap();
    let report = check(&store, CheckScope::Commit(commits[9]));
    assert!(has_problem(&report, &name, position, "hash mismatch"), "{:?}", report.problems);
    let all = check(&store, CheckScope::All);
    assert!(has_problem(&all, &name, position, "hash mismatch"), "{:?}", all.problems);
    assert!(all.problems.iter().all(|p| !p.what.contains("checksum")), "the checksum is valid: {:?}", all.problems);
}

/// A store of 3 blocks whose root of the directory of 100 entries says
/// `len` entries instead, resealed; with the record's file and position.
fn with_root_of_100_saying(len: u8) -> (Store, Vec<Hash>, String, u64) {
    let (storage, commits) = built(3);
    let (name, position, mut payload) = root_of_100(&storage);
    payload[1] = len;
    reseal(&storage, &name, position, RecordKind::Tree, &payload);
    (Store::open_storage(Arc::new(storage), read_only()).unwrap(), commits, name, position)
}

#[test]
fn a_wrong_entry_count_is_found() {
    // The directory of 100 entries is a tree inode hashed flat: its
    // count is not in its hash, only the sum over its children tells.
    let (store, _, name, position) = with_root_of_100_saying(101);
    let report = check(&store, CheckScope::All);
    assert!(has_problem(&report, &name, position, "holds 101 entries, its children hold 100"), "{:?}", report.problems);
}

#[test]
fn a_tree_inode_too_small_for_the_layout_is_found_and_refused() {
    // The framing admits tree inodes of 3 entries or more (the binary
    // layout's); an L1 store's must hold more than 32, by the check and
    // by every read.
    let (store, commits, name, position) = with_root_of_100_saying(20);
    let report = check(&store, CheckScope::All);
    assert!(has_problem(&report, &name, position, "tree inode with only 20 entries"), "{:?}", report.problems);
    let mut refused = 0;
    for commit in &commits {
        let tree = store.checkout(commit).unwrap().unwrap();
        if let Err(e) = tree.list(&["medium"], 0, None) {
            assert!(e.to_string().contains("tree inode with only 20 entries (more than 32 in this layout)"), "{e}");
            refused += 1;
        }
    }
    assert!(refused > 0, "a read reached the damaged inode");
}

#[test]
fn a_wrong_entry_count_in_a_patch_is_found() {
    // The same directory in a later commit: a patch of its root, whose
    // children are mostly its base's. In the scope of that commit alone,
    // the base is reached only as a base.
    let (storage, commits) = built(4);
    let mut commits_before = 0;
    let (name, position, mut payload) = chunks(&storage)
        .into_iter()
        .flat_map(|name| records(&storage, &name).into_iter().map(move |r| (name.clone(), r)))
        .find_map(|(name, r)| {
            if r.1 == RecordKind::Commit {
                commits_before += 1;
            }
            (r.1 == RecordKind::TreePatch && r.2[0] == 0 && r.2[1] == 100).then_some((name, r.0, r.2))
        })
        .expect("a patch of the root of the directory of 100 entries");
    payload[1] = 99;
    reseal(&storage, &name, position, RecordKind::TreePatch, &payload);
    let store = Store::open_storage(Arc::new(storage), read_only()).unwrap();
    for scope in [CheckScope::Commit(commits[commits_before]), CheckScope::All] {
        let report = check(&store, scope);
        assert!(has_problem(&report, &name, position, "holds 99 entries, its children hold 100"), "{:?}", report.problems);
    }
}

#[test]
fn two_pointers_to_one_child_do_not_panic() {
    // The root of the directory of 100 entries, its second pointer made
    // the same as its first: the directory is hashed flat from its
    // children's entries, which now hold the same entries twice.
    let (storage, commits) = built(2);
    let (name, position, mut payload) = root_of_100(&storage);
    let mut pos = 6; // depth, one-byte count, bitmap
    let first = pos;
    varint::read_u64(&payload, &mut pos).unwrap();
    pos += 32;
    let (first_len, second) = (pos - first, pos);
    varint::read_u64(&payload, &mut pos).unwrap();
    assert_eq!(pos - second, first_len - 32, "deltas of one length");
    let pointer = payload[first..first + first_len].to_vec();
    payload[second..second + first_len].copy_from_slice(&pointer);
    reseal(&storage, &name, position, RecordKind::Tree, &payload);
    let store = Store::open_storage(Arc::new(storage), read_only()).unwrap();
    let report = check(&store, CheckScope::All);
    assert!(has_problem(&report, &name, position, "two of its children hold the entry"), "{:?}", report.problems);

    // The store's own hashing of that directory, after a change in it, is
    // an error naming the damage, not a panic.
    let mut refused = 0;
    for commit in commits {
        let mut tree = store.checkout(&commit).unwrap().unwrap();
        tree.add_mut(&["medium", "new", "balance"], b"1").unwrap();
        match tree.hash() {
            Ok(_) => {}
            Err(e) => {
                assert!(e.to_string().contains("two of its children hold the entry"), "{e}");
                refused += 1;
            }
        }
    }
    assert!(refused > 0, "the damaged directory was hashed");
}

#[test]
fn a_truncated_chunk_and_a_damaged_index_entry_are_named() {
    let (storage, _) = built(30);
    let names = chunks(&storage);
    assert!(names.len() >= 2, "{names:?}");
    let first = storage.open(&names[0], false).unwrap();
    let len = first.len().unwrap();
    first.truncate(len - 10).unwrap();
    let error = Store::open_storage(Arc::new(storage.clone()), read_only()).err().expect("a truncated chunk is refused");
    let problem = Problem::of_error(&error);
    assert_eq!((problem.file.as_str(), problem.position), (names[0].as_str(), len - 10), "{problem}");
    first.truncate(len).unwrap();

    let index = storage.open("index", false).unwrap();
    let mut byte = [0u8];
    index.read_exact_at(&mut byte, 44 + 7).unwrap();
    index.write_all_at(&[byte[0] ^ 1], 44 + 7).unwrap();
    let error = Store::open_storage(Arc::new(storage), read_only()).err().expect("a damaged index entry is refused");
    let problem = Problem::of_error(&error);
    assert_eq!((problem.file.as_str(), problem.position), ("index", 44), "{problem}");
}

#[test]
fn no_damaged_byte_goes_unnoticed_or_panics() {
    let (storage, commits) = built(6);
    let name = chunk_name(0);
    let len = storage.open(&name, false).unwrap().len().unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..40 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let (position, bit) = (seed % len, (seed >> 32) % 8);
        let damaged = MemStorage::new();
        for file in storage.list().unwrap() {
            let bytes = pando_store::io::read_all(&*storage.open(&file, false).unwrap()).unwrap();
            damaged.open(&file, true).unwrap().write_all_at(&bytes, 0).unwrap();
        }
        let file = damaged.open(&name, false).unwrap();
        let mut byte = [0u8];
        file.read_exact_at(&mut byte, position).unwrap();
        file.write_all_at(&[byte[0] ^ (1 << bit)], position).unwrap();
        let Ok(store) = Store::open_storage(Arc::new(damaged), read_only()) else { continue };
        let report = check(&store, CheckScope::All);
        assert!(!report.is_clean(), "byte {position} bit {bit} of {name} flipped, not found");
        let _ = check(&store, CheckScope::Commit(commits[5]));
    }
}
