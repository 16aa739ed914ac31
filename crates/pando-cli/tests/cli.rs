//! The `pando` command on a store made through the library: every command,
//! and clean errors (non-zero exit, a message, no panic) on bad input.

use pando_store::{CommitMeta, Options, Store};

mod common;

use common::{failure, run as pando, stdout};

/// A store at `path` with two commits: 300 balances, then one changed.
fn two_blocks(path: &std::path::Path) -> (pando_core::Hash, pando_core::Hash) {
    let store = Store::open(path, Options::default()).unwrap();
    let mut tree = store.empty_tree();
    for i in 0..300 {
        tree.add_mut(&["contracts", "index", &format!("{i:04}"), "balance"], format!("{i}").as_bytes()).unwrap();
    }
    let first = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "block 1" }).unwrap();
    let tree = tree.add(&["contracts", "index", "0007", "balance"], b"changed").unwrap();
    let second = store.commit(&tree, CommitMeta { parents: &[first], date: 2, author: "Tezos", message: "block 2" }).unwrap();
    (first, second)
}

#[test]
fn commands_on_a_small_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let p = path.to_str().unwrap();
    assert!(stdout(&pando(&["init", p])).contains("created"));
    assert!(stdout(&pando(&["info", "--store", p])).contains("commits:      0"));

    let (first, second) = {
        let store = Store::open(&path, Options::default()).unwrap();
        let tree = store.empty_tree().add(&["contracts", "global_counter"], b"42").unwrap();
        let first =
            store.commit(&tree, CommitMeta { parents: &[], date: 1_600_000_001, author: "Tezos", message: "block 1" }).unwrap();
        let tree = tree.add(&["contracts", "index", "00ab", "balance"], &[0, 1, 2]).unwrap();
        let second = store
            .commit(&tree, CommitMeta { parents: &[first], date: 1_600_000_002, author: "Tezos", message: "block 2" })
            .unwrap();
        store.set_branch("main", &second).unwrap();
        (first, second)
    };

    let info = stdout(&pando(&["info", "-s", p]));
    assert!(info.contains("commits:      2"), "{info}");
    assert!(info.contains(&second.to_base58()));
    assert!(info.contains("main"));

    assert_eq!(stdout(&pando(&["get", "contracts/global_counter", "-s", p])), "42\n");
    assert_eq!(stdout(&pando(&["get", "contracts/index/00ab/balance", "-s", p])), "0x000102\n");
    assert_eq!(stdout(&pando(&["get", "contracts/global_counter", "--hex", "-s", p])), "3432\n");
    let at_first = pando(&["get", "contracts/index/00ab/balance", "-s", p, "--commit", &first.to_base58()]);
    assert!(failure(&at_first).contains("nothing at"));

    let ls = stdout(&pando(&["ls", "contracts", "-s", p, "-c", "main"]));
    assert_eq!(ls, "file global_counter\ndir  index\n");
    assert!(stdout(&pando(&["ls", "-s", p, "--hashes"])).contains("dir  Co"));

    let log = stdout(&pando(&["log", "-s", p]));
    let second_at = log.find(&second.to_base58()).unwrap();
    let first_at = log.find(&first.to_base58()).unwrap();
    assert!(second_at < first_at, "newest first");
    assert_eq!(stdout(&pando(&["log", "-s", p, "-n", "1"])).matches("commit ").count(), 1);
}

#[test]
fn clean_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_str().unwrap();
    assert!(failure(&pando(&["info", "-s", "/nonexistent/pando"])).contains("/nonexistent/pando: no such directory"));
    assert!(failure(&pando(&["info", "-s", p])).contains("not a pando store"));
    assert!(stdout(&pando(&["init", p])).contains("created"));
    assert!(failure(&pando(&["get", "a", "-s", p])).contains("no commits"));
    assert!(failure(&pando(&["log", "-s", p, "-c", "CoNotAHash"])).contains("neither a branch nor a commit"));
    // A directory with other files is not taken over.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("notes.txt"), "mine").unwrap();
    assert!(failure(&pando(&["init", other.path().to_str().unwrap()])).contains("not a pando store"));
    assert!(stdout(&pando(&["--help"])).contains("init"));
}

