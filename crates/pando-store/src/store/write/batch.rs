//! Step 2 of the commit protocol (see `commit`): encoding a commit's new
//! inodes, children before parents, into one batch of records, written in
//! pieces when it grows large; and the checks made before, that a tree
//! refers only to records the pack still holds.

use pando_core::Hash;
use pando_core::dir::{dir_ptr_hash, hash_subtree, inode_ptr_hash};
use pando_core::inode::ENTRIES;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::ScopedJoinHandle;

use super::hashing::{Claims, is_subtree, position};
use crate::crash_point;
use crate::dict::{Dict, RawSteps};
use crate::error::{Error, Result};
use crate::format::node::{encode_tree, encode_values, note_raw_steps, resolve_children, values_len};
use crate::format::patch::{MAX_PATCH_CHAIN, MAX_PATCH_CHANGES, MAX_ROOT_CHANGES, TreePatch, encode_values_patch};
use crate::format::record::{self, RecordKind};
use crate::node::{
    BaseShape, Body, ChainRoot, Child, Inode, Leaf, Loader, PatchBase, Pointers, Ptr, Value, Written, prefetch_children_meta,
};

/// Builds one commit's batch of records.
pub(in crate::store) struct Batch<'a, 's> {
    /// The store instance writing: marks of other instances are ignored.
    pub(in crate::store) instance: u64,
    /// Logical offset of the batch's first byte not yet appended.
    pub(in crate::store) base: u64,
    /// Logical offset of the batch's first byte: records from there on
    /// are this commit's.
    pub(in crate::store) start: u64,
    pub(in crate::store) buf: Vec<u8>,
    pub(in crate::store) payload: Vec<u8>,
    /// A value inode's record as a patch, beside its full record in
    /// `payload`: the shorter is written.
    pub(in crate::store) patch: Vec<u8>,
    pub(in crate::store) dict: &'a Dict,
    pub(in crate::store) loader: &'a dyn Loader,
    pub(in crate::store) pack: &'a crate::pack::Pack,
    /// Every record the tree refers to is known to be held (see
    /// `Tree::refs_held_at`): the pack is not asked.
    pub(in crate::store) refs_held: bool,
    pub(in crate::store) raw_steps: RawSteps,
    /// Staged blobs the written inodes refer to: released once the commit
    /// is in the index (`StagedSet::committed`).
    pub(in crate::store) staged: Vec<u64>,
    /// Bytes of records held before they are appended to the pack.
    pub(in crate::store) spill_bytes: usize,
    /// This commit's number in the writer's count, and the oldest commit
    /// whose inodes the kept tree may still hold.
    pub(in crate::store) seq: u32,
    pub(in crate::store) cutoff: u32,
    /// Memory the kept inodes of this commit hold, and how much they may.
    pub(in crate::store) kept_weight: u64,
    pub(in crate::store) keep_room: u64,
    /// The commits and weights of kept inodes this batch wrote new
    /// versions of: they leave the kept tree with this commit.
    pub(in crate::store) superseded: Vec<(u32, u64)>,
    /// Where a thread appending the pieces of a large batch is started.
    pub(in crate::store) scope: &'s std::thread::Scope<'s, 'a>,
    pub(in crate::store) spill: Option<Spill<'s>>,
    /// Whether the subtrees of large directories are hashed whole (a
    /// large commit, see `hashing::is_large`).
    pub(in crate::store) subtrees_whole: bool,
    /// The subtrees the commit's helper hashes beside this thread, if it
    /// has one.
    pub(in crate::store) shared: Option<SharedHashing<'a>>,
}

/// The committing thread's view of the subtrees it hashes with the
/// helper (see `hashing::Claims`).
pub(in crate::store) struct SharedHashing<'a> {
    pub(in crate::store) subtrees: &'a [(&'a Arc<Inode>, u32)],
    pub(in crate::store) claims: &'a Claims,
    /// The next subtree to write, and the one before which this thread
    /// takes subtrees to hash from the last.
    pub(in crate::store) next: usize,
    pub(in crate::store) last: usize,
}

