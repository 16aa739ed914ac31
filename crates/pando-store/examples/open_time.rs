//! Measures how long opening a store with many commits takes: builds a store
//! of N small commits (without fsync per commit, to build it quickly), closes
//! it, then times `Store::open` (read-write and read-only).
//!
//! `cargo run --release -p pando-store --example open_time -- [DIR] [COMMITS]`

use pando_store::{CommitMeta, Options, Store, SyncPolicy};
use std::time::Instant;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args.get(1).cloned().unwrap_or_else(|| "/tmp/pando-open-time".into());
    let commits: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let _ = std::fs::remove_dir_all(&dir);
    let t = Instant::now();
    {
        let store = Store::open(&dir, Options { sync: SyncPolicy::Never, ..Options::default() }).unwrap();
        let mut tree = store.empty_tree();
        let mut parent = Vec::new();
        for n in 0..commits {
            tree.add_mut(&["counter"], &n.to_be_bytes()).unwrap();
            let hash =
                store.commit(&tree, CommitMeta { parents: &parent, date: n as i64, author: "Tezos", message: "" }).unwrap();
            parent = vec![hash];
        }
        store.close().unwrap();
    }
    eprintln!("built {commits} commits in {:.1?}", t.elapsed());
    for read_only in [false, true] {
        let t = Instant::now();
        let store = Store::open(&dir, Options { read_only, ..Options::default() }).unwrap();
        let elapsed = t.elapsed();
        assert_eq!(store.commit_count(), commits);
        println!(
            "open ({}) of a store with {commits} commits: {elapsed:.1?}",
            if read_only { "read-only" } else { "read-write" }
        );
    }
}
