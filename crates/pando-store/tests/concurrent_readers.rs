//! Many reader threads read any stored commit while one writer commits.

use pando_core::Hash;
use pando_store::{CommitMeta, Options, Store};
use parking_lot::RwLock;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[test]
fn readers_see_every_commit_while_the_writer_commits() {
    let dir = tempfile::tempdir().unwrap();
    // A small cache so readers also go to disk.
    let options = Options { cache_bytes: 256 << 10, chunk_target_bytes: 512 << 10, ..Options::default() };
    let store = Arc::new(Store::open(dir.path(), options).unwrap());
    let commits: Arc<RwLock<Vec<(u64, Hash)>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));

    let readers: Vec<_> = (0..3)
        .map(|seed| {
            let (store, commits, done, reads) = (store.clone(), commits.clone(), done.clone(), reads.clone());
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed);
                while !done.load(Ordering::Acquire) {
                    let Some((n, hash)) = ({
                        let commits = commits.read();
                        (!commits.is_empty()).then(|| commits[rng.gen_range(0..commits.len())])
                    }) else {
                        std::thread::yield_now();
                        continue;
                    };
                    let tree = store.checkout(&hash).unwrap().expect("a published commit exists");
                    assert_eq!(tree.find(&["last"]).unwrap().unwrap(), n.to_be_bytes());
                    let key = format!("{:03}", n % 300);
                    assert_eq!(tree.find(&["accounts", &key]).unwrap().unwrap(), n.to_be_bytes());
                    assert_eq!(tree.length(&["accounts"]).unwrap(), (n + 1).min(300));
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();

    let mut tree = store.empty_tree();
    let mut parent = Vec::new();
    for n in 0..400u64 {
        tree.add_mut(&["last"], &n.to_be_bytes()).unwrap();
        tree.add_mut(&["accounts", &format!("{:03}", n % 300)], &n.to_be_bytes()).unwrap();
        let hash = store.commit(&tree, CommitMeta { parents: &parent, date: n as i64, author: "Tezos", message: "" }).unwrap();
        parent = vec![hash];
        commits.write().push((n, hash));
        tree = store.checkout(&hash).unwrap().unwrap();
    }
    done.store(true, Ordering::Release);
    for reader in readers {
        reader.join().unwrap();
    }
    assert!(reads.load(Ordering::Relaxed) > 100, "readers ran alongside the writer");
}
