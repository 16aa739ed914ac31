//! What an operator sees: the logs (`tracing`) and metrics (`metrics`) a
//! store emits when opened, committing, recovering, failing a write and
//! collecting. One test: it installs the process's global subscriber and
//! recorder (a collection logs from its own thread).

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use pando_store::io::{FaultKind, FaultPlan, FaultyStorage};
use pando_store::telemetry;
use pando_store::{CommitMeta, Options, Store, SyncPolicy};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Log lines written by the subscriber.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    /// The lines written since the last call.
    fn take(&self) -> String {
        String::from_utf8(std::mem::take(&mut *self.0.lock().unwrap())).unwrap()
    }
}

/// Every metric's value (counters and gauges; a histogram's number of
/// samples since the last call, which takes them).
fn metrics(snapshotter: &Snapshotter) -> HashMap<String, f64> {
    let value = |value| match value {
        DebugValue::Counter(n) => n as f64,
        DebugValue::Gauge(g) => g.into_inner(),
        DebugValue::Histogram(samples) => samples.len() as f64,
    };
    snapshotter.snapshot().into_vec().into_iter().map(|(key, _, _, v)| (key.key().name().to_string(), value(v))).collect()
}

#[test]
fn a_store_reports_what_it_does() {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();

    // Opening, and 30 commits.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let opened = lines.take();
    assert!(opened.contains("store opened") && opened.contains("commits=0"), "{opened}");
    let mut parent = Vec::new();
    let mut tree = store.empty_tree();
    for block in 0..30u32 {
        for i in 0..50u32 {
            tree.add_mut(&["contracts", "index", &format!("{:04}", i * 31 + block), "balance"], &block.to_le_bytes()).unwrap();
        }
        let hash = store
            .commit(&tree, CommitMeta { parents: &parent, date: i64::from(block), author: "Tezos", message: "block" })
            .unwrap();
        parent = vec![hash];
        tree = store.checkout(&hash).unwrap().unwrap();
    }
    let seen = metrics(&snapshotter);
    assert_eq!(seen.get(telemetry::COMMITS), Some(&30.0));
    assert_eq!(seen.get(telemetry::COMMIT_SECONDS), Some(&30.0), "one latency sample per commit");
    let written = seen[telemetry::BYTES_WRITTEN];
    assert!(written > 0.0 && written <= store.pack_bytes() as f64, "{written}");
    assert_eq!(seen.get(telemetry::PACK_BYTES), Some(&(store.pack_bytes() as f64)));
    assert!(seen.contains_key(telemetry::CACHE_HITS) && seen.contains_key(telemetry::CACHE_MISSES), "{seen:?}");

    // A collection: its start, each phase and its end, from its own thread.
    store.gc(&store.ancestor(&parent[0], 5).unwrap()).unwrap();
    let report = store.wait_gc().unwrap().unwrap();
    let collection = lines.take();
    for expected in ["collection started", "collection phase phase=Scanning", "collection finished", "collected_commits=25"] {
        assert!(collection.contains(expected), "{expected:?} in {collection}");
    }
    let seen = metrics(&snapshotter);
    assert_eq!(seen.get(telemetry::GC_COLLECTIONS), Some(&1.0));
    assert_eq!(seen.get(telemetry::GC_PHASE), Some(&0.0), "no collection runs");
    assert_eq!(seen.get(telemetry::GC_SECONDS), Some(&1.0));
    assert_eq!(report.collected_commits, 25);
    drop((store, tree));

    // Bytes past the durable end (a write a crash interrupted) are cut on
    // opening, and the log says how many.
    let chunk = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "pack"))
        .max()
        .unwrap();
    let mut bytes = std::fs::read(&chunk).unwrap();
    bytes.extend_from_slice(&[0xa5; 100]);
    std::fs::write(&chunk, &bytes).unwrap();
    drop(Store::open(dir.path(), Options::default()).unwrap());
    let recovery = lines.take();
    assert!(recovery.contains("recovery: cut bytes past the durable end") && recovery.contains("cut=100"), "{recovery}");

    // A failed write is logged once, as an error naming it.
    let storage = FaultyStorage::new();
    let store =
        Store::open_storage(Arc::new(storage.clone()), Options { sync: SyncPolicy::EveryCommit, ..Options::default() }).unwrap();
    lines.take();
    storage.set_plan(FaultPlan { fail_op: Some((0, FaultKind::NoSpace)), fail_reads_after: None });
    let tree = store.empty_tree().add(&["a"], b"1").unwrap();
    assert!(store.commit(&tree, CommitMeta { parents: &[], date: 0, author: "Tezos", message: "fails" }).is_err());
    assert!(store.commit(&tree, CommitMeta { parents: &[], date: 0, author: "Tezos", message: "refused" }).is_err());
    let failure = lines.take();
    assert_eq!(failure.matches("ERROR").count(), 1, "{failure}");
    assert!(failure.contains("injected ENOSPC") && failure.contains("refuses further writes"), "{failure}");
    std::mem::forget(store);
}
