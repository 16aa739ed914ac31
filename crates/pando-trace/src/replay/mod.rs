//! Replaying a trace into a pando store.
//!
//! Each row is applied as irmin's own replay applies it: context 0 is the
//! empty genesis tree; a context used with `Forget` is dropped after use
//! (and updated in place, since nothing else holds it); a commit's trace
//! hash is mapped to the real one for later checkouts and, when the trace
//! recorded a real context hash, compared with it; every recorded
//! `find`/`mem`/`mem_tree` result is compared with the store's answer.
//!
//! Invariant: a mismatch is counted and reported, never fatal; a row that
//! cannot be applied at all (unknown context or commit) is an error.

pub mod metrics;

use foldhash::HashMap;
use foldhash::HashMapExt;
use pando_core::Hash;
use pando_core::trace::{ContextId, KeyRef, Row, RowRef, Scope};
use pando_store::{CommitMeta, Store, Tree};
use smallvec::SmallVec;
use std::time::Instant;

pub use metrics::{BlockSample, Metrics, OpKind};

/// Commits made by a replay have this author, as Tezos commits do.
pub const AUTHOR: &str = pando_store::tracer::TEZOS_AUTHOR;
/// How many mismatches are kept as examples.
const MAX_EXAMPLES: usize = 20;

/// Why a replay stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// The message includes `error`, so it is not also the source.
    #[error("row {row}: {error}")]
    Store { row: u64, error: pando_store::Error },
    #[error("row {row}: {reason}")]
    Trace { row: u64, reason: String },
}

/// What a replay checked, and what disagreed.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Checks {
    pub hashes_checked: u64,
    pub hash_mismatches: u64,
    pub reads_checked: u64,
    pub read_mismatches: u64,
    /// Copies whose source did not exist (irmin's replay fails on them).
    pub missing_copy_sources: u64,
    /// Transitions of an inode's writer state the store refused (a bug in
    /// the writer; a debug build panics instead), as of the last commit.
    #[serde(default)]
    pub refused_transitions: u64,
    pub examples: Vec<String>,
}

impl Checks {
    fn note(&mut self, example: String) {
        if self.examples.len() < MAX_EXAMPLES {
            self.examples.push(example);
        }
    }

    /// True when every check passed.
    pub fn all_passed(&self) -> bool {
        self.hash_mismatches == 0 && self.read_mismatches == 0 && self.missing_copy_sources == 0 && self.refused_transitions == 0
    }
}

/// Replays rows one at a time into a store.
pub struct Replayer<'a> {
    store: &'a Store,
    contexts: HashMap<ContextId, Tree>,
    commits: HashMap<Vec<u8>, Hash>,
    row: u64,
    block_ops: u32,
    block_start: Option<Instant>,
    pub checks: Checks,
    pub metrics: Metrics,
    /// The hash of the last commit made.
    pub last_commit: Option<Hash>,
}

/// The result of applying a row.
pub enum Applied {
    Op,
    /// The row was a commit: a block ended.
    Block(BlockSample),
}

fn path_text(key: KeyRef<'_>) -> String {
    key.steps().map(|s| String::from_utf8_lossy(s).into_owned()).collect::<Vec<_>>().join("/")
}

/// A key's steps, as the store's calls take them (on the stack for the
/// lengths Tezos keys have).
fn steps(key: KeyRef<'_>) -> SmallVec<[&[u8]; 16]> {
    key.steps().collect()
}

/// The context hash a trace recorded, if it recorded one (a `Co...` string
/// or 32 raw bytes); `Generator::run` writes opaque identifiers.
pub fn recorded_hash(trace_hash: &[u8]) -> Option<Hash> {
    if trace_hash.len() == 32 {
        return Hash::from_slice(trace_hash);
    }
    std::str::from_utf8(trace_hash).ok().and_then(|text| Hash::from_base58(text).ok())
}

/// The name of the commit the trace's first block checks out, read from
/// `reader` up to that block's commit: `None` if the block starts from the
/// empty tree (context 0) instead, as a trace from genesis does. A replay
/// into a store with commits (`pando replay --append`) starts only from a
/// commit the store holds.
pub fn first_checkout(reader: &mut crate::TraceReader) -> Result<Option<Vec<u8>>, crate::file::TraceError> {
    while let Some(row) = reader.next_row_ref() {
        match row? {
            RowRef::Checkout { hash, .. } => return Ok(Some(hash.value().to_vec())),
            RowRef::Commit { .. } => return Ok(None),
            _ => {}
        }
    }
    Ok(None)
}

