//! How trees read and write through the store: the reading side's
//! `Loader` (inodes and blobs through the cache, or taken out of it for an
//! update), which the store's (`Repo`) passes on to, and the store's
//! `Source` (the kept tree given back, contents staged when added).
//!
//! Invariants:
//! - An inode read to be changed is not left in the cache (the cache's
//!   reference would make the update copy it); any other read of an
//!   inode or a blob is cached (tested by
//!   `an_inode_read_to_be_changed_is_not_left_in_the_cache`).
//! - Every inode read from the pack has the shape of the store's layout,
//!   checked by `format::node::misshapen` before it is cached or used
//!   (the records' framing admits either layout's; tested by
//!   `inodes_of_the_other_layout_are_misshapen`).
//! - A staged blob is appended and registered in the staged set under the
//!   writer lock, so that a collection starting sees it or the pack's end
//!   before it (tested by `collections_keep_what_an_uncommitted_tree_staged`).

use pando_core::Hash;
use std::sync::Arc;

use super::ReadSide;
use crate::cache::Cached;
use crate::error::{Error, Result};
use crate::format::node::{decode_tree, decode_values};
use crate::format::patch::{MAX_PATCH_CHAIN, TreePatch, ValuesPatch};
use crate::format::record::{self, RecordKind};
use crate::node::{Body, Inode, Leaf, Loader, State, Value};
use crate::store::Repo;
use crate::tracer::TraceSink;
use crate::tree::Source;
use crate::tree::flat::FlatCache;

impl ReadSide {
    /// Loads the inode recorded at `offset` (through the cache), following
    /// at most `patches` patch records to their bases.
    fn load_inode_at(&self, offset: u64, depth: u32, patches: u8) -> Result<Arc<Inode>> {
        self.load_inode_cached(offset, depth, patches, true)
    }

    /// [`ReadSide::load_inode_at`], from the cache or the disk; `keep` puts an
    /// inode read from disk in the cache, and leaves one found there, which
    /// is otherwise taken out of it (for an update).
    fn load_inode_cached(&self, offset: u64, depth: u32, patches: u8, keep: bool) -> Result<Arc<Inode>> {
        let cached = if keep { self.cache.get(offset) } else { self.cache.remove(offset) };
        if let Some(Cached::Inode(inode, _)) = cached {
            // A damaged pointer may reach a cached tree inode at another depth.
            if let Body::Tree(pointers) = &inode.body
                && pointers.depth != depth
            {
                let found = pointers.depth;
                return Err(Error::corrupt("pack", offset, format!("tree inode of depth {found} reached at depth {depth}")));
            }
            return Ok(inode);
        }
        let (kind, payload) = self.pack.read_record(offset)?;
        let corrupt = |reason| Error::corrupt("pack", offset, reason);
        let (inode, chain) = match kind {
            RecordKind::Values => (decode_values(&payload, offset, &self.dict.read()).map_err(corrupt)?, 0),
            RecordKind::Tree => (decode_tree(&payload, offset, depth).map_err(corrupt)?, 0),
            RecordKind::TreePatch => {
                let Some(patches) = patches.checked_sub(1) else {
                    return Err(corrupt(format!("chain of tree patches longer than {MAX_PATCH_CHAIN}")));
                };
                let patch = TreePatch::decode(&payload, offset, depth).map_err(corrupt)?;
                let base = self.load_inode_at(patch.base, depth, patches)?;
                let chain = chain_of(&base) + 1;
                if chain > MAX_PATCH_CHAIN {
                    return Err(corrupt(format!("chain of tree patches longer than {MAX_PATCH_CHAIN}")));
                }
                (patch.apply(&base).map_err(corrupt)?, chain)
            }
            RecordKind::ValuesPatch => {
                let Some(patches) = patches.checked_sub(1) else {
                    return Err(corrupt(format!("chain of value patches longer than {MAX_PATCH_CHAIN}")));
                };
                let patch = ValuesPatch::decode(&payload, offset, &self.dict.read()).map_err(corrupt)?;
                let base = self.load_inode_at(patch.base, depth, patches)?;
                let chain = chain_of(&base) + 1;
                if chain > MAX_PATCH_CHAIN {
                    return Err(corrupt(format!("chain of value patches longer than {MAX_PATCH_CHAIN}")));
                }
                (patch.apply(&base).map_err(corrupt)?, chain)
            }
            other => return Err(corrupt(format!("expected an inode record, found {other:?}"))),
        };
        if let Some(reason) = crate::format::node::misshapen(&inode, Loader::layout(self)) {
            return Err(corrupt(reason));
        }
        let inode = Arc::new(Inode::with_meta(inode.body, State::loaded(self.id, offset, chain)));
        if keep {
            self.cache.insert(offset, Cached::inode(inode.clone()));
        }
        Ok(inode)
    }
}

