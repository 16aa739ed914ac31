//! Commands that write a file or a store write it whole or not at all, as
//! a user meets them: the binary, stopped by SIGINT or SIGTERM sent to it
//! (or failing) midway, leaves the final name as it was and nothing
//! beside it, and a retry works; a trace cut inside a block is an error
//! naming the block; an interrupted replay's report says it is partial.

#![cfg(target_os = "linux")]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{failure, pando, run, stdout};

/// Waits until `ready` holds (a child got far enough), or fails the test.
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends `signal` to `child`, and waits for its end.
fn stop(child: Child, signal: i32) -> Output {
    // SAFETY: kill(2) on our own child's pid, which has not been waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    child.wait_with_output().unwrap()
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// The temporary file beside a final name, once it holds bytes.
fn partial_with_bytes(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with(".partial") && e.metadata().is_ok_and(|m| m.len() > 0))
}

/// A trace of the `tiny` preset (200 blocks) at `path`.
fn tiny_trace(path: &Path) {
    stdout(&run(&["gen", "--preset", "tiny", "-o", path.to_str().unwrap()]));
}

/// The byte offsets where the rows of a trace end (after its 13-byte
/// header, each row is a LEB128 length and that many bytes).
fn row_ends(bytes: &[u8]) -> Vec<usize> {
    let (mut at, mut ends) = (13, Vec::new());
    while at < bytes.len() {
        let (mut len, mut shift) = (0usize, 0);
        loop {
            let byte = bytes[at];
            at += 1;
            len |= usize::from(byte & 0x7f) << shift;
            shift += 7;
            if byte < 0x80 {
                break;
            }
        }
        at += len;
        ends.push(at);
    }
    ends
}

#[test]
fn an_interrupted_gen_leaves_no_trace_and_the_old_file_intact() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let dir = tempfile::tempdir().unwrap();
        let output = dir.path().join("small.repr");
        std::fs::write(&output, b"an older trace").unwrap();
        let child = pando()
            .args(["gen", "--preset", "small", "-o", output.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for("the trace's first bytes", || partial_with_bytes(dir.path()));
        let stderr = failure(&stop(child, signal));
        assert!(stderr.contains("interrupted") && stderr.contains("was not written"), "{stderr}");
        // Neither the temporary file nor the generator's scratch store is left.
        assert_eq!(names(dir.path()), ["small.repr"], "signal {signal}");
        assert_eq!(std::fs::read(&output).unwrap(), b"an older trace");
    }
}

