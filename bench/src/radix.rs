//! RChain's RadixHistory measurements reproduced on pando: insert, read and
//! delete of N random records in one batch (one commit), from an empty store
//! and from a store already holding N records; time and size per row,
//! beside the published figures (Ryzen 7 3700U, LMDB).

use pando_core::Hash;
use pando_store::{CommitMeta, Options, Store, Tree};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::Path;
use std::time::Instant;

/// Published: records, insert / read / delete seconds (into an empty store).
const PUBLISHED: [(usize, f64, f64, f64); 4] = [
    (100_000, 0.758, 0.788, 0.45),
    (200_000, 1.629, 1.627, 0.793),
    (400_000, 3.297, 3.319, 2.022),
    (800_000, 6.263, 6.519, 4.611),
];

fn records(rng: &mut ChaCha8Rng, n: usize) -> Vec<([u8; 32], [u8; 32])> {
    (0..n).map(|_| (rng.r#gen(), rng.r#gen())).collect()
}

pub fn run(out: &Path) -> anyhow::Result<()> {
    println!("RadixHistory (RChain) on pando: N random 32-byte keys with 32-byte values, one commit per batch");
    println!(
        "{:>8} {:>9} | {:>9} {:>9} {:>9} {:>10} | {:>9} {:>9} {:>9}",
        "records", "prefilled", "insert s", "read s", "delete s", "pack size", "RChain in", "RChain rd", "RChain del"
    );
    for (n, published_insert, published_read, published_delete) in PUBLISHED {
        for prefilled in [0, n] {
            let dir = out.join(format!("radix-{n}-{prefilled}"));
            let _ = std::fs::remove_dir_all(&dir);
            let store = Store::open(&dir, Options::default())?;
            let mut rng = ChaCha8Rng::seed_from_u64(n as u64);
            let mut head: Vec<Hash> = Vec::new();
            if prefilled > 0 {
                let mut tree = store.empty_tree();
                for (k, v) in records(&mut rng, prefilled) {
                    tree.add_mut(&[&k[..]], &v)?;
                }
                head = vec![store.commit(&tree, CommitMeta { parents: &[], date: 0, author: "bench", message: "prefill" })?];
            }
            let base: Tree = match head.first() {
                Some(h) => store.checkout(h)?.expect("just committed"),
                None => store.empty_tree(),
            };
            let batch = records(&mut rng, n);
            let before = store.pack_bytes();

            let start = Instant::now();
            let mut tree = base;
            for (k, v) in &batch {
                tree.add_mut(&[&k[..]], v)?;
            }
            let inserted = store.commit(&tree, CommitMeta { parents: &head, date: 1, author: "bench", message: "insert" })?;
            let insert_s = start.elapsed().as_secs_f64();
            let size = store.pack_bytes() - before;

            let start = Instant::now();
            let tree = store.checkout(&inserted)?.expect("just committed");
            for (k, _) in &batch {
                anyhow::ensure!(tree.find(&[&k[..]])?.is_some(), "a record was not read back");
            }
            let read_s = start.elapsed().as_secs_f64();

            let start = Instant::now();
            let mut tree = tree;
            for (k, _) in &batch {
                tree.remove_mut(&[&k[..]])?;
            }
            store.commit(&tree, CommitMeta { parents: &[inserted], date: 2, author: "bench", message: "delete" })?;
            let delete_s = start.elapsed().as_secs_f64();
            drop(store);
            let _ = std::fs::remove_dir_all(&dir);

            let published = if prefilled == 0 {
                format!("{published_insert:>9.3} {published_read:>9.3} {published_delete:>9.3}")
            } else {
                format!("{:>9} {:>9} {:>9}", "-", "-", "-")
            };
            println!(
                "{n:>8} {prefilled:>9} | {insert_s:>9.3} {read_s:>9.3} {delete_s:>9.3} {:>8.1}MB | {published}",
                size as f64 / 1e6
            );
        }
    }
    println!("RChain, in memory: 800,000 records took 53.3 MB serialized.");
    Ok(())
}
