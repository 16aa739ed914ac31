//! The commit protocol.
//!
//! 1. and 2., together: encode every new node, children before parents,
//!    into one batch ending with the dictionary record (if any) and the
//!    commit record, hashing each node once as its parent's record needs
//!    its hash (stored subtrees carry theirs; a helper thread hashes from
//!    the other end of a larger tree, [`HashingHelper`]); then the root's
//!    hash names the commit. A large batch goes to the pack in pieces as
//!    it grows (`commit_spill_bytes`), appended by a thread while the next
//!    piece is encoded. A commit found already known (the same one again)
//!    appends its records without a commit record: its inodes now know
//!    where they were written.
//! 3. Append the (rest of the) batch to the pack in one write.
//! 4. Per the sync policy: fsync the pack, then write the control file's
//!    hint slot (or, at a checkpoint, a synced slot). Only then is the
//!    commit acknowledged. With `SyncPolicy::Pipelined` this step runs on
//!    the sync thread (`syncer`) and `commit` returns without waiting;
//!    the next commit (or `wait_durable`, `flush`, a control write) waits
//!    for it after its own step 3, so the commit is acknowledged then.
//! 5. Publish: the index learns the commit, and its tree in memory becomes
//!    the kept tree.
//!
//! The kept tree (the newest commit's, in memory): `kept`.
//!
//! Invariants:
//! - A commit hash is in the index only once its batch is in the pack
//!   (asserted in `publish_commit`).
//! - A commit record follows its root's record and every record of its
//!   batch (asserted in `append_commit`).
//!
//! Crash argument (docs/FORMAT.md has it whole): until the pack fsync of
//! step 4, the batch may be lost or torn; a writable open keeps only whole
//! batches (checksums hold, the commit record last) past the control
//! slot's durable end and truncates the rest. A torn control write fails
//! its checksum and another slot is used. After the fsync the batch is
//! durable.

use pando_core::dir::dir_ptr_hash;
use pando_core::{CommitInfo, Hash};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::batch::Batch;
use super::hashing::{self, Carry, HashingHelper, SharedHashing};
use super::inodes::{Encoder, Hashing, Holding, Writing, check_refs};
use super::kept::{Keeping, Kept};
use crate::crash_point;
use crate::dict::{self, RawSteps};
use crate::error::{Error, Result};
use crate::format::commit::{CommitRecord, MAX_PARENTS, MAX_TEXT_BYTES};
use crate::format::record::{self, RecordKind};
use crate::node::{Child, Inode, Loader, Ptr};
use crate::options::SyncPolicy;
use crate::store::{CommitMeta, KeptTree, Repo, Writer, index_file};
use crate::tree::Tree;

/// Notes in the writer's state a commit record appended at `at`: it joins
/// the index file and the control slot at the next flush.
pub(in crate::store) fn note_commit(writer: &mut Writer, hash: Hash, at: u64) {
    writer.unflushed_index.push((hash, at));
    writer.unsynced_commits += 1;
    writer.control.commits += 1;
    writer.control.last_commit = at;
}

/// A commit's batch once its inodes are written (steps 1 and 2).
struct WrittenBatch {
    /// Where the root is, and what the kept tree holds of it.
    root_offset: u64,
    kept: Option<Arc<Inode>>,
    /// The batch's bytes not yet in the pack, from offset `base`.
    base: u64,
    buf: Vec<u8>,
    raw_steps: RawSteps,
    staged: Vec<u64>,
    keeping: Keeping,
}

