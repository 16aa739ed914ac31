//! Versions of one tree for a host whose values are persistent and are
//! freed late, by a garbage collector (the OCaml binding: `add ctx k v`
//! returns a new context and the old one lives on until the GC finalizes
//! it). Updating a [`Tree`] persistently copies the path it changes, since
//! the old value still holds it; here the newest version is changed in
//! place instead, as the native replay changes its tree, and each update
//! logs how to undo it, so that an older version still held can be
//! rebuilt if it is used again.
//!
//! Invariants:
//! - `State::tree` is version `first + undo.len()`, the newest; `undo[i]`
//!   turns version `first + i + 1` back into version `first + i`; `held[i]`
//!   counts the [`Versions`] of version `first + i` alive: `held.len() ==
//!   undo.len() + 1` (asserted in `update` and `trim`). `paths` holds the
//!   entries' paths in the log's order, `undo[i].path_len` bytes each, so
//!   it is empty when the log is (asserted in `trim`).
//! - The front of the log goes as soon as no version it leads to is held:
//!   the log is as long as the oldest version the host still holds. A
//!   line made with a `base` (version 0 as a tree sharing no inode with
//!   the newest: a commit read back from its store, an empty tree) needs
//!   no log for version 0: its values are counted in `base_held` once the
//!   log has moved past it (`first > 0`). (Asserted in `older`, `held` and
//!   `trim`.)
//! - An older version read or updated is rebuilt (copying the paths the
//!   undo entries touch) into `rebuilt`, kept while that version is held
//!   and never changed in place: an update of it is a persistent update,
//!   which starts a new line. So no line refers to another, and each lock
//!   is taken alone (asserted in `lock`; tested by
//!   `an_update_through_a_contents_is_undone`).
//! - The caller's closures run under the line's lock: they must not
//!   re-enter this line (in OCaml: not allocate, since a collection could
//!   finalize a version of the same line). (Asserted in `lock`.)
//! - An update that fails leaves the versions as they were, except when
//!   the tree broke (an I/O error midway, [`Tree`]'s own rule): then every
//!   version of the line reports it (tested by
//!   `a_failed_update_leaves_the_versions_as_they_were`).

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};

use smallvec::SmallVec;

use super::Tree;
use crate::error::Result;
use crate::node::Child;

/// One version of a line of trees (see the module's text).
pub struct Versions {
    line: Arc<Mutex<State>>,
    version: u64,
}

