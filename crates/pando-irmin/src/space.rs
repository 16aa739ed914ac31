//! The global offset space of an irmin-pack store: every object is named by
//! the offset where it was first appended, and collections never change it.
//!
//! - At or after `suffix_start_offset` an offset is in the suffix: chunk
//!   files `store.{i}.suffix` for `i` in `chunk_start..chunk_start +
//!   chunk_num`, concatenated (suffix offset 0 is the first byte of the
//!   first chunk, whose first `suffix_dead_bytes` are dead), so that
//!   `suffix offset = offset - suffix_start_offset + suffix_dead_bytes`.
//!   A chunk's length is its file's size, except the last one, whose valid
//!   bytes end at the control file's `appendable_chunk_poff`.
//! - Below it, after a collection, the live objects were copied to
//!   `store.{generation}.prefix`; `store.{generation}.mapping` is an array
//!   of little-endian `i64` triples `(offset, prefix offset, length)`, one
//!   per run of live bytes, sorted by offset.
//!
//! Reads go through a direct-mapped cache of 4 KiB blocks (16 MiB) (objects written
//! together are read together).
//!
//! Invariants: every offset is checked against the extent of the files
//! before it is read, so a damaged pointer gives an error naming where it
//! points, never a read of unrelated bytes past an end; memory is the block
//! cache and the mapping.

use std::sync::Arc;

use pando_store::io::{File, Storage};

use crate::control::{Control, Status};
use crate::error::{Error, Result};

const BLOCK: usize = 4 << 10;
const SLOTS: usize = 4096;

/// One file of the space.
struct Part {
    name: String,
    file: Arc<dyn File>,
    size: u64,
}

/// A suffix chunk: part `part`, suffix offsets `start..start + len`.
struct Chunk {
    part: usize,
    start: u64,
    len: u64,
}

/// Where an offset lies: a part, the byte of its file, and how many bytes
/// of the same run follow there.
#[derive(Clone, Copy, Debug)]
pub struct Place {
    part: usize,
    pub file_offset: u64,
    pub available: u64,
}

/// A run of live bytes of the prefix: offset, prefix offset, length.
type Run = (u64, u64, u64);
/// A cached block: part, block number, bytes.
type Block = (usize, u64, Box<[u8]>);

impl Place {
    /// The place `n` bytes further in the same run (`n` at most what is
    /// available).
    pub fn skip(&self, n: u64) -> Place {
        assert!(n <= self.available, "a skip stays within its run");
        Place { part: self.part, file_offset: self.file_offset + n, available: self.available - n }
    }
}

/// Reads by global offset.
pub struct Space {
    parts: Vec<Part>,
    chunks: Vec<Chunk>,
    suffix_start: u64,
    dead: u64,
    /// The prefix's part and its mapping's runs `(offset, prefix offset, len)`.
    prefix: Option<(usize, Vec<Run>)>,
    blocks: Vec<Option<Block>>,
    /// Bytes read from the files.
    pub bytes_read: u64,
}

