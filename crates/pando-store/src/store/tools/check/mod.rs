//! The integrity check (`Store::check`, `pando check`): reads what the
//! store holds and reports every problem it finds with its file and
//! position, without changing anything.
//!
//! What is checked, beyond what opening the store checks (control slots,
//! index and dictionary entries, the mapping and the files it names, chunk
//! lengths):
//! - both synced control slots (an open reads past a damaged one, at the
//!   other's older state);
//! - `scan` (scope `All`): every record every file holds, read forward in
//!   8 MiB pieces: its checksum, its structure, that the records tile each
//!   region exactly; a commit record's hash is in the index, a dictionary
//!   record agrees with the dictionary.
//! - `walk` (both scopes): every record reachable from the commits in
//!   scope (one commit's tree, not its parents'; or every commit's),
//!   re-hashed from its own bytes and its pointers' hashes and
//!   compared with every claim made about it (the index key for a commit,
//!   the hash and position its referrers give), so content with a valid
//!   checksum but wrong bytes is found; plus what decoding cannot see alone
//!   (a tree inode's entry count against its children's, entries at the
//!   position their hash sends them, parents against the index).
//!
//! After a collection, collected commits are skipped; a reachable record
//! pointing to a collected one is a problem. References from unreachable
//! records are not followed: after a rolling collection such records may
//! point to collected ones.
//!
//! Invariants:
//! - Nothing is written: the store may be open read-only (tested by
//!   `checking_and_inspecting_write_nothing`).
//! - No panic on any bytes: damage is a [`Problem`], and the check goes on
//!   past it where it can (the damaged record's subtree is skipped), until
//!   `max_problems` are reported (tested by
//!   `no_damaged_byte_goes_unnoticed_or_panics`).
//! - Memory is bounded by the walk's frontier (the records referred to and
//!   not yet visited, with their claims), one 8 MiB window and the store's
//!   cache; there is no table of every object: the frontier drains as the
//!   walk visits it (asserted in `walk::walk`).
//! - A clean check walked each commit in scope once (asserted in `check`).

mod scan;
mod walk;

use pando_core::Hash;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::format::control;
use crate::format::record::RecordKind;
use crate::store::{Repo, Store, index_file};

/// What to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckScope {
    /// The records one commit reaches.
    Commit(Hash),
    /// Every record of every file, and the records every commit reaches.
    All,
}

/// Records counted by kind, with their bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordCounts {
    pub values: u64,
    pub value_patches: u64,
    pub trees: u64,
    pub patches: u64,
    pub blobs: u64,
    pub commits: u64,
    pub dicts: u64,
    pub bytes: u64,
}

impl RecordCounts {
    fn add(&mut self, kind: RecordKind, bytes: u64) {
        let counter = match kind {
            RecordKind::Values => &mut self.values,
            RecordKind::ValuesPatch => &mut self.value_patches,
            RecordKind::Tree => &mut self.trees,
            RecordKind::TreePatch => &mut self.patches,
            RecordKind::Blob => &mut self.blobs,
            RecordKind::Commit => &mut self.commits,
            RecordKind::Dict => &mut self.dicts,
        };
        *counter += 1;
        self.bytes += bytes;
    }

    pub fn records(&self) -> u64 {
        self.values + self.value_patches + self.trees + self.patches + self.blobs + self.commits + self.dicts
    }
}

/// The part of the check running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckPhase {
    /// Reading every file forward (scope `All`).
    Scan,
    /// Re-hashing reachable records, from the highest offset down.
    Walk,
}

/// Progress of a check: `done` of `total` bytes (of the files for a scan,
/// of the offsets left to walk down for a walk).
#[derive(Clone, Copy, Debug)]
pub struct CheckProgress {
    pub phase: CheckPhase,
    pub done: u64,
    pub total: u64,
}

/// One problem: the file and the position in it, the record's logical
/// offset in the pack if it is about a record, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub file: String,
    pub position: u64,
    pub offset: Option<u64>,
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(offset) => write!(f, "{}:{} (offset {offset}): {}", self.file, self.position, self.what),
            None => write!(f, "{}:{}: {}", self.file, self.position, self.what),
        }
    }
}

