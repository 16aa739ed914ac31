//! The scan: every record of every region the pack holds (chunks, runs,
//! cold files), read forward in pieces of 8 MiB.
//!
//! Each record's checksum and structure are checked, and the records must
//! tile each region exactly. A record whose checksum fails but whose
//! header still gives a length inside the region is skipped, and the scan
//! goes on after it; otherwise the rest of the region is skipped.
//!
//! Invariants:
//! - Each record read lies inside its region, and the scan of a region
//!   ends at its end, never past it (asserted in `region`).
//! - With no problem found, the records counted cover every byte of every
//!   region once (asserted in `scan`).

use pando_core::varint;

use std::sync::atomic::{AtomicU64, Ordering};

use super::{Problems, RecordCounts};
use crate::dict;
use crate::format::commit::CommitRecord;
use crate::format::node::{decode_tree, references};
use crate::format::patch::{TreePatch, ValuesPatch};
use crate::format::record::{self, MAX_PAYLOAD, Parse, RecordKind};
use crate::pack::Region;
use crate::store::{Repo, index_file};

/// Bytes read at once.
const PIECE_BYTES: u64 = 8 << 20;

/// Scans `regions`, adding the bytes scanned to `done`; returns the
/// bytes read.
pub(super) fn scan(
    repo: &Repo,
    regions: Vec<Region>,
    problems: &mut Problems,
    counts: &mut RecordCounts,
    done: &AtomicU64,
) -> u64 {
    let mut scanner = Scanner { repo, problems, counts, buf: Vec::new(), refs: Vec::new(), bytes_read: 0 };
    let counted = scanner.counts.bytes;
    for region in &regions {
        if scanner.problems.full() {
            break;
        }
        scanner.region(region, &mut |piece| {
            done.fetch_add(piece, Ordering::Relaxed);
        });
    }
    if scanner.problems.list.is_empty() {
        let total: u64 = regions.iter().map(|r| r.end - r.start).sum();
        assert_eq!(scanner.counts.bytes - counted, total, "the records of a clean scan tile its regions exactly");
    }
    scanner.bytes_read
}

struct Scanner<'a> {
    repo: &'a Repo,
    problems: &'a mut Problems,
    counts: &'a mut RecordCounts,
    buf: Vec<u8>,
    refs: Vec<(u64, u32)>,
    bytes_read: u64,
}

/// The length of the record whose header starts `bytes`, if the header is
/// sound (its checksum may not be).
fn frame_len(bytes: &[u8]) -> Option<u64> {
    RecordKind::from_byte(*bytes.first()?)?;
    let mut pos = 1;
    let len = varint::read_u64(bytes, &mut pos).ok().filter(|&len| len <= MAX_PAYLOAD)?;
    Some(record::header_len(len) as u64 + len + 4)
}

