//! A store's creation under faults (issue #40, item 8): every mutating
//! operation of a creation fails in turn (EIO, ENOSPC, a short write), or
//! the process dies there (every operation from it on fails, no clean-up
//! reaches the storage); the storage is then taken to "crash", each
//! unsynced write kept, dropped or torn. Afterwards the directory must be
//! a valid empty store or hold nothing that stops a creating open, and no
//! open may call what is left "not a pando store".

use pando_store::io::{CrashMode, FaultKind, FaultPlan, FaultyStorage, Storage};
use pando_store::{CommitMeta, Create, Error, Options, Store};
use std::sync::Arc;

fn options(create: Create, read_only: bool) -> Options {
    Options { create, read_only, cache_bytes: 1 << 20, read_cache_bytes: 0, ..Options::default() }
}

fn names(storage: &FaultyStorage) -> Vec<String> {
    let mut names = storage.list().unwrap();
    names.sort();
    names
}

/// Where a creation starts: an empty directory, or one holding what an
/// earlier creation left (the lock, an empty chunk, a half-written control
/// file under its temporary name).
fn start(leftovers: bool) -> FaultyStorage {
    let storage = FaultyStorage::new();
    if leftovers {
        for name in ["lock", "chunk-0000000000000000.pack", "control.tmp"] {
            storage.open(name, true).unwrap();
        }
        storage.open("control.tmp", false).unwrap().write_all_at(b"half a control slot", 0).unwrap();
        storage.sync_dir().unwrap();
    }
    storage.set_plan(FaultPlan::default());
    storage
}

/// The mutating operations of a creation from `start(leftovers)`.
fn creation_ops(leftovers: bool) -> u64 {
    let storage = start(leftovers);
    Store::open_storage(Arc::new(storage.clone()), options(Create::IfMissing, false)).unwrap();
    storage.mutating_ops()
}

/// What every open must make of `image`, the storage after a failed or
/// cut-short creation: an open that may not create finds an empty store,
/// or says the directory is empty (when it is) or holds an unfinished
/// creation, and changes nothing; a creating open then gives a store that
/// takes commits and reopens with them.
fn check_usable(image: FaultyStorage, what: &str) {
    let before = names(&image);
    for (create, read_only) in [(Create::Never, true), (Create::Never, false), (Create::IfMissing, true)] {
        match Store::open_storage(Arc::new(image.clone()), options(create, read_only)) {
            Ok(store) => assert_eq!(store.commit_count(), 0, "{what}"),
            Err(Error::NotAStore { reason, .. }) => {
                assert!(before.is_empty(), "{what}: {before:?} called not a store: {reason}");
            }
            Err(Error::UnfinishedCreation { files, .. }) => assert!(!before.is_empty() && !files.is_empty(), "{what}"),
            Err(other) => panic!("{what}: {before:?}: {create:?}, read-only {read_only}: {other}"),
        }
        assert_eq!(names(&image), before, "{what}: an open that may not create changed the directory");
    }
    let store = Store::open_storage(Arc::new(image.clone()), options(Create::IfMissing, false))
        .unwrap_or_else(|e| panic!("{what}: {before:?} does not become a store: {e}"));
    assert_eq!(store.commit_count(), 0, "{what}");
    let mut tree = store.empty_tree();
    tree.add_mut(&["a"], b"1").unwrap();
    let hash = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "test", message: "first" }).unwrap();
    store.close().unwrap();
    let store = Store::open_storage(Arc::new(image), options(Create::Never, true)).unwrap();
    assert_eq!(store.last_commit().unwrap(), Some(hash), "{what}");
}

/// The storage as the process left it, and as reboots after a crash find it.
fn images(storage: &FaultyStorage) -> Vec<(String, FaultyStorage)> {
    let mut images = vec![
        ("crash, unsynced writes kept".to_string(), storage.crash(CrashMode::KeepAll, 0)),
        ("crash, unsynced writes dropped".to_string(), storage.crash(CrashMode::DropAll, 0)),
    ];
    for seed in 0..3 {
        images.push((format!("crash, seed {seed}"), storage.crash(CrashMode::Random, seed)));
    }
    images.push(("no crash".to_string(), storage.clone()));
    images
}

#[test]
fn a_failed_creation_removes_what_it_made() {
    let mut tried = 0;
    for leftovers in [false, true] {
        let ops = creation_ops(leftovers);
        assert!(ops >= 6, "a creation writes, syncs and renames: {ops} operations");
        for op in 0..ops {
            for kind in [FaultKind::Eio, FaultKind::NoSpace, FaultKind::ShortWrite] {
                let what = format!("leftovers {leftovers}, {kind:?} at operation {op}");
                let storage = start(leftovers);
                storage.set_plan(FaultPlan { fail_op: Some((op, kind)), ..FaultPlan::default() });
                let result = Store::open_storage(Arc::new(storage.clone()), options(Create::IfMissing, false));
                assert!(result.is_err(), "{what}: the creation ignored a failed operation");
                assert_eq!(storage.injected().len(), 1, "{what}");
                // Nothing left behind, the leftovers it found included.
                assert_eq!(names(&storage), Vec::<String>::new(), "{what}");
                storage.set_plan(FaultPlan::default());
                for (crash, image) in images(&storage) {
                    check_usable(image, &format!("{what}, {crash}"));
                    tried += 1;
                }
            }
        }
    }
    eprintln!("{tried} failed creations, each left usable");
}

#[test]
fn a_creation_cut_short_at_any_operation_opens_after_a_crash() {
    let mut tried = 0;
    for leftovers in [false, true] {
        let ops = creation_ops(leftovers);
        for op in 0..ops {
            let what = format!("leftovers {leftovers}, died at operation {op}");
            let storage = start(leftovers);
            storage.die_at(Some(op));
            assert!(Store::open_storage(Arc::new(storage.clone()), options(Create::IfMissing, false)).is_err(), "{what}");
            storage.die_at(None);
            storage.set_plan(FaultPlan::default());
            for (crash, image) in images(&storage) {
                check_usable(image, &format!("{what}, {crash}"));
                tried += 1;
            }
        }
    }
    eprintln!("{tried} creations cut short, each left usable");
}