/// One update of a path, as [`Versions::update`] applies it: what
/// [`Tree::add_mut`], [`Tree::add_tree_mut`] and [`Tree::remove_mut`] do.
pub enum Update<'a> {
    /// Adds this value.
    Add(&'a [u8]),
    /// Adds this tree (an empty tree removes what is there).
    AddTree(&'a Tree),
    /// Removes what is there.
    Remove,
}

/// A line: its newest tree and the way back to the versions still held.
struct State {
    tree: Tree,
    first: u64,
    undo: VecDeque<Undo>,
    /// The undo entries' paths.
    paths: Paths,
    held: VecDeque<u32>,
    /// Older versions rebuilt, by version.
    rebuilt: HashMap<u64, Tree>,
    /// Version 0, if the line was made with it apart.
    base: Option<Tree>,
    /// Values of version 0 alive once `first > 0`.
    base_held: u32,
}

/// Puts `old` back at a path (removes what is there for `None`). Its
/// path is the next `path_len` bytes of the line's `paths`.
struct Undo {
    path_len: u32,
    old: Option<Child>,
}

/// The steps of an entry's path, as [`Paths::push`] wrote them.
fn steps(mut bytes: &[u8]) -> SmallVec<[&[u8]; 16]> {
    let mut steps = SmallVec::new();
    while let Some((len, tail)) = bytes.split_first_chunk::<4>() {
        let (step, tail) = tail.split_at(u32::from_le_bytes(*len) as usize);
        steps.push(step);
        bytes = tail;
    }
    steps
}

/// The paths of a line's undo entries, in the log's order: each step as
/// a 32-bit length and its bytes. One ring of bytes for the whole log,
/// since it holds an entry per update and lives as long as the oldest
/// version the host holds (an allocation per entry, freed as cold as it
/// was made, cost the binding more than the entry itself).
#[derive(Default)]
struct Paths(VecDeque<u8>);

impl Paths {
    /// Appends `steps`, returning their length in bytes.
    fn push<S: AsRef<[u8]>>(&mut self, steps: &[S]) -> u32 {
        let before = self.0.len();
        for step in steps {
            let step = step.as_ref();
            self.0.extend((step.len() as u32).to_le_bytes());
            self.0.extend(step);
        }
        (self.0.len() - before) as u32
    }
}

impl Versions {
    /// The first version of a new line, holding `tree`.
    pub fn new(tree: Tree) -> Versions {
        Versions::line(tree, None)
    }

    /// [`Versions::new`], with `base`: the same contents as `tree`, sharing
    /// none of its inodes in memory (the tree of a commit as
    /// [`Store::stored_tree`] reads it, or another empty tree). The line
    /// then keeps no undo entry for the host's first value, however long
    /// it holds it (a checked-out context OCaml has not yet freed).
    ///
    /// [`Store::stored_tree`]: crate::Store::stored_tree
    pub fn with_base(tree: Tree, base: Tree) -> Versions {
        Versions::line(tree, Some(base))
    }

    fn line(tree: Tree, base: Option<Tree>) -> Versions {
        let state = State {
            tree,
            first: 0,
            undo: VecDeque::new(),
            paths: Paths::default(),
            held: VecDeque::from([1]),
            rebuilt: HashMap::new(),
            base,
            base_held: 0,
        };
        Versions { line: Arc::new(Mutex::new(state)), version: 0 }
    }

    /// Runs `f` on this version's tree (under the line's lock).
    pub fn read<T>(&self, f: impl FnOnce(&Tree) -> T) -> Result<T> {
        let mut state = self.lock();
        if self.version == state.newest() {
            return Ok(f(&state.tree));
        }
        Ok(f(state.older(self.version)?))
    }

    /// This version's tree, as a tree of its own.
    pub fn tree(&self) -> Result<Tree> {
        self.read(Tree::clone)
    }

    /// A new version: this one with `update` applied at `path`. The newest
    /// version is updated in place, logging what the update replaced (one
    /// descent for both); an older one is copied.
    pub fn update<S: AsRef<[u8]>>(&self, path: &[S], update: Update<'_>) -> Result<Versions> {
        let mut state = self.lock();
        if self.version != state.newest() {
            let mut tree = state.older(self.version)?.clone();
            drop(state);
            tree.apply(path, &update)?;
            return Ok(Versions::new(tree));
        }
        let replaced = state.tree.apply(path, &update)?;
        let path_len = state.paths.push(&path[..replaced.depth]);
        state.undo.push_back(Undo { path_len, old: replaced.old });
        state.held.push_back(1);
        debug_assert_eq!(state.held.len(), state.undo.len() + 1, "a count of values for each version the log reaches");
        Ok(Versions { line: self.line.clone(), version: state.newest() })
    }

    /// Holds `tree` as this version's tree from now on, if this version is
    /// the newest (else does nothing). `tree` must have the same contents:
    /// a committed tree as read back from its store, so that the inodes
    /// the commit wrote are no longer held here ([`Store::stored_tree`]).
    ///
    /// [`Store::stored_tree`]: crate::Store::stored_tree
    pub fn replace_newest(&self, tree: Tree) {
        let mut state = self.lock();
        if self.version == state.newest() {
            state.tree = tree;
        }
    }

    fn lock(&self) -> Locked<'_> {
        // Each lock is taken alone: a thread holding one (a closure run
        // under it) takes no other, which would deadlock on its own line.
        debug_assert!(!HOLDS_A_LINE.get(), "a line's lock taken while this thread holds one (a closure re-entered)");
        // A panic under the lock (a bug) leaves the state as it was at some
        // step: still a tree and a log, which the panic's error reports.
        let guard = self.line.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if cfg!(debug_assertions) {
            HOLDS_A_LINE.set(true);
        }
        Locked(guard)
    }
}