impl Repo {
    /// The commit protocol (see the module): checks, writes the batch,
    /// names the commit, appends and syncs it, then publishes it.
    pub(in crate::store) fn commit(&self, tree: &Tree, meta: CommitMeta<'_>, carry: &Carry) -> Result<Hash> {
        let CommitMeta { parents, date, author, message } = meta;
        let (root, parent_links) = self.check_commit(tree, parents, author, message)?;
        let mut writer = self.write.writer.as_ref().expect("checked writable").lock();
        let refs_held = self.check_locked(tree, root, &parent_links)?;
        let written = self.write_batch(&mut writer, tree, root, refs_held, carry)?;
        // Written, and only now hashed whole: a failure, or a commit that
        // is already known, appends the records without a commit record
        // (see `append_unreferenced`).
        let root_hash = match dir_ptr_hash(root, self as &dyn Loader) {
            Ok(hash) => hash,
            Err(e) => {
                self.append_unreferenced(&mut writer, written)?;
                return Err(e);
            }
        };
        if let Some(kept) = &written.kept {
            // A kept copy of the root was made before the root was hashed.
            kept.remember_hash(Loader::layout(self), 0, root_hash);
        }
        let info = CommitInfo {
            root: root_hash,
            parents: parent_links.iter().map(|(h, _)| *h).collect(),
            date,
            author: author.to_string(),
            message: message.to_string(),
        };
        let hash = info.hash();
        let known = self.read.index.read().get(&hash).copied();
        if let Some(at) = known {
            // The same commit again: no commit record.
            self.append_unreferenced(&mut writer, written)?;
            return if at == index_file::COLLECTED { Err(Error::CollectedCommit(hash)) } else { Ok(hash) };
        }
        let record = CommitRecord {
            root_offset: written.root_offset,
            root_hash,
            parents: parent_links,
            date,
            author: info.author,
            message: info.message,
        };
        self.append_commit(&mut writer, hash, record, written)
    }