impl Space {
    /// Opens the files `control` names in `dir`.
    pub fn open(dir: &dyn Storage, control: &Control) -> Result<Space> {
        let open = |name: String| -> Result<Part> {
            let file = dir.open(&name, false).map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    Error::Corrupt {
                        file: name.clone(),
                        offset: 0,
                        reason: format!("missing: {} names it", crate::control::FILE),
                    }
                } else {
                    Error::io(&name, "open")(e)
                }
            })?;
            let size = file.len().map_err(Error::io(&name, "read the size of"))?;
            Ok(Part { name, file, size })
        };
        if control.volume_num > 0 {
            return Err(Error::Unsupported(format!(
                "a lower layer of {} volumes (irmin's archive mode); only the upper layer is read",
                control.volume_num
            )));
        }
        if let Status::UpgradedFromV1V2 { .. } = control.status {
            return Err(Error::Unsupported(
                "a store upgraded from irmin-pack 1 or 2, whose oldest entries only the index can delimit".into(),
            ));
        }
        let mut parts = Vec::new();
        let mut chunks = Vec::new();
        let mut start = 0u64;
        for i in 0..control.chunk_num {
            let name = format!("store.{}.suffix", control.chunk_start.saturating_add(i));
            let part = open(name)?;
            let size = part.size;
            let last = i + 1 == control.chunk_num;
            let valid = if last { control.appendable_chunk_end } else { size };
            if valid > size {
                return Err(Error::Corrupt {
                    file: part.name.clone(),
                    offset: size,
                    reason: format!("{} bytes, but {} says {valid} are valid (truncated)", size, crate::control::FILE),
                });
            }
            chunks.push(Chunk { part: parts.len(), start, len: valid });
            start = start.checked_add(valid).ok_or_else(|| Error::Corrupt {
                file: crate::control::FILE.into(),
                offset: 0,
                reason: "suffix chunks longer than any file".into(),
            })?;
            parts.push(part);
        }
        let (suffix_start, dead, prefix) = match &control.status {
            Status::Gced(gc) => {
                let prefix = open(format!("store.{}.prefix", gc.generation))?;
                let mapping = open(format!("store.{}.mapping", gc.generation))?;
                let size = mapping.size;
                let valid = gc.mapping_end.unwrap_or(size);
                if valid > size || valid % 24 != 0 {
                    return Err(Error::Corrupt {
                        file: mapping.name.clone(),
                        offset: size.min(valid),
                        reason: format!("{size} bytes, {valid} valid: not whole 24-byte entries or truncated"),
                    });
                }
                let runs = read_mapping(&mapping, valid, prefix.size, gc.suffix_start_offset)?;
                let part = parts.len();
                parts.push(prefix);
                (gc.suffix_start_offset, gc.suffix_dead_bytes, Some((part, runs)))
            }
            _ => (0, 0, None),
        };
        if dead > start || dead > suffix_start || suffix_start.checked_add(start).is_none() {
            return Err(Error::Corrupt {
                file: crate::control::FILE.into(),
                offset: 0,
                reason: format!("{dead} dead bytes in a suffix of {start} bytes starting at offset {suffix_start}"),
            });
        }
        Ok(Space { parts, chunks, suffix_start, dead, prefix, blocks: (0..SLOTS).map(|_| None).collect(), bytes_read: 0 })
    }

    /// The first offset the suffix serves and the offset past its end.
    pub fn suffix_range(&self) -> (u64, u64) {
        let end = self.chunks.last().map_or(0, |c| c.start + c.len);
        (self.suffix_start, self.suffix_start + end - self.dead)
    }

    /// The prefix's runs of live bytes `(offset, length)`, in order.
    pub fn prefix_runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.prefix.iter().flat_map(|(_, runs)| runs.iter().map(|&(off, _, len)| (off, len)))
    }

    pub fn file_name(&self, place: &Place) -> &str {
        &self.parts[place.part].name
    }

    /// Where `offset` lies, or why it lies nowhere.
    pub fn place(&self, offset: u64) -> Result<Place, String> {
        if offset >= self.suffix_start {
            let soff = (offset - self.suffix_start).saturating_add(self.dead);
            let chunk = self
                .chunks
                .iter()
                .find(|c| soff >= c.start && soff < c.start + c.len)
                .ok_or_else(|| format!("offset {offset} is past the end of the suffix ({})", self.suffix_range().1))?;
            return Ok(Place { part: chunk.part, file_offset: soff - chunk.start, available: chunk.start + chunk.len - soff });
        }
        let Some((part, runs)) = &self.prefix else {
            return Err(format!("offset {offset} is before the suffix's first ({})", self.suffix_start));
        };
        let i = runs.partition_point(|&(off, _, _)| off <= offset);
        match i.checked_sub(1).map(|i| runs[i]) {
            Some((off, poff, len)) if offset < off + len => {
                Ok(Place { part: *part, file_offset: poff + (offset - off), available: len - (offset - off) })
            }
            _ => Err(format!("offset {offset} was collected (in no live run of the prefix)")),
        }
    }

    /// Reads `buf.len()` bytes at `place` (which must have them available).
    pub fn read(&mut self, place: &Place, buf: &mut [u8]) -> Result<()> {
        assert!(buf.len() as u64 <= place.available, "a read stays within its run");
        let (first, last) =
            (place.file_offset / BLOCK as u64, (place.file_offset + buf.len() as u64).saturating_sub(1) / BLOCK as u64);
        if buf.is_empty() {
            return Ok(());
        }
        if first != last || buf.len() > BLOCK {
            let part = &self.parts[place.part];
            part.file.read_exact_at(buf, place.file_offset).map_err(Error::io(&part.name, "read"))?;
            self.bytes_read += buf.len() as u64;
            return Ok(());
        }
        let slot = (first as usize ^ place.part.wrapping_mul(0x9e37)) % SLOTS;
        let hit = matches!(&self.blocks[slot], Some((p, b, _)) if *p == place.part && *b == first);
        if !hit {
            let part = &self.parts[place.part];
            let start = first * BLOCK as u64;
            let n = (part.size.saturating_sub(start)).min(BLOCK as u64) as usize;
            let mut block = vec![0u8; n].into_boxed_slice();
            part.file.read_exact_at(&mut block, start).map_err(Error::io(&part.name, "read"))?;
            self.bytes_read += n as u64;
            self.blocks[slot] = Some((place.part, first, block));
        }
        let (_, _, block) = self.blocks[slot].as_ref().expect("filled above");
        let at = (place.file_offset - first * BLOCK as u64) as usize;
        let Some(bytes) = block.get(at..at + buf.len()) else {
            let name = &self.parts[place.part].name;
            return Err(Error::Corrupt {
                file: name.clone(),
                offset: place.file_offset,
                reason: "the file ends before its valid bytes do".into(),
            });
        };
        buf.copy_from_slice(bytes);
        Ok(())
    }
}

/// Reads and checks the mapping: runs sorted, disjoint, within the prefix
/// and below the suffix.
fn read_mapping(mapping: &Part, valid: u64, prefix_len: u64, suffix_start: u64) -> Result<Vec<Run>> {
    let mut bytes = vec![0u8; valid as usize];
    mapping.file.read_exact_at(&mut bytes, 0).map_err(Error::io(&mapping.name, "read"))?;
    let mut runs: Vec<Run> = Vec::with_capacity(bytes.len() / 24);
    for (i, entry) in bytes.chunks_exact(24).enumerate() {
        let word = |k: usize| u64::from_le_bytes(entry[8 * k..8 * k + 8].try_into().expect("8 bytes"));
        let (off, poff, len) = (word(0), word(1), word(2));
        let bad = |reason: String| Error::Corrupt { file: mapping.name.clone(), offset: 24 * i as u64, reason };
        if len == 0 || off.checked_add(len).is_none_or(|end| end > suffix_start) {
            return Err(bad(format!("run ({off}, {len}) is empty or reaches past the suffix's start {suffix_start}")));
        }
        if poff.checked_add(len).is_none_or(|end| end > prefix_len) {
            return Err(bad(format!("run at prefix byte {poff} of {len} bytes is past the prefix's end {prefix_len}")));
        }
        if let Some(&(last, _, last_len)) = runs.last()
            && last + last_len > off
        {
            return Err(bad(format!("run at offset {off} overlaps or precedes the run before it")));
        }
        runs.push((off, poff, len));
    }
    Ok(runs)
}
