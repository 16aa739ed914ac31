//! pando replays the 300-block trace written by irmin 3.7.2's own trace
//! writer (the test vector `irmin-diff-a.repr`): every commit hash and
//! every recorded read result must come out the same.

use pando_store::{Options, Store};
use pando_trace::TraceReader;
use pando_trace::replay::{Applied, Replayer};
use pando_vectors::path as vector;
use serde_json::Value;

#[test]
fn irmin_trace_replays_bit_exact() {
    let sidecar: Value = serde_json::from_str(&std::fs::read_to_string(vector("irmin-diff-a.repr.json")).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options { cache_bytes: 8 << 20, ..Options::default() }).unwrap();
    let mut replayer = Replayer::new(&store);
    let mut blocks = 0u64;
    let mut first = None;
    for row in TraceReader::open(vector("irmin-diff-a.repr")).unwrap() {
        if let Applied::Block(_) = replayer.apply(row.unwrap()).unwrap() {
            blocks += 1;
            first.get_or_insert(replayer.last_commit.unwrap());
        }
    }
    let checks = &replayer.checks;
    assert!(checks.all_passed(), "{checks:#?}");
    assert_eq!(blocks, sidecar["blocks"].as_u64().unwrap());
    assert_eq!(replayer.rows(), sidecar["rows"].as_u64().unwrap());
    assert_eq!(checks.hashes_checked, 300, "every commit's hash is checked");
    let reads: u64 = sidecar["read_results"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(reads, 18_210);
    assert_eq!(checks.reads_checked, reads);
    assert_eq!(first.unwrap().to_base58(), sidecar["first_commit_hash"].as_str().unwrap());
    assert_eq!(replayer.last_commit.unwrap().to_base58(), sidecar["final_commit_hash"].as_str().unwrap());
    // Everything the trace asked to forget was forgotten: left are the
    // genesis context and the last commit, which irmin's writer keeps.
    assert_eq!(replayer.held(), (1, 1));
}
