//! Trees: immutable, cheaply cloned values of a directory or a contents,
//! with the Octez operations (`mem`, `find`, `add`, `remove`, `list`, ...).
//!
//! A tree is a pointer into a structure shared with other trees and with the
//! store's cache; an update copies the inodes on one path that others hold
//! too, changes in place those only this tree holds, and shares the rest.
//! Subtrees that live on disk are loaded lazily, through the store's cache,
//! only when an operation reaches them.
//!
//! Invariant: empty directories are never entries: removing the last
//! entry of a directory removes the directory from its parent, and adding
//! an empty tree at a path removes what was there (asserted in `replace`;
//! tested by `removing_the_last_entry_prunes_every_directory_it_empties`
//! and `adding_an_empty_tree_removes_the_path`).
//!
//! The tree never touches a file; it reads through `crate::node::Loader`.

pub(crate) mod flat;
mod proof;
mod proven;
mod versions;
pub(crate) mod walk;

pub use proven::{ProvenTree, verify_stream_proof, verify_stream_proof_reads, verify_tree_proof};
pub use versions::{Update, Versions};

use pando_core::trace::{ContextId, Key, Row, Scope};
use pando_core::{Hash, Kind};
use std::sync::Arc;

use crate::tracer::TraceSink;

/// Longest path accepted: Tezos paths have about ten steps, and the
/// recursion of hashing and writing grows with the depth.
pub const MAX_PATH_STEPS: usize = pando_core::trace::MAX_KEY_STEPS;

/// Longest contents value accepted, in bytes: the most a record holds (a
/// value over `node::INLINE_MAX` bytes is a blob record of its
/// bytes alone), so that every value added can be committed and read back.
pub const MAX_VALUE_BYTES: u64 = crate::format::record::MAX_PAYLOAD;

/// Refuses a contents value longer than [`MAX_VALUE_BYTES`].
fn check_value_len(len: usize) -> Result<()> {
    let bytes = len as u64;
    if bytes > MAX_VALUE_BYTES {
        return Err(crate::Error::ValueTooLarge { bytes, max: MAX_VALUE_BYTES });
    }
    Ok(())
}

/// A path's steps as byte strings, on the stack for Tezos's path lengths.
fn steps_of<S: AsRef<[u8]>>(path: &[S]) -> smallvec::SmallVec<[&[u8]; 16]> {
    path.iter().map(AsRef::as_ref).collect()
}

fn to_key<S: AsRef<[u8]>>(path: &[S]) -> Key {
    path.iter().map(|s| s.as_ref().to_vec()).collect()
}

use crate::error::Result;
use crate::node::{self, Child, Loader, NoLoader, Ptr, empty, load, value_child, value_of};
use flat::{Cached, FlatCache, Key as FlatKey, Write, Writes};
use pando_core::dir::{self, Resolve};

/// What an update replaced, and where: its undo ([`Tree::apply`]).
pub(crate) type Replaced = dir::Replaced<node::Held>;

/// Where the lazily loaded parts of a tree come from.
pub trait Source: Loader + Send + Sync {
    /// Identifies one open store instance.
    fn instance_id(&self) -> u64;
    /// Where calls are recorded, when the store records a trace.
    fn trace_sink(&self) -> Option<&dyn TraceSink>;
    /// Contents about to be added to a tree, written to the pack now when
    /// the store stages contents that long (`Options::stage_bytes`); `None`
    /// when they stay in memory until the commit.
    fn stage(&self, bytes: &[u8]) -> Result<Option<node::Leaf>>;
    /// The root of the writer's kept tree, given back unchanged by a tree
    /// that took it at a checkout (see `Store::checkout`).
    fn give_back_kept(&self, root: Arc<node::Inode>);
    /// What paths hold in a commit's tree, for reads that skip the descent.
    fn flat(&self) -> &FlatCache;
}