    /// Checks made before the writer lock: a tree of this store whose root
    /// is a directory, parents, author and message within a commit
    /// record's limits, and parents in the index. Returns the root, and
    /// the parents with their offsets, sorted and unique.
    fn check_commit<'t>(
        &self,
        tree: &'t Tree,
        parents: &[Hash],
        author: &str,
        message: &str,
    ) -> Result<(&'t Ptr, Vec<(Hash, u64)>)> {
        self.write.check_writable()?;
        for (field, text) in [("author", author), ("message", message)] {
            if text.len() > MAX_TEXT_BYTES {
                return Err(Error::CommitTextTooLong { field, bytes: text.len() as u64, max: MAX_TEXT_BYTES as u64 });
            }
        }
        let mut unique = parents.to_vec();
        unique.sort();
        unique.dedup();
        if unique.len() > MAX_PARENTS {
            return Err(Error::TooManyParents { count: unique.len() as u64, max: MAX_PARENTS as u64 });
        }
        if let Some(source) = tree.source()
            && source.instance_id() != self.read.id
        {
            return Err(Error::ForeignTree);
        }
        // A tree of no store is shaped as L1's (`NoLoader`).
        if tree.source().is_none() && self.read.layout() != pando_core::inode::Layout::TEZOS {
            return Err(Error::LayoutMismatch {
                what: "a tree made without a store".into(),
                found: crate::error::layout_name(pando_core::inode::Layout::TEZOS),
                expected: crate::error::layout_name(self.read.layout()),
            });
        }
        let Child::Dir(root) = tree.node()? else { return Err(Error::RootNotDirectory) };
        let mut parent_links = Vec::with_capacity(unique.len());
        {
            let index = self.read.index.read();
            // Sorted and unique as `unique` is.
            for parent in unique {
                // A collected parent is refused under the writer lock, below.
                parent_links.push((parent, *index.get(&parent).ok_or(Error::UnknownCommit(parent))?));
            }
        }
        Ok((root, parent_links))
    }

    /// Checks made under the writer lock: still writable, staged blobs in
    /// the pack, no collected parent, and every record the tree refers to
    /// held. Returns whether the tree is known to refer only to held
    /// records (the batch need not ask the pack).
    fn check_locked(&self, tree: &Tree, root: &Ptr, parent_links: &[(Hash, u64)]) -> Result<bool> {
        self.write.check_writable()?;
        // The blobs staged so far are in the pack before the batch.
        self.write.guard(self.write.staged.settle())?;
        // A collected parent (also one a collection collected just now) is refused.
        if let Some((parent, _)) = {
            let index = self.read.index.read();
            parent_links.iter().find(|(p, _)| index.get(p) == Some(&index_file::COLLECTED)).copied()
        } {
            return Err(Error::CollectedCommit(parent));
        }
        // Taken from a commit not collected since the layout it knew, the
        // tree refers only to held records (the batch need not ask either).
        let refs_held = tree.refs_held_at(self.read.pack.layout_epoch());
        if self.read.pack.first_chunk_start() > 0 && !refs_held {
            match root {
                Ptr::Stored { offset, .. } if !self.read.pack.holds_whole(*offset) => {
                    return Err(Error::Collected { offset: *offset });
                }
                Ptr::Stored { .. } => {}
                Ptr::Mem(inode, _) => check_refs(self.read.id, &self.read.pack, inode)?,
            }
        }
        Ok(refs_held)
    }

    /// Steps 1 and 2 together: this thread writes the new inodes children
    /// first, hashing each as its parent's record needs it, while a helper
    /// hashes the subtrees of large directories ahead of it, then the rest
    /// from the other end (see `HashingHelper`).
    fn write_batch(&self, writer: &mut Writer, tree: &Tree, root: &Ptr, refs_held: bool, carry: &Carry) -> Result<WrittenBatch> {
        let start = self.write.guard(self.read.pack.prepare_append())?;
        let keeping = writer.kept.start_commit(self.read.options.keep_bytes());
        let dict = self.read.dict.read();
        let buf = std::mem::take(&mut writer.batch_buf);
        let mut subtrees = Vec::new();
        let large = match root {
            Ptr::Mem(inode, _) => hashing::is_large(inode, tree.logged_updates()),
            Ptr::Stored { .. } => false,
        };
        let helper = match root {
            Ptr::Mem(inode, _) if HashingHelper::worth_it(inode, tree.updates()) => {
                if large {
                    hashing::subtrees(inode, 0, &mut subtrees);
                }
                HashingHelper::start(inode, &subtrees, carry)
            }
            Ptr::Mem(..) | Ptr::Stored { .. } => None,
        };
        let written = std::thread::scope(|scope| {
            let shared = helper.as_ref().map(|helper| SharedHashing::new(&subtrees, helper.claims()));
            let mut writing = Writing {
                batch: Batch::new(&self.read.pack, start, buf, self.read.options.commit_spill_bytes, scope),
                holding: Holding { instance: self.read.id, pack: &self.read.pack, refs_held },
                encoder: Encoder::new(&dict),
                keeping,
                hashing: Hashing { subtrees_whole: large, shared },
                loader: self,
                staged: Vec::new(),
            };
            let (root_offset, kept) = match root {
                Ptr::Stored { offset, .. } => (*offset, None),
                Ptr::Mem(inode, _) => match writing.write_inode(inode, 0)? {
                    (offset, Kept::Itself) => (offset, Some(inode.clone())),
                    (offset, Kept::Copy(copy)) => (offset, Some(copy)),
                    (offset, Kept::No) => (offset, None),
                },
            };
            let Writing { batch, encoder, keeping, staged, .. } = writing;
            let (base, buf) = batch.finish()?;
            Ok(WrittenBatch { root_offset, kept, base, buf, raw_steps: encoder.raw_steps, staged, keeping })
        });
        drop(helper);
        self.write.guard(written)
    }

    /// Steps 3 to 5 for a new commit: the dictionary's new steps and the
    /// commit record end the batch, which is appended and synced per the
    /// policy; then the commit is published and its tree kept.
    fn append_commit(&self, writer: &mut Writer, hash: Hash, record: CommitRecord, written: WrittenBatch) -> Result<Hash> {
        let WrittenBatch { root_offset, kept, base, mut buf, raw_steps, staged, keeping } = written;
        let first_new_id = self.read.dict.read().len();
        let promoted = self.read.dict.write().observe(&raw_steps);
        if !promoted.is_empty() {
            record::append(&mut buf, RecordKind::Dict, &dict::encode_record(first_new_id, &promoted));
        }
        let commit_at = base + buf.len() as u64;
        assert!(root_offset < commit_at, "a commit record follows its root's");
        record::append(&mut buf, RecordKind::Commit, &record.encode(commit_at));

        self.write.guard(self.read.pack.append(base, &buf))?;
        crash_point::reach("after-append");
        self.keep_buffer(writer, buf);
        {
            let mut dict = self.read.dict.write();
            for step in promoted {
                dict.push(step);
            }
        }
        note_commit(writer, hash, commit_at);
        match self.read.options.sync {
            SyncPolicy::EveryCommit => self.flush_locked(writer, false)?,
            SyncPolicy::EveryN(n) if writer.unsynced_commits >= u64::from(n.max(1)) => self.flush_locked(writer, false)?,
            SyncPolicy::EveryN(_) | SyncPolicy::Never => {}
            SyncPolicy::Pipelined => self.sync_behind(writer)?,
        }
        // Published only now: no thread sees a commit that is not as durable
        // as the policy promises.
        self.publish_commit(hash, commit_at);
        // Under the writer lock, as a collection starts: it sees each of
        // these blobs either staged or referred to by a commit it traces.
        self.write.staged.committed(&staged);
        // The versions this commit replaced leave the kept tree with it.
        writer.kept.release(&keeping.superseded);
        writer.kept.finish_commit(keeping.seq, kept.is_some().then_some(keeping.weight));
        *self.write.kept.lock() = kept.map(|root| KeptTree { hash, root_offset, root: Some(root) });
        Ok(hash)
    }

    /// Keeps the batch's buffer for the next commit, unless one huge
    /// commit grew it.
    fn keep_buffer(&self, writer: &mut Writer, buf: Vec<u8>) {
        if buf.capacity() <= 64 << 20 {
            writer.batch_buf = buf;
        }
    }

    /// Ends a commit that writes no commit record: the records its batch
    /// holds are appended all the same, since its inodes know where they
    /// were written and a later commit may refer to them there. A recovery
    /// keeps them only if a commit record follows (a whole batch ends with
    /// one), and then they are there. The kept tree stays the last
    /// commit's, so the window keeps its commits.
    fn append_unreferenced(&self, writer: &mut Writer, written: WrittenBatch) -> Result<()> {
        let WrittenBatch { base, buf, keeping, .. } = written;
        if !buf.is_empty() {
            self.write.guard(self.read.pack.append(base, &buf))?;
        }
        writer.kept.finish_commit(keeping.seq, Some(keeping.weight));
        self.keep_buffer(writer, buf);
        Ok(())
    }

    /// Makes a commit whose record is at `at` visible to this process's
    /// readers (and to a running collection), once it is as durable as the
    /// sync policy promises.
    pub(in crate::store) fn publish_commit(&self, hash: Hash, at: u64) {
        assert!(at < self.read.pack.end(), "a commit is published only once its record is in the pack");
        self.read.index.write().insert(hash, at);
        if self.write.gc.running.load(Ordering::Acquire) {
            self.write.gc.since_start.lock().push((hash, at));
        }
        self.read.last_commit.store(at, Ordering::Release);
    }

    pub(in crate::store) fn flush(&self) -> Result<()> {
        let Some(writer) = &self.write.writer else { return Ok(()) };
        self.write.check_not_poisoned()?;
        self.flush_locked(&mut writer.lock(), true)
    }

    /// Makes the pack durable, checkpoints the index and dictionary files
    /// when due (always if `checkpoint_now`), then writes and syncs the
    /// control file.
    pub(in crate::store) fn flush_locked(&self, writer: &mut Writer, checkpoint_now: bool) -> Result<()> {
        self.write.guard(writer.settle())?;
        let end = self.read.pack.end();
        let checkpoint = !writer.unflushed_index.is_empty()
            && (checkpoint_now || writer.unflushed_index.len() as u64 >= self.read.options.checkpoint_commits);
        if end == writer.control.durable_end && writer.unsynced_commits == 0 && !checkpoint {
            return Ok(());
        }
        let result = (|| {
            self.read.pack.sync()?;
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
        self.write.guard(result)
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
    pub(in crate::store) fn checkpoint_dict(&self, writer: &Writer, next: &mut crate::format::control::Control) -> Result<()> {
        let dict = self.read.dict.read();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemStorage;
    use crate::node::{Body, Held, Inode, Leaf, cache_weight};
    use crate::options::Options;
    use crate::store::Store;
    use pando_core::dir::Hold;
    use std::sync::Arc;

    /// Memory held by the inodes of a kept subtree, as the window counts
    /// it; checks on the way that each is written, knows since when it is
    /// kept, and that no kept inode is older than `cutoff`.
    fn kept_weight(inode: &Arc<Inode>, cutoff: u32, seen: &mut std::collections::HashSet<usize>) -> u64 {
        if !seen.insert(Arc::as_ptr(inode) as usize) {
            return 0;
        }
        assert!(inode.meta.get().is_some(), "a kept inode is written");
        let since = inode.meta.kept_since().expect("a kept inode knows since when");
        assert!(since >= cutoff, "kept since commit {since}, older than the window's first {cutoff}");
        let mut weight = cache_weight(inode);
        let children: Vec<Arc<Inode>> = match &inode.body {
            Body::Values(values) => values
                .iter()
                .filter_map(|(_, child)| match child {
                    Child::Contents(Leaf::Value(value)) => {
                        weight += value.weight();
                        None
                    }
                    Child::Dir(Ptr::Mem(root, _)) => Some(root.clone()),
                    _ => None,
                })
                .collect(),
            Body::Tree(pointers) => pointers.iter().filter_map(|(_, ptr)| Held::as_mem(ptr).cloned()).collect(),
        };
        for child in &children {
            assert!(child.meta.kept_since().unwrap() >= since, "a kept inode is not older than its subtree says");
            weight += kept_weight(child, cutoff, seen);
        }
        weight
    }

    /// How many tree patch records the store's pack holds.
    fn patches(store: &Store) -> u64 {
        use crate::format::record::RecordKind;
        use crate::inspection::InspectOptions;
        store
            .inspect(&InspectOptions { commit: None, sample_bytes: 0 }, &mut |_| {})
            .unwrap()
            .records
            .kind(RecordKind::TreePatch)
            .records
    }

    /// A writer's kept tree holds at most its budget, only inodes of the
    /// window's commits, and serves the next checkout: over 300 commits of
    /// 40 writes (with long values, and a directory growing past 256
    /// entries) and one of 5,000, with a budget that holds a few dozen of
    /// the small ones and not the large one.
    #[test]
    fn the_kept_tree_stays_in_its_budget_and_window() {
        let options = Options { cache_bytes: 1 << 20, ..Options::default() };
        let budget = options.keep_bytes();
        let store = Store::open_storage(Arc::new(MemStorage::new()), options).unwrap();
        let mut tree = Tree::empty();
        let mut parent = None;
        let (mut kept_commits, mut full_windows) = (0, 0);
        for block in 0u32..300 {
            for i in 0..40u32 {
                let account = (block * 7919 + i * 104_729) % 2_000;
                let value = format!("{block}-{i}-{}", "x".repeat((i % 3 * 30) as usize));
                let path = ["index".to_string(), format!("{:02x}", account % 97), account.to_string()];
                tree.add_mut(&path, value.as_bytes()).unwrap();
                if i % 4 == 0 {
                    tree.add_mut(&["big".to_string(), account.to_string()], value.as_bytes()).unwrap();
                }
            }
            if block == 100 {
                // A commit larger than the budget: its tree is not kept.
                for i in 0..5_000u32 {
                    tree.add_mut(&["bulk".to_string(), (i % 50).to_string(), i.to_string()], &[7; 40]).unwrap();
                }
            }
            let hash = store
                .commit(&tree, CommitMeta { parents: parent.as_slice(), date: i64::from(block), author: "t", message: "" })
                .unwrap();
            parent = Some(hash);
            let stats = store.info();
            assert!(stats.kept_bytes <= budget, "window of {} bytes over the budget of {budget}", stats.kept_bytes);
            let writer = store.repo.write.writer.as_ref().unwrap().lock();
            let cutoff = writer.kept.window.front().map_or(u32::MAX, |(seq, _)| *seq);
            drop(writer);
            let kept = store.repo.write.kept.lock().as_ref().map(|kept| (kept.hash, kept.root.clone()));
            assert_eq!(kept.is_none(), block == 100, "only the large commit's tree is not kept (block {block})");
            if let Some((kept_hash, root)) = kept {
                let root = root.expect("no checkout took it yet");
                assert_eq!(kept_hash, hash);
                let held = kept_weight(&root, cutoff, &mut Default::default());
                assert!(held <= stats.kept_bytes, "kept tree holds {held} bytes, the window counts {}", stats.kept_bytes);
                kept_commits += 1;
                full_windows += usize::from(stats.kept_bytes > budget / 4);
            }
            // The next block starts from the kept tree, and reads the same.
            let checked_out = store.checkout(&hash).unwrap().unwrap();
            assert_eq!(checked_out.hash().unwrap(), tree.hash().unwrap());
            tree = checked_out;
        }
        assert_eq!(kept_commits, 299);
        assert!(full_windows > 100, "the window filled in only {full_windows} commits");
    }

    /// A checkout of the writer's newest commit reads what that commit
    /// wrote without the disk; one of an older commit reads it from disk.
    #[test]
    fn a_checkout_of_the_newest_commit_reads_from_memory() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Options::default()).unwrap();
        let path = |i: u32| ["contracts".to_string(), format!("{:02x}", i % 64), i.to_string(), "balance".to_string()];
        let mut tree = Tree::empty();
        for i in 0..2_000 {
            tree.add_mut(&path(i), format!("{i:040}").as_bytes()).unwrap();
        }
        let first = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "t", message: "" }).unwrap();
        tree.add_mut(&path(7), b"changed").unwrap();
        let second = store.commit(&tree, CommitMeta { parents: &[first], date: 2, author: "t", message: "" }).unwrap();
        let reads = || store.io_times().unwrap().reads;

        let before = reads();
        let newest = store.checkout(&second).unwrap().unwrap();
        assert_eq!(newest.find(&path(7)).unwrap().as_deref(), Some(&b"changed"[..]));
        assert_eq!(newest.find(&path(1_999)).unwrap(), Some(format!("{:040}", 1_999).into_bytes()));
        assert_eq!(reads(), before, "the newest commit's tree was read from disk");

        let older = store.checkout(&first).unwrap().unwrap();
        assert_eq!(older.find(&path(7)).unwrap(), Some(format!("{:040}", 7).into_bytes()));
        assert!(reads() > before, "an older commit's tree is read from disk");
    }

    /// The window counts what the kept tree holds, not what its commits
    /// wrote: a version a later commit replaces leaves the count. Blocks
    /// that rewrite a few entries of a tree for far longer than their
    /// writes would fill the budget keep the whole tree, the first commit
    /// included, and a later block updates entries only that commit wrote
    /// without reading the disk.
    #[test]
    fn replaced_versions_leave_the_window() {
        let path = |i: u32| ["contracts".to_string(), format!("{:02x}", i % 64), i.to_string(), "balance".to_string()];
        let genesis = || {
            let mut tree = Tree::empty();
            for i in 0..2_000u32 {
                tree.add_mut(&path(i), &i.to_be_bytes()).unwrap();
            }
            tree
        };
        // The first commit's weight, then a budget whose half holds it
        // about one and a half times.
        let sizing = Store::open_storage(Arc::new(MemStorage::new()), Options::default()).unwrap();
        sizing.commit(&genesis(), CommitMeta { parents: &[], date: 0, author: "t", message: "" }).unwrap();
        let first_weight = sizing.info().kept_bytes;
        let options = Options { cache_bytes: first_weight * 4, ..Options::default() };
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), options).unwrap();
        let mut head = store.commit(&genesis(), CommitMeta { parents: &[], date: 0, author: "t", message: "" }).unwrap();
        let mut written = 0;
        for block in 1..=200u32 {
            let mut tree = store.checkout(&head).unwrap().unwrap();
            // Even entries only: the odd ones stay as the first commit wrote them.
            for k in 0..20u32 {
                tree.add_mut(&path((block * 40 + k * 2) % 2_000), &block.to_be_bytes()).unwrap();
            }
            let before = store.info().pack_bytes;
            head =
                store.commit(&tree, CommitMeta { parents: &[head], date: i64::from(block), author: "t", message: "" }).unwrap();
            written += store.info().pack_bytes - before;
        }
        let stats = store.info();
        let writer = store.repo.write.writer.as_ref().unwrap().lock();
        let first_kept = writer.kept.window.front().map(|(seq, _)| *seq);
        drop(writer);
        assert_eq!(first_kept, Some(1), "the first commit left the window");
        assert!(written > first_weight, "the blocks wrote {written} bytes, less than the budget needs to fill");
        assert!(
            stats.kept_bytes < first_weight * 3 / 2,
            "the window counts {} bytes for a tree of {first_weight}",
            stats.kept_bytes
        );
        let root = store.repo.write.kept.lock().as_ref().and_then(|kept| kept.root.clone()).expect("the newest tree is kept");
        let held = kept_weight(&root, 1, &mut Default::default());
        assert!(held <= stats.kept_bytes, "kept tree holds {held} bytes, the window counts {}", stats.kept_bytes);
        drop(root);

        let reads = || store.io_times().unwrap().reads;
        let before = reads();
        let mut tree = store.checkout(&head).unwrap().unwrap();
        for i in (1..2_000u32).step_by(2).take(100) {
            tree.add_mut(&path(i), b"late").unwrap();
        }
        assert_eq!(reads(), before, "entries of the first commit were read from disk");
        store.commit(&tree, CommitMeta { parents: &[head], date: 201, author: "t", message: "" }).unwrap();
    }

    /// Only a version changed in place leaves the window's count: a
    /// subtree held at two paths and updated under one, and two trees
    /// cloned from one checkout and both committed, keep versions the
    /// other update replaced, and the window still counts them.
    #[test]
    fn shared_versions_stay_counted() {
        let check = |store: &Store| {
            let counted = store.info().kept_bytes;
            let root = store.repo.write.kept.lock().as_ref().and_then(|kept| kept.root.clone()).expect("kept");
            let held = kept_weight(&root, 1, &mut Default::default());
            assert!(held <= counted, "kept tree holds {held} bytes, the window counts {counted}");
        };
        let genesis = || {
            let mut tree = Tree::empty();
            for i in 0..2_000u32 {
                tree.add_mut(&["a".to_string(), i.to_string()], &[1; 40]).unwrap();
            }
            tree
        };

        // A subtree at two paths, updated under one of them.
        let store = Store::open_storage(Arc::new(MemStorage::new()), Options::default()).unwrap();
        let mut tree = genesis();
        tree.copy_mut(&["a"], &["b"]).unwrap();
        let head = store.commit(&tree, CommitMeta { parents: &[], date: 0, author: "t", message: "" }).unwrap();
        let mut tree = store.checkout(&head).unwrap().unwrap();
        for i in (0..2_000u32).step_by(20) {
            tree.add_mut(&["a".to_string(), i.to_string()], &[2; 40]).unwrap();
        }
        store.commit(&tree, CommitMeta { parents: &[head], date: 1, author: "t", message: "" }).unwrap();
        check(&store);

        // Two trees from one checkout, both committed.
        let store = Store::open_storage(Arc::new(MemStorage::new()), Options::default()).unwrap();
        let head = store.commit(&genesis(), CommitMeta { parents: &[], date: 0, author: "t", message: "" }).unwrap();
        let base = store.checkout(&head).unwrap().unwrap();
        let mut one = base.clone();
        for i in 0..2_000u32 {
            one.add_mut(&["a".to_string(), i.to_string()], &[2]).unwrap();
        }
        store.commit(&one, CommitMeta { parents: &[head], date: 1, author: "t", message: "" }).unwrap();
        let mut two = base.clone();
        two.add_mut(&["z"], b"x").unwrap();
        store.commit(&two, CommitMeta { parents: &[head], date: 2, author: "t", message: "" }).unwrap();
        check(&store);
    }

    /// A checkout of the newest commit takes the kept tree: its updates
    /// change the kept inodes in place (written ones are still patched
    /// against the version they were), a second checkout meanwhile reads
    /// from disk, older commits keep their contents, and a checkout
    /// dropped unchanged gives the kept tree back.
    #[test]
    fn a_checkout_of_the_newest_commit_updates_the_kept_tree_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Options::default()).unwrap();
        let path = |i: u32| ["index".to_string(), format!("{i:08x}"), "balance".to_string()];
        let mut tree = Tree::empty();
        for i in 0..3_000u32 {
            tree.add_mut(&path(i), &i.to_be_bytes()).unwrap();
        }
        let first = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "t", message: "" }).unwrap();
        drop(tree);
        let reads = || store.io_times().unwrap().reads;
        let root_of = |tree: &Tree| match tree.node().unwrap() {
            Child::Dir(Ptr::Mem(root, _)) => Arc::as_ptr(root),
            _ => unreachable!("a checkout of the kept tree holds its root"),
        };

        // Dropped unchanged, a checkout gives the kept tree back.
        let unchanged = store.checkout(&first).unwrap().unwrap();
        let kept_root = root_of(&unchanged);
        drop(unchanged);
        let before = reads();
        let mut tree = store.checkout(&first).unwrap().unwrap();
        assert_eq!(root_of(&tree), kept_root, "the kept tree was given back");
        assert_eq!(tree.find(&path(2_999)).unwrap(), Some(2_999u32.to_be_bytes().to_vec()));
        assert_eq!(reads(), before, "read from memory");

        // A second checkout meanwhile reads the same from disk.
        let second = store.checkout(&first).unwrap().unwrap();
        assert_eq!(second.find(&path(5)).unwrap(), Some(5u32.to_be_bytes().to_vec()));
        assert!(reads() > before, "the second checkout read from disk");

        let patches_before = patches(&store);
        for i in [3u32, 1_500, 2_999] {
            tree.add_mut(&path(i), b"changed").unwrap();
        }
        assert_eq!(root_of(&tree), kept_root, "updated in place");
        let mut model = Tree::empty();
        for i in 0..3_000u32 {
            let value = if [3, 1_500, 2_999].contains(&i) { b"changed".to_vec() } else { i.to_be_bytes().to_vec() };
            model.add_mut(&path(i), &value).unwrap();
        }
        let next = store.commit(&tree, CommitMeta { parents: &[first], date: 2, author: "t", message: "" }).unwrap();
        assert_eq!(tree.hash().unwrap(), model.hash().unwrap());
        assert!(patches(&store) > patches_before, "the updated tree inodes were written as patches");
        drop(tree);

        // Both commits read back, the older one from disk.
        for (commit, changed) in [(first, false), (next, true)] {
            let tree = store.checkout(&commit).unwrap().unwrap();
            for i in (0..3_000u32).step_by(7).chain([3, 1_500, 2_999]) {
                let expected =
                    if changed && [3, 1_500, 2_999].contains(&i) { b"changed".to_vec() } else { i.to_be_bytes().to_vec() };
                assert_eq!(tree.find(&path(i)).unwrap(), Some(expected), "commit {commit}, entry {i}");
            }
        }
        assert_eq!(second.hash().unwrap(), store.checkout(&first).unwrap().unwrap().hash().unwrap());
    }

    /// An update of inodes read from disk takes them out of the cache and
    /// changes them in place (no copy of what only the cache shared), still
    /// writes the changed tree inodes as patches, and leaves the older
    /// commit as it was.
    #[test]
    fn an_update_takes_what_it_changes_out_of_the_cache() {
        use crate::cache::Cached;
        let dir = tempfile::tempdir().unwrap();
        let path = |i: u32| ["index".to_string(), format!("{i:08x}"), "balance".to_string()];
        let first = {
            let store = Store::open(dir.path(), Options::default()).unwrap();
            let mut tree = Tree::empty();
            for i in 0..3_000u32 {
                tree.add_mut(&path(i), &i.to_be_bytes()).unwrap();
            }
            store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "t", message: "" }).unwrap()
        };
        // Reopened, the store keeps no tree: the checkout reads through the cache.
        let store = Store::open(dir.path(), Options::default()).unwrap();
        let patches_before = patches(&store);
        let mut tree = store.checkout(&first).unwrap().unwrap();
        let Ok(Child::Dir(Ptr::Stored { offset: root_offset, .. })) = tree.node() else {
            panic!("a checkout of a commit not kept starts from its stored root")
        };
        let root_offset = *root_offset;
        assert_eq!(tree.find(&path(5)).unwrap(), Some(5u32.to_be_bytes().to_vec()));
        let cached_root = match store.repo.read.cache.get(root_offset) {
            Some(Cached::Inode(root, _)) => Arc::as_ptr(&root),
            _ => panic!("the read left the root in the cache"),
        };
        let cached = store.repo.read.cache.len();

        tree.add_mut(&path(5), b"changed").unwrap();
        let Ok(Child::Dir(Ptr::Mem(root, _))) = tree.node() else { panic!("an updated root is in memory") };
        assert_eq!(Arc::as_ptr(root), cached_root, "the cached root was changed in place, not copied");
        assert!(store.repo.read.cache.get(root_offset).is_none(), "the updated root left the cache");
        assert!(store.repo.read.cache.len() < cached, "the inodes on the updated path left the cache");

        let next = store.commit(&tree, CommitMeta { parents: &[first], date: 2, author: "t", message: "" }).unwrap();
        assert!(patches(&store) > patches_before, "the updated tree inodes were written as patches");
        let mut model = Tree::empty();
        for i in 0..3_000u32 {
            let value = if i == 5 { b"changed".to_vec() } else { i.to_be_bytes().to_vec() };
            model.add_mut(&path(i), &value).unwrap();
        }
        assert_eq!(tree.hash().unwrap(), model.hash().unwrap());
        drop(tree);
        drop(store);
        let store = Store::open(dir.path(), Options::default()).unwrap();
        for (commit, changed) in [(first, false), (next, true)] {
            let tree = store.checkout(&commit).unwrap().unwrap();
            for i in (0..3_000u32).step_by(11).chain([5]) {
                let expected = if changed && i == 5 { b"changed".to_vec() } else { i.to_be_bytes().to_vec() };
                assert_eq!(tree.find(&path(i)).unwrap(), Some(expected), "commit {commit}, entry {i}");
            }
        }
    }
}
