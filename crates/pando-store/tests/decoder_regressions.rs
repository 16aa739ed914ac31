//! Inputs the fuzz targets (`fuzz/`, `scripts/fuzz.sh`) found that a
//! decoder of pando-store mishandled, one test each: every one must now
//! be refused with a clear error, never a panic, a loop or an allocation
//! the bytes do not pay for.

use pando_store::tracer::scope_file;

/// A trace file with `body` after `header`, in a directory of its own.
fn trace_file(header: &[u8], body: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recorded.repr");
    std::fs::write(&path, [header, body].concat()).unwrap();
    (dir, path)
}

/// The recording's scoping pass read a file of another trace version (or
/// no trace at all) as its own: it must refuse the header.
#[test]
fn scoping_refuses_a_trace_of_another_version() {
    let mut header = pando_core::trace::file_header();
    header[9] = 1; // version 0x00010000
    let (_dir, path) = trace_file(&header, &[]);
    let error = scope_file(&path).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
    assert!(error.to_string().contains("header"), "{error}");
    let (_dir, path) = trace_file(b"not a trace at all", &[]);
    assert_eq!(scope_file(&path).unwrap_err().kind(), std::io::ErrorKind::InvalidData);
    // The header it writes is still its own.
    let (_dir, path) = trace_file(&pando_core::trace::file_header(), &[]);
    scope_file(&path).unwrap();
}

/// A row whose length says 2^63 bytes: the scoping pass allocated what the
/// length asked before reading (a capacity overflow, or gigabytes); it
/// must end with an error, having allocated no more than the file holds.
#[test]
fn scoping_refuses_a_row_longer_than_the_file() {
    let mut body = Vec::new();
    pando_core::varint::write_u64(&mut body, 1 << 63);
    body.extend_from_slice(b"a few bytes");
    let (_dir, path) = trace_file(&pando_core::trace::file_header(), &body);
    assert_eq!(scope_file(&path).unwrap_err().kind(), std::io::ErrorKind::UnexpectedEof);
    // A length of more than 10 bytes is refused as such.
    let (_dir, path) = trace_file(&pando_core::trace::file_header(), &[0x80; 64]);
    assert_eq!(scope_file(&path).unwrap_err().kind(), std::io::ErrorKind::InvalidData);
}
