//! Real files in a directory: positional reads and writes, `fdatasync`, and
//! fsync of the directory after creates, renames and removes. A store's
//! directory is made only when asked (`for_store`), and what was made for
//! a creation that failed is removed again (`remove_made`).

use super::{File, IoCounters, IoKind, IoTimes, Storage};
use std::fs;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long a held lock is tried again before it is reported held. A
/// lock its owner has just released can still be held for an instant by
/// a child the owner's process is starting: between the child's fork and
/// its exec, the lock file's descriptor (close-on-exec) is in the child
/// too, and a `flock` belongs to every copy. A process that closes its
/// store and opens it again, or starts `pando` on it, while another of
/// its threads starts any program, would otherwise be refused (seen once
/// in CI, in `gc_keeps_the_last_levels`, on a loaded machine).
const LOCK_PATIENCE: Duration = Duration::from_millis(250);
const LOCK_RETRY: Duration = Duration::from_millis(10);

/// A store directory on a real file system.
pub struct FsStorage {
    dir: PathBuf,
    counters: Arc<IoCounters>,
    /// Opens every file for reading only, and creates none.
    read_only: bool,
}

impl FsStorage {
    /// Uses `dir`, creating it (and its parents) if `create`.
    pub fn new(dir: impl Into<PathBuf>, create: bool) -> io::Result<FsStorage> {
        let dir = dir.into();
        if create {
            fs::create_dir_all(&dir)?;
        }
        if !fs::metadata(&dir)?.is_dir() {
            return Err(io::Error::new(io::ErrorKind::NotADirectory, "it is a file, not a directory"));
        }
        Ok(FsStorage { dir, counters: Arc::default(), read_only: false })
    }

    /// Uses the store directory `dir`. If it is absent and `create`, makes
    /// it and any missing parent, and also returns the topmost directory
    /// made, for [`FsStorage::remove_made`] to remove again should the
    /// store's creation fail.
    pub(crate) fn for_store(dir: &Path, create: bool) -> Result<(FsStorage, Option<PathBuf>), StoreDirError> {
        let storage = || FsStorage { dir: dir.to_path_buf(), counters: Arc::default(), read_only: false };
        match fs::metadata(dir) {
            Ok(metadata) if metadata.is_dir() => Ok((storage(), None)),
            Ok(_) => Err(StoreDirError::File),
            Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                let top = dir.ancestors().take_while(|d| !d.as_os_str().is_empty() && !d.exists()).last().map(Path::to_path_buf);
                fs::create_dir_all(dir).map_err(StoreDirError::Io)?;
                Ok((storage(), top))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(StoreDirError::Missing),
            Err(e) => Err(StoreDirError::Io(e)),
        }
    }

    /// Removes the directories [`FsStorage::for_store`] made, from the
    /// store's up to `top`, each only if empty (best effort: what it
    /// cannot remove stays).
    pub(crate) fn remove_made(&self, top: &Path) {
        // Else the loop would climb past it, removing every empty parent.
        assert!(self.dir.starts_with(top), "only the store's directory and the parents made for it are removed");
        for dir in self.dir.ancestors() {
            if fs::remove_dir(dir).is_err() || dir == top {
                break;
            }
        }
    }

    /// Uses the existing directory `dir` for reading only (another
    /// program's files): every file is opened read-only, and creating,
    /// removing, renaming, locking or syncing is refused.
    pub fn read_only(dir: impl Into<PathBuf>) -> io::Result<FsStorage> {
        Ok(FsStorage { read_only: true, ..FsStorage::new(dir, false)? })
    }

    /// Refuses what would change a read-only directory.
    fn writable(&self) -> io::Result<()> {
        if self.read_only {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, "a read-only directory: nothing is changed"));
        }
        Ok(())
    }

    fn path(&self, name: &str) -> PathBuf {
        assert!(!name.contains('/') && !name.is_empty(), "store file names are flat");
        self.dir.join(name)
    }
}

/// Why a store's directory cannot be used.
#[derive(Debug)]
pub(crate) enum StoreDirError {
    /// Absent, and not to be created.
    Missing,
    /// The path names a file.
    File,
    Io(io::Error),
}

struct FsFile(fs::File, Arc<IoCounters>);