impl Loader for ReadSide {
    #[inline]
    fn layout(&self) -> pando_core::inode::Layout {
        self.layout
    }

    fn load_inode(&self, offset: u64, hash: &Hash, depth: u32) -> Result<Arc<Inode>> {
        let inode = self.load_inode_at(offset, depth, MAX_PATCH_CHAIN)?;
        // The pointer's hash is the directory hash for a root, the inode hash below.
        inode.remember_hash(Loader::layout(self), depth, *hash);
        Ok(inode)
    }

    /// An inode an update changes is taken out of the cache, or not put in
    /// it: the cache's copy would make the update copy it (or, with a
    /// writer, the commit writes the changed inode and keeps it in memory;
    /// the old version is read again from disk if an older tree needs it).
    fn load_inode_to_update(&self, offset: u64, hash: &Hash, depth: u32) -> Result<Arc<Inode>> {
        let inode = self.load_inode_cached(offset, depth, MAX_PATCH_CHAIN, false)?;
        inode.remember_hash(Loader::layout(self), depth, *hash);
        Ok(inode)
    }

    fn load_blob(&self, offset: u64, hash: &Hash) -> Result<Arc<Value>> {
        if let Some(Cached::Blob(value)) = self.cache.get(offset) {
            return Ok(value);
        }
        let (kind, payload) = self.pack.read_record(offset)?;
        if kind != RecordKind::Blob {
            return Err(Error::corrupt("pack", offset, format!("expected a blob record, found {kind:?}")));
        }
        let value = Arc::new(Value::loaded(payload.into_boxed_slice(), *hash, self.id, offset));
        self.cache.insert(offset, Cached::Blob(value.clone()));
        Ok(value)
    }
}

/// The patches from an inode read from a record to a full one.
fn chain_of(inode: &Inode) -> u8 {
    inode.meta.get().map_or(0, |written| written.chain())
}

/// A tree's source is the whole store, and it loads through the reading side.
impl Loader for Repo {
    #[inline]
    fn layout(&self) -> pando_core::inode::Layout {
        self.read.layout()
    }

    #[inline]
    fn load_inode(&self, offset: u64, hash: &Hash, depth: u32) -> Result<Arc<Inode>> {
        self.read.load_inode(offset, hash, depth)
    }

    #[inline]
    fn load_inode_to_update(&self, offset: u64, hash: &Hash, depth: u32) -> Result<Arc<Inode>> {
        self.read.load_inode_to_update(offset, hash, depth)
    }

    #[inline]
    fn load_blob(&self, offset: u64, hash: &Hash) -> Result<Arc<Value>> {
        self.read.load_blob(offset, hash)
    }
}

impl Source for Repo {
    fn flat(&self) -> &FlatCache {
        &self.read.flat
    }

    fn instance_id(&self) -> u64 {
        self.read.id
    }

    fn trace_sink(&self) -> Option<&dyn TraceSink> {
        self.read.trace_sink()
    }

    fn give_back_kept(&self, root: Arc<Inode>) {
        let mut kept = self.write.kept.lock();
        // Only the root of the newest commit's tree, written by this store,
        // and only into an empty place (a later commit replaced it, or
        // another tree gave it back).
        if let Some(kept) = kept.as_mut()
            && kept.root.is_none()
            && root.meta.offset_for(self.read.id) == Some(kept.root_offset)
        {
            kept.root = Some(root);
        }
    }

