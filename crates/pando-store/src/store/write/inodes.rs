//! Step 2 of the commit protocol (see `commit`): writing a commit's new
//! inodes into its [`Batch`], children before parents. Each inode goes
//! through four steps: **plan** (written already? what patch may it
//! be?), **children** (its new descendants first), **encode** (its record,
//! in full or as a patch), **keep** (its state becomes Written, and the
//! kept tree holds it, a copy of it, or nothing). Beside them, the check
//! made before anything is encoded: a tree refers only to records the
//! pack still holds.
//!
//! Invariants:
//! - A record refers only to records before it: children are written
//!   first (asserted in `Writing::encode`).
//! - An inode is written once per commit; one written already is met
//!   again as it is, unless a collection removed its record (asserted in
//!   `State::write` and `State::begin_write`, which refuse a second write).
//! - A patch names at most its limit of children, and every child it
//!   does not name is its base's (asserted in `patch_of` and
//!   `Writing::encode`).
//! - No inode the kept tree holds is older than the window, nor newer
//!   than its subtree says (asserted in `Writing::keep`).

use pando_core::Hash;
use pando_core::dir::{dir_ptr_hash, hash_subtree, inode_ptr_hash};
use pando_core::inode::ENTRIES;
use std::sync::Arc;

use super::batch::Batch;
use super::hashing::SharedHashing;
use super::kept::{Keeping, Kept};
use crate::dict::{Dict, RawSteps};
use crate::error::{Error, Result};
use crate::format::node::{encode_tree, encode_values, note_raw_steps, resolve_children, values_len};
use crate::format::patch::{MAX_PATCH_CHAIN, MAX_PATCH_CHANGES, MAX_ROOT_CHANGES, TreePatch, encode_values_patch};
use crate::format::record::RecordKind;
use crate::node::{
    BaseShape, Body, ChainRoot, Child, Claim, Inode, KeptMark, Leaf, Loader, PatchBase, Pointers, Ptr, State, Value, Written,
    cache_weight, prefetch_children_meta,
};
use crate::pack::Pack;

/// Writes one commit's new inodes into its batch.
pub(in crate::store) struct Writing<'a, 's> {
    pub(in crate::store) batch: Batch<'a, 's>,
    pub(in crate::store) holding: Holding<'a>,
    pub(in crate::store) encoder: Encoder<'a>,
    pub(in crate::store) keeping: Keeping,
    pub(in crate::store) hashing: Hashing<'a>,
    pub(in crate::store) loader: &'a dyn Loader,
    /// Staged blobs the written inodes refer to: released once the commit
    /// is in the index (`StagedSet::committed`).
    pub(in crate::store) staged: Vec<u64>,
}

/// What the pack holds, as the writer may trust it.
pub(in crate::store) struct Holding<'a> {
    /// The store instance writing: marks of other instances are ignored.
    pub(in crate::store) instance: u64,
    pub(in crate::store) pack: &'a Pack,
    /// Every record the tree refers to is known to be held (see
    /// `Tree::refs_held_at`): the pack is not asked.
    pub(in crate::store) refs_held: bool,
}

/// Turns inodes into records' payloads.
pub(in crate::store) struct Encoder<'a> {
    payload: Vec<u8>,
    /// A value inode's record as a patch, beside its full record in
    /// `payload`: the shorter is written.
    patch: Vec<u8>,
    dict: &'a Dict,
    /// Steps written raw, for the dictionary to learn.
    pub(in crate::store) raw_steps: RawSteps,
}

/// Whether (and with whom) the subtrees of large directories are hashed
/// whole before they are written (see `hashing::is_large`).
pub(in crate::store) struct Hashing<'a> {
    pub(in crate::store) subtrees_whole: bool,
    /// The subtrees the commit's helper hashes beside this thread, if it
    /// has one.
    pub(in crate::store) shared: Option<SharedHashing<'a>>,
}

impl Hashing<'_> {
    /// Sees that `inode`, a subtree at `depth` about to be written, is
    /// hashed: by the helper if it takes it, or by this thread.
    fn hashed(&mut self, inode: &Arc<Inode>, depth: u32, loader: &dyn Loader) -> Result<()> {
        match &mut self.shared {
            Some(shared) => shared.hashed(inode, depth, loader),
            None => hash_subtree(inode, depth, loader).map(drop),
        }
    }
}

