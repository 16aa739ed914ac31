//! Traces built by hand: a commit with a recorded hash (checked), wrong
//! recorded results (reported, not fatal), a truncated file (the rows
//! before the damage are replayed, then an error names the row and byte),
//! and random bytes (an error, never a panic).

use pando_core::CommitInfo;
use pando_core::reference::RefTree;
use pando_core::trace::{Row, Scope};
use pando_store::{Options, Store};
use pando_trace::replay::{Applied, Replayer};
use pando_trace::{TraceError, TraceReader, TraceWriter};
use proptest::prelude::*;
#[path = "../../pando-core/tests/support/seeds.rs"]
mod seeds;

fn key(steps: &[&str]) -> Vec<Vec<u8>> {
    steps.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// Two blocks: the first commit's hash is computed here from scratch and
/// recorded in the trace as irmin records it (base58 text).
fn rows(recorded_find: bool) -> Vec<Row> {
    let tree = RefTree::Dir(vec![(
        b"contracts".to_vec(),
        RefTree::Dir(vec![(b"global_counter".to_vec(), RefTree::Contents(b"\x00\x01".to_vec()))]),
    )]);
    let first =
        CommitInfo { root: tree.hash(), parents: vec![], date: 1_600_000_001, author: "Tezos".into(), message: "block 1".into() }
            .hash();
    let first_text = first.to_base58().into_bytes();
    vec![
        Row::Add {
            key: key(&["contracts", "global_counter"]),
            value: vec![0, 1],
            in_ctx: Scope::Forget(0),
            out_ctx: Scope::Keep(1),
        },
        Row::Find { key: key(&["contracts", "global_counter"]), found: true, ctx: Scope::Keep(1) },
        Row::Commit {
            hash: Scope::Keep(first_text.clone()),
            date: 1_600_000_001,
            message: b"block 1".to_vec(),
            parents: vec![],
            in_ctx: Scope::Forget(1),
        },
        Row::Checkout { hash: Scope::Keep(first_text.clone()), ctx: Scope::Keep(2) },
        Row::Copy { source: key(&["contracts"]), target: key(&["backup"]), in_ctx: Scope::Forget(2), out_ctx: Scope::Keep(3) },
        Row::Mem { key: key(&["backup", "global_counter"]), found: true, ctx: Scope::Keep(3) },
        Row::MemTree { key: key(&["backup"]), found: true, ctx: Scope::Keep(3) },
        Row::Find { key: key(&["nothing", "here"]), found: recorded_find, ctx: Scope::Keep(3) },
        Row::Remove { key: key(&["contracts"]), in_ctx: Scope::Forget(3), out_ctx: Scope::Keep(4) },
        Row::Commit {
            hash: Scope::Keep(b"opaque-id".to_vec()),
            date: 1_600_000_002,
            message: b"block 2".to_vec(),
            parents: vec![Scope::Forget(first_text)],
            in_ctx: Scope::Forget(4),
        },
    ]
}

fn write(path: &std::path::Path, rows: &[Row]) {
    let mut writer = TraceWriter::create(path).unwrap();
    for row in rows {
        writer.append(row).unwrap();
    }
    writer.finish().unwrap();
}

fn replay(path: &std::path::Path) -> (u64, pando_trace::replay::Checks, Option<TraceError>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let mut replayer = Replayer::new(&store);
    let mut blocks = 0;
    let mut error = None;
    for row in TraceReader::open(path).unwrap() {
        match row {
            Ok(row) => {
                if let Applied::Block(_) = replayer.apply(row).unwrap() {
                    blocks += 1;
                }
            }
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    (blocks, replayer.checks.clone(), error)
}

#[test]
fn hand_built_trace_with_a_recorded_hash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hand.repr");
    write(&path, &rows(false));
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..13], b"IrmRepBT\x00\x00\x00\x00\x00", "magic, version 0, empty header");
    let read: Vec<Row> = TraceReader::open(&path).unwrap().map(Result::unwrap).collect();
    assert_eq!(read, rows(false));
    let (blocks, checks, error) = replay(&path);
    assert!(error.is_none());
    assert_eq!(blocks, 2);
    assert_eq!(checks.hashes_checked, 1);
    assert_eq!(checks.reads_checked, 4);
    assert!(checks.all_passed(), "{checks:?}");
}

