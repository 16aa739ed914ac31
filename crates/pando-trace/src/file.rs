//! Trace files: a streaming reader and a writer of `IrmRepBT` version 0.
//!
//! Invariant: the reader yields rows in order and, on a truncated or
//! damaged file, returns every row before the damage and then an error
//! naming the row number and its byte offset.

use pando_core::trace::{self, Row, RowRef};
use pando_core::varint;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

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
}

/// Reads rows one at a time.
pub struct TraceReader {
    path: PathBuf,
    input: BufReader<File>,
    /// Byte offset of the next row's length prefix.
    offset: u64,
    rows: u64,
    failed: bool,
    buf: Vec<u8>,
}

impl TraceReader {
    pub fn open(path: impl AsRef<Path>) -> Result<TraceReader, TraceError> {
        let path = path.as_ref().to_path_buf();
        let io_error = |error| TraceError::Io { path: path.clone(), error };
        let file = File::open(&path).map_err(io_error)?;
        let mut input = BufReader::with_capacity(1 << 20, file);
        let bad = |reason: String| TraceError::BadHeader { path: path.clone(), reason };
        let mut head = [0u8; 12];
        input.read_exact(&mut head).map_err(|_| bad("shorter than 12 bytes".into()))?;
        if &head[..8] != trace::MAGIC {
            return Err(bad(format!("magic {:?}, expected \"IrmRepBT\"", String::from_utf8_lossy(&head[..8]))));
        }
        let version = i32::from_be_bytes(head[8..12].try_into().expect("4 bytes"));
        if version != trace::VERSION {
            return Err(bad(format!("version {version}; this build reads version {}", trace::VERSION)));
        }
        let (header_len, len_bytes) = read_varint(&mut input).map_err(|e| bad(format!("header length: {e}")))?;
        if header_len != 0 {
            return Err(bad(format!("a version 0 header is empty, this one has {header_len} bytes")));
        }
        Ok(TraceReader { path, input, offset: 12 + len_bytes, rows: 0, failed: false, buf: Vec::new() })
    }

    /// Rows read so far.
    pub fn rows_read(&self) -> u64 {
        self.rows
    }

    /// Byte offset reached.
    pub fn offset(&self) -> u64 {
        self.offset
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
        let len_bytes = match self.read_frame() {
            Some(Ok(len_bytes)) => len_bytes,
            Some(Err(e)) => {
                self.failed = true;
                return Some(Err(e));
            }
            None => {
                self.failed = true;
                return None;
            }
        };
        let len = self.buf.len() as u64;
        match RowRef::decode(&self.buf) {
            Ok(row) => {
                self.offset += len_bytes + len;
                self.rows += 1;
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

    /// Reads the next row's bytes into the buffer; returns how many bytes
    /// its length prefix took. `None` at a clean end of file.
    fn read_frame(&mut self) -> Option<Result<u64, TraceError>> {
        match self.input.fill_buf() {
            Ok([]) => return None,
            Ok(_) => {}
            Err(e) => return Some(Err(TraceError::Io { path: self.path.clone(), error: e })),
        }
        let (len, len_bytes) = match read_varint(&mut self.input) {
            Ok(v) => v,
            Err(e) => return Some(Err(self.bad_row(format!("row length: {e}")))),
        };
        if len > MAX_ROW_BYTES {
            return Some(Err(self.bad_row(format!("row length {len} exceeds {MAX_ROW_BYTES}"))));
        }
        self.buf.clear();
        match (&mut self.input).take(len).read_to_end(&mut self.buf) {
            Ok(n) if n as u64 == len => Some(Ok(len_bytes)),
            Ok(n) => Some(Err(self.bad_row(format!("truncated: the row has {n} of its {len} bytes")))),
            Err(e) => Some(Err(TraceError::Io { path: self.path.clone(), error: e })),
        }
    }
}

impl Iterator for TraceReader {
    type Item = Result<Row, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_row()
    }
}

fn read_varint(input: &mut impl Read) -> io::Result<(u64, u64)> {
    let mut bytes = Vec::with_capacity(4);
    loop {
        let mut byte = [0u8];
        input.read_exact(&mut byte)?;
        bytes.push(byte[0]);
        if byte[0] & 0x80 == 0 || bytes.len() == 10 {
            break;
        }
    }
    let value = varint::read_u64(&bytes, &mut 0).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    Ok((value, bytes.len() as u64))
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
