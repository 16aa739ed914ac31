//! Model-based property test: random sequences of add, remove, add_tree,
//! commit, checkout, reopen and garbage collection against a `BTreeMap`
//! model per commit; every hash is compared with the reference hasher built
//! from scratch. Every kept commit reads back right; every collected one is
//! a clean `CollectedCommit` error; a tree kept from before collections,
//! committed after them, is refused cleanly or reads back whole. After
//! each step, `find`, `mem` and `mem_tree` of paths that hold contents,
//! directories or nothing agree with the model, twice (the second time
//! from the store's flat read cache, sized to be emptied often in the
//! longer runs).

mod common;

use common::paths::{big_dir, fill_path, path};
use common::*;
use pando_core::Hash;
use pando_store::io::MemStorage;
use pando_store::{CommitMeta, Depth, Error, Kind, Options, Order, Store, SyncPolicy, Tree};
use proptest::prelude::*;
#[path = "../../pando-core/tests/support/seeds.rs"]
mod seeds;
use std::collections::HashSet;
use std::sync::Arc;

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
    Reopen,
    /// Keeps a clone of the current tree: later in-place updates must not change it.
    Snapshot,
    /// Switches between the functional (`add`) and in-place (`add_mut`) forms.
    ToggleInPlace,
    /// Starts a collection keeping the given commit and those after it.
    Gc(usize),
    WaitGc,
    /// Commits on the head a tree kept since any earlier point (a
    /// `Snapshot`), whatever collections took effect since.
    CommitStale(usize),
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => prop::collection::vec(any::<u8>(), 0..8),
        1 => prop::collection::vec(any::<u8>(), 30..80),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (path(), value()).prop_map(|(p, v)| Op::Add(p, v)),
        3 => path().prop_map(Op::Remove),
        2 => (path(), path()).prop_map(|(a, b)| Op::Copy(a, b)),
        2 => (big_dir(), 1u16..300, 0u16..100).prop_map(|(d, n, f)| Op::Fill(d, n, f)),
        2 => (big_dir(), 1u16..300, 0u16..100).prop_map(|(d, n, f)| Op::Drain(d, n, f)),
        3 => Just(Op::Commit),
        1 => (0usize..100).prop_map(Op::Checkout),
        1 => Just(Op::Reopen),
        3 => Just(Op::Snapshot),
        2 => Just(Op::ToggleInPlace),
        2 => (0usize..100).prop_map(Op::Gc),
        1 => Just(Op::WaitGc),
        3 => (0usize..100).prop_map(Op::CommitStale),
    ]
}

fn options(read_cache_bytes: u64) -> Options {
    Options {
        read_cache_bytes,
        cache_bytes: 64 << 10,
        chunk_target_bytes: 2 << 10,
        checkpoint_commits: 3,
        sync: SyncPolicy::EveryCommit,
        // Some values are staged: written when added, before their commit.
        stage_bytes: 60,
        // Collections trace only what is new, but for the first after
        // each open, which traces all.
        gc_whole_trace_growth_percent: u64::MAX,
        ..Options::default()
    }
}

/// `find`, `mem` and `mem_tree` of every path of one to three steps from
/// `a`, `b` and `index` agree with the model, read twice.
fn check_reads(tree: &Tree, model: &Model) -> Result<(), TestCaseError> {
    let steps: [&[u8]; 3] = [b"a", b"b", b"index"];
    let mut paths: Vec<Path> = steps.iter().map(|s| vec![s.to_vec()]).collect();
    for _ in 0..2 {
        let longer: Vec<Path> = paths
            .iter()
            .filter(|p| p.len() == paths.last().unwrap().len())
            .flat_map(|p| steps.iter().map(move |s| [p.clone(), vec![s.to_vec()]].concat()))
            .collect();
        paths.extend(longer);
    }
    for _ in 0..2 {
        for p in &paths {
            let value = model.get(p);
            let under = model.range(p.clone()..).next().is_some_and(|(k, _)| k.len() > p.len() && k.starts_with(p));
            prop_assert_eq!(tree.find(p).unwrap(), value.cloned(), "find {:?}", p);
            prop_assert_eq!(tree.mem(p).unwrap(), value.is_some(), "mem {:?}", p);
            prop_assert_eq!(tree.mem_tree(p).unwrap(), value.is_some() || under, "mem_tree {:?}", p);
        }
    }
    Ok(())
}

