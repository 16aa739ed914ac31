//! Real irmin-pack stores written by irmin 3.7.2 (the test vectors'
//! `irmin-stores/`, with sidecars naming their head commit, the commits
//! present and sample values): found, checked and imported as irmin
//! recorded them.

use std::path::{Path, PathBuf};

use pando_core::Hash;
use pando_irmin::{Context, Error};
use pando_store::{Options, Store};

fn stores() -> PathBuf {
    pando_vectors::path("irmin-stores")
}

fn sidecar(name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(stores().join(format!("{name}.json"))).expect("the sidecar of a vector store");
    serde_json::from_str(&text).expect("JSON")
}

/// The head commit a sidecar names.
fn head(side: &serde_json::Value) -> Hash {
    Hash::from_base58(side["head_commit"].as_str().unwrap()).unwrap()
}

fn hashes(value: &serde_json::Value) -> Vec<Hash> {
    value.as_array().unwrap().iter().map(|h| Hash::from_base58(h.as_str().unwrap()).unwrap()).collect()
}

const STORES: [&str; 3] = ["a-plain", "a-gc", "a-always"];

#[test]
fn finds_the_commits_irmin_recorded() {
    for name in STORES {
        let side = sidecar(name);
        let mut context = Context::open(&stores().join(name)).unwrap();
        let commits = context.commits().unwrap();
        let newest: Vec<Hash> = commits.iter().rev().map(|c| c.hash).collect();
        let kept = hashes(&side["commits_kept_newest_first"]);
        assert!(newest.starts_with(&kept), "{name}: the newest commits found differ from irmin's");
        let head = head(&side);
        assert_eq!(context.find_commit(None).unwrap().hash, head, "{name}: the newest commit is the head");
    }
}

#[test]
fn checks_every_commit_of_every_store() {
    for name in STORES {
        let mut context = Context::open(&stores().join(name)).unwrap();
        let commits = context.commits().unwrap();
        context.remember_checked();
        for commit in &commits {
            let (checked, stats) = context.check_commit(commit, &mut |_, _| {}).unwrap();
            assert_eq!(checked.hash, commit.hash);
            assert!(stats.contents > 0 && stats.directories > 0);
        }
    }
}

#[test]
fn imports_the_head_with_irmins_hash_and_values() {
    for name in STORES {
        let side = sidecar(name);
        let head = head(&side);
        let mut context = Context::open(&stores().join(name)).unwrap();
        let commit = context.find_commit(Some(&head)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Options::default()).unwrap();
        let imported = context.import_commit(&commit, &store, &mut |_, _| {}).unwrap();
        assert_eq!(imported.commit.hash, head);
        assert_eq!(imported.snapshot.commit, head);
        let tree = store.checkout(&head).unwrap().expect("the imported commit");
        assert_eq!(tree.hash().unwrap(), imported.commit.info.root);
        // The sidecars' hex decodes to the hex text of the value (it was
        // encoded twice); the value itself is what irmin's contents hash
        // covers, which the import checked.
        for (path, hex) in side["sample_values_at_head_hex"].as_object().unwrap() {
            let steps: Vec<&str> = path.split('/').collect();
            let want = String::from_utf8(hex::decode(hex.as_str().unwrap()).unwrap()).unwrap();
            let found = tree.find(&steps).unwrap().unwrap_or_else(|| panic!("{name}: {path} missing"));
            assert_eq!(hex::encode(found), want, "{name}: {path}");
        }
        drop((tree, store));
        let store = Store::open(dir.path(), Options::default()).unwrap();
        assert!(store.checkout(&head).unwrap().is_some(), "{name}: the import is durable");
        let report = store.check(pando_store::CheckScope::All, 10, &mut |_| {}).unwrap();
        assert!(report.problems.is_empty(), "{name}: {:?}", report.problems);
    }
}

