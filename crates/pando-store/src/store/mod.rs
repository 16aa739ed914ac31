//! The store: opens a directory, checks out and commits trees, keeps the
//! commit index, the branches and the cache.
//!
//! Files of a store directory (see `docs/FORMAT.md`):
//! `control` (what is durable), `chunk-*.pack` (the records), `index`
//! (commit hash to offset, checkpointed), `dict` (dictionary, checkpointed),
//! `branches`, and `lock` (held by the writing process).
//!
//! Folders by role: `write` (the writer's commit pipeline: batch, hashing
//! helper, commit protocol, pipelined sync, branches), `read` (how trees
//! load from the store, following another process's writer, proofs),
//! `gc` (online collection) and `tools` (check, inspect, import,
//! repair). Beside them: `open` (creation, opening, recovery) and
//! `index_file` (the commit index's bytes), which both sides use.
//!
//! Invariants:
//! - One writer per store directory (an OS file lock) and per process (a
//!   mutex); any number of reader threads, which never wait for a commit's
//!   I/O except to take a snapshot of the index (tested by
//!   `a_second_writer_is_refused_while_the_first_is_open` and
//!   `readers_see_every_commit_while_the_writer_commits`).
//! - A commit hash is in the index only once its batch is in the pack
//!   (the writer's one way in, `Repo::publish_commit`, asserts it; tested
//!   by `crash_without_fault_at_every_commit`).
//! - After a failed write or fsync the store refuses writes (`PreviousIo`,
//!   naming the first failure; tested by `every_operation_fails_in_turn_then_crash`).

mod gc;
pub(crate) mod index_file;
mod open;
mod read;
mod tools;
mod write;

use read::ReadSide;
use tools::{check, repair};
pub(crate) use write::branches;
use write::{KeptTree, WriteSide, Writer, hashing, write_hint};

pub use check::{CheckPhase, CheckProgress, CheckReport, CheckScope, Problem, RecordCounts};
pub use gc::{GcPhase, GcReport, GcStatus};
pub(crate) use open::fresh_instance_id;
pub use repair::{REPAIR_HINT, RepairReport};

use pando_core::{CommitInfo, Hash};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::error::{Error, Result};
use crate::format::commit::CommitRecord;
use crate::io::{FsStorage, Storage};
use crate::node::{Child, Inode, Ptr};
use crate::options::Options;
use crate::tracer::{TraceSink, TraceSummary};
use crate::tree::{Refs, Source, Tree};
use pando_core::trace::{Row, Scope};

/// An open store: its reading side, which every reader uses, and its
/// writing side, which only a writable store's writer changes. Operations
/// that need both (commit, collection, import, branches, staging) are
/// `impl Repo` blocks in the folders of their roles.
pub(crate) struct Repo {
    pub(in crate::store) read: ReadSide,
    pub(in crate::store) write: WriteSide,
}

/// A pando store: one directory of append-only files, one writer (across
/// processes, by a file lock) and any number of readers.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// use pando_store::{CommitMeta, Options, Store};
///
/// let store = Store::open(dir.path(), Options::default())?;
/// let tree = store.empty_tree().add(&["contracts", "global_counter"], b"42")?;
/// // Durable when it returns (the default `SyncPolicy::EveryCommit`).
/// let genesis = store.commit(&tree, CommitMeta { parents: &[], date: 1_600_000_000, author: "Tezos", message: "block 0" })?;
/// assert!(genesis.to_string().starts_with("Co")); // the Tezos context hash
///
/// // The next block starts from its parent's commit.
/// let mut next = store.checkout(&genesis)?.expect("just committed");
/// next.add_mut(&["contracts", "global_counter"], b"43")?;
/// let block_1 = store.commit(&next, CommitMeta { parents: &[genesis], date: 1_600_000_030, author: "Tezos", message: "block 1" })?;
/// store.set_branch("main", &block_1)?;
/// assert_eq!(store.last_commit()?, Some(block_1));
/// assert_eq!(store.commit_info(&block_1)?.expect("known").parents, vec![genesis]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Store {
    repo: Arc<Repo>,
}