/// A tree: a directory or a contents value. Cheap to clone (clones share
/// structure); updates return a new tree (`add`, `remove`) or change this
/// one (`add_mut`, `remove_mut`). Paths are lists of steps, `&[S]` with
/// `S: AsRef<[u8]>`.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// use pando_store::{Options, Store};
///
/// let store = Store::open(dir.path(), Options::default())?;
/// let mut tree = store.empty_tree();
/// tree.add_mut(&["contracts", "index", "tz1a", "balance"], b"100")?;
/// tree.add_mut(&["contracts", "index", "tz1b", "balance"], b"250")?;
/// let older = tree.clone();
/// let tree = tree.remove(&["contracts", "index", "tz1a"])?;
///
/// assert_eq!(tree.find(&["contracts", "index", "tz1b", "balance"])?.as_deref(), Some(&b"250"[..]));
/// assert!(!tree.mem_tree(&["contracts", "index", "tz1a"])?);
/// assert!(older.mem(&["contracts", "index", "tz1a", "balance"])?, "the clone is unchanged");
/// assert_eq!(older.length(&["contracts", "index"])?, 2);
/// let names: Vec<Vec<u8>> = older.list(&["contracts", "index"], 0, None)?.into_iter().map(|(name, _)| name).collect();
/// assert_eq!(names, [b"tz1a".to_vec(), b"tz1b".to_vec()]);
/// assert_ne!(tree.hash()?, older.hash()?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Tree {
    node: Child,
    source: Option<Arc<dyn Source>>,
    /// Set when an update failed midway (an I/O error while loading): the
    /// tree may then break the layout rules, so it refuses every use.
    broken: bool,
    /// The trace context this tree is, when the store records a trace.
    ctx: Option<ContextId>,
    /// For a tree read with `find_tree`: the context and path it came from,
    /// so that adding it back into that context is recorded as a copy.
    origin: Option<(ContextId, Key)>,
    /// Whether this tree took the root of the writer's kept tree at a
    /// checkout: dropped unchanged, it gives it back.
    took_kept: bool,
    /// What is known of the pack records its nodes refer to.
    refs: Refs,
    /// For a tree taken from a commit (or made empty) by a store: its
    /// updates since, which tell the reads the store's flat cache answers.
    writes: Option<Arc<Writes>>,
    /// Updates since the tree was made or taken from a commit (saturated):
    /// what tells a commit, without a walk, that it has work for its
    /// hashing helper (`hashing::HashingHelper::worth_it`).
    updates: u32,
}

/// What is known of the pack records a tree refers to: its stored
/// pointers, and the records its nodes in memory were read from or written
/// as (a commit marks what it wrote). A commit checks that each is still
/// held, unless all were held at the pack's current layout: a collection
/// may have removed the records of a tree taken from a commit it collected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refs {
    /// All were held at this [`crate::pack::Pack::layout_epoch`]: the tree
    /// was taken from a commit not collected then, or made empty by the
    /// store then (what a commit marks is held until the next layout).
    HeldAt(u64),
    /// Not known: a tree made without a store, or of trees known at
    /// different layouts.
    Unknown,
}

impl Refs {
    /// What is known of the records of a tree made of two.
    fn and(self, other: Refs) -> Refs {
        if self == other { self } else { Refs::Unknown }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        if let (true, Child::Dir(Ptr::Mem(root, _)), Some(source)) = (self.took_kept, &mut self.node, &self.source)
            && root.meta.get().is_some()
        {
            source.give_back_kept(std::mem::replace(root, empty()));
        }
    }
}

/// What loads a tree's nodes from its store (none for a tree of no store).
fn loader_of(source: &Option<Arc<dyn Source>>) -> &dyn Loader {
    match source {
        Some(source) => source.as_ref(),
        None => &NoLoader,
    }
}

/// Whether a child is a contents, and what to note in the flat cache of
/// what it holds (nothing for a contents: its value was not read).
fn kind_cached(child: Option<&Child>) -> (bool, Option<Cached>) {
    match child {
        None => (false, Some(Cached::Absent)),
        Some(child) if child.kind() == Kind::Dir => (false, Some(Cached::Dir)),
        Some(_) => (true, None),
    }
}

/// What the flat cache holds for a path, owned.
fn owned(held: &Cached<&[u8]>) -> Cached {
    match held {
        Cached::Absent => Cached::Absent,
        Cached::Dir => Cached::Dir,
        Cached::Value(value) => Cached::Value((*value).into()),
    }
}