#[test]
fn a_trace_cut_inside_a_block_is_an_error_naming_the_block() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("tiny.repr");
    tiny_trace(&whole);
    // The rows of block 10 (counted from 0): after the 10th commit, before the 11th.
    let lines = stdout(&run(&["trace", "cat", whole.to_str().unwrap()]));
    let commits: Vec<usize> = lines.lines().enumerate().filter(|(_, l)| l.starts_with("commit ")).map(|(i, _)| i).collect();
    let (first, commit) = (commits[9] + 1, commits[10]);
    let add = (first..commit).rev().find(|&i| lines.lines().nth(i).unwrap().starts_with("add ")).unwrap();
    let bytes = std::fs::read(&whole).unwrap();
    let ends = row_ends(&bytes);
    assert_eq!(ends.len(), lines.lines().count());
    let cut = dir.path().join("cut.repr");
    std::fs::write(&cut, &bytes[..ends[add]]).unwrap();
    let c = cut.to_str().unwrap();
    let named = format!(
        "the trace ends inside block 10, after 10 whole blocks: its {} rows from row {first} (byte {})",
        add + 1 - first,
        ends[first - 1]
    );

    // `trace cat` shows every row, then the error; `trace stats` its summary, then the error.
    let output = run(&["trace", "cat", c]);
    let stderr = failure(&output);
    assert!(stderr.contains(&named) && stderr.contains("--ignore-partial-tail"), "{stderr}");
    assert_eq!(String::from_utf8(output.stdout).unwrap().lines().count(), add + 1);
    assert_eq!(stdout(&run(&["trace", "cat", c, "--ignore-partial-tail"])).lines().count(), add + 1);
    let output = run(&["trace", "stats", c]);
    assert!(failure(&output).contains(&named));
    assert!(String::from_utf8(output.stdout).unwrap().contains("10 blocks"));
    assert!(stdout(&run(&["trace", "stats", c, "--ignore-partial-tail"])).contains("10 blocks"));

    // The replay replays the whole blocks, reports, and fails naming the
    // block; with --ignore-partial-tail it succeeds with those blocks.
    let store = dir.path().join("store");
    let report = dir.path().join("report");
    let replay = |extra: &[&str]| {
        pando().args(["replay", c, "--report", report.to_str().unwrap()]).args(extra).env("PANDO_STORE", &store).output().unwrap()
    };
    let output = replay(&[]);
    let stderr = failure(&output);
    assert!(stderr.contains("the replay stopped after 10 blocks") && stderr.contains(&named), "{stderr}");
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("(partial: stopped by an error after 10 blocks)"), "{text}");
    std::fs::remove_dir_all(&store).unwrap();
    let output = replay(&["--ignore-partial-tail"]);
    let left_out = format!("the trace ends inside block 10 (0 is the first): its {} rows from row {first}", add + 1 - first);
    assert!(String::from_utf8_lossy(&output.stderr).contains(&left_out), "{output:?}");
    let text = stdout(&output);
    assert!(text.contains("\n10 blocks, "), "{text}");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap()).unwrap();
    assert_eq!((json["blocks"].as_u64(), json["interrupted"].as_bool()), (Some(10), Some(false)));
    assert!(json["stopped_early"].is_null());

    // A trace cut inside a row: an error naming the row and its byte.
    std::fs::write(&cut, &bytes[..ends[add] - 3]).unwrap();
    let stderr = failure(&run(&["trace", "stats", c]));
    assert!(stderr.contains(&format!("row {add} at byte {}: truncated: the row has", ends[add - 1])), "{stderr}");
    // With --ignore-partial-tail, the whole blocks before it, and a word
    // on the block left out.
    std::fs::remove_dir_all(&store).unwrap();
    let output = replay(&["--ignore-partial-tail"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&left_out) && stderr.contains("the last cut short by the end of the file"), "{stderr}");
    assert!(stdout(&output).contains("\n10 blocks, "));
}

#[test]
fn an_interrupted_replay_says_so_in_its_report_and_compare_warns() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("tiny.repr");
    tiny_trace(&trace);
    let t = trace.to_str().unwrap();
    let (partial, whole) = (dir.path().join("partial"), dir.path().join("whole"));
    let store = dir.path().join("store");
    let child = pando()
        .args(["replay", t, "--report", partial.to_str().unwrap()])
        .env("PANDO_STORE", &store)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the replay's store", || store.exists());
    let output = stop(child, libc::SIGINT);
    let stderr = failure(&output);
    assert!(stderr.contains("interrupted"), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(partial.join("report.json")).unwrap()).unwrap();
    let blocks = json["blocks"].as_u64().unwrap();
    assert!(blocks < 200, "{blocks}");
    assert_eq!(json["interrupted"], true);
    assert!(json["stopped_early"].as_str().unwrap().contains("signal"), "{json}");
    let title = format!("(partial: interrupted after {blocks} blocks)");
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.lines().next().unwrap().contains(&title), "{text}");
    let html = std::fs::read_to_string(partial.join("report.html")).unwrap();
    assert!(html.contains(&format!("<h1 id=\"title\">pando replay {title}")), "{html}");

    // A whole run (of fewer blocks, as asked) is not partial; compared with
    // the partial one, the comparison warns.
    std::fs::remove_dir_all(&store).unwrap();
    let output = pando()
        .args(["replay", t, "--blocks", "3", "--report", whole.to_str().unwrap()])
        .env("PANDO_STORE", &store)
        .output()
        .unwrap();
    assert!(!stdout(&output).contains("partial"));
    let output =
        run(&["replay", "--compare", whole.join("report.json").to_str().unwrap(), partial.join("report.json").to_str().unwrap()]);
    let compared = stdout(&output);
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("warning: B is a partial run") && !stderr.contains("A is a partial"), "{stderr}");
    assert!(compared.contains(&title), "{compared}");
}