#[test]
fn gc_keeps_the_last_levels() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let p = path.to_str().unwrap();
    let commits = {
        let options = Options { chunk_target_bytes: 4096, ..Options::default() };
        let store = Store::open(&path, options).unwrap();
        let mut tree = store.empty_tree();
        let mut commits = Vec::new();
        for block in 0..40u32 {
            for i in 0..20u32 {
                tree.add_mut(&["contracts", &format!("{:03}", (block * 3 + i) % 97), "balance"], &block.to_be_bytes()).unwrap();
            }
            let parents: Vec<_> = commits.last().copied().into_iter().collect();
            let hash = store
                .commit(
                    &tree,
                    CommitMeta { parents: &parents, date: i64::from(block), author: "Tezos", message: &format!("block {block}") },
                )
                .unwrap();
            commits.push(hash);
        }
        commits
    };
    // Nothing older than the window: nothing to reclaim, and why.
    let out = stdout(&pando(&["gc", "-s", p, "--keep-last", "40"]));
    assert!(out.contains("reclaimed:     nothing: the history has no more than 40 levels (--keep-last)"), "{out}");
    let output = pando(&["gc", "-s", p, "--keep-last", "10"]);
    let out = stdout(&output);
    assert!(out.contains("collected:     30 commits") && !out.contains("reclaimed:"), "{out}");
    // Its progress, on a standard error that is no terminal, in words.
    let progress = String::from_utf8(output.stderr).unwrap();
    // (Sampled every 100 ms: a quick phase may pass unseen, not all of them.)
    let phases = ["scanning the kept records", "tracing the older records", "scanning the records written meanwhile"];
    assert!(phases.iter().any(|phase| progress.contains(phase)), "{progress}");
    assert!(!["Scanning", "Tracing", "CatchingUp", "Relocating"].iter().any(|name| progress.contains(name)), "{progress}");
    assert!(out.contains(&commits[30].to_base58()), "{out}");
    // The kept history reads; the log ends where history was collected.
    assert_eq!(stdout(&pando(&["get", "contracts/000/balance", "-s", p])).len(), 11, "0x and 4 bytes in hexadecimal");
    let log = stdout(&pando(&["log", "-s", p, "-n", "50"]));
    assert_eq!(log.matches("commit ").count(), 10, "{log}");
    assert!(log.contains("garbage-collected"));
    let old = pando(&["get", "contracts/000/balance", "-s", p, "-c", &commits[3].to_base58()]);
    assert!(failure(&old).contains("garbage-collected"));
    assert!(failure(&pando(&["gc", "-s", p, "--keep-last", "0"])).contains("at least 1"));
    let out = stdout(&pando(&["gc", "-s", p, "--keep-last", "10"]));
    assert!(out.contains("reclaimed:     nothing: the commits older than the window were collected before"), "{out}");
    let info = stdout(&pando(&["info", "-s", p]));
    assert!(info.contains("collected:    generation ") && info.contains(", 30 commits collected"), "{info}");
    // Stats scan the runs below the first chunk.
    let stats = stdout(&pando(&["stats", "-s", p, "--sample-mb", "1"]));
    assert!(stats.contains("commits:     10 in the index") && !stats.contains(" 0 bytes in 0 run(s)"), "{stats}");
    // Archive mode: nothing more is collected, old data goes to cold files.
    let out = stdout(&pando(&["gc", "-s", p, "--keep-last", "3", "--archive"]));
    assert!(out.contains("collected:     0 commits"), "{out}");
    assert_eq!(stdout(&pando(&["log", "-s", p, "-n", "50"])).matches("commit ").count(), 10);
    let stats = stdout(&pando(&["stats", "-s", p, "--sample-mb", "1"]));
    assert!(stats.contains("cold:        "), "{stats}");
}

