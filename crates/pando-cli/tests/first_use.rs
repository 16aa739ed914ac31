//! What a new user and an operator hit first, run as they ran it: the
//! binary, with pipes that close, a disk that fills, wrong paths, signals,
//! and output read by people and by scripts.

use pando_store::{CommitMeta, Options, Store, SyncPolicy};
use std::path::Path;
use std::process::{Output, Stdio};

mod common;

use common::{failure, pando, run, stdout};

/// A store with 600 commits (so `log` writes more than a pipe holds) and a
/// directory of 3,000 entries (so does `ls`).
fn store(path: &Path) {
    let store = Store::open(path, Options { sync: SyncPolicy::Never, ..Options::default() }).unwrap();
    let mut tree = store.empty_tree();
    for i in 0..3000 {
        tree.add_mut(&["contracts", "index", &format!("tz1{i:05}"), "balance"], format!("{i}").as_bytes()).unwrap();
    }
    tree.add_mut(&["version"], &[0xff, 0x00, 0x17]).unwrap();
    let mut parent = Vec::new();
    for block in 0..600 {
        tree.add_mut(&["level"], format!("{block}").as_bytes()).unwrap();
        let hash = store
            .commit(
                &tree,
                CommitMeta { parents: &parent, date: 1_600_000_000 + block, author: "Tezos", message: &format!("block {block}") },
            )
            .unwrap();
        parent = vec![hash];
    }
}

/// A trace of the `tiny` preset (200 blocks) in `dir`.
fn tiny_trace(dir: &Path) -> String {
    let path = dir.join("tiny.repr");
    let path = path.to_str().unwrap().to_string();
    assert!(run(&["gen", "--preset", "tiny", "-o", &path]).status.success());
    path
}

#[test]
fn a_closed_pipe_ends_every_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    store(&path);
    let p = path.to_str().unwrap();
    for args in [
        &["info", "-s", p][..],
        &["log", "-s", p, "-n", "600"],
        &["ls", "contracts/index", "-s", p],
        &["get", "version", "-s", p],
        &["stats", "-s", p, "--json", "--sample-mb", "0"],
        &["check", "-s", p],
        &["log", "-s", p, "--json"],
    ] {
        // The reader is gone before the command writes a byte.
        let output = with_reader_gone(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{args:?}: {:?} {stderr}", output.status);
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
    // Standard error closed as well: the commands that report there (the
    // collection's phases, the generator's summary) end as quietly.
    let trace = dir.path().join("t.repr");
    for args in [&["gc", "-s", p, "--keep-last", "5"][..], &["gen", "--preset", "tiny", "-o", trace.to_str().unwrap()]] {
        let (out_reader, out_writer) = std::io::pipe().unwrap();
        let (err_reader, err_writer) = std::io::pipe().unwrap();
        drop((out_reader, err_reader));
        let status = pando().args(args).stdout(out_writer).stderr(err_writer).status().unwrap();
        assert!(status.success(), "{args:?}: {status:?}");
    }
}

#[test]
fn a_full_disk_names_the_first_failure_and_the_store_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let trace = tiny_trace(dir.path());
    let store_dir = dir.path().join("store");
    let s = store_dir.to_str().unwrap();
    let mut command = pando();
    command.args(["replay", &trace, "-s", s, "--report", dir.path().join("report").to_str().unwrap()]);
    // A file size limit of 1 MiB fails a write as a full disk does (EFBIG
    // rather than ENOSPC), with no tmpfs to mount.
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                let limit = libc::rlimit { rlim_cur: 1 << 20, rlim_max: 1 << 20 };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let stderr = failure(&command.output().unwrap());
    // The first error is named, with its file, and what to do.
    assert!(stderr.contains("File too large"), "{stderr}");
    assert!(stderr.contains(".pack during write"), "{stderr}");
    assert!(stderr.contains("free space or raise the limit"), "{stderr}");
    assert!(stderr.contains("recovers to it when reopened"), "{stderr}");
    // The error is the write that failed, not the refusals after it; the
    // log says once that the store refuses writes, and why.
    let error = &stderr[stderr.find("Error:").unwrap()..];
    assert!(!error.contains("refuses further writes"), "{stderr}");
    assert_eq!(stderr.matches("the store refuses further writes until it is reopened").count(), 1, "{stderr}");
    // And the store opens, consistent.
    assert!(stdout(&run(&["info", "-s", s])).contains("commits:"));
    assert!(stdout(&run(&["check", "-s", s, "--all"])).contains("no problems found"));
}

