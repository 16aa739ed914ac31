//! The error type of pando-store.
//!
//! Damaged data is always reported with the file and offset where it was
//! found; nothing here is ever "recovered" by guessing.

use pando_core::Hash;
use std::io;

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The message includes `error`, which is therefore not also the
    /// source (a chain of causes would print it twice).
    #[error("I/O error on {file} during {op}: {error}")]
    Io { file: String, op: &'static str, error: io::Error },
    #[error("corrupt store: {file} at offset {offset}: {reason}")]
    Corrupt { file: String, offset: u64, reason: String },
    #[error("checksum mismatch in {file} at offset {offset}: expected {expected:#010x}, found {found:#010x}")]
    ChecksumMismatch { file: String, offset: u64, expected: u32, found: u32 },
    #[error("{file}: format version {found} is not supported (this build reads versions {oldest} to {supported})", oldest = crate::format::OLDEST_READ_VERSION)]
    UnsupportedVersion { file: String, found: u32, supported: u32 },
    #[error("{dir} is not a pando store: {reason}")]
    NotAStore { dir: String, reason: String },
    /// The store's path names a file: one message for every way in.
    #[error("{dir} is a file, not a store directory")]
    NotADirectory { dir: String },
    /// An open of an existing store ([`crate::Create::Never`], or
    /// read-only) found no directory at the path.
    #[error("{dir}: no such directory, so no store there (nothing was created)")]
    NoSuchDirectory { dir: String },
    /// [`crate::Create::New`] found a store already there.
    #[error("{dir} already holds a pando store; nothing was changed")]
    StoreExists { dir: String },
    /// The directory holds only what a creation that failed or was
    /// interrupted made (`files`: the store's own files, no control file):
    /// no commit was ever written there. An open that may create
    /// ([`crate::Create::IfMissing`] or [`crate::Create::New`]) clears them
    /// and creates the store; any other open says so and changes nothing.
    #[error(
        "{dir} holds the files of a store whose creation did not finish ({files}; no control file): \
         no commit was ever written there; creating the store there (`pando init`) clears them"
    )]
    UnfinishedCreation { dir: String, files: String },
    #[error("unknown commit {0}")]
    UnknownCommit(Hash),
    #[error("the store is open read-only")]
    ReadOnly,
    /// A write or fsync failed earlier; `first` is that failure. The
    /// store stops writing (fail-stop) so that nothing after it depends
    /// on bytes that may not be on disk.
    #[error(
        "the store refuses further writes because an earlier write failed: {first}; \
         fix that (for example free disk space), then reopen the store: it recovers to its last durable commit"
    )]
    PreviousIo { first: String },
    #[error("a commit's root must be a directory, not a contents")]
    RootNotDirectory,
    #[error("the tree belongs to another store instance")]
    ForeignTree,
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// A store opened with a layout other than the one it was created
    /// with ([`crate::Options::layout`]), or a tree or input of one layout
    /// given to a store of the other.
    #[error("{what} is of the {found} layout, not the {expected} layout")]
    LayoutMismatch { what: String, found: &'static str, expected: &'static str },
    /// A tool that knows only L1's layout so far, asked of a store of
    /// another (proofs, snapshots and the integrity check of the binary
    /// layout are still to come).
    #[error("{what} is not yet written for stores of the {layout} layout")]
    LayoutUnsupported { what: &'static str, layout: &'static str },
    /// A contents value longer than a record holds
    /// ([`crate::tree::MAX_VALUE_BYTES`]), refused where it is added.
    #[error("a contents value of {bytes} bytes is over the maximum of {max} bytes")]
    ValueTooLarge { bytes: u64, max: u64 },
    /// A commit with more parents (repeated ones counted once) than a
    /// commit record holds ([`crate::MAX_PARENTS`]).
    #[error("a commit of {count} parents is over the maximum of {max}")]
    TooManyParents { count: u64, max: u64 },
    /// A commit's author or message (`field`) longer than a commit record
    /// holds ([`crate::MAX_TEXT_BYTES`]).
    #[error("a commit {field} of {bytes} bytes is over the maximum of {max} bytes")]
    CommitTextTooLong { field: &'static str, bytes: u64, max: u64 },
    #[error("the record at offset {offset} was garbage-collected")]
    Collected { offset: u64 },
    #[error("commit {0} was garbage-collected")]
    CollectedCommit(Hash),
    /// `Store::repair` refuses: what it cannot rebuild and why.
    #[error("cannot repair the store: {0}")]
    CannotRepair(String),
    #[error("a garbage collection is already running")]
    GcRunning,
    #[error("the last garbage collection failed (the store is as it was before it): {0}")]
    GcFailed(String),
    /// A snapshot that is damaged, truncated or not canonical: the file
    /// byte where its frame starts, and the byte of the stream it holds.
    #[error("bad snapshot: file byte {file_offset} (stream byte {stream_offset}): {reason}")]
    Snapshot { file_offset: u64, stream_offset: u64, reason: String },
    #[error(transparent)]
    Proof(#[from] pando_core::proof::ProofError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The name of a store's or a tree's layout: stores are created only of
/// named layouts, and a tree of no store is L1's.
pub(crate) fn layout_name(layout: pando_core::inode::Layout) -> &'static str {
    layout.name().expect("stores and trees are of named layouts")
}

/// `Ok` for a store of L1's layout; [`Error::LayoutUnsupported`] naming
/// `what` otherwise.
pub(crate) fn l1_only(layout: pando_core::inode::Layout, what: &'static str) -> Result<()> {
    match layout {
        pando_core::inode::Layout::TEZOS => Ok(()),
        other => Err(Error::LayoutUnsupported { what, layout: layout_name(other) }),
    }
}

impl Error {
    pub(crate) fn io(file: impl Into<String>, op: &'static str) -> impl FnOnce(io::Error) -> Error {
        let file = file.into();
        move |error| Error::Io { file, op, error }
    }

    pub(crate) fn corrupt(file: impl Into<String>, offset: u64, reason: impl Into<String>) -> Error {
        Error::Corrupt { file: file.into(), offset, reason: reason.into() }
    }
}
