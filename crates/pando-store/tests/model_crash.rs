//! The model test over simulated storage with crashes (docs/TESTING.md,
//! tests 2 and 4 together): random sequences of tree updates, commits,
//! checkouts, collections, flushes and clean reopens run on a store over
//! `FaultyStorage` and on a `BTreeMap` model per commit, with crashes at
//! random points. A crash is either between two operations (`Crash`), in
//! the middle of one (`Die`: from the Nth storage operation on, every one
//! fails, so the operation, a commit's sync or a collection's switch in
//! the background, stops there), or after an injected I/O error
//! (`Fault`: EIO, ENOSPC or a short write on the Nth storage operation).
//! Each test crashes its own way: the writes not yet synced are all
//! dropped, all kept, or each kept, dropped or torn at random. A case in
//! four runs in archive mode, where a collection renames the chunks it
//! retires to cold files and every commit stays readable.
//!
//! After each crash the store is reopened from what a reboot would see,
//! and every commit the model made is looked up. What must hold:
//! - each commit is either collected, or there with exactly its content
//!   (hash and every path against the model's copy), or absent;
//! - in commit order: the collected ones first, then those there, then
//!   the absent ones (a crash loses a suffix of the history, never a
//!   commit before one that survived);
//! - every commit the sync policy promised durable when its `commit`,
//!   `wait_durable`, `flush` or close returned is there (`EveryCommit`:
//!   each; `Pipelined`: all but the last returned; `EveryN(n)`: all but the
//!   last n-1; `Never`: those before the last flush);
//! - the collected ones are those of the collections seen to take effect,
//!   plus possibly those of the one running at the crash (or of one that
//!   failed writing its switch), whole or not at all; none in archive mode;
//! - the head (`last_commit`) is the newest commit there, the commit count
//!   counts exactly the commits there, and `check` of every record finds
//!   no problem;
//! - then the store goes on from its head and matches the model again.
//!
//! An operation that fails after an injected fault fails with an I/O error
//! (or a refusal naming it, or a failed collection) and never gives wrong
//! data; a failed commit leaves the store refusing writes (fail-stop) and
//! the process then crashes and restarts. A fault a collection absorbs
//! leaves the store usable: the operations go on.
//!
//! Collections run on their own thread, so a case is not exactly
//! reproducible: where a crash falls in a collection varies between runs
//! of the same seed. Shrinking works all the same for most failures.
//!
//! A short run is part of `cargo test`; the long run (figures in the
//! README's durability line):
//! `PANDO_MODEL_CRASH_CASES=2000 cargo test --release -p pando-store --test model_crash -- --nocapture`

mod common;

use common::paths::{big_dir, fill_path, path};
use common::*;
use pando_core::{CommitInfo, Hash};
use pando_store::io::{CrashMode, FaultKind, FaultPlan, FaultyStorage, Storage};
use pando_store::{CheckScope, CommitMeta, Error, Options, Retention, Store, SyncPolicy, Tree};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
#[path = "../../pando-core/tests/support/seeds.rs"]
mod seeds;
use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Clone, Debug)]
enum Op {
    Add(Path, Vec<u8>),
    Remove(Path),
    Copy(Path, Path),
    /// Adds `count` entries named from `first` under `dir` (grows directories past 32 and 256).
    Fill(Path, u16, u16),
    /// Removes entries `first..first+count` under `dir`.
    Drain(Path, u16, u16),
    Commit,
    Checkout(usize),
    /// Starts a collection keeping the given commit and those after it
    /// (waiting first for the running one, if any).
    Gc(usize),
    WaitGc,
    Flush,
    WaitDurable,
    /// Closes the store cleanly and opens it again.
    Reopen,
    /// Crashes now (the seed tears the pending writes in `CrashMode::Random`).
    Crash(u64),
    /// The process dies at its Nth storage operation from now.
    Die(u16),
    /// The Nth storage operation from now fails.
    Fault(u16, FaultKind),
}

/// Short values, and values past `stage_bytes` (written when added).
fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => prop::collection::vec(any::<u8>(), 0..8),
        1 => prop::collection::vec(any::<u8>(), 60..200),
    ]
}

