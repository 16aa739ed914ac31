//! Snapshots: a commit exported and imported elsewhere is the same commit,
//! reads the same and takes new commits; damaged, truncated, forged or
//! non-canonical snapshots are refused with a snapshot error, never a panic
//! and never a store holding another commit.

mod common;

use common::*;
use pando_core::Hash;
use pando_store::io::MemStorage;
use pando_store::snapshot::write_frames;
use pando_store::{CommitMeta, Error, Options, Store};
use proptest::prelude::*;
#[path = "../../pando-core/tests/support/seeds.rs"]
mod seeds;
use std::sync::Arc;

fn mem_store() -> Store {
    Store::open_storage(Arc::new(MemStorage::new()), Options::default()).unwrap()
}

fn path(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

/// A model with directories of every shape: ≤ 32 entries, 33..256 (a tree
/// inode hashed flat), more than 256 (hashed as inodes), nested ones,
/// inline and blob contents, an empty value.
fn every_shape() -> Model {
    let mut model = Model::new();
    for (dir, n) in [("small", 5), ("medium", 200), ("large", 1_000)] {
        for i in 0..n {
            let value = if i % 7 == 0 { vec![i as u8; 40 + i % 100] } else { format!("{dir}-{i}").into_bytes() };
            model_add(&mut model, &path(&["data", dir, &format!("{i:05x}")]), &value);
        }
    }
    model_add(&mut model, &path(&["data", "large", "00010", "nested", "deep"]), b"");
    model_add(&mut model, &path(&["version"]), b"genesis");
    model
}

/// Commits `model` (with a parent commit before it) and returns the store and commit.
fn committed(model: &Model) -> (Store, Hash) {
    let store = mem_store();
    let mut tree = store.empty_tree();
    tree.add_mut(&["before"], b"parent").unwrap();
    let parent = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "parent" }).unwrap();
    let mut tree = store.empty_tree();
    for (path, value) in model {
        tree.add_mut(path, value).unwrap();
    }
    let commit =
        store.commit(&tree, CommitMeta { parents: &[parent], date: 1_600_000_000, author: "Tezos", message: "block 2" }).unwrap();
    (store, commit)
}

fn export(store: &Store, commit: &Hash) -> Vec<u8> {
    let mut out = Vec::new();
    let summary = store.export_snapshot(commit, &mut out).unwrap();
    assert_eq!(summary.file_bytes, out.len() as u64);
    out
}

fn import(bytes: &[u8]) -> Result<(Store, Hash), Error> {
    let store = mem_store();
    let summary = store.import_snapshot(&mut &bytes[..])?;
    Ok((store, summary.commit))
}

