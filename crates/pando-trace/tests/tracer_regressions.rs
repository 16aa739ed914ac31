//! Regression tests for recording and trace decoding, from review: a
//! changed subtree is not a copy, no phantom reads, commits from before a
//! recording and other authors are counted as gaps, deep keys and
//! allocation-amplifying rows are rejected, and odd but legal sessions
//! replay exactly.

use pando_core::trace::Row;
use pando_store::{CommitMeta, Options, Store};
use pando_trace::TraceReader;
use pando_trace::replay::{Applied, Replayer};
use std::path::Path;

fn replay(trace: &Path, dir: &Path) -> (Vec<pando_core::Hash>, pando_trace::replay::Checks, Option<String>) {
    let store = Store::open(dir.join("replayed"), Options::default()).unwrap();
    let mut replayer = Replayer::new(&store);
    let mut out = Vec::new();
    let mut err = None;
    for row in TraceReader::open(trace).unwrap() {
        let row = match row {
            Ok(row) => row,
            Err(e) => {
                err = Some(e.to_string());
                break;
            }
        };
        match replayer.apply(row) {
            Ok(Applied::Block(_)) => out.push(replayer.last_commit.unwrap()),
            Ok(_) => {}
            Err(e) => {
                err = Some(e.to_string());
                break;
            }
        }
    }
    (out, replayer.checks.clone(), err)
}

/// Every row of `trace`: a recording with gaps may end with updates that
/// no recorded commit follows (the commit was a gap), which is no damage.
fn rows(trace: &Path) -> Vec<Row> {
    let mut reader = TraceReader::open(trace).unwrap();
    reader.accept_partial_tail(true);
    reader.map(|r| r.unwrap()).collect()
}

/// A subtree read with find_tree, changed, then added back: recorded as a Copy of the unchanged source.
#[test]
fn modified_find_tree_result_recorded_as_copy() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.repr");
    let (commit, summary) = {
        let store =
            Store::open(dir.path().join("orig"), Options { trace_file: Some(trace.clone()), ..Options::default() }).unwrap();
        let mut tree = store.empty_tree();
        tree.add_mut(&["a", "x"], b"1").unwrap();
        let mut sub = tree.find_tree(&["a"]).unwrap().unwrap();
        sub.add_mut(&["y"], b"2").unwrap(); // gap: update of a subtree
        tree.add_tree_mut(&["b"], &sub).unwrap();
        assert!(tree.mem(&["b", "y"]).unwrap());
        let c = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "m" }).unwrap();
        (c, store.finish_trace().unwrap().unwrap())
    };
    // Changed after it was read, the subtree is not a copy: no Copy row,
    // and what the trace cannot express is counted.
    assert!(summary.gaps > 0);
    assert!(rows(&trace).iter().all(|r| r.kind() != "copy"));
    let (commits, checks, _) = replay(&trace, dir.path());
    assert!(commits != vec![commit] || checks.all_passed());
}

/// remove_mut writes a mem_tree row nobody asked for.
#[test]
fn remove_records_a_spurious_mem_tree() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.repr");
    {
        let store =
            Store::open(dir.path().join("orig"), Options { trace_file: Some(trace.clone()), ..Options::default() }).unwrap();
        let mut tree = store.empty_tree();
        tree.add_mut(&["a", "x"], b"1").unwrap();
        tree.remove_mut(&["a", "x"]).unwrap();
        store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "m" }).unwrap();
        store.finish_trace().unwrap();
    }
    let kinds: Vec<&str> = rows(&trace).iter().map(|r| r.kind()).collect();
    assert_eq!(kinds, ["add", "remove", "commit"]);
}

/// Recording on a store that already has commits: checkout of an older commit.
#[test]
fn recording_on_a_non_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.repr");
    let first = {
        let store = Store::open(dir.path().join("orig"), Options::default()).unwrap();
        let t = store.empty_tree().add(&["a"], b"1").unwrap();
        let c = store.commit(&t, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "m" }).unwrap();
        store.close().unwrap();
        c
    };
    let summary = {
        let store =
            Store::open(dir.path().join("orig"), Options { trace_file: Some(trace.clone()), ..Options::default() }).unwrap();
        let mut t = store.checkout(&first).unwrap().unwrap();
        t.add_mut(&["b"], b"2").unwrap();
        store.commit(&t, CommitMeta { parents: &[first], date: 2, author: "Tezos", message: "m2" }).unwrap();
        store.finish_trace().unwrap().unwrap()
    };
    let (_, _, err) = replay(&trace, dir.path());
    assert!(err.is_some(), "the older commit is unknown to a fresh replay");
    assert!(summary.gaps >= 2, "the checkout and the parent are counted: {:?}", summary);
}