fn fault_kind() -> impl Strategy<Value = FaultKind> {
    prop::sample::select(vec![FaultKind::Eio, FaultKind::NoSpace, FaultKind::ShortWrite])
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (path(), value()).prop_map(|(p, v)| Op::Add(p, v)),
        2 => path().prop_map(Op::Remove),
        1 => (path(), path()).prop_map(|(a, b)| Op::Copy(a, b)),
        2 => (big_dir(), 1u16..300, 0u16..100).prop_map(|(d, n, f)| Op::Fill(d, n, f)),
        1 => (big_dir(), 1u16..300, 0u16..100).prop_map(|(d, n, f)| Op::Drain(d, n, f)),
        8 => Just(Op::Commit),
        1 => (0usize..100).prop_map(Op::Checkout),
        2 => (0usize..100).prop_map(Op::Gc),
        1 => Just(Op::WaitGc),
        1 => Just(Op::Flush),
        1 => Just(Op::WaitDurable),
        1 => Just(Op::Reopen),
        2 => any::<u64>().prop_map(Op::Crash),
        // A commit makes about five storage operations, a collection a few dozen.
        2 => (0u16..30).prop_map(Op::Die),
        1 => (0u16..30, fault_kind()).prop_map(|(n, k)| Op::Fault(n, k)),
    ]
}

fn policy() -> impl Strategy<Value = SyncPolicy> {
    prop::sample::select(vec![SyncPolicy::EveryCommit, SyncPolicy::Pipelined, SyncPolicy::EveryN(3), SyncPolicy::Never])
}

/// `archive`: collections move what they would discard to cold files
/// (renamed chunks), and every commit stays readable; none starts on its own.
fn options(sync: SyncPolicy, archive: bool) -> Options {
    Options {
        sync,
        retention: if archive { Retention::Archive { commits: 10, every: u64::MAX } } else { Retention::KeepAll },
        cache_bytes: 64 << 10,
        read_cache_bytes: 4 << 10,
        chunk_target_bytes: 2 << 10,
        // Commits reach the pack in several pieces: a crash between them
        // leaves records without their commit.
        commit_spill_bytes: 1 << 10,
        checkpoint_commits: 3,
        stage_bytes: 60,
        // Collections at the writer's priority: the test waits for them on
        // a machine other work keeps busy.
        gc_low_priority: false,
        ..Options::default()
    }
}

/// Figures of one test, over every case it ran.
#[derive(Default)]
struct Stats {
    cases: AtomicU64,
    archive_cases: AtomicU64,
    ops: AtomicU64,
    commits: AtomicU64,
    crashes: AtomicU64,
    /// Crashes while a collection ran.
    crashes_in_gc: AtomicU64,
    /// Crashes in the middle of an operation (`Die`).
    deaths: AtomicU64,
    /// Crashes after an injected fault fired.
    after_faults: AtomicU64,
    reopens: AtomicU64,
    /// Commits found after a crash, each read whole against the model.
    commits_checked: AtomicU64,
    /// Commits a crash lost that were not durable yet (allowed).
    lost_undurable: AtomicU64,
    collections: AtomicU64,
    /// Crashes after which the store held cold files (archive mode).
    crashes_with_cold_files: AtomicU64,
}

fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// What an operation did.
#[derive(PartialEq)]
enum Step {
    Done,
    /// It failed on an injected fault or the process's death: the
    /// process crashes now.
    Failed,
}

/// What a commit looks like after a reopen.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Found {
    Collected,
    There,
    Absent,
}

struct Run<'a> {
    mode: CrashMode,
    sync: SyncPolicy,
    archive: bool,
    storage: FaultyStorage,
    store: Option<Store>,
    tree: Tree,
    model: Model,
    /// Every commit made and not lost, in commit order, with its model.
    commits: Vec<(Hash, Model)>,
    /// `commits[..durable]` are durable by the sync policy's promise.
    durable: usize,
    /// `commits[..collected]` were collected by collections that took effect.
    collected: usize,
    /// The running collection keeps `commits[keep..]`.
    pending_gc: Option<usize>,
    /// A collection that failed without taking effect in memory: its
    /// switch may have reached the disk all the same (a control write
    /// whose sync failed), and a crash may show it.
    failed_gc: Option<usize>,
    /// The commit the tree was checked out from.
    head: Option<usize>,
    /// The process dies at this storage operation (counted since the plan was set).
    dies_at: Option<u64>,
    /// What happened to the store (opens, collections, failures), for a
    /// failure's message: a case does not replay exactly.
    log: RefCell<Vec<String>>,
    stats: &'a Stats,
}

