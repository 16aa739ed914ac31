//! Writing a trace of a store's use, replayable (irmin's `IrmRepBT`).
//!
//! A store opened with `Options::trace_file` writes one row per call made
//! through its API: reads and updates of trees taken from the store (each
//! tree value is a context of the trace), checkouts and commits. Rows are
//! written with `Keep` scopes as they happen; closing the store rewrites
//! the file once with `Forget` at every last occurrence.
//!
//! What the format cannot express is counted as a gap and reported, never
//! silently dropped: reads of subtrees, and `add_tree` of a tree that was
//! not read with `find_tree` from the same context (that one is a `Copy`).
//!
//! Invariant: a failure to write the trace never fails a store operation;
//! it is reported by [`Tracer::finish`] (tested by
//! `a_failed_trace_write_is_reported_by_finish`).

use pando_core::Hash;
use pando_core::trace::{self, ContextId, Row, Scoper};
use pando_core::varint;
use parking_lot::Mutex;
use std::io::{self, BufRead, Read, Write};
use std::path::{Path, PathBuf};

use crate::io::fs as fs_io;

/// The author of the commits a replay makes (the trace does not record it).
pub const TEZOS_AUTHOR: &str = "Tezos";

/// Where trees send the rows they record.
pub trait TraceSink: Send + Sync {
    /// A new context id.
    fn fresh_context(&self) -> ContextId;
    fn write(&self, row: &Row);
    /// A call the trace format cannot express.
    fn gap(&self, what: &str);
    /// Notes a commit made during the recording.
    fn known(&self, commit: Hash);
    /// Whether a replay of the recording can know this commit.
    fn is_known(&self, commit: &Hash) -> bool;
}

struct State {
    out: io::BufWriter<Box<dyn Write + Send>>,
    /// Commits made during the recording.
    known: std::collections::HashSet<Hash>,
    next_ctx: ContextId,
    rows: u64,
    gaps: u64,
    first_gap: Option<String>,
    error: Option<io::Error>,
    buf: Vec<u8>,
}

/// Writes the rows of one store instance.
pub struct Tracer {
    path: PathBuf,
    state: Mutex<State>,
    finished: std::sync::atomic::AtomicBool,
}

/// What a recording wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceSummary {
    pub path: PathBuf,
    pub rows: u64,
    /// Calls the format cannot express, and the first of them.
    pub gaps: u64,
    pub first_gap: Option<String>,
}

