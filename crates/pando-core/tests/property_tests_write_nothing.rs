//! Property tests never write into the checkout: a property failing under
//! `seeds::config` writes no file (its seed and input are printed), the
//! seeds committed beside the tests are still read, and every `proptest!`
//! block of the workspace is configured so.

#[path = "support/seeds.rs"]
mod seeds;

use proptest::prelude::*;
use proptest::test_runner::{FailurePersistence, TestError, TestRunner};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn a_failing_property_writes_no_file() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Where proptest's default would have saved the seed, beside this file
    // (or in a `proptest-regressions` folder for a source under `src`).
    let beside = crate_dir.join("tests/property_tests_write_nothing.proptest-regressions");
    let parallel = crate_dir.join("proptest-regressions");
    assert!(!beside.exists() && !parallel.exists(), "left by an earlier run");
    let mut config = seeds::config(64);
    config.source_file = Some(file!());
    let mut runner = TestRunner::new(config);
    let result = runner.run(&(0u32..1_000_000), |n| {
        prop_assert!(n < 10);
        Ok(())
    });
    match result {
        Err(TestError::Fail(_, value)) => assert_eq!(value, 10, "shrunk to the smallest failing input"),
        other => panic!("the property fails: {other:?}"),
    }
    assert!(!beside.exists(), "{} written", beside.display());
    assert!(!parallel.exists(), "{} written", parallel.display());
}

#[test]
fn committed_seeds_are_still_read() {
    let load = |source: &'static str| seeds::ReadOnlySeeds.load_persisted_failures2(Some(source)).len();
    let committed = |source: &str| {
        let file = workspace().join(source.replace(".rs", ".proptest-regressions"));
        std::fs::read_to_string(file).unwrap().lines().filter(|line| line.starts_with("cc ")).count()
    };
    for source in ["crates/pando-core/tests/dir.rs", "crates/pando-core/tests/proof.rs", "crates/pando-store/tests/model.rs"] {
        assert!(committed(source) > 0);
        assert_eq!(load(source), committed(source), "{source}'s seeds");
    }
    assert_eq!(load("crates/pando-core/tests/property_tests_write_nothing.rs"), 0);
}

/// The text of every `.rs` file under `dir`, with its path.
fn sources(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if path.is_dir() && name != "target" && !name.starts_with('.') {
            sources(&path, out);
        } else if name.ends_with(".rs") {
            out.push((path.clone(), std::fs::read_to_string(&path).unwrap()));
        }
    }
}

/// A `proptest!` block without a configuration saves failures where
/// proptest's default puts them, in the checkout.
#[test]
fn every_proptest_block_is_configured_not_to_write() {
    let mut files = Vec::new();
    for dir in ["crates", "fuzz"] {
        sources(&workspace().join(dir), &mut files);
    }
    let mut blocks = 0;
    for (path, text) in &files {
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let line = line.trim_start();
            if !(line.starts_with("proptest! {") || line.starts_with("proptest::proptest! {")) {
                continue;
            }
            blocks += 1;
            // The block's first item (comments aside) is its configuration.
            let first = lines[n + 1..].iter().map(|l| l.trim()).find(|l| !l.is_empty() && !l.starts_with("//"));
            let safe = first.is_some_and(|c| {
                c.starts_with("#![proptest_config(") && (c.contains("seeds::config(") || c.contains("failure_persistence: None"))
            });
            assert!(safe, "{}:{}: a proptest! block that would save failures into the checkout", path.display(), n + 1);
        }
    }
    assert!(blocks >= 10, "only {blocks} proptest! blocks found: the search is broken");
}