#[test]
fn wrong_store_paths_say_what_is_wrong_once() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let stderr = failure(&run(&["info", "-s", empty.to_str().unwrap()]));
    assert!(stderr.contains("is not a pando store: the directory is empty (`pando init` creates a store)"), "{stderr}");

    let missing = dir.path().join("missing");
    let stderr = failure(&run(&["log", "-s", missing.to_str().unwrap()]));
    assert_eq!(stderr.matches("no such directory").count(), 1, "{stderr}");

    let file = dir.path().join("file");
    std::fs::write(&file, "text").unwrap();
    let stderr = failure(&run(&["info", "-s", file.to_str().unwrap()]));
    assert!(stderr.contains("is a file, not a store directory"), "{stderr}");

    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), "mine").unwrap();
    let stderr = failure(&run(&["init", foreign.to_str().unwrap()]));
    assert!(stderr.contains("is not empty (it holds `notes.txt`), so no store is created there"), "{stderr}");
    let stderr = failure(&run(&["info", "-s", foreign.to_str().unwrap()]));
    assert!(stderr.contains("it has no `control` file (it holds `notes.txt`)"), "{stderr}");

    // A missing trace: its path and cause, once.
    let stderr = failure(&run(&["trace", "stats", missing.to_str().unwrap()]));
    assert_eq!(stderr.matches("No such file or directory").count(), 1, "{stderr}");
    assert!(stderr.contains(missing.to_str().unwrap()), "{stderr}");

    // A developer's shell often sets RUST_BACKTRACE: an error is still the
    // message and its causes, with no stack of the program's frames.
    let output = pando()
        .args(["info", "-s", missing.to_str().unwrap()])
        .env("RUST_BACKTRACE", "1")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .unwrap();
    let stderr = failure(&output);
    assert!(stderr.starts_with(&format!("Error: {}: no such directory", missing.display())), "{stderr}");
    assert!(!stderr.contains("backtrace"), "{stderr}");
}

#[test]
fn init_refuses_a_store_that_exists() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let p = path.to_str().unwrap();
    assert!(stdout(&run(&["init", p])).contains("created an empty store"));
    let stderr = failure(&run(&["init", p]));
    assert!(stderr.contains("already holds a pando store (0 commits); nothing was changed"), "{stderr}");
    store(&dir.path().join("full"));
    let stderr = failure(&run(&["init", dir.path().join("full").to_str().unwrap()]));
    assert!(stderr.contains("(600 commits)"), "{stderr}");
}

#[test]
fn init_records_the_layout_and_info_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("binary");
    let b = binary.to_str().unwrap();
    assert!(stdout(&run(&["init", "--layout", "tezos-binary", b])).contains("(layout tezos-binary)"));
    assert!(stdout(&run(&["info", "-s", b])).contains("layout:       tezos-binary"));
    let info: serde_json::Value = serde_json::from_str(&stdout(&run(&["info", "-s", b, "--json"]))).unwrap();
    assert_eq!(info["layout"], "tezos-binary");
    let l1 = dir.path().join("l1");
    assert!(stdout(&run(&["init", l1.to_str().unwrap()])).contains("(layout tezos)"));
    let stderr = failure(&run(&["init", "--layout", "binary", dir.path().join("none").to_str().unwrap()]));
    assert!(stderr.contains("no layout `binary` (the layouts: tezos, tezos-binary)"), "{stderr}");
    assert!(!dir.path().join("none").exists());
}

