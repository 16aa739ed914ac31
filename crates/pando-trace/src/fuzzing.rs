//! The readers of trace files (`IrmRepBT`), driven by arbitrary bytes for
//! the fuzz target in `fuzz/` (built with the feature `fuzzing`; the
//! crate's own tests build it too and run it over the committed seeds).
//!
//! [`trace`] reads its input as a whole trace file three ways: with
//! [`TraceReader`] (what `pando replay` and `pando trace` use), with the
//! scoping pass a store's recording ends with
//! ([`pando_store::tracer::scope_file`]), and, without the file's header,
//! as one row for pando-core's row decoder. Bad bytes must give an error,
//! never a panic, a loop or an allocation the bytes do not pay for; every
//! row read encodes back to a row that decodes the same.
//!
//! Boundary: the readers take a path, so the input is written to a file
//! of the system's temporary directory, removed after.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use pando_core::trace::{self, Row};

use crate::file::TraceReader;

/// A file of the temporary directory, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(bytes: &[u8]) -> TempFile {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!("pando-fuzz-{}-{}.repr", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, bytes).expect("a temporary file is written");
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_file(self.0.with_extension("scoping"));
    }
}

/// Checks that `row` encodes to bytes that decode to it.
fn round_trip(row: &Row) {
    let mut out = Vec::new();
    row.encode(&mut out);
    assert_eq!(Row::decode(&out).as_ref(), Ok(row), "a row decodes to what it encodes");
}

/// The rows [`TraceReader`] gives, up to its first error; `None` when the
/// file does not open.
fn read_rows(file: &TempFile, accept_partial_tail: bool) -> Option<(Vec<Row>, bool)> {
    let mut reader = TraceReader::open(&file.0).ok()?;
    reader.accept_partial_tail(accept_partial_tail);
    let mut rows = Vec::new();
    let mut clean = true;
    for row in reader.by_ref() {
        match row {
            Ok(row) => rows.push(row),
            Err(_) => {
                clean = false;
                break;
            }
        }
    }
    // Nothing after an error, or after the end.
    assert!(reader.next().is_none(), "a reader that stopped stays stopped");
    Some((rows, clean))
}

/// A trace file: see the module's comment.
pub fn trace(data: &[u8]) {
    if let Ok(row) = Row::decode(data) {
        round_trip(&row);
    }
    let file = TempFile::new(data);
    let Some((strict, strict_clean)) = read_rows(&file, false) else {
        assert!(pando_store::tracer::scope_file(&file.0).is_err(), "a file the reader refuses is not scoped");
        return;
    };
    let (lenient, lenient_clean) = read_rows(&file, true).expect("a file that opened opens again");
    // A partial tail is refused only after its rows were given.
    assert_eq!(strict, lenient);
    assert!(lenient_clean || !strict_clean);
    // Each row takes a byte at least: the reader cannot have invented rows.
    assert!((strict.len() as u64) < data.len() as u64);
    for row in &strict {
        round_trip(row);
    }
    // A file of whole rows is written again, scoped, with as many rows.
    if pando_store::tracer::scope_file(&file.0).is_ok() {
        assert!(lenient_clean, "the scoping pass reads only files the reader reads whole");
        let (scoped, _) = read_rows(&file, true).expect("a scoped trace opens");
        assert_eq!(scoped.len(), strict.len());
        let mut header = trace::file_header();
        header.truncate(12);
        assert!(std::fs::read(&file.0).expect("the scoped file").starts_with(&header));
    }
}

#[cfg(test)]
mod tests {
    /// Every seed of `fuzz/corpus/trace/` (real traces, and the inputs of
    /// past findings) through [`super::trace`].
    #[test]
    fn the_fuzz_seeds_decode_without_a_panic() {
        pando_vectors::each_fuzz_seed("trace", super::trace);
    }
}