#[test]
fn refuses_what_is_not_a_context() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(Context::open(dir.path()), Err(Error::NotAContext(m)) if m.contains("no store.control")));
    assert!(matches!(Context::open(&dir.path().join("missing")), Err(Error::NotAContext(m)) if m.contains("no such directory")));
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    assert!(matches!(Context::open(&file), Err(Error::NotAContext(_))));
}

#[test]
fn imports_every_commit_with_its_history() {
    for name in STORES {
        let side = sidecar(name);
        let mut context = Context::open(&stores().join(name)).unwrap();
        let found = context.commits().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Options::default()).unwrap();
        let mut calls = 0;
        let history = context
            .import_all(&store, &mut |done, total, _| {
                calls += 1;
                assert!(done <= total);
            })
            .unwrap();
        assert_eq!((history.commits, calls), (found.len(), found.len()));
        assert_eq!(history.head, found.last().unwrap().hash);
        assert!(history.diff.added > 0, "{name}: later commits changed values");
        for commit in &found {
            assert!(store.checkout(&commit.hash).unwrap().is_some(), "{name}: {} imported", commit.hash);
        }
        // Each commit after the first names the one before as its parent.
        for pair in found.windows(2) {
            assert_eq!(store.commit_info(&pair[1].hash).unwrap().unwrap().parents, vec![pair[0].hash], "{name}");
        }
        let head = head(&side);
        assert_eq!(history.head, head);
        let report = store.check(pando_store::CheckScope::All, 10, &mut |_| {}).unwrap();
        assert!(report.problems.is_empty(), "{name}: {:?}", report.problems);
        assert_eq!(report.commits, found.len() as u64);
    }
}

/// A writable copy of vector store `name` in `to`, its index included (the
/// files' bytes, not their read-only permissions).
fn copy(name: &str, to: &Path) {
    for dir in ["", "index"] {
        std::fs::create_dir_all(to.join(dir)).unwrap();
        for entry in std::fs::read_dir(stores().join(name).join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                std::fs::write(to.join(dir).join(path.file_name().unwrap()), std::fs::read(&path).unwrap()).unwrap();
            }
        }
    }
}

#[test]
fn an_index_that_lags_or_lists_collected_commits_is_checked_against_the_pack() {
    let dir = tempfile::tempdir().unwrap();
    let copy_dir = dir.path().join("a-plain");
    copy("a-plain", &copy_dir);
    let head = head(&sidecar("a-plain"));
    // The index holds only its first 100 commits, as after a crash
    // between a flush of the pack and one of the index.
    let log = copy_dir.join("index/log");
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.truncate(32 + 100 * 45);
    bytes[..8].copy_from_slice(&(100u64 * 45).to_be_bytes());
    std::fs::write(&log, &bytes).unwrap();
    let mut context = Context::open(&copy_dir).unwrap();
    assert_eq!(context.find_commit(None).unwrap().hash, head, "the newest is found past the index's last");
    assert_eq!(context.find_commit(Some(&head)).unwrap().hash, head, "a commit the index lacks is found in the pack");
    // a-gc's index still lists the 199 commits a collection removed.
    let mut context = Context::open(&stores().join("a-gc")).unwrap();
    let kept = hashes(&sidecar("a-gc")["commits_kept_newest_first"]);
    assert_eq!(context.find_commit(Some(&kept[19])).unwrap().hash, kept[19]);
    // The oldest commit of the same history, which the collection removed.
    let gone = Context::open(&stores().join("a-plain")).unwrap().commits().unwrap()[0].hash;
    assert!(matches!(context.find_commit(Some(&gone)), Err(Error::UnknownCommit(h)) if h == gone));
    // A truncated index is named.
    bytes.truncate(32 + 50 * 45 + 7);
    std::fs::write(&log, &bytes).unwrap();
    match Context::open(&copy_dir).unwrap().find_commit(None) {
        Err(Error::Corrupt { file, reason, .. }) => {
            assert!(file == "index/log" && reason.contains("truncated"), "{file}: {reason}")
        }
        other => panic!("a truncated index: {other:?}"),
    }
}
