//! The commit protocol.
//!
//! 1. Hash the tree (each new node once; stored subtrees carry their hash).
//! 2. Encode every new node, children before parents, into one batch ending
//!    with the dictionary record (if any) and the commit record; a large
//!    batch goes to the pack in pieces as it grows (`commit_spill_bytes`).
//! 3. Append the (rest of the) batch to the pack in one write.
//! 4. Per the sync policy: fsync the pack, then write the control file's
//!    hint slot (or, at a checkpoint, a synced slot). Only then is the
//!    commit acknowledged.
//! 5. Publish: the index and the cache learn the new records.
//!
//! Crash argument (docs/FORMAT.md has it whole): until the pack fsync of
//! step 4, the batch may be lost or torn; a writable open keeps only whole
//! batches (checksums hold, the commit record last) past the control
//! slot's durable end and truncates the rest. A torn control write fails
//! its checksum and another slot is used. After the fsync the batch is
//! durable.

use pando_core::dir::{dir_ptr_hash, inode_ptr_hash};
use pando_core::inode::ENTRIES;
use pando_core::{CommitInfo, Hash};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Repo, Writer, index_file};
use crate::cache::Cached;
use crate::crash_point;
use crate::dict::{self, Dict};
use crate::error::{Error, Result};
use crate::format::node::{CommitRecord, MAX_PATCH_CHAIN, MAX_PATCH_CHANGES, TreePatch, encode_tree, encode_values};
use crate::format::record::{self, RecordKind};
use crate::options::SyncPolicy;
use crate::tree::Tree;
use crate::tree::node::{Body, Child, Inline, Inode, Leaf, Loader, Pointers, Ptr, Step, Value, ValuesBuilder, Written};

/// Builds one commit's batch of records.
struct Batch<'a> {
    /// The store instance writing: marks of other instances are ignored.
    instance: u64,
    /// Logical offset of the batch's first byte.
    base: u64,
    buf: Vec<u8>,
    payload: Vec<u8>,
    dict: &'a Dict,
    loader: &'a dyn Loader,
    pack: &'a crate::pack::Pack,
    raw_steps: Vec<Step>,
    /// Bytes of records held before they are appended to the pack.
    spill_bytes: usize,
    /// The last inodes written, in stored form, for the cache: at most a
    /// quarter of its budget (`written_weight` of `cache_bytes`), the oldest
    /// dropped first, so that a huge commit does not hold a second cache.
    written: VecDeque<(u64, Cached)>,
    written_weight: u64,
    cache_bytes: u64,
}

