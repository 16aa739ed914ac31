//! irmin's index (`index/log_async`, `index/log`, `index/data`): hash →
//! offset of the entries it indexes, every commit at least. Used to find
//! commits fast, and to find a suffix that lost bytes (irmin writes the
//! suffix before the index, so a commit it places in the suffix is
//! there); what it says is checked against the pack.
//!
//! Each file is a header, `int63 entries_bytes ‖ "00000001" ‖ int63
//! generation ‖ int63 fan_size ‖ fan[fan_size]`, then 45-byte entries
//! `hash[32] ‖ int64 offset ‖ int32 length ‖ kind` (all big-endian).
//!
//! Invariants: memory is one read buffer, whatever the index's size; a
//! damaged index is an error naming its file and byte, and the caller
//! still checks each offset against the pack (the index may list
//! collected commits, and lag behind the pack after a crash).

use pando_core::Hash;
use pando_store::io::Storage;

use crate::error::{Error, Result};
use crate::read::Cursor;

const ENTRY: u64 = 45;
/// Entries read per call.
const BATCH: u64 = 8192;

/// An entry of the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    pub hash: Hash,
    pub offset: u64,
    pub kind: u8,
}

/// Calls `f` on every entry of the index's files (`data`, `log`,
/// `log_async`, those present), in file order.
pub fn for_each(dir: &dyn Storage, f: &mut dyn FnMut(IndexEntry)) -> Result<()> {
    for name in ["data", "log", "log_async"] {
        let shown = format!("index/{name}");
        if !dir.exists(name).map_err(Error::io(&shown, "look for"))? {
            continue;
        }
        let file = dir.open(name, false).map_err(Error::io(&shown, "open"))?;
        let size = file.len().map_err(Error::io(&shown, "read the size of"))?;
        let mut head = [0u8; 32];
        if size < 32 {
            return Err(Error::Corrupt { file: shown, offset: 0, reason: format!("{size} bytes, shorter than its header") });
        }
        file.read_exact_at(&mut head, 0).map_err(Error::io(&shown, "read"))?;
        let mut c = Cursor::new(&head, &shown, 0);
        let entries_bytes = c.int63("entries' length")?;
        if c.take(8, "version")? != b"00000001" {
            return Err(Error::Corrupt { file: shown, offset: 8, reason: "unknown index version".into() });
        }
        let _generation = c.int63("generation")?;
        let fan = c.int63("fan-out size")?;
        let start = 32u64.saturating_add(fan);
        if entries_bytes % ENTRY != 0 || start.saturating_add(entries_bytes) > size {
            return Err(Error::Corrupt {
                file: shown,
                offset: 0,
                reason: format!("{entries_bytes} bytes of entries after a {fan}-byte fan-out, in a {size}-byte file (truncated)"),
            });
        }
        let mut buf = Vec::new();
        let mut at = 0;
        while at < entries_bytes {
            let n = (entries_bytes - at).min(BATCH * ENTRY);
            buf.resize(n as usize, 0);
            file.read_exact_at(&mut buf, start + at).map_err(Error::io(&shown, "read"))?;
            for entry in buf.chunks_exact(ENTRY as usize) {
                f(IndexEntry {
                    hash: Hash::from_slice(&entry[..32]).expect("32 bytes"),
                    offset: u64::from_be_bytes(entry[32..40].try_into().expect("8 bytes")),
                    kind: entry[44],
                });
            }
            at += n;
        }
    }
    Ok(())
}