#[test]
fn a_proof_of_a_directory_shows_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    store(&path);
    let p = path.to_str().unwrap();
    let proof = dir.path().join("proof.bin");
    let out = proof.to_str().unwrap();
    stdout(&run(&["prove", "-s", p, "-o", out, "contracts", "contracts/index/tz100007/balance", "nothing/here"]));
    let last = stdout(&run(&["log", "-s", p, "-n", "1", "--json"]));
    let last: serde_json::Value = serde_json::from_str(&last).unwrap();
    let root = last["commits"][0]["hash"].as_str().unwrap();
    let contracts = stdout(&run(&["ls", "-s", p, "--hashes"]));
    let contracts_hash = contracts.lines().find(|l| l.ends_with(" contracts")).unwrap().split(' ').nth(2).unwrap();

    let text = stdout(&run(&["verify-proof", out, "--root", root]));
    assert!(text.contains(&format!("contracts: a directory, hash {contracts_hash}")), "{text}");
    assert!(text.contains("contracts/index/tz100007/balance = \"7\""), "{text}");
    assert!(text.contains("nothing/here: absent"), "{text}");

    let json: serde_json::Value = serde_json::from_str(&stdout(&run(&["verify-proof", out, "--root", root, "--json"]))).unwrap();
    assert_eq!(json["valid"], true);
    assert_eq!(json["paths"][0]["kind"], "directory");
    assert_eq!(json["paths"][0]["hash"], contracts_hash);
    assert_eq!(json["paths"][1]["kind"], "value");
    assert_eq!(json["paths"][1]["text"], "7");
    assert_eq!(json["paths"][2]["kind"], "absent");
}

#[test]
fn replay_takes_its_store_from_s_or_pando_store() {
    let dir = tempfile::tempdir().unwrap();
    let trace = tiny_trace(dir.path());
    let report = dir.path().join("report");
    let short = dir.path().join("short");
    stdout(&run(&["replay", &trace, "-s", short.to_str().unwrap(), "--report", report.to_str().unwrap()]));
    assert!(stdout(&run(&["info", "-s", short.to_str().unwrap()])).contains("commits:      200"));

    let from_env = dir.path().join("from-env");
    let output =
        pando().args(["replay", &trace, "--report", report.to_str().unwrap()]).env("PANDO_STORE", &from_env).output().unwrap();
    stdout(&output);
    assert!(stdout(&run(&["info", "-s", from_env.to_str().unwrap()])).contains("commits:      200"));
}