impl Batch<'_> {
    fn next_offset(&self) -> u64 {
        self.base + self.buf.len() as u64
    }

    /// Appends the payload as a record; the batch so far goes to the pack
    /// once it holds `spill_bytes`, to the same chunk (a batch never
    /// straddles two chunks).
    fn push_record(&mut self, kind: RecordKind) -> Result<u64> {
        let at = self.next_offset();
        record::append(&mut self.buf, kind, &self.payload);
        if self.buf.len() >= self.spill_bytes {
            self.pack.append(self.base, &self.buf)?;
            crash_point::reach("after-spill");
            self.base += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(at)
    }

    /// Keeps a stored copy for the cache, within the cache's budget.
    fn keep_for_cache(&mut self, at: u64, inode: Inode) {
        let cached = Cached::inode(Arc::new(inode));
        self.written_weight += cached.weight();
        self.written.push_back((at, cached));
        while self.written_weight > self.cache_bytes
            && let Some((_, dropped)) = self.written.pop_front()
        {
            self.written_weight -= dropped.weight();
        }
    }

    /// The offset a node in memory was written at by this store instance,
    /// if that record is still held (a collection may have removed it).
    fn written_at(&self, offset: Option<u64>) -> Option<u64> {
        offset.filter(|&o| self.pack.holds(o))
    }

    fn write_blob(&mut self, value: &Value) -> Result<u64> {
        if let Some(offset) = self.written_at(value.stored_offset(self.instance)) {
            return Ok(offset);
        }
        self.payload.clear();
        self.payload.extend_from_slice(&value.bytes);
        let at = self.push_record(RecordKind::Blob)?;
        value.mark_stored(self.instance, at);
        Ok(at)
    }

    /// Writes the inode and its new descendants; returns its offset. The
    /// cache receives a stored copy pointing to children by offset.
    fn write_inode(&mut self, inode: &Arc<Inode>, depth: u32) -> Result<u64> {
        if let Some(offset) = self.written_at(inode.stored_offset(self.instance)) {
            return Ok(offset);
        }
        let mut patch_chain = 0;
        let stored_body = match &inode.body {
            Body::Values(values) => {
                // The stored copy: contents inline or in blobs, directories
                // by stored pointers carrying their hash.
                let mut stored = ValuesBuilder::new(0, values.len());
                for (step, child) in values.iter() {
                    let stored_child = match child {
                        Child::Contents(Leaf::Value(value)) => match Inline::new(&value.bytes) {
                            Some(inline) => Child::Contents(Leaf::Inline(inline)),
                            None => Child::Contents(Leaf::Blob { offset: self.write_blob(value)?, hash: value.hash() }),
                        },
                        Child::Dir(ptr @ Ptr::Mem(root)) => {
                            let hash = dir_ptr_hash(ptr, self.loader)?;
                            Child::Dir(Ptr::stored(self.write_inode(root, 0)?, hash))
                        }
                        other => other.clone(),
                    };
                    stored.push(step, stored_child);
                }
                let stored = stored.finish();
                let at = self.next_offset();
                self.payload.clear();
                encode_values(&stored, at, self.dict, &mut self.raw_steps, &mut self.payload);
                Body::Values(stored)
            }
            Body::Tree(pointers) => {
                assert_eq!(pointers.depth, depth, "tree inode written at the wrong depth");
                let mut stored_children = Vec::with_capacity(pointers.count());
                for (i, ptr) in pointers.iter() {
                    let stored = match ptr {
                        Ptr::Mem(inode) => {
                            let hash = inode_ptr_hash(ptr, depth + 1, self.loader)?;
                            Ptr::stored(self.write_inode(inode, depth + 1)?, hash)
                        }
                        Ptr::Stored { .. } => ptr.clone(),
                    };
                    stored_children.push((i, stored));
                }
                let stored = Pointers::new(depth, pointers.len, stored_children);
                let at = self.next_offset();
                self.payload.clear();
                match plan_patch(self.instance, |o| self.pack.holds(o), inode, &stored) {
                    Some((patch, chain)) => {
                        patch.encode(at, &mut self.payload);
                        patch_chain = chain;
                    }
                    None => encode_tree(&stored, at, &mut self.payload),
                }
                Body::Tree(stored)
            }
        };
        let kind = match stored_body {
            Body::Values(_) => RecordKind::Values,
            Body::Tree(_) if patch_chain > 0 => RecordKind::TreePatch,
            Body::Tree(_) => RecordKind::Tree,
        };
        let at = self.push_record(kind)?;
        inode.mark_stored(self.instance, at, patch_chain);
        // The cached copy points to children by offset only, so it keeps
        // nothing else alive; it carries the hashes already computed.
        let stored = Inode::new(stored_body);
        stored.mark_stored(self.instance, at, patch_chain);
        stored.remember_hashes_of(inode);
        self.keep_for_cache(at, stored);
        Ok(at)
    }
}

/// Notes in the writer's state a commit record appended at `at`: it joins
/// the index file and the control slot at the next flush.
pub(super) fn note_commit(writer: &mut Writer, hash: Hash, at: u64) {
    writer.unflushed_index.push((hash, at));
    writer.unsynced_commits += 1;
    writer.control.commits += 1;
    writer.control.last_commit = at;
}

/// Checks that every stored record the unwritten part of a tree refers to
/// is still held by the pack (after a garbage collection, a tree taken from
/// a collected commit may refer to records that are gone). Runs before
/// anything is encoded, so a refused commit leaves no stored marks behind.
fn check_refs(instance: u64, pack: &crate::pack::Pack, inode: &Arc<Inode>) -> Result<()> {
    let held = |offset: u64| if pack.holds(offset) { Ok(()) } else { Err(Error::Collected { offset }) };
    // A node in memory whose record was collected is written again.
    if inode.stored_offset(instance).is_some_and(|offset| pack.holds(offset)) {
        return Ok(());
    }
    match &inode.body {
        Body::Values(values) => {
            for (_, child) in values.iter() {
                match child {
                    Child::Contents(Leaf::Inline(_) | Leaf::Value(_)) => {}
                    Child::Contents(Leaf::Blob { offset, .. }) | Child::Dir(Ptr::Stored { offset, .. }) => held(*offset)?,
                    Child::Dir(Ptr::Mem(root)) => check_refs(instance, pack, root)?,
                }
            }
        }
        Body::Tree(pointers) => {
            for (_, child) in pointers.iter() {
                match child {
                    Ptr::Stored { offset, .. } => held(*offset)?,
                    Ptr::Mem(inode) => check_refs(instance, pack, inode)?,
                }
            }
        }
    }
    Ok(())
}

/// Offset of what a child slot points to, if `instance` wrote it.
fn slot_offset(instance: u64, slot: Option<&Ptr>) -> Option<u64> {
    match slot {
        None => None,
        Some(Ptr::Stored { offset, .. }) => Some(*offset),
        Some(Ptr::Mem(inode)) => inode.stored_offset(instance),
    }
}