/// A commit as the store knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commit {
    pub hash: Hash,
    pub info: CommitInfo,
}

/// What [`Store::commit`] records beside the tree: the commit's parents
/// and metadata, as Octez's `Context.commit` takes them.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// use pando_store::{CommitMeta, Options, Store};
///
/// let store = Store::open(dir.path(), Options::default())?;
/// let tree = store.empty_tree().add(&["version"], b"genesis")?;
/// let meta = CommitMeta { parents: &[], date: 1_600_000_000, author: "Tezos", message: "block 0" };
/// let genesis = store.commit(&tree, meta)?;
/// assert_eq!(store.commit_info(&genesis)?.expect("known").author, "Tezos");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommitMeta<'a> {
    /// The parent commits (none for a first commit).
    pub parents: &'a [Hash],
    /// Seconds since the Unix epoch (the block's timestamp).
    pub date: i64,
    /// The author (Octez commits as `"Tezos"`).
    pub author: &'a str,
    /// The message.
    pub message: &'a str,
}

/// Sizes and counts, for `pando info`.
#[derive(Clone, Debug)]
pub struct StoreInfo {
    pub commits: u64,
    pub pack_bytes: u64,
    pub chunks: Vec<(String, u64)>,
    pub dict_entries: usize,
    pub cache_bytes: u64,
    pub cache_entries: usize,
    /// Memory of the inodes the writer's kept tree may hold (see
    /// [`Options::keep_bytes`]): those its last commits wrote.
    pub kept_bytes: u64,
    /// The flat read cache (see [`Options::read_cache_bytes`]): its
    /// entries, their weight, and the reads it answered and did not
    /// (reads of updated trees, which walk, not counted).
    pub read_cache_entries: usize,
    pub read_cache_bytes: u64,
    pub read_cache_hits: u64,
    pub read_cache_misses: u64,
    pub branches: usize,
    /// Garbage collection: the layout generation in use (0 before any);
    /// below the first chunk, the live bytes, the files holding them
    /// (segments and chunks kept in place) and their bytes; how many commits
    /// collections collected.
    pub generation: u64,
    pub collected_live_bytes: u64,
    pub collected_files: usize,
    pub collected_file_bytes: u64,
    pub collected_commits: u64,
    /// Transitions of an inode's writer state this process refused
    /// ([`refused_transitions`](crate::refused_transitions)): 0 unless the
    /// writer has a bug.
    pub refused_transitions: u64,
}

/// The store directory `dir` (made, with the topmost directory made, if
/// absent and `create`), or the one error every way into a store gives
/// for a path that is a file or missing.
pub(crate) fn store_dir(dir: &Path, create: bool) -> Result<(FsStorage, Option<std::path::PathBuf>)> {
    use crate::io::fs::StoreDirError;
    let shown = || dir.display().to_string();
    FsStorage::for_store(dir, create).map_err(|e| match e {
        StoreDirError::Missing => Error::NoSuchDirectory { dir: shown() },
        StoreDirError::File => Error::NotADirectory { dir: shown() },
        StoreDirError::Io(error) => Error::Io { file: shown(), op: "open directory", error },
    })
}

