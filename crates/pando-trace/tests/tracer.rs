//! A store opened with a trace path records every call made through its
//! API; replaying the recording into a fresh store reproduces every commit
//! hash and every read result.

use pando_store::{CommitMeta, Options, Store};
use pando_trace::TraceReader;
use pando_trace::replay::{Applied, Replayer};

#[test]
fn a_recorded_session_replays_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("recorded.repr");
    let mut commits = Vec::new();
    {
        let options = Options { trace_file: Some(trace.clone()), ..Options::default() };
        let store = Store::open(dir.path().join("original"), options).unwrap();
        let mut tree = store.empty_tree();
        let mut parents = Vec::new();
        for block in 0..30u32 {
            for i in 0..40u32 {
                let account = format!("{:08x}", (i * 7919 + block * 31) % 500);
                tree.add_mut(&["contracts", "index", &account, "balance"], &(i ^ block).to_be_bytes()).unwrap();
                assert!(tree.mem(&["contracts", "index", &account, "balance"]).unwrap());
                tree.find(&["contracts", "index", &account, "counter"]).unwrap();
            }
            if block % 5 == 4 {
                // A copy, as Octez makes one: find_tree, then add_tree into the same context.
                let snapshot = tree.find_tree(&["contracts", "index"]).unwrap().unwrap();
                tree.add_tree_mut(&["snapshots", &block.to_string()], &snapshot).unwrap();
                tree.remove_mut(&["contracts", "index", "00000000"]).unwrap();
            }
            // The functional forms are recorded too.
            tree = tree.add(&["level"], &block.to_be_bytes()).unwrap();
            assert!(tree.mem_tree(&["contracts"]).unwrap());
            let hash = store
                .commit(
                    &tree,
                    CommitMeta {
                        parents: &parents,
                        date: 1_600_000_000 + i64::from(block),
                        author: "Tezos",
                        message: &format!("block {block}"),
                    },
                )
                .unwrap();
            commits.push(hash);
            parents = vec![hash];
            tree = store.checkout(&hash).unwrap().unwrap();
        }
        let summary = store.finish_trace().unwrap().unwrap();
        assert_eq!(summary.gaps, 0, "{:?}", summary.first_gap);
        assert!(summary.rows > 30 * 120);
    }

    let store = Store::open(dir.path().join("replayed"), Options::default()).unwrap();
    let mut replayer = Replayer::new(&store);
    let mut replayed = Vec::new();
    for row in TraceReader::open(&trace).unwrap() {
        if let Applied::Block(_) = replayer.apply(row.unwrap()).unwrap() {
            replayed.push(replayer.last_commit.unwrap());
        }
    }
    assert_eq!(replayed, commits);
    let checks = &replayer.checks;
    assert!(checks.all_passed(), "{checks:?}");
    assert_eq!(checks.hashes_checked, 30);
    assert!(checks.reads_checked > 30 * 80);
    // The scopes written at the end let the replay forget every context but
    // the genesis, and every commit but the last two (the last checkout's).
    let (contexts, names) = replayer.held();
    assert!(contexts <= 2 && names <= 1, "held {contexts} contexts and {names} commit names");
}

#[test]
fn what_the_format_cannot_express_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("gaps.repr");
    let store = Store::open(dir.path().join("s"), Options { trace_file: Some(trace), ..Options::default() }).unwrap();
    let mut tree = store.empty_tree();
    tree.add_mut(&["a", "b"], b"1").unwrap();
    let sub = tree.find_tree(&["a"]).unwrap().unwrap();
    sub.find(&["b"]).unwrap(); // a read of a subtree
    let other = store.empty_tree().add(&["x"], b"2").unwrap();
    tree.add_tree_mut(&["c"], &other).unwrap(); // not read from this context
    let summary = store.finish_trace().unwrap().unwrap();
    assert_eq!(summary.gaps, 2);
    assert_eq!(summary.first_gap.as_deref(), Some("a read of a subtree"));
}