#[test]
fn prove_and_verify_proof() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let p = path.to_str().unwrap();
    let (first, second) = two_blocks(&path);
    let proof = dir.path().join("proof.bin");
    let out = proof.to_str().unwrap();
    let written = stdout(&pando(&[
        "prove",
        "-s",
        p,
        "--commit",
        &first.to_base58(),
        "-o",
        out,
        "contracts/index/0007/balance",
        "contracts/index/9999/balance",
    ]));
    assert!(written.contains("2 paths"), "{written}");
    // Written through a temporary file beside it, renamed once whole.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(!left.iter().any(|name| name.to_string_lossy().ends_with(".partial")), "{left:?}");
    assert!(failure(&pando(&["prove", "-s", p, "-o", dir.path().to_str().unwrap(), "a"])).contains("is a directory"));
    let list = dir.path().join("paths");
    std::fs::write(&list, b"contracts/index/0007/balance\n\xff\xfe\n").unwrap();
    let err = failure(&pando(&["prove", "-s", p, "-o", out, "--paths-from", list.to_str().unwrap()]));
    assert!(err.contains("line 2 is not UTF-8"), "{err}");
    let verified = stdout(&pando(&["verify-proof", out, "--root", &first.to_base58()]));
    assert!(verified.contains("contracts/index/0007/balance = \"7\""), "{verified}");
    assert!(verified.contains("contracts/index/9999/balance: absent"), "{verified}");

    // Against another commit, or with a flipped byte, or truncated: refused.
    assert!(failure(&pando(&["verify-proof", out, "--root", &second.to_base58()])).contains("not for"));
    let mut bytes = std::fs::read(&proof).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 0x10;
    std::fs::write(&proof, &bytes).unwrap();
    assert!(failure(&pando(&["verify-proof", out, "--root", &first.to_base58()])).contains("proof"));
    std::fs::write(&proof, &bytes[..bytes.len() / 2]).unwrap();
    assert!(failure(&pando(&["verify-proof", out, "--root", &first.to_base58()])).contains("truncated"));
    assert!(failure(&pando(&["verify-proof", out, "--root", "nonsense"])).contains("not a hash"));
}

#[test]
fn snapshot_export_and_import() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let (_, commit) = two_blocks(&path);
    let file = dir.path().join("head.snapshot");
    let (p, f) = (path.to_str().unwrap(), file.to_str().unwrap());
    let exported = stdout(&pando(&["snapshot", "export", f, "-s", p]));
    assert!(exported.contains(&commit.to_base58()) && exported.contains("300 contents"), "{exported}");
    let target = dir.path().join("imported");
    let t = target.to_str().unwrap();
    let imported = stdout(&pando(&["snapshot", "import", f, t]));
    assert!(imported.contains(&commit.to_base58()), "{imported}");
    assert_eq!(stdout(&pando(&["get", "-s", t, "contracts/index/0007/balance"])).trim(), "changed");
    let log = stdout(&pando(&["log", "-s", t]));
    assert!(log.contains("block 2") && log.contains("imported from a snapshot"), "{log}");

    // Into a store that is not empty: refused, nothing touched.
    assert!(failure(&pando(&["snapshot", "import", f, t])).contains("not empty"));
    // Damaged or truncated: refused with the byte, and no store left behind.
    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x04;
    std::fs::write(&file, &bytes).unwrap();
    let other = dir.path().join("other");
    let error = failure(&pando(&["snapshot", "import", f, other.to_str().unwrap()]));
    assert!(error.contains("bad snapshot: file byte 8") && error.contains("checksum"), "{error}");
    assert!(!other.exists());
    std::fs::write(&file, &bytes[..middle]).unwrap();
    assert!(failure(&pando(&["snapshot", "import", f, other.to_str().unwrap()])).contains("truncated"));
    assert!(!other.exists());
}

#[test]
fn stats_of_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let p = path.to_str().unwrap();
    assert!(stdout(&pando(&["init", p])).contains("created"));
    let empty = stdout(&pando(&["stats", "-s", p]));
    assert!(empty.contains("commits:     0 in the index") && empty.contains("tree:        no commit"), "{empty}");

    let (first, second) = {
        let store = Store::open(&path, Options::default()).unwrap();
        let mut tree = store.empty_tree();
        for i in 0..40 {
            tree.add_mut(&["contracts", "index", &format!("{i:04}"), "balance"], format!("{i}").as_bytes()).unwrap();
        }
        tree.add_mut(&["code"], &[7; 100]).unwrap();
        let first = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "block 1" }).unwrap();
        let tree = tree.add(&["contracts", "global_counter"], b"42").unwrap();
        let second = store.commit(&tree, CommitMeta { parents: &[first], date: 2, author: "Tezos", message: "block 2" }).unwrap();
        store.set_branch("main", &first).unwrap();
        (first, second)
    };

    let text = stdout(&pando(&["stats", "-s", p]));
    for line in [
        "commits:     2 in the index, 2 commit records in the pack",
        "records by kind:",
        "  tree inode ",
        "contents in the pack (every stored copy): ",
        "batches (bytes from a commit record's end to the next one's, in the chunks): 2",
        "steps stored as",
        &format!("tree of commit {second}:"),
        "  43 directories, 42 contents (1 in blobs), max depth 4",
        "  largest directory: /contracts/index (40 entries)",
        "compressibility, sampled: zstd level 3",
        "  chunks          1 ",
    ] {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }

    // JSON, of the branch's commit, without samples.
    let json = stdout(&pando(&["stats", "-s", p, "--json", "-c", "main", "--sample-mb", "0"]));
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["commits"], 2);
    assert_eq!(json["records"]["commit"]["records"], 2);
    assert_eq!(json["records"]["blob"]["records"], 1);
    assert_eq!(json["tree"]["commit"], first.to_base58());
    assert_eq!(json["tree"]["directories"], 43);
    assert_eq!(json["tree"]["largest_directory"]["entries"], 40);
    assert_eq!(json["batches"]["sizes"]["count"], 2);
    assert_eq!(json["compressibility"]["sampled"], true);
    let files = json["compressibility"]["files"].as_array().unwrap();
    assert!(files.iter().all(|f| f["sampled_bytes"] == 0), "{files:?}");
    assert!(failure(&pando(&["stats", "-s", p, "-c", "nope"])).contains("neither a branch nor a commit"));

    // A damaged record: an error naming the chunk and the offset.
    let chunk = path.join("chunk-0000000000000000.pack");
    let mut bytes = std::fs::read(&chunk).unwrap();
    bytes[10] ^= 0x01;
    std::fs::write(&chunk, &bytes).unwrap();
    let damaged = failure(&pando(&["stats", "-s", p]));
    assert!(damaged.contains("chunk-0000000000000000.pack at offset"), "{damaged}");
}