#[test]
fn complex_session_replays() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.repr");
    let mut commits = Vec::new();
    {
        let store =
            Store::open(dir.path().join("orig"), Options { trace_file: Some(trace.clone()), ..Options::default() }).unwrap();
        let e = store.empty_tree();
        let t1 = e.add(&["a"], b"1").unwrap();
        let c1 = store.commit(&t1, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "m" }).unwrap();
        commits.push(c1);
        // same commit again (same hash)
        let c1b = store.commit(&t1, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "m" }).unwrap();
        commits.push(c1b);
        assert_eq!(c1, c1b);
        // empty tree again (ctx 0) after it was used
        let e2 = store.empty_tree();
        let c0 = store.commit(&e2, CommitMeta { parents: &[], date: 5, author: "Tezos", message: "empty" }).unwrap();
        commits.push(c0);
        let x = store.checkout(&c1).unwrap().unwrap();
        let y = store.checkout(&c1).unwrap().unwrap();
        let x2 = x.add(&["b"], b"2").unwrap();
        let mut y2 = y.clone();
        y2.remove_mut(&["a"]).unwrap();
        assert!(y.find(&["b"]).unwrap().is_none());
        let c2 = store.commit(&x2, CommitMeta { parents: &[c1], date: 2, author: "Tezos", message: "x" }).unwrap();
        commits.push(c2);
        let c3 = store.commit(&y2, CommitMeta { parents: &[c1, c0], date: 3, author: "Tezos", message: "y" }).unwrap();
        commits.push(c3);
        // keep using x after commit, copy from x into x2-derived
        let sub = x.find_tree(&["a"]).unwrap().unwrap();
        let mut z = x.clone();
        z.add_tree_mut(&["c"], &sub).unwrap();
        let mut w = x2.clone();
        w.add_tree_mut(&["d"], &sub).unwrap(); // not same context -> gap expected
        let c4 = store.commit(&z, CommitMeta { parents: &[c2, c3], date: 4, author: "Tezos", message: "z" }).unwrap();
        commits.push(c4);
        let again = store.checkout(&c1).unwrap().unwrap();
        assert!(again.mem(&["a"]).unwrap());
        let c5 = store.commit(&again, CommitMeta { parents: &[c4], date: 6, author: "Tezos", message: "again" }).unwrap();
        commits.push(c5);
        let s = store.finish_trace().unwrap().unwrap();
        assert_eq!(s.gaps, 1, "only the add_tree from another context: {:?}", s.first_gap);
    }
    let (replayed, checks, err) = replay(&trace, dir.path());
    assert!(err.is_none(), "{err:?}");
    assert_eq!(replayed, commits);
    assert!(checks.all_passed(), "{checks:?}");
}

fn write_trace(path: &Path, rows: &[Row]) {
    let mut w = pando_trace::TraceWriter::create(path).unwrap();
    for r in rows {
        w.append(r).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn deep_key_in_hostile_trace() {
    use pando_core::trace::Scope;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.repr");
    let key: Vec<Vec<u8>> = (0..3_000).map(|_| b"a".to_vec()).collect();
    write_trace(
        &trace,
        &[Row::Add { key: key.clone(), value: b"v".to_vec(), in_ctx: Scope::Keep(0), out_ctx: Scope::Keep(1) }, commit_row()],
    );
    let (_, _, err) = replay(&trace, dir.path());
    let err = err.expect("a 3,000-step key is refused, not a stack overflow");
    assert!(err.contains("steps"), "{err}");
}

#[test]
fn empty_steps_amplify_allocation() {
    // A row of 1 + 5 + N bytes decodes into N Vec<u8> (24 bytes each).
    let n = 20_000_000usize;
    let mut body = vec![1u8]; // Add
    pando_core::varint::write_u64(&mut body, n as u64);
    body.extend(std::iter::repeat_n(0u8, n));
    assert!(Row::decode(&body).is_err(), "a key of 20 million steps is refused before allocating them");
}

/// The commit that ends each hostile case.
fn commit_row() -> Row {
    use pando_core::trace::Scope;
    Row::Commit { hash: Scope::Keep(b"h".to_vec()), date: 0, message: b"m".to_vec(), parents: vec![], in_ctx: Scope::Keep(1) }
}

#[test]
fn hostile_small_cases() {
    use pando_core::trace::Scope;
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<Vec<Row>> = vec![
        vec![Row::Add { key: vec![], value: b"v".to_vec(), in_ctx: Scope::Keep(0), out_ctx: Scope::Keep(1) }, commit_row()],
        vec![Row::Add { key: vec![vec![]], value: b"v".to_vec(), in_ctx: Scope::Keep(0), out_ctx: Scope::Keep(1) }, commit_row()],
        vec![
            Row::Copy { source: vec![], target: vec![b"a".to_vec()], in_ctx: Scope::Keep(0), out_ctx: Scope::Keep(1) },
            Row::Commit {
                hash: Scope::Keep(b"h".to_vec()),
                date: i64::MIN,
                message: b"m".to_vec(),
                parents: vec![Scope::Keep(b"h".to_vec())],
                in_ctx: Scope::Keep(1),
            },
        ],
    ];
    for (i, rows) in cases.iter().enumerate() {
        let trace = dir.path().join(format!("t{i}.repr"));
        write_trace(&trace, rows);
        let d = dir.path().join(format!("d{i}"));
        std::fs::create_dir_all(&d).unwrap();
        // Odd rows end in an error or a result, never a panic.
        let _ = replay(&trace, &d);
    }
}

#[test]
fn non_tezos_author_is_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.repr");
    let (c, s) = {
        let store =
            Store::open(dir.path().join("orig"), Options { trace_file: Some(trace.clone()), ..Options::default() }).unwrap();
        let t = store.empty_tree().add(&["a"], b"1").unwrap();
        let c = store.commit(&t, CommitMeta { parents: &[], date: 1, author: "alice", message: "m" }).unwrap();
        (c, store.finish_trace().unwrap().unwrap())
    };
    let (commits, checks, _) = replay(&trace, dir.path());
    assert_eq!(s.gaps, 1, "{:?}", s.first_gap);
    assert!(checks.hashes_checked == 1 && commits != vec![c], "the replay commits as Tezos");
}