impl Scanner<'_> {
    fn region(&mut self, region: &Region, progress: &mut dyn FnMut(u64)) {
        let mut at = region.start;
        let position = |offset: u64| region.pos + (offset - region.start);
        while at < region.end && !self.problems.full() {
            let piece = (region.end - at).min(PIECE_BYTES);
            self.buf.resize(piece as usize, 0);
            if let Err(e) = region.file.read_exact_at(&mut self.buf, position(at)) {
                let what = format!("read failed: {e}; the rest of the region ({} bytes) is not checked", region.end - at);
                self.problems.push(&region.name, position(at), Some(at), what);
                return;
            }
            self.bytes_read += piece;
            let buf = std::mem::take(&mut self.buf);
            let mut pos = 0usize;
            while pos < buf.len() {
                let offset = at + pos as u64;
                match record::parse(&buf[pos..]) {
                    Parse::Record { kind, payload, total } => {
                        self.visit(region, position(offset), offset, kind, payload, total as u64);
                        pos += total;
                    }
                    // Past the region's end: sure once the piece reaches it.
                    Parse::NeedMore { total } if offset + total as u64 > region.end && (at + piece == region.end || pos == 0) => {
                        let what = format!(
                            "a record of {total} bytes runs past the end of the region ({} bytes left)",
                            region.end - offset
                        );
                        self.problems.push(&region.name, position(offset), Some(offset), what);
                        progress(piece);
                        self.buf = buf;
                        return;
                    }
                    Parse::NeedMore { total } if pos == 0 => {
                        // A record longer than a piece: read it alone.
                        let mut large = vec![0u8; total];
                        let read = region.file.read_exact_at(&mut large, position(offset));
                        self.bytes_read += total as u64;
                        match (read, record::parse(&large)) {
                            (Ok(()), Parse::Record { kind, payload, .. }) => {
                                self.visit(region, position(offset), offset, kind, payload, total as u64)
                            }
                            (Err(e), _) => {
                                self.problems.push(&region.name, position(offset), Some(offset), format!("read failed: {e}"))
                            }
                            (Ok(()), _) => self.problems.push(&region.name, position(offset), Some(offset), "damaged record"),
                        }
                        pos = total;
                        break;
                    }
                    // The rest of the piece starts a record: read on from it.
                    Parse::NeedMore { .. } => break,
                    Parse::Invalid { reason } => match frame_len(&buf[pos..]).filter(|&n| offset + n <= region.end) {
                        Some(n) => {
                            self.problems.push(&region.name, position(offset), Some(offset), reason);
                            pos += n as usize;
                        }
                        None => {
                            let what = format!("{reason}; the rest of the region ({} bytes) is not checked", region.end - offset);
                            self.problems.push(&region.name, position(offset), Some(offset), what);
                            self.buf = buf;
                            return;
                        }
                    },
                }
            }
            self.buf = buf;
            at += pos as u64;
            progress(pos as u64);
        }
        assert!(at == region.end || self.problems.full(), "the scan of a region ends at its end, not past it");
    }

    /// Checks one record's structure and what it says about the index and
    /// the dictionary.
    fn visit(&mut self, region: &Region, position: u64, at: u64, kind: RecordKind, payload: &[u8], total: u64) {
        debug_assert!(region.start <= at && at + total <= region.end, "a scanned record lies inside its region");
        self.counts.add(kind, total);
        let mut problem = |what: String| self.problems.push(&region.name, position, Some(at), what);
        let depth = || payload.first().map_or(0, |&d| u32::from(d));
        let checked = match kind {
            RecordKind::Values => {
                self.refs.clear();
                references(kind, payload, at, 0, &mut self.refs).map_err(|r| format!("damaged value inode: {r}"))
            }
            RecordKind::ValuesPatch => ValuesPatch::decode(payload, at, &self.repo.read.dict.read())
                .map(drop)
                .map_err(|r| format!("damaged value patch: {r}")),
            RecordKind::Tree => decode_tree(payload, at, depth()).map(drop).map_err(|r| format!("damaged tree inode: {r}")),
            RecordKind::TreePatch => {
                TreePatch::decode(payload, at, depth()).map(drop).map_err(|r| format!("damaged tree patch: {r}"))
            }
            RecordKind::Blob => Ok(()),
            RecordKind::Commit => match CommitRecord::decode(payload, at) {
                Ok(commit) => {
                    let hash = commit.info().hash();
                    match self.repo.read.index.read().get(&hash).copied() {
                        Some(offset) if offset == at || offset == index_file::COLLECTED => Ok(()),
                        Some(offset) => Err(format!("commit {hash} is at offset {offset} in the index")),
                        None => Err(format!("commit {hash} is not in the index")),
                    }
                }
                Err(reason) => Err(format!("damaged commit record: {reason}")),
            },
            RecordKind::Dict => match dict::decode_record(payload) {
                Ok((first_id, steps)) => {
                    let dict = self.repo.read.dict.read();
                    let wrong = (first_id..).zip(&steps).find(|(id, step)| dict.step_of(*id) != Some(*step));
                    match wrong {
                        Some((id, _)) => Err(format!("dictionary record defines id {id} otherwise than the dictionary")),
                        None => Ok(()),
                    }
                }
                Err(reason) => Err(format!("damaged dictionary record: {reason}")),
            },
        };
        if let Err(what) = checked {
            problem(what);
        }
    }
}
