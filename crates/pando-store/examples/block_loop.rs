//! A quick block loop: the workload of irmin 3.7.2's row in the block
//! loop's table of docs/MEASUREMENTS.md (blocks of 1,000 writes and 2,000
//! reads over 200,000 accounts, a durable commit per block), for a first
//! look at where the time goes. The replay of generated traces (`pando
//! replay`) is the real benchmark.
//!
//! `cargo run --release -p pando-store --example block_loop -- [DIR] [BLOCKS]`
//! (`PANDO_CACHE_MB` sets the cache budget, 512 by default, and
//! `PANDO_READ_CACHE_MB` the flat read cache's, 64 by default, 0 to turn it
//! off; the caches' entries and weights are printed at the end;
//! `PANDO_SYNC=pipelined` syncs each commit on a second thread,
//! `SyncPolicy::Pipelined`, and `PANDO_SYNC=never` not at all).

use pando_store::{CommitMeta, Options, Store, SyncPolicy};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use std::time::Instant;

/// A 22-byte address as 44 hex digits, spread like real ones.
fn account(i: u32) -> Vec<u8> {
    let a = u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let b = a.rotate_left(29).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let c = b.rotate_left(17).wrapping_mul(0x94d0_49bb_1331_11eb);
    format!("{a:016x}{b:016x}{:012x}", c >> 16).into_bytes()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args.get(1).cloned().unwrap_or_else(|| "/tmp/pando-block-loop".into());
    let blocks: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(200);
    let _ = std::fs::remove_dir_all(&dir);
    let cache_mb: u64 = std::env::var("PANDO_CACHE_MB").ok().and_then(|s| s.parse().ok()).unwrap_or(512);
    let sync = match std::env::var("PANDO_SYNC").as_deref() {
        Ok("pipelined") => SyncPolicy::Pipelined,
        Ok("never") => SyncPolicy::Never,
        _ => SyncPolicy::EveryCommit,
    };
    let read_cache_mb: u64 = std::env::var("PANDO_READ_CACHE_MB").ok().and_then(|s| s.parse().ok()).unwrap_or(64);
    let options = Options { cache_bytes: cache_mb << 20, read_cache_bytes: read_cache_mb << 20, sync, ..Options::default() };
    let store = Store::open(&dir, options).unwrap();
    let accounts = 200_000u32;
    let mut rng = SmallRng::seed_from_u64(1);

    let t = Instant::now();
    let mut tree = store.empty_tree();
    for i in 0..accounts {
        tree.add_mut(&[b"contracts".as_slice(), b"index", &account(i), b"balance"], &rng.r#gen::<u32>().to_be_bytes()).unwrap();
    }
    let mut head = store.commit(&tree, CommitMeta { parents: &[], date: 0, author: "Tezos", message: "genesis" }).unwrap();
    // Dropped once committed, as a node drops each block's tree: a tree
    // still held shares its inodes with the kept tree, so that the
    // blocks' updates copy them instead of changing them in place.
    drop(tree);
    eprintln!("genesis: {accounts} accounts in {:.2?}", t.elapsed());
    let genesis_bytes = store.pack_bytes();

    let mut times = Vec::new();
    let (mut t_read, mut t_write, mut t_commit) = (0.0, 0.0, 0.0);
    let start = Instant::now();
    for b in 0..blocks {
        let block = Instant::now();
        let mut tree = store.checkout(&head).unwrap().unwrap();
        // The keys are made before the reads and the writes are timed, as
        // for the warm finds below: the times are the store's.
        let reads: Vec<Vec<u8>> = (0..2000).map(|_| account(rng.gen_range(0..accounts))).collect();
        let writes: Vec<(Vec<u8>, [u8; 4])> =
            (0..1000).map(|_| (account(rng.gen_range(0..accounts)), rng.r#gen::<u32>().to_be_bytes())).collect();
        let t0 = Instant::now();
        for key in &reads {
            let v = tree.find(&[b"contracts".as_slice(), b"index", key, b"balance"]).unwrap();
            assert!(v.is_some());
        }
        let t1 = Instant::now();
        for (key, value) in &writes {
            tree.add_mut(&[b"contracts".as_slice(), b"index", key, b"balance"], value).unwrap();
        }
        let t2 = Instant::now();
        head =
            store.commit(&tree, CommitMeta { parents: &[head], date: i64::from(b), author: "Tezos", message: "block" }).unwrap();
        let t3 = Instant::now();
        t_read += (t1 - t0).as_secs_f64();
        t_write += (t2 - t1).as_secs_f64();
        t_commit += (t3 - t2).as_secs_f64();
        times.push(block.elapsed().as_secs_f64());
    }
    let total = start.elapsed().as_secs_f64();
    // Reads alone: the cost of one find on the tree of the last commit
    // (the first pass reads from disk what the kept tree and the cache do
    // not hold), then of the same finds again (all in memory).
    let tree = store.checkout(&head).unwrap().unwrap();
    let keys: Vec<Vec<u8>> = (0..200_000).map(|_| account(rng.gen_range(0..accounts))).collect();
    for pass in ["warm find", "the same finds again"] {
        let t = Instant::now();
        for key in &keys {
            assert!(tree.find(&[b"contracts".as_slice(), b"index", key, b"balance"]).unwrap().is_some());
        }
        eprintln!("{pass}: {:.2} us", t.elapsed().as_secs_f64() * 1e6 / keys.len() as f64);
    }
    let stats = store.info();
    let resident = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| status.lines().find(|l| l.starts_with("VmRSS:")).map(|l| l[6..].trim().to_string()))
        .unwrap_or_default();
    eprintln!(
        "cache: {} entries, {:.1} MB weighed; flat read cache: {} entries, {:.1} MB; pack {:.1} MB; resident now {resident}",
        stats.cache_entries,
        stats.cache_bytes as f64 / 1e6,
        stats.read_cache_entries,
        stats.read_cache_bytes as f64 / 1e6,
        stats.pack_bytes as f64 / 1e6
    );
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = f64::from(blocks);
    println!(
        "{blocks} blocks: {:.1} blocks/s, mean {:.2} ms (reads {:.2}, writes {:.2}, commit {:.2}), p99 {:.2} ms, {:.0} bytes written per block",
        n / total,
        1e3 * total / n,
        1e3 * t_read / n,
        1e3 * t_write / n,
        1e3 * t_commit / n,
        1e3 * times[(times.len() * 99 / 100).min(times.len() - 1)],
        (store.pack_bytes() - genesis_bytes) as f64 / n,
    );
}