/// The function `fold` calls on each key and subtree.
pub type FoldFn<'a> = dyn FnMut(&[Vec<u8>], &Tree) -> Result<()> + 'a;

/// Which depths `fold` visits, relative to the folded tree (depth 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    Eq(u32),
    Le(u32),
    Lt(u32),
    Ge(u32),
    Gt(u32),
}

impl Depth {
    fn includes(self, depth: u32) -> bool {
        match self {
            Depth::Eq(d) => depth == d,
            Depth::Le(d) => depth <= d,
            Depth::Lt(d) => depth < d,
            Depth::Ge(d) => depth >= d,
            Depth::Gt(d) => depth > d,
        }
    }

    /// Whether anything deeper than `depth` can still be included.
    fn descends(self, depth: u32) -> bool {
        match self {
            Depth::Eq(d) | Depth::Le(d) => depth < d,
            Depth::Lt(d) => depth + 1 < d,
            Depth::Ge(_) | Depth::Gt(_) => true,
        }
    }
}

/// The order in which `fold` visits the entries of a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// By step, byte-wise.
    Sorted,
    /// The store's own order (inode order), which is cheaper.
    Undefined,
}

// Every public method is documented: an embedder reads these first.
#[deny(missing_docs)]
impl Tree {
    /// The empty directory.
    pub fn empty() -> Tree {
        Tree::from_parts(Child::Dir(Ptr::mem(empty())), None, None, Refs::Unknown)
    }

    /// A tree that is a single contents value. One over
    /// [`MAX_VALUE_BYTES`] is refused when added to a directory
    /// ([`Tree::add_tree`]).
    pub fn of_value(bytes: &[u8]) -> Tree {
        Tree::from_parts(value_child(bytes), None, None, Refs::Unknown)
    }

    pub(crate) fn from_parts(node: Child, source: Option<Arc<dyn Source>>, ctx: Option<ContextId>, refs: Refs) -> Tree {
        Tree { node, source, broken: false, ctx, origin: None, took_kept: false, refs, writes: None, updates: 0 }
    }

    /// A tree taken from `commit` (`None`: made empty) by its store, whose
    /// updates are logged for the store's flat cache (if it has one).
    pub(crate) fn logging_from(mut self, commit: Option<Hash>) -> Tree {
        if self.source.as_ref().is_some_and(|s| s.flat().is_on()) {
            self.writes = Some(Writes::new(commit));
        }
        self
    }

    /// The updates of this tree since it was taken from a commit, if logged.
    pub(crate) fn shared_writes(&self) -> Option<Arc<Writes>> {
        self.writes.clone()
    }

    /// How many updates this tree made since it was taken from a commit:
    /// `None` if it keeps no log, `Some(None)` if it stopped logging.
    pub(crate) fn logged_updates(&self) -> Option<Option<usize>> {
        self.writes.as_deref().map(Writes::known_len)
    }

    /// Updates since the tree was made or taken from a commit (saturated
    /// at `u32::MAX`).
    pub(crate) fn updates(&self) -> u32 {
        self.updates
    }

    /// Whether every pack record this tree refers to is held, known
    /// without asking the pack for each, at layout epoch `epoch`.
    pub(crate) fn refs_held_at(&self, epoch: u64) -> bool {
        self.refs == Refs::HeldAt(epoch)
    }

    /// A checkout's tree holding the root of the writer's kept tree.
    pub(crate) fn taking_kept(mut self) -> Tree {
        self.took_kept = true;
        self
    }

    /// The trace context of this tree, if it is one.
    pub(crate) fn context(&self) -> Option<ContextId> {
        self.ctx
    }

    fn sink(&self) -> Option<&dyn TraceSink> {
        self.source.as_ref().and_then(|s| s.trace_sink())
    }

    fn trace_read<S: AsRef<[u8]>>(&self, path: &[S], found: bool, make: fn(Key, bool, Scope<ContextId>) -> Row) {
        if let Some(sink) = self.sink() {
            match self.ctx {
                Some(ctx) => sink.write(&make(to_key(path), found, Scope::Keep(ctx))),
                None => sink.gap("a read of a subtree"),
            }
        }
    }