    /// Appends contents of at least `stage_bytes` to the pack as a blob
    /// record: its place is reserved here, under the writer lock, between
    /// commits, and the staged set's thread writes it (the next commit
    /// waits for that, and a failure is the store's at the next staging or
    /// commit). Sound before a commit refers to it: a record past the
    /// durable end is only made durable by a later commit's fsync, and the
    /// writable open that recovers a crash keeps the records up to the last
    /// whole commit and truncates a staged blob after it, which nothing
    /// committed refers to.
    fn stage(&self, bytes: &[u8]) -> Result<Option<Leaf>> {
        let (Some(writer), threshold) = (&self.write.writer, self.read.options.stage_bytes) else { return Ok(None) };
        if threshold == 0 || (bytes.len() as u64) < threshold {
            return Ok(None);
        }
        let mut buf = self.write.staged.buffer();
        record::append(&mut buf, RecordKind::Blob, bytes);
        let contents = record::header_len(bytes.len() as u64)..buf.len() - 4;
        assert_eq!(contents.len(), bytes.len(), "a staged record holds the contents added, and only them");
        let _writer = writer.lock();
        self.write.check_writable()?;
        if let Some(failed) = self.write.staged.take_failure() {
            return self.write.guard(Err(failed));
        }
        if self.read.pack.starts_chunk() {
            // The chunk is finished (synced) only once its records are written.
            self.write.guard(self.write.staged.settle())?;
        }
        let at = self.write.guard(self.read.pack.prepare_append())?;
        let reserved = self.read.pack.reserve(at, buf.len() as u64);
        // Registered under the writer lock, so that a collection starting
        // sees either the blob kept or the pack's end before it.
        Ok(Some(Leaf::Staged(self.write.staged.stage(at, buf, contents, Box::new(move |record| reserved.write(record))))))
    }
}

#[cfg(test)]
mod tests {
    use crate::node::{Body, Inode, Pointers, Ptr, Values};
    use crate::{CommitMeta, Options, Store};
    use pando_core::Hash;
    use pando_core::inode::Layout;

    #[test]
    fn inodes_of_the_other_layout_are_misshapen() {
        let ptr = || Ptr::stored(100, Hash::of_bytes(b"child"));
        let tree = |depth, len, children: &[usize]| {
            Inode::new(Body::Tree(Pointers::new(depth, len, children.iter().map(|&i| (i, ptr())))))
        };
        let (l1, binary) = (Layout::TEZOS, Layout::TEZOS_BINARY);
        // A binary tree inode of 3 entries is too small for L1's.
        let small = tree(1, 3, &[0, 1]);
        assert_eq!(crate::format::node::misshapen(&small, binary), None);
        assert!(crate::format::node::misshapen(&small, l1).unwrap().contains("only 3 entries (more than 32"));
        // Children and depths beyond the binary layout's bounds.
        assert_eq!(crate::format::node::misshapen(&tree(1, 40, &[0, 31]), l1), None);
        assert!(crate::format::node::misshapen(&tree(1, 40, &[0, 31]), binary).unwrap().contains("2 children"));
        assert!(crate::format::node::misshapen(&tree(64, 40, &[0, 1]), binary).unwrap().contains("depth 64"));
        assert!(crate::format::node::misshapen(&tree(12, 40, &[0, 1]), l1).unwrap().contains("depth 12"));
        // A values inode of 3 entries is an L1 one only.
        let three = Values::from_sorted((0..3u8).map(|i| ([i], crate::node::Child::Dir(ptr()))));
        let values = Inode::new(Body::Values(three));
        assert_eq!(crate::format::node::misshapen(&values, l1), None);
        assert!(crate::format::node::misshapen(&values, binary).unwrap().contains("3 entries (at most 2"));
    }

    /// A read caches the inodes it loads; an update takes the inode it
    /// changes out of the cache, and a read puts it back.
    #[test]
    fn an_inode_read_to_be_changed_is_not_left_in_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        // No flat cache: every read loads through the node cache.
        let options = Options { read_cache_bytes: 0, ..Options::default() };
        let store = Store::open(dir.path(), options.clone()).unwrap();
        let tree = store.empty_tree().add(&["a"], b"1").unwrap().add(&["b"], b"2").unwrap();
        let commit = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "block" }).unwrap();
        drop(tree);
        store.close().unwrap();

        let store = Store::open(dir.path(), options).unwrap();
        let read = &store.repo.read;
        let root = read.commit_record(&commit).unwrap().unwrap().root_offset;
        let tree = store.checkout(&commit).unwrap().unwrap();
        assert_eq!(tree.find(&["a"]).unwrap(), Some(b"1".to_vec()));
        assert!(read.cache.get(root).is_some(), "a read caches the inode it loads");
        let mut changed = tree.clone();
        changed.add_mut(&["c"], b"3").unwrap();
        assert!(read.cache.get(root).is_none(), "an update left the inode it changes in the cache");
        assert_eq!(tree.find(&["b"]).unwrap(), Some(b"2".to_vec()));
        assert!(read.cache.get(root).is_some());
        assert!(changed.mem(&["a"]).unwrap() && changed.mem(&["c"]).unwrap());
    }
}