#[test]
fn a_commit_imported_elsewhere_is_the_same_commit() {
    let model = every_shape();
    let (store, commit) = committed(&model);
    let bytes = export(&store, &commit);
    let storage = Arc::new(MemStorage::new());
    let imported = Store::open_storage(storage.clone(), Options::default()).unwrap();
    let summary = imported.import_snapshot(&mut &bytes[..]).unwrap();
    assert_eq!(summary.commit, commit);
    assert_eq!(summary.contents, model.len() as u64);
    assert_eq!(summary.file_bytes, bytes.len() as u64);
    assert_eq!(imported.commit_info(&commit).unwrap(), store.commit_info(&commit).unwrap());
    check_tree(&imported.checkout(&commit).unwrap().unwrap(), &model).unwrap();
    assert_eq!(imported.checkout(&commit).unwrap().unwrap().hash().unwrap(), model_hash(&model));

    // Durable, and a base for new commits.
    drop(imported);
    let reopened = Store::open_storage(storage, Options::default()).unwrap();
    let mut tree = reopened.checkout(&commit).unwrap().unwrap();
    tree.add_mut(&["data", "small", "new"], b"value").unwrap();
    let child = reopened
        .commit(&tree, CommitMeta { parents: &[commit], date: 1_600_000_001, author: "Tezos", message: "block 3" })
        .unwrap();
    let mut expected = model.clone();
    model_add(&mut expected, &path(&["data", "small", "new"]), b"value");
    check_tree(&reopened.checkout(&child).unwrap().unwrap(), &expected).unwrap();
    assert_eq!(reopened.ancestor(&child, 5).unwrap(), commit, "history stops at the imported commit");

    // Exported again from the imported store: the same bytes.
    assert_eq!(export(&reopened, &commit), bytes);

    // The integrity check finds nothing wrong with a store whose first
    // commit's parents were never held.
    let report = reopened.check(pando_store::CheckScope::All, 10, &mut |_| {}).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn the_empty_tree_round_trips() {
    let store = mem_store();
    let commit = store.commit(&store.empty_tree(), CommitMeta { parents: &[], date: 0, author: "", message: "" }).unwrap();
    let (imported, found) = import(&export(&store, &commit)).unwrap();
    assert_eq!(found, commit);
    assert!(imported.checkout(&commit).unwrap().unwrap().list(&[] as &[&str], 0, None).unwrap().is_empty());
}

#[test]
fn a_snapshot_is_imported_only_into_an_empty_store() {
    let (store, commit) = committed(&every_shape());
    let bytes = export(&store, &commit);
    assert!(matches!(store.import_snapshot(&mut &bytes[..]), Err(Error::Invalid(_))));
}

fn assert_refused(bytes: &[u8], what: &str) {
    assert_refused_for(bytes, what, "");
}

/// Refused with a snapshot error whose reason contains `reason`.
fn assert_refused_for(bytes: &[u8], what: &str, reason: &str) {
    match import(bytes) {
        Err(Error::Snapshot { reason: found, .. }) => assert!(found.contains(reason), "{what}: refused for {found:?}"),
        Err(other) => panic!("{what}: expected a snapshot error, got {other}"),
        Ok(_) => panic!("{what}: a damaged snapshot was imported"),
    }
}

#[test]
fn every_flipped_byte_and_every_truncation_is_refused() {
    let mut model = Model::new();
    for i in 0..40 {
        model_add(&mut model, &path(&["d", &format!("k{i:02}")]), format!("v{i}").as_bytes());
    }
    let (store, commit) = committed(&model);
    let bytes = export(&store, &commit);
    assert_eq!(import(&bytes).unwrap().1, commit);
    for i in 0..bytes.len() {
        for bit in [0x01, 0x80] {
            let mut damaged = bytes.clone();
            damaged[i] ^= bit;
            assert_refused(&damaged, &format!("bit {bit:#x} of byte {i} flipped"));
        }
    }
    for len in 0..bytes.len() {
        assert_refused(&bytes[..len], &format!("truncated to {len} bytes"));
    }
    let mut longer = bytes.clone();
    longer.extend_from_slice(&bytes[8..]);
    assert_refused(&longer, "frames after the end");
}

/// The raw stream of a snapshot file (its frames decompressed).
fn stream_of(file: &[u8]) -> Vec<u8> {
    let mut raw = Vec::new();
    let mut pos = 8;
    while pos < file.len() {
        let raw_len = u32::from_le_bytes(file[pos..pos + 4].try_into().unwrap()) as usize;
        let stored = u32::from_le_bytes(file[pos + 4..pos + 8].try_into().unwrap()) as usize;
        raw.extend(zstd::bulk::decompress(&file[pos + 8..pos + 8 + stored], raw_len).unwrap());
        pos += 8 + stored + 4;
    }
    raw
}

/// A snapshot file holding `stream`, with valid frames.
fn file_of(stream: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write_frames(&mut out, |w| {
        w.buf().extend_from_slice(stream);
        Ok(())
    })
    .unwrap();
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> usize {
    haystack.windows(needle.len()).position(|w| w == needle).expect("present")
}

#[test]
fn a_forged_stream_with_valid_frames_is_refused() {
    let model = every_shape();
    let (store, commit) = committed(&model);
    let stream = stream_of(&export(&store, &commit));
    assert_eq!(import(&file_of(&stream)).unwrap().1, commit, "re-framing alone changes nothing");

    // A value changed: every frame is valid, the tree hashes to another commit.
    let mut forged = stream.clone();
    let at = find(&forged, b"small-3");
    forged[at + 6] = b'4';
    assert_refused_for(&file_of(&forged), "a changed value", "hash to commit");

    // Another commit named in the header.
    let mut forged = stream.clone();
    forged[0] ^= 1;
    assert_refused_for(&file_of(&forged), "another commit hash", "hash to commit");

    // Two entries swapped: not sorted.
    let mut forged = stream.clone();
    let a = find(&forged, b"small-1");
    let b = find(&forged, b"small-2");
    forged[a + 6] = b'2';
    forged[b + 6] = b'1';
    let small = find(&forged, b"\x05small\x01");
    let (ka, kb) = (small + find(&forged[small..], b"\x0500001"), small + find(&forged[small..], b"\x0500002"));
    forged[ka + 5] = b'2';
    forged[kb + 5] = b'1';
    assert_refused_for(&file_of(&forged), "unsorted entries", "not sorted");

    // An unknown inode tag, an unknown entry kind, and garbage at the end.
    let root = 32 + 1 + 32 + 8 + 1 + "Tezos".len() + 1 + "block 2".len();
    for (at, value, what) in
        [(root, 9u8, "unknown inode tag"), (root + 7, 7, "unknown entry kind"), (stream.len() - 1, b'X', "end marker")]
    {
        let mut forged = stream.clone();
        forged[at] = value;
        assert_refused_for(&file_of(&forged), what, what);
    }
    let mut forged = stream.clone();
    forged.push(0);
    assert_refused_for(&file_of(&forged), "bytes after the end", "after the end");

    // A directory of 33 entries written as a value inode is not canonical;
    // a tree inode whose length is not its children's sum neither.
    let mut forged = stream.clone();
    let large = find(&forged, b"\x05large\x01\x02");
    forged[large + 8] = 0xe9; // 1,000 -> 1,001 entries claimed
    assert_refused_for(&file_of(&forged), "a wrong tree length", "has 1000 below it");
}

#[test]
fn a_failed_import_leaves_an_empty_store_that_reopens() {
    let (store, commit) = committed(&every_shape());
    let bytes = export(&store, &commit);
    let storage = Arc::new(MemStorage::new());
    let target = Store::open_storage(storage.clone(), Options::default()).unwrap();
    let failure = target.import_snapshot(&mut &bytes[..bytes.len() - 10]).unwrap_err();
    match target.commit(&target.empty_tree(), CommitMeta { parents: &[], date: 0, author: "", message: "" }) {
        Err(Error::PreviousIo { first }) => assert_eq!(first, failure.to_string()),
        other => panic!("expected a refusal naming the failed import, got {other:?}"),
    }
    drop(target);
    let reopened = Store::open_storage(storage, Options::default()).unwrap();
    assert_eq!(reopened.commit_count(), 0);
    assert_eq!(reopened.import_snapshot(&mut &bytes[..]).unwrap().commit, commit);
}

proptest! {
    #![proptest_config(seeds::config(24))]

    /// Random trees of random shapes round-trip to the reference hash.
    #[test]
    fn random_trees_round_trip(entries in proptest::collection::vec((0u8..3, 0u16..600, 0usize..80), 1..400)) {
        let mut model = Model::new();
        for (dir, key, len) in entries {
            let value = vec![key as u8; len];
            model_add(&mut model, &path(&[&format!("d{dir}"), &format!("{:x}", key % 300), "v"]), &value);
            if key % 5 == 0 {
                model_add(&mut model, &path(&[&format!("d{dir}"), &format!("flat{key}")]), &value);
            }
        }
        let (store, commit) = committed(&model);
        let (imported, found) = import(&export(&store, &commit)).unwrap();
        prop_assert_eq!(found, commit);
        check_tree(&imported.checkout(&commit).unwrap().unwrap(), &model).unwrap();
    }
}

#[test]
fn values_larger_than_a_frame_cross_frames() {
    let mut model = every_shape();
    let big: Vec<u8> = (0..(3 << 20) + 12_345).map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    model_add(&mut model, &path(&["data", "big"]), &big);
    let (store, commit) = committed(&model);
    let bytes = export(&store, &commit);
    let (imported, found) = import(&bytes).unwrap();
    assert_eq!(found, commit);
    check_tree(&imported.checkout(&commit).unwrap().unwrap(), &model).unwrap();
    assert_eq!(stream_of(&bytes).len() / pando_store::snapshot::FRAME_BYTES, 3, "the value spans frames");
}