impl SharedHashing<'_> {
    /// Sees that `inode`, a subtree at `depth` about to be written, is
    /// hashed: by the helper, or by this thread if the helper did not
    /// take it. While the helper hashes it, this thread hashes the last
    /// subtrees nobody took, then waits.
    fn hashed(&mut self, inode: &Arc<Inode>, depth: u32, loader: &dyn Loader) -> Result<()> {
        let Some(k) = position(self.subtrees, inode, self.next) else {
            hash_subtree(inode, depth, loader)?;
            return Ok(());
        };
        self.next = k + 1;
        if self.claims.take(k) {
            hash_subtree(inode, depth, loader)?;
            return Ok(());
        }
        let mut spins = 0u32;
        while inode.memo_hash(depth).is_none() {
            if self.last > self.next {
                self.last -= 1;
                if self.claims.take(self.last) {
                    let (other, other_depth) = self.subtrees[self.last];
                    hash_subtree(other, other_depth, loader)?;
                }
                continue;
            }
            if self.claims.take(k) {
                // Given back: the helper could not hash it.
                hash_subtree(inode, depth, loader)?;
                break;
            }
            // The helper hashes it (a block's subtree takes it tens of
            // microseconds; a huge commit's, longer: then this thread
            // lets others run while it waits).
            spins += 1;
            if spins < SPINS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        Ok(())
    }
}

/// Spins the committing thread waits for the helper before it yields.
const SPINS: u32 = 1 << 12;

/// What the kept tree holds of an inode a batch wrote or met written.
pub(in crate::store) enum Kept {
    /// The inode itself.
    Itself,
    /// A copy of it holding stored pointers instead of some children.
    Copy(Arc<Inode>),
    /// Nothing: the kept tree has no room for it, or it is older than the
    /// window; its parent holds a stored pointer.
    No,
}

/// The thread appending a large batch's pieces to the pack while the next
/// ones are encoded, in order; it hands the emptied buffers back.
pub(in crate::store) struct Spill<'s> {
    pub(in crate::store) pieces: SyncSender<(u64, Vec<u8>)>,
    pub(in crate::store) emptied: Receiver<Vec<u8>>,
    pub(in crate::store) writer: ScopedJoinHandle<'s, Result<()>>,
}

impl<'a, 's> Batch<'a, 's> {
    fn next_offset(&self) -> u64 {
        self.base + self.buf.len() as u64
    }

    /// Appends the payload as a record; the batch so far goes to the pack
    /// once it holds `spill_bytes`, to the same chunk (a batch never
    /// straddles two chunks), written by the spill thread.
    pub(in crate::store) fn push_record(&mut self, kind: RecordKind) -> Result<u64> {
        let at = self.next_offset();
        record::append(&mut self.buf, kind, &self.payload);
        if self.buf.len() >= self.spill_bytes {
            self.spill()?;
        }
        Ok(at)
    }

    /// Hands the batch so far to the spill thread (started on the first
    /// piece) and goes on in an emptied buffer.
    pub(in crate::store) fn spill(&mut self) -> Result<()> {
        let pack = self.pack;
        let spill = self.spill.get_or_insert_with(|| {
            let (pieces, received) = sync_channel::<(u64, Vec<u8>)>(1);
            let (give_back, emptied) = sync_channel(2);
            let writer = self.scope.spawn(move || {
                for (at, mut piece) in received {
                    pack.append(at, &piece)?;
                    crash_point::reach("after-spill");
                    piece.clear();
                    let _ = give_back.try_send(piece);
                }
                Ok(())
            });
            Spill { pieces, emptied, writer }
        });
        let next = spill.emptied.try_recv().unwrap_or_else(|_| Vec::with_capacity(self.buf.capacity()));
        let piece = std::mem::replace(&mut self.buf, next);
        let at = self.base;
        self.base += piece.len() as u64;
        if spill.pieces.send((at, piece)).is_err() {
            // The thread stopped on an error: that error.
            self.finish_spill()?;
            unreachable!("the spill thread stops early only on an error");
        }
        Ok(())
    }

