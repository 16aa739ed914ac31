//! Trace files: a streaming reader and a writer of `IrmRepBT` version 0.
//!
//! Invariants:
//! - The reader yields rows in order and, on a truncated or damaged file,
//!   returns every row before the damage and then an error naming the row
//!   number and its byte offset.
//! - A trace whose rows after the last commit update a tree (an add, a
//!   remove or a copy that no commit follows: a block cut short, as an
//!   interrupted writer leaves it) ends with [`TraceError::PartialTail`]
//!   naming the block, after its rows, unless the reader was told to
//!   accept such a tail ([`TraceReader::accept_partial_tail`]): the end of
//!   a file cut on a row boundary is otherwise indistinguishable from a
//!   whole one. Such a reader also ends before a last row the end of the
//!   file cuts (otherwise an error naming the row), and says which block
//!   it left out ([`TraceReader::dropped_tail`]). A tail of checkouts and
//!   reads only is a clean end: a recorded session ends so (its last
//!   checkout), and nothing of it would be stored.
//! - A thread of the reader's own reads the file ahead, a few blocks at
//!   most; the rows are decoded where they lie in the block that holds
//!   them, so a row's bytes are copied once, from the file into a block
//!   (and a row cut by the end of a block once more, into the head of the
//!   next).

use pando_core::trace::{self, Row, RowRef};
use pando_core::varint;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

/// Largest row accepted: a damaged length must not ask for gigabytes.
pub const MAX_ROW_BYTES: u64 = 512 << 20;

/// What can go wrong with a trace file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// The message includes `error`, so it is not also the source.
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: io::Error },
    #[error("{path}: not a replayable trace: {reason}")]
    BadHeader { path: PathBuf, reason: String },
    #[error("{path}: row {row} at byte {offset}: {reason}")]
    BadRow { path: PathBuf, row: u64, offset: u64, reason: String },
    /// The file ends inside block `block` (counted from 0, as reports
    /// count them; `block` whole blocks come before it): its `rows` rows,
    /// from row `row` at byte `offset`, update a tree and no commit follows.
    #[error(
        "{path}: the trace ends inside block {block}, after {block} whole blocks: its {rows} rows from row {row} (byte {offset}) update a tree and no commit follows; the file was cut short"
    )]
    PartialTail { path: PathBuf, block: u64, rows: u64, row: u64, offset: u64 },
}

/// The block a reader that accepts a partial tail left out: its number
/// (0 for the first), its rows read (the last cut short by the end of the
/// file if `cut`), and the row number and byte offset of the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DroppedTail {
    pub block: u64,
    pub rows: u64,
    pub row: u64,
    pub offset: u64,
    pub cut: bool,
}

/// Bytes read from the file into a block at a time.
const BLOCK: usize = 1 << 20;
/// Room at the head of a block for the start of a row the previous block
/// cut; a longer row grows the window to hold it whole instead.
const HEAD: usize = 64 << 10;
/// Blocks read ahead of the rows.
const AHEAD: usize = 2;

/// Reads rows one at a time, each decoded where it lies in a window of the
/// file (no copy of its bytes).
pub struct TraceReader {
    path: PathBuf,
    /// Blocks of the file, `HEAD` bytes of room then what was read, in
    /// order; an error ends them, and so does the end of the file.
    blocks: Receiver<io::Result<Vec<u8>>>,
    /// Blocks given back to the reading thread.
    emptied: SyncSender<Vec<u8>>,
    /// Byte offset of the next row's length prefix.
    offset: u64,
    rows: u64,
    failed: bool,
    /// Commit rows read: the blocks whole so far.
    commits: u64,
    /// Rows read since the last commit, the row number and byte offset of
    /// the first of them, and whether any of them updates a tree.
    tail_rows: u64,
    tail_start: (u64, u64),
    tail_updates: bool,
    /// True once the end of the file cut the last row (a reader that
    /// accepts a partial tail then ends before it).
    tail_cut: bool,
    accept_partial_tail: bool,
    /// The window: `window[start..end]` is the file from `offset` on.
    window: Vec<u8>,
    start: usize,
    end: usize,
}

/// The reading thread: blocks of `file` into `blocks` until its end, an
/// error, or the reader is dropped.
fn read_ahead(mut file: File, blocks: SyncSender<io::Result<Vec<u8>>>, emptied: Receiver<Vec<u8>>) {
    loop {
        let mut block = emptied.try_recv().unwrap_or_default();
        block.resize(HEAD + BLOCK, 0);
        let mut end = HEAD;
        while end < block.len() {
            match file.read(&mut block[end..]) {
                Ok(0) => break,
                Ok(n) => end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let _ = blocks.send(Err(e));
                    return;
                }
            }
        }
        if end == HEAD {
            return;
        }
        block.truncate(end);
        if blocks.send(Ok(block)).is_err() {
            return;
        }
    }
}