impl<'a> Encoder<'a> {
    pub(in crate::store) fn new(dict: &'a Dict) -> Encoder<'a> {
        Encoder { payload: Vec::with_capacity(4096), patch: Vec::with_capacity(1024), dict, raw_steps: RawSteps::default() }
    }
}

/// What the plan step decided for an inode not written yet.
struct InodePlan {
    /// A tree inode's patch, if it may be one.
    tree_patch: Option<Plan>,
    /// A value inode's base, if it may be written as a patch over it.
    values_base: Option<PatchBase>,
    /// The only children to visit (a patch over a kept base): the others
    /// are the base's, written and kept as they were.
    only: Option<u32>,
    /// The oldest commit of the kept subtree so far.
    since: u32,
    /// Written before, its record since collected: written again.
    again: bool,
}

/// What the children step found of an inode's children.
#[derive(Default)]
struct Children {
    /// A values inode's children in memory (values and directories), their
    /// offsets in order; a tree inode's children visited, index, offset
    /// and hash.
    offsets: smallvec::SmallVec<[u64; ENTRIES]>,
    pointers: smallvec::SmallVec<[(usize, u64, Hash); ENTRIES]>,
    /// The children the kept copy holds otherwise than this inode does.
    cuts: Vec<(usize, Ptr)>,
    /// The oldest commit of the kept subtree, and its weight.
    since: u32,
    weight: u64,
    /// A value of this inode was written again, its record collected: its
    /// mark, set once, still names the old record, so the kept tree must
    /// not hold it (nor this inode).
    stale_value: bool,
}

/// The record encoded for an inode.
struct Encoded {
    kind: RecordKind,
    chain: u8,
    root: Option<ChainRoot>,
}

impl Writing<'_, '_> {
    /// Writes the inode and its new descendants. Returns its offset and its
    /// kept form.
    pub(in crate::store) fn write_inode(&mut self, inode: &Arc<Inode>, depth: u32) -> Result<(u64, Kept)> {
        let plan = match self.plan(inode, depth)? {
            Ok(plan) => plan,
            Err(met) => return Ok(met),
        };
        // Some 2 KB, filled where it lies: moving it between the steps
        // cost 2.4% of a `small` replay's instructions.
        let mut children = Children { since: plan.since, weight: cache_weight(inode), ..Children::default() };
        self.children(inode, depth, &plan, &mut children)?;
        let at = self.batch.next_offset();
        let again = plan.again;
        let encoded = self.encode(inode, depth, plan, &children, at);
        let written = self.batch.push(encoded.kind, &self.encoder.payload)?;
        debug_assert_eq!(written, at, "the record is where it was encoded for");
        Ok((at, self.keep(inode, at, encoded, &mut children, again)))
    }

    /// The plan step: an inode written already (its offset and kept form,
    /// as `Err`), or how to write it.
    fn plan(&mut self, inode: &Arc<Inode>, depth: u32) -> Result<std::result::Result<InodePlan, (u64, Kept)>> {
        if let Some(offset) = self.holding.written_at(inode.meta.offset_for(self.holding.instance)) {
            let kept = inode.meta.kept_since().is_some_and(|since| since >= self.keeping.cutoff);
            return Ok(Err((offset, if kept { Kept::Itself } else { Kept::No })));
        }
        // A subtree of a large directory is hashed whole first, level by
        // level (see `dir::hash_subtree`): the records below need hashes
        // of their children, which are then known.
        if self.hashing.subtrees_whole && super::hashing::is_subtree(inode, depth) && inode.memo_hash(depth).is_none() {
            self.hashing.hashed(inode, depth, self.loader)?;
        }
        let again = inode.meta.get().is_some();
        let changed = if again { None } else { inode.meta.begin_write() };
        let (base, replaced) = changed.map_or((None, None), |changed| (Some(changed.base), changed.replaced));
        // The version this one replaces leaves the kept tree with this commit.
        self.keeping.superseded.extend(replaced);
        let (tree_patch, values_base) = match &inode.body {
            Body::Tree(pointers) => (base.and_then(|base| self.holding.patch_plan(&base, pointers)), None),
            Body::Values(_) => (None, base.filter(|base| self.holding.may_patch(base))),
        };
        // With every record the tree refers to held, and every child kept
        // since the window began (the base's oldest is), a patch visits only
        // the children it names: the others are the base's, written and
        // kept as they were, none older than the base says.
        let mut since = self.keeping.seq;
        let only = match &tree_patch {
            Some(plan) if self.holding.refs_held && plan.since >= self.keeping.cutoff => {
                since = since.min(plan.since);
                Some(plan.named)
            }
            _ => None,
        };
        Ok(Ok(InodePlan { tree_patch, values_base, only, since, again }))
    }

