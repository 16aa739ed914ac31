//! `Store::repair`: a flipped byte in the index, the dictionary or a
//! control slot is mended (the store opens, checks clean, and holds the
//! same commits with the same values as before the damage); the open
//! error of a damaged index or dictionary names the repair; an undamaged
//! store is left byte for byte as it was; what cannot be rebuilt (a
//! damaged pack record, a control file without a valid synced slot, a
//! dictionary entry whose record a collection removed) is refused and
//! nothing changes; collected stores (rolling and archive) are repaired;
//! a repair is refused while a writer has the store open; a crash at any
//! step of a repair leaves a store that opens or that a repair completes.

use pando_core::Hash;
use pando_store::format::control::{SLOT_SIZE, decode_slot};
use pando_store::format::record::{self, Parse};
use pando_store::io::{CrashMode, FaultKind, FaultPlan, FaultyStorage, MemStorage, Storage};
use pando_store::{CheckScope, CommitMeta, Error, Options, REPAIR_HINT, RepairReport, Retention, Store};
use std::collections::BTreeMap;
use std::sync::Arc;

fn options() -> Options {
    Options { chunk_target_bytes: 16 << 10, checkpoint_commits: 4, cache_bytes: 1 << 20, ..Options::default() }
}

fn read_only() -> Options {
    Options { read_only: true, ..options() }
}

/// The paths whose values each commit is compared on.
const PATHS: [[&str; 2]; 6] =
    [["small", "0"], ["small", "x1"], ["big", "0007"], ["big", "0049"], ["blobs", "3"], ["names", "balance"]];