#[test]
fn wrong_recorded_results_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wrong.repr");
    let mut bad = rows(true);
    // A recorded hash that is not the real one.
    if let Row::Commit { hash, .. } = &mut bad[2] {
        let other = RefTree::Contents(b"x".to_vec()).hash().to_base58().into_bytes();
        *hash = Scope::Keep(other.clone());
        if let Row::Checkout { hash, .. } = &mut bad[3] {
            *hash = Scope::Keep(other.clone());
        }
        if let Row::Commit { parents, .. } = &mut bad[9] {
            parents[0] = Scope::Forget(other);
        }
    }
    write(&path, &bad);
    let (blocks, checks, error) = replay(&path);
    assert!(error.is_none());
    assert_eq!(blocks, 2, "mismatches do not stop a replay");
    assert_eq!((checks.hash_mismatches, checks.read_mismatches), (1, 1));
    assert!(checks.examples.iter().any(|e| e.contains("commit hash recorded")));
    assert!(checks.examples.iter().any(|e| e.contains("nothing/here")));
}

#[test]
fn truncated_trace_replays_what_came_before_then_names_the_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("full.repr");
    write(&path, &rows(false));
    let bytes = std::fs::read(&path).unwrap();
    for cut in 13..bytes.len() {
        let truncated = dir.path().join("cut.repr");
        std::fs::write(&truncated, &bytes[..cut]).unwrap();
        let (blocks, _, error) = replay(&truncated);
        match error {
            // Cut exactly after a commit (or the header), or after rows
            // that only check out or read: a whole trace of fewer blocks.
            None => assert!(blocks >= 1 || cut == 13, "cut {cut}: no block, and no error"),
            // Cut at a row boundary inside a block: its rows, then an
            // error naming it, its first row and where that row starts.
            Some(TraceError::PartialTail { block, rows, row, offset, .. }) => {
                assert_eq!(block, blocks, "cut {cut}");
                assert!(rows >= 1 && row + rows <= 10, "cut {cut}: rows {row}.. ({rows})");
                assert!(offset >= 13 && offset < cut as u64, "cut {cut}: offset {offset}");
            }
            Some(TraceError::BadRow { row, offset, .. }) => {
                assert!(offset < cut as u64 && offset >= 13, "cut {cut}: offset {offset}");
                assert!(row < 10);
                assert!(blocks <= 1 || row >= 9, "cut {cut}: the rows before row {row} were replayed");
            }
            Some(other) => panic!("cut {cut}: {other}"),
        }
    }
    // Damaged header.
    let header = dir.path().join("header.repr");
    std::fs::write(&header, b"IrmRepBX\0\0\0\0\0").unwrap();
    assert!(matches!(TraceReader::open(&header), Err(TraceError::BadHeader { .. })));
    std::fs::write(&header, b"IrmRepBT\0\0\0\x07\0").unwrap();
    let message = TraceReader::open(&header).err().unwrap().to_string();
    assert!(message.contains("version 7"), "{message}");
}

proptest! {
    #![proptest_config(seeds::config(256))]

    #[test]
    fn random_bytes_never_panic(body: Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("random.repr");
        let mut bytes = b"IrmRepBT\0\0\0\0\0".to_vec();
        bytes.extend_from_slice(&body);
        std::fs::write(&path, &bytes).unwrap();
        let reader = TraceReader::open(&path).unwrap();
        let mut rows = 0;
        for row in reader {
            if row.is_err() {
                break;
            }
            rows += 1;
            prop_assert!(rows <= body.len());
        }
    }
}

/// A reader of `path`, a trace of rows with no commit (see `write_adds`).
fn open_accepting_partial_tail(path: &std::path::Path) -> TraceReader {
    let mut reader = TraceReader::open(path).unwrap();
    reader.accept_partial_tail(true);
    reader
}

