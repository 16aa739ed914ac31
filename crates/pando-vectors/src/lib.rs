//! The test vectors every test of the workspace reads: real Tezos hashes,
//! a trace and irmin-pack stores written by irmin 3.7.2, kept compressed in
//! the repository's `tests/vectors/` (see its README for where each came
//! from) and decompressed once by this crate's build script.
//!
//! Invariants: [`dir`] holds exactly the files of `tests/vectors/SHA256SUMS`,
//! bytes checked against it at build time, each read-only: a test that
//! needs to change one copies it first. [`path`] refuses a name that is not
//! a vector, and a vector missing or of the wrong length (say, changed by a
//! test), with a panic naming it: this crate is for tests only, where a
//! panic is the failure.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

include!(concat!(env!("OUT_DIR"), "/manifest.rs"));

/// The directory of the decompressed vectors (read-only files).
pub fn dir() -> &'static Path {
    Path::new(concat!(env!("OUT_DIR"), "/vectors"))
}

/// The path of vector `name`, a file (`"tezos-nodes.json"`) or a directory
/// (`"irmin-stores/a-gc"`) relative to [`dir`], `/`-separated.
///
/// # Panics
/// If `name` is not a vector file or directory, or if a vector file is
/// missing or does not have its length (the message names it).
pub fn path(name: &str) -> PathBuf {
    check_once();
    let is_file = FILES.iter().any(|(file, _)| *file == name);
    let is_dir = FILES.iter().any(|(file, _)| file.strip_prefix(name).is_some_and(|rest| rest.starts_with('/')));
    assert!(is_file || is_dir, "{name:?} is not a test vector (tests/vectors/SHA256SUMS lists them)");
    dir().join(name)
}

/// Runs `f` on every seed of the fuzz target `target`: the files of the
/// repository's `fuzz/corpus/<target>/` (real files, and the inputs of
/// past findings), so that the targets' checks run with the tests.
///
/// # Panics
/// If that directory cannot be read or holds no seed.
pub fn each_fuzz_seed(target: &str, f: impl Fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display())).path();
        f(&std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
        seen += 1;
    }
    assert!(seen > 0, "{} holds no seed", dir.display());
}

/// Checks, once per process, that every vector is there with its length.
fn check_once() {
    static CHECKED: OnceLock<()> = OnceLock::new();
    CHECKED.get_or_init(|| {
        for (name, length) in FILES {
            let path = dir().join(name);
            match std::fs::metadata(&path) {
                Ok(meta) if meta.is_file() && meta.len() == *length => {}
                Ok(meta) => panic!(
                    "test vector {name} was changed: {} has {} bytes, not {length} (rebuild pando-vectors: `cargo clean -p pando-vectors`)",
                    path.display(),
                    meta.len()
                ),
                Err(e) => panic!("test vector {name} is missing: {}: {e} (rebuild pando-vectors: `cargo clean -p pando-vectors`)", path.display()),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_vector_is_there_and_read_only() {
        assert!(FILES.len() >= 20, "{} vector files", FILES.len());
        for (name, length) in FILES {
            let meta = std::fs::metadata(path(name)).unwrap();
            assert_eq!(meta.len(), *length, "{name}");
            assert!(meta.permissions().readonly(), "{name} is read-only");
        }
        assert!(path("irmin-stores/a-gc").is_dir());
        assert!(path("irmin-stores").is_dir());
    }

    #[test]
    #[should_panic(expected = "\"tezos-nodes\" is not a test vector")]
    fn an_unknown_name_is_refused() {
        path("tezos-nodes");
    }

    #[test]
    #[should_panic(expected = "\"irmin-stores/a-g\" is not a test vector")]
    fn a_partial_directory_name_is_refused() {
        path("irmin-stores/a-g");
    }
}