// Every public method is documented: an embedder reads these first.
#[deny(missing_docs)]
impl Store {
    /// Opens the store in `dir`; creates it there, and `dir` if missing,
    /// as [`Options::create`] allows (by default when `dir` is absent or
    /// empty; never when read-only). A creation that fails removes what it
    /// made, `dir` included.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Store> {
        let creates = !options.read_only && options.create != crate::Create::Never;
        let (storage, made) = store_dir(dir.as_ref(), creates)?;
        let storage = Arc::new(storage);
        let opened = Store::open_storage(storage.clone(), options);
        if let (Err(_), Some(top)) = (&opened, made) {
            storage.remove_made(&top);
        }
        opened
    }

    /// Opens a store on any [`Storage`].
    pub fn open_storage(storage: Arc<dyn Storage>, options: Options) -> Result<Store> {
        let repo = if options.read_only {
            // A reader can open while the writer switches to a collected
            // generation and removes the files it was about to open: if the
            // control file changed meanwhile, it tries again with the new one.
            let control = |storage: &dyn Storage| storage.open(open::CONTROL, false).and_then(|f| crate::io::read_all(&*f)).ok();
            let mut attempt = 0;
            loop {
                let before = control(&*storage);
                match open::open(storage.clone(), options.clone()) {
                    Ok(repo) => break Arc::new(repo),
                    Err(e @ (Error::Corrupt { .. } | Error::Io { .. })) => {
                        if attempt == 5 || control(&*storage) == before {
                            return Err(e);
                        }
                        attempt += 1;
                    }
                    Err(e) => return Err(e),
                }
            }
        } else {
            Arc::new(open::open(storage, options)?)
        };
        repo.init_retention();
        Ok(Store { repo })
    }

    /// An empty tree bound to this store (context 0 of a recorded trace).
    pub fn empty_tree(&self) -> Tree {
        let source: Arc<dyn Source> = self.repo.clone();
        let ctx = self.repo.read.tracing().then_some(0);
        let refs = Refs::HeldAt(self.repo.read.pack.layout_epoch());
        Tree::from_parts(Child::Dir(Ptr::mem(crate::node::empty())), Some(source), ctx, refs).logging_from(None)
    }

    /// True if `commit` is in the store.
    /// (A read-only store refreshes first if it does not know `commit`.)
    pub fn exists(&self, commit: &Hash) -> bool {
        self.repo.read.commit_offset(commit).is_ok_and(|found| found.is_some_and(|offset| offset != index_file::COLLECTED))
    }

    /// Number of commits (not counting collected ones).
    pub fn commit_count(&self) -> u64 {
        self.repo.read.index.read().len() as u64 - self.repo.read.collected_commits.load(Ordering::Relaxed)
    }

    /// Starts a garbage collection in the background: every record not
    /// reachable from `keep_from`, the commits made after it, or a pinned
    /// commit is discarded. The writer keeps committing and readers keep
    /// reading; the collection takes effect in one durable step between two
    /// commits, then rewrites mostly dead files in the background. Checking
    /// out a collected commit is then `Error::CollectedCommit`.
    pub fn gc(&self, keep_from: &Hash) -> Result<()> {
        self.repo.start_gc(keep_from)
    }

    /// Waits for the running collection (if any) to finish.
    pub fn wait_gc(&self) -> Result<Option<GcReport>> {
        self.repo.wait_gc()
    }

    /// The reports of the collections finished since the last call.
    pub fn take_gc_reports(&self) -> Vec<GcReport> {
        self.repo.take_gc_reports()
    }

    /// The progress of the running collection, if any.
    pub fn gc_status(&self) -> Option<GcStatus> {
        self.repo.gc_status()
    }

    /// Keeps `commit` through every collection started while it is pinned
    /// (pins are counted, and last as long as this store is open).
    pub fn pin(&self, commit: &Hash) -> Result<()> {
        self.repo.pin(commit)
    }

    /// Removes one pin of `commit` (see [`Store::pin`]); a commit pinned
    /// as many times as unpinned is collected as any other. Unpinning a
    /// commit that is not pinned does nothing.
    pub fn unpin(&self, commit: &Hash) {
        self.repo.unpin(commit)
    }

    /// The commit `n - 1` first parents before `from` (or the oldest one
    /// reachable, if the history is shorter or older commits were
    /// collected): what `gc` keeps from to keep the last `n` levels.
    pub fn ancestor(&self, from: &Hash, n: u64) -> Result<Hash> {
        let mut at = *from;
        for _ in 1..n.max(1) {
            let record = self.repo.read.commit_record(&at)?.ok_or(Error::UnknownCommit(at))?;
            match record.parents.first() {
                Some((parent, _)) if self.exists(parent) => at = *parent,
                _ => break,
            }
        }
        Ok(at)
    }

    /// The tree of `commit`, or `None` if the store does not have it. A
    /// checkout of the writer's newest commit starts from the tree that
    /// commit wrote, in memory: the first such checkout takes it (its
    /// updates then change it in place), a second one meanwhile reads from
    /// disk, and a checkout dropped unchanged gives it back.
    pub fn checkout(&self, commit: &Hash) -> Result<Option<Tree>> {
        self.checkout_taking(commit, true)
    }

    /// The tree of `commit` as [`Store::checkout`] gives it, but read from
    /// the pack (through the caches), leaving the writer's kept tree to the
    /// next checkout, and not a context of a trace being recorded. For a
    /// caller that goes on holding a tree it committed (the OCaml binding,
    /// whose contexts live until OCaml's collector frees them): holding
    /// this one instead lets the next block update the kept tree in place.
    pub fn stored_tree(&self, commit: &Hash) -> Result<Option<Tree>> {
        self.checkout_taking(commit, false)
    }

    fn checkout_taking(&self, commit: &Hash, take_kept: bool) -> Result<Option<Tree>> {
        // Read first: a collection marks the commits it collects before
        // the layout that removes their records (see `Pack::layout_epoch`).
        let epoch = self.repo.read.pack.layout_epoch();
        // The writer's newest commit, as it wrote it: no record to read.
        let kept = if take_kept { self.repo.kept_root(commit) } else { None };
        let took_kept = kept.is_some();
        let root = match kept {
            Some(root) => Ptr::mem(root),
            None => match self.repo.read.commit_record(commit)? {
                Some(record) => Ptr::stored(record.root_offset, record.root_hash),
                None => return Ok(None),
            },
        };
        // A stored tree is no checkout of the trace being recorded.
        let record = |sink: &dyn TraceSink| {
            if !sink.is_known(commit) {
                sink.gap("a checkout of a commit made before the recording started");
            }
            let ctx = sink.fresh_context();
            sink.write(&Row::Checkout { hash: Scope::Keep(commit.to_base58().into_bytes()), ctx: Scope::Keep(ctx) });
            ctx
        };
        let ctx = if take_kept { self.repo.read.trace(record) } else { None };
        let source: Arc<dyn Source> = self.repo.clone();
        let tree = Tree::from_parts(Child::Dir(root), Some(source), ctx, Refs::HeldAt(epoch)).logging_from(Some(*commit));
        Ok(Some(if took_kept { tree.taking_kept() } else { tree }))
    }

    /// The tree of a commit record, as the trace context `ctx` if any.
    fn tree_at(&self, record: &CommitRecord, ctx: Option<pando_core::trace::ContextId>) -> Tree {
        let source: Arc<dyn Source> = self.repo.clone();
        Tree::from_parts(Child::Dir(Ptr::stored(record.root_offset, record.root_hash)), Some(source), ctx, Refs::Unknown)
    }

    /// Runs `f` on the tree of `commit` and returns Octez's tree proof of
    /// what it read, with `f`'s result (see [`Tree::produce_proof`]).
    pub fn produce_tree_proof<R>(
        &self,
        commit: &Hash,
        f: impl FnOnce(&mut pando_core::proof::PartialTree<'_>) -> Result<R, pando_core::proof::ProofError>,
    ) -> Result<(pando_core::proof::TreeProof, R)> {
        let Some(record) = self.repo.read.commit_record(commit)? else { return Err(Error::UnknownCommit(*commit)) };
        // Not `checkout`: a proof is not an operation of the recorded trace.
        self.tree_at(&record, None).produce_proof(f)
    }

    /// A proof of what each of `paths` holds at `commit` (a value, a
    /// directory, or nothing), checkable against the commit hash alone.
    /// Paths take the form of the tree methods' (`&["contracts", "index"]`).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use pando_core::proof::keys::Found;
    /// use pando_store::{CommitMeta, Options, Store};
    ///
    /// let store = Store::open(dir.path(), Options::default())?;
    /// let tree = store.empty_tree().add(&["contracts", "global_counter"], b"42")?;
    /// let commit = store.commit(&tree, CommitMeta { parents: &[], date: 1_600_000_000, author: "Tezos", message: "block 0" })?;
    /// let proof = store.prove_keys(&commit, &[&["contracts", "global_counter"][..], &["contracts"], &["nothing"]])?;
    /// // Checked against the commit hash alone, without the store.
    /// let held = proof.verify(&commit)?;
    /// assert_eq!(held[0], Found::Value(b"42".to_vec()));
    /// assert!(matches!(held[1], Found::Dir(_)));
    /// assert_eq!(held[2], Found::Absent);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn prove_keys<P, S>(&self, commit: &Hash, paths: &[P]) -> Result<pando_core::proof::keys::KeysProof>
    where
        P: AsRef<[S]>,
        S: AsRef<[u8]>,
    {
        use pando_core::proof::keys::{CommitLinks, KeysProof, read_paths};
        let paths: Vec<Vec<Vec<u8>>> =
            paths.iter().map(|path| path.as_ref().iter().map(|step| step.as_ref().to_vec()).collect()).collect();
        let info = self.commit_info(commit)?.ok_or(Error::UnknownCommit(*commit))?;
        let (proof, _) = self.produce_tree_proof(commit, |tree| read_paths(tree, &paths))?;
        let commit = CommitLinks { parents: info.parents, date: info.date, author: info.author, message: info.message };
        Ok(KeysProof { commit: Some(commit), paths, proof })
    }

    /// Writes the tree of `commit` to `out` as a snapshot (see
    /// [`crate::snapshot`]): a stream holding one inode per level in
    /// memory, whatever the directories' sizes.
    pub fn export_snapshot(&self, commit: &Hash, out: &mut (dyn std::io::Write + Send)) -> Result<crate::SnapshotSummary> {
        crate::error::l1_only(self.layout(), "a snapshot")?;
        let record = self.repo.read.commit_record(commit)?.ok_or(Error::UnknownCommit(*commit))?;
        let mut parents = record.info().parents;
        parents.sort();
        let header = crate::snapshot::Header {
            commit: *commit,
            parents,
            date: record.date,
            author: record.author.clone(),
            message: record.message.clone(),
        };
        let root = Ptr::stored(record.root_offset, record.root_hash);
        crate::snapshot::export(&*self.repo, &header, &root, out)
    }

    /// Builds this store's first commit from a snapshot, checking every
    /// hash: it succeeds only if the tree read hashes to the commit the
    /// snapshot names. The store must be empty. On error nothing durable
    /// was written, and the store refuses writes until reopened.
    pub fn import_snapshot(&self, input: &mut dyn std::io::Read) -> Result<crate::SnapshotSummary> {
        crate::error::l1_only(self.layout(), "a snapshot's import")?;
        self.repo.import(input)
    }

    /// The metadata and parents of `commit`.
    pub fn commit_info(&self, commit: &Hash) -> Result<Option<CommitInfo>> {
        Ok(self.repo.read.commit_record(commit)?.map(|r| r.info()))
    }

    /// Commits `tree` with the parents and metadata `meta`; returns the
    /// commit hash once the commit is as durable as the sync policy says.
    pub fn commit(&self, tree: &Tree, meta: CommitMeta<'_>) -> Result<Hash> {
        let CommitMeta { parents, date, author, message } = meta;
        let (started, end_before) = (std::time::Instant::now(), self.repo.read.pack.end());
        // The flat read cache is carried over the tree's updates on the
        // commit's helper thread, while this one encodes (`FlatCache::carry`).
        let carry = self.repo.read.flat.next_carry();
        let carry_job = {
            let (repo, writes) = (self.repo.clone(), tree.shared_writes());
            hashing::Carry::new(Box::new(move || repo.read.flat.carry(carry, writes.as_deref())))
        };
        let hash = match self.repo.commit(tree, meta, &carry_job) {
            Ok(hash) => hash,
            Err(e) => {
                carry_job.cancel();
                self.repo.read.flat.abandon(carry);
                return Err(e);
            }
        };
        carry_job.run();
        self.repo.read.flat.committed(hash, carry);
        let (cache_hits, cache_misses) = self.repo.read.cache.hits_and_misses();
        crate::telemetry::commit_done(
            &hash,
            &crate::telemetry::CommitDone {
                took: started.elapsed(),
                bytes_written: self.repo.read.pack.end().saturating_sub(end_before),
                pack_bytes: self.repo.read.pack.size_bytes(),
                cache_hits,
                cache_misses,
                warn_after: self.repo.read.options.slow_commit_warning,
            },
        );
        self.repo.apply_retention(hash)?;
        self.repo.read.trace(|sink| {
            // A replay commits as Tezos does, with the parents it made itself.
            if author != crate::tracer::TEZOS_AUTHOR {
                sink.gap("a commit by an author other than Tezos");
            }
            if parents.iter().any(|p| !sink.is_known(p)) {
                sink.gap("a commit whose parent was made before the recording started");
            }
            sink.known(hash);
            match tree.context() {
                Some(ctx) => sink.write(&Row::Commit {
                    hash: Scope::Keep(hash.to_base58().into_bytes()),
                    date,
                    message: message.as_bytes().to_vec(),
                    parents: parents.iter().map(|p| Scope::Keep(p.to_base58().into_bytes())).collect(),
                    in_ctx: Scope::Keep(ctx),
                }),
                None => sink.gap("a commit of a tree that is not a recorded context"),
            }
        });
        Ok(hash)
    }

    /// Ends the recording of a trace (if the store records one): flushes it
    /// and marks last occurrences. Later calls are not recorded.
    pub fn finish_trace(&self) -> Result<Option<TraceSummary>> {
        let Some(tracer) = &self.repo.read.tracer else { return Ok(None) };
        let path = tracer.path().display().to_string();
        tracer.finish().map_err(Error::io(path, "record trace"))
    }

    /// The most recent commit, if any.
    pub fn last_commit(&self) -> Result<Option<Hash>> {
        let offset = self.repo.read.last_commit.load(Ordering::Acquire);
        if offset == u64::MAX {
            return Ok(None);
        }
        Ok(Some(self.repo.read.read_commit_at(offset)?.info().hash()))
    }

    /// Read-only: takes in the commits (and collections) the writer of
    /// another process made durable since the store was opened or last
    /// refreshed; returns how many commits appeared. Looking up a commit this
    /// store does not know refreshes first, so a reader asked for a new block
    /// catches up by itself. Trees checked out before stay readable until
    /// a refresh takes in a collection that removed them. A writable store
    /// has nothing to follow (returns 0).
    pub fn refresh(&self) -> Result<u64> {
        self.repo.read.refresh()
    }

    /// Makes every commit durable and brings the index file up to date.
    pub fn flush(&self) -> Result<()> {
        self.repo.flush()
    }

    /// Waits until every commit returned is on disk: with
    /// `SyncPolicy::Pipelined`, the last one's sync may still run (its
    /// failure is returned here). Immediate with the other policies.
    pub fn wait_durable(&self) -> Result<()> {
        self.repo.wait_durable()
    }

    /// Flushes and closes the store (and finishes a recorded trace). A
    /// collection still running is stopped and discarded.
    pub fn close(self) -> Result<()> {
        self.repo.cancel_gc();
        self.finish_trace()?;
        self.repo.flush()
    }

    /// Points the branch `name` at `commit`, creating the branch if needed;
    /// durable when it returns (the branches are in the control file).
    pub fn set_branch(&self, name: &str, commit: &Hash) -> Result<()> {
        self.repo.set_branch(name, Some(commit))
    }

    /// Removes the branch `name` (not its commits); durable when it returns.
    pub fn remove_branch(&self, name: &str) -> Result<()> {
        self.repo.set_branch(name, None)
    }

    /// The commit the branch `name` points at, if there is such a branch.
    pub fn branch(&self, name: &str) -> Option<Hash> {
        self.repo.read.branches.read().get(name).copied()
    }

    /// Every branch and its commit, sorted by name.
    pub fn branches(&self) -> Vec<(String, Hash)> {
        self.repo.read.branches.read().iter().map(|(n, h)| (n.clone(), *h)).collect()
    }

    /// Bytes in the pack: cheap (no lock), for callers sampling every block.
    pub fn pack_bytes(&self) -> u64 {
        self.repo.read.pack.size_bytes()
    }

    /// Counts and sizes (commits, branches, pack bytes per chunk,
    /// dictionary entries, collections), as `pando info` prints them. Cheap:
    /// it reads no file.
    pub fn info(&self) -> StoreInfo {
        let collected = self.repo.read.pack.collected();
        let read_cache = self.repo.read.flat.counts();
        StoreInfo {
            commits: self.commit_count(),
            pack_bytes: self.pack_bytes(),
            chunks: self.repo.read.pack.chunk_sizes(),
            dict_entries: self.repo.read.dict.read().len(),
            cache_bytes: self.repo.read.cache.weight_bytes(),
            cache_entries: self.repo.read.cache.len(),
            kept_bytes: self.repo.write.writer.as_ref().map_or(0, |writer| writer.lock().kept.weight()),
            read_cache_entries: read_cache.0,
            read_cache_bytes: read_cache.1,
            read_cache_hits: read_cache.2,
            read_cache_misses: read_cache.3,
            branches: self.repo.read.branches.read().len(),
            generation: collected.as_ref().map_or(0, |c| c.generation),
            collected_live_bytes: collected.as_ref().map_or(0, |c| c.live_bytes()),
            collected_files: collected.as_ref().map_or(0, |c| c.files.len()),
            collected_file_bytes: collected.as_ref().map_or(0, |c| c.file_bytes()),
            collected_commits: self.repo.read.collected_commits.load(Ordering::Relaxed),
            refused_transitions: crate::node::refused_transitions(),
        }
    }

    /// The store's system calls so far and the time spent in them (for a
    /// store on real files).
    pub fn io_times(&self) -> Option<crate::io::IoTimes> {
        self.repo.read.storage.io_times()
    }

    /// Where the store lives.
    pub fn describe(&self) -> String {
        self.repo.read.storage.describe()
    }

    /// The layout of the store's tries, recorded when it was created
    /// ([`Options::layout`]).
    pub fn layout(&self) -> pando_core::inode::Layout {
        crate::node::Loader::layout(&self.repo.read)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // Best effort: an error here was or will be reported by an explicit
        // flush; a dropped store must not panic.
        self.repo.cancel_gc();
        // No staged record is written after the store is gone (a store
        // opened next on the same files would have cut it off).
        let _ = self.repo.write.staged.settle();
        let _ = self.finish_trace();
        let _ = self.repo.flush();
        // Trees read from the store may outlive it (a binding's garbage
        // collector frees them later); the directory is free for the next
        // writer now, which the line above made safe.
        if let Some(writer) = &self.repo.write.writer {
            writer.lock()._lock = None;
        }
    }
}

impl Repo {
    /// The root of the kept tree, if it is the tree of `commit`, no
    /// collection removed that commit, and no other checkout holds it. It
    /// is taken: the tree checked out holds it alone, so that its updates
    /// change the kept inodes in place instead of copying them; dropped
    /// unchanged, that tree gives it back (`give_back_kept`).
    fn kept_root(&self, commit: &Hash) -> Option<Arc<Inode>> {
        let mut kept = self.write.kept.lock();
        let kept = kept.as_mut().filter(|kept| kept.hash == *commit)?;
        let live = self.read.index.read().get(commit).is_some_and(|&offset| offset != index_file::COLLECTED);
        if live { kept.root.take() } else { None }
    }
}
