//! Snapshots: the tree of one commit as a self-contained stream, to
//! bootstrap a store elsewhere (`Store::export_snapshot`,
//! `Store::import_snapshot`).
//!
//! A snapshot holds no hash but the commit's: the importer recomputes every
//! hash from the contents, so a damaged or forged snapshot cannot produce a
//! store whose commit is not the one its header names. Its grammar (all
//! integers little-endian, `varint` LEB128):
//!
//! ```text
//! file    = "PANDOSN1" ‖ frame*
//! frame   = u32 raw_len ‖ u32 stored_len ‖ zstd(raw)[stored_len] ‖ crc32c(raw_len ‖ stored_len ‖ stored)
//! stream  = header ‖ dir ‖ 'E'                (the frames' raw bytes, concatenated)
//! header  = commit_hash[32] ‖ varint k ‖ parent_hash[32]*k ‖ date: i64 ‖ varint n ‖ author ‖ varint n ‖ message
//! dir     = node                              (a directory's root inode, depth 0)
//! node    = 0x01 ‖ varint n ‖ entry*n         value inode: n ≤ 32 entries, sorted by step
//!         | 0x02 ‖ varint len ‖ u32 bitmap ‖ node*popcount(bitmap)
//!                                             tree inode of len > 32 entries; its children,
//!                                             at depth + 1, in index order
//! entry   = varint k ‖ step[k] ‖ 0x00 ‖ varint m ‖ contents[m]
//!         | varint k ‖ step[k] ‖ 0x01 ‖ dir
//! ```
//!
//! Nodes come in pre-order, depth first: the layout of every directory is
//! the Tezos inode trie pando stores, so both sides stream it with a stack
//! of at most one inode per level, whatever the directories' sizes.
//!
//! Invariants:
//! - Export holds at most one inode per level of the tree, never a whole
//!   directory or tree (tested by `export_holds_one_inode_per_level`), and
//!   after each inode and contents less than a frame of the stream not yet
//!   handed over (asserted in `maybe_flush`); import's bound is
//!   `store::tools::import`'s.
//! - Every frame holds 1 to [`FRAME_BYTES`] raw bytes, as the reader takes
//!   (asserted in `write_frames`).
//! - Import accepts only the canonical layout (the one pando and irmin
//!   build for the same entries), checks every frame's checksum before
//!   decompressing it, bounds every length before allocating, and reports
//!   any damage with the file byte of the frame and the stream byte where
//!   it was found (tested by `a_forged_stream_with_valid_frames_is_refused`
//!   and `every_flipped_byte_and_every_truncation_is_refused`).

mod export;

pub(crate) use export::export;

use std::io::{Read, Write};

use crate::error::{Error, Result};
use crate::format::commit::{MAX_PARENTS, MAX_TEXT_BYTES};

pub const MAGIC: &[u8; 8] = b"PANDOSN1";
pub const TAG_VALUES: u8 = 1;
pub const TAG_TREE: u8 = 2;
pub const ENTRY_CONTENTS: u8 = 0;
pub const ENTRY_DIR: u8 = 1;
pub const END: u8 = b'E';
/// Raw bytes per frame (a frame's raw length is at most this).
pub const FRAME_BYTES: usize = 1 << 20;
/// zstd's level for frames: the fastest; a thread of its own keeps up
/// with the walk.
const LEVEL: i32 = 1;

/// What a snapshot holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotSummary {
    pub commit: pando_core::Hash,
    pub directories: u64,
    pub contents: u64,
    pub contents_bytes: u64,
    /// Inodes (value and tree) in the stream.
    pub inodes: u64,
    /// Bytes of the stream before compression, and of the file.
    pub stream_bytes: u64,
    pub file_bytes: u64,
}

/// Gathers the stream into frames for [`write_frames`].
pub struct FrameWriter {
    raw: Vec<u8>,
    frames: std::sync::mpsc::SyncSender<Vec<u8>>,
}

impl FrameWriter {
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.raw
    }

    /// Hands over every full frame the buffer holds (each byte is copied
    /// once, whatever the size of the value that filled it).
    pub fn maybe_flush(&mut self) -> Result<()> {
        let full = self.raw.len() / FRAME_BYTES * FRAME_BYTES;
        if full == 0 {
            return Ok(());
        }
        for at in (0..full).step_by(FRAME_BYTES) {
            let frame = self.raw[at..at + FRAME_BYTES].to_vec();
            self.send(frame)?;
        }
        self.raw.drain(..full);
        debug_assert!(self.raw.len() < FRAME_BYTES, "less than a frame of the stream held after a flush");
        Ok(())
    }

    fn send(&mut self, frame: Vec<u8>) -> Result<()> {
        // The writing thread stopped: its error is the one returned.
        self.frames.send(frame).map_err(|_| Error::Invalid("snapshot writer stopped".into()))
    }
}

