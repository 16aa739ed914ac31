//! Options of a store.

/// When commits are made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Every commit is on disk when `commit` returns (the default).
    EveryCommit,
    /// Data and control file are synced every N commits: a crash or power
    /// loss can lose up to the last N-1 commits (the store still opens to an
    /// earlier consistent commit).
    EveryN(u32),
    /// Synced only by `flush` and when the store is closed: a crash loses
    /// every commit since the last flush.
    Never,
    /// Every commit is synced, on a second thread while the caller goes on:
    /// `commit` returns once the commit is written, and the commit is on
    /// disk when the next `commit`, `wait_durable`, `flush` or close returns
    /// (each waits for it, and reports its failure). A crash can lose the
    /// last commit returned, never one before it. This hides the fsync
    /// behind the next block's work; a node records a block as applied
    /// only once its commit is durable.
    Pipelined,
}

/// Which history a store keeps on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retention {
    /// Every commit (an archive node); collections run only when asked.
    KeepAll,
    /// The last `commits` commits (a rolling node: e.g. 5 cycles of
    /// blocks): a collection starts in the background every `every`
    /// commits, keeping the `commits`-th last commit and those after it.
    KeepLast { commits: u64, every: u64 },
    /// Every commit, but only the last `commits` in the hot files: every
    /// `every` commits a collection copies what they need into the prefix
    /// and moves the older chunks to cold files (`cold-*.pack`), which stay
    /// readable as usual. A collection started by hand does the same.
    Archive { commits: u64, every: u64 },
}

impl Retention {
    /// True if collections move old data to cold files instead of discarding it.
    pub fn archive(&self) -> bool {
        matches!(self, Retention::Archive { .. })
    }

    /// `(commits, every)`: how many commits to keep (in the hot files), and
    /// how often a collection starts; `None` for `KeepAll`.
    pub fn keep_last(&self) -> Option<(u64, u64)> {
        match *self {
            Retention::KeepAll => None,
            Retention::KeepLast { commits, every } | Retention::Archive { commits, every } => Some((commits, every)),
        }
    }
}

/// Whether opening a store may create one.
///
/// The default is [`Create::IfMissing`], as `sqlite3_open` and redb's
/// `Database::create` do: an embedder names its own data directory, and a
/// node starting on an empty one expects a store there. What that default
/// risks (a mistyped path that silently becomes a store) belongs to tools
/// that take paths from people: they say [`Create::Never`] wherever they
/// only mean to read or change an existing store, as every `pando` command
/// but `init`, `replay`, `snapshot import` and `import-irmin` does. A
/// read-only open never creates anything, whatever this says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Create {
    /// Open an existing store only: a missing directory, an empty one, or
    /// one without a store is an error, and nothing is created or written
    /// before the store is found.
    Never,
    /// Open the store in the directory, or create one if the directory is
    /// absent or empty (the default).
    #[default]
    IfMissing,
    /// Create a new store: the directory must be absent or empty; one that
    /// already holds a store is an error ([`crate::Error::StoreExists`]).
    New,
}

#[derive(Clone, Debug)]
pub struct Options {
    /// Whether opening may create the store (see [`Create`]); in every
    /// mode, the leftovers of a creation that failed or was interrupted
    /// (the store's own files, no control file) are cleared by a creating
    /// open and named by any other ([`crate::Error::UnfinishedCreation`]).
    pub create: Create,
    /// Bytes of decoded nodes kept in memory: three quarters for the
    /// writer's kept tree ([`Options::keep_bytes`]), a quarter for the
    /// cache of nodes read from disk.
    pub cache_bytes: u64,
    pub sync: SyncPolicy,
    /// A commit that takes at least this long is logged as a warning (one
    /// an operator may act on: a slow disk, a cache too small); `None`
    /// never warns, for a store whose commits are a tool's own (the trace
    /// generator's scratch store). Default [`crate::telemetry::SLOW_COMMIT`].
    pub slow_commit_warning: Option<std::time::Duration>,
    /// A new pack chunk starts once the current one holds this many bytes.
    pub chunk_target_bytes: u64,
    /// A commit's records are appended to the pack in pieces of about this
    /// many bytes, so that a commit of millions of writes does not hold
    /// them all in memory. The commit is durable, and visible, only once its
    /// last piece (with the commit record) is.
    pub commit_spill_bytes: u64,
    /// Contents at least this long are written to the pack as soon as they
    /// are added to a tree of the store, so that a commit of many large
    /// values does not hold them in memory; 0 never does. A tree dropped
    /// uncommitted leaves them as garbage for the next collection.
    pub stage_bytes: u64,
    /// The commit index and dictionary files are brought up to date every
    /// this many commits; opening replays at most this many commits' records.
    pub checkpoint_commits: u64,
    /// Open without writing anything; another process may be the writer.
    pub read_only: bool,
    /// Record every call made through the store's API into this trace file
    /// (irmin's `IrmRepBT` format), finished when the store is closed.
    pub trace_file: Option<std::path::PathBuf>,
    pub retention: Retention,
    /// A collection's long stages (scanning, tracing, copying) run on a
    /// thread of the lowest processor priority (nice 19, on Linux),
    /// yielding to the writer and its helper threads; its short sections
    /// under the writer lock run at the priority of the thread that
    /// started it, so that a busy machine cannot starve them while the
    /// writer waits. On a machine other work keeps busy, collections then
    /// take longer and the disk grows meanwhile (the store warns when one
    /// is due before the last finished): `false` runs them all at the
    /// writer's priority.
    pub gc_low_priority: bool,
    /// A collection traces only the records written since the last one's
    /// boundary, keeping the older live records as they are, until those
    /// have grown by more than this share (in percent) over what the last
    /// whole trace found live: then it traces them all again, dropping
    /// the garbage they gathered. 0 traces every record every time;
    /// `u64::MAX` only in the first collection after the store opens.
    /// Archive mode always traces all.
    pub gc_whole_trace_growth_percent: u64,
    /// Bytes of the flat read cache (beside `cache_bytes`): what paths hold
    /// in the newest commit's tree, looked up by the whole path, so that a
    /// read of a tree taken from that commit does not walk the trie. A
    /// commit carries it over with its tree's updates; 0 turns it off.
    pub read_cache_bytes: u64,
    /// The layout of the store's tries (`pando_core::inode::Layout`): a
    /// store created is of this one (L1's if `None`), and a store opened
    /// must be of it ([`crate::Error::LayoutMismatch`] otherwise); `None`
    /// opens a store of either, as tools do.
    pub layout: Option<pando_core::inode::Layout>,
}

impl Options {
    /// The part of `cache_bytes` the writer's kept tree may hold: the
    /// inodes its last commits wrote (see `store::write::commit`).
    pub fn keep_bytes(&self) -> u64 {
        if self.read_only { 0 } else { self.cache_bytes / 4 * 3 }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create: Create::IfMissing,
            cache_bytes: 512 << 20,
            sync: SyncPolicy::EveryCommit,
            slow_commit_warning: Some(crate::telemetry::SLOW_COMMIT),
            chunk_target_bytes: 128 << 20,
            commit_spill_bytes: 16 << 20,
            stage_bytes: 4096,
            checkpoint_commits: 1024,
            read_only: false,
            trace_file: None,
            retention: Retention::KeepAll,
            gc_low_priority: true,
            gc_whole_trace_growth_percent: 10,
            read_cache_bytes: 64 << 20,
            layout: None,
        }
    }
}