/// Starts `pando replay` of a generated trace in a temporary directory of
/// its own, waits until its store exists, sends `signal`, and returns the
/// output and what is left in the temporary directory.
#[cfg(target_os = "linux")]
fn interrupted_replay(signal: i32, wait_for_store: bool) -> (Output, Vec<std::path::PathBuf>) {
    let tmp = tempfile::tempdir().unwrap();
    let report = tmp.path().join("report");
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let child = pando()
        .args(["replay", "--preset", "small", "--report", report.to_str().unwrap()])
        .env("TMPDIR", &scratch)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let started: Vec<_> = std::fs::read_dir(&scratch).unwrap().flatten().map(|e| e.path()).collect();
        let ready = started.iter().any(|run| run.join(if wait_for_store { "store" } else { "small-1.repr" }).exists());
        if ready {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the replay did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    let output = child.wait_with_output().unwrap();
    let left = std::fs::read_dir(&scratch).unwrap().flatten().map(|e| e.path()).collect();
    (output, left)
}

#[cfg(target_os = "linux")]
#[test]
fn an_interrupted_replay_removes_its_temporary_files() {
    // Two while the trace is generated, one while it is replayed (which
    // waits for the whole generation: the slow case).
    for (signal, wait_for_store) in [(libc::SIGINT, false), (libc::SIGTERM, false), (libc::SIGINT, true)] {
        let (output, left) = interrupted_replay(signal, wait_for_store);
        let stderr = failure(&output);
        assert!(stderr.contains("interrupted"), "{stderr}");
        assert!(left.is_empty(), "signal {signal}: left {left:?}");
    }
}

#[test]
fn output_is_labelled_dated_and_scriptable() {
    let dir = tempfile::tempdir().unwrap();
    let trace = tiny_trace(dir.path());
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let text = stdout(&run(&["replay", &trace, "--report", a.to_str().unwrap()]));
    assert!(text.starts_with(&format!("pando {} replay: tiny.repr, sync every\n", env!("CARGO_PKG_VERSION"))), "{text}");
    // The generated trace carries the real commit hashes: all are checked.
    assert!(text.contains("checks: 200 commit hashes (0 mismatches)"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(a.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["label"], "tiny.repr, sync every");
    // The store was temporary and is gone: the report says so, not its path.
    assert_eq!(json["store"], "a temporary store (removed on exit)");
    stdout(&run(&["replay", &trace, "--sync", "never", "--report", b.to_str().unwrap()]));
    let compared =
        stdout(&run(&["replay", "--compare", a.join("report.json").to_str().unwrap(), b.join("report.json").to_str().unwrap()]));
    assert!(compared.contains("A: tiny.repr, sync every ("), "{compared}");
    assert!(compared.contains("B: tiny.repr, sync never ("), "{compared}");

    let path = dir.path().join("store");
    store(&path);
    let p = path.to_str().unwrap();
    let log = stdout(&run(&["log", "-s", p, "-n", "1"]));
    assert!(log.contains("date   2020-09-13T12:36:39Z (1600000599)"), "{log}");
    assert!(stdout(&run(&["info", "-s", p])).contains("(2020-09-13T12:36:39Z (1600000599), \"block 599\")"));
    // Text is shown as text, anything else marked as hexadecimal; --raw
    // gives the bytes.
    assert_eq!(stdout(&run(&["get", "level", "-s", p])), "599\n");
    assert_eq!(stdout(&run(&["get", "version", "-s", p])), "0xff0017\n");
    assert_eq!(stdout(&run(&["get", "version", "-s", p, "--hex"])), "ff0017\n");
    assert_eq!(run(&["get", "version", "-s", p, "--raw"]).stdout, vec![0xff, 0x00, 0x17]);

    let info: serde_json::Value = serde_json::from_str(&stdout(&run(&["info", "-s", p, "--json"]))).unwrap();
    assert_eq!(info["commits"], 600);
    assert_eq!(info["last_commit"]["date"]["utc"], "2020-09-13T12:36:39Z");
    let log: serde_json::Value = serde_json::from_str(&stdout(&run(&["log", "-s", p, "-n", "3", "--json"]))).unwrap();
    assert_eq!(log["commits"].as_array().unwrap().len(), 3);
    assert_eq!(log["commits"][0]["parents"][0], log["commits"][1]["hash"]);
    let check: serde_json::Value = serde_json::from_str(&stdout(&run(&["check", "-s", p, "--json"]))).unwrap();
    assert_eq!(check["clean"], true);
    assert_eq!(check["problems"].as_array().unwrap().len(), 0);

    // A collection and `info` agree on the generation.
    let gc = stdout(&run(&["gc", "-s", p, "--keep-last", "10"]));
    let generation: u64 =
        gc.lines().find_map(|l| l.strip_prefix("generation:")).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    let info: serde_json::Value = serde_json::from_str(&stdout(&run(&["info", "-s", p, "--json"]))).unwrap();
    assert_eq!(info["gc"]["generation"], generation);
    assert_eq!(info["gc"]["collected_commits"], 590);
}

#[test]
fn the_store_logs_what_an_operator_must_know() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    store(&path);
    let p = path.to_str().unwrap();
    // Quiet by default; PANDO_LOG asks for more.
    assert!(run(&["info", "-s", p]).stderr.is_empty());
    let output = pando().args(["info", "-s", p]).env("PANDO_LOG", "info").output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("store opened") && stderr.contains("commits=600") && !stderr.contains('\u{1b}'), "{stderr}");

    // A torn write past the durable end, as a crash leaves it: the next
    // writable open cuts it, and says so (a warning, shown by default).
    let chunk = std::fs::read_dir(&path)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "pack"))
        .max()
        .unwrap();
    let mut bytes = std::fs::read(&chunk).unwrap();
    bytes.extend_from_slice(&[0x5a; 64]);
    std::fs::write(&chunk, &bytes).unwrap();
    let output = run(&["gc", "-s", p, "--keep-last", "100"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("WARN") && stderr.contains("recovery: cut bytes past the durable end") && stderr.contains("cut=64"),
        "{stderr}"
    );
}

