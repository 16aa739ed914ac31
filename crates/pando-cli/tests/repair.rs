//! `pando check --repair` as a user runs it (the binary, `PANDO_STORE`
//! naming the store): a flipped byte in the index, the dictionary or a
//! control slot makes the open error name the repair, the repair mends it,
//! and `check --all`, `log` and `get` then say what they said before the
//! damage; an undamaged store is left as it was; a damaged pack record is
//! refused, naming its offset, and nothing changes.

use pando_store::{CommitMeta, Options, Store};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

mod common;

use common::{failure, pando, stdout};

/// `pando args...` with `PANDO_STORE` set to `store`.
fn run(store: &Path, args: &[&str]) -> Output {
    pando().args(args).env("PANDO_STORE", store).output().unwrap()
}

/// A store of 12 commits whose names fill the dictionary, checkpointed
/// every 3 commits so that the index and the dictionary files hold them.
fn store(path: &Path) {
    let store = Store::open(path, Options { checkpoint_commits: 3, ..Options::default() }).unwrap();
    let mut tree = store.empty_tree();
    let mut parents = Vec::new();
    for b in 0..12u32 {
        for name in ["balance", "counter", "manager", "delegate"] {
            for account in 0..4 {
                tree.add_mut(&["contracts", "index", &format!("tz{account}"), name], format!("{b}").as_bytes()).unwrap();
            }
        }
        tree.add_mut(&["blocks", &format!("{b:03}")], &[b as u8; 40]).unwrap();
        let commit = store
            .commit(&tree, CommitMeta { parents: &parents, date: i64::from(b), author: "Tezos", message: &format!("block {b}") })
            .unwrap();
        parents = vec![commit];
        tree = store.checkout(&commit).unwrap().unwrap();
    }
    store.close().unwrap();
}

/// What a user sees of the store: the log, and values at two commits.
fn seen(path: &Path) -> String {
    let log = stdout(&run(path, &["log", "-n", "100"]));
    let hashes: Vec<&str> =
        log.lines().filter_map(|l| l.strip_prefix("commit ")).map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(hashes.len(), 12, "{log}");
    let mut out = log.clone();
    for hash in [hashes[0], hashes[7]] {
        out += &stdout(&run(path, &["get", "contracts/index/tz2/manager", "-c", hash]));
        out += &stdout(&run(path, &["ls", "blocks", "-c", hash]));
    }
    out
}

fn files(path: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(path)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name() != "lock")
        .map(|e| (e.file_name().into_string().unwrap(), std::fs::read(e.path()).unwrap()))
        .collect()
}

fn flip(path: &Path, position: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[position] ^= 0x10;
    std::fs::write(path, &bytes).unwrap();
}

/// Damages `file` at `position`, then repairs the store through the
/// binary; returns what the repair said.
fn damage_and_repair(file: &str, position: impl Fn(usize) -> usize) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    store(&path);
    let before = seen(&path);
    let target = path.join(file);
    flip(&target, position(std::fs::metadata(&target).unwrap().len() as usize));
    if file != "control" {
        // The open error names the repair, and so does `check --all`.
        let error = failure(&run(&path, &["log"]));
        assert!(error.contains(file) && error.contains("pando check --repair"), "{error}");
        let check = run(&path, &["check", "--all"]);
        let out = String::from_utf8(check.stdout).unwrap();
        assert!(!check.status.success() && out.contains("does not open") && out.contains("pando check --repair"), "{out}");
    }
    let said = stdout(&run(&path, &["check", "--repair"]));
    assert!(said.contains(&format!("repaired:  rewrote {file}")), "{said}");
    let check = stdout(&run(&path, &["check", "--all"]));
    assert!(check.contains("no problems found") && check.contains("reachable from 12 commit(s)"), "{check}");
    assert_eq!(seen(&path), before, "the same commits and values");
    assert!(stdout(&run(&path, &["check", "--repair"])).contains("nothing to repair"));
    said
}

#[test]
fn a_damaged_index_is_repaired() {
    let said = damage_and_repair("index", |_| 44 * 4 + 12);
    assert!(said.contains("index: entries 4 are damaged"), "{said}");
}

#[test]
fn a_damaged_dictionary_is_repaired() {
    let said = damage_and_repair("dict", |len| len / 2);
    assert!(said.contains("dict: entries from id"), "{said}");
}

#[test]
fn a_damaged_control_slot_is_repaired() {
    let said = damage_and_repair("control", |_| 40);
    assert!(said.contains("control: synced slot 0 is damaged"), "{said}");
}

#[test]
fn an_undamaged_store_is_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    store(&path);
    let before = files(&path);
    let said = stdout(&run(&path, &["check", "--repair"]));
    assert!(said.contains("nothing to repair") && said.contains("reachable from 12 commit(s)"), "{said}");
    assert_eq!(files(&path), before);
}

#[test]
fn a_damaged_pack_record_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    store(&path);
    flip(&path.join("index"), 3);
    // The first record's payload: logical offset 0.
    flip(&path.join("chunk-0000000000000000.pack"), 3);
    let before = files(&path);
    let error = failure(&run(&path, &["check", "--repair"]));
    assert!(
        error.contains("cannot repair") && error.contains("the pack record at offset 0 ") && error.contains("lost"),
        "{error}"
    );
    assert_eq!(files(&path), before, "nothing changed");
}