#[test]
fn check_finds_damage_and_names_where() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let p = path.to_str().unwrap();
    let (first, _) = two_blocks(&path);
    let last = stdout(&pando(&["check", "-s", p]));
    assert!(last.contains("reachable from 1 commit(s)") && last.contains("no problems found"), "{last}");
    let all = stdout(&pando(&["check", "--all", "-s", p]));
    assert!(all.contains("scanned:") && all.contains("reachable from 2 commit(s)") && all.contains("no problems found"), "{all}");
    assert!(stdout(&pando(&["check", "-s", p, "-c", &first.to_base58()])).contains("no problems found"));

    // A flipped byte in the first record: named by file and position, exit status 1.
    let chunk = path.join("chunk-0000000000000000.pack");
    let mut bytes = std::fs::read(&chunk).unwrap();
    bytes[3] ^= 0x01;
    std::fs::write(&chunk, &bytes).unwrap();
    let damaged = pando(&["check", "--all", "-s", p]);
    assert!(!damaged.status.success());
    let out = String::from_utf8(damaged.stdout).unwrap();
    assert!(out.contains("chunk-0000000000000000.pack:0 (offset 0): checksum mismatch"), "{out}");
    assert!(!String::from_utf8(damaged.stderr).unwrap().contains("panicked"));
    bytes[3] ^= 0x01;
    std::fs::write(&chunk, &bytes).unwrap();

    // Damage that opening finds is reported the same way.
    let index = path.join("index");
    let mut entries = std::fs::read(&index).unwrap();
    entries[44 + 40] ^= 0x80;
    std::fs::write(&index, &entries).unwrap();
    let damaged = pando(&["check", "-s", p]);
    assert!(!damaged.status.success());
    let out = String::from_utf8(damaged.stdout).unwrap();
    assert!(out.contains("index:44: index entry checksum mismatch"), "{out}");
    assert!(failure(&pando(&["check", "-s", "/nonexistent/pando"])).contains("/nonexistent/pando: no such directory"));
}

#[test]
fn each_store_option_names_pando_store_and_its_default_once() {
    let commands: [&[&str]; 10] = [
        &["info"],
        &["stats"],
        &["get"],
        &["ls"],
        &["log"],
        &["check"],
        &["gc"],
        &["prove"],
        &["snapshot", "export"],
        &["replay"],
    ];
    for command in commands {
        for help in ["-h", "--help"] {
            let text = stdout(&pando(&[command, &[help]].concat()));
            assert_eq!(text.matches("PANDO_STORE").count(), 1, "{command:?} {help}: {text}");
            // The option's text runs to the next option.
            let start = text.find("-s, --store").unwrap();
            let rest = &text[start + 2..];
            let end = ["\n  -", "\n      --"].iter().filter_map(|next| rest.find(next)).min().unwrap_or(rest.len());
            let option = &rest[..end];
            let default = if command == ["replay"] { "a temporary one" } else { "[default: .]" };
            assert_eq!(option.matches(default).count(), 1, "{command:?} {help}: {option}");
            assert_eq!(option.matches("default").count(), usize::from(command != ["replay"]), "{command:?} {help}: {option}");
        }
    }
}
