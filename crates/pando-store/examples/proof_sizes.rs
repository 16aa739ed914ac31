//! Proof sizes: Merkle proofs of 1, 10, 100 and 1,000 random keys of a
//! store's last commit, in Octez's `V1.Tree32` encoding, with the time to
//! produce and to verify each. The keys are drawn uniformly (reservoir
//! sampling over the whole tree) with a fixed seed; each set contains the
//! previous one.
//!
//! Two computations per set: reading every key (a keys proof, as
//! `pando prove` writes), and reading then updating every key (as a block
//! does, the proof then also shows what hashing the new tree needs).
//!
//! Then the shape of irmin's own measurement (`test_large_proofs` of irmin
//! PR #1825): one flat directory of 100,000 entries named by 40 hex digits
//! (irmin's test store hashes with SHA-1), 10-byte values, proofs of reading
//! the first n of them. irmin's blinded hashes are 20 bytes, Tezos's 32.
//!
//! `cargo run --release -p pando-store --example proof_sizes -- STORE [SEED]`

use pando_core::proof::encoding::encode;
use pando_core::proof::keys::read_paths;
use pando_core::proof::verify_tree_proof;
use pando_store::io::MemStorage;
use pando_store::{CommitMeta, Hash, Kind, Options, Order, Store, SyncPolicy};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use std::sync::Arc;
use std::time::Instant;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SETS: [usize; 4] = [1, 10, 100, 1000];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args.get(1).expect("usage: proof_sizes STORE [SEED]");
    let seed: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let store = Store::open(dir, Options { read_only: true, ..Options::default() }).unwrap();
    let commit = store.last_commit().unwrap().expect("a store with commits");
    let tree = store.checkout(&commit).unwrap().unwrap();

    // Reservoir sampling of 1,000 contents paths.
    let t = Instant::now();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut sample: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut seen = 0u64;
    tree.fold::<&[u8]>(&[], None, Order::Undefined, &mut |key, sub| {
        if sub.kind() == Kind::Contents {
            seen += 1;
            if sample.len() < 1000 {
                sample.push(key.to_vec());
            } else {
                let j = rng.gen_range(0..seen);
                if (j as usize) < sample.len() {
                    sample[j as usize] = key.to_vec();
                }
            }
        }
        Ok(())
    })
    .unwrap();
    println!("commit {commit}: {seen} contents; sampled {} keys in {:.1?}", sample.len(), t.elapsed());
    println!();
    println!("| keys | computation | proof bytes | bytes per key | produce | verify |");
    println!("|---:|---|---:|---:|---:|---:|");
    for n in SETS {
        let paths = &sample[..n.min(sample.len())];
        for (name, update) in [("read", false), ("read + write", true)] {
            let f = |t: &mut pando_core::proof::PartialTree<'_>| {
                let values = read_paths(t, paths)?;
                if update {
                    for path in paths {
                        t.add(path, b"updated")?;
                    }
                }
                Ok(values)
            };
            let start = Instant::now();
            let (proof, values) = store.produce_tree_proof(&commit, f).unwrap();
            let produce = start.elapsed();
            let bytes = encode(&proof).unwrap();
            let start = Instant::now();
            let decoded = pando_core::proof::encoding::decode(&bytes).unwrap();
            let (_, verified) = verify_tree_proof(&decoded, f).unwrap();
            let verify = start.elapsed();
            assert_eq!(verified, values);
            assert!(values.iter().all(|held| matches!(held, pando_core::proof::keys::Found::Value(_))));
            println!("| {n} | {name} | {} | {} | {:.1?} | {:.1?} |", bytes.len(), bytes.len() / paths.len(), produce, verify);
        }
    }

    irmin_setup();
}

/// irmin's `test_large_proofs`: 100,000 entries in one directory.
fn irmin_setup() {
    let options = Options { sync: SyncPolicy::Never, ..Options::default() };
    let store = Store::open_storage(Arc::new(MemStorage::new()), options).unwrap();
    let mut tree = store.empty_tree();
    let keys: Vec<Vec<u8>> =
        (0..100_000u32).map(|i| Hash::of_bytes(&i.to_le_bytes()).to_hex().as_bytes()[..40].to_vec()).collect();
    for key in &keys {
        tree.add_mut(&[key.as_slice()], b"0000000000").unwrap();
    }
    let commit = store.commit(&tree, CommitMeta { parents: &[], date: 0, author: "pando", message: "irmin setup" }).unwrap();
    println!();
    println!("irmin's setup: one directory of {} entries", keys.len());
    println!();
    println!("| reads | proof bytes | bytes per read |");
    println!("|---:|---:|---:|");
    for n in [1usize, 100, 1000, 10_000] {
        let paths: Vec<Vec<Vec<u8>>> = keys[..n].iter().map(|k| vec![k.clone()]).collect();
        let (proof, _) = store.produce_tree_proof(&commit, |t| read_paths(t, &paths)).unwrap();
        let bytes = encode(&proof).unwrap().len();
        println!("| {n} | {bytes} | {} |", bytes / n);
    }
}