impl Problem {
    /// The problem an error of opening the store names (a damaged control
    /// slot, index entry, mapping, a truncated chunk...).
    pub fn of_error(error: &Error) -> Problem {
        let (file, position, what) = match error {
            Error::Corrupt { file, offset, reason } => (file.clone(), *offset, reason.clone()),
            Error::ChecksumMismatch { file, offset, .. } => (file.clone(), *offset, error.to_string()),
            Error::Io { file, .. } | Error::UnsupportedVersion { file, .. } => (file.clone(), 0, error.to_string()),
            other => ("store".to_string(), 0, other.to_string()),
        };
        Problem { file, position, offset: None, what }
    }
}

/// What a check found.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    /// Commits whose trees were re-hashed.
    pub commits: u64,
    /// Records read by the scan of every file (scope `All`).
    pub scanned: RecordCounts,
    /// Reachable records re-hashed.
    pub walked: RecordCounts,
    /// Bytes of the encodings hashed to re-hash them (a tree patch is
    /// hashed as the whole tree inode it stands for).
    pub hashed_bytes: u64,
    /// Bytes read from the files (the scan's and the walk's reads).
    pub bytes_read: u64,
    /// Bytes of the pack's files.
    pub pack_bytes: u64,
    pub duration: Duration,
    /// The problems found, at most `max_problems`.
    pub problems: Vec<Problem>,
    /// True if the check stopped at `max_problems`.
    pub stopped: bool,
}

impl CheckReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The problems found so far, up to a cap.
pub(in crate::store) struct Problems {
    list: Vec<Problem>,
    cap: usize,
}

impl Problems {
    fn push(&mut self, file: impl Into<String>, position: u64, offset: Option<u64>, what: impl Into<String>) {
        if self.list.len() < self.cap {
            self.list.push(Problem { file: file.into(), position, offset, what: what.into() });
        }
    }

    fn full(&self) -> bool {
        self.list.len() >= self.cap
    }
}

// Every public method is documented: an embedder reads these first.
#[deny(missing_docs)]
impl Store {
    /// Checks the store (see the module `store::check`): `scope` says which
    /// records; at most `max_problems` problems are reported, then the check
    /// stops. `progress` is called now and then. An error is returned only
    /// for a commit the store does not have (or collected); damage is
    /// reported as problems.
    pub fn check(&self, scope: CheckScope, max_problems: usize, progress: &mut dyn FnMut(CheckProgress)) -> Result<CheckReport> {
        crate::error::l1_only(self.layout(), "the integrity check")?;
        check(&self.repo, scope, max_problems.max(1), progress)
    }
}