/// A store whose last commit holds 16 MB of values no compressor shrinks,
/// so that exporting it takes a while.
fn large_store(path: &Path) {
    use pando_store::{Options, Store, SyncPolicy};
    let store = Store::open(path, Options { sync: SyncPolicy::Never, ..Options::default() }).unwrap();
    let mut tree = store.empty_tree();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..16_000 {
        let value: Vec<u8> = (0..1000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        tree.add_mut(&["data", &format!("{:03}", i % 997), &format!("{i}")], &value).unwrap();
    }
    store
        .commit(&tree, pando_store::CommitMeta { parents: &[], date: 1_600_000_000, author: "Tezos", message: "large" })
        .unwrap();
    store.close().unwrap();
}

#[test]
fn an_interrupted_snapshot_export_leaves_the_old_file_intact() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    large_store(&store);
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let file = out.join("snapshot.bin");
    for signal in [libc::SIGINT, libc::SIGTERM] {
        std::fs::write(&file, b"an older snapshot").unwrap();
        let child = pando()
            .args(["snapshot", "export", file.to_str().unwrap()])
            .env("PANDO_STORE", &store)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for("the snapshot's first bytes", || partial_with_bytes(&out));
        let stderr = failure(&stop(child, signal));
        assert!(stderr.contains("interrupted") && stderr.contains("was not written"), "{stderr}");
        assert_eq!(names(&out), ["snapshot.bin"], "signal {signal}");
        assert_eq!(std::fs::read(&file).unwrap(), b"an older snapshot");
    }
    // Uninterrupted, it replaces the old file whole.
    let output = pando().args(["snapshot", "export", file.to_str().unwrap()]).env("PANDO_STORE", &store).output().unwrap();
    assert!(stdout(&output).contains("exported commit"));
    assert_eq!(names(&out), ["snapshot.bin"]);
    assert!(std::fs::metadata(&file).unwrap().len() > 16_000_000);
}

/// A snapshot of a store of the `tiny` trace's first 20 blocks.
fn small_snapshot(dir: &Path) -> PathBuf {
    let trace = dir.join("tiny.repr");
    tiny_trace(&trace);
    let store = dir.join("source");
    let report = dir.join("report");
    let output = pando()
        .args(["replay", trace.to_str().unwrap(), "--blocks", "20", "--report", report.to_str().unwrap()])
        .env("PANDO_STORE", &store)
        .output()
        .unwrap();
    stdout(&output);
    let snapshot = dir.join("snapshot.bin");
    stdout(&pando().args(["snapshot", "export", snapshot.to_str().unwrap()]).env("PANDO_STORE", &store).output().unwrap());
    snapshot
}

