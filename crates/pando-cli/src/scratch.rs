//! Scratch directories (a replay's generated trace and temporary store, a
//! generator's scratch store) that a killed command cannot leave behind
//! for good: the next command of the same kind removes them.
//!
//! Invariants:
//! - A scratch directory holds a file `owner`, locked (`flock`) by the
//!   process that made it for as long as it lives, and holding that
//!   process's id once locked. The kernel drops the lock when the process
//!   ends, however it ends (SIGKILL included).
//! - `sweep` removes a directory of its prefix only when it can take that
//!   lock and the file holds an id, so never one whose owner lives, nor
//!   one whose owner is between creating the file and locking it (the
//!   file is still empty then). A directory with no `owner` file (made by
//!   an older pando, or by one killed before it wrote the file) is
//!   removed only if it is empty and a minute old, and one whose `owner`
//!   file stayed empty for a minute (its owner was killed right after
//!   creating it) as one whose owner ended.
//! - Sweeping is best effort: what cannot be read or removed is left, and
//!   never fails the command.

use anyhow::Context as _;
use std::fs::File;
use std::io::{Read as _, Write as _};
use std::path::Path;
use std::time::Duration;

/// The file whose lock says that a scratch directory's owner lives.
const OWNER: &str = "owner";

/// An ownerless empty directory this old is a leftover, not one being made.
const OWNERLESS_AFTER: Duration = Duration::from_secs(60);

/// A scratch directory, removed when dropped (or by a later `sweep`).
pub struct Scratch {
    dir: tempfile::TempDir,
    /// Locked while this process lives.
    _owner: File,
}

impl Scratch {
    /// A new directory named `prefix` and random characters, in `parent`.
    pub fn new_in(parent: &Path, prefix: &str) -> anyhow::Result<Scratch> {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(parent)
            .with_context(|| format!("cannot create a scratch directory in {}", parent.display()))?;
        let path = dir.path().join(OWNER);
        let mut owner = File::create_new(&path).with_context(|| format!("cannot create {}", path.display()))?;
        // Blocking: a sweep that took the empty file's lock lets it go at once.
        owner.lock().with_context(|| format!("cannot lock {}", path.display()))?;
        write!(owner, "{}", std::process::id()).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(Scratch { dir, _owner: owner })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes the directories named `prefix...` in `parent` whose owner has
/// ended; returns how many.
pub fn sweep(parent: &Path, prefix: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(parent) else { return 0 };
    entries
        .flatten()
        .filter(|entry| entry.file_name().to_str().is_some_and(|name| name.starts_with(prefix)))
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .filter(|entry| remove_if_left(&entry.path()))
        .count()
}

/// Removes the scratch directory `dir` if its owner has ended.
fn remove_if_left(dir: &Path) -> bool {
    match File::open(dir.join(OWNER)) {
        Ok(mut owner) => {
            if owner.try_lock().is_err() {
                return false;
            }
            let mut id = String::new();
            // Empty: its owner is between creating the file and locking it,
            // unless that was long ago (it was killed right there).
            if owner.read_to_string(&mut id).is_err() || (id.is_empty() && !old(&dir.join(OWNER))) {
                return false;
            }
            std::fs::remove_dir_all(dir).is_ok()
        }
        // `remove_dir` removes only an empty directory.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => old(dir) && std::fs::remove_dir(dir).is_ok(),
        Err(_) => false,
    }
}

/// True if `path` was last changed `OWNERLESS_AFTER` ago or more.
fn old(path: &Path) -> bool {
    std::fs::metadata(path).and_then(|m| m.modified()).is_ok_and(|at| at.elapsed().is_ok_and(|age| age >= OWNERLESS_AFTER))
}
