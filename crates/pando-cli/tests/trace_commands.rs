//! `pando gen`, `pando trace cat|stats` and `pando replay` (with its
//! reports and `--compare`), and their errors on bad input.

use std::process::{Command, Output};

fn pando(args: &[&str], dir: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pando")).args(args).current_dir(dir).env_remove("PANDO_STORE").output().unwrap()
}

fn ok(output: Output) -> String {
    assert!(output.status.success(), "failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn generate_inspect_replay_and_compare() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(pando(&["gen", "--preset", "tiny", "--seed", "3", "-o", "t.repr"], d));
    let stats = ok(pando(&["trace", "stats", "t.repr"], d));
    assert!(stats.contains("200 blocks"), "{stats}");
    assert!(stats.contains("contracts/index"));
    let cat = ok(pando(&["trace", "cat", "t.repr", "-n", "3"], d));
    assert_eq!(cat.lines().count(), 3);
    assert!(cat.starts_with("add /version"), "{cat}");

    let first = ok(pando(&["replay", "t.repr", "--report", "a", "--label", "first"], d));
    assert!(first.contains("200 blocks"), "{first}");
    assert!(first.contains("0 mismatches"));
    assert!(d.join("a/report.json").exists() && d.join("a/report.html").exists());
    let html = std::fs::read_to_string(d.join("a/report.html")).unwrap();
    // Self-contained: charts drawn inline, no script, nothing fetched.
    assert!(html.contains("<svg class=\"chart\""));
    assert!(!html.contains("<script") && !html.contains("src=") && !html.contains("href="));
    // Block times are compared with Tezos mainnet's 6 s unless told otherwise.
    assert!(html.contains("Block time against a 6 s block budget, Tezos mainnet's block time:"), "{html}");
    ok(pando(&["replay", "t.repr", "--report", "b", "--label", "second", "--sync", "never", "--store", "kept"], d));
    assert!(d.join("kept/control").exists(), "--store keeps the store");
    let compare = ok(pando(&["replay", "--compare", "a/report.json", "b/report.json"], d));
    assert!(compare.contains("first") && compare.contains("second") && compare.contains("blocks/s"), "{compare}");

    // Replaying the same trace again into the kept store is refused: the
    // store has commits, and only --append adds to them.
    let again = pando(&["replay", "t.repr", "--report", "c", "--store", "kept"], d);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success() && stderr.contains("only with --append"), "{stderr}");
}

/// The circles of the block chart, by colour.
fn dots(html: &str, colour: &str) -> usize {
    html.matches(&format!("r=\"1.6\" fill=\"{colour}\"")).count()
}

#[test]
fn the_block_budget_is_an_option_the_page_names() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(pando(&["gen", "--preset", "tiny", "-o", "t.repr"], d));
    // A budget of a microsecond: every block takes at least half of it.
    ok(pando(&["replay", "t.repr", "--sync", "never", "--report", "tight", "--block-budget", "0.000001"], d));
    let html = std::fs::read_to_string(d.join("tight/report.html")).unwrap();
    assert!(html.contains("Block time against a 0.000001 s block budget:"), "{html}");
    assert!(!html.contains("mainnet"), "only the default is named as mainnet's");
    assert!(dots(&html, "#d1392b") >= 200, "{html}");
    assert_eq!(dots(&html, "#2a9d5c") + dots(&html, "#9bbf2a") + dots(&html, "#e9a21f"), 0);
    let json = std::fs::read_to_string(d.join("tight/report.json")).unwrap();
    assert!(json.contains("\"block_budget_ms\": 0.001"), "{json}");
    // A budget of a day: every block is under 1% of it.
    ok(pando(&["replay", "t.repr", "--sync", "never", "--report", "loose", "--block-budget", "86400"], d));
    let html = std::fs::read_to_string(d.join("loose/report.html")).unwrap();
    assert!(html.contains("Block time against a 86400 s block budget:"));
    assert!(dots(&html, "#2a9d5c") >= 200, "{html}");
    assert_eq!(dots(&html, "#d1392b"), 0);
    // Not a duration.
    for bad in ["0", "-6", "six", "inf"] {
        let out = pando(&["replay", "t.repr", "--report", "bad", &format!("--block-budget={bad}")], d);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains("--block-budget"), "{bad}: {stderr}");
    }
}

#[test]
fn bad_traces_end_in_precise_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(pando(&["gen", "--preset", "tiny", "-o", "t.repr"], d));
    let bytes = std::fs::read(d.join("t.repr")).unwrap();
    std::fs::write(d.join("cut.repr"), &bytes[..bytes.len() / 2]).unwrap();
    let out = pando(&["replay", "cut.repr", "--report", "r"], d);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("row ") && stderr.contains("at byte"), "{stderr}");
    assert!(!stderr.contains("panicked"));
    // What came before the damage was replayed and reported.
    assert!(String::from_utf8_lossy(&out.stdout).contains("blocks,"));
    let stats = pando(&["trace", "stats", "cut.repr"], d);
    assert!(!stats.status.success());
    assert!(String::from_utf8_lossy(&stats.stdout).contains("rows"));

    // A row that names a context the trace never made: the file and the
    // row's byte.
    let mut bad = bytes.clone();
    bad[40] ^= 0x80;
    std::fs::write(d.join("bad-context.repr"), &bad).unwrap();
    let out = pando(&["replay", "bad-context.repr", "--report", "r2"], d);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("bad-context.repr: the row at byte"), "{stderr}");

    std::fs::write(d.join("junk.repr"), b"not a trace at all").unwrap();
    let out = pando(&["trace", "cat", "junk.repr"], d);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a replayable trace"));
    let out = pando(&["gen", "--preset", "huge"], d);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown preset"));
    let out = pando(&["replay", "missing.repr"], d);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("missing.repr"));
}

#[test]
fn replay_refuses_counts_of_zero() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(pando(&["gen", "--preset", "tiny", "-o", "t.repr"], d));
    for (args, says) in [
        (&["--blocks", "0"][..], "--blocks"),
        (&["--keep-last", "0", "--gc-every", "5"], "--keep-last"),
        (&["--keep-last", "5", "--gc-every", "0"], "--gc-every"),
        (&["--sync", "0"], "above 0"),
    ] {
        let mut all = vec!["replay", "t.repr", "--store", "s", "--report", "r"];
        all.extend_from_slice(args);
        let out = pando(&all, d);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(says) && !stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!d.join("s").exists() && !d.join("r").exists(), "{args:?} wrote nothing");
    }
}
