//! A read-only store following the writer of another process.
//!
//! A reader sees the state of the control slot it last read: every record
//! below that slot's durable end was written (and synced) before the slot
//! was, so a reader never meets a half-written record, and it takes no
//! lock the writer waits for. `refresh` reads the control file again and takes
//! in what changed:
//! - commits only: the new chunks are opened, the records after the old
//!   durable end are scanned for commits and dictionary entries;
//! - a collection step (another generation): its mapping is read, the new
//!   layout installed as the writer's own switch does, and the index and
//!   dictionary are read again from their files.
//!
//! Invariants:
//! - What a reader shows only changes in `refresh` (and in the lookups of an
//!   unknown commit, which refresh first): before it, every commit it had
//!   stays readable, through the handles of files the writer may have
//!   removed since; after it, commits a collection removed are
//!   `CollectedCommit` (tested by
//!   `a_reader_in_another_process_follows_collections`).
//! - The pack learns the new end before the index learns the new commits,
//!   so a commit found in the index can always be read (asserted in
//!   `follow`).
//! - If the writer moves on while a reader follows (a file of the step it
//!   read is already gone), the reader reads the control file again and
//!   follows the newer state (tested by
//!   `a_reader_in_another_process_follows_collections`).
//! - A reader never goes back: a slot older than the one it took in (the
//!   hint slot torn by a rewrite in progress) is nothing new (tested by
//!   `a_reader_meeting_a_torn_hint_sees_nothing_new`).

use std::sync::atomic::Ordering;

use super::ReadSide;
use crate::error::{Error, Result};
use crate::format::control::{self, Control};
use crate::io::read_all;
use crate::store::index_file;
use crate::store::open::{CONTROL, DICT, load_commits, load_mapping, read_branches, scan_commits};

/// Attempts to follow a writer that keeps moving on.
const ATTEMPTS: usize = 8;

impl ReadSide {
    /// Reads the control file and takes in what the writer made durable
    /// since; returns how many commits appeared. A writable store has
    /// nothing to follow.
    pub(in crate::store) fn refresh(&self) -> Result<u64> {
        let Some(follower) = &self.follower else { return Ok(0) };
        let mut seen = follower.lock();
        let mut attempt = 0;
        loop {
            let control = self.read_control()?;
            // Slots' seqs only grow. An older one is what a read meets while
            // the writer rewrites the hint slot (torn, so skipped): nothing
            // new yet, not a writer going back.
            if control.seq <= seen.seq {
                return Ok(0);
            }
            match self.follow(&seen, &control) {
                Ok(added) => {
                    *seen = control;
                    return Ok(added);
                }
                Err(e @ (Error::Corrupt { .. } | Error::Io { .. })) => {
                    attempt += 1;
                    if attempt == ATTEMPTS || self.read_control()?.seq == control.seq {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn read_control(&self) -> Result<Control> {
        let file = self.storage.open(CONTROL, false).map_err(Error::io(CONTROL, "open"))?;
        let bytes = read_all(&*file).map_err(Error::io(CONTROL, "read"))?;
        control::decode(&bytes)
            .map(|slots| slots.newest)
            .map_err(|(a, b)| Error::corrupt(CONTROL, 0, format!("no valid control slot ({a:?}, {b:?})")))
    }

    fn follow(&self, seen: &Control, control: &Control) -> Result<u64> {
        self.pack.follow(control.durable_end)?;
        let new_layout = control.generation != seen.generation
            || control.index_generation != seen.index_generation
            || control.first_chunk_start != seen.first_chunk_start;
        let added = if new_layout {
            if control.generation > 0 {
                let runs = load_mapping(&*self.storage, control.generation, control.first_chunk_start)?;
                self.pack.follow_layout(control.generation, runs, control.first_chunk_start, control.archive())?;
            }
            let index_name = index_file::name(control.index_generation);
            let index_file = self.storage.open(&index_name, false).map_err(Error::io(&index_name, "open"))?;
            let dict_file = self.storage.open(DICT, false).map_err(Error::io(DICT, "open"))?;
            let loaded = load_commits(&self.pack, control, control.durable_end, &*index_file, &*dict_file, false)?;
            let before = self.index.read().len() as u64;
            let collected = loaded.index.values().filter(|&&offset| offset == index_file::COLLECTED).count() as u64;
            let end = self.pack.end();
            assert!(
                loaded.index.values().all(|&offset| offset == index_file::COLLECTED || offset < end),
                "the pack learns the new end before the index learns the commits"
            );
            // Ids never change: inodes decoded with the old dictionary stay right.
            *self.dict.write() = loaded.dict;
            *self.index.write() = loaded.index;
            self.collected_commits.store(collected, Ordering::Relaxed);
            control.commits.saturating_sub(before)
        } else {
            let mut found = Vec::new();
            let mut scanned = std::collections::HashMap::new();
            scan_commits(&self.pack, seen.durable_end, control.durable_end, &mut scanned, &mut self.dict.write(), &mut found)?;
            let end = self.pack.end();
            assert!(
                scanned.values().all(|&offset| offset < end),
                "the pack learns the new end before the index learns the commits"
            );
            let mut index = self.index.write();
            index.extend(scanned);
            if index.len() as u64 != control.commits {
                return Err(Error::corrupt(
                    CONTROL,
                    0,
                    format!("{} commits found, the control file says {}", index.len(), control.commits),
                ));
            }
            found.len() as u64
        };
        let last = if control.commits == 0 { u64::MAX } else { control.last_commit };
        self.last_commit.store(last, Ordering::Release);
        *self.branches.write() = read_branches(&*self.storage, false)?;
        Ok(added)
    }
}
