//! A bounded cache of decoded records, keyed by pack offset.
//!
//! Invariants:
//! - Its memory is bounded by the byte budget given in the options, whatever
//!   the size of the store (each entry is weighed by [`cache_weight`](crate::node::cache_weight)).
//! - Cached inodes point to their children by offset only (never to
//!   in-memory children), so an entry never keeps other nodes alive.

use quick_cache::Weighter;
use quick_cache::sync::Cache;
use std::sync::Arc;

use crate::node::{ENTRY_OVERHEAD, Inode, Value, cache_weight};

/// A cached record with its weight, computed once.
#[derive(Clone)]
pub enum Cached {
    Inode(Arc<Inode>, u32),
    Blob(Arc<Value>),
}

impl Cached {
    pub fn inode(inode: Arc<Inode>) -> Cached {
        let weight = u32::try_from(cache_weight(&inode)).unwrap_or(u32::MAX);
        Cached::Inode(inode, weight)
    }

    /// Approximate bytes of memory held.
    pub fn weight(&self) -> u64 {
        match self {
            Cached::Inode(_, weight) => u64::from(*weight),
            Cached::Blob(value) => value.weight() + ENTRY_OVERHEAD,
        }
    }
}

#[derive(Clone)]
pub struct ByWeight;

impl Weighter<u64, Cached> for ByWeight {
    fn weight(&self, _offset: &u64, value: &Cached) -> u64 {
        value.weight()
    }
}

pub struct NodeCache {
    cache: Cache<u64, Cached, ByWeight>,
}

impl NodeCache {
    pub fn new(capacity_bytes: u64) -> NodeCache {
        let estimated_items = (capacity_bytes / 512).max(16) as usize;
        NodeCache { cache: Cache::with_weighter(estimated_items, capacity_bytes.max(1), ByWeight) }
    }

    pub fn get(&self, offset: u64) -> Option<Cached> {
        self.cache.get(&offset)
    }

    /// Lookups so far that found their node, and that did not (counted by
    /// the cache per shard, so readers on other cores share no counter).
    pub fn hits_and_misses(&self) -> (u64, u64) {
        (self.cache.hits(), self.cache.misses())
    }

    /// Takes the node at `offset` out of the cache.
    pub fn remove(&self, offset: u64) -> Option<Cached> {
        self.cache.remove(&offset).map(|(_, value)| value)
    }

    pub fn insert(&self, offset: u64, value: Cached) {
        self.cache.insert(offset, value);
    }

    pub fn weight_bytes(&self) -> u64 {
        self.cache.weight()
    }

    #[allow(clippy::len_without_is_empty, reason = "a count for tests and reports; no caller asks for emptiness")]
    pub fn len(&self) -> usize {
        self.cache.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{Loader, NoLoader, empty, value_child};

    /// An entry is weighed with everything it costs (the allocations and the
    /// cache's own entry), not by the trie's size of the node alone.
    #[test]
    fn an_inode_is_weighed_with_its_overhead() {
        let mut root = empty();
        pando_core::dir::set(&mut root, 0, b"balance", value_child(b"12"), &NoLoader as &dyn Loader).unwrap();
        let cached = Cached::inode(root.clone());
        assert_eq!(cached.weight(), cache_weight(&root));
        assert_eq!(cached.weight(), Inode::weight(&root) as u64 + ENTRY_OVERHEAD);
    }
}