fn fail(message: impl Into<String>) -> TestCaseError {
    TestCaseError::fail(message.into())
}

impl Run<'_> {
    fn store(&self) -> &Store {
        self.store.as_ref().expect("open between operations")
    }

    fn note(&self, event: String) {
        self.log.borrow_mut().push(event);
    }

    fn dead(&self) -> bool {
        self.dies_at.is_some_and(|at| self.storage.mutating_ops() > at)
    }

    /// An error from the store: allowed only after an injected fault or
    /// the process's death, and only as an I/O error, a refusal naming an
    /// earlier one, or a failed collection.
    fn failure(&self, e: Error, what: &str) -> Result<Step, TestCaseError> {
        self.note(format!("{what} failed: {e}"));
        if self.storage.injected().is_empty() {
            return Err(fail(format!("{what}: {e}, with no fault injected")));
        }
        match e {
            Error::Io { .. } | Error::PreviousIo { .. } | Error::GcFailed(_) => Ok(Step::Failed),
            other => Err(fail(format!("{what}: {other:?} after {:?}", self.storage.injected()))),
        }
    }

    fn apply(&mut self, n: usize, op: Op) -> Result<Step, TestCaseError> {
        match op {
            Op::Add(p, v) => {
                if let Err(e) = self.tree.add_mut(&p, &v) {
                    return self.failure(e, "add");
                }
                model_add(&mut self.model, &p, &v);
            }
            Op::Remove(p) => {
                if let Err(e) = self.tree.remove_mut(&p) {
                    return self.failure(e, "remove");
                }
                model_remove(&mut self.model, &p);
            }
            Op::Copy(source, target) => match self.tree.find_tree(&source).unwrap() {
                Some(sub) => {
                    if let Err(e) = self.tree.add_tree_mut(&target, &sub) {
                        return self.failure(e, "add_tree");
                    }
                    let sub_model = model_subtree(&self.model, &source).expect("the model has the source");
                    model_add_tree(&mut self.model, &target, &sub_model);
                }
                None => prop_assert!(model_subtree(&self.model, &source).is_none()),
            },
            Op::Fill(dir, count, first) => {
                for i in first as u32..first as u32 + count as u32 {
                    let (p, v) = (fill_path(&dir, i), i.to_be_bytes());
                    if let Err(e) = self.tree.add_mut(&p, &v) {
                        return self.failure(e, "fill");
                    }
                    model_add(&mut self.model, &p, &v);
                }
            }
            Op::Drain(dir, count, first) => {
                for i in first as u32..first as u32 + count as u32 {
                    let p = fill_path(&dir, i);
                    if let Err(e) = self.tree.remove_mut(&p) {
                        return self.failure(e, "drain");
                    }
                    model_remove(&mut self.model, &p);
                }
            }
            Op::Commit => return self.commit(n),
            Op::Checkout(i) => {
                if self.commits.is_empty() {
                    return Ok(Step::Done);
                }
                let i = i % self.commits.len();
                let (hash, model) = &self.commits[i];
                let found = self.store().checkout(hash);
                if i < self.collected {
                    prop_assert!(
                        matches!(found, Err(Error::CollectedCommit(_))),
                        "collected commit {i}: {:?}",
                        found.map(|_| ())
                    );
                } else if self.pending_gc.is_some_and(|keep| i < keep) {
                    // The running collection may have collected it already;
                    // work does not move to a commit being collected.
                    prop_assert!(matches!(found, Ok(Some(_)) | Err(Error::CollectedCommit(_))), "{:?}", found.err());
                } else {
                    let tree = found.map_err(|e| fail(format!("checkout of commit {i}: {e}")))?;
                    self.tree = tree.ok_or_else(|| fail(format!("commit {i} missing")))?;
                    self.model = model.clone();
                    self.head = Some(i);
                }
            }
            Op::Gc(i) => {
                if self.commits.is_empty() {
                    return Ok(Step::Done);
                }
                self.settle_gc(true)?;
                // Keeping the head at least, as a node does.
                let head = self.head.unwrap_or(self.commits.len() - 1);
                let keep = i % (head + 1);
                match self.store().gc(&self.commits[keep].0) {
                    Ok(()) => {
                        prop_assert!(keep >= self.collected, "a collection from collected commit {keep} started");
                        self.pending_gc = Some(keep);
                    }
                    Err(Error::CollectedCommit(_)) => prop_assert!(keep < self.collected, "commit {keep} is not collected"),
                    Err(e) => return self.failure(e, "gc"),
                }
            }
            Op::WaitGc => self.settle_gc(true)?,
            Op::Flush => match self.store().flush() {
                Ok(()) => self.durable = self.commits.len(),
                Err(e) => return self.failure(e, "flush"),
            },
            Op::WaitDurable => match self.store().wait_durable() {
                Ok(()) if self.sync == SyncPolicy::Pipelined => self.durable = self.commits.len(),
                Ok(()) => {}
                Err(e) => return self.failure(e, "wait_durable"),
            },
            Op::Reopen => return self.reopen(),
            Op::Crash(seed) => self.crash(seed)?,
            Op::Die(at) => {
                // Counting restarts here; a fault still armed is dropped.
                self.storage.set_plan(FaultPlan::default());
                self.storage.die_at(Some(u64::from(at)));
                self.dies_at = Some(u64::from(at));
            }
            Op::Fault(at, kind) => {
                self.storage.die_at(None);
                self.dies_at = None;
                self.storage.set_plan(FaultPlan { fail_op: Some((u64::from(at), kind)), fail_reads_after: None });
            }
        }
        Ok(Step::Done)
    }

    fn commit(&mut self, n: usize) -> Result<Step, TestCaseError> {
        let parents: Vec<Hash> = self.head.map(|h| self.commits[h].0).into_iter().collect();
        let s = self.store.as_ref().expect("open");
        match s.commit(&self.tree, CommitMeta { parents: &parents, date: n as i64, author: "Tezos", message: &format!("op {n}") })
        {
            Ok(hash) => {
                self.commits.push((hash, self.model.clone()));
                let len = self.commits.len();
                self.head = Some(len - 1);
                self.tree = s.checkout(&hash).unwrap().expect("just committed");
                let promised = match self.sync {
                    SyncPolicy::EveryCommit => len,
                    SyncPolicy::Pipelined => len - 1,
                    SyncPolicy::EveryN(every) => len.saturating_sub(every.max(1) as usize - 1),
                    SyncPolicy::Never => 0,
                };
                self.durable = self.durable.max(promised);
                bump(&self.stats.commits, 1);
                Ok(Step::Done)
            }
            Err(e) => {
                let step = self.failure(e, "commit")?;
                // Fail-stop: nothing more is written.
                let again =
                    s.commit(&self.tree, CommitMeta { parents: &parents, date: n as i64, author: "Tezos", message: "again" });
                prop_assert!(
                    matches!(again, Err(Error::PreviousIo { .. })),
                    "a commit after a failed one: {:?}",
                    again.map(|_| ())
                );
                // A commit that failed may be on disk all the same (its
                // records written, its sync or control write failed): the
                // crash that follows may keep it, never anything after it.
                let info = CommitInfo {
                    root: model_hash(&self.model),
                    parents,
                    date: n as i64,
                    author: "Tezos".into(),
                    message: format!("op {n}"),
                };
                self.commits.push((info.hash(), self.model.clone()));
                Ok(step)
            }
        }
    }

    /// Takes in the running collection's outcome once it finished (or
    /// waits for it, if `wait`): the commits it collected, if it took
    /// effect, and every other commit reads right.
    fn settle_gc(&mut self, wait: bool) -> Result<(), TestCaseError> {
        let Some(keep) = self.pending_gc else { return Ok(()) };
        if !wait && self.store().gc_status().is_some() {
            return Ok(());
        }
        let outcome = self.store().wait_gc();
        self.note(format!(
            "collection keeping {keep}: {:?}",
            outcome.as_ref().map(|r| r.as_ref().map(|r| (r.generation, r.last_generation, r.collected_commits)))
        ));
        self.pending_gc = None;
        let took_effect = keep > self.collected
            && match self.store().checkout(&self.commits[keep - 1].0) {
                Err(Error::CollectedCommit(_)) => true,
                Ok(Some(_)) => false,
                other => return Err(fail(format!("commit {} after a collection: {:?}", keep - 1, other.map(|t| t.is_some())))),
            };
        match outcome {
            Ok(_) => {
                prop_assert!(
                    took_effect || keep <= self.collected || self.archive,
                    "a collection keeping {keep} finished, collecting nothing"
                )
            }
            // A failed collection may have taken effect before it failed.
            // The store stays usable, unless it failed to write its switch:
            // then it refuses writes, and the next one fails.
            Err(e) => {
                self.failure(e, "collection")?;
                if !took_effect {
                    self.failed_gc = Some(keep);
                }
            }
        }
        prop_assert!(!(took_effect && self.archive), "an archive collected commits");
        if took_effect {
            self.collected = keep;
            bump(&self.stats.collections, 1);
        }
        self.check_commits()?;
        if self.head.is_some_and(|h| h < self.collected) {
            self.go_to_newest()?;
        }
        Ok(())
    }

    /// The working tree hashes and reads as the model says. A value
    /// staged by an update that a fault or the process's death stopped
    /// may fail to read then, with an error.
    fn check_working_tree(&self, n: usize) -> Result<Step, TestCaseError> {
        let hash = match self.tree.hash() {
            Ok(hash) => hash,
            Err(e) => return self.failure(e, "hash of the working tree"),
        };
        prop_assert_eq!(hash, model_hash(&self.model), "the working tree's hash after op {}", n);
        for (path, value) in &self.model {
            match self.tree.find(path) {
                Ok(found) => prop_assert_eq!(found.as_ref(), Some(value), "{:?} after op {}", path, n),
                Err(e) => return self.failure(e, "read of the working tree"),
            }
        }
        Ok(Step::Done)
    }

    /// Every commit reads as the model says, or is collected if it should be.
    fn check_commits(&self) -> Result<(), TestCaseError> {
        let s = self.store();
        for (i, (hash, model)) in self.commits.iter().enumerate() {
            match s.checkout(hash) {
                Err(Error::CollectedCommit(_)) if i < self.collected => {}
                Ok(Some(tree)) if i >= self.collected => {
                    check_tree(&tree, model).map_err(|e| fail(format!("commit {i}: {e}")))?
                }
                other => {
                    return Err(fail(format!(
                        "commit {i} (collected below {}): {:?}",
                        self.collected,
                        other.map(|t| t.is_some())
                    )));
                }
            }
        }
        Ok(())
    }

    fn go_to_newest(&mut self) -> Result<(), TestCaseError> {
        match self.commits.len() {
            0 => {
                self.tree = self.store().empty_tree();
                self.model = Model::new();
                self.head = None;
            }
            len => {
                let (hash, model) = &self.commits[len - 1];
                self.tree = self.store().checkout(hash).map_err(|e| fail(format!("head: {e}")))?.expect("the newest commit");
                self.model = model.clone();
                self.head = Some(len - 1);
            }
        }
        Ok(())
    }

    /// A clean close and open: every commit is durable.
    fn reopen(&mut self) -> Result<Step, TestCaseError> {
        let store = self.store.take().expect("open");
        self.tree = Tree::empty();
        if let Err(e) = store.close() {
            return self.failure(e, "close");
        }
        self.durable = self.commits.len();
        bump(&self.stats.reopens, 1);
        match Store::open_storage(Arc::new(self.storage.clone()), options(self.sync, self.archive)) {
            Ok(store) => self.store = Some(store),
            Err(e) => return self.failure(e, "open"),
        }
        self.recovered("a clean reopen")?;
        Ok(Step::Done)
    }

    /// The process crashes now: a reboot sees the durable images and the
    /// pending writes kept, dropped or torn as the test's mode says.
    fn crash(&mut self, seed: u64) -> Result<(), TestCaseError> {
        if self.dead() {
            bump(&self.stats.deaths, 1);
        } else if !self.storage.injected().is_empty() {
            bump(&self.stats.after_faults, 1);
        }
        // Nothing the dying process still does reaches the storage: not
        // its collection's next steps, not the close below.
        self.storage.die_at(Some(0));
        let image = self.storage.crash(self.mode, seed);
        bump(&self.stats.crashes, 1);
        if self.pending_gc.is_some() {
            bump(&self.stats.crashes_in_gc, 1);
        }
        self.tree = Tree::empty();
        drop(self.store.take());
        self.storage = image;
        self.dies_at = None;
        let store = Store::open_storage(Arc::new(self.storage.clone()), options(self.sync, self.archive))
            .map_err(|e| fail(format!("open after a crash: {e}; log {:#?}", self.log.borrow())))?;
        self.store = Some(store);
        if self.storage.list().unwrap_or_default().iter().any(|name| name.starts_with("cold-")) {
            bump(&self.stats.crashes_with_cold_files, 1);
        }
        let there = self.recovered("a crash")?;
        bump(&self.stats.commits_checked, there as u64);
        Ok(())
    }

    /// After an open: what the store has is what the model allows (see
    /// the module's header); the model forgets the commits lost, and work
    /// goes on from the newest one. Returns how many commits are there.
    fn recovered(&mut self, what: &str) -> Result<usize, TestCaseError> {
        let s = self.store();
        let mut found = Vec::with_capacity(self.commits.len());
        for (i, (hash, model)) in self.commits.iter().enumerate() {
            found.push(match s.checkout(hash) {
                Ok(Some(tree)) => {
                    check_tree(&tree, model).map_err(|e| fail(format!("after {what}, commit {i}: {e}")))?;
                    Found::There
                }
                Ok(None) => Found::Absent,
                Err(Error::CollectedCommit(_)) => Found::Collected,
                Err(e) => return Err(fail(format!("after {what}, commit {i}: {e}"))),
            });
        }
        let collected = found.iter().take_while(|f| **f == Found::Collected).count();
        let kept = collected + found[collected..].iter().take_while(|f| **f == Found::There).count();
        let history = || {
            format!(
                "after {what}: {found:?}, durable {}, collected {}, collection running {:?}, failed {:?}; generation {}; \
                 files {:?}; injected {:?}; log {:#?}",
                self.durable,
                self.collected,
                self.pending_gc,
                self.failed_gc,
                s.info().generation,
                {
                    let mut files = self.storage.list().unwrap_or_default();
                    files.sort();
                    files
                },
                self.storage.injected(),
                self.log.borrow()
            )
        };
        prop_assert!(found[kept..].iter().all(|f| *f == Found::Absent), "{}", history());
        prop_assert!(kept >= self.durable, "durable commits lost {}", history());
        prop_assert!(
            collected == self.collected || Some(collected) == self.pending_gc || Some(collected) == self.failed_gc,
            "collected commits no collection took {}",
            history()
        );
        prop_assert!(collected == 0 || kept > collected, "the kept commit of a collection is lost {}", history());
        prop_assert!(collected == 0 || !self.archive, "an archive collected commits {}", history());
        prop_assert_eq!(s.commit_count(), (kept - collected) as u64, "commit count {}", history());
        let last = s.last_commit().map_err(|e| fail(format!("last commit after {what}: {e}")))?;
        prop_assert_eq!(last, kept.checked_sub(1).map(|i| self.commits[i].0), "head {}", history());
        let report = s.check(CheckScope::All, 10, &mut |_| {}).map_err(|e| fail(format!("check after {what}: {e}")))?;
        prop_assert!(report.is_clean(), "check after {what}: {:?}", report.problems);
        bump(&self.stats.lost_undurable, (self.commits.len() - kept) as u64);
        if collected > self.collected {
            bump(&self.stats.collections, 1);
        }
        self.note(format!(
            "after {what}: {found:?}, generation {}, durable {}, collected {}, collection running {:?}, failed {:?}",
            s.info().generation,
            self.durable,
            self.collected,
            self.pending_gc,
            self.failed_gc
        ));
        self.commits.truncate(kept);
        self.durable = kept;
        self.collected = collected;
        self.pending_gc = None;
        self.failed_gc = None;
        self.go_to_newest()?;
        Ok(kept - collected)
    }
}

