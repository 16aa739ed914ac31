//! What the writer knows of an inode: one state beside each inode
//! ([`State`], the store's `Hold::Meta`), its transitions named here and
//! nowhere else.
//!
//! The states:
//! - **New**: built in memory, no written version behind it.
//! - **Changed**: a new version of a written inode (changed in place, or
//!   a copy): it holds what a patch over that written version needs
//!   ([`PatchBase`]) and, if the written version was in the kept tree,
//!   the window's claim for it ([`Claim`]), which leaves the window once
//!   the new version is written.
//! - **Written**: a record holds it ([`Written`]: the store instance, the
//!   offset, its chain of patches, its chain's root, and, in the kept
//!   tree, since when and what the window counts for it).
//!
//! Born Written (not a transition): an inode read from a record
//! ([`State::loaded`], the loader's only way to say where it read it) and
//! the writer's kept copy ([`State::written`]).
//!
//! The transitions:
//! - `thaw` (Written → Changed; New and Changed stay): an update in
//!   place of an inode nothing else holds.
//! - `derive` (→ the new version's state): a copy of a Written inode is
//!   Changed over it, claiming nothing (the original may stay kept); a
//!   copy of a Changed one shares its base and takes its claim (once);
//!   of a New one, New. A body built anew of the other kind (a values
//!   inode grown into a tree inode, or shrunk back) has no base.
//! - `note_values`: a Changed values inode marks which entries changed.
//! - [`State::begin_write`] then [`State::write`] (New or Changed →
//!   Written), by the writer, once.
//! - [`State::write_again`] (Written → Written, as it was): an inode whose
//!   record a collection removed is written again and keeps its old
//!   mark, so it is never kept (its children's marks may be stale too).
//!
//! Invariants:
//! - Written is set once and never changes while the inode is shared:
//!   readers and other trees read it without a lock (asserted in
//!   `State::write`, which refuses a second write).
//! - A Changed inode's base is of its own kind, and a values base's marks
//!   count its entries' changes since the written version (asserted in
//!   `note_values` and `derive`).
//! - A kept inode is written, and its mark's subtree is no newer than
//!   the commit that wrote it (asserted in `Written::new`; the batch's
//!   `keep` asserts the subtree no older than the window).
//! - A transition not listed above is refused: it panics in debug builds
//!   and is counted in release builds ([`refused_transitions`], reported
//!   by `Store::info`), never silently ignored (asserted in `refuse`).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Body, Inode, ValuesMarks, forget_changes};
use pando_core::dir::ValuesChange;

/// What the writer keeps beside each inode (see the module's states).
#[derive(Default)]
pub struct State {
    /// Set once: where a record holds the inode.
    written: OnceLock<Written>,
    /// Before it is written: what a patch over the version it derives
    /// from needs. Taken by the writer as it writes the inode.
    changed: parking_lot::Mutex<Option<Box<Changed>>>,
}

/// Where a record holds an inode, as the store instance that wrote (or
/// read) it knows it: the store instance and the record's offset
/// (offsets mean nothing to another instance: another store, or the same
/// directory reopened after a failed write), its chain of patches, its
/// chain's root, and, in the writer's kept tree, since when and what the
/// window counts for it. Packed in 40 bytes, so that an inode stays 216.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// The instance (below 2^56, `store::fresh_instance_id`), and in the
    /// top byte the chain: patch records from this record to a full one
    /// (0: a full record).
    instance_chain: u64,
    offset: u64,
    /// A tree inode's chain's root plus one (0: not known), and the
    /// children changed since it.
    root_offset: u64,
    root_changed: u32,
    /// The kept mark: since (0: not kept), the claim's commit and weight
    /// (saturated at `u32::MAX`, so that the window counts more, never
    /// less, than the kept tree holds).
    since: u32,
    seq: u32,
    weight: u32,
}

impl Written {
    pub fn new(instance: u64, offset: u64, chain: u8, root: Option<ChainRoot>, kept: Option<KeptMark>) -> Written {
        debug_assert!(instance < 1 << 56, "store instances are counted below 2^56 (`fresh_instance_id`)");
        debug_assert!(kept.is_none_or(|kept| kept.since > 0 && kept.since <= kept.claim.seq), "a kept subtree is no newer than its root");
        let (since, seq, weight) = kept.map_or((0, 0, 0), |kept| {
            (kept.since, kept.claim.seq, u32::try_from(kept.claim.weight).unwrap_or(u32::MAX))
        });
        Written {
            instance_chain: instance | u64::from(chain) << 56,
            offset,
            root_offset: root.map_or(0, |root| root.offset + 1),
            root_changed: root.map_or(0, |root| root.changed),
            since,
            seq,
            weight,
        }
    }

