//! Workloads as blocks of flat key-value operations, the form the peers
//! without directories take (bench/README.md): a Tezos-like trace with each path
//! joined by `/`, or the peer-native random workload.
//!
//! Invariant: every backend receives exactly the same blocks.

use pando_core::trace::{Key, Row};
use pando_trace::TraceReader;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Clone, Debug)]
pub enum Op {
    Read(Vec<u8>),
    /// A write; `None` deletes the key.
    Write(Vec<u8>, Option<Vec<u8>>),
}

pub type Block = Vec<Op>;

fn join(key: &Key) -> Vec<u8> {
    key.join(&b'/')
}

/// Converts a linear trace into flat blocks. Subtree removals and copies
/// become explicit deletes and writes of every key below the path, found
/// in a model of the current keys.
#[derive(Default)]
pub struct Flattener {
    model: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Flattener {
    fn below(&self, prefix: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut start = prefix.to_vec();
        start.push(b'/');
        let mut out: Vec<(Vec<u8>, Vec<u8>)> = self
            .model
            .range(start.clone()..)
            .take_while(|(k, _)| k.starts_with(&start))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(v) = self.model.get(prefix) {
            out.push((prefix.to_vec(), v.clone()));
        }
        out
    }

    /// Adds a row to `block`; returns true when the row ends the block.
    pub fn push(&mut self, row: &Row, block: &mut Block) -> bool {
        match row {
            Row::Checkout { .. } => {}
            Row::Add { key, value, .. } => {
                let k = join(key);
                self.model.insert(k.clone(), value.clone());
                block.push(Op::Write(k, Some(value.clone())));
            }
            Row::Remove { key, .. } => {
                for (k, _) in self.below(&join(key)) {
                    self.model.remove(&k);
                    block.push(Op::Write(k, None));
                }
            }
            Row::Copy { source, target, .. } => {
                let (source, target) = (join(source), join(target));
                for (k, v) in self.below(&source) {
                    let mut new = target.clone();
                    new.extend_from_slice(&k[source.len()..]);
                    self.model.insert(new.clone(), v.clone());
                    block.push(Op::Write(new, Some(v)));
                }
            }
            Row::Find { key, .. } | Row::Mem { key, .. } | Row::MemTree { key, .. } => block.push(Op::Read(join(key))),
            Row::Commit { .. } => return true,
        }
        false
    }
}

/// Where a flat backend's blocks come from, one block at a time (a
/// `medium` trace flattened is gigabytes: it is never held whole).
pub enum Blocks {
    Trace { rows: TraceReader, flattener: Flattener },
    Random(Box<RandomWorkload>),
}

impl Blocks {
    pub fn trace(path: &Path) -> anyhow::Result<Blocks> {
        Ok(Blocks::Trace { rows: TraceReader::open(path)?, flattener: Flattener::default() })
    }

    /// The next measured block, or `None` at the end of a trace.
    pub fn next_block(&mut self) -> anyhow::Result<Option<Block>> {
        match self {
            Blocks::Trace { rows, flattener } => {
                let mut block = Vec::new();
                for row in rows {
                    if flattener.push(&row?, &mut block) {
                        return Ok(Some(block));
                    }
                }
                Ok(None)
            }
            Blocks::Random(random) => Ok(Some(random.next_block())),
        }
    }
}

/// The peer-native workload (NOMT's and Firewood's benchmarks): random
/// 32-byte keys and values; loading blocks write `existing` keys, then each
/// block makes `updates` writes (80% to existing keys, 20% new keys) and
/// reads 20% as many existing keys.
pub struct RandomWorkload {
    rng: ChaCha8Rng,
    keys: Vec<[u8; 32]>,
    pub existing: usize,
    pub updates: usize,
}

impl RandomWorkload {
    pub fn new(seed: u64, existing: usize, updates: usize) -> RandomWorkload {
        RandomWorkload { rng: ChaCha8Rng::seed_from_u64(seed), keys: Vec::with_capacity(existing), existing, updates }
    }

    fn new_key(&mut self) -> [u8; 32] {
        let key: [u8; 32] = self.rng.r#gen();
        self.keys.push(key);
        key
    }

    /// The next loading block (`batch` new keys) until `existing` keys exist.
    pub fn load_block(&mut self, batch: usize) -> Option<Block> {
        let n = batch.min(self.existing - self.keys.len());
        (n > 0).then(|| (0..n).map(|_| Op::Write(self.new_key().to_vec(), Some(self.rng.r#gen::<[u8; 32]>().to_vec()))).collect())
    }

    pub fn next_block(&mut self) -> Block {
        let mut block = Vec::with_capacity(self.updates + self.updates / 4);
        for _ in 0..self.updates / 5 {
            let key = self.keys[self.rng.gen_range(0..self.keys.len())];
            block.push(Op::Read(key.to_vec()));
        }
        for i in 0..self.updates {
            let key = if i % 5 == 4 { self.new_key() } else { self.keys[self.rng.gen_range(0..self.keys.len())] };
            block.push(Op::Write(key.to_vec(), Some(self.rng.r#gen::<[u8; 32]>().to_vec())));
        }
        block
    }
}
