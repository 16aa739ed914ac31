//! The writer's commit pipeline: encoding a commit's new inodes into one
//! batch of records (`batch`), hashing them on a helper thread
//! (`hashing`), the commit protocol that ties them together (`commit`),
//! step 4 on a thread of its own (`syncer`), and the branches
//! file with its one writing step (`branches`).
//!
//! [`WriteSide`] is the writing half of an open store (`Repo`): the
//! writer's state behind its lock ([`Writer`]), the fail-stop flag, the
//! kept tree, the staged blobs and the collector; its own `impl` is
//! here. The operations that also need the reading side are `impl Repo`
//! blocks beside their roles: `commit`, `syncer` and `branches` here,
//! staging in `read::source`, `tools::import`, `gc`, and `kept_root` in
//! the store's module.
//!
//! Invariants:
//! - Only a writable store reaches this pipeline, and only under the
//!   writer lock (every step takes the lock's `&mut Writer`); the helper
//!   threads it starts only hash (`hashing`) or sync one commit at a time,
//!   in commit order (`syncer`). Tested by
//!   `a_second_writer_is_refused_while_the_first_is_open`.

pub(super) mod batch;
pub(crate) mod branches;
pub(super) mod commit;
pub(super) mod hashing;
pub(super) mod inodes;
pub(super) mod kept;
pub(super) mod syncer;

use pando_core::Hash;
use parking_lot::Mutex;
use std::sync::{Arc, OnceLock};

use crate::crash_point;
use crate::error::{Error, Result};
use crate::format::control::Control;
use crate::io::File;
use crate::node::{Inode, StagedSet};
use crate::store::gc;

/// State only the writer touches.
pub(crate) struct Writer {
    pub(in crate::store) control: Control,
    pub(in crate::store) control_file: Arc<dyn File>,
    pub(in crate::store) index_file: Arc<dyn File>,
    pub(in crate::store) dict_file: Arc<dyn File>,
    /// Commits not yet in the index file.
    pub(in crate::store) unflushed_index: Vec<(Hash, u64)>,
    /// Commits appended since the last durable control write.
    pub(in crate::store) unsynced_commits: u64,
    /// The batch buffer, kept between commits so its pages stay mapped.
    pub(in crate::store) batch_buf: Vec<u8>,
    /// The `seq` of the newest synced control slot (see `format::control`).
    pub(in crate::store) synced_seq: u64,
    /// Which commits the kept tree may hold inodes of (see `write::commit`).
    pub(in crate::store) kept: kept::KeptWindow,
    /// `SyncPolicy::Pipelined`: the thread syncing the last commit, and
    /// whether a sync is in flight.
    pub(in crate::store) syncer: Option<syncer::Syncer>,
    pub(in crate::store) in_flight: bool,
    pub(in crate::store) _lock: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl Writer {
    /// Waits for the sync in flight, if any; its error is the store's (the
    /// caller poisons). Every step that syncs or writes the control file
    /// settles first, so that control writes stay in order.
    pub(in crate::store) fn settle(&mut self) -> Result<()> {
        if !std::mem::take(&mut self.in_flight) {
            return Ok(());
        }
        self.syncer.as_ref().expect("a sync in flight has a thread").wait()
    }

    /// Writes `next` (a state derived from `self.control`) to the synced
    /// control slot not holding the newest synced state, and fsyncs it. Its
    /// `seq` is chosen here. The caller poisons the store on failure: the
    /// slot may or may not have reached the disk.
    pub(in crate::store) fn write_synced_control(&mut self, next: Control) -> Result<()> {
        self.settle()?;
        let next = Control { seq: self.control.next_synced_seq(self.synced_seq), ..next };
        self.control_file.write_all_at(&next.encode(), next.slot_offset()).map_err(Error::io("control", "write"))?;
        crash_point::reach("after-control-write");
        self.control_file.sync().map_err(Error::io("control", "sync"))?;
        crash_point::reach("after-control-sync");
        self.synced_seq = next.seq;
        self.control = next;
        Ok(())
    }

    /// Writes `next` to the hint slot, without an fsync: what readers in
    /// other processes follow. The pack bytes it describes are durable.
    pub(in crate::store) fn write_control_hint(&mut self, next: Control) -> Result<()> {
        let next = self.next_hint(next);
        write_hint(&*self.control_file, &next)?;
        self.control = next;
        Ok(())
    }

    /// `next` as the hint slot's state, its `seq` chosen.
    pub(in crate::store) fn next_hint(&self, mut next: Control) -> Control {
        next.seq = self.control.seq + 1;
        next
    }
}

/// Writes the control file's hint slot (not synced).
pub(in crate::store) fn write_hint(control_file: &dyn File, next: &Control) -> Result<()> {
    control_file.write_all_at(&next.encode(), crate::format::control::HINT_OFFSET).map_err(Error::io("control", "write"))?;
    crash_point::reach("after-control-hint");
    Ok(())
}

/// What only the writer changes in an open store, and the fail-stop flag
/// that stops it.
pub(crate) struct WriteSide {
    pub(in crate::store) writer: Option<Mutex<Writer>>,
    /// The first failure of a write step, once there was one (fail-stop).
    pub(in crate::store) poisoned: OnceLock<String>,
    /// The writer's newest commit and its tree in memory (see `write::commit`).
    pub(in crate::store) kept: Mutex<Option<KeptTree>>,
    /// Blobs written when added to a tree, that trees still hold and no
    /// commit refers to yet (see `Repo::stage`): collections keep every
    /// record from the oldest on.
    pub(in crate::store) staged: Arc<StagedSet>,
    pub(in crate::store) gc: gc::GcState,
}

impl WriteSide {
    pub(in crate::store) fn check_writable(&self) -> Result<()> {
        if self.writer.is_none() {
            return Err(Error::ReadOnly);
        }
        self.check_not_poisoned()
    }

    pub(in crate::store) fn check_not_poisoned(&self) -> Result<()> {
        match self.poisoned.get() {
            Some(first) => Err(Error::PreviousIo { first: first.clone() }),
            None => Ok(()),
        }
    }

    pub(in crate::store) fn is_poisoned(&self) -> bool {
        self.poisoned.get().is_some()
    }

    /// Runs a write step; any failure poisons the store (fail-stop), and
    /// later writes name this first failure.
    pub(in crate::store) fn guard<T>(&self, result: Result<T>) -> Result<T> {
        self.poison_on_error(result, crate::telemetry::poisoned)
    }

    /// Poisons the store on `result`'s error, as `guard` does, and has
    /// `log` say so the first time.
    pub(in crate::store) fn poison_on_error<T>(&self, result: Result<T>, log: fn(&str)) -> Result<T> {
        if let Err(e) = &result {
            let mut first = false;
            let message = self.poisoned.get_or_init(|| {
                first = true;
                e.to_string()
            });
            if first {
                log(message);
            }
        }
        result
    }
}

/// The writer's newest commit and the root of its tree in memory, unless
/// a checkout took it (see [`Repo::kept_root`]).
pub(in crate::store) struct KeptTree {
    pub(in crate::store) hash: Hash,
    pub(in crate::store) root_offset: u64,
    pub(in crate::store) root: Option<Arc<Inode>>,
}
