//! `pando import-irmin` as an operator runs it, on real irmin-pack stores
//! written by irmin 3.7.2 (the test vectors' `irmin-stores/`, read-only:
//! a test that damages one works on a copy).

use std::path::{Path, PathBuf};

mod common;

use common::{failure, run as pando, stdout};

fn vector(name: &str) -> PathBuf {
    pando_vectors::path(&format!("irmin-stores/{name}"))
}

const HEAD: &str = "CoUyzCTwR5wfDFTEpq2392dS2tPRJm2nUz9En5SCfT5zGrUYDR4P";

/// A writable copy of a vector store's files (its index aside): their
/// bytes, not their read-only permissions.
fn copy(name: &str, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(vector(name)).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::write(to.join(path.file_name().unwrap()), std::fs::read(&path).unwrap()).unwrap();
        }
    }
}

/// The same, with irmin's index (`index/log`).
fn copy_with_index(name: &str, to: &Path) {
    copy(name, to);
    std::fs::create_dir_all(to.join("index")).unwrap();
    std::fs::copy(vector(name).join("index/log"), to.join("index/log")).unwrap();
}

/// Every file of a directory tree: path, length, modification time, bytes.
fn listing(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(listing(&path));
        } else {
            let meta = std::fs::metadata(&path).unwrap();
            out.push((path.clone(), meta.len(), meta.modified().unwrap(), std::fs::read(&path).unwrap()));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn imports_the_newest_commit_and_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let context = dir.path().join("context");
    copy_with_index("a-gc", &context);
    let before = listing(&context);
    let store = dir.path().join("store");
    let output = pando(&["import-irmin", context.to_str().unwrap(), store.to_str().unwrap()]);
    assert_eq!(listing(&context), before, "the context directory is left as it was");
    assert!(String::from_utf8_lossy(&output.stderr).contains(&format!("taking the newest commit in the files, {HEAD}")));
    assert!(stdout(&output).contains(&format!("imported commit {HEAD}")));
    let info = stdout(&pando(&["info", "-s", store.to_str().unwrap()]));
    assert!(info.contains(HEAD), "{info}");
    let value = stdout(&pando(&["get", "big_maps/index/169/key_type", "-s", store.to_str().unwrap(), "--hex"]));
    assert!(value.contains("eab4497ef08639fb"), "{value}");
}

#[test]
fn imports_a_named_commit_or_every_commit() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one");
    // The second newest commit of a-plain.
    let older = "CoVx2ifpxw2zBSDjFY69i8XBvTgJNaxWfgPJm9E7YUdJ2q4gZjp4";
    stdout(&pando(&["import-irmin", vector("a-plain").to_str().unwrap(), one.to_str().unwrap(), "--commit", older]));
    assert!(stdout(&pando(&["info", "-s", one.to_str().unwrap()])).contains(older));

    let all = dir.path().join("all");
    let out = stdout(&pando(&["import-irmin", vector("a-always").to_str().unwrap(), all.to_str().unwrap(), "--all"]));
    assert!(out.contains("imported 300 commits"), "{out}");
    let log = stdout(&pando(&["log", "-s", all.to_str().unwrap(), "-n", "1000"]));
    assert_eq!(log.matches("commit Co").count(), 300, "{log}");
    let check = stdout(&pando(&["check", "-s", all.to_str().unwrap(), "--all"]));
    assert!(check.contains("no problem"), "{check}");
}

#[test]
fn check_only_writes_nothing() {
    for name in ["a-plain", "a-gc", "a-always"] {
        let out = stdout(&pando(&["import-irmin", vector(name).to_str().unwrap(), "--check-only"]));
        assert!(out.contains(&format!("commit {HEAD} and its tree are intact")) || name == "a-always", "{out}");
        assert!(out.contains("are intact"), "{out}");
    }
    let out = stdout(&pando(&["import-irmin", vector("a-gc").to_str().unwrap(), "--check-only", "--all"]));
    assert!(out.contains("100 commits and their trees are intact"), "{out}");
    let out = stdout(&pando(&["import-irmin", vector("a-gc").to_str().unwrap(), "--check-only", "--all", "--json"]));
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((value["intact"].as_bool(), value["commits"].as_array().map(Vec::len)), (Some(true), Some(100)));
    assert_eq!(value["commits"][99], HEAD);
}

