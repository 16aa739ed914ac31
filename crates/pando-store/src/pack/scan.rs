//! Reading a region of a pack file record by record, as opening, a
//! writable open's recovery and the check do.
//!
//! Invariant: a scan stops at the first bytes that are not a whole,
//! checksummed record lying inside its region, and says where (asserted
//! in `scan_region`).

use super::names::{chunk_name, parse_chunk_name};
use crate::error::{Error, Result};
use crate::format::record::{self, Parse, RecordKind};
use crate::io::{File, Storage};

/// What [`scan_region`] calls on each record: its position in the file,
/// kind, payload and length in bytes.
pub(super) type RegionFn<'a> = dyn FnMut(u64, RecordKind, &[u8], u64) -> Result<()> + 'a;

/// Where [`scan_region`] stopped before the end of its region: the
/// position of the first bytes that are not a whole, checksummed record.
pub(super) struct Stopped {
    pub(super) pos: u64,
    pub(super) reason: String,
}

/// Calls `f(pos, kind, payload, total)` on the records of `file` from `pos`
/// to `end`, read in pieces of up to 8 MiB (a larger record alone), and
/// stops at the first bytes that are not a whole, checksummed record lying
/// inside the region.
pub(super) fn scan_region(file: &dyn File, name: &str, mut pos: u64, end: u64, f: &mut RegionFn<'_>) -> Result<Option<Stopped>> {
    let mut buf = Vec::new();
    while pos < end {
        buf.resize((end - pos).min(8 << 20) as usize, 0);
        file.read_exact_at(&mut buf, pos).map_err(Error::io(name, "read"))?;
        let mut used = 0;
        loop {
            match record::parse(&buf[used..]) {
                Parse::Record { kind, payload, total } => {
                    debug_assert!(pos + (used + total) as u64 <= end, "a record scanned lies inside its region");
                    f(pos + used as u64, kind, payload, total as u64)?;
                    used += total;
                    if used == buf.len() {
                        break;
                    }
                }
                // Read again from this record on.
                Parse::NeedMore { .. } if used > 0 => break,
                Parse::NeedMore { total } if pos + total as u64 <= end => {
                    buf.resize(total, 0);
                    file.read_exact_at(&mut buf, pos).map_err(Error::io(name, "read"))?;
                }
                Parse::NeedMore { .. } => {
                    return Ok(Some(Stopped { pos, reason: "record runs past the end of the durable data".into() }));
                }
                Parse::Invalid { reason } => return Ok(Some(Stopped { pos: pos + used as u64, reason })),
            }
        }
        pos += used as u64;
    }
    Ok(None)
}

/// The end of the last whole batch in the chunks from `durable_end` on:
/// records read in order, through chunks that follow each other without a
/// gap, up to the last commit record (a batch's last record) before the
/// first bytes that are not a whole record. `durable_end` if none.
///
/// What a writable open recovers of commits whose pack fsync completed but
/// whose control slot did not reach the disk. Sound because no chunk byte
/// past the end was ever written by anyone but this pack's writer (an open
/// truncates there and syncs before appending; a new chunk starts empty).
pub(crate) fn whole_batches_end(storage: &dyn Storage, names: &[String], first_start: u64, durable_end: u64) -> Result<u64> {
    let mut starts: Vec<u64> = names.iter().filter_map(|name| parse_chunk_name(name)).filter(|&s| s >= first_start).collect();
    starts.sort_unstable();
    let Some(first) = starts.iter().rposition(|&start| start <= durable_end) else { return Ok(durable_end) };
    let mut batches_end = durable_end;
    // The next record's logical offset.
    let mut at = durable_end;
    for (i, &start) in starts[first..].iter().enumerate() {
        if i > 0 && start != at {
            break;
        }
        let name = chunk_name(start);
        let file = storage.open(&name, false).map_err(Error::io(&name, "open"))?;
        let len = file.len().map_err(Error::io(&name, "stat"))?;
        let stopped = scan_region(&*file, &name, at - start, len, &mut |pos, kind, _, total| {
            if kind == RecordKind::Commit {
                batches_end = start + pos + total;
            }
            Ok(())
        })?;
        if stopped.is_some() {
            break;
        }
        at = start + len;
    }
    assert!(batches_end >= durable_end, "recovery only extends the durable end");
    Ok(batches_end)
}