/// Runs `f` with a [`FrameWriter`] whose frames a second thread
/// compresses, checksums and writes to `out` (after the magic) meanwhile;
/// returns `f`'s result and the stream's and the file's lengths.
pub fn write_frames<R>(out: &mut (dyn Write + Send), f: impl FnOnce(&mut FrameWriter) -> Result<R>) -> Result<(R, u64, u64)> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(4);
    std::thread::scope(|scope| {
        let writer = scope.spawn(move || -> Result<(u64, u64)> {
            let io = Error::io("snapshot", "write");
            out.write_all(MAGIC).map_err(io)?;
            let (mut stream_bytes, mut file_bytes) = (0u64, MAGIC.len() as u64);
            for raw in rx {
                // The reader refuses an empty frame and one longer than this.
                assert!(!raw.is_empty() && raw.len() <= FRAME_BYTES, "a frame holds 1 to FRAME_BYTES raw bytes");
                let stored = zstd::bulk::compress(&raw, LEVEL).map_err(Error::io("snapshot", "compress"))?;
                let mut head = [0u8; 8];
                head[..4].copy_from_slice(&(raw.len() as u32).to_le_bytes());
                head[4..].copy_from_slice(&(stored.len() as u32).to_le_bytes());
                let crc = crc32c::crc32c_append(crc32c::crc32c(&head), &stored);
                for part in [&head[..], &stored, &crc.to_le_bytes()] {
                    out.write_all(part).map_err(Error::io("snapshot", "write"))?;
                }
                stream_bytes += raw.len() as u64;
                file_bytes += (head.len() + stored.len() + 4) as u64;
            }
            out.flush().map_err(Error::io("snapshot", "write"))?;
            Ok((stream_bytes, file_bytes))
        });
        let mut w = FrameWriter { raw: Vec::with_capacity(2 * FRAME_BYTES), frames: tx };
        let result = f(&mut w).and_then(|r| {
            w.maybe_flush()?;
            let last = std::mem::take(&mut w.raw);
            if !last.is_empty() {
                w.send(last)?;
            }
            Ok(r)
        });
        drop(w);
        let written = writer.join().expect("the snapshot writer does not panic");
        let (stream_bytes, file_bytes) = written?;
        Ok((result?, stream_bytes, file_bytes))
    })
}

/// Reads the stream out of the frames, checking each frame before use.
pub struct FrameReader<'a> {
    input: &'a mut dyn Read,
    raw: Vec<u8>,
    pos: usize,
    /// File byte where the current frame starts, and where the next does.
    frame_at: u64,
    next_frame_at: u64,
    /// Stream bytes before the current frame.
    stream_base: u64,
    stored: Vec<u8>,
}

