//! `pando replay` into a store it finds through `PANDO_STORE` (issue #40,
//! item 3): a store with commits is refused, unchanged, unless the replay
//! is asked to add to it (`--append`), which goes on only from a commit
//! the store holds: the one the trace's first block checks out.

use std::path::{Path, PathBuf};
use std::process::Output;

use pando_core::trace::Row;
use pando_trace::{TraceReader, TraceWriter};

mod common;

use common::{failure, pando, run, stdout};

/// A trace of the `tiny` preset (200 blocks, with real commit hashes).
fn tiny_trace(dir: &Path) -> PathBuf {
    let path = dir.join("tiny.repr");
    stdout(&run(&["gen", "--preset", "tiny", "-o", path.to_str().unwrap()]));
    path
}

/// The blocks of `trace` from block `first` on, as a trace of its own
/// (the first checks out block `first - 1`'s commit).
fn tail(trace: &Path, first: u64, output: &Path) {
    let mut reader = TraceReader::open(trace).unwrap();
    let mut writer = TraceWriter::create(output).unwrap();
    let mut blocks = 0;
    while let Some(row) = reader.next_row() {
        let row = row.unwrap();
        if blocks >= first {
            writer.append(&row).unwrap();
        }
        if matches!(row, Row::Commit { .. }) {
            blocks += 1;
        }
    }
    writer.finish().unwrap();
}

/// `pando replay ARGS` with `PANDO_STORE` set to `store`.
fn replay(store: &Path, args: &[&str], report: &Path) -> Output {
    pando().arg("replay").args(args).args(["--report", report.to_str().unwrap()]).env("PANDO_STORE", store).output().unwrap()
}

/// `pando info --json` of the store `PANDO_STORE` names.
fn info(store: &Path) -> serde_json::Value {
    let output = pando().args(["info", "--json"]).env("PANDO_STORE", store).output().unwrap();
    serde_json::from_str(&stdout(&output)).unwrap()
}

/// Every file of a store and its bytes.
fn files(store: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(store)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            (entry.file_name().into_string().unwrap(), std::fs::read(entry.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_store_with_commits_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let trace = tiny_trace(dir.path());
    let t = trace.to_str().unwrap();
    let report = dir.path().join("report");
    let store = dir.path().join("store");
    stdout(&replay(&store, &[t, "--blocks", "100"], &report));
    let before = files(&store);
    let last = info(&store)["last_commit"]["hash"].as_str().unwrap().to_string();

    // What the operator ran: a generated trace, the store from PANDO_STORE.
    let stderr = failure(&replay(&store, &["--preset", "tiny"], &report));
    assert!(stderr.contains(&format!("{} holds 100 commits (the last {last})", store.display())), "{stderr}");
    assert!(stderr.contains("only with --append") && stderr.contains("nothing was replayed"), "{stderr}");
    // A trace file, the same.
    let stderr = failure(&replay(&store, &[t], &report));
    assert!(stderr.contains("only with --append"), "{stderr}");
    // --append of a generated trace: it starts from an empty tree.
    let stderr = failure(&replay(&store, &["--preset", "tiny", "--append"], &report));
    assert!(stderr.contains("--append needs a trace file"), "{stderr}");
    // --append of a trace from genesis: nothing to append to.
    let stderr = failure(&replay(&store, &[t, "--append"], &report));
    assert!(stderr.contains("starts from an empty tree") && stderr.contains("nothing to append to"), "{stderr}");
    assert!(files(&store) == before, "a refused replay changed the store");
    assert_eq!(info(&store)["last_commit"]["hash"], last.as_str());
}

#[test]
fn append_goes_on_from_the_traces_first_checkout() {
    let dir = tempfile::tempdir().unwrap();
    let trace = tiny_trace(dir.path());
    let report = dir.path().join("report");
    let rest = dir.path().join("rest.repr");
    tail(&trace, 100, &rest);
    let whole = dir.path().join("whole");
    stdout(&replay(&whole, &[trace.to_str().unwrap()], &report));

    let store = dir.path().join("store");
    stdout(&replay(&store, &[trace.to_str().unwrap(), "--blocks", "100"], &report));
    let text = stdout(&replay(&store, &[rest.to_str().unwrap(), "--append"], &report));
    // Its commits are the trace's own: every hash recorded was checked.
    assert!(text.contains("checks: 100 commit hashes (0 mismatches)"), "{text}");
    let (appended, whole) = (info(&store), info(&whole));
    assert_eq!(appended["commits"], 200);
    assert_eq!(appended["last_commit"]["hash"], whole["last_commit"]["hash"]);
}

#[test]
fn append_from_a_commit_the_store_lacks_names_both() {
    let dir = tempfile::tempdir().unwrap();
    let trace = tiny_trace(dir.path());
    let report = dir.path().join("report");
    let rest = dir.path().join("rest.repr");
    tail(&trace, 100, &rest);
    let first =
        pando_trace::replay::first_checkout(&mut TraceReader::open(&rest).unwrap()).unwrap().expect("block 100 checks out");
    let first = String::from_utf8(first).unwrap();

    let store = dir.path().join("store");
    stdout(&replay(&store, &[trace.to_str().unwrap(), "--blocks", "50"], &report));
    let before = files(&store);
    let last = info(&store)["last_commit"]["hash"].as_str().unwrap().to_string();
    let stderr = failure(&replay(&store, &[rest.to_str().unwrap(), "--append"], &report));
    assert!(stderr.contains(&format!("starts from commit {first}")), "{stderr}");
    assert!(stderr.contains(&format!("{} holds 50 commits (the last {last})", store.display())), "{stderr}");
    assert!(stderr.contains("which is not in the store"), "{stderr}");
    assert!(files(&store) == before, "a refused replay changed the store");
}