/// Commits `blocks`: a directory of 200 entries, blobs, and names written
/// often enough to enter the dictionary; then small updates.
fn build(store: &Store, blocks: std::ops::Range<u32>, head: Option<Hash>) -> Vec<Hash> {
    let mut tree = head.map_or_else(|| store.empty_tree(), |h| store.checkout(&h).unwrap().unwrap());
    let mut commits: Vec<Hash> = head.into_iter().collect();
    for b in blocks {
        if b == 0 {
            for i in 0..5 {
                tree.add_mut(&["small", &format!("{i}")], b"s").unwrap();
            }
            for i in 0..200 {
                tree.add_mut(&["big", &format!("{i:04}")], format!("value {i}").as_bytes()).unwrap();
            }
            for i in 0..10u8 {
                tree.add_mut(&["blobs", &format!("{i}")], &[i; 100]).unwrap();
            }
        } else {
            tree.add_mut(&["big", &format!("{:04}", b * 7 % 200)], format!("block {b}").as_bytes()).unwrap();
            tree.add_mut(&["small", &format!("x{}", b % 3)], &b.to_be_bytes()).unwrap();
            tree.add_mut(&["blobs", &format!("{}", b % 10)], &[b as u8; 64]).unwrap();
        }
        // Names repeated in each block and across blocks: dictionary entries
        // defined by the first blocks' records.
        for name in ["balance", "counter", "manager", "delegate"] {
            tree.add_mut(&["names", name], &b.to_le_bytes()).unwrap();
            tree.add_mut(&["accounts", &format!("{}", b % 4), name], &b.to_le_bytes()).unwrap();
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

fn built(blocks: u32) -> (MemStorage, Vec<Hash>) {
    let storage = MemStorage::new();
    let store = Store::open_storage(Arc::new(storage.clone()), options()).unwrap();
    let commits = build(&store, 0..blocks, None);
    store.close().unwrap();
    (storage, commits)
}

/// Each commit's values at `PATHS`; `None` for a commit the store does not
/// hold (or collected).
fn contents(store: &Store, commits: &[Hash]) -> Vec<Option<Vec<Option<Vec<u8>>>>> {
    commits
        .iter()
        .map(|c| {
            let tree = store.checkout(c).ok()??;
            Some(PATHS.iter().map(|p| tree.find(p).unwrap()).collect())
        })
        .collect()
}

/// Every file's bytes.
fn files(storage: &dyn Storage) -> BTreeMap<String, Vec<u8>> {
    let names = storage.list().unwrap();
    names.into_iter().map(|n| (n.clone(), pando_store::io::read_all(&*storage.open(&n, false).unwrap()).unwrap())).collect()
}

fn flip(storage: &dyn Storage, name: &str, position: u64) {
    let file = storage.open(name, false).unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, position).unwrap();
    file.write_all_at(&[byte[0] ^ 0x10], position).unwrap();
}

fn repair_mem(storage: &MemStorage) -> Result<RepairReport, Error> {
    Store::repair_storage(Arc::new(storage.clone()), options(), &mut |_| {})
}

/// The store opens read-only, checks clean (scope all) and holds `commits`
/// with `expected` values.
fn assert_sound(storage: Arc<dyn Storage>, commits: &[Hash], expected: &[Option<Vec<Option<Vec<u8>>>>]) {
    let store = Store::open_storage(storage.clone(), read_only()).unwrap();
    let report = store.check(CheckScope::All, 10, &mut |_| {}).unwrap();
    let problems: Vec<String> = report.problems.iter().map(ToString::to_string).collect();
    assert!(report.is_clean(), "{}", problems.join("\n"));
    assert_eq!(contents(&store, commits), expected);
    drop(store);
    // A writable open too (it would cut what it does not trust).
    let store = Store::open_storage(storage, options()).unwrap();
    assert_eq!(contents(&store, commits), expected);
    store.close().unwrap();
}

fn open_error(storage: &MemStorage) -> String {
    match Store::open_storage(Arc::new(storage.clone()), read_only()) {
        Ok(_) => panic!("the damaged store opened"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_flipped_index_byte_is_rebuilt_from_the_pack() {
    let (storage, commits) = built(14);
    let before = contents(&Store::open_storage(Arc::new(storage.clone()), read_only()).unwrap(), &commits);
    flip(&storage, "index", 5 * 44 + 10);
    let error = open_error(&storage);
    assert!(error.contains("index") && error.contains("checksum mismatch") && error.contains(REPAIR_HINT), "{error}");
    let report = repair_mem(&storage).unwrap();
    assert_eq!(report.rewritten, vec!["index".to_string()]);
    assert!(report.findings.iter().any(|f| f.contains("entries 5 are damaged")), "{:?}", report.findings);
    assert!(report.check.is_clean() && report.check.commits == 14, "{:?}", report.check);
    assert_sound(Arc::new(storage.clone()), &commits, &before);
    // Once mended, a second repair finds nothing to do.
    assert!(repair_mem(&storage).unwrap().unchanged());
}

#[test]
fn a_flipped_dictionary_byte_is_rebuilt_from_the_pack() {
    let (storage, commits) = built(14);
    let before = contents(&Store::open_storage(Arc::new(storage.clone()), read_only()).unwrap(), &commits);
    let dict_len = storage.open("dict", false).unwrap().len().unwrap();
    assert!(dict_len > 20, "the workload fills the dictionary");
    flip(&storage, "dict", dict_len / 2);
    let error = open_error(&storage);
    assert!(error.contains("dict") && error.contains(REPAIR_HINT), "{error}");
    let report = repair_mem(&storage).unwrap();
    assert_eq!(report.rewritten, vec!["dict".to_string()]);
    assert_sound(Arc::new(storage), &commits, &before);
}

#[test]
fn both_files_damaged_are_rebuilt_together() {
    let (storage, commits) = built(14);
    let before = contents(&Store::open_storage(Arc::new(storage.clone()), read_only()).unwrap(), &commits);
    flip(&storage, "index", 40);
    flip(&storage, "dict", 1);
    let report = repair_mem(&storage).unwrap();
    assert_eq!(report.rewritten, vec!["index".to_string(), "dict".to_string()]);
    assert_sound(Arc::new(storage), &commits, &before);
}

/// The newest synced slot: where it is.
fn newest_synced_slot(storage: &MemStorage) -> u64 {
    let bytes = files(storage)["control"].clone();
    let seq = |i: usize| decode_slot(&bytes[i * SLOT_SIZE..(i + 1) * SLOT_SIZE]).map_or(0, |c| c.seq);
    if seq(0) >= seq(1) { 0 } else { SLOT_SIZE as u64 }
}

/// A store of 14 commits whose newest synced slot has a byte flipped:
/// the storage, the commits, their values, and where the slot is.
type FlippedSlot = (MemStorage, Vec<Hash>, Vec<Option<Vec<Option<Vec<u8>>>>>, u64);

fn with_flipped_synced_slot() -> FlippedSlot {
    let (storage, commits) = built(14);
    let before = contents(&Store::open_storage(Arc::new(storage.clone()), read_only()).unwrap(), &commits);
    let slot = newest_synced_slot(&storage);
    flip(&storage, "control", slot + 30);
    (storage, commits, before, slot)
}

fn assert_synced_slots_whole(storage: &MemStorage) {
    let bytes = files(storage)["control"].clone();
    for i in 0..2 {
        assert!(decode_slot(&bytes[i * SLOT_SIZE..(i + 1) * SLOT_SIZE]).is_ok(), "slot {i} is whole again");
    }
}

#[test]
fn a_flipped_control_slot_is_written_again() {
    let (storage, commits, before, slot) = with_flipped_synced_slot();
    // Read at the older slot's state, which names fewer commits: the check
    // says which slot is damaged.
    let store = Store::open_storage(Arc::new(storage.clone()), read_only()).unwrap();
    let check = store.check(CheckScope::All, 10, &mut |_| {}).unwrap();
    assert!(
        check.problems.iter().any(|p| p.file == "control" && p.position == slot && p.what.contains("damaged")),
        "{:?}",
        check.problems
    );
    drop(store);
    let report = repair_mem(&storage).unwrap();
    assert_eq!(report.rewritten, vec!["control".to_string()]);
    assert!(report.findings.iter().any(|f| f.contains("synced slot") && f.contains("damaged")), "{:?}", report.findings);
    assert_synced_slots_whole(&storage);
    // The older slot's state: a writable open takes in the commits after
    // it, as after a crash.
    let store = Store::open_storage(Arc::new(storage.clone()), options()).unwrap();
    assert_eq!(contents(&store, &commits), before);
    store.close().unwrap();
    assert_sound(Arc::new(storage), &commits, &before);
}

#[test]
fn a_writable_open_writes_a_damaged_synced_slot_again() {
    let (storage, commits, before, _) = with_flipped_synced_slot();
    // Opened for writing, and nothing committed: the slot is whole again,
    // every commit is there, and a read-only open checks clean.
    let store = Store::open_storage(Arc::new(storage.clone()), options()).unwrap();
    assert_eq!(contents(&store, &commits), before);
    drop(store);
    assert_synced_slots_whole(&storage);
    assert_sound(Arc::new(storage), &commits, &before);
}

#[test]
fn a_control_file_without_a_valid_synced_slot_is_refused() {
    let (storage, _) = built(6);
    flip(&storage, "control", 30);
    flip(&storage, "control", SLOT_SIZE as u64 + 30);
    let damaged = files(&storage);
    let error = repair_mem(&storage).unwrap_err();
    assert!(matches!(error, Error::CannotRepair(_)), "{error}");
    assert!(error.to_string().contains("no valid control slot") && error.to_string().contains("cannot be rebuilt"), "{error}");
    assert_eq!(files(&storage), damaged, "nothing changed");
}

#[test]
fn an_undamaged_store_is_left_as_it_was() {
    let (storage, _) = built(14);
    let before = files(&storage);
    let report = repair_mem(&storage).unwrap();
    assert!(report.unchanged() && report.findings.is_empty(), "{report:?}");
    assert!(report.check.is_clean() && report.check.commits == 14);
    assert_eq!(files(&storage), before);
}

#[test]
fn a_damaged_pack_record_is_refused_naming_its_offset() {
    let (storage, _) = built(14);
    flip(&storage, "index", 50);
    // A record in the middle of the first chunk (its logical offset is
    // its position there).
    let chunk = pando_store::pack::chunk_name(0);
    let bytes = files(&storage)[&chunk].clone();
    let mut pos = 0;
    for _ in 0..20 {
        let Parse::Record { total, .. } = record::parse(&bytes[pos..]) else { panic!("damaged at {pos}") };
        pos += total;
    }
    flip(&storage, &chunk, pos as u64 + 3);
    let damaged = files(&storage);
    let error = repair_mem(&storage).unwrap_err().to_string();
    assert!(error.contains(&format!("the pack record at offset {pos} ")) && error.contains("lost"), "{error}");
    assert_eq!(files(&storage), damaged, "nothing changed");
}

#[test]
fn a_repair_is_refused_while_a_writer_has_the_store_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), options()).unwrap();
    build(&store, 0..2, None);
    let error = Store::repair(dir.path(), options(), &mut |_| {}).unwrap_err();
    assert!(error.to_string().contains("open for writing"), "{error}");
    store.close().unwrap();
    assert!(Store::repair(dir.path(), options(), &mut |_| {}).unwrap().unchanged());
}

/// A store collected once, then committed to and collected again.
fn collected(retention: Retention) -> (MemStorage, Vec<Hash>) {
    let storage = MemStorage::new();
    let store = Store::open_storage(Arc::new(storage.clone()), Options { retention, ..options() }).unwrap();
    let mut commits = build(&store, 0..40, None);
    store.gc(&commits[30]).unwrap();
    store.wait_gc().unwrap().unwrap();
    let more = build(&store, 40..43, commits.last().copied());
    commits.extend(more);
    store.gc(&commits[36]).unwrap();
    store.wait_gc().unwrap().unwrap();
    store.close().unwrap();
    (storage, commits)
}

/// The current index file and its entries' offsets.
fn index_entries(storage: &MemStorage) -> (String, Vec<u64>) {
    let name = storage.list().unwrap().into_iter().find(|n| n.starts_with("index")).unwrap();
    let bytes = files(storage)[&name].clone();
    (name, bytes.chunks_exact(44).map(|e| u64::from_le_bytes(e[32..40].try_into().unwrap())).collect())
}

#[test]
fn a_collected_store_keeps_its_collected_entries() {
    for retention in [Retention::KeepAll, Retention::Archive { commits: 10, every: u64::MAX }] {
        let (storage, commits) = collected(retention);
        let before = contents(&Store::open_storage(Arc::new(storage.clone()), read_only()).unwrap(), &commits);
        let (name, offsets) = index_entries(&storage);
        assert!(name.starts_with("index-"), "{name}");
        // A kept commit's entry is rebuilt from the pack.
        let kept = offsets.iter().position(|&o| o != u64::MAX).unwrap();
        flip(&storage, &name, kept as u64 * 44 + 33);
        assert!(open_error(&storage).contains(REPAIR_HINT));
        let report = repair_mem(&storage).unwrap();
        assert_eq!(report.rewritten, vec![name.clone()], "{retention:?}");
        assert_sound(Arc::new(storage.clone()), &commits, &before);
        let store = Store::open_storage(Arc::new(storage), read_only()).unwrap();
        if retention.archive() {
            assert!(store.checkout(&commits[2]).unwrap().is_some());
        } else {
            assert!(matches!(store.checkout(&commits[2]), Err(Error::CollectedCommit(_))), "still known as collected");
        }
    }
}

#[test]
fn a_damaged_collected_entry_loses_only_that_hash() {
    // A collection may leave a removed commit's record in a file it kept
    // whole (mostly live: chains of patches keep their full records): a
    // repair then rebuilds that entry from the record. Damaged here: the
    // first collected entry whose record the collection removed.
    let (_, offsets) = index_entries(&collected(Retention::KeepAll).0);
    let mut rebuilt = 0;
    for lost in (0..offsets.len()).filter(|&i| offsets[i] == u64::MAX) {
        let (storage, commits) = collected(Retention::KeepAll);
        let (name, _) = index_entries(&storage);
        let store = Store::open_storage(Arc::new(storage.clone()), read_only()).unwrap();
        let (count, collected_count) = (store.commit_count(), store.info().collected_commits);
        let before = contents(&store, &commits);
        let collected: Vec<Hash> =
            commits.iter().copied().filter(|c| matches!(store.checkout(c), Err(Error::CollectedCommit(_)))).collect();
        drop(store);
        flip(&storage, &name, lost as u64 * 44 + 3);
        let report = repair_mem(&storage).unwrap();
        if !report.findings.iter().any(|f| f.contains("1 damaged entries named commits a collection had removed")) {
            assert!(report.findings.iter().any(|f| f.contains("1 entries rebuilt from the pack's commit records")), "{report:?}");
            rebuilt += 1;
            continue;
        }
        assert_eq!(report.rewritten, vec![name, "control".to_string()]);
        assert_sound(Arc::new(storage.clone()), &commits, &before);
        let store = Store::open_storage(Arc::new(storage), read_only()).unwrap();
        assert_eq!(store.commit_count(), count, "every commit the pack holds is still there");
        assert_eq!(store.info().collected_commits, collected_count - 1);
        let unknown = collected.iter().filter(|c| matches!(store.checkout(c), Ok(None))).count();
        assert_eq!(unknown, 1, "one collected commit's hash is lost, the others are still known as collected");
        return;
    }
    panic!("every collected commit's record is still in the pack ({rebuilt} entries rebuilt from them)");
}

#[test]
fn a_dictionary_entry_whose_record_was_collected_is_refused() {
    let (storage, _) = collected(Retention::KeepAll);
    // The first entries were defined by the first blocks' records, which
    // the collection removed from the pack.
    flip(&storage, "dict", 2);
    let damaged = files(&storage);
    let error = repair_mem(&storage).unwrap_err().to_string();
    assert!(error.contains("dictionary entries 0") && error.contains("cannot be rebuilt"), "{error}");
    assert_eq!(files(&storage), damaged, "nothing changed");
}

/// A repair that fails at each of its writes in turn, then a crash that
/// keeps, drops or tears each unsynced write: the store opens as it was
/// (damaged: the error names the repair) or repaired, and a repair then
/// completes.
#[test]
fn a_crash_during_a_repair_leaves_a_store_a_repair_completes() {
    let base = FaultyStorage::new();
    let store = Store::open_storage(Arc::new(base.clone()), options()).unwrap();
    let commits = build(&store, 0..10, None);
    let before = contents(&store, &commits);
    store.close().unwrap();
    base.flip_bit("index", 3 * 44 * 8 + 7).unwrap();
    base.flip_bit("dict", 9).unwrap();
    let mut op = 0;
    loop {
        let storage = base.crash(CrashMode::KeepAll, 0);
        storage.set_plan(FaultPlan { fail_op: Some((op, FaultKind::Eio)), fail_reads_after: None });
        let result = Store::repair_storage(Arc::new(storage.clone()), options(), &mut |_| {});
        if storage.injected().is_empty() {
            result.unwrap();
            assert_sound(Arc::new(storage), &commits, &before);
            break;
        }
        assert!(result.is_err(), "op {op}: the injected failure is reported");
        for seed in 0..3 {
            let after = storage.crash(CrashMode::Random, seed);
            if let Err(e) = Store::open_storage(Arc::new(after.clone()), read_only()) {
                assert!(e.to_string().contains(REPAIR_HINT), "op {op} seed {seed}: {e}");
            }
            Store::repair_storage(Arc::new(after.clone()), options(), &mut |_| {}).unwrap();
            assert_sound(Arc::new(after), &commits, &before);
        }
        op += 1;
    }
    assert!(op > 3, "the repair wrote something ({op} operations)");
}
