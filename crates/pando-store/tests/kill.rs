//! The kill test (docs/TESTING.md, test 1): a child process commits blocks
//! and prints an acknowledgement after each commit returns (durable); the
//! parent kills it with SIGKILL at a random moment, or lets it abort at a
//! named crash point (of a commit or of a garbage collection), then reopens
//! the store and checks that every acknowledged commit reads back with its
//! hash and its contents. The child keeps the last `KEEP` commits, so
//! collections run in the background all along; an acknowledged commit
//! older than that may be collected, never lost otherwise. A second store
//! runs in archive mode: there every acknowledged commit stays readable.
//!
//! A short run is part of `cargo test`. The long run:
//! `PANDO_KILL_ITERATIONS=500 cargo test --release -p pando-store --test kill -- --nocapture`

mod common;

use common::*;
use pando_core::Hash;
use pando_store::crash_point::{GC_POINTS, POINTS};
use pando_store::{CommitMeta, Error, Options, Retention, Store, SyncPolicy};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path as FsPath;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_DIR: &str = "PANDO_KILL_CHILD_DIR";
const CHILD_ARCHIVE: &str = "PANDO_KILL_CHILD_ARCHIVE";
const CHILD_PIPELINED: &str = "PANDO_KILL_CHILD_PIPELINED";

/// Commits the child's retention policy keeps.
const KEEP: u64 = 30;

fn options(archive: bool, pipelined: bool) -> Options {
    Options {
        sync: if pipelined { SyncPolicy::Pipelined } else { SyncPolicy::EveryCommit },
        cache_bytes: 1 << 20,
        chunk_target_bytes: 256 << 10,
        // Commits reach the pack in several pieces.
        commit_spill_bytes: 4 << 10,
        checkpoint_commits: 7,
        // Values of 200 bytes and more are written when added: a kill may
        // fall between them and their commit, and collections run while
        // the next block's are staged.
        stage_bytes: 200,
        retention: if archive {
            Retention::Archive { commits: KEEP, every: 8 }
        } else {
            Retention::KeepLast { commits: KEEP, every: 8 }
        },
        ..Options::default()
    }
}

/// The number of the block after the last commit (its date is its number).
fn next_block(store: &Store) -> u64 {
    store.last_commit().unwrap().map_or(0, |h| store.commit_info(&h).unwrap().unwrap().date as u64 + 1)
}