    /// Records an update that turned context `self.ctx` into a new one.
    fn trace_update(&mut self, make: impl FnOnce(Scope<ContextId>, Scope<ContextId>) -> Row) {
        let Some(sink) = self.sink() else { return };
        match self.ctx {
            Some(ctx) => {
                let out = sink.fresh_context();
                sink.write(&make(Scope::Keep(ctx), Scope::Keep(out)));
                self.ctx = Some(out);
            }
            None => sink.gap("an update of a subtree"),
        }
    }

    /// The root, unless an earlier update left the tree broken.
    pub(crate) fn node(&self) -> Result<&Child> {
        if self.broken {
            return Err(crate::Error::Invalid(
                "this tree was left inconsistent by an update that failed; take it again from a commit".into(),
            ));
        }
        Ok(&self.node)
    }

    pub(crate) fn source(&self) -> Option<&Arc<dyn Source>> {
        self.source.as_ref()
    }

    fn loader(&self) -> &dyn Loader {
        loader_of(&self.source)
    }

    /// A subtree: not a context of the trace.
    fn with_node(&self, node: Child) -> Tree {
        Tree::from_parts(node, self.source.clone(), None, self.refs)
    }

    /// Whether this tree is a directory or a contents value.
    pub fn kind(&self) -> Kind {
        self.node.kind()
    }

    /// The Tezos context hash of this tree.
    pub fn hash(&self) -> Result<Hash> {
        dir::child_hash(self.node()?, self.loader())
    }