    /// The children step: writes the inode's new children (all of them, or
    /// the ones `plan.only` names), and notes what its record and its kept
    /// form need of them.
    fn children(&mut self, inode: &Arc<Inode>, depth: u32, plan: &InodePlan, found: &mut Children) -> Result<()> {
        // What writing reads of each child in memory it visits: where it
        // was written, since when it is kept.
        prefetch_children_meta(inode, plan.only);
        let loader = self.loader;
        match &inode.body {
            Body::Values(values) => {
                for (i, child) in values.children().enumerate() {
                    match child {
                        Child::Contents(Leaf::Value(value)) => {
                            let (offset, stale) = self.write_blob(value)?;
                            found.stale_value |= stale;
                            found.offsets.push(offset);
                            found.weight += value.weight();
                        }
                        Child::Dir(ptr @ Ptr::Mem(root, _)) => {
                            let (offset, _, cut) = self.write_child(root, 0, || dir_ptr_hash(ptr, loader), &mut found.since)?;
                            found.offsets.push(offset);
                            found.cuts.extend(cut.map(|ptr| (i, ptr)));
                        }
                        Child::Contents(Leaf::Staged(staged)) => self.staged.push(staged.offset),
                        Child::Contents(Leaf::Inline(_) | Leaf::Blob { .. }) | Child::Dir(Ptr::Stored { .. }) => {}
                    }
                }
            }
            Body::Tree(pointers) => {
                assert_eq!(pointers.depth, depth, "tree inode written at the wrong depth");
                for (i, ptr) in pointers.iter() {
                    if plan.only.is_some_and(|named| named & (1 << i) == 0) {
                        continue;
                    }
                    let hash = || inode_ptr_hash(ptr, depth + 1, loader);
                    let (offset, hash) = match ptr {
                        Ptr::Mem(child, _) => {
                            let (offset, hash, cut) = self.write_child(child, depth + 1, hash, &mut found.since)?;
                            found.cuts.extend(cut.map(|ptr| (i, ptr)));
                            (offset, hash)
                        }
                        Ptr::Stored { offset, .. } => (*offset, hash()?),
                    };
                    found.pointers.push((i, offset, hash));
                }
            }
        }
        Ok(())
    }

    /// Writes a value as a blob record, unless this store wrote it and
    /// still holds it. Returns its offset, and whether its mark is stale
    /// (written before, its record collected since: the mark stays).
    fn write_blob(&mut self, value: &Value) -> Result<(u64, bool)> {
        if let Some(offset) = self.holding.written_at(value.stored_offset(self.holding.instance)) {
            return Ok((offset, false));
        }
        let at = self.batch.push(RecordKind::Blob, &value.bytes)?;
        Ok((at, !value.write(self.holding.instance, at)))
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
        if self.keeping.weight > self.keeping.room {
            // The room is used up, and the weight only grows: the parent
            // will not be kept either, so what its copy would hold instead
            // of the child does not matter.
            return Ok((offset, hash, None));
        }
        let oldest = |kept: &Inode| kept.meta.kept_since().expect("a kept inode knows since when");
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
}

impl Writing<'_, '_> {
    /// The encode step: the inode's record, at `at`, into the encoder's
    /// payload: a patch when it may be one (the shorter, for a value
    /// inode), in full otherwise.
    fn encode(&mut self, inode: &Inode, depth: u32, plan: InodePlan, children: &Children, at: u64) -> Encoded {
        let InodePlan { tree_patch, values_base, only, .. } = plan;
        debug_assert!(
            children.offsets.iter().chain(children.pointers.iter().map(|(_, offset, _)| offset)).all(|&offset| offset < at),
            "a record refers only to records before it"
        );
        let start = self.batch.start();
        let Encoder { payload, patch, dict, raw_steps } = &mut self.encoder;
        payload.clear();
        match &inode.body {
            Body::Values(values) => {
                let resolved = resolve_children(values, &children.offsets);
                if let Some(base) = values_base
                    && let BaseShape::Values(marks) = &base.shape
                {
                    // The shorter way is written (the full record is
                    // measured, and encoded only if chosen; a patch naming
                    // at most half of four or more entries is surely
                    // shorter); the steps it writes raw are noted only
                    // once it is chosen.
                    patch.clear();
                    let (inserted, named) = encode_values_patch(base.offset, marks, values, &resolved, start, at, dict, patch);
                    let surely_shorter = values.len() >= 4 && 2 * named <= values.len();
                    if surely_shorter || patch.len() < values_len(values, at, &resolved, dict) {
                        std::mem::swap(patch, payload);
                        note_raw_steps(inserted.iter().map(|&j| values.step(j)), dict, raw_steps);
                        return Encoded { kind: RecordKind::ValuesPatch, chain: base.chain + 1, root: None };
                    }
                }
                encode_values(values, at, &resolved, dict, Some(raw_steps), payload);
                Encoded { kind: RecordKind::Values, chain: 0, root: None }
            }
            Body::Tree(pointers) => match tree_patch.and_then(|plan| patch_of(&plan, start, pointers, &children.pointers)) {
                Some((patch, chain, root)) => {
                    debug_assert!(
                        only.is_none_or(|named| patch.changes.iter().all(|(i, _)| named & (1 << i) != 0)),
                        "a patch over a kept base names only the children visited"
                    );
                    patch.encode(at, payload);
                    Encoded { kind: RecordKind::TreePatch, chain, root }
                }
                None => {
                    // (Visiting only the children a patch names makes
                    // no other change: that patch is written.)
                    assert!(only.is_none(), "a tree inode written in full from some of its children");
                    debug_assert_eq!(children.pointers.len(), pointers.count(), "a full record names every child");
                    encode_tree(depth, pointers.len, &children.pointers, at, payload);
                    Encoded { kind: RecordKind::Tree, chain: 0, root: Some(ChainRoot { offset: at, changed: 0 }) }
                }
            },
        }
    }