/// An operation without its paths and values.
fn short(op: &Op) -> String {
    match op {
        Op::Add(..) => "Add".into(),
        Op::Remove(..) => "Remove".into(),
        Op::Copy(..) => "Copy".into(),
        Op::Fill(_, count, _) => format!("Fill({count})"),
        Op::Drain(_, count, _) => format!("Drain({count})"),
        other => format!("{other:?}"),
    }
}

fn run_case(mode: CrashMode, sync: SyncPolicy, archive: bool, ops: Vec<Op>, stats: &Stats) -> Result<(), TestCaseError> {
    let storage = FaultyStorage::new();
    let store = Store::open_storage(Arc::new(storage.clone()), options(sync, archive)).unwrap();
    let tree = store.empty_tree();
    let mut run = Run {
        mode,
        sync,
        archive,
        storage,
        store: Some(store),
        tree,
        model: Model::new(),
        commits: Vec::new(),
        durable: 0,
        collected: 0,
        pending_gc: None,
        failed_gc: None,
        head: None,
        dies_at: None,
        log: RefCell::default(),
        stats,
    };
    bump(&stats.cases, 1);
    bump(&stats.archive_cases, u64::from(archive));
    let count = ops.len();
    for (n, op) in ops.into_iter().enumerate() {
        bump(&stats.ops, 1);
        run.note(format!("op {n}: {}", short(&op)));
        let step = run.apply(n, op)?;
        if step == Step::Failed || run.dead() {
            run.crash(n as u64)?;
            continue;
        }
        run.settle_gc(false)?;
        if run.dead() {
            run.crash(n as u64)?;
            continue;
        }
        if run.check_working_tree(n)? == Step::Failed {
            run.crash(n as u64)?;
        }
    }
    // Every case ends in a crash, and the store then takes a commit that
    // survives a clean reopen.
    run.crash(count as u64)?;
    let tree = run.tree.add(&["after"], b"recovery").map_err(|e| fail(format!("after recovery: {e}")))?;
    model_add(&mut run.model, &[b"after".to_vec()], b"recovery");
    run.tree = tree;
    prop_assert!(run.commit(count)? == Step::Done, "commit after recovery");
    prop_assert!(run.reopen()? == Step::Done, "reopen after recovery");
    Ok(())
}

