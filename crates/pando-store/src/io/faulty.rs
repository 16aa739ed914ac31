//! Simulated storage for crash and fault tests (docs/TESTING.md, test 2).
//!
//! Each file has a durable image and a volatile image; writes go to the
//! volatile image and are remembered as pending until `sync`. The directory
//! likewise has a durable listing that only `sync_dir` updates. A simulated
//! crash ([`FaultyStorage::crash`]) builds the storage a reboot would see:
//! the durable listing, each file's durable image, and each pending write
//! kept, dropped or torn according to a seeded random choice.
//!
//! Faults: the Nth mutating operation (write, sync, truncate, rename,
//! directory sync) fails with EIO, ENOSPC, or writes only a prefix then
//! fails; reads can fail with EIO; bits can be flipped at rest; from the
//! Nth on, every mutating operation fails (`die_at`: a process that died
//! there, whose clean-up never ran).
//!
//! Invariants:
//! - Everything is deterministic for a given seed and plan (tested by
//!   `a_crash_is_the_same_for_the_same_seed`).
//! - A file's pending operations, replayed over its durable image, give its
//!   volatile image's length (asserted in `crash`): the log a crash draws
//!   from is the one the process saw.

use super::memory::{read_exact_from, write_into};
use super::{File, Storage};
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::io;
use std::sync::Arc;

/// What happens to unsynced writes at a simulated crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashMode {
    /// Every pending write is lost.
    DropAll,
    /// Every pending write reached the disk.
    KeepAll,
    /// Each pending write is kept, dropped or torn at random.
    Random,
}

/// The kind of an injected failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The operation fails with EIO and does nothing.
    Eio,
    /// The operation fails with ENOSPC and does nothing.
    NoSpace,
    /// A write stores a prefix of its bytes, then fails with EIO.
    ShortWrite,
}

/// Which operations fail.
#[derive(Clone, Debug, Default)]
pub struct FaultPlan {
    /// Fail the mutating operation with this index (0-based), counting
    /// writes, syncs, truncates, renames, removes and directory syncs.
    pub fail_op: Option<(u64, FaultKind)>,
    /// Fail every read after this many reads with EIO.
    pub fail_reads_after: Option<u64>,
}

#[derive(Clone)]
enum Pending {
    Write { offset: u64, data: Vec<u8> },
    Truncate(u64),
}

#[derive(Default)]
struct FileState {
    durable: Vec<u8>,
    volatile: Vec<u8>,
    pending: Vec<Pending>,
}

struct FaultyFile {
    state: Mutex<FileState>,
    shared: Arc<Shared>,
}

struct Shared {
    plan: Mutex<FaultPlan>,
    mutating_ops: Mutex<u64>,
    /// Every mutating operation from this index on fails (`die_at`).
    dies_at: Mutex<Option<u64>>,
    reads: Mutex<u64>,
    injected: Mutex<Vec<String>>,
}

impl Shared {
    /// Counts a mutating operation and returns the fault to inject, if any.
    fn next_op(&self, what: &str) -> Option<FaultKind> {
        let mut ops = self.mutating_ops.lock();
        let index = *ops;
        *ops += 1;
        let fault = match self.plan.lock().fail_op {
            Some((at, kind)) if at == index => Some(kind),
            _ if self.dies_at.lock().is_some_and(|at| index >= at) => Some(FaultKind::Eio),
            _ => None,
        };
        if let Some(kind) = fault {
            self.injected.lock().push(format!("{kind:?} on {what} (operation {index})"));
        }
        fault
    }
}

fn fault_error(kind: FaultKind) -> io::Error {
    match kind {
        FaultKind::NoSpace => io::Error::new(io::ErrorKind::StorageFull, "injected ENOSPC"),
        _ => io::Error::other("injected EIO"),
    }
}

impl File for FaultyFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        {
            let mut reads = self.shared.reads.lock();
            *reads += 1;
            if self.shared.plan.lock().fail_reads_after.is_some_and(|n| *reads > n) {
                return Err(io::Error::other("injected EIO on read"));
            }
        }
        read_exact_from(&self.state.lock().volatile, buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let fault = self.shared.next_op("write");
        let data = match fault {
            Some(FaultKind::ShortWrite) => &buf[..buf.len() / 2],
            Some(kind) => return Err(fault_error(kind)),
            None => buf,
        };
        let mut state = self.state.lock();
        write_into(&mut state.volatile, data, offset);
        state.pending.push(Pending::Write { offset, data: data.to_vec() });
        match fault {
            Some(kind) => Err(fault_error(kind)),
            None => Ok(()),
        }
    }
    fn sync(&self) -> io::Result<()> {
        if let Some(kind) = self.shared.next_op("sync") {
            // A failed fsync may have written any part of the pending data:
            // the store must not trust either outcome.
            return Err(fault_error(kind));
        }
        let mut state = self.state.lock();
        state.durable = state.volatile.clone();
        state.pending.clear();
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.state.lock().volatile.len() as u64)
    }
    fn truncate(&self, len: u64) -> io::Result<()> {
        if let Some(kind) = self.shared.next_op("truncate") {
            return Err(fault_error(kind));
        }
        let mut state = self.state.lock();
        state.volatile.resize(len as usize, 0);
        state.pending.push(Pending::Truncate(len));
        Ok(())
    }
}

