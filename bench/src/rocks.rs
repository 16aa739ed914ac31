//! RocksDB-based backends: the Jellyfish Merkle Tree (crate `jmt`) over a
//! real RocksDB, pruning stale nodes after each commit as its users do, and
//! plain RocksDB (no Merkle tree) as the upper bound of a non-authenticated
//! store. Both write each block in one synced `WriteBatch`.
//!
//! JMT key layout in the one column family:
//! - `n ‖ borsh(NodeKey)` → `borsh(Node)`;
//! - `v ‖ key_hash ‖ !version (BE)` → `0` (deleted) or `1 ‖ value`, so the
//!   first entry at or after `v ‖ key_hash ‖ !max_version` is the newest
//!   version at most `max_version`;
//! - `s ‖ stale_since (BE) ‖ borsh(NodeKey)` → empty: the pruning index.

use anyhow::Context;
use borsh::{BorshDeserialize, BorshSerialize};
use jmt::storage::{LeafNode, Node, NodeBatch, NodeKey, TreeReader, TreeWriter};
use jmt::{KeyHash, OwnedValue, Sha256Jmt, Version};
use rocksdb::{DB, Direction, IteratorMode, WriteBatch, WriteOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::backend::{Backend, dir_bytes};
use crate::workload::{Block, Op};

/// Versions whose stale nodes are kept before pruning (the tree can be read
/// at the last `KEEP_VERSIONS` versions).
const KEEP_VERSIONS: u64 = 2;

fn synced() -> WriteOptions {
    let mut options = WriteOptions::default();
    options.set_sync(true);
    options
}

fn open_db(dir: &Path) -> anyhow::Result<DB> {
    let mut options = rocksdb::Options::default();
    options.create_if_missing(true);
    Ok(DB::open(&options, dir)?)
}

struct JmtStore {
    db: DB,
}

fn node_key_bytes(key: &NodeKey) -> Vec<u8> {
    let mut out = vec![b'n'];
    key.serialize(&mut out).expect("writing to a Vec cannot fail");
    out
}

fn value_key(key_hash: KeyHash, version: Version) -> Vec<u8> {
    let mut out = Vec::with_capacity(41);
    out.push(b'v');
    out.extend_from_slice(&key_hash.0);
    out.extend_from_slice(&(!version).to_be_bytes());
    out
}

impl TreeReader for JmtStore {
    fn get_node_option(&self, node_key: &NodeKey) -> anyhow::Result<Option<Node>> {
        match self.db.get(node_key_bytes(node_key))? {
            Some(bytes) => Ok(Some(Node::try_from_slice(&bytes)?)),
            None => Ok(None),
        }
    }

    fn get_value_option(&self, max_version: Version, key_hash: KeyHash) -> anyhow::Result<Option<OwnedValue>> {
        let start = value_key(key_hash, max_version);
        let mut iter = self.db.iterator(IteratorMode::From(&start, Direction::Forward));
        match iter.next() {
            Some(item) => {
                let (key, value) = item?;
                if key.len() != 41 || key[1..33] != key_hash.0 {
                    return Ok(None);
                }
                Ok(match value.first() {
                    Some(1) => Some(value[1..].to_vec()),
                    _ => None,
                })
            }
            None => Ok(None),
        }
    }

    fn get_rightmost_leaf(&self) -> anyhow::Result<Option<(NodeKey, LeafNode)>> {
        // Only used to restore a tree from a snapshot, which this benchmark never does.
        Ok(None)
    }
}

impl JmtStore {
    fn batch(&self, nodes: &NodeBatch, batch: &mut WriteBatch) {
        for (key, node) in nodes.nodes() {
            batch.put(node_key_bytes(key), borsh::to_vec(node).expect("writing to a Vec cannot fail"));
        }
        for ((version, key_hash), value) in nodes.values() {
            let encoded = match value {
                Some(v) => [&[1u8][..], v].concat(),
                None => vec![0],
            };
            batch.put(value_key(*key_hash, *version), encoded);
        }
    }
}

impl TreeWriter for JmtStore {
    fn write_node_batch(&self, node_batch: &NodeBatch) -> anyhow::Result<()> {
        let mut batch = WriteBatch::default();
        self.batch(node_batch, &mut batch);
        Ok(self.db.write_opt(batch, &synced())?)
    }
}

pub struct JmtBackend {
    dir: PathBuf,
    store: JmtStore,
    version: Version,
}

impl JmtBackend {
    pub fn open(dir: &Path) -> anyhow::Result<JmtBackend> {
        Ok(JmtBackend { dir: dir.to_path_buf(), store: JmtStore { db: open_db(dir)? }, version: 0 })
    }
}

fn key_hash(key: &[u8]) -> KeyHash {
    KeyHash::with::<sha2::Sha256>(key)
}

impl Backend for JmtBackend {
    fn apply(&mut self, block: &Block) -> anyhow::Result<Duration> {
        let tree = Sha256Jmt::new(&self.store);
        let mut writes: std::collections::BTreeMap<KeyHash, Option<OwnedValue>> = Default::default();
        for op in block {
            match op {
                Op::Read(key) => {
                    let hash = key_hash(key);
                    if !writes.contains_key(&hash) && self.version > 0 {
                        tree.get(hash, self.version - 1)?;
                    }
                }
                Op::Write(key, value) => {
                    writes.insert(key_hash(key), value.clone());
                }
            }
        }
        let start = Instant::now();
        let (_root, update) = tree.put_value_set(writes, self.version).context("jmt put_value_set")?;
        let mut batch = WriteBatch::default();
        self.store.batch(&update.node_batch, &mut batch);
        for stale in &update.stale_node_index_batch {
            let mut key = vec![b's'];
            key.extend_from_slice(&stale.stale_since_version.to_be_bytes());
            stale.node_key.serialize(&mut key)?;
            batch.put(key, []);
        }
        // Prune nodes that went stale more than KEEP_VERSIONS versions ago.
        if self.version >= KEEP_VERSIONS {
            let horizon = self.version - KEEP_VERSIONS;
            for item in self.store.db.iterator(IteratorMode::From(b"s", Direction::Forward)) {
                let (key, _) = item?;
                if key.first() != Some(&b's') || u64::from_be_bytes(key[1..9].try_into()?) > horizon {
                    break;
                }
                let mut node = vec![b'n'];
                node.extend_from_slice(&key[9..]);
                batch.delete(node);
                batch.delete(key);
            }
        }
        self.store.db.write_opt(batch, &synced())?;
        self.version += 1;
        Ok(start.elapsed())
    }

    fn disk_bytes(&self) -> u64 {
        dir_bytes(&self.dir)
    }
}

pub struct RocksBackend {
    dir: PathBuf,
    db: DB,
}

impl RocksBackend {
    pub fn open(dir: &Path) -> anyhow::Result<RocksBackend> {
        Ok(RocksBackend { dir: dir.to_path_buf(), db: open_db(dir)? })
    }
}

impl Backend for RocksBackend {
    fn apply(&mut self, block: &Block) -> anyhow::Result<Duration> {
        let mut batch = WriteBatch::default();
        let mut pending: std::collections::HashMap<&[u8], Option<&[u8]>> = Default::default();
        for op in block {
            match op {
                Op::Read(key) => {
                    if !pending.contains_key(key.as_slice()) {
                        self.db.get(key)?;
                    }
                }
                Op::Write(key, value) => {
                    pending.insert(key, value.as_deref());
                    match value {
                        Some(v) => batch.put(key, v),
                        None => batch.delete(key),
                    }
                }
            }
        }
        let start = Instant::now();
        self.db.write_opt(batch, &synced())?;
        Ok(start.elapsed())
    }

    fn disk_bytes(&self) -> u64 {
        dir_bytes(&self.dir)
    }
}