impl TraceReader {
    pub fn open(path: impl AsRef<Path>) -> Result<TraceReader, TraceError> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|error| TraceError::Io { path: path.clone(), error })?;
        let (send_block, blocks) = sync_channel(AHEAD);
        let (emptied, give_back) = sync_channel(AHEAD);
        std::thread::Builder::new()
            .name("pando-trace-read".into())
            .spawn(move || read_ahead(file, send_block, give_back))
            .map_err(|error| TraceError::Io { path: path.clone(), error })?;
        let mut reader = TraceReader {
            path,
            blocks,
            emptied,
            offset: 0,
            rows: 0,
            failed: false,
            commits: 0,
            tail_rows: 0,
            tail_start: (0, 0),
            tail_updates: false,
            tail_cut: false,
            accept_partial_tail: false,
            window: Vec::new(),
            start: 0,
            end: 0,
        };
        let bad = |reader: &TraceReader, reason: String| TraceError::BadHeader { path: reader.path.clone(), reason };
        reader.fill(12 + 10).map_err(|error| TraceError::Io { path: reader.path.clone(), error })?;
        let Some(head) = reader.window[reader.start..reader.end].get(..12) else {
            return Err(bad(&reader, "shorter than 12 bytes".into()));
        };
        if &head[..8] != trace::MAGIC {
            return Err(bad(&reader, format!("magic {:?}, expected \"IrmRepBT\"", String::from_utf8_lossy(&head[..8]))));
        }
        let version = i32::from_be_bytes(head[8..12].try_into().expect("4 bytes"));
        if version != trace::VERSION {
            return Err(bad(&reader, format!("version {version}; this build reads version {}", trace::VERSION)));
        }
        reader.start += 12;
        let (header_len, len_bytes) =
            read_varint(&reader.window[reader.start..reader.end]).map_err(|e| bad(&reader, format!("header length: {e}")))?;
        if header_len != 0 {
            return Err(bad(&reader, format!("a version 0 header is empty, this one has {header_len} bytes")));
        }
        reader.start += len_bytes;
        reader.offset = 12 + len_bytes as u64;
        Ok(reader)
    }

    /// Takes blocks until the window holds at least `need` bytes from
    /// `start`, or the file ends.
    fn fill(&mut self, need: usize) -> io::Result<()> {
        while self.end - self.start < need {
            let Ok(block) = self.blocks.recv() else { return Ok(()) };
            let mut block = block?;
            let left = self.end - self.start;
            if left <= HEAD {
                // The rest of the window goes into the block's head, and the
                // block becomes the window.
                block[HEAD - left..HEAD].copy_from_slice(&self.window[self.start..self.end]);
                (self.start, self.end) = (HEAD - left, block.len());
                std::mem::swap(&mut self.window, &mut block);
            } else {
                // A long row: the window grows as its bytes come, so that a
                // damaged length does not allocate what the file does not hold.
                self.window.copy_within(self.start..self.end, 0);
                self.window.truncate(left);
                self.window.extend_from_slice(&block[HEAD..]);
                (self.start, self.end) = (0, self.window.len());
            }
            if block.capacity() == HEAD + BLOCK {
                let _ = self.emptied.try_send(block);
            }
        }
        Ok(())
    }

    /// Accepts a trace that ends inside a block: its last rows, after the
    /// last commit, are returned and the end is a clean one, instead of
    /// [`TraceError::PartialTail`] when they update a tree.
    pub fn accept_partial_tail(&mut self, accept: bool) {
        self.accept_partial_tail = accept;
    }

    /// Rows read so far.
    pub fn rows_read(&self) -> u64 {
        self.rows
    }

    /// Byte offset reached.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// At the end of a reader that accepts a partial tail, the block it
    /// left out, if the file ended inside one: the rows after the last
    /// commit that update a tree, none of which a replay may commit.
    pub fn dropped_tail(&self) -> Option<DroppedTail> {
        let (row, offset) = self.tail_start;
        (self.failed && self.accept_partial_tail && self.tail_updates).then_some(DroppedTail {
            block: self.commits,
            rows: self.tail_rows,
            row,
            offset,
            cut: self.tail_cut,
        })
    }

    fn bad_row(&self, reason: impl Into<String>) -> TraceError {
        TraceError::BadRow { path: self.path.clone(), row: self.rows, offset: self.offset, reason: reason.into() }
    }

    /// The next row, `None` at a clean end of file.
    pub fn next_row(&mut self) -> Option<Result<Row, TraceError>> {
        self.next_row_ref().map(|row| row.map(|row| row.to_row()))
    }

    /// The next row, borrowed from the reader's buffer (its steps and
    /// values are not copied); `None` at a clean end of file. After an
    /// error, `None`.
    pub fn next_row_ref(&mut self) -> Option<Result<RowRef<'_>, TraceError>> {
        if self.failed {
            return None;
        }
        self.read_row_ref()
    }

    /// [`Self::next_row_ref`] of a reader that has not failed; marks it
    /// failed unless it returns a row.
    fn read_row_ref(&mut self) -> Option<Result<RowRef<'_>, TraceError>> {
        let (start, len) = match self.read_frame() {
            Some(Ok(frame)) => frame,
            Some(Err(e)) => {
                self.failed = true;
                return Some(Err(e));
            }
            None => {
                self.failed = true;
                if self.tail_updates && !self.accept_partial_tail {
                    let (row, offset) = self.tail_start;
                    let path = self.path.clone();
                    return Some(Err(TraceError::PartialTail { path, block: self.commits, rows: self.tail_rows, row, offset }));
                }
                return None;
            }
        };
        match RowRef::decode(&self.window[start..start + len]) {
            Ok(row) => {
                if matches!(row, RowRef::Commit { .. }) {
                    self.commits += 1;
                    self.tail_rows = 0;
                    self.tail_updates = false;
                } else {
                    if self.tail_rows == 0 {
                        self.tail_start = (self.rows, self.offset);
                    }
                    self.tail_rows += 1;
                    self.tail_updates |= matches!(row, RowRef::Add { .. } | RowRef::Remove { .. } | RowRef::Copy { .. });
                }
                self.offset += (start + len - self.start) as u64;
                self.rows += 1;
                self.start = start + len;
                Some(Ok(row))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(TraceError::BadRow {
                    path: self.path.clone(),
                    row: self.rows,
                    offset: self.offset,
                    reason: e.to_string(),
                }))
            }
        }
    }

    /// Brings the next row's bytes whole into the window; returns where
    /// they start in it and their length. `None` at a clean end of file.
    fn read_frame(&mut self) -> Option<Result<(usize, usize), TraceError>> {
        let io = |reader: &TraceReader, error| TraceError::Io { path: reader.path.clone(), error };
        if let Err(e) = self.fill(10) {
            return Some(Err(io(self, e)));
        }
        if self.start == self.end {
            return None;
        }
        let (len, len_bytes) = match read_varint(&self.window[self.start..self.end]) {
            Ok(v) => v,
            // Fewer than 10 bytes after `fill(10)`: the end of the file.
            Err(_) if self.accept_partial_tail && self.end - self.start < 10 => return self.cut_row(),
            Err(e) => return Some(Err(self.bad_row(format!("row length: {e}")))),
        };
        if len > MAX_ROW_BYTES {
            return Some(Err(self.bad_row(format!("row length {len} exceeds {MAX_ROW_BYTES}"))));
        }
        let whole = len_bytes + len as usize;
        if let Err(e) = self.fill(whole) {
            return Some(Err(io(self, e)));
        }
        let have = self.end - self.start;
        if have < whole && self.accept_partial_tail {
            return self.cut_row();
        }
        if have < whole {
            return Some(Err(self.bad_row(format!("truncated: the row has {} of its {len} bytes", have - len_bytes))));
        }
        Some(Ok((self.start + len_bytes, len as usize)))
    }

    /// A last row the end of the file cuts, in a reader that accepts a
    /// partial tail: the file ends before it, with the rows of its block.
    fn cut_row(&mut self) -> Option<Result<(usize, usize), TraceError>> {
        if self.tail_rows == 0 {
            self.tail_start = (self.rows, self.offset);
        }
        self.tail_rows += 1;
        self.tail_updates = true;
        self.tail_cut = true;
        self.start = self.end;
        None
    }
}