    /// Waits until the pieces handed to the spill thread are in the pack.
    pub(in crate::store) fn finish_spill(&mut self) -> Result<()> {
        let Some(Spill { pieces, writer, .. }) = self.spill.take() else { return Ok(()) };
        drop(pieces);
        writer.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    /// The offset a node in memory was written at by this store instance,
    /// if that record is still held with all it refers to (a collection may
    /// have removed it, or kept it only as a patch base).
    fn written_at(&self, offset: Option<u64>) -> Option<u64> {
        offset.filter(|&o| self.refs_held || self.pack.holds_whole(o))
    }

    /// Whether the record at `offset` is held (a patch's base need not be
    /// whole: the patch names the children it replaces).
    fn holds(&self, offset: u64) -> bool {
        self.refs_held || self.pack.holds(offset)
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

    /// Writes a child inode at `depth`, then hashes it (`hash`: once its
    /// record is encoded, its children are hashed, so hashing it hashes
    /// only itself, and a commit encodes and hashes each inode in turn
    /// while the helper hashes from the other end). Returns its offset,
    /// its hash and, when the kept copy of its parent must not hold the
    /// child itself, what it holds instead: the child's kept copy, or a
    /// stored pointer (nothing once the commit's room for kept inodes is
    /// used up: no parent is kept then). `since` takes the oldest commit
    /// of the kept child.
    fn write_child(
        &mut self,
        child: &Arc<Inode>,
        depth: u32,
        hash: impl FnOnce() -> Result<Hash>,
        since: &mut u32,
    ) -> Result<(u64, Hash, Option<Ptr>)> {
        let (offset, kept) = self.write_inode(child, depth)?;
        let hash = hash()?;
        if self.kept_weight > self.keep_room {
            // The room is used up, and the weight only grows: the parent
            // will not be kept either, so what its copy would hold instead
            // of the child does not matter.
            return Ok((offset, hash, None));
        }
        let oldest = |kept: &Inode| kept.kept_since().expect("a kept inode knows since when");
        Ok(match kept {
            Kept::Itself => {
                *since = (*since).min(oldest(child));
                (offset, hash, None)
            }
            Kept::Copy(copy) => {
                *since = (*since).min(oldest(&copy));
                (offset, hash, Some(Ptr::mem_hashed(copy, hash)))
            }
            Kept::No => (offset, hash, Some(Ptr::stored(offset, hash))),
        })
    }

    /// Writes the inode and its new descendants. Returns its offset and its
    /// kept form (see [`Repo::commit`]).
    pub(in crate::store) fn write_inode(&mut self, inode: &Arc<Inode>, depth: u32) -> Result<(u64, Kept)> {
        if let Some(offset) = self.written_at(inode.stored_offset(self.instance)) {
            let kept = if inode.kept_since().is_some_and(|since| since >= self.cutoff) { Kept::Itself } else { Kept::No };
            return Ok((offset, kept));
        }
        // A subtree of a large directory is hashed whole first, level by
        // level (see `dir::hash_subtree`): the records below need hashes
        // of their children, which are then known.
        if self.subtrees_whole && is_subtree(inode, depth) && inode.memo_hash(depth).is_none() {
            match &mut self.shared {
                Some(shared) => shared.hashed(inode, depth, self.loader)?,
                None => {
                    hash_subtree(inode, depth, self.loader)?;
                }
            }
        }
        // Children first; `cuts` are the children the kept copy holds
        // otherwise than this inode does.
        let mut since = self.seq;
        let mut weight = inode.cache_weight();
        let mut cuts: Vec<(usize, Ptr)> = Vec::new();
        let mut written: smallvec::SmallVec<[u64; ENTRIES]> = smallvec::SmallVec::new();
        let mut patch_chain = 0;
        // A tree inode's chain root once written (see `ChainRoot`).
        let mut root = None;
        // Whether a value of this inode was written again, its record
        // collected: its mark, set once, still names the old record, so
        // the kept tree must not hold it (nor this inode, below).
        let mut stale_value = false;
        // A tree inode written as a patch, and the children it names; a
        // value inode's base, if it may be written as a patch over it.
        let (patch, values_base) = match &inode.body {
            Body::Tree(pointers) => (inode.take_patch_base().and_then(|base| self.patch_plan(&base, pointers)), None),
            Body::Values(_) => (None, inode.take_patch_base().filter(|base| self.may_patch(base))),
        };
        // With every record the tree refers to held, and every child kept
        // since the window began (the base's oldest is), a patch visits only
        // the children it names: the others are the base's, written and
        // kept as they were, none older than the base says.
        let only = match &patch {
            Some(plan) if self.refs_held && plan.since >= self.cutoff => {
                since = since.min(plan.since);
                Some(plan.named)
            }
            _ => None,
        };
        // What writing reads of each child in memory it visits: where it
        // was written, since when it is kept.
        prefetch_children_meta(inode, only);
        let kind = match &inode.body {
            Body::Values(values) => {
                for (i, child) in values.children().enumerate() {
                    match child {
                        Child::Contents(Leaf::Value(value)) => {
                            let offset = self.write_blob(value)?;
                            stale_value |= value.stored_offset(self.instance) != Some(offset);
                            written.push(offset);
                            weight += value.weight();
                        }
                        Child::Dir(ptr @ Ptr::Mem(root, _)) => {
                            let loader = self.loader;
                            let (offset, _, cut) = self.write_child(root, 0, || dir_ptr_hash(ptr, loader), &mut since)?;
                            written.push(offset);
                            cuts.extend(cut.map(|ptr| (i, ptr)));
                        }
                        Child::Contents(Leaf::Staged(staged)) => self.staged.push(staged.offset),
                        Child::Contents(Leaf::Inline(_) | Leaf::Blob { .. }) | Child::Dir(Ptr::Stored { .. }) => {}
                    }
                }
                let at = self.next_offset();
                let resolved = resolve_children(values, &written);
                self.payload.clear();
                match values_base.as_deref().and_then(|base| match &base.shape {
                    BaseShape::Values(marks) => Some((base, marks)),
                    BaseShape::Tree { .. } => None,
                }) {
                    // The shorter way is written (the full record is
                    // measured, and encoded only if chosen; a patch naming
                    // at most half of four or more entries is surely
                    // shorter); the steps it writes raw are noted only
                    // once it is chosen.
                    Some((base, marks)) => {
                        self.patch.clear();
                        let (inserted, named) = encode_values_patch(
                            base.offset,
                            marks,
                            values,
                            &resolved,
                            self.start,
                            at,
                            self.dict,
                            &mut self.patch,
                        );
                        let surely_shorter = values.len() >= 4 && 2 * named <= values.len();
                        if surely_shorter || self.patch.len() < values_len(values, at, &resolved, self.dict) {
                            std::mem::swap(&mut self.patch, &mut self.payload);
                            note_raw_steps(inserted.iter().map(|&j| values.step(j)), self.dict, &mut self.raw_steps);
                            patch_chain = base.chain + 1;
                            RecordKind::ValuesPatch
                        } else {
                            encode_values(values, at, &resolved, self.dict, Some(&mut self.raw_steps), &mut self.payload);
                            RecordKind::Values
                        }
                    }
                    None => {
                        encode_values(values, at, &resolved, self.dict, Some(&mut self.raw_steps), &mut self.payload);
                        RecordKind::Values
                    }
                }
            }
            Body::Tree(pointers) => {
                assert_eq!(pointers.depth, depth, "tree inode written at the wrong depth");
                let mut children: smallvec::SmallVec<[(usize, u64, Hash); ENTRIES]> = smallvec::SmallVec::new();
                let loader = self.loader;
                for (i, ptr) in pointers.iter() {
                    if only.is_some_and(|changed| changed & (1 << i) == 0) {
                        continue;
                    }
                    let hash = || inode_ptr_hash(ptr, depth + 1, loader);
                    let (offset, hash) = match ptr {
                        Ptr::Mem(child, _) => {
                            let (offset, hash, cut) = self.write_child(child, depth + 1, hash, &mut since)?;
                            cuts.extend(cut.map(|ptr| (i, ptr)));
                            (offset, hash)
                        }
                        Ptr::Stored { offset, .. } => (*offset, hash()?),
                    };
                    children.push((i, offset, hash));
                }
                let at = self.next_offset();
                self.payload.clear();
                match patch.and_then(|plan| patch_of(&plan, self.start, pointers, &children)) {
                    Some((patch, chain, chain_root)) => {
                        patch.encode(at, &mut self.payload);
                        patch_chain = chain;
                        root = chain_root;
                        RecordKind::TreePatch
                    }
                    None => {
                        // (Visiting only the children a patch names makes
                        // no other change: that patch is written.)
                        assert!(only.is_none(), "a tree inode written in full from some of its children");
                        encode_tree(depth, pointers.len, &children, at, &mut self.payload);
                        root = Some(ChainRoot { offset: at, changed: 0 });
                        RecordKind::Tree
                    }
                }
            }
        };
        let at = self.push_record(kind)?;
        // A node whose record a collection removed keeps its old mark: it
        // is not kept, and is written again whenever it is met. Nor is
        // one holding such a value: a tree taken from the kept tree is
        // trusted to refer only to held records (`refs_held`), and the
        // value's mark would make the next commit refer to the old one.
        let rewritten = inode.is_stored();
        inode.mark_stored(self.instance, at, patch_chain);
        if let Body::Tree(pointers) = &inode.body {
            // (One written again keeps its old mark: no chain to go on.)
            pointers.note.set(root.filter(|_| !rewritten));
        }
        self.superseded.extend(inode.take_replaced());
        self.kept_weight += weight;
        if rewritten || stale_value || self.kept_weight > self.keep_room {
            return Ok((at, Kept::No));
        }
        if cuts.is_empty() {
            inode.keep_since(since);
            inode.count_kept(self.seq, weight);
            return Ok((at, Kept::Itself));
        }
        let mut body = inode.body.clone();
        for (i, ptr) in cuts {
            match &mut body {
                Body::Values(values) => *values.child_mut(i) = Child::Dir(ptr),
                Body::Tree(pointers) => pointers.put(i, Some(ptr)),
            }
        }
        let copy = Inode::new(body);
        copy.mark_stored(self.instance, at, patch_chain);
        copy.remember_hashes_of(inode);
        copy.keep_since(since);
        copy.count_kept(self.seq, weight);
        Ok((at, Kept::Copy(Arc::new(copy))))
    }
}

/// Checks that every stored record the unwritten part of a tree refers to
/// is still held by the pack (after a garbage collection, a tree taken from
/// a collected commit may refer to records that are gone). Runs before
/// anything is encoded, so a refused commit leaves no stored marks behind.
pub(in crate::store) fn check_refs(instance: u64, pack: &crate::pack::Pack, inode: &Arc<Inode>) -> Result<()> {
    let held = |offset: u64| if pack.holds(offset) { Ok(()) } else { Err(Error::Collected { offset }) };
    // An inode is referred to whole: a patch base kept only for its
    // patches is not (the children they replaced are gone).
    let whole = |offset: u64| if pack.holds_whole(offset) { Ok(()) } else { Err(Error::Collected { offset }) };
    // A node in memory whose record was collected is written again.
    if inode.stored_offset(instance).is_some_and(|offset| pack.holds_whole(offset)) {
        return Ok(());
    }
    match &inode.body {
        Body::Values(values) => {
            for child in values.children() {
                match child {
                    Child::Contents(Leaf::Inline(_) | Leaf::Value(_)) => {}
                    Child::Contents(Leaf::Blob { offset, .. }) => held(*offset)?,
                    Child::Dir(Ptr::Stored { offset, .. }) => whole(*offset)?,
                    // Kept by every collection while the tree holds it.
                    Child::Contents(Leaf::Staged(staged)) => held(staged.offset)?,
                    Child::Dir(Ptr::Mem(root, _)) => check_refs(instance, pack, root)?,
                }
            }
        }
        Body::Tree(pointers) => {
            for (_, child) in pointers.iter() {
                match child {
                    Ptr::Stored { offset, .. } => whole(*offset)?,
                    Ptr::Mem(inode, _) => check_refs(instance, pack, inode)?,
                }
            }
        }
    }
    Ok(())
}

impl Batch<'_, '_> {
    /// Whether an inode may be written as a patch against `base`, the
    /// written version it derives from: a base this store instance wrote,
    /// still held, short of the end of its chain.
    fn may_patch(&self, base: &PatchBase) -> bool {
        base.instance == self.instance && base.chain < MAX_PATCH_CHAIN && self.holds(base.offset)
    }

    /// How a tree inode may be written as a patch, derived from `base`:
    /// over `base` itself, naming the children whose pointer changed
    /// ([`Pointers::changed`]) or that are in one version only, while its
    /// chain is short of [`MAX_PATCH_CHAIN`] and they are at most
    /// [`max_patch_changes`]; otherwise over its chain's root (a full
    /// record), naming every child changed since, while they are at most
    /// [`max_root_changes`]: a chain starts again at 1 without a full
    /// record. `None` to write it in full: a base of another store
    /// instance or that a collection removed, of another depth, or too
    /// many changes either way.
    fn patch_plan(&self, base: &PatchBase, pointers: &Pointers) -> Option<Plan> {
        let BaseShape::Tree { depth, bitmap } = base.shape else { return None };
        if base.instance != self.instance || depth != pointers.depth {
            return None;
        }
        let changed = (pointers.changed() | (bitmap ^ pointers.bitmap())) & (bitmap | pointers.bitmap());
        let count = changed.count_ones() as usize;
        let since = base.since;
        // Noted when the version `base` is was written (copied with the
        // pointers since).
        let root = pointers.note.get();
        if self.may_patch(base) && (1..=max_patch_changes(pointers)).contains(&count) {
            return Some(Plan {
                over: base.offset,
                chain: base.chain + 1,
                named: changed,
                limit: max_patch_changes(pointers),
                since,
                root,
            });
        }
        let root = root?;
        let named = root.changed | changed;
        let limit = max_root_changes(pointers);
        (named != 0 && named.count_ones() as usize <= limit && self.holds(root.offset)).then_some(Plan {
            over: root.offset,
            chain: 1,
            named,
            limit,
            since,
            root: Some(root),
        })
    }
}

/// How a tree inode is written as a patch (from [`Batch::patch_plan`]).
pub(in crate::store) struct Plan {
    /// The record it patches, and the patch's place in its chain.
    over: u64,
    chain: u8,
    /// The children it names (more if written again this commit), and
    /// the most it may.
    named: u32,
    limit: usize,
    /// The oldest commit of the base's kept subtree.
    since: u32,
    /// Its chain's root as noted when its base was written: once it is
    /// written, the children changed since are those, and the ones it
    /// names.
    root: Option<ChainRoot>,
}

/// The most children a patch of a tree inode of `pointers` names: fewer
/// than it holds, so that the patch is shorter than the full record (each
/// named child costs what it costs there, and a patch's header 5 bytes
/// more), and at most [`MAX_PATCH_CHANGES`].
fn max_patch_changes(pointers: &Pointers) -> usize {
    pointers.count().saturating_sub(1).min(MAX_PATCH_CHANGES)
}

/// The most children a patch over its chain's root names: as
/// [`max_patch_changes`], at most [`MAX_ROOT_CHANGES`].
fn max_root_changes(pointers: &Pointers) -> usize {
    pointers.count().saturating_sub(1).min(MAX_ROOT_CHANGES)
}

/// The patch of `plan` (from [`Batch::patch_plan`]), naming also any
/// child this commit wrote (its records start at `start`: a child written
/// again after a collection removed its record is one); `None` if that
/// makes more than the plan's limit. `children` are the inode's written
/// children met: index, offset and hash, every one a patch names among
/// them. Returns the patch, its place in its chain, and the chain's root.
fn patch_of(
    plan: &Plan,
    start: u64,
    pointers: &Pointers,
    children: &[(usize, u64, Hash)],
) -> Option<(TreePatch, u8, Option<ChainRoot>)> {
    let mut now = [None; ENTRIES];
    let mut changed = plan.named;
    for &(i, offset, hash) in children {
        now[i] = Some((offset, hash));
        if offset >= start {
            changed |= 1 << i;
        }
    }
    let changes: Vec<_> = (0..ENTRIES).filter(|i| changed & (1 << i) != 0).map(|i| (i, now[i])).collect();
    if changes.len() > plan.limit {
        return None;
    }
    let root = plan.root.map(|root| ChainRoot { changed: root.changed | changed, ..root });
    Some((TreePatch { depth: pointers.depth, len: pointers.len, base: plan.over, changes }, plan.chain, root))
}

#[cfg(test)]
mod tests {
    use crate::format::patch::TreePatch;
    use crate::format::record::RecordKind;
    use crate::node::{Child, Ptr, Written};
    use crate::{Options, Store};
    use pando_core::inode::index;

    fn step(i: u32) -> String {
        format!("{i:08x}")
    }

    fn path(i: u32) -> [String; 3] {
        ["index".to_string(), step(i), "balance".to_string()]
    }

    /// A tree of 3,000 accounts under `index` (a directory whose root is a
    /// tree inode).
    fn accounts(store: &Store) -> crate::Tree {
        let mut tree = store.empty_tree();
        for i in 0..3_000u32 {
            tree.add_mut(&path(i), &i.to_be_bytes()).unwrap();
        }
        tree
    }

    /// Where the root of `tree`'s `index` directory was written.
    fn index_root(store: &Store, tree: &crate::Tree) -> u64 {
        match tree.find_tree(&["index"]).unwrap().unwrap().node().unwrap() {
            Child::Dir(Ptr::Mem(root, _)) => root.stored_offset(store.repo.read.id).expect("written"),
            _ => panic!("the kept tree holds the directory's root"),
        }
    }

    /// A written tree inode updated in place is written again as a patch
    /// that names the children which changed and no other: its pointers
    /// count them, its other children are not read.
    #[test]
    fn a_patch_names_the_changed_children_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Options::default()).unwrap();
        let tree = accounts(&store);
        let first = store.commit(&tree, crate::CommitMeta { parents: &[], date: 1, author: "t", message: "" }).unwrap();
        drop(tree);

        // Two entries under two different children of the directory's root.
        let (a, b) = (5u32, (6..3_000).find(|&i| index(0, step(i).as_bytes()) != index(0, step(5).as_bytes())).unwrap());
        let mut tree = store.checkout(&first).unwrap().unwrap();
        let base = index_root(&store, &tree);
        tree.add_mut(&path(a), b"changed").unwrap();
        tree.add_mut(&path(b), b"changed").unwrap();
        store.commit(&tree, crate::CommitMeta { parents: &[first], date: 2, author: "t", message: "" }).unwrap();

        let written = index_root(&store, &tree);
        let (kind, payload) = store.repo.read.pack.read_record(written).unwrap();
        assert_eq!(kind, RecordKind::TreePatch, "the root of the directory was patched");
        let patch = TreePatch::decode(&payload, written, 0).unwrap();
        assert_eq!(patch.base, base);
        let mut changed: Vec<usize> = patch.changes.iter().map(|(i, _)| *i).collect();
        changed.sort_unstable();
        let mut expected = vec![index(0, step(a).as_bytes()), index(0, step(b).as_bytes())];
        expected.sort_unstable();
        assert_eq!(changed, expected);
        assert!(patch.changes.iter().all(|(_, pointer)| pointer.is_some_and(|(offset, _)| offset > base)));
    }