/// Runs `pando args...` with a standard output whose reader is already
/// gone (as `pando ... | head -1` once `head` has its line).
fn with_reader_gone(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    pando().args(args).stdout(writer).stderr(Stdio::piped()).output().unwrap()
}

#[test]
fn a_check_that_finds_damage_fails_even_when_its_reader_goes_away() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    store(&path);
    let p = path.to_str().unwrap();
    // A flipped byte in the first record, found by --all.
    let chunk = path.join("chunk-0000000000000000.pack");
    let mut bytes = std::fs::read(&chunk).unwrap();
    bytes[3] ^= 0x01;
    std::fs::write(&chunk, &bytes).unwrap();
    for args in [&["check", "--all", "-s", p][..], &["check", "--all", "--json", "-s", p]] {
        assert_eq!(with_reader_gone(args).status.code(), Some(1), "{args:?}");
        assert_eq!(run(args).status.code(), Some(1), "{args:?}");
    }
    bytes[3] ^= 0x01;
    std::fs::write(&chunk, &bytes).unwrap();
    assert_eq!(with_reader_gone(&["check", "--all", "-s", p]).status.code(), Some(0));
    // Damage that opening finds.
    let index = path.join("index");
    let mut entries = std::fs::read(&index).unwrap();
    entries[44 + 40] ^= 0x80;
    std::fs::write(&index, &entries).unwrap();
    for args in [&["check", "-s", p][..], &["check", "--json", "-s", p]] {
        assert_eq!(with_reader_gone(args).status.code(), Some(1), "{args:?}");
    }
}

#[test]
fn a_replay_whose_reader_goes_away_writes_its_report_and_says_how_it_went() {
    let dir = tempfile::tempdir().unwrap();
    let trace = tiny_trace(dir.path());
    let (report, store) = (dir.path().join("report"), dir.path().join("store"));
    let (r, s) = (report.to_str().unwrap(), store.to_str().unwrap());
    let output = with_reader_gone(&["replay", &trace, "--blocks", "5", "-s", s, "--report", r]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["blocks"], 5);
    // A trace that disagrees with the store's hashes: exit status 1 still.
    let mut bytes = std::fs::read(&trace).unwrap();
    let at = bytes.len() - 40;
    bytes[at] ^= 0x01;
    let bad = dir.path().join("bad.repr");
    std::fs::write(&bad, &bytes).unwrap();
    let other = dir.path().join("other");
    let output = with_reader_gone(&["replay", bad.to_str().unwrap(), "-s", other.to_str().unwrap(), "--report", r]);
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn the_first_commands_peak_memory_says_what_it_includes() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let r = report.to_str().unwrap();
    let text = stdout(&run(&["replay", "--preset", "tiny", "--blocks", "3", "--report", r]));
    let memory = text.lines().find(|line| line.starts_with("memory: peak RSS")).unwrap();
    assert!(memory.contains("(the replay's own; generating the trace first, in the same process, peaked at "), "{memory}");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["generation"]["included"], false, "{json}");
    assert!(json["generation"]["peak_rss_bytes"].as_u64().unwrap() > 0);
    let html = std::fs::read_to_string(report.join("report.html")).unwrap();
    assert!(html.contains("Peak RSS: the replay&#39;s own") || html.contains("Peak RSS: the replay's own"), "{html}");
    // A replay of a trace file generates nothing: no note.
    let trace = tiny_trace(dir.path());
    let text = stdout(&run(&["replay", &trace, "--blocks", "3", "--report", r]));
    assert!(text.lines().any(|line| line.starts_with("memory: peak RSS") && !line.contains('(')), "{text}");
}