fn check(repo: &Repo, scope: CheckScope, max_problems: usize, progress: &mut dyn FnMut(CheckProgress)) -> Result<CheckReport> {
    let started = Instant::now();
    let mut problems = Problems { list: Vec::new(), cap: max_problems };
    let roots: Vec<(Hash, u64)> = match scope {
        CheckScope::Commit(hash) => match repo.read.index.read().get(&hash) {
            None => return Err(Error::UnknownCommit(hash)),
            Some(&index_file::COLLECTED) => return Err(Error::CollectedCommit(hash)),
            Some(&offset) => vec![(hash, offset)],
        },
        CheckScope::All => {
            repo.read.index.read().iter().filter(|(_, offset)| **offset != index_file::COLLECTED).map(|(h, o)| (*h, *o)).collect()
        }
    };
    let in_scope = roots.len() as u64;
    let mut report = CheckReport { pack_bytes: repo.read.pack.size_bytes(), ..CheckReport::default() };
    check_control(repo, &mut problems);
    check_names(repo, &mut problems);
    let walked = if scope == CheckScope::All {
        // The scan reads every file forward, the walk reads backwards and
        // hashes: the scan runs beside it, on a thread of its own.
        let regions = repo.read.pack.regions();
        let total = regions.iter().map(|r| r.end - r.start).sum();
        let done = AtomicU64::new(0);
        let walker = std::thread::current();
        let (walked, scanned) = std::thread::scope(|threads| {
            let scanner = threads.spawn(|| {
                let mut found = Problems { list: Vec::new(), cap: max_problems };
                let mut counts = RecordCounts::default();
                let bytes_read = scan::scan(repo, regions, &mut found, &mut counts, &done);
                walker.unpark();
                (found, counts, bytes_read)
            });
            let walked = walk::walk(repo, roots, &mut problems, progress);
            while !scanner.is_finished() {
                progress(CheckProgress { phase: CheckPhase::Scan, done: done.load(Ordering::Relaxed), total });
                std::thread::park_timeout(Duration::from_millis(100));
            }
            let scanned = scanner.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (walked, scanned)
        });
        let (mut found, counts, bytes_read) = scanned;
        report.scanned = counts;
        report.bytes_read += bytes_read;
        // The scan's problems first, in file order; a damaged record the
        // walk reached too is told once, by the walk, which says from where.
        let walk_found = &problems.list;
        found.list.retain(|p| !walk_found.iter().any(|w| (&w.file, w.position) == (&p.file, p.position)));
        found.list.append(&mut problems.list);
        found.list.truncate(max_problems);
        problems = found;
        walked
    } else {
        walk::walk(repo, roots, &mut problems, progress)
    };
    report.walked = walked.counts;
    report.commits = walked.commits;
    report.bytes_read += walked.bytes_read;
    report.hashed_bytes = walked.hashed_bytes;
    report.stopped = problems.full();
    report.problems = problems.list;
    report.duration = started.elapsed();
    if report.is_clean() {
        assert_eq!(report.commits, report.walked.commits, "a clean walk verifies each commit record it visits");
        assert_eq!(report.commits, in_scope, "a clean walk reaches each commit in scope once");
    }
    Ok(report)
}

/// Both synced control slots hold a valid state. A damaged one (a crash
/// during a control write, or damage) is read past: the store is then read
/// at an older state, which may not name the newest commits. A slot seen
/// damaged is read again a few times first: a writer in another process
/// may be writing it.
fn check_control(repo: &Repo, problems: &mut Problems) {
    let read = || -> Result<Vec<u8>> {
        let file = repo.read.storage.open(crate::store::open::CONTROL, false).map_err(Error::io("control", "open"))?;
        crate::io::read_all(&*file).map_err(Error::io("control", "read"))
    };
    let mut damaged = Vec::new();
    for attempt in 0..3 {
        let bytes = match read() {
            Ok(bytes) => bytes,
            Err(e) => return problems.push("control", 0, None, e.to_string()),
        };
        let now: Vec<_> = match control::decode(&bytes) {
            Ok(slots) => slots.damaged_synced().cloned().collect(),
            Err((first, second)) => vec![(0, first), (1, second)],
        };
        damaged = if attempt == 0 { now } else { now.into_iter().filter(|d| damaged.contains(d)).collect() };
        if damaged.is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for (slot, error) in damaged {
        problems.push(
            "control",
            (slot * control::SLOT_SIZE) as u64,
            None,
            format!(
                "synced slot {slot} is damaged ({error:?}): the store is read at the other slot's older state, which may \
                 not name the newest commits; a writable open, or `pando check --repair`, writes it again and takes in \
                 the whole commits after that state"
            ),
        );
    }
}

/// The last commit the control file names, and the branches, name commits
/// of the index.
fn check_names(repo: &Repo, problems: &mut Problems) {
    let last = repo.read.last_commit.load(Ordering::Acquire);
    if last != u64::MAX {
        match repo.read.read_commit_at(last) {
            Ok(record) => {
                let hash = record.info().hash();
                if repo.read.index.read().get(&hash) != Some(&last) {
                    problems.push("control", 0, Some(last), format!("the last commit {hash} is not in the index at this offset"));
                }
            }
            Err(e) => problems.push("control", 0, Some(last), format!("the last commit cannot be read: {e}")),
        }
    }
    for (name, hash) in repo.read.branches.read().iter() {
        if !repo.read.index.read().contains_key(hash) {
            problems.push("branches", 0, None, format!("branch {name:?} names {hash}, which the index does not know"));
        }
    }
}
