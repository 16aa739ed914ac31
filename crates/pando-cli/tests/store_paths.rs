//! Wrong store paths (issue #40, item 4), as a user gives them through
//! `PANDO_STORE` or an argument: the commands that read or change a store
//! open existing stores only, so a missing or empty directory stays as it
//! was (no store, no lock file, no directory made); a path that is a file
//! gets the same one line from every command that takes a store.

use std::path::Path;
use std::process::Output;

mod common;

use common::{failure, pando};

/// The commands that only read or change an existing store, with `out`
/// for the files some of them write.
fn existing_store_commands(out: &Path) -> Vec<Vec<String>> {
    let out = |name: &str| out.join(name).to_str().unwrap().to_string();
    [
        &["info"][..],
        &["get", "a/b"],
        &["ls"],
        &["log"],
        &["stats", "--sample-mb", "0"],
        &["check"],
        &["check", "--all"],
        &["gc", "--keep-last", "5"],
        &["prove", "a/b", "-o", &out("proof.bin")],
        &["snapshot", "export", &out("snapshot")],
    ]
    .iter()
    .map(|args| args.iter().map(|arg| arg.to_string()).collect())
    .collect()
}

fn with_store(args: &[String], store: &Path) -> Output {
    pando().args(args).env("PANDO_STORE", store).output().unwrap()
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

#[test]
fn a_missing_or_empty_directory_is_never_made_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for args in existing_store_commands(dir.path()) {
        let stderr = failure(&with_store(&args, &missing));
        assert_eq!(
            stderr,
            format!("Error: {}: no such directory, so no store there (nothing was created)\n", missing.display()),
            "{args:?}"
        );
        let stderr = failure(&with_store(&args, &empty));
        assert_eq!(
            stderr,
            format!("Error: {} is not a pando store: the directory is empty (`pando init` creates a store)\n", empty.display()),
            "{args:?}"
        );
        // -s says the same as PANDO_STORE.
        let mut with_s = args.clone();
        with_s.extend(["-s".to_string(), missing.to_str().unwrap().to_string()]);
        assert!(failure(&pando().args(&with_s).output().unwrap()).contains("no such directory"), "{with_s:?}");
    }
    // Nothing was made: no store, no lock file, no proof, no snapshot.
    assert_eq!(listing(dir.path()), ["empty"]);
    assert_eq!(listing(&empty), Vec::<String>::new());
}

#[test]
fn a_file_gets_the_same_line_from_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "text").unwrap();
    let f = file.to_str().unwrap();
    let line = format!("Error: {f} is a file, not a store directory\n");
    for args in existing_store_commands(dir.path()) {
        assert_eq!(failure(&with_store(&args, &file)), line, "{args:?}");
    }
    let report = dir.path().join("report");
    let r = report.to_str().unwrap();
    let absent = dir.path().join("absent").to_str().unwrap().to_string();
    for args in [
        &["init", f][..],
        &["replay", "--preset", "tiny", "--report", r, "--store", f],
        &["snapshot", "import", &absent, f],
        &["import-irmin", &absent, f],
    ] {
        assert_eq!(failure(&pando().args(args).output().unwrap()), line, "{args:?}");
    }
    // The replay's store from PANDO_STORE, as the operator ran it.
    let output = pando().args(["replay", "--preset", "tiny", "--report", r]).env("PANDO_STORE", &file).output().unwrap();
    assert_eq!(failure(&output), line);
    assert_eq!(std::fs::read(&file).unwrap(), b"text");
    assert_eq!(listing(dir.path()), ["file"]);
}

#[test]
fn a_replay_of_a_trace_that_cannot_be_read_makes_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_trace = dir.path().join("not-a-trace");
    std::fs::write(&not_a_trace, b"hello").unwrap();
    let missing_trace = dir.path().join("missing.repr");
    for (trace, says) in [(&missing_trace, "No such file"), (&not_a_trace, "not a replayable trace")] {
        let store = dir.path().join("store");
        let report = dir.path().join("report");
        let args = ["replay", trace.to_str().unwrap(), "-s", store.to_str().unwrap(), "--report", report.to_str().unwrap()];
        let stderr = failure(&pando().args(args).output().unwrap());
        assert!(stderr.contains(says), "{stderr}");
        assert!(!store.exists(), "no store is left for {}", trace.display());
    }
}