thread_local! {
    /// Whether this thread holds a line's lock (kept in debug builds only).
    static HOLDS_A_LINE: Cell<bool> = const { Cell::new(false) };
}

/// A line's lock, held.
struct Locked<'a>(MutexGuard<'a, State>);

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        if cfg!(debug_assertions) {
            HOLDS_A_LINE.set(false);
        }
    }
}

impl Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.0
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.0
    }
}

impl State {
    /// The newest version's number.
    fn newest(&self) -> u64 {
        self.first + self.undo.len() as u64
    }

    /// Version `version` (older than the newest), rebuilt if it is not yet.
    fn older(&mut self, version: u64) -> Result<&Tree> {
        if version == 0
            && let Some(base) = &self.base
        {
            return Ok(base);
        }
        debug_assert!((self.first..self.newest()).contains(&version), "the log reaches back to every older version held");
        if !self.rebuilt.contains_key(&version) {
            let mut tree = self.tree.clone();
            let back = (version - self.first) as usize;
            // The ring in one slice (moved at most once per rebuild), read
            // back from its end as the entries are undone.
            let mut paths: &[u8] = self.paths.0.make_contiguous();
            for undo in self.undo.range(back..).rev() {
                let (rest, path) = paths.split_at(paths.len() - undo.path_len as usize);
                tree.put_back(&steps(path), undo.old.as_ref())?;
                paths = rest;
            }
            self.rebuilt.insert(version, tree);
        }
        Ok(&self.rebuilt[&version])
    }
}

impl State {
    /// The count of values of `version` alive.
    fn held(&mut self, version: u64) -> &mut u32 {
        match version.checked_sub(self.first) {
            Some(i) => &mut self.held[i as usize],
            None => {
                debug_assert!(self.base.is_some(), "the log moved past a version held, which is not its base");
                &mut self.base_held
            }
        }
    }

    /// Drops the front of the log while no version it leads to needs it.
    fn trim(&mut self) {
        while self.held.len() > 1 {
            if self.held[0] > 0 {
                if self.first > 0 || self.base.is_none() {
                    break;
                }
                // Version 0, held, is its base.
                self.base_held = self.held[0];
                self.rebuilt.remove(&0);
            } else if self.first == 0 {
                // Version 0 is no longer held: nor is its base.
                self.base = None;
            }
            self.held.pop_front();
            if let Some(undo) = self.undo.pop_front() {
                self.paths.0.drain(..undo.path_len as usize);
            }
            self.first += 1;
        }
        debug_assert_eq!(self.held.len(), self.undo.len() + 1, "a count of values for each version the log reaches");
        debug_assert!(!self.undo.is_empty() || self.paths.0.is_empty(), "the paths are the entries' alone");
        debug_assert!(
            self.first == 0 || self.base.is_some() == (self.base_held > 0),
            "past version 0, `base_held` counts its values while the base is kept"
        );
    }
}

impl Clone for Versions {
    /// Another value of the same version.
    fn clone(&self) -> Versions {
        *self.lock().held(self.version) += 1;
        Versions { line: self.line.clone(), version: self.version }
    }
}