fn run(ops: Vec<Op>, read_cache_bytes: u64) -> Result<(), TestCaseError> {
    let options = || options(read_cache_bytes);
    let storage = MemStorage::new();
    let mut store = Some(Store::open_storage(Arc::new(storage.clone()), options()).unwrap());
    let mut tree = store.as_ref().unwrap().empty_tree();
    let mut model = Model::new();
    let mut commits: Vec<(Hash, Model)> = Vec::new();
    let mut head: Option<Hash> = None;
    let mut snapshots: Vec<(Tree, Model)> = Vec::new();
    // Trees kept across collections too, for `CommitStale`.
    let mut stale: Vec<(Tree, Model)> = Vec::new();
    let mut in_place = false;
    // Collections: the position (in `commits`) of the first kept commit of
    // the running one; the commits collected so far.
    let mut pending_gc: Option<usize> = None;
    // A collection that finished just before `gc` started the next one.
    let mut finished_early: Option<usize> = None;
    let mut collected: HashSet<Hash> = HashSet::new();
    let first_position = |commits: &[(Hash, Model)], hash: &Hash| commits.iter().position(|(c, _)| c == hash).unwrap();
    for (n, op) in ops.into_iter().enumerate() {
        let s = store.as_ref().unwrap();
        match op {
            Op::Add(p, v) => {
                if in_place {
                    tree.add_mut(&p, &v).unwrap();
                } else {
                    tree = tree.add(&p, &v).unwrap();
                }
                model_add(&mut model, &p, &v);
            }
            Op::Remove(p) => {
                if in_place {
                    tree.remove_mut(&p).unwrap();
                } else {
                    tree = tree.remove(&p).unwrap();
                }
                model_remove(&mut model, &p);
            }
            Op::Snapshot => {
                snapshots.push((tree.clone(), model.clone()));
                stale.push((tree.clone(), model.clone()));
            }
            Op::CommitStale(i) => {
                let Some((old, old_model)) = stale.get(i % stale.len().max(1)) else { continue };
                let parents: Vec<Hash> = head.into_iter().collect();
                match s.commit(
                    old,
                    CommitMeta { parents: &parents, date: n as i64, author: "Tezos", message: &format!("stale {n}") },
                ) {
                    Ok(hash) => {
                        let t = s.checkout(&hash).unwrap().expect("just committed");
                        check_tree(&t, old_model).map_err(|e| TestCaseError::fail(format!("stale tree committed: {e}")))?;
                        commits.push((hash, old_model.clone()));
                        head = Some(hash);
                        (tree, model) = (t, old_model.clone());
                    }
                    Err(Error::Collected { .. } | Error::CollectedCommit(_)) => {
                        prop_assert!(!collected.is_empty() || pending_gc.is_some(), "refused with no collection");
                    }
                    Err(e) => return Err(TestCaseError::fail(format!("stale commit: {e}"))),
                }
            }
            Op::ToggleInPlace => in_place = !in_place,
            Op::Copy(source, target) => {
                if let Some(sub) = tree.find_tree(&source).unwrap() {
                    if in_place {
                        tree.add_tree_mut(&target, &sub).unwrap();
                    } else {
                        tree = tree.add_tree(&target, &sub).unwrap();
                    }
                    let sub_model = model_subtree(&model, &source).expect("model agrees the source exists");
                    model_add_tree(&mut model, &target, &sub_model);
                } else {
                    prop_assert!(model_subtree(&model, &source).is_none());
                }
            }
            Op::Fill(dir, count, first) => {
                for i in first as u32..first as u32 + count as u32 {
                    let p = fill_path(&dir, i);
                    let v = i.to_be_bytes();
                    tree.add_mut(&p, &v).unwrap();
                    model_add(&mut model, &p, &v);
                }
            }
            Op::Drain(dir, count, first) => {
                for i in first as u32..first as u32 + count as u32 {
                    let p = fill_path(&dir, i);
                    tree.remove_mut(&p).unwrap();
                    model_remove(&mut model, &p);
                }
            }
            Op::Commit => {
                let parents: Vec<Hash> = head.into_iter().collect();
                match s
                    .commit(&tree, CommitMeta { parents: &parents, date: n as i64, author: "Tezos", message: &format!("op {n}") })
                {
                    Ok(hash) => {
                        commits.push((hash, model.clone()));
                        head = Some(hash);
                        tree = s.checkout(&hash).unwrap().expect("just committed");
                    }
                    // The running collection has taken effect and collected
                    // the commit the tree came from: a clean refusal.
                    Err(Error::Collected { .. } | Error::CollectedCommit(_)) => {
                        let keep = pending_gc.expect("only a collection refuses a commit");
                        let base = head.expect("a collected base");
                        prop_assert!(first_position(&commits, &base) < keep, "the base was kept, yet the commit was refused");
                    }
                    Err(e) => return Err(TestCaseError::fail(format!("commit: {e}"))),
                }
            }
            Op::Checkout(i) => {
                if commits.is_empty() {
                    continue;
                }
                let (hash, m) = &commits[i % commits.len()];
                if collected.contains(hash) {
                    prop_assert!(matches!(s.checkout(hash), Err(Error::CollectedCommit(h)) if h == *hash));
                    continue;
                }
                if pending_gc.is_some_and(|keep| first_position(&commits, hash) < keep) {
                    // The running collection may have collected it already;
                    // work does not move to a commit being collected.
                    let checked_out = s.checkout(hash);
                    prop_assert!(matches!(checked_out, Ok(Some(_)) | Err(Error::CollectedCommit(_))), "{:?}", checked_out.err());
                    continue;
                }
                tree = s.checkout(hash).unwrap().expect("committed earlier");
                model = m.clone();
                head = Some(*hash);
            }
            Op::Gc(i) => {
                if commits.is_empty() {
                    continue;
                }
                // Keeping the current head at least, as a node does: the
                // working tree's stored nodes stay readable.
                let head_position = head.map_or(commits.len() - 1, |h| first_position(&commits, &h));
                let (hash, _) = &commits[i % (head_position + 1)];
                let position = first_position(&commits, hash);
                match s.gc(hash) {
                    Err(Error::GcRunning) => prop_assert!(pending_gc.is_some()),
                    Err(Error::CollectedCommit(_)) => {
                        prop_assert!(collected.contains(hash) || pending_gc.is_some_and(|keep| position < keep))
                    }
                    Ok(()) => {
                        prop_assert!(!collected.contains(hash));
                        // The running one had finished: this one starts after it.
                        finished_early = pending_gc.take();
                        pending_gc = Some(position);
                        // Clones of older trees may lose their nodes at any moment now.
                        snapshots.clear();
                    }
                    Err(e) => return Err(TestCaseError::fail(format!("gc: {e}"))),
                }
            }
            Op::WaitGc => {
                s.wait_gc().unwrap();
            }
            Op::Reopen => {
                // Trees of the closed instance cannot be committed to the new one.
                snapshots.clear();
                stale.clear();
                drop(store.take());
                store = Some(Store::open_storage(Arc::new(storage.clone()), options()).unwrap());
                let s = store.as_ref().unwrap();
                // Closing switches to a collection that had finished, and
                // stops one still running: the oldest commit tells which.
                if let Some(keep) = pending_gc.take()
                    && keep > 0
                    && !collected.contains(&commits[keep - 1].0)
                    && matches!(s.checkout(&commits[keep - 1].0), Err(Error::CollectedCommit(_)))
                {
                    collected.extend(commits[..keep].iter().map(|(h, _)| *h));
                    if head.is_some_and(|h| collected.contains(&h)) {
                        head = commits.last().map(|(h, _)| *h);
                    }
                }
                tree = match head {
                    Some(h) => s.checkout(&h).unwrap().expect("durable commit"),
                    None => s.empty_tree(),
                };
                model = match head {
                    Some(h) => commits.iter().find(|(c, _)| *c == h).unwrap().1.clone(),
                    None => Model::new(),
                };
                for (hash, m) in &commits {
                    if collected.contains(hash) {
                        prop_assert!(matches!(s.checkout(hash), Err(Error::CollectedCommit(_))));
                        continue;
                    }
                    let t = s.checkout(hash).unwrap().expect("every kept commit survives a reopen");
                    check_tree(&t, m).map_err(TestCaseError::fail)?;
                }
            }
        }
        // A collection that finished has taken effect.
        let s = store.as_ref().unwrap();
        let finished = match (finished_early.take(), pending_gc) {
            (Some(keep), _) => Some(keep),
            (None, Some(keep)) if s.gc_status().is_none() => {
                pending_gc = None;
                s.wait_gc().unwrap();
                Some(keep)
            }
            _ => None,
        };
        if let Some(keep) = finished {
            collected.extend(commits[..keep].iter().map(|(h, _)| *h).filter(|h| first_position(&commits, h) < keep));
            snapshots.clear();
            for (i, (hash, m)) in commits.iter().enumerate() {
                if collected.contains(hash) {
                    prop_assert!(matches!(s.checkout(hash), Err(Error::CollectedCommit(_))));
                } else if pending_gc.is_some_and(|keep| i < keep) {
                    // The next collection, running, may collect it meanwhile:
                    // then it reads right or fails cleanly.
                    match s.checkout(hash) {
                        Ok(t) => {
                            if let Err(e) = check_tree(&t.expect("kept so far"), m) {
                                prop_assert!(e.contains("garbage-collected"), "after a collection: {e}");
                            }
                        }
                        Err(e) => prop_assert!(matches!(e, Error::CollectedCommit(_)), "{e}"),
                    }
                } else {
                    let t = s.checkout(hash).unwrap().expect("kept");
                    check_tree(&t, m).map_err(|e| TestCaseError::fail(format!("after a collection: {e}")))?;
                }
            }
            // Work goes on from the newest commit if the current one was collected.
            if head.is_some_and(|h| collected.contains(&h)) {
                let (hash, m) = commits.last().unwrap();
                tree = s.checkout(hash).unwrap().unwrap();
                model = m.clone();
                head = Some(*hash);
            }
        }
        check_tree(&tree, &model).map_err(|e| TestCaseError::fail(format!("after op {n}: {e}")))?;
        check_reads(&tree, &model)?;
        prop_assert_eq!(tree.length::<&[u8]>(&[]).unwrap() as usize, {
            let mut firsts: Vec<&Vec<u8>> = model.keys().map(|k| &k[0]).collect();
            firsts.dedup();
            firsts.len()
        });
    }
    for (i, (snapshot, snapshot_model)) in snapshots.iter().enumerate() {
        check_tree(snapshot, snapshot_model).map_err(|e| TestCaseError::fail(format!("snapshot {i} changed: {e}")))?;
    }
    check_fold(&tree, &model)?;
    Ok(())
}