/// A patch against the inode's base when few children changed and the
/// base's chain of patches is short; `None` to write the inode in full.
fn plan_patch(instance: u64, held: impl Fn(u64) -> bool, inode: &Inode, children: &Pointers) -> Option<(TreePatch, u8)> {
    let base = inode.base()?;
    // A base that a collection removed is not patched against.
    let base_offset = base.stored_offset(instance).filter(|&o| held(o))?;
    let chain = base.patch_chain()?;
    let Body::Tree(base_children) = &base.body else { return None };
    if base_children.depth != children.depth || chain >= MAX_PATCH_CHAIN {
        return None;
    }
    let mut changes = Vec::new();
    for index in 0..ENTRIES {
        let slot = children.get(index);
        let base_slot = base_children.get(index);
        let offset = slot_offset(instance, slot);
        let base_offset = if base_slot.is_some() { Some(slot_offset(instance, base_slot)?) } else { None };
        if offset != base_offset {
            let pointer = match slot {
                Some(Ptr::Stored { offset, hash, .. }) => Some((*offset, *hash)),
                Some(Ptr::Mem(_)) => unreachable!("children are stored before the parent is planned"),
                None => None,
            };
            changes.push((index, pointer));
        }
    }
    if changes.is_empty() || changes.len() > MAX_PATCH_CHANGES {
        return None;
    }
    Some((TreePatch { depth: children.depth, len: children.len, base: base_offset, changes }, chain + 1))
}

impl Repo {
    pub(super) fn commit(&self, tree: &Tree, parents: &[Hash], date: i64, author: &str, message: &str) -> Result<Hash> {
        self.check_writable()?;
        if let Some(source) = tree.source()
            && source.instance_id() != self.id
        {
            return Err(Error::ForeignTree);
        }
        let Child::Dir(root) = tree.node()? else { return Err(Error::RootNotDirectory) };
        let root_hash = dir_ptr_hash(root, self as &dyn Loader)?;
        let mut parent_links = Vec::with_capacity(parents.len());
        {
            let index = self.index.read();
            for parent in parents {
                // A collected parent is refused under the writer lock, below.
                parent_links.push((*parent, *index.get(parent).ok_or(Error::UnknownCommit(*parent))?));
            }
        }
        parent_links.sort();
        parent_links.dedup();
        let info = CommitInfo {
            root: root_hash,
            parents: parent_links.iter().map(|(h, _)| *h).collect(),
            date,
            author: author.to_string(),
            message: message.to_string(),
        };
        let hash = info.hash();

        let mut writer = self.writer.as_ref().expect("checked writable").lock();
        self.check_writable()?;
        // A collected parent (also one a collection collected just now) is refused.
        if let Some((parent, _)) = {
            let index = self.index.read();
            parent_links.iter().find(|(p, _)| index.get(p) == Some(&index_file::COLLECTED)).copied()
        } {
            return Err(Error::CollectedCommit(parent));
        }
        match self.index.read().get(&hash) {
            // The same commit again: nothing to write.
            Some(&index_file::COLLECTED) => return Err(Error::CollectedCommit(hash)),
            Some(_) => return Ok(hash),
            None => {}
        }
        let base = self.guard(self.pack.prepare_append())?;
        let dict = self.dict.read();
        let mut buf = std::mem::take(&mut writer.batch_buf);
        buf.clear();
        let mut batch = Batch {
            instance: self.id,
            base,
            buf,
            payload: Vec::with_capacity(4096),
            dict: &dict,
            loader: self,
            pack: &self.pack,
            raw_steps: Vec::new(),
            spill_bytes: usize::try_from(self.options.commit_spill_bytes).unwrap_or(usize::MAX).max(1),
            written: VecDeque::new(),
            written_weight: 0,
            cache_bytes: self.options.cache_bytes / 4,
        };
        if self.pack.first_chunk_start() > 0 {
            match root {
                Ptr::Stored { offset, .. } if !self.pack.holds(*offset) => return Err(Error::Collected { offset: *offset }),
                Ptr::Stored { .. } => {}
                Ptr::Mem(inode) => check_refs(self.id, &self.pack, inode)?,
            }
        }
        let root_offset = match root {
            Ptr::Stored { offset, .. } => *offset,
            Ptr::Mem(inode) => self.guard(batch.write_inode(inode, 0))?,
        };
        let (base, mut buf, raw_steps, written) = (batch.base, batch.buf, batch.raw_steps, batch.written);
        let first_new_id = dict.len();
        drop(dict);
        let promoted = self.dict.write().observe(&raw_steps);
        if !promoted.is_empty() {
            record::append(&mut buf, RecordKind::Dict, &dict::encode_record(first_new_id, &promoted));
        }
        let commit_at = base + buf.len() as u64;
        let commit_record =
            CommitRecord { root_offset, root_hash, parents: parent_links, date, author: info.author, message: info.message };
        record::append(&mut buf, RecordKind::Commit, &commit_record.encode(commit_at));

        self.guard(self.pack.append(base, &buf))?;
        crash_point::reach("after-append");
        // Keep the buffer for the next commit unless one huge commit grew it.
        if buf.capacity() <= 64 << 20 {
            writer.batch_buf = buf;
        }
        {
            let mut dict = self.dict.write();
            for step in promoted {
                dict.push(step);
            }
        }
        note_commit(&mut writer, hash, commit_at);
        let sync_now = match self.options.sync {
            SyncPolicy::EveryCommit => true,
            SyncPolicy::EveryN(n) => writer.unsynced_commits >= u64::from(n.max(1)),
            SyncPolicy::Never => false,
        };
        if sync_now {
            self.flush_locked(&mut writer, false)?;
        }
        // Published only now: no thread sees a commit that is not as durable
        // as the policy promises.
        self.publish_commit(hash, commit_at);
        for (offset, cached) in written {
            self.cache.insert(offset, cached);
        }
        Ok(hash)
    }

