//! One trait for every store under test, and its implementations.
//!
//! A backend applies a block of flat operations and commits it durably
//! (the commit is on disk when `apply` returns), reporting how long the
//! commit itself took.

use anyhow::Context;
use nomt::hasher::Blake3Hasher;
use nomt::{KeyReadWrite, Nomt, SessionParams};
use pando_core::Hash;
use pando_store::{CommitMeta, Options, Store, Tree};
use redb::ReadableTable;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::workload::{Block, Op};

pub trait Backend {
    /// Applies the block's reads and writes and commits durably; returns
    /// the time of the commit alone.
    fn apply(&mut self, block: &Block) -> anyhow::Result<Duration>;
    /// Bytes the store occupies on disk.
    fn disk_bytes(&self) -> u64;
    /// For a store in another process: its bytes written and peak RSS,
    /// which replace this process's figures.
    fn process_figures(&self) -> Option<(u64, u64)> {
        None
    }
    /// pando's count of its system calls and their time.
    fn io_times(&self) -> Option<pando_store::io::IoTimes> {
        None
    }
}

/// Bytes allocated on disk by every file below `dir` (not the apparent
/// size: NOMT preallocates a sparse hash table).
pub fn dir_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// pando with flat keys: one directory whose entries are the joined paths.
pub struct PandoFlat {
    dir: PathBuf,
    store: Store,
    head: Option<Hash>,
    block: i64,
}

impl PandoFlat {
    pub fn open(dir: &Path) -> anyhow::Result<PandoFlat> {
        Ok(PandoFlat { dir: dir.to_path_buf(), store: Store::open(dir, Options::default())?, head: None, block: 0 })
    }
}

impl Backend for PandoFlat {
    fn apply(&mut self, block: &Block) -> anyhow::Result<Duration> {
        let mut tree: Tree = match self.head {
            Some(h) => self.store.checkout(&h)?.context("head commit")?,
            None => self.store.empty_tree(),
        };
        for op in block {
            match op {
                Op::Read(key) => {
                    tree.find(&[key])?;
                }
                Op::Write(key, Some(value)) => tree.add_mut(&[key], value)?,
                Op::Write(key, None) => tree.remove_mut(&[key])?,
            }
        }
        let start = Instant::now();
        let parents: Vec<Hash> = self.head.into_iter().collect();
        self.head =
            Some(self.store.commit(&tree, CommitMeta { parents: &parents, date: self.block, author: "bench", message: "" })?);
        self.block += 1;
        Ok(start.elapsed())
    }

    fn disk_bytes(&self) -> u64 {
        dir_bytes(&self.dir)
    }
    fn io_times(&self) -> Option<pando_store::io::IoTimes> {
        self.store.io_times()
    }
}

/// NOMT: keys hashed to 32 bytes with BLAKE2b-256, as it requires.
pub struct NomtBackend {
    dir: PathBuf,
    nomt: Nomt<Blake3Hasher>,
}

fn key_path(key: &[u8]) -> [u8; 32] {
    if key.len() == 32 { key.try_into().expect("32 bytes") } else { *Hash::of_bytes(key).as_bytes() }
}

impl NomtBackend {
    pub fn open(dir: &Path, buckets: u32) -> anyhow::Result<NomtBackend> {
        let mut options = nomt::Options::new();
        options.path(dir);
        options.commit_concurrency(1);
        options.hashtable_buckets(buckets);
        Ok(NomtBackend { dir: dir.to_path_buf(), nomt: Nomt::open(options)? })
    }
}

impl Backend for NomtBackend {
    fn apply(&mut self, block: &Block) -> anyhow::Result<Duration> {
        let session = self.nomt.begin_session(SessionParams::default());
        let mut actuals: BTreeMap<[u8; 32], KeyReadWrite> = BTreeMap::new();
        let mut written: HashMap<[u8; 32], Option<Vec<u8>>> = HashMap::new();
        for op in block {
            match op {
                Op::Read(key) => {
                    let path = key_path(key);
                    // Reads see the block's own writes first.
                    if !written.contains_key(&path) {
                        let value = session.read(path)?;
                        actuals.entry(path).or_insert(KeyReadWrite::Read(value));
                    }
                }
                Op::Write(key, value) => {
                    let path = key_path(key);
                    written.insert(path, value.clone());
                    match actuals.get_mut(&path) {
                        Some(slot) => slot.write(value.clone()),
                        None => {
                            actuals.insert(path, KeyReadWrite::Write(value.clone()));
                        }
                    }
                }
            }
        }
        let start = Instant::now();
        let finished = session.finish(actuals.into_iter().collect())?;
        finished.commit(&self.nomt)?;
        Ok(start.elapsed())
    }

    fn disk_bytes(&self) -> u64 {
        dir_bytes(&self.dir)
    }
}

const REDB_TABLE: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("kv");

/// redb: a plain key-value store (no Merkle tree), the upper bound.
pub struct RedbBackend {
    path: PathBuf,
    db: redb::Database,
}

impl RedbBackend {
    pub fn open(dir: &Path) -> anyhow::Result<RedbBackend> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("redb");
        Ok(RedbBackend { db: redb::Database::create(&path)?, path })
    }
}

impl Backend for RedbBackend {
    fn apply(&mut self, block: &Block) -> anyhow::Result<Duration> {
        let txn = self.db.begin_write()?;
        {
            let mut table = txn.open_table(REDB_TABLE)?;
            for op in block {
                match op {
                    Op::Read(key) => {
                        let _ = table.get(key.as_slice())?;
                    }
                    Op::Write(key, Some(value)) => {
                        table.insert(key.as_slice(), value.as_slice())?;
                    }
                    Op::Write(key, None) => {
                        table.remove(key.as_slice())?;
                    }
                }
            }
        }
        let start = Instant::now();
        // Durability::Immediate is redb's default: fsynced on commit.
        txn.commit()?;
        Ok(start.elapsed())
    }

    fn disk_bytes(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&self.path).map(|m| m.blocks() * 512).unwrap_or(0)
    }
}
