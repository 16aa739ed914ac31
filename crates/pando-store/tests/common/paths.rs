//! Proptest strategies for the model tests' paths: steps from a small
//! set, so that paths collide often (removals hit, directories empty
//! out, copies land on existing subtrees), and directories that grow
//! large.

use super::Path;
use proptest::prelude::*;

/// One step: mostly from four names, sometimes a short hex name.
pub fn step() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => prop::sample::select(vec!["a", "b", "index", "00ff"]).prop_map(|s| s.as_bytes().to_vec()),
        1 => "[a-f0-9]{2,4}".prop_map(|s| s.into_bytes()),
    ]
}

/// A path of one to three steps.
pub fn path() -> impl Strategy<Value = Path> {
    prop::collection::vec(step(), 1..4)
}

/// Directories that grow large.
pub fn big_dir() -> impl Strategy<Value = Path> {
    prop::sample::select(vec![vec![], vec![b"a".to_vec()], vec![b"b".to_vec(), b"index".to_vec()]])
}

/// The path of the `i`th entry a fill adds under `dir` (`entry-<i>`).
pub fn fill_path(dir: &Path, i: u32) -> Path {
    let mut p = dir.clone();
    p.push(format!("entry-{i}").into_bytes());
    p
}
