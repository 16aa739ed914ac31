//! Read-only readers in another process: a child process commits blocks
//! (with collections running in the background, rolling or archive, or
//! none) while this process reads the same store read-only. The reader
//! always sees a whole commit (every value of a block agrees with the
//! block's number), never goes back, catches up on `sync` and by itself
//! when asked for a commit it does not know yet, and reads every commit the
//! writer acknowledged unless a collection it has taken in removed it.

use pando_core::Hash;
use pando_store::{CommitMeta, Error, Options, Retention, Store};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

const CHILD_DIR: &str = "PANDO_FOLLOW_CHILD_DIR";
const CHILD_MODE: &str = "PANDO_FOLLOW_CHILD_MODE";
const BLOCKS: u64 = 240;
const KEEP: u64 = 20;
const ACCOUNTS: u64 = 150;

fn options(mode: &str) -> Options {
    let retention = match mode {
        "rolling" => Retention::KeepLast { commits: KEEP, every: 8 },
        "archive" => Retention::Archive { commits: KEEP, every: 8 },
        _ => Retention::KeepAll,
    };
    Options { chunk_target_bytes: 64 << 10, checkpoint_commits: 7, cache_bytes: 1 << 20, retention, ..Options::default() }
}

fn account(n: u64) -> String {
    format!("{:04x}", n % ACCOUNTS)
}

/// The writer: commits block `n` with `last = n`, `accounts/<n % 150> = n`
/// and a 100-byte blob, and acknowledges each commit once it returned.
#[test]
#[ignore = "run by the other-process test in a child process"]
fn follow_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else { return };
    let mode = std::env::var(CHILD_MODE).unwrap();
    let store = Store::open(&dir, options(&mode)).unwrap();
    let mut tree = store.empty_tree();
    let mut parent: Option<Hash> = None;
    for n in 0..BLOCKS {
        let value = n.to_be_bytes();
        tree.add_mut(&["last"], &value).unwrap();
        tree.add_mut(&["accounts", &account(n)], &value).unwrap();
        tree.add_mut(&["blob", &format!("{}", n % 7)], &[n as u8; 100]).unwrap();
        let hash = store
            .commit(
                &tree,
                CommitMeta {
                    parents: &parent.into_iter().collect::<Vec<_>>(),
                    date: n as i64,
                    author: "Tezos",
                    message: "block",
                },
            )
            .unwrap();
        println!("ack {n} {hash}");
        if n % 60 == 59 {
            // Collections finish while the writer runs, however busy the
            // machine (the collector yields to every other thread).
            store.wait_gc().unwrap();
        }
        parent = Some(hash);
        tree = store.checkout(&hash).unwrap().unwrap();
    }
    store.wait_gc().unwrap();
    store.close().unwrap();
    println!("done");
}

/// Checks that `tree` is block `n` whole.
fn check_block(store: &Store, hash: &Hash) -> Result<u64, Error> {
    let tree = store.checkout(hash)?.expect("a known commit");
    let n = u64::from_be_bytes(tree.find(&["last"])?.expect("last").try_into().unwrap());
    assert_eq!(store.commit_info(hash)?.unwrap().date, n as i64, "a commit's date is its block");
    assert_eq!(tree.find(&["accounts", &account(n)])?.unwrap(), n.to_be_bytes(), "block {n} is whole");
    assert_eq!(tree.length(&["accounts"])?, (n + 1).min(ACCOUNTS), "block {n} is whole");
    assert_eq!(tree.find(&["blob", &format!("{}", n % 7)])?.unwrap(), vec![n as u8; 100]);
    Ok(n)
}

