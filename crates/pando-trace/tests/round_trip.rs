//! Generate, write, read, replay: the generator's recorded read results
//! agree with the store, the same seed gives the same bytes, and traces
//! written with their commit hashes are checked by a replay.

use pando_core::trace::Row;
use pando_store::{Options, Store, SyncPolicy};
use pando_trace::generate::{Generator, Preset, run_with_hashes};
use pando_trace::replay::{Applied, ReplayError, Replayer, recorded_hash};
use pando_trace::{TraceReader, TraceWriter};

fn write_trace(path: &std::path::Path, seed: u64) -> pando_trace::generate::Summary {
    let mut writer = TraceWriter::create(path).unwrap();
    let summary = Generator::new(&Preset::TINY, seed).run(&mut |row| writer.append(row)).unwrap();
    writer.finish().unwrap();
    summary
}

#[test]
fn generated_trace_replays_with_every_read_right() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("tiny.repr");
    let summary = write_trace(&trace, 42);
    assert_eq!(summary.blocks, Preset::TINY.blocks);
    assert!(summary.copies > 0 && summary.removes > 0, "{summary:?}");

    let store = Store::open(dir.path().join("store"), Options::default()).unwrap();
    let mut replayer = Replayer::new(&store);
    let mut blocks = 0;
    for row in TraceReader::open(&trace).unwrap() {
        if let Applied::Block(_) = replayer.apply(row.unwrap()).unwrap() {
            blocks += 1;
        }
    }
    assert_eq!(blocks, summary.blocks);
    assert_eq!(replayer.rows(), summary.rows);
    let checks = &replayer.checks;
    assert!(checks.all_passed(), "{checks:#?}");
    assert_eq!(checks.reads_checked, summary.reads);
    assert_eq!(checks.hashes_checked, 0, "generated commit ids are opaque");
    assert_eq!(replayer.held(), (1, 1), "the trace's scopes let the replay forget everything else");
}

#[test]
fn same_seed_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("c"));
    write_trace(&a, 7);
    write_trace(&b, 7);
    write_trace(&c, 8);
    let (a, b, c) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap(), std::fs::read(c).unwrap());
    assert_eq!(a, b);
    assert_ne!(a, c);
}

/// A trace written by `run_with_hashes`, with its scratch store in `dir`.
fn write_hashed_trace(dir: &std::path::Path, seed: u64) -> Vec<u8> {
    let path = dir.join(format!("hashed-{seed}.repr"));
    let scratch =
        Store::open(dir.join(format!("scratch-{seed}")), Options { sync: SyncPolicy::Never, ..Options::default() }).unwrap();
    let mut writer = TraceWriter::create(&path).unwrap();
    run_with_hashes::<ReplayError>(&mut Generator::new(&Preset::TINY, seed), &scratch, &mut |row| {
        writer.append(row).unwrap();
        Ok(())
    })
    .unwrap();
    writer.finish().unwrap();
    std::fs::read(path).unwrap()
}

#[test]
fn hashed_traces_carry_every_commit_hash_and_a_replay_checks_them() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = write_hashed_trace(dir.path(), 42);
    assert_eq!(bytes, write_hashed_trace(dir.path(), 42), "the same seed gives the same bytes");

    // Replayed into a store of other options, every commit is checked and
    // agrees; commit and checkout rows name hashes, never placeholders.
    let store = Store::open(dir.path().join("store"), Options { cache_bytes: 1 << 20, ..Options::default() }).unwrap();
    let mut replayer = Replayer::new(&store);
    let path = dir.path().join("hashed-42.repr");
    let mut named = 0;
    for row in TraceReader::open(&path).unwrap() {
        let row = row.unwrap();
        if let Row::Commit { hash, .. } | Row::Checkout { hash, .. } = &row {
            assert!(recorded_hash(hash.value()).is_some(), "{:?}", String::from_utf8_lossy(hash.value()));
            named += 1;
        }
        replayer.apply(row).unwrap();
    }
    let checks = &replayer.checks;
    assert!(checks.all_passed(), "{checks:#?}");
    assert_eq!(checks.hashes_checked, Preset::TINY.blocks);
    assert_eq!(named, 2 * Preset::TINY.blocks - 1);

    // The last commit's hash changed in the file is a mismatch the replay
    // reports.
    let last = TraceReader::open(&path)
        .unwrap()
        .filter_map(|row| match row.unwrap() {
            Row::Commit { hash, .. } => Some(hash.value().clone()),
            _ => None,
        })
        .last()
        .unwrap();
    let first = bytes.windows(last.len()).position(|w| w == last.as_slice()).unwrap();
    let mut damaged = bytes.clone();
    damaged[first + 10] = if damaged[first + 10] == b'a' { b'b' } else { b'a' };
    std::fs::write(&path, &damaged).unwrap();
    let store = Store::open(dir.path().join("store2"), Options::default()).unwrap();
    let mut replayer = Replayer::new(&store);
    for row in TraceReader::open(&path).unwrap() {
        if replayer.apply(row.unwrap()).is_err() {
            break;
        }
    }
    assert_eq!(replayer.checks.hash_mismatches, 1, "{:#?}", replayer.checks);
}