impl Drop for Versions {
    fn drop(&mut self) {
        let mut state = self.lock();
        let held = state.held(self.version);
        *held -= 1;
        if *held == 0 {
            state.rebuilt.remove(&self.version);
            if self.version < state.first {
                state.base = None;
            }
        }
        state.trim();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An update of a small tree: paths of at most three steps over three
    /// names, so that updates meet, replace and remove each other.
    #[derive(Clone, Debug)]
    enum Op {
        Add(Vec<u8>, u8),
        Remove(Vec<u8>),
        /// Adds the subtree at the first path at the second.
        Copy(Vec<u8>, Vec<u8>),
    }

    fn path(steps: &[u8]) -> Vec<Vec<u8>> {
        steps.iter().map(|s| vec![b'a' + s]).collect()
    }

    fn apply(tree: &mut Tree, op: &Op) -> Result<()> {
        match op {
            Op::Add(p, v) => tree.add_mut(&path(p), &[*v]),
            Op::Remove(p) => tree.remove_mut(&path(p)),
            Op::Copy(from, to) => {
                let found = tree.find_tree(&path(from))?;
                match found {
                    Some(found) => tree.add_tree_mut(&path(to), &found),
                    None => Ok(()),
                }
            }
        }
    }

    /// `op` applied to `versions` as the binding applies it.
    fn update(versions: &Versions, op: &Op) -> Result<Versions> {
        match op {
            Op::Add(p, v) => versions.update(&path(p), Update::Add(&[*v])),
            Op::Remove(p) => versions.update(&path(p), Update::Remove),
            Op::Copy(from, to) => match versions.read(|t| t.find_tree(&path(from)))?? {
                Some(found) => versions.update(&path(to), Update::AddTree(&found)),
                None => Ok(versions.clone()),
            },
        }
    }

    fn steps() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(0u8..3, 0..=3)
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (steps(), any::<u8>()).prop_map(|(p, v)| Op::Add(p, v)),
            2 => steps().prop_map(Op::Remove),
            1 => (steps(), steps()).prop_map(|(a, b)| Op::Copy(a, b)),
        ]
    }

    /// What the host does with its values: update one (by index among the
    /// live ones), read one, or drop one.
    #[derive(Clone, Debug)]
    enum Step {
        Update(usize, Op),
        Read(usize),
        Drop(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => (any::<usize>(), op()).prop_map(|(i, op)| Step::Update(i, op)),
            2 => any::<usize>().prop_map(Step::Read),
            2 => any::<usize>().prop_map(Step::Drop),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        /// Every version alive reads as the persistent model says, whatever
        /// order the host updates, reads and drops them in.
        #[test]
        fn every_version_reads_as_its_persistent_model(steps in proptest::collection::vec(step(), 1..120), base: bool) {
            let first = if base { Versions::with_base(Tree::empty(), Tree::empty()) } else { Versions::new(Tree::empty()) };
            let mut live: Vec<(Versions, Tree)> = vec![(first, Tree::empty())];
            for step in steps {
                match step {
                    Step::Update(i, op) if !live.is_empty() => {
                        let i = i % live.len();
                        let mut model = live[i].1.clone();
                        apply(&mut model, &op).unwrap();
                        let next = update(&live[i].0, &op).unwrap();
                        live.push((next, model));
                    }
                    Step::Read(i) if !live.is_empty() => {
                        let (versions, model) = &live[i % live.len()];
                        prop_assert_eq!(versions.read(|t| t.hash().unwrap()).unwrap(), model.hash().unwrap());
                    }
                    Step::Drop(i) if !live.is_empty() => {
                        live.remove(i % live.len());
                    }
                    _ => {}
                }
            }
            for (versions, model) in &live {
                prop_assert_eq!(versions.read(|t| t.hash().unwrap()).unwrap(), model.hash().unwrap());
            }
        }
    }

    #[test]
    fn the_log_shrinks_as_older_versions_are_dropped() {
        let mut version = Versions::new(Tree::empty());
        for i in 0..100u8 {
            let next = version.update(&[[b'k', i]], Update::Add(&[i])).unwrap();
            version = next; // the older version is dropped here
        }
        let state = version.lock();
        assert_eq!((state.undo.len(), state.paths.0.len(), state.held.len(), state.first, state.newest()), (0, 0, 1, 100, 100));
        drop(state);
        let kept = version.clone();
        let next = version.update(&[b"x"], Update::Add(b"1")).unwrap();
        drop(version);
        let state = next.lock();
        assert_eq!(
            (state.undo.len(), state.paths.0.len()),
            (1, 5),
            "version 100 is still held: its path's 4-byte length and step"
        );
        drop(state);
        assert!(!kept.read(|t| t.mem(&[b"x"]).unwrap()).unwrap());
        assert_eq!(next.lock().rebuilt.len(), 1);
        drop(kept);
        let state = next.lock();
        assert_eq!((state.undo.len(), state.paths.0.len(), state.rebuilt.len()), (0, 0, 0));
        drop(state);
        assert_eq!(next.read(|t| t.find(&[b"k\x05"]).unwrap()).unwrap(), Some(vec![5]));
    }

    #[test]
    fn a_line_with_a_base_keeps_no_log_for_its_first_value() {
        let first = Versions::with_base(Tree::empty(), Tree::empty());
        let mut version = first.add_one(0);
        for i in 1..100u8 {
            version = version.add_one(i);
        }
        assert_eq!(version.lock().undo.len(), 0, "version 0 held, and no entry for it");
        assert!(first.read(|t| t.is_empty().unwrap()).unwrap());
        let other = first.update(&[b"z"], Update::Add(b"1")).unwrap();
        assert!(!other.read(|t| t.mem(&[b"k\x05"]).unwrap()).unwrap());
        drop(first);
        let state = version.lock();
        assert!(state.base.is_none() && state.base_held == 0);
    }

    #[test]
    fn a_base_goes_with_the_last_value_of_version_0() {
        let first = Versions::with_base(Tree::empty(), Tree::empty());
        let next = first.add_one(0);
        drop(first);
        let state = next.lock();
        assert!(state.base.is_none() && state.base_held == 0 && state.undo.is_empty());
    }

    #[test]
    fn a_failed_update_leaves_the_versions_as_they_were() {
        let base = Versions::new(Tree::empty().add(&["a"], b"v").unwrap());
        let next = base.add_one(1);
        let too_long = vec!["s"; crate::tree::MAX_PATH_STEPS + 1];
        assert!(next.update(&too_long, Update::Add(b"x")).is_err());
        let too_large = vec![0; crate::tree::MAX_VALUE_BYTES as usize + 1];
        assert!(next.update(&["a"], Update::Add(&too_large)).is_err());
        let state = next.lock();
        assert_eq!((state.newest(), state.undo.len(), state.held.len()), (next.version, 1, 2));
        drop(state);
        assert_eq!(next.read(|t| t.find(&[b"k\x01"]).unwrap()).unwrap(), Some(vec![1]));
        assert!(!base.read(|t| t.mem(&[b"k\x01"]).unwrap()).unwrap());
        let later = next.add_one(2);
        assert_eq!(base.read(|t| t.find(&["a"]).unwrap()).unwrap(), Some(b"v".to_vec()));
        assert!(later.read(|t| t.mem(&[b"k\x01"]).unwrap() && t.mem(&[b"k\x02"]).unwrap()).unwrap());
    }

    impl Versions {
        fn add_one(&self, i: u8) -> Versions {
            self.update(&[[b'k', i]], Update::Add(&[i])).unwrap()
        }
    }

    #[test]
    fn an_update_through_a_contents_is_undone() {
        let base = Versions::new(Tree::empty().add(&["a"], b"v").unwrap());
        let next = base.update(&["a", "b"], Update::Add(b"w")).unwrap();
        assert_eq!(base.read(|t| t.find(&["a"]).unwrap()).unwrap(), Some(b"v".to_vec()));
        assert_eq!(next.read(|t| t.find(&["a", "b"]).unwrap()).unwrap(), Some(b"w".to_vec()));
        // An update of the older version starts a line of its own.
        let other = base.update(&["c"], Update::Add(b"x")).unwrap();
        assert!(!Arc::ptr_eq(&other.line, &base.line));
        assert_eq!(other.read(|t| (t.mem(&["a"]).unwrap(), t.mem(&["c"]).unwrap())).unwrap(), (true, true));
        assert!(!next.read(|t| t.mem(&["c"]).unwrap()).unwrap());
    }
}
