//! All file access of pando goes through [`Storage`] and [`File`].
//!
//! A store lives in one directory of flat file names. Three implementations:
//! - [`FsStorage`]: real files, `pread`/`pwrite`, `fdatasync`, directory fsync;
//! - [`MemStorage`]: in memory, for fast tests;
//! - [`FaultyStorage`]: simulated storage with a durable image and a volatile
//!   overlay; it fails, tears or drops chosen operations and simulates a crash.
//!
//! Invariants:
//! - No module outside `io` touches `std::fs`.
//! - `File::sync` returning `Ok` means every write before it is durable;
//!   `Storage::sync_dir` returning `Ok` means every create, rename and remove
//!   before it is durable.

mod faulty;
pub(crate) mod fs;
mod memory;

pub use faulty::{CrashMode, FaultKind, FaultPlan, FaultyStorage};
pub use fs::FsStorage;
pub use memory::MemStorage;

use std::io;
use std::sync::Arc;

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
    /// is dropped; fails with `WouldBlock` if another process holds it.
    fn lock(&self, name: &str) -> io::Result<Box<dyn std::any::Any + Send + Sync>>;
    /// Where the store is, for error messages.
    fn describe(&self) -> String;
}

/// Reads the whole of a file.
pub fn read_all(file: &dyn File) -> io::Result<Vec<u8>> {
    let len = usize::try_from(file.len()?).map_err(|_| io::Error::other("file too large for memory"))?;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, 0)?;
    Ok(buf)
}