impl Iterator for TraceReader {
    type Item = Result<Row, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_row()
    }
}

/// A LEB128 length at the start of `bytes`, and how many bytes it takes.
fn read_varint(bytes: &[u8]) -> Result<(u64, usize), String> {
    let mut at = 0;
    let value = varint::read_u64(&bytes[..bytes.len().min(10)], &mut at).map_err(|e| e.to_string())?;
    Ok((value, at))
}

/// Writes rows to a new trace file.
pub struct TraceWriter {
    path: PathBuf,
    output: BufWriter<File>,
    buf: Vec<u8>,
    rows: u64,
}

impl TraceWriter {
    pub fn create(path: impl AsRef<Path>) -> Result<TraceWriter, TraceError> {
        let path = path.as_ref().to_path_buf();
        let file = File::create(&path).map_err(|error| TraceError::Io { path: path.clone(), error })?;
        let mut writer = TraceWriter { path, output: BufWriter::with_capacity(1 << 20, file), buf: Vec::new(), rows: 0 };
        let header = trace::file_header();
        writer.write_raw(&header)?;
        Ok(writer)
    }

    fn write_raw(&mut self, bytes: &[u8]) -> Result<(), TraceError> {
        self.output.write_all(bytes).map_err(|error| TraceError::Io { path: self.path.clone(), error })
    }

    pub fn append(&mut self, row: &Row) -> Result<(), TraceError> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        trace::append_row(&mut buf, row);
        let result = self.write_raw(&buf);
        self.buf = buf;
        self.rows += 1;
        result
    }

    pub fn rows_written(&self) -> u64 {
        self.rows
    }

    /// Flushes and syncs the file.
    pub fn finish(mut self) -> Result<(), TraceError> {
        let path = self.path.clone();
        let io_error = |error| TraceError::Io { path: path.clone(), error };
        self.output.flush().map_err(io_error)?;
        self.output.get_ref().sync_all().map_err(io_error)
    }
}