    /// Runs `f` on this tree, as a partial tree that loads what `f` reaches,
    /// and returns Octez's tree proof of what it read (`produce_tree_proof`)
    /// with `f`'s result. `f` may update its tree: the proof's `after` is
    /// the hash of what `f` leaves; this tree does not change.
    pub fn produce_proof<R>(
        &self,
        f: impl FnOnce(&mut pando_core::proof::PartialTree<'_>) -> Result<R, pando_core::proof::ProofError>,
    ) -> Result<(pando_core::proof::TreeProof, R)> {
        crate::error::l1_only(self.loader().layout(), "a tree proof")?;
        proof::produce(self.node()?, self.loader(), f)
    }

    /// Octez's stream proof (`Proof.stream Proof.t`) of reading `paths` in
    /// order from this tree, as irmin's `find` reads them (see
    /// `pando_core::proof::stream`): the objects loaded, in the order
    /// irmin 3.7.2 loads them.
    pub fn produce_stream_proof(&self, paths: &[pando_core::proof::stream::Path]) -> Result<pando_core::proof::StreamProof> {
        let loader = self.loader();
        crate::error::l1_only(loader.layout(), "a stream proof")?;
        let value = |leaf: &node::Leaf| -> Result<Vec<u8>> {
            node::with_value(&Child::Contents(leaf.clone()), loader, <[u8]>::to_vec)?
                .ok_or_else(|| crate::Error::Invalid("a contents without a value".into()))
        };
        pando_core::proof::stream::produce_stream(self.node()?, loader, &value, paths)
    }

    /// The value, if this tree is a contents.
    pub fn to_value(&self) -> Result<Option<Vec<u8>>> {
        value_of(self.node()?, self.loader())
    }

    /// True for a directory with no entries.
    pub fn is_empty(&self) -> Result<bool> {
        match self.node()? {
            Child::Dir(ptr) => Ok(load(ptr, 0, self.loader())?.is_empty()),
            _ => Ok(false),
        }
    }

    pub(crate) fn get<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<Option<Child>> {
        self.descend(&steps_of(path), |child| child.cloned())
    }

    /// Calls `f` on what `steps` lead to, without copying anything on the way.
    fn descend<T>(&self, steps: &[&[u8]], f: impl FnOnce(Option<&Child>) -> T) -> Result<T> {
        let loader = self.loader();
        dir::with_path(self.node()?, steps, &|_| loader, f)
    }

    /// What `path` holds: from the store's flat cache when this tree was
    /// taken from the commit it describes and has not been updated since
    /// (`cached`), else by a descent down the trie (`descended`, told whether the
    /// cache will note what it returns besides the answer).
    fn read<S: AsRef<[u8]>, T>(
        &self,
        path: &[S],
        cached: impl FnOnce(&Cached<&[u8]>) -> T,
        descended: impl FnOnce(Option<&Child>, bool) -> Result<(T, Option<Cached>)>,
    ) -> Result<T> {
        self.node()?;
        let steps = steps_of(path);
        let flat = self.flat_key(&steps);
        if let Some((cache, base, key)) = &flat {
            // The crate's tests check each answer against a descent.
            let mut seen = None;
            let answer = cache.get(base, key, |held| {
                if crate::DEEP_CHECKS {
                    seen = Some(owned(held));
                }
                cached(held)
            });
            if let Some(found) = answer {
                debug_assert!(
                    seen.is_none_or(|seen| self.held_at(&steps).is_none_or(|held| held == seen)),
                    "the flat cache answers what the tree of its commit holds"
                );
                return Ok(found);
            }
        }
        let note = flat.is_some();
        let (found, to_cache) = self.descend(&steps, |child| descended(child, note))??;
        if let (Some((cache, base, key)), Some(to_cache)) = (flat, to_cache) {
            cache.insert(&base, &key, to_cache);
        }
        Ok(found)
    }

    /// What `steps` lead to, as the flat cache notes it, read by a descent
    /// (`None` if the descent failed).
    fn held_at(&self, steps: &[&[u8]]) -> Option<Cached> {
        let held = self.descend(steps, |child| match child {
            None => Ok(Cached::Absent),
            Some(child) if child.kind() == Kind::Dir => Ok(Cached::Dir),
            Some(child) => value_of(child, self.loader()).map(|v| v.map_or(Cached::Absent, |v| Cached::Value(v.into()))),
        });
        held.ok()?.ok()
    }

    /// The flat cache, the commit and the key a read of `steps` may use.
    fn flat_key(&self, steps: &[&[u8]]) -> Option<(&FlatCache, Hash, FlatKey)> {
        let writes = self.writes.as_deref().filter(|w| w.is_clean())?;
        let cache = Some(self.source.as_ref()?.flat()).filter(|c| c.is_on())?;
        if steps.is_empty() || steps.len() > MAX_PATH_STEPS {
            return None;
        }
        Some((cache, writes.base?, FlatKey::new(steps)))
    }

    /// The contents at `path`, if `path` holds a contents.
    pub fn find<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<Option<Vec<u8>>> {
        let value = self.read(
            path,
            |held| match held {
                Cached::Value(value) => Some(value.to_vec()),
                Cached::Dir | Cached::Absent => None,
            },
            |child, note| match (child, kind_cached(child)) {
                (Some(child), (true, _)) => {
                    let value = value_of(child, self.loader())?;
                    let held =
                        value.as_ref().filter(|v| note && v.len() <= flat::MAX_VALUE).map(|v| Cached::Value(v.as_slice().into()));
                    Ok((value, held))
                }
                (_, (_, held)) => Ok((None, held)),
            },
        )?;
        self.trace_read(path, value.is_some(), |key, found, ctx| Row::Find { key, found, ctx });
        Ok(value)
    }

    /// The subtree (directory or contents) at `path`.
    pub fn find_tree<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<Option<Tree>> {
        Ok(self.get(path)?.map(|child| {
            let mut tree = self.with_node(child);
            tree.origin = self.ctx.map(|ctx| (ctx, to_key(path)));
            tree
        }))
    }

    /// True if `path` holds a contents.
    pub fn mem<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<bool> {
        let found = self.read(path, |held| matches!(held, Cached::Value(_)), |child, _| Ok(kind_cached(child)))?;
        self.trace_read(path, found, |key, found, ctx| Row::Mem { key, found, ctx });
        Ok(found)
    }

    /// True if `path` holds anything (a contents or a directory).
    pub fn mem_tree<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<bool> {
        let found = self.read(path, |held| *held != Cached::Absent, |child, _| Ok((child.is_some(), kind_cached(child).1)))?;
        self.trace_read(path, found, |key, found, ctx| Row::MemTree { key, found, ctx });
        Ok(found)
    }

    /// A tree where `path` holds `value`. Contents met on the way are
    /// replaced by directories. In a tree of a writable store, a value of
    /// at least `Options::stage_bytes` is written to the pack now (not
    /// held in memory until the commit), so this can fail as a write can.
    /// A value over [`MAX_VALUE_BYTES`] is refused
    /// ([`crate::Error::ValueTooLarge`]), the tree unchanged.
    pub fn add<S: AsRef<[u8]>>(&self, path: &[S], value: &[u8]) -> Result<Tree> {
        let mut tree = self.clone();
        tree.add_mut(path, value)?;
        Ok(tree)
    }

    /// A tree where `path` holds `tree`; an empty directory removes `path`.
    pub fn add_tree<S: AsRef<[u8]>>(&self, path: &[S], tree: &Tree) -> Result<Tree> {
        let mut result = self.clone();
        result.add_tree_mut(path, tree)?;
        Ok(result)
    }

    /// A tree without `path`; directories left empty are removed too.
    pub fn remove<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<Tree> {
        let mut tree = self.clone();
        tree.remove_mut(path)?;
        Ok(tree)
    }

    /// Applies `update` at `path` in place, returning what it replaced:
    /// putting that back ([`Tree::put_back`]) undoes it. [`Versions`]
    /// logs these to rebuild older versions.
    pub(crate) fn apply<S: AsRef<[u8]>>(&mut self, path: &[S], update: &Update<'_>) -> Result<Replaced> {
        let mut replaced = Replaced { depth: path.len(), old: None };
        let into = Some(&mut replaced);
        match update {
            Update::Add(value) => self.add_in(path, value, into),
            Update::AddTree(tree) => self.add_tree_in(path, tree, into),
            Update::Remove => self.remove_in(path, into),
        }?;
        Ok(replaced)
    }

    /// Puts `old` at `path` (removes what is there for `None`): undoes an
    /// update whose [`Replaced`] named them.
    pub(crate) fn put_back(&mut self, path: &[&[u8]], old: Option<&Child>) -> Result<()> {
        match old {
            Some(old) => self.add_tree_mut(path, &self.with_node(old.clone())),
            None => self.remove_mut(path),
        }
    }

    /// [`Tree::add`] in place: inodes this tree alone holds are updated
    /// without copying. Other trees sharing them are not affected.
    pub fn add_mut<S: AsRef<[u8]>>(&mut self, path: &[S], value: &[u8]) -> Result<()> {
        self.add_in(path, value, None)
    }

    /// [`Tree::add_mut`], noting what it replaced in `replaced` if given.
    fn add_in<S: AsRef<[u8]>>(&mut self, path: &[S], value: &[u8], replaced: Option<&mut Replaced>) -> Result<()> {
        // Before the staging: a value no record holds is never written.
        check_value_len(value.len())?;
        let staged = match &self.source {
            Some(source) if !self.broken => source.stage(value)?,
            _ => None,
        };
        let write = if value.len() <= flat::MAX_VALUE { Write::Value(value) } else { Write::Unknown };
        self.replace(path, Some(staged.map_or_else(|| value_child(value), Child::Contents)), write, replaced)?;
        self.trace_update(|in_ctx, out_ctx| Row::Add { key: to_key(path), value: value.to_vec(), in_ctx, out_ctx });
        Ok(())
    }

    /// [`Tree::add_tree`] in place.
    pub fn add_tree_mut<S: AsRef<[u8]>>(&mut self, path: &[S], tree: &Tree) -> Result<()> {
        self.add_tree_in(path, tree, None)
    }

    /// [`Tree::add_tree_mut`], noting what it replaced in `replaced` if
    /// given.
    fn add_tree_in<S: AsRef<[u8]>>(&mut self, path: &[S], tree: &Tree, replaced: Option<&mut Replaced>) -> Result<()> {
        if let (Some(mine), Some(theirs)) = (&self.source, &tree.source)
            && mine.instance_id() != theirs.instance_id()
        {
            return Err(crate::Error::ForeignTree);
        }
        // A directory is shaped by its layout: it enters only a tree of the
        // same one (or an empty tree of no store, which takes its store).
        let (mine, theirs) = (loader_of(&self.source).layout(), loader_of(&tree.source).layout());
        if mine != theirs && tree.node.kind() == Kind::Dir && !(self.source.is_none() && self.is_empty()?) {
            return Err(crate::Error::LayoutMismatch {
                what: "the tree added".into(),
                found: crate::error::layout_name(theirs),
                expected: crate::error::layout_name(mine),
            });
        }
        // A value made by `Tree::of_value` enters a directory here.
        if let Child::Contents(node::Leaf::Value(value)) = &tree.node {
            check_value_len(value.bytes.len())?;
        }
        if self.source.is_none() {
            self.source = tree.source.clone();
        }
        let new = if tree.is_empty()? { None } else { Some(tree.node.clone()) };
        if new.is_some() {
            self.refs = self.refs.and(tree.refs);
        }
        let write = match &new {
            None => Write::Absent,
            Some(child) if child.kind() == Kind::Dir => Write::Dir,
            Some(_) => Write::Unknown,
        };
        self.replace(path, new, write, replaced)?;
        match &tree.origin {
            // Read from this very context: the trace's copy.
            Some((ctx, source)) if Some(*ctx) == self.ctx => {
                let source = source.clone();
                self.trace_update(|in_ctx, out_ctx| Row::Copy { source, target: to_key(path), in_ctx, out_ctx });
            }
            _ => {
                if let Some(sink) = self.sink() {
                    sink.gap("add_tree of a tree not read from the same context");
                    // The context changed in a way the trace cannot replay.
                    self.ctx = None;
                }
            }
        }
        Ok(())
    }

    /// Adds the subtree at `source` at `target` (Octez's `copy`); nothing
    /// changes when `source` holds nothing.
    pub fn copy_mut<S: AsRef<[u8]>, T: AsRef<[u8]>>(&mut self, source: &[S], target: &[T]) -> Result<()> {
        if let Some(subtree) = self.find_tree(source)? {
            self.add_tree_mut(target, &subtree)?;
        }
        Ok(())
    }

    /// [`Tree::remove`] in place.
    pub fn remove_mut<S: AsRef<[u8]>>(&mut self, path: &[S]) -> Result<()> {
        self.remove_in(path, None)
    }

    /// [`Tree::remove_mut`], noting what it replaced in `replaced` if given.
    fn remove_in<S: AsRef<[u8]>>(&mut self, path: &[S], replaced: Option<&mut Replaced>) -> Result<()> {
        self.replace(path, None, Write::Absent, replaced)?;
        self.trace_update(|in_ctx, out_ctx| Row::Remove { key: to_key(path), in_ctx, out_ctx });
        Ok(())
    }

    /// Puts `new` at `path` (removes what is there for `None`), and logs
    /// the update as `write` for the flat cache. What it replaced goes
    /// into `replaced`, if given; when nothing changed, `replaced` is left
    /// as given (the caller's "nothing, at the whole path").
    fn replace<S: AsRef<[u8]>>(
        &mut self,
        path: &[S],
        new: Option<Child>,
        write: Write<'_>,
        mut replaced: Option<&mut Replaced>,
    ) -> Result<()> {
        self.node()?;
        self.updates = self.updates.saturating_add(1);
        let steps = steps_of(path);
        if steps.is_empty() {
            let new = new.unwrap_or_else(|| Child::Dir(Ptr::mem(empty())));
            let old = std::mem::replace(&mut self.node, new);
            if let Some(replaced) = replaced {
                *replaced = Replaced { depth: 0, old: Some(old) };
            }
            if let Some(writes) = &mut self.writes {
                Writes::lose(writes);
            }
            return Ok(());
        }
        if steps.len() > MAX_PATH_STEPS {
            return Err(crate::Error::Invalid(format!("a path of {} steps (at most {MAX_PATH_STEPS})", steps.len())));
        }
        debug_assert!(
            !matches!(&new, Some(Child::Dir(Ptr::Mem(inode, _))) if inode.is_empty()),
            "an empty directory is never put as an entry"
        );
        // (The source's loader beside the node borrowed mutably.)
        let loader = loader_of(&self.source);
        let result = match &mut self.node {
            // A root in memory is updated where it is.
            Child::Dir(ptr @ Ptr::Mem(..)) => dir::update_path(
                <node::Held as dir::Hold>::as_mem_mut(ptr).expect("in memory"),
                &steps,
                new,
                &|_| loader,
                replaced,
            ),
            // Nothing below a contents to remove.
            Child::Contents(_) if new.is_none() => return Ok(()),
            node => {
                let (mut root, stored) = match std::mem::replace(node, Child::Dir(Ptr::mem(empty()))) {
                    Child::Dir(ptr) => match Resolve::load_to_update(loader, &ptr, 0) {
                        Ok(inode) => (inode, Ok(ptr)),
                        Err(e) => {
                            *node = Child::Dir(ptr);
                            return Err(e);
                        }
                    },
                    // Adding below a contents turns the tree into a directory.
                    contents => (empty(), Err(contents)),
                };
                let result = dir::update_path(&mut root, &steps, new, &|_| loader, replaced.as_deref_mut());
                *node = match (&result, stored) {
                    // Nothing was there to remove: the tree stays as it was.
                    (Ok(false), Ok(ptr)) => Child::Dir(ptr),
                    (_, stored) => {
                        // The contents the tree was is what the update replaced.
                        if let (Err(contents), Some(replaced)) = (stored, replaced) {
                            *replaced = Replaced { depth: 0, old: Some(contents) };
                        }
                        Child::Dir(Ptr::mem(root))
                    }
                };
                result
            }
        };
        if !matches!(result, Ok(false)) {
            if let Some(writes) = &mut self.writes {
                Writes::log(writes, &steps, write);
            }
            // Changed, a subtree is no longer a copy of where it was read.
            self.origin = None;
            // A failure after part of the update was applied (a directory
            // emptied, then its removal failed) must not be committed.
            self.broken = result.is_err();
        }
        result.map(|_| ())
    }

    /// Entries of the directory at `path` in the store's stable order, after
    /// skipping `offset`, at most `length` of them (all if `None`).
    pub fn list<S: AsRef<[u8]>>(&self, path: &[S], offset: u64, length: Option<u64>) -> Result<Vec<(Vec<u8>, Tree)>> {
        let Some(Child::Dir(ptr)) = self.get(path)? else { return Ok(Vec::new()) };
        let root = load(&ptr, 0, self.loader())?;
        let entries = dir::list(&root, offset, length.unwrap_or(u64::MAX), self.loader())?;
        Ok(entries.into_iter().map(|(step, child)| (step.to_vec(), self.with_node(child))).collect())
    }

    /// Number of entries of the directory at `path` (0 if it is not one),
    /// read from the directory's root inode: constant time.
    pub fn length<S: AsRef<[u8]>>(&self, path: &[S]) -> Result<u64> {
        match self.get(path)? {
            Some(Child::Dir(ptr)) => Ok(load(&ptr, 0, self.loader())?.len()),
            _ => Ok(0),
        }
    }

    /// Calls `f(key, tree)` on the tree at `path` (key `[]`) and everything
    /// below it whose depth `depth` includes (all if `None`), parents before
    /// children.
    pub fn fold<S: AsRef<[u8]>>(&self, path: &[S], depth: Option<Depth>, order: Order, f: &mut FoldFn<'_>) -> Result<()> {
        let Some(start) = self.find_tree(path)? else { return Ok(()) };
        let mut key = Vec::new();
        start.fold_at(0, &mut key, depth, order, f)
    }

    fn fold_at(&self, level: u32, key: &mut Vec<Vec<u8>>, depth: Option<Depth>, order: Order, f: &mut FoldFn<'_>) -> Result<()> {
        if depth.is_none_or(|d| d.includes(level)) {
            f(key, self)?;
        }
        let Child::Dir(ptr) = &self.node else { return Ok(()) };
        if !depth.is_none_or(|d| d.descends(level)) {
            return Ok(());
        }
        let root = load(ptr, 0, self.loader())?;
        let entries = match order {
            Order::Sorted => dir::collect_sorted(&root, self.loader())?,
            Order::Undefined => dir::list(&root, 0, u64::MAX, self.loader())?,
        };
        for (step, child) in entries {
            key.push(step.to_vec());
            self.with_node(child).fold_at(level + 1, key, depth, order, f)?;
            key.pop();
        }
        Ok(())
    }
}