impl File for FsFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.1.time(IoKind::Read, buf.len(), || self.0.read_exact_at(buf, offset))
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.1.time(IoKind::Write, buf.len(), || self.0.write_all_at(buf, offset))
    }
    fn sync(&self) -> io::Result<()> {
        self.1.time(IoKind::Sync, 0, || self.0.sync_data())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    fn truncate(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
}

impl Storage for FsStorage {
    fn open(&self, name: &str, create: bool) -> io::Result<Arc<dyn File>> {
        if self.read_only {
            if create {
                self.writable()?;
            }
            let file = fs::OpenOptions::new().read(true).open(self.path(name))?;
            return Ok(Arc::new(FsFile(file, self.counters.clone())));
        }
        let file = fs::OpenOptions::new().read(true).write(true).create(create).open(self.path(name));
        let file = match file {
            // A read-only store directory can still be read.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied && !create => {
                fs::OpenOptions::new().read(true).open(self.path(name))?
            }
            other => other?,
        };
        Ok(Arc::new(FsFile(file, self.counters.clone())))
    }
    fn exists(&self, name: &str) -> io::Result<bool> {
        self.path(name).try_exists()
    }
    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_string());
            }
        }
        Ok(names)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.writable()?;
        fs::remove_file(self.path(name))
    }
    fn rename(&self, source: &str, target: &str) -> io::Result<()> {
        self.writable()?;
        fs::rename(self.path(source), self.path(target))
    }
    fn sync_dir(&self) -> io::Result<()> {
        self.writable()?;
        self.counters.time(IoKind::Sync, 0, || fs::File::open(&self.dir)?.sync_all())
    }
    fn lock(&self, name: &str) -> io::Result<Box<dyn std::any::Any + Send + Sync>> {
        self.writable()?;
        let file = fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(self.path(name))?;
        let mut waited = Duration::ZERO;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Box::new(file)),
                Err(fs::TryLockError::WouldBlock) if waited < LOCK_PATIENCE => {
                    std::thread::sleep(LOCK_RETRY);
                    waited += LOCK_RETRY;
                }
                Err(fs::TryLockError::WouldBlock) => {
                    return Err(io::Error::new(io::ErrorKind::WouldBlock, "another process has this store open for writing"));
                }
                Err(fs::TryLockError::Error(e)) => return Err(e),
            }
        }
    }
    fn describe(&self) -> String {
        self.dir.display().to_string()
    }
    fn io_times(&self) -> Option<IoTimes> {
        Some(self.counters.snapshot())
    }
}

/// Creates (or truncates) a file outside a store, such as a recorded trace.
pub fn create_file(path: &std::path::Path) -> io::Result<Box<dyn std::io::Write + Send>> {
    Ok(Box::new(fs::File::create(path)?))
}

/// Opens a file outside a store for reading.
pub fn open_file(path: &std::path::Path) -> io::Result<fs::File> {
    fs::File::open(path)
}

/// Syncs `source` and renames it over `target`, then syncs the directory.
pub fn replace_file(source: &std::path::Path, target: &std::path::Path) -> io::Result<()> {
    fs::File::open(source)?.sync_all()?;
    fs::rename(source, target)?;
    if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_calls_bytes_and_time() {
        let dir = tempfile::tempdir().unwrap();
        let storage = FsStorage::new(dir.path(), false).unwrap();
        assert_eq!(storage.io_times(), Some(IoTimes::default()));
        let file = storage.open("f", true).unwrap();
        file.write_all_at(b"hello world", 0).unwrap();
        file.sync().unwrap();
        storage.sync_dir().unwrap();
        let mut buf = [0u8; 5];
        file.read_exact_at(&mut buf, 6).unwrap();
        // A failed read is counted too: its time was spent.
        assert!(file.read_exact_at(&mut buf, 100).is_err());
        let t = storage.io_times().unwrap();
        assert_eq!((t.writes, t.write_bytes, t.syncs, t.reads, t.read_bytes), (1, 11, 2, 2, 10));
        assert!(t.sync_ns > 0 && t.write_ns > 0 && t.read_ns > 0);
    }

    #[test]
    fn a_lock_released_meanwhile_is_taken_and_a_held_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let storage = FsStorage::new(dir.path(), false).unwrap();
        let held = storage.lock("lock").unwrap();
        let start = std::time::Instant::now();
        let refused = storage.lock("lock").unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::WouldBlock);
        assert!(start.elapsed() >= LOCK_PATIENCE, "tried again before it was reported");
        // Released while the next one waits, as by a child's exec.
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(LOCK_PATIENCE / 4);
            drop(held);
        });
        let taken = storage.lock("lock");
        releaser.join().unwrap();
        assert!(taken.is_ok(), "{:?}", taken.err());
    }

    #[test]
    fn a_read_only_directory_is_read_and_never_changed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"bytes").unwrap();
        let storage = FsStorage::read_only(dir.path()).unwrap();
        let file = storage.open("f", false).unwrap();
        let mut buf = [0u8; 5];
        file.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"bytes");
        assert!(file.write_all_at(b"x", 0).is_err(), "opened for reading only");
        assert!(storage.open("g", true).is_err());
        assert!(storage.remove("f").is_err());
        assert!(storage.rename("f", "g").is_err());
        assert!(storage.lock("lock").is_err());
        assert!(storage.sync_dir().is_err());
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["f"]);
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"bytes");
    }
}