#[test]
fn damage_is_named_and_leaves_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let context = dir.path().join("context");
    copy("a-plain", &context);
    // The last byte of the suffix is in the head commit's message.
    let suffix = context.join("store.0.suffix");
    let mut bytes = std::fs::read(&suffix).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&suffix, &bytes).unwrap();
    let store = dir.path().join("store");
    let err = failure(&pando(&["import-irmin", context.to_str().unwrap(), store.to_str().unwrap()]));
    assert!(err.contains("store.0.suffix at byte 5647574: commit hashes to"), "{err}");
    assert!(!store.exists(), "a failed import removes the store it created");
    let err = failure(&pando(&["import-irmin", context.to_str().unwrap(), "--check-only"]));
    assert!(err.contains("store.0.suffix at byte 5647574"), "{err}");
    // For scripts: the damage as JSON, and exit status 1.
    let output = pando(&["import-irmin", context.to_str().unwrap(), "--check-only", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(value["intact"], false);
    assert_eq!((value["damage"]["file"].as_str(), value["damage"]["offset"].as_u64()), (Some("store.0.suffix"), Some(5647574)));

    // A cut suffix.
    std::fs::write(&suffix, &bytes[..bytes.len() / 2]).unwrap();
    let err = failure(&pando(&["import-irmin", context.to_str().unwrap(), "--check-only"]));
    assert!(err.contains("store.0.suffix at byte") && err.contains("truncated"), "{err}");
}

#[test]
fn an_emptied_suffix_chunk_is_found_through_the_index() {
    // Chunks before the last are as long as their files: emptying one
    // leaves a shorter suffix that reads well. irmin's index, written
    // after the suffix, still places the commits it held.
    let dir = tempfile::tempdir().unwrap();
    let context = dir.path().join("context");
    copy_with_index("a-gc", &context);
    std::fs::write(context.join("store.4.suffix"), b"").unwrap();
    let c = context.to_str().unwrap();
    for args in [&["--check-only"][..], &["--check-only", "--all"]] {
        let mut all = vec!["import-irmin", c];
        all.extend_from_slice(args);
        let err = failure(&pando(&all));
        assert!(err.contains("irmin's index places commit") && err.contains("past the suffix's end"), "{args:?}: {err}");
    }
    let store = dir.path().join("store");
    let err = failure(&pando(&["import-irmin", c, store.to_str().unwrap(), "--all"]));
    assert!(err.contains("a suffix chunk is missing, emptied or cut"), "{err}");
    assert!(!store.exists(), "a failed import removes the store it created");
}

#[test]
fn wrong_paths_and_arguments_get_one_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    assert!(failure(&pando(&["import-irmin", d, "--check-only"])).contains("has no store.control: not an irmin-pack context"));
    let missing = dir.path().join("missing");
    assert!(failure(&pando(&["import-irmin", missing.to_str().unwrap(), "--check-only"])).contains("no such directory"));
    // A store directory that is not empty is refused before anything is read.
    std::fs::write(dir.path().join("file"), b"x").unwrap();
    let err = failure(&pando(&["import-irmin", vector("a-plain").to_str().unwrap(), d]));
    assert!(err.contains("is not empty"), "{err}");
    assert!(dir.path().join("file").exists());
    // No store and no --check-only.
    assert!(failure(&pando(&["import-irmin", vector("a-plain").to_str().unwrap()])).contains("STORE"));
    let err = failure(&pando(&["import-irmin", vector("a-plain").to_str().unwrap(), "--check-only", "--commit", "Co123"]));
    assert!(err.contains("is not a commit hash"), "{err}");
}

#[test]
fn an_import_whose_reader_goes_away_keeps_its_store() {
    let dir = tempfile::tempdir().unwrap();
    let context = dir.path().join("context");
    copy_with_index("a-gc", &context);
    let store = dir.path().join("store");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let output = common::pando()
        .args(["import-irmin", context.to_str().unwrap(), store.to_str().unwrap()])
        .stdout(writer)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    // The store was made whole, not removed when its first line found no reader.
    assert!(stdout(&pando(&["info", "-s", store.to_str().unwrap()])).contains(HEAD));
}
