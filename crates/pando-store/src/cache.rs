//! A bounded cache of decoded records, keyed by pack offset.
//!
//! Invariants:
//! - Its memory is bounded by the byte budget given in the options, whatever
//!   the size of the store (each entry is weighed by
//!   [`cache_weight`](crate::node::cache_weight); tested by
//!   `the_cache_stays_in_its_budget`).
//! - Cached inodes point to their children by offset only (never to
//!   in-memory children), so an entry never keeps other nodes alive
//!   (asserted in `Cached::inode`).

use quick_cache::Weighter;
use quick_cache::sync::Cache;
use std::sync::Arc;

use crate::node::{Body, Child, ENTRY_OVERHEAD, Inode, Leaf, Ptr, Value, cache_weight, child_pointers};

/// A cached record with its weight, computed once.
#[derive(Clone)]
pub enum Cached {
    Inode(Arc<Inode>, u32),
    Blob(Arc<Value>),
}

impl Cached {
    pub fn inode(inode: Arc<Inode>) -> Cached {
        debug_assert!(by_offset_only(&inode), "a cached inode points to its children by offset only");
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

/// Whether every inode and contents `inode` points to is on disk: none it
/// would keep in memory.
fn by_offset_only(inode: &Inode) -> bool {
    let contents_stored = match &inode.body {
        Body::Values(values) => values.children().all(|child| !matches!(child, Child::Contents(Leaf::Value(_) | Leaf::Staged(_)))),
        Body::Tree(_) => true,
    };
    contents_stored && child_pointers(inode).iter().all(|(ptr, _)| matches!(ptr, Ptr::Stored { .. }))
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

    /// However much is put in, the cache holds at most its budget (give or
    /// take a byte per shard, the budget split between them rounded up),
    /// each entry weighed with its contents.
    #[test]
    fn the_cache_stays_in_its_budget() {
        let budget = 64 << 10;
        let cache = NodeCache::new(budget);
        let mut inserted = 0;
        for offset in 0..2_000u64 {
            let value = Arc::new(Value::new(vec![7u8; (offset % 300) as usize * 10]));
            inserted += value.weight() + ENTRY_OVERHEAD;
            cache.insert(offset, Cached::Blob(value));
            assert!(cache.weight_bytes() <= budget + 4096, "{} bytes held for a budget of {budget}", cache.weight_bytes());
        }
        assert!(inserted > 10 * budget, "the test puts in more than the budget");
        assert!(cache.weight_bytes() > budget / 2, "the cache is used: {} bytes", cache.weight_bytes());
    }
}