impl<'a> FrameReader<'a> {
    pub fn new(input: &'a mut dyn Read) -> Result<FrameReader<'a>> {
        let reader =
            FrameReader { input, raw: Vec::new(), pos: 0, frame_at: 0, next_frame_at: 8, stream_base: 0, stored: Vec::new() };
        let mut magic = [0u8; 8];
        match read_full(reader.input, &mut magic) {
            Ok(8) if &magic == MAGIC => Ok(reader),
            Ok(8) => Err(reader.error_at(0, "not a pando snapshot (bad magic)")),
            Ok(_) => Err(reader.error_at(0, "truncated before the magic")),
            Err(e) => Err(Error::io("snapshot", "read")(e)),
        }
    }

    /// Stream bytes consumed so far.
    pub fn stream_pos(&self) -> u64 {
        self.stream_base + self.pos as u64
    }

    fn error_at(&self, file_offset: u64, reason: impl Into<String>) -> Error {
        Error::Snapshot { file_offset, stream_offset: self.stream_pos(), reason: reason.into() }
    }

    /// An error at the current position.
    pub fn error(&self, reason: impl Into<String>) -> Error {
        self.error_at(self.frame_at, reason)
    }

    /// Loads the next frame; `false` at a clean end of file.
    fn next_frame(&mut self) -> Result<bool> {
        let at = self.next_frame_at;
        let mut head = [0u8; 8];
        match read_full(self.input, &mut head).map_err(Error::io("snapshot", "read"))? {
            0 => return Ok(false),
            8 => {}
            _ => return Err(self.error_at(at, "file truncated inside a frame header")),
        }
        let raw_len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        let stored_len = u32::from_le_bytes(head[4..].try_into().expect("4 bytes")) as usize;
        if raw_len == 0 || raw_len > FRAME_BYTES || stored_len > zstd::zstd_safe::compress_bound(FRAME_BYTES) {
            return Err(self.error_at(at, format!("frame header out of range ({raw_len} raw, {stored_len} stored bytes)")));
        }
        self.stored.resize(stored_len + 4, 0);
        if read_full(self.input, &mut self.stored).map_err(Error::io("snapshot", "read"))? != stored_len + 4 {
            return Err(self.error_at(at, "file truncated inside a frame"));
        }
        let expected = u32::from_le_bytes(self.stored[stored_len..].try_into().expect("4 bytes"));
        let found = crc32c::crc32c_append(crc32c::crc32c(&head), &self.stored[..stored_len]);
        if expected != found {
            return Err(self.error_at(at, format!("frame checksum mismatch (stored {expected:#010x}, computed {found:#010x})")));
        }
        let raw = zstd::bulk::decompress(&self.stored[..stored_len], raw_len)
            .map_err(|e| self.error_at(at, format!("frame does not decompress: {e}")))?;
        if raw.len() != raw_len {
            return Err(self.error_at(at, format!("frame decompresses to {} bytes, its header says {raw_len}", raw.len())));
        }
        self.stream_base += self.raw.len() as u64;
        self.raw = raw;
        self.pos = 0;
        self.frame_at = at;
        self.next_frame_at = at + 8 + stored_len as u64 + 4;
        Ok(true)
    }

    /// Fills `out` from the stream.
    pub fn read(&mut self, mut out: &mut [u8]) -> Result<()> {
        while !out.is_empty() {
            if self.pos == self.raw.len() && !self.next_frame()? {
                return Err(self.error_at(self.next_frame_at, "the snapshot ends before its tree is complete (truncated)"));
            }
            let n = out.len().min(self.raw.len() - self.pos);
            out[..n].copy_from_slice(&self.raw[self.pos..self.pos + n]);
            self.pos += n;
            out = &mut out[n..];
        }
        Ok(())
    }

    pub fn byte(&mut self) -> Result<u8> {
        let mut b = [0u8];
        self.read(&mut b)?;
        Ok(b[0])
    }

    pub fn varint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                break;
            }
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                if b == 0 && shift > 0 {
                    return Err(self.error("non-canonical varint"));
                }
                return Ok(value);
            }
        }
        Err(self.error("varint out of range"))
    }

    /// `varint n ‖ bytes[n]` with `n ≤ max`.
    pub fn bytes(&mut self, max: u64, what: &str) -> Result<Vec<u8>> {
        let n = self.varint()?;
        if n > max {
            return Err(self.error(format!("{what} of {n} bytes (at most {max})")));
        }
        let mut out = vec![0u8; n as usize];
        self.read(&mut out)?;
        Ok(out)
    }

    /// Succeeds only at the end of the file, after the last frame; returns
    /// the file's length.
    pub fn finish(mut self) -> Result<u64> {
        if self.pos < self.raw.len() || self.next_frame()? {
            return Err(self.error("bytes after the end of the snapshot"));
        }
        Ok(self.next_frame_at)
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(input: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The header of the stream: the commit and its fields but the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub commit: pando_core::Hash,
    pub parents: Vec<pando_core::Hash>,
    pub date: i64,
    pub author: String,
    pub message: String,
}

impl Header {
    pub fn encode(&self, out: &mut Vec<u8>) {
        use pando_core::varint::write_u64;
        out.extend_from_slice(self.commit.as_bytes());
        write_u64(out, self.parents.len() as u64);
        for parent in &self.parents {
            out.extend_from_slice(parent.as_bytes());
        }
        out.extend_from_slice(&self.date.to_le_bytes());
        for text in [&self.author, &self.message] {
            write_u64(out, text.len() as u64);
            out.extend_from_slice(text.as_bytes());
        }
    }

    pub fn decode(r: &mut FrameReader<'_>) -> Result<Header> {
        let hash = |r: &mut FrameReader<'_>| -> Result<pando_core::Hash> {
            let mut bytes = [0u8; 32];
            r.read(&mut bytes)?;
            Ok(pando_core::Hash(bytes))
        };
        let commit = hash(r)?;
        let count = r.varint()?;
        // A commit record's limits: a commit refused here could not have
        // been made, and one taken is one the store can write and read.
        if count > MAX_PARENTS as u64 {
            return Err(r.error(format!("{count} parents (at most {MAX_PARENTS})")));
        }
        let parents = (0..count).map(|_| hash(r)).collect::<Result<Vec<_>>>()?;
        let mut date = [0u8; 8];
        r.read(&mut date)?;
        let mut text = |what: &str| -> Result<String> {
            let bytes = r.bytes(MAX_TEXT_BYTES as u64, what)?;
            String::from_utf8(bytes).map_err(|_| r.error(format!("the commit's {what} is not UTF-8")))
        };
        let author = text("author")?;
        let message = text("message")?;
        Ok(Header { commit, parents, date: i64::from_le_bytes(date), author, message })
    }
}
