//! All file access of pando goes through [`Storage`] and [`File`].
//!
//! A store lives in one directory of flat file names. Three implementations:
//! - [`FsStorage`]: real files, `pread`/`pwrite`, `fdatasync`, directory fsync;
//! - [`MemStorage`]: in memory, for fast tests;
//! - `FaultyStorage` (feature `test-hooks`, for the crate's own tests):
//!   simulated storage with a durable image and a volatile overlay; it fails,
//!   tears or drops chosen operations and simulates a crash.
//!
//! Invariants:
//! - No module outside `io` touches `std::fs` (tested by
//!   `no_module_outside_io_touches_std_fs`). [`NewFile`] writes the files
//!   that are not a store's (a command's output, a snapshot) whole or not
//!   at all.
//! - `File::sync` returning `Ok` means every write before it is durable;
//!   `Storage::sync_dir` returning `Ok` means every create, rename and remove
//!   before it is durable: each implementation's contract, which the
//!   simulated storage keeps for the crash tests (tested by
//!   `crash_keeps_only_durable_state`).

#[cfg(feature = "test-hooks")]
mod faulty;
pub(crate) mod fs;
mod memory;
mod new_file;

#[cfg(feature = "test-hooks")]
pub use faulty::{CrashMode, FaultKind, FaultPlan, FaultyStorage};
pub use fs::FsStorage;
pub use memory::MemStorage;
pub use new_file::NewFile;

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// One open file. Offsets are absolute; there is no cursor.
#[expect(clippy::len_without_is_empty, reason = "a file's length is a size, not a collection")]
pub trait File: Send + Sync {
    /// Reads exactly `buf.len()` bytes at `offset`; `UnexpectedEof` if the file is shorter.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset`, extending the file if needed.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes every previous write durable (`fdatasync`).
    fn sync(&self) -> io::Result<()>;
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Cuts or extends the file to `len` bytes.
    fn truncate(&self, len: u64) -> io::Result<()>;
}

/// A directory of files.
pub trait Storage: Send + Sync {
    /// Opens `name`, creating it empty if `create` and it does not exist.
    fn open(&self, name: &str, create: bool) -> io::Result<Arc<dyn File>>;
    fn exists(&self, name: &str) -> io::Result<bool>;
    /// Names of the files in the directory, in no particular order.
    fn list(&self) -> io::Result<Vec<String>>;
    fn remove(&self, name: &str) -> io::Result<()>;
    /// Atomically replaces `target` with `source`.
    fn rename(&self, source: &str, target: &str) -> io::Result<()>;
    /// Makes creates, renames and removes durable (fsync of the directory).
    fn sync_dir(&self) -> io::Result<()>;
    /// Takes an exclusive lock named `name` held until the returned guard
    /// is dropped; fails with `WouldBlock` if another process holds it
    /// (on real files, after trying again for a moment).
    fn lock(&self, name: &str) -> io::Result<Box<dyn std::any::Any + Send + Sync>>;
    /// Where the store is, for error messages.
    fn describe(&self) -> String;
    /// The system calls made so far and the time spent in them, for
    /// storages that count them (real files do).
    fn io_times(&self) -> Option<IoTimes> {
        None
    }
}

/// System calls of a storage and the wall time spent in them, since it was
/// opened: what a profile of the store needs to tell waiting on the disk
/// from computing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoTimes {
    pub reads: u64,
    pub read_bytes: u64,
    pub read_ns: u64,
    pub writes: u64,
    pub write_bytes: u64,
    pub write_ns: u64,
    /// `fdatasync` of files and fsync of the directory.
    pub syncs: u64,
    pub sync_ns: u64,
}

/// The counters behind [`IoTimes`], shared by a storage and its files.
#[derive(Debug, Default)]
pub(crate) struct IoCounters {
    counters: [AtomicU64; 8],
}

#[derive(Clone, Copy)]
pub(crate) enum IoKind {
    Read = 0,
    Write = 3,
    Sync = 6,
}

impl IoCounters {
    /// Runs `call` (moving `bytes`) and counts it under `kind`.
    pub(crate) fn time<T>(&self, kind: IoKind, bytes: usize, call: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        let start = Instant::now();
        let result = call();
        let ns = start.elapsed().as_nanos() as u64;
        let base = kind as usize;
        self.counters[base].fetch_add(1, Ordering::Relaxed);
        match kind {
            IoKind::Sync => self.counters[base + 1].fetch_add(ns, Ordering::Relaxed),
            IoKind::Read | IoKind::Write => {
                self.counters[base + 1].fetch_add(bytes as u64, Ordering::Relaxed);
                self.counters[base + 2].fetch_add(ns, Ordering::Relaxed)
            }
        };
        result
    }

    pub(crate) fn snapshot(&self) -> IoTimes {
        let c = |i: usize| self.counters[i].load(Ordering::Relaxed);
        IoTimes {
            reads: c(0),
            read_bytes: c(1),
            read_ns: c(2),
            writes: c(3),
            write_bytes: c(4),
            write_ns: c(5),
            syncs: c(6),
            sync_ns: c(7),
        }
    }
}

/// Reads the whole of a file.
pub fn read_all(file: &dyn File) -> io::Result<Vec<u8>> {
    let len = usize::try_from(file.len()?).map_err(|_| io::Error::other("file too large for memory"))?;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, 0)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    /// Every file access outside `io` goes through a `Storage` or a
    /// `NewFile`: no other source file of the crate names `std::fs`.
    #[test]
    fn no_module_outside_io_touches_std_fs() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let (mut dirs, mut seen, mut found) = (vec![src.clone()], 0, Vec::new());
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    if path != src.join("io") {
                        dirs.push(path);
                    }
                } else if path.extension().is_some_and(|e| e == "rs") {
                    seen += 1;
                    let text = std::fs::read_to_string(&path).unwrap();
                    // The library's code: a file's tests (its last module) may use files.
                    let text = text.split("\n#[cfg(test)]\nmod tests").next().unwrap_or_default();
                    let names_fs = |line: &str| line.contains("std::fs") || (line.contains("use std::{") && line.contains("fs"));
                    found.extend(text.lines().filter(|line| names_fs(line)).map(|line| format!("{}: {line}", path.display())));
                }
            }
        }
        assert!(seen > 20, "the crate's sources were found ({seen} files)");
        assert!(found.is_empty(), "std::fs outside io: {found:#?}");
    }
}
