//! Reading records in descending offset order, fast: one `pread` of up to
//! 8 MiB serves every record in it, instead of one small read per record.
//! The integrity check's walk and a collection's liveness trace read so.
//!
//! A window is a stretch of one region (a chunk, a run, a cold file) ending
//! just after the record asked for and reaching down by a span that adapts
//! to how much of the last window the walk used: up to 8 MiB while it uses
//! most of what it reads (a dense walk reads each file once, backwards),
//! down to 64 KiB when it uses little (a sparse one does not read much of
//! what lies between its records).
//!
//! Invariant: a window's bytes lie in one region, and hold the offset it
//! was filled for (asserted in `fill` and `read`).

use std::ops::Range;

use crate::error::Error;
use crate::format::record::{self, Parse, RecordKind};
use crate::pack::{Pack, Region};

/// Most bytes one read brings in.
const WINDOW_BYTES: u64 = 8 << 20;
/// Least bytes one read brings in.
const MIN_WINDOW_BYTES: u64 = 64 << 10;
/// Bytes read past the record asked for: most records are shorter.
const RECORD_GUESS_BYTES: u64 = 4 << 10;

/// A record found: its kind, length, payload (see [`Window::payload`]) and
/// position in the window's file.
pub(crate) struct Found {
    pub kind: RecordKind,
    pub total: u64,
    pub position: u64,
    range: Range<usize>,
    large: bool,
}

/// Why a record could not be read.
pub(crate) enum Fault {
    /// The offset is in no file: a collection discarded it.
    Collected,
    Damaged {
        file: String,
        position: u64,
        what: String,
    },
}

impl Fault {
    /// The error a reader that stops at the first fault returns.
    pub fn into_error(self, offset: u64) -> Error {
        match self {
            Fault::Collected => Error::Collected { offset },
            Fault::Damaged { file, position, what } => Error::corrupt(file, position, what),
        }
    }
}

pub(crate) struct Window {
    region: Option<Region>,
    /// The logical offset of `bytes[0]`.
    start: u64,
    bytes: Vec<u8>,
    /// A record longer than what the window holds of it.
    large: Vec<u8>,
    /// How far below the record asked for the next window reaches.
    span: u64,
    /// Bytes of the records the window served.
    served: u64,
    pub bytes_read: u64,
}

impl Default for Window {
    fn default() -> Window {
        Window { region: None, start: 0, bytes: Vec::new(), large: Vec::new(), span: WINDOW_BYTES, served: 0, bytes_read: 0 }
    }
}

impl Window {
    /// Reads the record at `offset`.
    pub fn read(&mut self, pack: &Pack, offset: u64) -> Result<Found, Fault> {
        let in_window = self.region.is_some() && self.start <= offset && offset - self.start < self.bytes.len() as u64;
        if !in_window {
            self.fill(pack, offset)?;
        }
        let Some(region) = &self.region else {
            return Err(Fault::Damaged { file: "pack".into(), position: offset, what: "no region holds it".into() });
        };
        debug_assert!(region.start <= offset && offset < region.end, "a window's bytes lie in its region");
        let position = region.pos + (offset - region.start);
        let damaged = |what: String| Fault::Damaged { file: region.name.clone(), position, what };
        let rel = (offset - self.start) as usize;
        match record::parse(&self.bytes[rel..]) {
            Parse::Record { kind, payload, total } => {
                let from = rel + total - 4 - payload.len();
                self.served += total as u64;
                Ok(Found { kind, total: total as u64, position, range: from..from + payload.len(), large: false })
            }
            Parse::NeedMore { total } => {
                if offset + total as u64 > region.end {
                    return Err(damaged(format!("a record of {total} bytes runs past the end of its region")));
                }
                self.large.resize(total, 0);
                region.file.read_exact_at(&mut self.large, position).map_err(|e| damaged(format!("read failed: {e}")))?;
                self.bytes_read += total as u64;
                match record::parse(&self.large) {
                    Parse::Record { kind, payload, total } => {
                        let from = total - 4 - payload.len();
                        Ok(Found { kind, total: total as u64, position, range: from..from + payload.len(), large: true })
                    }
                    Parse::Invalid { reason } => Err(damaged(reason)),
                    Parse::NeedMore { .. } => Err(damaged("record length changed between two reads".into())),
                }
            }
            Parse::Invalid { reason } => Err(damaged(reason)),
        }
    }

    /// The payload of the record `found` (the last one read).
    pub fn payload(&self, found: &Found) -> &[u8] {
        if found.large { &self.large[found.range.clone()] } else { &self.bytes[found.range.clone()] }
    }

    /// The record at `offset` if the window holds all of it.
    pub fn peek(&self, offset: u64) -> Option<(RecordKind, &[u8])> {
        let rel = usize::try_from(offset.checked_sub(self.start)?).ok().filter(|&rel| rel < self.bytes.len())?;
        match record::parse(&self.bytes[rel..]) {
            Parse::Record { kind, payload, .. } => Some((kind, payload)),
            _ => None,
        }
    }

    /// The name of the file the last record was read from.
    pub fn file(&self) -> &str {
        self.region.as_ref().map_or("pack", |r| r.name.as_str())
    }

    fn fill(&mut self, pack: &Pack, offset: u64) -> Result<(), Fault> {
        let used = self.served * 16 / (self.bytes.len() as u64).max(1);
        self.span = match used {
            0 => (self.span / 2).max(MIN_WINDOW_BYTES),
            8.. => (self.span * 2).min(WINDOW_BYTES),
            _ => self.span,
        };
        self.served = 0;
        self.region = None;
        let region = pack.region(offset).map_err(|e| match e {
            Error::Collected { .. } => Fault::Collected,
            e => Fault::Damaged { file: "pack".into(), position: offset, what: e.to_string() },
        })?;
        let end = region.end.min(offset + RECORD_GUESS_BYTES);
        let start = region.start.max(end.saturating_sub(self.span));
        debug_assert!(start <= offset && offset < end, "a window holds the offset it was filled for");
        self.bytes.resize((end - start) as usize, 0);
        let position = region.pos + (start - region.start);
        if let Err(e) = region.file.read_exact_at(&mut self.bytes, position) {
            return Err(Fault::Damaged { file: region.name.clone(), position, what: format!("read failed: {e}") });
        }
        self.bytes_read += end - start;
        self.start = start;
        self.region = Some(region);
        Ok(())
    }
}