#[test]
fn an_interrupted_snapshot_import_removes_its_store_and_a_retry_works() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = small_snapshot(dir.path());
    let bytes = std::fs::read(&snapshot).unwrap();
    // The import reads a pipe this test writes, so that it is midway, its
    // store created, when the signal comes.
    let fifo = dir.path().join("fifo");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for (signal, target) in [(libc::SIGINT, dir.path().join("new")), (libc::SIGTERM, empty.clone())] {
        let child = pando()
            .args(["snapshot", "import", fifo.to_str().unwrap(), target.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut pipe = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        pipe.write_all(&bytes[..bytes.len() / 2]).unwrap();
        wait_for("the new store", || std::fs::read_dir(&target).is_ok_and(|mut files| files.next().is_some()));
        // SAFETY: kill(2) on our own child's pid, which has not been waited for.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        // The rest lets the import's blocked read return and see the signal.
        let _ = pipe.write_all(&bytes[bytes.len() / 2..]);
        drop(pipe);
        let stderr = failure(&child.wait_with_output().unwrap());
        assert!(stderr.contains("interrupted") && stderr.contains("was left as it was"), "{stderr}");
        // What the import made is gone; a directory that was there stays, empty.
        if target == empty {
            assert!(names(&empty).is_empty(), "{:?}", names(&empty));
        } else {
            assert!(!target.exists(), "{:?}", names(&target));
        }
        // A retry works.
        let text = stdout(&run(&["snapshot", "import", snapshot.to_str().unwrap(), target.to_str().unwrap()]));
        assert!(text.contains("imported commit"), "{text}");
    }
}

#[test]
fn a_failed_snapshot_import_says_its_cause_once_and_a_retry_works() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = small_snapshot(dir.path());
    let mut bytes = std::fs::read(&snapshot).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    let damaged = dir.path().join("damaged.bin");
    std::fs::write(&damaged, &bytes).unwrap();
    let target = dir.path().join("new");
    let stderr = failure(&run(&["snapshot", "import", damaged.to_str().unwrap(), target.to_str().unwrap()]));
    // The cause, once; no false report of a failed write before it.
    assert!(!stderr.contains("ERROR") && !stderr.contains("a write failed"), "{stderr}");
    assert!(stderr.starts_with("Error: import of"), "{stderr}");
    assert_eq!(stderr.matches("bad snapshot").count(), 1, "{stderr}");
    assert!(!target.exists());
    assert!(
        stdout(&run(&["snapshot", "import", snapshot.to_str().unwrap(), target.to_str().unwrap()])).contains("imported commit")
    );
}

#[test]
fn gen_does_not_warn_about_its_own_scratch_store() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(&["gen", "--preset", "tiny", "-o", dir.path().join("tiny.repr").to_str().unwrap()]);
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(output.status.success(), "{stderr}");
    // However long its commits take (a large preset's genesis takes
    // seconds), they are the generator's own, none of the user's business.
    assert!(!stderr.contains("WARN") && !stderr.contains("slow commit"), "{stderr}");
    assert!(stderr.starts_with("generated "), "{stderr}");
}