fn follow_a_writer(mode: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["follow_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir.path())
        .env(CHILD_MODE, mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let acks: Arc<Mutex<Vec<Hash>>> = Arc::default();
    let done = Arc::new(Mutex::new(false));
    let lines = BufReader::new(child.stdout.take().unwrap());
    let reader_thread = {
        let (acks, done) = (acks.clone(), done.clone());
        std::thread::spawn(move || {
            for line in lines.lines() {
                let line = line.unwrap();
                // libtest may print its own words before the first line.
                if let Some(rest) = line.split_once("ack ").map(|(_, rest)| rest) {
                    let (n, hash) = rest.split_once(' ').unwrap();
                    let mut acks = acks.lock().unwrap();
                    assert_eq!(n.parse::<usize>().unwrap(), acks.len());
                    acks.push(Hash::parse(hash).unwrap());
                } else if line.ends_with("done") {
                    *done.lock().unwrap() = true;
                }
            }
        })
    };
    while acks.lock().unwrap().is_empty() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let reader = Store::open(dir.path(), Options { read_only: true, cache_bytes: 1 << 20, ..Options::default() }).unwrap();
    let first = reader.last_commit().unwrap().expect("a commit was acknowledged");
    let held = reader.checkout(&first).unwrap().unwrap();
    let held_n = check_block(&reader, &first).unwrap();
    let (mut latest, mut syncs, mut checked, mut collected) = (held_n, 0u64, 0u64, 0u64);
    let mut next_ack = 0usize;
    let (mut progressed, mut generations, mut generation) = (0u64, 0u64, 0u64);
    loop {
        let finished = *done.lock().unwrap();
        syncs += 1;
        if reader.refresh().unwrap() > 0 {
            progressed += 1;
        }
        if reader.info().generation != generation {
            generation = reader.info().generation;
            generations += 1;
        }
        // The reader's last commit is whole, and never goes back.
        let head = reader.last_commit().unwrap().unwrap();
        let n = check_block(&reader, &head).unwrap();
        assert!(n >= latest, "the reader went back from block {latest} to {n}");
        latest = n;
        // Every acknowledged commit reads whole (found by itself if new),
        // unless a collection removed it (rolling mode, old blocks only).
        let acked: Vec<Hash> = acks.lock().unwrap()[next_ack..].to_vec();
        for (i, hash) in acked.iter().enumerate() {
            match check_block(&reader, hash) {
                Ok(n) => assert_eq!(n as usize, next_ack + i),
                Err(Error::CollectedCommit(_)) if mode == "rolling" => collected += 1,
                Err(e) => panic!("acknowledged block {} unreadable: {e}", next_ack + i),
            }
            checked += 1;
        }
        next_ack += acked.len();
        // A tree checked out earlier reads until a collection removed it.
        match held.find(&["last"]) {
            Ok(value) => assert_eq!(value.unwrap(), held_n.to_be_bytes()),
            Err(Error::Collected { .. }) if mode == "rolling" => {}
            Err(e) => panic!("held tree: {e}"),
        }
        if finished {
            break;
        }
    }
    reader_thread.join().unwrap();
    assert!(child.wait().unwrap().success());
    reader.refresh().unwrap();
    assert_eq!(latest, BLOCKS - 1, "the reader caught up with the last block");
    assert_eq!(checked, BLOCKS);
    assert!(progressed >= 10, "the reader followed step by step ({progressed} syncs found commits)");
    if mode != "none" {
        assert!(generations >= 2, "several collection steps were taken in while the writer ran ({generations})");
    }
    if mode == "rolling" {
        assert!(matches!(reader.checkout(&first), Err(Error::CollectedCommit(_))), "the first block was collected");
    }
    if mode == "archive" {
        // Every block stays readable, from cold files.
        for hash in acks.lock().unwrap().iter() {
            check_block(&reader, hash).unwrap();
        }
    }
    eprintln!(
        "{mode}: {syncs} syncs, {progressed} found commits, {generations} layouts taken in, {checked} acknowledged commits checked, {collected} found collected"
    );
}

#[test]
fn a_reader_in_another_process_follows_a_writer() {
    follow_a_writer("none");
}

#[test]
fn a_reader_in_another_process_follows_collections() {
    follow_a_writer("rolling");
}

#[test]
fn a_reader_in_another_process_follows_an_archive() {
    follow_a_writer("archive");
}