/// 24 cases per crash mode in `cargo test`; `PANDO_MODEL_CRASH_CASES=N` for a longer run.
fn cases() -> u32 {
    std::env::var("PANDO_MODEL_CRASH_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
}

fn run_mode(mode: CrashMode) {
    let stats = Stats::default();
    let config = Config { source_file: Some(file!()), max_shrink_iters: 1000, ..seeds::config(cases()) };
    let mut runner = TestRunner::new(config);
    // One case in four in archive mode.
    let strategy = (policy(), prop::bool::weighted(0.25), prop::collection::vec(op(), 1..60));
    let result = runner.run(&strategy, |(sync, archive, ops)| run_case(mode, sync, archive, ops, &stats));
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    eprintln!(
        "{mode:?}: {} cases ({} in archive mode), {} operations, {} commits; {} crashes ({} during a collection, {} mid-operation, {} after \
         an injected fault), {} clean reopens; {} commits read back whole after a crash, {} undurable ones lost, 0 durable \
         ones lost; {} collections took effect; {} crashes with cold files",
        get(&stats.cases),
        get(&stats.archive_cases),
        get(&stats.ops),
        get(&stats.commits),
        get(&stats.crashes),
        get(&stats.crashes_in_gc),
        get(&stats.deaths),
        get(&stats.after_faults),
        get(&stats.reopens),
        get(&stats.commits_checked),
        get(&stats.lost_undurable),
        get(&stats.collections),
        get(&stats.crashes_with_cold_files),
    );
    if let Err(e) = result {
        panic!("{mode:?}: {e}");
    }
}

#[test]
fn crash_dropping_unsynced_writes() {
    run_mode(CrashMode::DropAll);
}

#[test]
fn crash_keeping_unsynced_writes() {
    run_mode(CrashMode::KeepAll);
}

#[test]
fn crash_tearing_unsynced_writes() {
    run_mode(CrashMode::Random);
}
