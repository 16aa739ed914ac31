//! A storage that holds one thread's reads or writes while a flag is set,
//! so that a test can act while that thread is stopped part way (a
//! collection still running, a staged record not written yet), and that
//! counts the chunk files created.

use pando_store::io::{File, MemStorage, Storage};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Which of the thread's operations wait.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    Reads,
    Writes,
}

pub struct HeldStorage {
    inner: MemStorage,
    gate: Arc<Gate>,
    chunks_created: AtomicUsize,
}

struct Gate {
    thread: &'static str,
    what: Hold,
    closed: AtomicBool,
    /// Operations that waited at the gate.
    stopped: AtomicUsize,
}

impl Gate {
    fn pass(&self, what: Hold) {
        if what != self.what || !std::thread::current().name().is_some_and(|name| name.starts_with(self.thread)) {
            return;
        }
        if self.closed.load(Ordering::Acquire) {
            self.stopped.fetch_add(1, Ordering::AcqRel);
        }
        while self.closed.load(Ordering::Acquire) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

impl HeldStorage {
    /// The `what` of the threads whose names start with `thread` (a
    /// collection's `pando-gc` and its `pando-gc-work`) wait until
    /// [`Self::release`].
    pub fn new(thread: &'static str, what: Hold) -> HeldStorage {
        let gate = Gate { thread, what, closed: AtomicBool::new(true), stopped: AtomicUsize::new(0) };
        HeldStorage { inner: MemStorage::new(), gate: Arc::new(gate), chunks_created: AtomicUsize::new(0) }
    }

    /// Lets the held operations go on (call it before any assertion: a
    /// panic would otherwise wait forever for the held thread).
    pub fn release(&self) {
        self.gate.closed.store(false, Ordering::Release);
    }

    /// How many operations waited so far.
    pub fn stopped(&self) -> usize {
        self.gate.stopped.load(Ordering::Acquire)
    }

    pub fn chunks_created(&self) -> usize {
        self.chunks_created.load(Ordering::Relaxed)
    }
}

struct HeldFile {
    inner: Arc<dyn File>,
    gate: Arc<Gate>,
}

impl File for HeldFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.gate.pass(Hold::Reads);
        self.inner.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.gate.pass(Hold::Writes);
        self.inner.write_all_at(buf, offset)
    }
    fn sync(&self) -> std::io::Result<()> {
        self.inner.sync()
    }
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn truncate(&self, len: u64) -> std::io::Result<()> {
        self.inner.truncate(len)
    }
}

impl Storage for HeldStorage {
    fn open(&self, name: &str, create: bool) -> std::io::Result<Arc<dyn File>> {
        if create && name.starts_with("chunk-") && !self.inner.exists(name)? {
            self.chunks_created.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Arc::new(HeldFile { inner: self.inner.open(name, create)?, gate: self.gate.clone() }))
    }
    fn exists(&self, name: &str) -> std::io::Result<bool> {
        self.inner.exists(name)
    }
    fn list(&self) -> std::io::Result<Vec<String>> {
        self.inner.list()
    }
    fn remove(&self, name: &str) -> std::io::Result<()> {
        self.inner.remove(name)
    }
    fn rename(&self, source: &str, target: &str) -> std::io::Result<()> {
        self.inner.rename(source, target)
    }
    fn sync_dir(&self) -> std::io::Result<()> {
        self.inner.sync_dir()
    }
    fn lock(&self, name: &str) -> std::io::Result<Box<dyn std::any::Any + Send + Sync>> {
        self.inner.lock(name)
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}