    /// The keep step: the inode's state becomes Written (an inode written
    /// again keeps its old mark), and what the kept tree holds of it is
    /// decided: itself, a copy holding stored pointers instead of some
    /// children (`cuts`), or nothing (its parent holds a stored pointer).
    fn keep(&mut self, inode: &Arc<Inode>, at: u64, encoded: Encoded, children: &mut Children, again: bool) -> Kept {
        let keeping = &mut self.keeping;
        keeping.weight += children.weight;
        if again {
            // A node whose record a collection removed keeps its old mark:
            // it is not kept, and is written again whenever it is met.
            inode.meta.write_again();
            return Kept::No;
        }
        let written = Written::new(self.holding.instance, at, encoded.chain, encoded.root, None);
        if children.stale_value || keeping.weight > keeping.room {
            inode.meta.write(written);
            return Kept::No;
        }
        assert!(
            (keeping.cutoff..=keeping.seq).contains(&children.since),
            "a kept subtree holds no inode older than the window ({}) nor newer than its commit ({}): {}",
            keeping.cutoff,
            keeping.seq,
            children.since
        );
        let kept = Some(KeptMark { since: children.since, claim: Claim { seq: keeping.seq, weight: children.weight } });
        if children.cuts.is_empty() {
            inode.meta.write(written.kept_as(kept));
            return Kept::Itself;
        }
        inode.meta.write(written);
        let mut body = inode.body.clone();
        for (i, ptr) in children.cuts.drain(..) {
            match &mut body {
                Body::Values(values) => *values.child_mut(i) = Child::Dir(ptr),
                Body::Tree(pointers) => pointers.put(i, Some(ptr)),
            }
        }
        let copy = Inode::with_meta(body, State::written(written.kept_as(kept)));
        copy.remember_hashes_of(inode);
        Kept::Copy(Arc::new(copy))
    }
}

impl Holding<'_> {
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
        if self.may_patch(base) && (1..=max_patch_changes(pointers)).contains(&count) {
            return Some(Plan {
                over: base.offset,
                chain: base.chain + 1,
                named: changed,
                limit: max_patch_changes(pointers),
                since,
                root: base.root,
            });
        }
        let root = base.root?;
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
/// How a tree inode is written as a patch (from [`Holding::patch_plan`]).
struct Plan {
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

/// The patch of `plan` (from [`Holding::patch_plan`]), naming also any
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
    debug_assert!(
        changes.iter().all(|&(i, now)| now.is_some() == pointers.get(i).is_some()),
        "a patch names each child it changes as it is now"
    );
    debug_assert!((1..=MAX_PATCH_CHAIN).contains(&plan.chain), "a patch's place in its chain is 1 to {MAX_PATCH_CHAIN}");
    let root = plan.root.map(|root| ChainRoot { changed: root.changed | changed, ..root });
    Some((TreePatch { depth: pointers.depth, len: pointers.len, base: plan.over, changes }, plan.chain, root))
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
    if inode.meta.offset_for(instance).is_some_and(|offset| pack.holds_whole(offset)) {
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

#[cfg(test)]
mod tests {
    use crate::format::patch::TreePatch;
    use crate::format::record::RecordKind;
    use crate::node::{Child, Ptr};
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
            Child::Dir(Ptr::Mem(root, _)) => root.meta.offset_for(store.repo.read.id).expect("written"),
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