    /// At the end of its chain a tree inode is written as a patch over the
    /// chain's full record, naming every child changed since: the chain
    /// starts again at 1, and every version reads back.
    #[test]
    fn a_chain_starts_again_over_its_full_record() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Options::default()).unwrap();
        let commit = |tree: &crate::Tree, parents: &[pando_core::Hash]| {
            store.commit(tree, crate::CommitMeta { parents, date: 1, author: "t", message: "" }).unwrap()
        };
        let mut tree = accounts(&store);
        let mut commits = vec![commit(&tree, &[])];
        let full = index_root(&store, &tree);
        // Six versions, each changing an entry under another child of the
        // directory's root.
        let mut seen = std::collections::BTreeSet::new();
        let changes: Vec<u32> = (0..3_000).filter(|&i| seen.insert(index(0, step(i).as_bytes()))).take(6).collect();
        let mut written = Vec::new();
        for &i in &changes {
            tree.add_mut(&path(i), b"changed").unwrap();
            let parents = [*commits.last().unwrap()];
            commits.push(commit(&tree, &parents));
            let at = index_root(&store, &tree);
            let (kind, payload) = store.repo.read.pack.read_record(at).unwrap();
            assert_eq!(kind, RecordKind::TreePatch);
            written.push(TreePatch::decode(&payload, at, 0).unwrap());
        }
        for (k, patch) in written.iter().enumerate().take(4) {
            assert_eq!(patch.changes.len(), 1, "version {k} patches the one before");
        }
        assert_eq!(written[4].base, full, "the fifth version patches the chain's full record");
        let named: Vec<usize> = written[4].changes.iter().map(|(i, _)| *i).collect();
        let mut expected: Vec<usize> = changes[..5].iter().map(|&i| index(0, step(i).as_bytes())).collect();
        expected.sort_unstable();
        assert_eq!(named, expected, "naming every child changed since");
        assert_eq!(written[5].changes.len(), 1, "and the next version patches it");
        drop(tree);
        store.close().unwrap();
        let store = Store::open(dir.path(), Options::default()).unwrap();
        for (k, commit) in commits.iter().enumerate() {
            let tree = store.checkout(commit).unwrap().unwrap();
            for (n, &i) in changes.iter().enumerate() {
                let expected = if n < k { b"changed".to_vec() } else { i.to_be_bytes().to_vec() };
                assert_eq!(tree.find(&path(i)).unwrap(), Some(expected), "commit {k}, entry {i}");
            }
        }
    }
}