    /// Makes a commit whose record is at `at` visible to this process's
    /// readers (and to a running collection), once it is as durable as the
    /// sync policy promises.
    pub(super) fn publish_commit(&self, hash: Hash, at: u64) {
        self.index.write().insert(hash, at);
        if self.gc.running.load(Ordering::Acquire) {
            self.gc.since_start.lock().push((hash, at));
        }
        self.last_commit.store(at, Ordering::Release);
    }

    pub(super) fn flush(&self) -> Result<()> {
        let Some(writer) = &self.writer else { return Ok(()) };
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::PreviousIo);
        }
        self.flush_locked(&mut writer.lock(), true)
    }

    /// Makes the pack durable, checkpoints the index and dictionary files
    /// when due (always if `checkpoint_now`), then writes and syncs the
    /// control file.
    pub(super) fn flush_locked(&self, writer: &mut Writer, checkpoint_now: bool) -> Result<()> {
        let end = self.pack.end();
        let checkpoint = !writer.unflushed_index.is_empty()
            && (checkpoint_now || writer.unflushed_index.len() as u64 >= self.options.checkpoint_commits);
        if end == writer.control.durable_end && writer.unsynced_commits == 0 && !checkpoint {
            return Ok(());
        }
        let result = (|| {
            self.pack.sync()?;
            crash_point::reach("after-data-sync");
            let mut next = writer.control.clone();
            next.durable_end = end;
            if checkpoint {
                self.checkpoint(writer, &mut next)?;
                crash_point::reach("after-checkpoint");
            }
            // One fsync per commit: the hint slot needs none, since a
            // writable open finds the commits past the synced durable end
            // by their checksums. A checkpoint or an explicit flush leaves
            // a synced slot, so that a clean reopen scans nothing.
            if checkpoint || checkpoint_now {
                writer.write_synced_control(next)?;
            } else {
                writer.write_control_hint(next)?;
            }
            writer.unsynced_commits = 0;
            Ok(())
        })();
        self.guard(result)
    }

    /// Appends the pending index and dictionary entries to their files and
    /// syncs them; `next` (not yet written) records the new lengths.
    fn checkpoint(&self, writer: &mut Writer, next: &mut crate::format::control::Control) -> Result<()> {
        let entries = index_file::encode(&writer.unflushed_index);
        let at = next.index_entries * index_file::ENTRY_BYTES as u64;
        writer.index_file.write_all_at(&entries, at).map_err(Error::io("index", "write"))?;
        writer.index_file.sync().map_err(Error::io("index", "sync"))?;
        self.checkpoint_dict(writer, next)?;
        next.index_entries += writer.unflushed_index.len() as u64;
        next.checkpoint_end = next.durable_end;
        writer.unflushed_index.clear();
        Ok(())
    }

    /// Appends the dictionary entries not yet in its file and syncs it;
    /// `next` records the new length.
    pub(super) fn checkpoint_dict(&self, writer: &Writer, next: &mut crate::format::control::Control) -> Result<()> {
        let dict = self.dict.read();
        let new_steps = dict.steps_from(next.dict_entries as usize);
        if !new_steps.is_empty() {
            let bytes = dict::encode_file_entries(new_steps);
            writer.dict_file.write_all_at(&bytes, next.dict_bytes).map_err(Error::io("dict", "write"))?;
            writer.dict_file.sync().map_err(Error::io("dict", "sync"))?;
            next.dict_bytes += bytes.len() as u64;
            next.dict_entries = dict.len() as u64;
        }
        Ok(())
    }
}