impl Tracer {
    pub fn create(path: &Path) -> io::Result<Tracer> {
        let mut out = io::BufWriter::with_capacity(1 << 20, fs_io::create_file(path)?);
        out.write_all(&trace::file_header())?;
        Ok(Tracer {
            path: path.to_path_buf(),
            // Context 0 is the empty tree of a fresh store.
            state: Mutex::new(State {
                out,
                known: Default::default(),
                next_ctx: 1,
                rows: 0,
                gaps: 0,
                first_gap: None,
                error: None,
                buf: Vec::new(),
            }),
            finished: std::sync::atomic::AtomicBool::new(false),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// False once the recording is finished.
    pub fn is_tracing(&self) -> bool {
        !self.finished.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Flushes the rows and rewrites the file with `Forget` scopes; later
    /// calls are not recorded. `None` if it was already finished.
    pub fn finish(&self) -> io::Result<Option<TraceSummary>> {
        let mut state = self.state.lock();
        if self.finished.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return Ok(None);
        }
        if let Some(e) = state.error.take() {
            return Err(e);
        }
        state.out.flush()?;
        scope_file(&self.path)?;
        Ok(Some(TraceSummary { path: self.path.clone(), rows: state.rows, gaps: state.gaps, first_gap: state.first_gap.clone() }))
    }
}

impl TraceSink for Tracer {
    fn fresh_context(&self) -> ContextId {
        let mut state = self.state.lock();
        let id = state.next_ctx;
        state.next_ctx += 1;
        id
    }

    fn write(&self, row: &Row) {
        let mut state = self.state.lock();
        if state.error.is_some() || !self.is_tracing() {
            return;
        }
        let mut buf = std::mem::take(&mut state.buf);
        buf.clear();
        trace::append_row(&mut buf, row);
        if let Err(e) = state.out.write_all(&buf) {
            state.error = Some(e);
        }
        state.buf = buf;
        state.rows += 1;
    }

    fn gap(&self, what: &str) {
        let mut state = self.state.lock();
        state.gaps += 1;
        state.first_gap.get_or_insert_with(|| what.to_string());
    }

    fn known(&self, commit: Hash) {
        self.state.lock().known.insert(commit);
    }

    fn is_known(&self, commit: &Hash) -> bool {
        self.state.lock().known.contains(commit)
    }
}

/// Reads the rows of a trace file written by this module; a file whose
/// header or rows are not what it writes is an `InvalidData` error.
fn read_rows(path: &Path, f: &mut dyn FnMut(u64, Row) -> io::Result<()>) -> io::Result<()> {
    let mut input = io::BufReader::with_capacity(1 << 20, fs_io::open_file(path)?);
    let mut header = vec![0u8; trace::file_header().len()];
    input.read_exact(&mut header)?;
    if header != trace::file_header() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a trace of this recorder: its header is not IrmRepBT version 0",
        ));
    }
    let mut index = 0;
    let mut body = Vec::new();
    while !input.fill_buf()?.is_empty() {
        // A LEB128 length takes 10 bytes at most.
        let mut len_bytes = Vec::new();
        while len_bytes.len() < 10 {
            let mut byte = [0u8];
            input.read_exact(&mut byte)?;
            len_bytes.push(byte[0]);
            if byte[0] & 0x80 == 0 {
                break;
            }
        }
        let len = varint::read_u64(&len_bytes, &mut 0).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        // The body grows as its bytes come: a damaged length cannot ask
        // for more memory than the file holds.
        body.clear();
        (&mut input).take(len).read_to_end(&mut body)?;
        if (body.len() as u64) < len {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("row {index}: {len} bytes, the file ends first")));
        }
        let row = Row::decode(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        f(index, row)?;
        index += 1;
    }
    Ok(())
}

/// Rewrites a trace with `Forget` at every last occurrence (two passes,
/// into a temporary file renamed over the original).
pub fn scope_file(path: &Path) -> io::Result<()> {
    let mut scoper = Scoper::default();
    read_rows(path, &mut |index, row| {
        scoper.note(index, &row);
        Ok(())
    })?;
    let temp = path.with_extension("scoping");
    {
        let mut out = io::BufWriter::with_capacity(1 << 20, fs_io::create_file(&temp)?);
        out.write_all(&trace::file_header())?;
        let mut buf = Vec::new();
        read_rows(path, &mut |index, mut row| {
            scoper.apply(index, &mut row);
            buf.clear();
            trace::append_row(&mut buf, &row);
            out.write_all(&buf)
        })?;
        out.flush()?;
    }
    fs_io::replace_file(&temp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pando_core::trace::Scope;

    /// A writer whose every write fails, as a full disk's.
    struct Full;

    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::new(io::ErrorKind::StorageFull, "no space left"))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_failed_trace_write_is_reported_by_finish() {
        let tracer = Tracer::create(&std::env::temp_dir().join(format!("pando-trace-{}", std::process::id()))).unwrap();
        std::fs::remove_file(tracer.path()).unwrap();
        // Unbuffered, so that the first row meets the failure.
        tracer.state.lock().out = io::BufWriter::with_capacity(0, Box::new(Full));
        let ctx = tracer.fresh_context();
        for found in [true, false] {
            tracer.write(&Row::Mem { key: vec![b"a".to_vec()], found, ctx: Scope::Keep(ctx) });
        }
        tracer.gap("a read of a subtree");
        assert_eq!((tracer.fresh_context(), tracer.is_tracing()), (ctx + 1, true));
        let error = tracer.finish().unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::StorageFull);
        assert!(!tracer.is_tracing());
        assert!(tracer.finish().unwrap().is_none(), "reported once");
    }
}