/// True if `trace_hash` has the shape of a base58 commit hash (`Co` and 50
/// more characters) whether or not its check passes: a damaged one is a
/// mismatch, not an opaque name to skip.
fn shaped_like_a_hash(trace_hash: &[u8]) -> bool {
    trace_hash.len() == 52 && trace_hash.starts_with(b"Co") && trace_hash.iter().all(u8::is_ascii_alphanumeric)
}

impl<'a> Replayer<'a> {
    pub fn new(store: &'a Store) -> Replayer<'a> {
        let mut contexts = HashMap::new();
        contexts.insert(0, store.empty_tree());
        Replayer {
            store,
            contexts,
            commits: HashMap::new(),
            row: 0,
            block_ops: 0,
            block_start: None,
            checks: Checks::default(),
            metrics: Metrics::new(),
            last_commit: None,
        }
    }

    fn trace_error(&self, reason: impl Into<String>) -> ReplayError {
        ReplayError::Trace { row: self.row, reason: reason.into() }
    }

    fn store_error(&self) -> impl Fn(pando_store::Error) -> ReplayError {
        let row = self.row;
        move |error| ReplayError::Store { row, error }
    }

    /// The tree of a context, to be changed: taken if this is its last use
    /// (so it is updated in place), cloned otherwise.
    fn take_context(&mut self, ctx: &Scope<ContextId>) -> Result<Tree, ReplayError> {
        let id = *ctx.value();
        let tree = if ctx.is_keep() || id == 0 { self.contexts.get(&id).cloned() } else { self.contexts.remove(&id) };
        tree.ok_or_else(|| self.trace_error(format!("unknown context {id}")))
    }

    /// Runs `read` on the tree of a context, and drops the context if this
    /// is its last use (a read needs no copy of it).
    fn read_context<T>(
        &mut self,
        ctx: &Scope<ContextId>,
        read: impl FnOnce(&Tree) -> pando_store::Result<T>,
    ) -> Result<T, ReplayError> {
        let id = *ctx.value();
        let result = match self.contexts.get(&id) {
            Some(tree) => read(tree),
            None => return Err(self.trace_error(format!("unknown context {id}"))),
        };
        if !ctx.is_keep() && id != 0 {
            self.contexts.remove(&id);
        }
        result.map_err(self.store_error())
    }

    fn put_context(&mut self, ctx: &Scope<ContextId>, tree: Tree) {
        if ctx.is_keep() {
            self.contexts.insert(*ctx.value(), tree);
        }
    }

    fn resolve_commit(&mut self, trace_hash: &Scope<&[u8]>) -> Result<Hash, ReplayError> {
        let bytes = *trace_hash.value();
        let found = if trace_hash.is_keep() { self.commits.get(bytes).copied() } else { self.commits.remove(bytes) };
        if let Some(hash) = found {
            return Ok(hash);
        }
        // A commit made before this replay, named by its real hash.
        match recorded_hash(bytes) {
            Some(hash) if self.store.exists(&hash) => Ok(hash),
            _ => Err(self.trace_error(format!("unknown commit {:?}", String::from_utf8_lossy(bytes)))),
        }
    }

    fn check_read(&mut self, kind: OpKind, key: KeyRef<'_>, expected: bool, found: bool) {
        self.checks.reads_checked += 1;
        if expected != found {
            self.checks.read_mismatches += 1;
            let row = self.row;
            self.checks.note(format!("row {row}: {} {} recorded {expected}, replay {found}", kind.name(), path_text(key)));
        }
    }

    /// Applies one row.
    pub fn apply(&mut self, row: Row) -> Result<Applied, ReplayError> {
        self.apply_ref(row.as_ref())
    }

    /// Applies one row, borrowed (as [`crate::TraceReader::next_row_ref`]
    /// reads it, without copying its steps and values).
    pub fn apply_ref(&mut self, row: RowRef<'_>) -> Result<Applied, ReplayError> {
        let start = Instant::now();
        self.block_start.get_or_insert(start);
        let kind = OpKind::of(&row);
        match row {
            RowRef::Checkout { hash, ctx } => {
                let real = self.resolve_commit(&hash)?;
                let tree = self.store.checkout(&real).map_err(self.store_error())?;
                let tree = tree.ok_or_else(|| self.trace_error(format!("commit {real} is not in the store")))?;
                self.put_context(&ctx, tree);
            }
            RowRef::Add { key, value, in_ctx, out_ctx } => {
                let mut tree = self.take_context(&in_ctx)?;
                tree.add_mut(&steps(key), value).map_err(self.store_error())?;
                self.put_context(&out_ctx, tree);
            }
            RowRef::Remove { key, in_ctx, out_ctx } => {
                let mut tree = self.take_context(&in_ctx)?;
                tree.remove_mut(&steps(key)).map_err(self.store_error())?;
                self.put_context(&out_ctx, tree);
            }
            RowRef::Copy { source, target, in_ctx, out_ctx } => {
                let mut tree = self.take_context(&in_ctx)?;
                match tree.find_tree(&steps(source)).map_err(self.store_error())? {
                    Some(subtree) => tree.add_tree_mut(&steps(target), &subtree).map_err(self.store_error())?,
                    None => {
                        self.checks.missing_copy_sources += 1;
                        let row = self.row;
                        self.checks.note(format!("row {row}: copy from missing {}", path_text(source)));
                    }
                }
                self.put_context(&out_ctx, tree);
            }
            RowRef::Find { key, found, ctx } => {
                let got = self.read_context(&ctx, |tree| tree.find(&steps(key)).map(|v| v.is_some()))?;
                self.check_read(kind, key, found, got);
            }
            RowRef::Mem { key, found, ctx } => {
                let got = self.read_context(&ctx, |tree| tree.mem(&steps(key)))?;
                self.check_read(kind, key, found, got);
            }
            RowRef::MemTree { key, found, ctx } => {
                let got = self.read_context(&ctx, |tree| tree.mem_tree(&steps(key)))?;
                self.check_read(kind, key, found, got);
            }
            RowRef::Commit { hash, date, message, parents, in_ctx } => {
                let tree = self.take_context(&in_ctx)?;
                let mut real_parents = Vec::with_capacity(parents.len());
                for parent in &parents {
                    real_parents.push(self.resolve_commit(parent)?);
                }
                let message = std::str::from_utf8(message).map_err(|_| self.trace_error("commit message is not UTF-8"))?;
                let real = self
                    .store
                    .commit(&tree, CommitMeta { parents: &real_parents, date, author: AUTHOR, message })
                    .map_err(self.store_error())?;
                drop(tree);
                self.checks.refused_transitions = pando_store::refused_transitions();
                match recorded_hash(hash.value()) {
                    Some(recorded) => {
                        self.checks.hashes_checked += 1;
                        if recorded != real {
                            self.checks.hash_mismatches += 1;
                            let row = self.row;
                            self.checks.note(format!("row {row}: commit hash recorded {recorded}, replay {real}"));
                        }
                    }
                    None if shaped_like_a_hash(hash.value()) => {
                        self.checks.hashes_checked += 1;
                        self.checks.hash_mismatches += 1;
                        let (row, text) = (self.row, String::from_utf8_lossy(hash.value()));
                        self.checks
                            .note(format!("row {row}: commit hash recorded {text} is damaged (its check fails), replay {real}"));
                    }
                    None => {}
                }
                if hash.is_keep() {
                    self.commits.insert(hash.value().to_vec(), real);
                } else {
                    // As irmin's replay: replace, then forget.
                    self.commits.remove(*hash.value());
                }
                self.last_commit = Some(real);
                let end = Instant::now();
                self.metrics.record_op(kind, end - start);
                self.row += 1;
                let block_start = self.block_start.take().unwrap_or(start);
                let sample = self.metrics.end_block(self.block_ops + 1, end - block_start, end - start, self.store);
                self.block_ops = 0;
                return Ok(Applied::Block(sample));
            }
        }
        self.metrics.record_op(kind, start.elapsed());
        self.row += 1;
        self.block_ops += 1;
        Ok(Applied::Op)
    }

    /// Rows applied so far.
    pub fn rows(&self) -> u64 {
        self.row
    }

    /// Contexts and commit names currently held (memory the trace asks us to keep).
    pub fn held(&self) -> (usize, usize) {
        (self.contexts.len(), self.commits.len())
    }
}