/// Simulated storage with fault injection and crash simulation.
#[derive(Clone)]
pub struct FaultyStorage {
    live: Arc<Mutex<HashMap<String, Arc<FaultyFile>>>>,
    durable: Arc<Mutex<HashMap<String, Arc<FaultyFile>>>>,
    shared: Arc<Shared>,
}

impl Default for FaultyStorage {
    fn default() -> Self {
        FaultyStorage::new()
    }
}

impl FaultyStorage {
    pub fn new() -> FaultyStorage {
        FaultyStorage {
            live: Arc::default(),
            durable: Arc::default(),
            shared: Arc::new(Shared {
                plan: Mutex::new(FaultPlan::default()),
                mutating_ops: Mutex::new(0),
                dies_at: Mutex::new(None),
                reads: Mutex::new(0),
                injected: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Replaces the fault plan; operation counting restarts from zero.
    pub fn set_plan(&self, plan: FaultPlan) {
        *self.shared.plan.lock() = plan;
        *self.shared.mutating_ops.lock() = 0;
        *self.shared.reads.lock() = 0;
    }

    /// From the mutating operation with index `op` on (counted as the
    /// plan's), every one fails with EIO and does nothing, as if the
    /// process had died just before it: no clean-up after a failure
    /// reaches the storage, and [`FaultyStorage::crash`] then shows what a
    /// reboot finds. `None` ends it.
    pub fn die_at(&self, op: Option<u64>) {
        *self.shared.dies_at.lock() = op;
    }

    /// Number of mutating operations since the plan was set.
    pub fn mutating_ops(&self) -> u64 {
        *self.shared.mutating_ops.lock()
    }

    /// Descriptions of the faults injected so far.
    pub fn injected(&self) -> Vec<String> {
        self.shared.injected.lock().clone()
    }

    /// The storage a reboot would see after a crash now.
    pub fn crash(&self, mode: CrashMode, seed: u64) -> FaultyStorage {
        let mut rng = SmallRng::seed_from_u64(seed);
        let after = FaultyStorage::new();
        let mut names: Vec<(String, Arc<FaultyFile>)> = self.durable.lock().iter().map(|(n, f)| (n.clone(), f.clone())).collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, file) in names {
            let state = file.state.lock();
            let mut image = state.durable.clone();
            for pending in &state.pending {
                let keep = match mode {
                    CrashMode::DropAll => continue,
                    CrashMode::KeepAll => None,
                    CrashMode::Random => match rng.gen_range(0..3) {
                        0 => continue,
                        1 => None,
                        _ => Some(()),
                    },
                };
                match pending {
                    Pending::Write { offset, data } => {
                        let len = if keep.is_some() && !data.is_empty() { rng.gen_range(0..data.len()) } else { data.len() };
                        write_into(&mut image, &data[..len], *offset);
                    }
                    Pending::Truncate(len) => image.resize(*len as usize, 0),
                }
            }
            if mode == CrashMode::KeepAll {
                assert_eq!(image.len(), state.volatile.len(), "pending operations replayed give the file's length");
            }
            let copy = Arc::new(FaultyFile {
                state: Mutex::new(FileState { durable: image.clone(), volatile: image, pending: Vec::new() }),
                shared: after.shared.clone(),
            });
            after.live.lock().insert(name.clone(), copy.clone());
            after.durable.lock().insert(name, copy);
        }
        after
    }

    /// Flips one bit of a file, in both its durable and volatile images.
    pub fn flip_bit(&self, name: &str, bit: u64) -> io::Result<()> {
        let file = self.live.lock().get(name).cloned().ok_or(io::ErrorKind::NotFound)?;
        let mut state = file.state.lock();
        let byte = (bit / 8) as usize;
        if byte >= state.volatile.len() {
            return Err(io::Error::other("bit past end of file"));
        }
        state.volatile[byte] ^= 1 << (bit % 8);
        if byte < state.durable.len() {
            state.durable[byte] ^= 1 << (bit % 8);
        }
        Ok(())
    }

    /// Length of a file as currently visible.
    pub fn file_len(&self, name: &str) -> Option<u64> {
        self.live.lock().get(name).map(|f| f.state.lock().volatile.len() as u64)
    }
}

impl Storage for FaultyStorage {
    fn open(&self, name: &str, create: bool) -> io::Result<Arc<dyn File>> {
        let mut live = self.live.lock();
        if let Some(file) = live.get(name) {
            return Ok(file.clone());
        }
        if !create {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("no file {name}")));
        }
        let file = Arc::new(FaultyFile { state: Mutex::default(), shared: self.shared.clone() });
        live.insert(name.to_string(), file.clone());
        Ok(file)
    }
    fn exists(&self, name: &str) -> io::Result<bool> {
        Ok(self.live.lock().contains_key(name))
    }
    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.live.lock().keys().cloned().collect())
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        if let Some(kind) = self.shared.next_op("remove") {
            return Err(fault_error(kind));
        }
        self.live.lock().remove(name).map(|_| ()).ok_or_else(|| io::ErrorKind::NotFound.into())
    }
    fn rename(&self, source: &str, target: &str) -> io::Result<()> {
        if let Some(kind) = self.shared.next_op("rename") {
            return Err(fault_error(kind));
        }
        let mut live = self.live.lock();
        let file = live.remove(source).ok_or(io::ErrorKind::NotFound)?;
        live.insert(target.to_string(), file);
        Ok(())
    }
    fn sync_dir(&self) -> io::Result<()> {
        if let Some(kind) = self.shared.next_op("sync_dir") {
            return Err(fault_error(kind));
        }
        *self.durable.lock() = self.live.lock().clone();
        Ok(())
    }
    fn lock(&self, _name: &str) -> io::Result<Box<dyn std::any::Any + Send + Sync>> {
        // One process: the store's writer mutex is the only lock needed.
        Ok(Box::new(()))
    }
    fn describe(&self) -> String {
        "simulated storage".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_keeps_only_durable_state() {
        let storage = FaultyStorage::new();
        let file = storage.open("a", true).unwrap();
        file.write_all_at(b"hello", 0).unwrap();
        file.sync().unwrap();
        // Not durable yet: the directory entry was never synced.
        assert!(!storage.crash(CrashMode::KeepAll, 0).exists("a").unwrap());
        storage.sync_dir().unwrap();
        file.write_all_at(b"world", 5).unwrap();
        let after = storage.crash(CrashMode::DropAll, 0);
        let read = after.open("a", false).unwrap();
        assert_eq!(read.len().unwrap(), 5);
        let after = storage.crash(CrashMode::KeepAll, 0);
        assert_eq!(after.open("a", false).unwrap().len().unwrap(), 10);
    }

    #[test]
    fn injected_faults_fire_once() {
        let storage = FaultyStorage::new();
        let file = storage.open("a", true).unwrap();
        storage.set_plan(FaultPlan { fail_op: Some((1, FaultKind::ShortWrite)), fail_reads_after: None });
        file.write_all_at(b"abcd", 0).unwrap();
        assert!(file.write_all_at(b"efgh", 4).is_err());
        assert_eq!(file.len().unwrap(), 6);
        file.sync().unwrap();
        assert_eq!(storage.injected().len(), 1);
    }

    /// The same operations, plan and seed give the same storage after a
    /// crash, whatever the order the files were created or the map holds them.
    #[test]
    fn a_crash_is_the_same_for_the_same_seed() {
        let run = |names: &[&str]| {
            let storage = FaultyStorage::new();
            for name in names {
                storage.open(name, true).unwrap();
            }
            storage.sync_dir().unwrap();
            storage.set_plan(FaultPlan { fail_op: Some((5, FaultKind::ShortWrite)), fail_reads_after: None });
            for (k, name) in ["a", "b", "c", "d"].iter().enumerate() {
                let file = storage.open(name, false).unwrap();
                for i in 0..4u64 {
                    let _ = file.write_all_at(&[k as u8 + 1; 100], i * 60);
                }
                if k == 1 {
                    file.sync().unwrap();
                    let _ = file.write_all_at(b"after the sync", 10);
                }
            }
            let after = storage.crash(CrashMode::Random, 42);
            let mut files: Vec<(String, Vec<u8>)> = ["a", "b", "c", "d"]
                .iter()
                .map(|name| (name.to_string(), super::super::read_all(&*after.open(name, false).unwrap()).unwrap()))
                .collect();
            files.push(("injected".into(), storage.injected().join(";").into_bytes()));
            files
        };
        let first = run(&["a", "b", "c", "d"]);
        assert_eq!(run(&["d", "c", "b", "a"]), first);
        assert_eq!(run(&["b", "d", "a", "c"]), first);
        assert_ne!(first[0].1, first[2].1, "the files differ, so a mix-up would show");
    }
}