    pub fn instance(&self) -> u64 {
        self.instance_chain & ((1 << 56) - 1)
    }

    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Patch records from this record to a full one (0: a full record).
    pub fn chain(&self) -> u8 {
        (self.instance_chain >> 56) as u8
    }

    /// A tree inode's chain's root, when the writer knows it (it wrote
    /// the inode, or a copy of it).
    pub fn root(&self) -> Option<ChainRoot> {
        (self.root_offset != 0).then(|| ChainRoot { offset: self.root_offset - 1, changed: self.root_changed })
    }

    /// In the writer's kept tree: since when, and what the window counts.
    pub fn kept(&self) -> Option<KeptMark> {
        (self.since != 0).then(|| KeptMark { since: self.since, claim: Claim { seq: self.seq, weight: u64::from(self.weight) } })
    }

    /// The same record, kept as `kept`.
    pub fn kept_as(&self, kept: Option<KeptMark>) -> Written {
        Written::new(self.instance(), self.offset, self.chain(), self.root(), kept)
    }
}

impl std::fmt::Debug for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Written")
            .field("instance", &self.instance())
            .field("offset", &self.offset)
            .field("chain", &self.chain())
            .field("root", &self.root())
            .field("kept", &self.kept())
            .finish()
    }
}

/// The full record a written tree inode's chain of patches starts from
/// (the inode's own record when written in full), and the children its
/// patches changed since: a patch over that record naming them is the
/// inode too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainRoot {
    pub offset: u64,
    pub changed: u32,
}

/// What the kept tree knows of one of its inodes (see
/// `store::write::commit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeptMark {
    /// The oldest commit (by the writer's count, from 1) that wrote an
    /// inode of the kept subtree below it, itself included.
    pub since: u32,
    /// What the window counts for it: the commit that wrote it, and its weight.
    pub claim: Claim,
}

/// What the kept window counts for one kept version: the commit (by the
/// writer's count) that wrote it and its weight in bytes. One claim per
/// kept version, so the window never takes its weight out twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim {
    pub seq: u32,
    pub weight: u64,
}

/// What a patch against a written inode needs of it: where it was
/// written, its chain of patches and its chain's root, and what changed
/// since: a tree inode's children's indices (which children the new
/// version changed, its pointers count from then on,
/// `Pointers::changed`: the base's children are never read), a value
/// inode's marks ([`ValuesMarks`]).
#[derive(Clone, Debug)]
pub struct PatchBase {
    /// The store instance that wrote it, and the record's offset.
    pub instance: u64,
    pub offset: u64,
    pub chain: u8,
    pub root: Option<ChainRoot>,
    /// The oldest commit of its kept subtree (0 if not kept): no child it
    /// kept is older.
    pub since: u32,
    pub shape: BaseShape,
}

/// What a written inode held, as a patch against it needs it.
#[derive(Clone, Debug)]
pub enum BaseShape {
    /// A tree inode at `depth`, with its children's indices.
    Tree { depth: u32, bitmap: u32 },
    /// A value inode, and which of its entries changed since.
    Values(ValuesMarks),
}

/// A Changed inode's state (see the module).
#[derive(Clone, Debug)]
pub struct Changed {
    pub base: PatchBase,
    /// The kept window's claim of the written version it replaced in
    /// place; `None` for a copy, or a version that was not kept.
    pub replaced: Option<Claim>,
}

impl PatchBase {
    /// For an inode written as `written`, about to change.
    fn of(written: &Written, body: &Body) -> PatchBase {
        let shape = match body {
            Body::Tree(pointers) => BaseShape::Tree { depth: pointers.depth, bitmap: pointers.bitmap() },
            Body::Values(_) => BaseShape::Values(ValuesMarks::default()),
        };
        let since = written.kept().map_or(0, |kept| kept.since);
        PatchBase { instance: written.instance(), offset: written.offset(), chain: written.chain(), root: written.root(), since, shape }
    }

    fn fits(&self, body: &Body) -> bool {
        matches!(self.shape, BaseShape::Tree { .. }) == is_tree(body)
    }
}

impl State {
    /// An inode read from the record at `offset` by store instance
    /// `instance`, `chain` patches from a full record.
    pub fn loaded(instance: u64, offset: u64, chain: u8) -> State {
        State::written(Written::new(instance, offset, chain, None, None))
    }

    /// An inode born written (the loader's, a kept copy, a check's).
    pub fn written(written: Written) -> State {
        State { written: OnceLock::from(written), changed: Default::default() }
    }

