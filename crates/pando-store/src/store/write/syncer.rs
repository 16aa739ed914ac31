//! `SyncPolicy::Pipelined`: step 4 of the commit protocol (see `commit`)
//! on a thread of its own, so that a commit's fsync overlaps the next
//! block's work.
//!
//! Invariant: one sync in flight at most, in commit order. A commit hands
//! over its sync only after the one before finished (`Writer::settle`), so
//! control-file writes stay in order, and a sync's failure is reported by
//! the next step that settles, which poisons the store. (Asserted in
//! `sync_behind`, and on the thread in `Syncer::start`: each hint names a
//! durable end no lower than the one before.)

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use crate::crash_point;
use crate::error::{Error, Result};
use crate::format::control::Control;
use crate::io::File;
use crate::pack::ChunkSync;
use crate::store::{Repo, Writer, write_hint};

/// `SyncPolicy::Pipelined`: the thread that makes a commit durable (the
/// pack's fsync, then the control file's hint slot) while the caller goes
/// on. One sync at a time, in commit order: a commit waits for the sync
/// before it (`Writer::settle`) before it hands over its own.
pub(in crate::store) struct Syncer {
    jobs: Option<SyncSender<SyncJob>>,
    done: Receiver<Result<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

pub(in crate::store) struct SyncJob {
    pub(in crate::store) pack: ChunkSync,
    pub(in crate::store) control_file: Arc<dyn File>,
    pub(in crate::store) hint: Control,
}

impl Syncer {
    pub(in crate::store) fn start() -> Result<Syncer> {
        let (jobs, received) = sync_channel::<SyncJob>(1);
        let (report, done) = sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("pando-sync".into())
            .spawn(move || {
                let mut last_end = 0;
                for job in received {
                    assert!(job.hint.durable_end >= last_end, "syncs in commit order: the durable end never moves back");
                    last_end = job.hint.durable_end;
                    let result = job.pack.run().and_then(|()| {
                        crash_point::reach("after-data-sync");
                        write_hint(&*job.control_file, &job.hint)
                    });
                    if report.send(result).is_err() {
                        return;
                    }
                }
            })
            .map_err(Error::io("pando-sync", "spawn thread"))?;
        Ok(Syncer { jobs: Some(jobs), done, thread: Some(thread) })
    }

    pub(in crate::store) fn send(&self, job: SyncJob) -> Result<()> {
        self.jobs.as_ref().expect("open until dropped").send(job).map_err(|_| stopped())
    }

    /// The outcome of the sync handed over last.
    pub(in crate::store) fn wait(&self) -> Result<()> {
        self.done.recv().unwrap_or_else(|_| Err(stopped()))
    }
}

fn stopped() -> Error {
    Error::Invalid("the sync thread stopped".into())
}

impl Drop for Syncer {
    fn drop(&mut self) {
        // The thread ends once its queue is closed and its last sync done.
        self.jobs.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Repo {
    /// `SyncPolicy::Pipelined`: waits for the previous commit's sync (its
    /// failure is this commit's), then hands this one's to the sync thread.
    /// A checkpoint, when due, is made here, as `flush_locked` makes it.
    pub(in crate::store) fn sync_behind(&self, writer: &mut Writer) -> Result<()> {
        if writer.unflushed_index.len() as u64 >= self.read.options.checkpoint_commits {
            return self.flush_locked(writer, false);
        }
        self.write.guard(writer.settle())?;
        assert!(!writer.in_flight, "one sync in flight at most");
        let mut next = writer.control.clone();
        next.durable_end = self.read.pack.end();
        let hint = writer.next_hint(next);
        if writer.syncer.is_none() {
            writer.syncer = Some(self.write.guard(Syncer::start())?);
        }
        let job = SyncJob { pack: self.read.pack.syncing(), control_file: writer.control_file.clone(), hint: hint.clone() };
        self.write.guard(writer.syncer.as_ref().expect("started above").send(job))?;
        writer.in_flight = true;
        writer.control = hint;
        writer.unsynced_commits = 0;
        Ok(())
    }

    /// Waits until every commit returned is on disk (`SyncPolicy::Pipelined`).
    pub(in crate::store) fn wait_durable(&self) -> Result<()> {
        let Some(writer) = &self.write.writer else { return Ok(()) };
        let mut writer = writer.lock();
        self.write.guard(writer.settle())
    }
}