#[test]
fn an_interrupted_import_irmin_removes_its_store_and_a_retry_works() {
    // Read only: the import never writes to its context.
    let context = pando_vectors::path("irmin-stores/a-always");
    let c = context.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("new");
    // Every commit, each synced: long enough to be stopped midway.
    let child = pando()
        .args(["import-irmin", c, target.to_str().unwrap(), "--all"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the new store", || std::fs::read_dir(&target).is_ok_and(|mut files| files.next().is_some()));
    let stderr = failure(&stop(child, libc::SIGTERM));
    assert!(stderr.contains("interrupted") && stderr.contains("was left as it was"), "{stderr}");
    assert!(!target.exists());
    let text = stdout(&run(&["import-irmin", c, target.to_str().unwrap()]));
    assert!(text.contains("imported commit"), "{text}");
}

/// What a command writes to a terminal on its standard error (a
/// pseudo-terminal, so that the progress bar is drawn), with `env` set.
fn on_a_terminal(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    use std::io::Read as _;
    use std::os::fd::FromRawFd as _;
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty(3) writes two descriptors; the other arguments may be null.
    let opened = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
    assert_eq!(opened, 0);
    // SAFETY: both descriptors were just opened and are owned here alone.
    let (mut master, slave) = unsafe { (std::fs::File::from_raw_fd(master), std::fs::File::from_raw_fd(slave)) };
    let mut child =
        pando().args(args).envs(env.iter().copied()).env("TERM", "xterm").stdout(Stdio::null()).stderr(slave).spawn().unwrap();
    // The child holds the terminal now: reading ends (EIO) once it exits.
    let mut shown = Vec::new();
    let _ = master.read_to_end(&mut shown);
    (child.wait().unwrap().success(), String::from_utf8_lossy(&shown).into_owned())
}

#[test]
fn logs_are_written_around_the_progress_bar() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("tiny.repr");
    let (ok, shown) = on_a_terminal(&["gen", "--preset", "tiny", "-o", output.to_str().unwrap()], &[("PANDO_LOG", "debug")]);
    assert!(ok, "{shown}");
    // Each log line starts on a line of its own: after the bar's text, the
    // line is cleared (`\r`, erase line) before the log is written, and the
    // bar is drawn again below it. Without that, a log line followed the
    // bar's text on the same line.
    let mut beside_the_bar = 0;
    for line in shown.split('\n').filter(|line| line.contains("DEBUG")) {
        let before = &line[..line.find("DEBUG").unwrap()];
        assert!(!before.rsplit('\r').next().unwrap().contains("generating"), "a log inside the bar's line: {line:?}");
        beside_the_bar += usize::from(before.contains("generating"));
    }
    assert!(beside_the_bar > 0, "no log while the bar was drawn: {shown}");
    // No ETA before there is a rate to base it on (indicatif's own said `0s`).
    assert!(shown.contains("0/200 blocks ETA ?"), "{shown}");
}

/// The `pando-replay-*` directories in `tmp`.
fn replay_dirs(tmp: &Path) -> Vec<String> {
    names(tmp).into_iter().filter(|name| name.starts_with("pando-replay-")).collect()
}

/// `pando replay TRACE args...` with `tmp` as its temporary folder, started
/// and left running.
fn replay_in(tmp: &Path, trace: &Path, args: &[&str]) -> Child {
    pando().arg("replay").arg(trace).args(args).env("TMPDIR", tmp).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

/// Waits for the replay's temporary store in `tmp` that is not one of
/// `before`, and returns its directory's name.
fn new_scratch(tmp: &Path, before: &[String]) -> String {
    let mut found = None;
    wait_for("the replay's temporary store", || {
        found = replay_dirs(tmp).into_iter().find(|name| !before.contains(name) && tmp.join(name).join("store").exists());
        found.is_some()
    });
    found.unwrap()
}

#[test]
fn a_killed_replay_leaves_nothing_in_the_temporary_folder_after_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let (tmp, trace) = (dir.path().join("tmp"), dir.path().join("tiny.repr"));
    std::fs::create_dir(&tmp).unwrap();
    tiny_trace(&trace);
    let report = dir.path().join("report");
    let r = report.to_str().unwrap();

    // With a trace and a store, a replay needs no temporary directory:
    // killed midway, it leaves none.
    let store = dir.path().join("store");
    let child = replay_in(&tmp, &trace, &["--store", store.to_str().unwrap(), "--report", r]);
    wait_for("the replay's store", || store.exists());
    stop(child, libc::SIGKILL);
    assert_eq!(names(&tmp), Vec::<String>::new());

    // A replay into a temporary store, killed: its directory stays...
    let killed = replay_in(&tmp, &trace, &["--report", r]);
    let dead = new_scratch(&tmp, &[]);
    stop(killed, libc::SIGKILL);
    assert_eq!(replay_dirs(&tmp), [dead.as_str()]);
    // ...until the next replay starts, which removes it but not that of a
    // replay still running (stopped, here, so that it is still there).
    let running = replay_in(&tmp, &trace, &["--report", r]);
    let live = new_scratch(&tmp, std::slice::from_ref(&dead));
    // SAFETY: kill(2) on our own child's pid, which has not been waited for.
    assert_eq!(unsafe { libc::kill(running.id() as i32, libc::SIGSTOP) }, 0);
    let other = dir.path().join("other");
    stdout(
        &replay_in(&tmp, &trace, &["--blocks", "1", "--store", other.to_str().unwrap(), "--report", r])
            .wait_with_output()
            .unwrap(),
    );
    assert_eq!(replay_dirs(&tmp), [live.as_str()]);
    stop(running, libc::SIGKILL);
    // A directory left by an older pando (no owner file): removed once
    // empty and a minute old.
    let old = tmp.join("pando-replay-old");
    std::fs::create_dir(&old).unwrap();
    let minute_ago = std::time::SystemTime::now() - Duration::from_secs(120);
    std::fs::File::open(&old).unwrap().set_modified(minute_ago).unwrap();
    let young = tmp.join("pando-replay-young");
    std::fs::create_dir(&young).unwrap();
    let again = replay_in(&tmp, &trace, &["--blocks", "1", "--report", r]).wait_with_output().unwrap();
    stdout(&again);
    assert_eq!(replay_dirs(&tmp), ["pando-replay-young"]);
}