/// `fold` visits exactly the model's contents (and directories), sorted.
fn check_fold(tree: &Tree, model: &Model) -> Result<(), TestCaseError> {
    let mut contents = Vec::new();
    let mut dirs = 0usize;
    tree.fold::<&[u8]>(&[], None, Order::Sorted, &mut |key, sub| {
        match sub.kind() {
            Kind::Contents => contents.push((key.to_vec(), sub.to_value()?.unwrap())),
            Kind::Dir => dirs += 1,
        }
        Ok(())
    })
    .unwrap();
    let expected: Vec<(Path, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    prop_assert_eq!(contents, expected, "sorted fold lists the model in order");
    let mut prefixes: Vec<&[Vec<u8>]> = model.keys().flat_map(|k| (0..k.len()).map(move |i| &k[..i])).collect();
    prefixes.sort();
    prefixes.dedup();
    prop_assert_eq!(dirs, prefixes.len().max(1));
    // Depth filter: exactly the entries at depth 1.
    let mut top = Vec::new();
    tree.fold::<&[u8]>(&[], Some(Depth::Eq(1)), Order::Undefined, &mut |key, _| {
        top.push(key.to_vec());
        Ok(())
    })
    .unwrap();
    prop_assert_eq!(top.len() as u64, tree.length::<&[u8]>(&[]).unwrap());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { max_shrink_iters: 2000, ..seeds::config(model_cases()) })]

    #[test]
    fn store_matches_model(ops in prop::collection::vec(op(), 1..40)) {
        run(ops, Options::default().read_cache_bytes)?;
    }

    /// Longer runs: several collections between reopens, so that most
    /// trace only what was written since the one before.
    #[test]
    fn store_matches_model_across_collections(ops in prop::collection::vec(op(), 60..160)) {
        // A flat read cache of a few dozen entries, emptied again and again.
        run(ops, 4 << 10)?;
    }
}

#[test]
fn unbound_tree_commits_into_store() {
    let store = Store::open_storage(Arc::new(MemStorage::new()), options(Options::default().read_cache_bytes)).unwrap();
    let tree = Tree::empty().add(&["a", "b"], b"v").unwrap();
    let hash = store.commit(&tree, CommitMeta { parents: &[], date: 0, author: "Tezos", message: "" }).unwrap();
    let back = store.checkout(&hash).unwrap().unwrap();
    assert_eq!(back.find(&["a", "b"]).unwrap().unwrap(), b"v");
    assert_eq!(back.hash().unwrap(), tree.hash().unwrap());
}

/// 96 cases in CI; `PANDO_MODEL_CASES=N` for a longer run.
fn model_cases() -> u32 {
    std::env::var("PANDO_MODEL_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(96)
}