/// The writes of block `n`: a function of `n` alone, so the parent can
/// rebuild the model of any block.
fn block_ops(n: u64) -> Vec<(Path, Option<Vec<u8>>)> {
    let mut rng = SmallRng::seed_from_u64(n);
    let mut ops = Vec::new();
    for _ in 0..rng.gen_range(20..200) {
        let account = format!("{:08x}", rng.gen_range(0..3000u32)).into_bytes();
        let field = [b"balance".as_slice(), b"counter", b"script"][rng.gen_range(0..3)].to_vec();
        let path = vec![b"contracts".to_vec(), b"index".to_vec(), account, field];
        if rng.gen_ratio(1, 10) {
            ops.push((path[..3].to_vec(), None));
        } else {
            let len = if rng.gen_ratio(1, 8) { rng.gen_range(33..300) } else { rng.gen_range(1..9) };
            ops.push((path, Some((0..len).map(|_| rng.r#gen()).collect())));
        }
    }
    ops
}

fn apply_to_model(model: &mut Model, n: u64) {
    for (path, value) in block_ops(n) {
        match value {
            Some(v) => model_add(model, &path, &v),
            None => model_remove(model, &path),
        }
    }
}

/// The child: commits blocks until killed, acknowledging each one.
#[test]
#[ignore = "run by the kill test in a child process"]
fn kill_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else { return };
    let pipelined = std::env::var(CHILD_PIPELINED).is_ok();
    let store = Store::open(&dir, options(std::env::var(CHILD_ARCHIVE).is_ok(), pipelined)).unwrap();
    // Pipelined: a commit is durable once the next one returns.
    let mut not_acknowledged: Option<(u64, Hash)> = None;
    let mut head = store.last_commit().unwrap();
    let mut tree = match head {
        Some(h) => store.checkout(&h).unwrap().unwrap(),
        None => store.empty_tree(),
    };
    loop {
        let n = next_block(&store);
        for (path, value) in block_ops(n) {
            match value {
                Some(v) => tree.add_mut(&path, &v).unwrap(),
                None => tree.remove_mut(&path).unwrap(),
            }
        }
        let parents: Vec<Hash> = head.into_iter().collect();
        let hash = store
            .commit(&tree, CommitMeta { parents: &parents, date: n as i64, author: "Tezos", message: &format!("block {n}") })
            .unwrap();
        if pipelined {
            // Only now is the commit before it durable: acknowledge that one.
            if let Some((before, hash)) = not_acknowledged.replace((n, hash)) {
                println!("ACK {before} {hash}");
            }
        } else {
            // Only now is the commit durable: acknowledge it.
            println!("ACK {n} {hash}");
        }
        head = Some(hash);
        tree = store.checkout(&hash).unwrap().unwrap();
    }
}

struct Outcome {
    acknowledged: Vec<(u64, Hash)>,
    /// The signal that ended the child.
    signal: Option<i32>,
}

fn run_child(dir: &FsPath, mode: Mode, crash: Option<(&str, u64)>, kill_after: Duration) -> Outcome {
    let mut command = Command::new(std::env::current_exe().unwrap());
    if mode.archive {
        command.env(CHILD_ARCHIVE, "1");
    }
    if mode.pipelined {
        command.env(CHILD_PIPELINED, "1");
    }
    command
        .args(["kill_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some((point, after)) = crash {
        command.env("PANDO_CRASH_POINT", point).env("PANDO_CRASH_AFTER", after.to_string());
    }
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut acknowledged = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let mut words = line.split_whitespace();
            if words.next() == Some("ACK") {
                let n: u64 = words.next().unwrap().parse().unwrap();
                let hash = Hash::from_base58(words.next().unwrap()).unwrap();
                acknowledged.push((n, hash));
            }
        }
        acknowledged
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() >= kill_after {
            // SIGKILL: no destructor, no flush.
            child.kill().unwrap();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    Outcome { acknowledged: reader.join().unwrap(), signal: status.signal() }
}

/// How the child runs: a rolling or an archive store, each commit synced
/// before it returns or pipelined.
#[derive(Clone, Copy)]
struct Mode {
    archive: bool,
    pipelined: bool,
}

/// The model of the newest block checked so far, advanced incrementally.
struct Checker {
    model: Model,
    next_block: u64,
    archive: bool,
}

impl Checker {
    /// Every acknowledged commit must exist with its metadata; the newest
    /// one is compared in full with the model.
    fn verify(&mut self, dir: &FsPath, acknowledged: &[(u64, Hash)]) -> u64 {
        let store = Store::open(dir, options(self.archive, false)).unwrap_or_else(|e| panic!("reopen after kill: {e}"));
        let count = next_block(&store);
        for (n, hash) in acknowledged {
            match store.commit_info(hash) {
                Ok(info) => {
                    let info = info.unwrap_or_else(|| panic!("acknowledged commit {n} ({hash}) lost"));
                    assert_eq!(info.date, *n as i64);
                    assert!(*n < count);
                }
                // Collected by the retention policy: only commits older than the kept ones.
                Err(Error::CollectedCommit(_)) => {
                    assert!(!self.archive, "commit {n} collected in archive mode");
                    assert!(*n + KEEP < count, "commit {n} collected, {count} blocks");
                }
                Err(e) => panic!("acknowledged commit {n}: {e}"),
            }
        }
        if let Some(&(newest, hash)) = acknowledged.iter().max() {
            while self.next_block <= newest {
                apply_to_model(&mut self.model, self.next_block);
                self.next_block += 1;
            }
            let tree = store.checkout(&hash).unwrap().unwrap();
            check_tree(&tree, &self.model).unwrap_or_else(|e| panic!("commit {newest}: {e}"));
        }
        // Archive mode: the oldest commit reads in full too (from cold files).
        if let Some(&(oldest, hash)) = acknowledged.iter().min().filter(|_| self.archive) {
            let mut model = Model::new();
            (0..=oldest).for_each(|n| apply_to_model(&mut model, n));
            let tree = store.checkout(&hash).unwrap().unwrap();
            check_tree(&tree, &model).unwrap_or_else(|e| panic!("archived commit {oldest}: {e}"));
        }
        count
    }
}

#[test]
fn kill_at_random_moments_and_crash_points() {
    let iterations: u64 = std::env::var("PANDO_KILL_ITERATIONS").ok().and_then(|n| n.parse().ok()).unwrap_or(12);
    let seed: u64 = std::env::var("PANDO_KILL_SEED").ok().and_then(|n| n.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("kill test: seed {seed} (PANDO_KILL_SEED={seed} replays it), {iterations} kills + crash points");
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut kills, mut crashes, mut total) = (0, 0, 0);
    // The rolling store, then (a third of the kills each) the archive store
    // and the rolling store with pipelined syncs.
    let rolling = Mode { archive: false, pipelined: false };
    let archived = Mode { archive: true, pipelined: false };
    let pipelined = Mode { archive: false, pipelined: true };
    for (mode, iterations) in [(rolling, iterations), (archived, iterations.div_ceil(3)), (pipelined, iterations.div_ceil(3))] {
        let archive = mode.archive;
        let dir = tempfile::tempdir().unwrap();
        let mut acknowledged = Vec::new();
        let mut checker = Checker { model: Model::new(), next_block: 0, archive };
        for i in 0..iterations {
            let outcome = run_child(dir.path(), mode, None, Duration::from_millis(rng.gen_range(20..150)));
            assert_eq!(outcome.signal, Some(9), "the child was killed, it did not fail");
            acknowledged.extend(outcome.acknowledged);
            kills += 1;
            let count = checker.verify(dir.path(), &acknowledged);
            if i % 4 == 0 {
                eprintln!("after kill {kills}: {} acknowledged, {count} commits in the store", acknowledged.len());
            }
        }
        let points: &[&str] = if archive { GC_POINTS } else { &[POINTS, GC_POINTS].concat() };
        for point in points {
            let after = rng.gen_range(1..6);
            let outcome = run_child(dir.path(), mode, Some((point, after)), Duration::from_secs(30));
            assert_eq!(outcome.signal, Some(6), "the child aborted at crash point {point}");
            acknowledged.extend(outcome.acknowledged);
            crashes += 1;
            checker.verify(dir.path(), &acknowledged);
        }
        assert!(!acknowledged.is_empty());
        total += acknowledged.len();
    }
    eprintln!("kill test: {kills} SIGKILLs, {crashes} aborts at named crash points, {total} acknowledged commits, 0 lost");
}
