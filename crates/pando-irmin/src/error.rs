//! Errors of reading an irmin-pack context and bringing it into pando.

use pando_core::Hash;

/// Result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, with the irmin file and the byte of that file when the
/// bytes are at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bytes that are not what irmin-pack writes (damage, truncation).
    #[error("{file} at byte {offset}: {reason}")]
    Corrupt { file: String, offset: u64, reason: String },
    /// An object whose bytes do not hash to the hash irmin recorded.
    #[error("{file} at byte {offset}: {what} hashes to {found}, irmin recorded {stored}")]
    HashMismatch { file: String, offset: u64, what: &'static str, found: Hash, stored: Hash },
    /// A file could not be opened or read.
    #[error("{file}: cannot {op}: {source}")]
    Io {
        file: String,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// Not an irmin-pack context directory.
    #[error("{0}")]
    NotAContext(String),
    /// A valid irmin-pack feature this reader does not handle.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// The commit is not in the context's files.
    #[error("commit {0} is not in this irmin-pack context")]
    UnknownCommit(Hash),
    /// The pando store refused the import.
    #[error("pando store: {0}")]
    Store(#[from] pando_store::Error),
    /// The flag given to [`crate::Context::stop_when`] was set.
    #[error("interrupted")]
    Interrupted,
}

impl Error {
    /// Wraps an I/O error of `file`.
    pub fn io<'a>(file: &'a str, op: &'static str) -> impl FnOnce(std::io::Error) -> Error + 'a {
        move |source| Error::Io { file: file.into(), op, source }
    }
}