    /// Where a record holds the inode, if one does.
    pub fn get(&self) -> Option<&Written> {
        self.written.get()
    }

    /// The offset of the record holding the inode, if store instance
    /// `instance` wrote or read it.
    pub fn offset_for(&self, instance: u64) -> Option<u64> {
        self.written.get().filter(|written| written.instance() == instance).map(Written::offset)
    }

    /// For an inode of the kept tree: the oldest commit its kept subtree
    /// holds an inode of.
    pub fn kept_since(&self) -> Option<u32> {
        self.written.get().and_then(Written::kept).map(|kept| kept.since)
    }

    /// The transition `thaw`: an update in place of an inode nothing else
    /// holds. A written one becomes Changed over its written version,
    /// claiming what the window counted for it; its pointers mark what
    /// changes from now on.
    #[inline]
    pub(super) fn thaw(inode: &mut Inode) {
        // An update passes every inode on its path, most of them thawed
        // already: that check stays in the caller.
        if inode.meta.written.get_mut().is_some() {
            State::thaw_written(inode);
        }
    }

    #[inline(never)]
    fn thaw_written(inode: &mut Inode) {
        let Some(written) = inode.meta.written.take() else { return };
        let base = PatchBase::of(&written, &inode.body);
        let replaced = written.kept().map(|kept| kept.claim);
        *inode.meta.changed.get_mut() = Some(Box::new(Changed { base, replaced }));
        forget_changes(&mut inode.body);
    }

    /// The transition `derive`: the state of a new version of `from`,
    /// whose body is `body` (a copy of `from`'s if `copied`).
    pub(super) fn derive(from: &Inode, body: &mut Body, copied: bool) -> State {
        let changed = match from.meta.written.get() {
            Some(written) => {
                if copied {
                    forget_changes(body);
                }
                Some(Box::new(Changed { base: PatchBase::of(written, &from.body), replaced: None }))
            }
            None => from.meta.changed.lock().as_mut().map(|changed| {
                // The claim goes with one version only.
                Box::new(Changed { base: changed.base.clone(), replaced: changed.replaced.take() })
            }),
        };
        // A body of the other kind cannot be patched over this base.
        debug_assert!(!copied || is_tree(&from.body) == is_tree(body), "a copy holds its original's kind of body");
        let changed = changed.filter(|changed| changed.base.fits(body));
        State { written: OnceLock::new(), changed: parking_lot::Mutex::new(changed) }
    }

    /// The transition `note_values`: entries of a values inode changed.
    pub(super) fn note_values(&mut self, change: ValuesChange) {
        let Some(changed) = self.changed.get_mut() else { return };
        match &mut changed.base.shape {
            BaseShape::Values(marks) => marks.note(change),
            BaseShape::Tree { .. } => refuse("note_values", "a values change over a tree inode's base"),
        }
    }

    /// The writer starts writing the inode: what a patch over the version
    /// it derives from needs, taken (`None` for a New inode).
    pub fn begin_write(&self) -> Option<Box<Changed>> {
        if self.written.get().is_some() {
            refuse("begin_write", "the inode is written already");
            return None;
        }
        self.changed.lock().take()
    }

    /// The transition `write`: a record now holds the inode.
    pub fn write(&self, written: Written) {
        if self.written.set(written).is_err() {
            refuse("write", "the inode is written already (write_again is the transition for that)");
        }
        // `begin_write` took the base, and nothing sets one on an inode
        // shared (thaw needs `&mut`): checked in debug builds only, a lock
        // per inode written.
        debug_assert!(self.changed.lock().is_none(), "a patch base left behind (begin_write takes it)");
    }

    /// The transition `write_again`: a written inode whose record a
    /// collection removed, written again, keeps the mark it has.
    pub fn write_again(&self) {
        if self.written.get().is_none() {
            refuse("write_again", "the inode was never written");
        }
    }
}

fn is_tree(body: &Body) -> bool {
    matches!(body, Body::Tree(_))
}

/// Transitions refused in this process (only a bug makes one).
static REFUSED: AtomicU64 = AtomicU64::new(0);

/// How many transitions of an inode's state this process refused: always
/// 0 unless the writer has a bug (a debug build panics instead).
pub fn refused_transitions() -> u64 {
    REFUSED.load(Ordering::Relaxed)
}

/// A transition not allowed: a panic in debug builds, counted (and
/// logged) in release builds.
fn refuse(transition: &str, why: &str) {
    debug_assert!(false, "inode state: transition `{transition}` refused: {why}");
    REFUSED.fetch_add(1, Ordering::Relaxed);
    tracing::error!(transition, why, "inode state: transition refused");
}
