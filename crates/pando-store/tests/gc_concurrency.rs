//! The hand-over between a collection, the writer and readers, with real
//! threads: a writer commits blocks without pause, a collector thread keeps
//! starting collections and waiting for them, and readers check out random
//! commits and read them in full. Every read either returns the right
//! contents or (for a collected commit, or a subtree collected under a
//! reader's feet) a clean `Collected`/`CollectedCommit` error; every commit
//! from the last `keep_from` on survives, also after a reopen.

mod common;

use common::*;
use pando_core::Hash;
use pando_store::io::MemStorage;
use pando_store::{CommitMeta, Error, Options, Store};
use parking_lot::RwLock;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

fn options() -> Options {
    Options { chunk_target_bytes: 16 << 10, checkpoint_commits: 5, cache_bytes: 32 << 10, ..Options::default() }
}

fn block(tree: &mut pando_store::Tree, model: &mut Model, n: u32) {
    for i in 0..30u32 {
        let path = vec![b"contracts".to_vec(), format!("{:03}", (n * 11 + i * 7) % 400).into_bytes(), b"balance".to_vec()];
        let value = format!("{n}-{i}").into_bytes();
        tree.add_mut(&path, &value).unwrap();
        model_add(model, &path, &value);
    }
}

#[test]
fn collections_writer_and_readers_together() {
    let storage = MemStorage::new();
    let store = Arc::new(Store::open_storage(Arc::new(storage.clone()), options()).unwrap());
    let commits: Arc<RwLock<Vec<(Hash, Model)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    // The newest `keep_from` a collection was started with (position in
    // `commits`), and the one being started: commits before the larger one
    // may be collected, no others.
    let kept_from = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let starting = Arc::new(std::sync::atomic::AtomicUsize::new(0));

    let writer = {
        let (store, commits) = (store.clone(), commits.clone());
        std::thread::spawn(move || {
            let mut tree = store.empty_tree();
            let mut model = Model::new();
            let mut parent: Option<Hash> = None;
            for n in 0..400u32 {
                block(&mut tree, &mut model, n);
                let hash = store
                    .commit(
                        &tree,
                        CommitMeta {
                            parents: &parent.into_iter().collect::<Vec<_>>(),
                            date: i64::from(n),
                            author: "Tezos",
                            message: "b",
                        },
                    )
                    .unwrap();
                commits.write().push((hash, model.clone()));
                parent = Some(hash);
                tree = store.checkout(&hash).unwrap().unwrap();
            }
        })
    };
    let collector = {
        let (store, commits, stop, kept_from, starting) =
            (store.clone(), commits.clone(), stop.clone(), kept_from.clone(), starting.clone());
        std::thread::spawn(move || {
            let mut rng = SmallRng::seed_from_u64(1);
            let mut collections = 0;
            while !stop.load(Ordering::Acquire) {
                let (position, target) = {
                    let commits = commits.read();
                    let len = commits.len();
                    if len < 40 {
                        drop(commits);
                        std::thread::yield_now();
                        continue;
                    }
                    let position = len - rng.gen_range(10..30);
                    (position, commits[position].0)
                };
                starting.store(position.max(kept_from.load(Ordering::Acquire)), Ordering::Release);
                match store.gc(&target) {
                    Ok(()) => {
                        kept_from.fetch_max(position, Ordering::AcqRel);
                        store.wait_gc().unwrap();
                        collections += 1;
                    }
                    // Busy, or older than what an earlier collection kept.
                    Err(Error::GcRunning | Error::CollectedCommit(_)) => {
                        starting.store(kept_from.load(Ordering::Acquire), Ordering::Release);
                    }
                    Err(e) => panic!("gc: {e}"),
                }
            }
            collections
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|seed| {
            let (store, commits, stop, kept_from, starting) =
                (store.clone(), commits.clone(), stop.clone(), kept_from.clone(), starting.clone());
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed);
                let (mut full, mut refused) = (0, 0);
                while !stop.load(Ordering::Acquire) {
                    let (position, pick) = {
                        let commits = commits.read();
                        if commits.is_empty() {
                            continue;
                        }
                        let i = rng.gen_range(0..commits.len());
                        (i, commits[i].clone())
                    };
                    let read = store.checkout(&pick.0).and_then(|tree| {
                        let tree = tree.expect("a commit the writer acknowledged exists");
                        check_tree(&tree, &pick.1).map_err(Error::Invalid)
                    });
                    let may_be_collected = || position < kept_from.load(Ordering::Acquire).max(starting.load(Ordering::Acquire));
                    match read {
                        Ok(()) => full += 1,
                        Err(e) if !may_be_collected() => panic!(
                            "kept commit {position} unreadable: {e} (kept from {}, starting {}, {} commits, chunks {:?})",
                            kept_from.load(Ordering::Acquire),
                            starting.load(Ordering::Acquire),
                            commits.read().len(),
                            store.info().chunks.first()
                        ),
                        Err(Error::Collected { .. } | Error::CollectedCommit(_)) => refused += 1,
                        // A subtree collected while this reader walked its tree.
                        Err(Error::Invalid(e)) if e.contains("was garbage-collected") => refused += 1,
                        Err(e) => panic!("a reader saw {e}"),
                    }
                }
                (full, refused)
            })
        })
        .collect();

    writer.join().unwrap();
    stop.store(true, Ordering::Release);
    let collections = collector.join().unwrap();
    for reader in readers {
        let (full, _refused) = reader.join().unwrap();
        assert!(full > 0);
    }
    assert!(collections > 3, "only {collections} collections ran");
    store.wait_gc().unwrap();
    let keep = kept_from.load(Ordering::Acquire);
    let check = |store: &Store| {
        for (i, (hash, model)) in commits.read().iter().enumerate().skip(keep) {
            let tree = store.checkout(hash).unwrap().unwrap_or_else(|| panic!("commit {i} lost"));
            check_tree(&tree, model).unwrap_or_else(|e| panic!("commit {i}: {e}"));
        }
    };
    check(&store);
    drop(store);
    check(&Store::open_storage(Arc::new(storage), options()).unwrap());
}