/// Writes a trace of one `add` per size, its value that many bytes long,
/// and no commit (read with `open_accepting_partial_tail`); returns its
/// rows.
fn write_adds(path: &std::path::Path, sizes: impl IntoIterator<Item = usize>) -> Vec<Row> {
    let rows: Vec<Row> = sizes
        .into_iter()
        .enumerate()
        .map(|(i, size)| Row::Add {
            key: key(&["big", &format!("v{i}")]),
            value: (0..size).map(|b| (b * 7 + i) as u8).collect(),
            in_ctx: Scope::Forget(i as i64),
            out_ctx: Scope::Keep(i as i64 + 1),
        })
        .collect();
    write(path, &rows);
    rows
}

/// Rows shorter and longer than the reader's window of the file (1 MiB),
/// around its edges: each is read back whole, and the file cut inside the
/// longest row ends with an error naming that row after the rows before it.
#[test]
fn rows_longer_than_the_window_read_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.repr");
    let rows = write_adds(&path, [10usize, (1 << 20) - 40, (1 << 20) + 1000, 3 << 20, 5, (1 << 20) - 3]);
    let read: Vec<Row> = open_accepting_partial_tail(&path).map(Result::unwrap).collect();
    assert!(read == rows, "rows read back differ");

    let bytes = std::fs::read(&path).unwrap();
    let cut = bytes.len() - (1 << 20) - 2_000_000;
    std::fs::write(&path, &bytes[..cut]).unwrap();
    let mut reader = TraceReader::open(&path).unwrap();
    for row in &rows[..3] {
        assert!(&reader.next_row().unwrap().unwrap() == row);
    }
    match reader.next_row() {
        Some(Err(TraceError::BadRow { row: 3, reason, .. })) => assert!(reason.contains("truncated"), "{reason}"),
        other => panic!("expected row 3 cut, got {:?}", other.map(|r| r.map(|_| ()))),
    }
    assert!(reader.next_row().is_none(), "nothing after the error");
    // A reader that accepts a partial tail ends before the cut row, and
    // says which block it left out.
    let mut reader = open_accepting_partial_tail(&path);
    for row in &rows[..3] {
        assert!(&reader.next_row().unwrap().unwrap() == row);
    }
    assert!(reader.next_row().is_none(), "the cut row ends the file");
    let tail = reader.dropped_tail().expect("a block left out");
    assert_eq!((tail.block, tail.rows, tail.row, tail.offset, tail.cut), (0, 4, 0, 13, true));
}

/// Rows of every size around the room a block keeps for a row the last
/// block cut (64 KiB), in an order that lands their edges at many places
/// of the 1 MiB blocks the reader's thread reads: all read back whole.
#[test]
fn rows_cut_by_the_reads_blocks_read_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edges.repr");
    let rows = write_adds(
        &path,
        (0..160usize).map(|i| match i % 4 {
            0 => 3 + i,
            1 => (64 << 10) - 60 + i,
            2 => (64 << 10) + 40 * i,
            _ => 20_000 + 997 * i,
        }),
    );
    assert!(std::fs::metadata(&path).unwrap().len() > 8 << 20, "the rows span several blocks");
    let mut reader = open_accepting_partial_tail(&path);
    for (i, row) in rows.iter().enumerate() {
        assert!(&reader.next_row().unwrap().unwrap() == row, "row {i} differs");
    }
    assert!(reader.next_row().is_none());
    assert_eq!(reader.offset(), std::fs::metadata(&path).unwrap().len());
}

/// An error reading the file, met by the reader's thread, is the reader's
/// error (here: a directory, which opens but cannot be read).
#[test]
fn a_read_error_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    match TraceReader::open(dir.path()) {
        Err(TraceError::Io { path, error }) => {
            assert_eq!(path, dir.path());
            assert_eq!(error.kind(), std::io::ErrorKind::IsADirectory, "{error}");
        }
        Err(other) => panic!("expected an I/O error, got {other}"),
        Ok(_) => panic!("a directory read as a trace"),
    }
}
