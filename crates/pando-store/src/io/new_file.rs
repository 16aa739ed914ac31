//! Files written whole or not at all, outside a store: what a command
//! writes (a trace, a report, a snapshot) and the OCaml binding's
//! snapshots.
//!
//! A new file is written under a temporary name beside its final one
//! (`.NAME.XXXXXX.partial`, in the same directory so that the rename is
//! atomic), synced, renamed over the final name, and the directory synced
//! after.
//!
//! Invariant: the final name holds what it held before or the whole new
//! file, never a part: a `NewFile` dropped before `persist` (an error, or
//! a signal the command turned into one) removes its temporary file, and
//! the final name is not touched (tested by
//! `a_new_file_replaces_its_target_whole_or_not_at_all`). The temporary file
//! is in the final name's directory, so that the rename is atomic (asserted
//! in `create`).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// `error`, its message preceded by `what` (as `anyhow`'s context would).
fn context(what: String) -> impl FnOnce(io::Error) -> io::Error {
    move |error| io::Error::new(error.kind(), format!("{what}: {error}"))
}

/// The directory `path` is in (`.` for a bare name).
fn parent(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Syncs a directory, so that a rename or creation in it is durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(context(format!("cannot sync the directory {}", dir.display())))
}

/// A file being written, renamed to its final name by `persist`.
pub struct NewFile {
    temp: tempfile::NamedTempFile,
    target: PathBuf,
}

impl NewFile {
    /// A temporary file beside `target`, which is not touched until
    /// `persist`.
    pub fn create(target: &Path) -> io::Result<NewFile> {
        let Some(name) = target.file_name() else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a file name", target.display())));
        };
        if target.is_dir() {
            return Err(io::Error::new(io::ErrorKind::IsADirectory, format!("{} is a directory", target.display())));
        }
        let dir = parent(target);
        let prefix = format!(".{}.", name.to_string_lossy());
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".partial");
        #[cfg(unix)]
        {
            // Read and write for all, less the umask, as `File::create` gives.
            use std::os::unix::fs::PermissionsExt as _;
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let temp = builder.tempfile_in(dir).map_err(context(format!("cannot create a file in {}", dir.display())))?;
        debug_assert_eq!(
            temp.path().parent().map(std::path::absolute).and_then(Result::ok),
            std::path::absolute(dir).ok(),
            "a new file is written beside its final name"
        );
        Ok(NewFile { temp, target: target.to_path_buf() })
    }

    /// Where the file is written until `persist`.
    pub fn path(&self) -> &Path {
        self.temp.path()
    }

    /// The temporary file, open for writing.
    pub fn file(&self) -> &File {
        self.temp.as_file()
    }

    /// Syncs the file, renames it to its final name and syncs the directory.
    pub fn persist(self) -> io::Result<()> {
        let NewFile { temp, target } = self;
        temp.as_file().sync_all().map_err(context(format!("cannot sync {}", temp.path().display())))?;
        let shown = temp.path().display().to_string();
        temp.persist(&target).map_err(|e| context(format!("cannot rename {shown} to {}", target.display()))(e.error))?;
        sync_dir(parent(&target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    /// Dropped before `persist`, a new file leaves the target as it was
    /// and no temporary file; persisted, it replaces the target whole.
    #[test]
    fn a_new_file_replaces_its_target_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("report");
        std::fs::write(&target, b"old").unwrap();
        let new = NewFile::create(&target).unwrap();
        new.file().write_all(b"half of the new").unwrap();
        assert_eq!(names(dir.path()).len(), 2, "the temporary file beside the target");
        drop(new);
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
        assert_eq!(names(dir.path()), ["report"]);
        let new = NewFile::create(&target).unwrap();
        new.file().write_all(b"the new file").unwrap();
        new.persist().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"the new file");
        assert_eq!(names(dir.path()), ["report"]);
    }
}
