//! `store.control`: which files hold the store and where each one ends.
//!
//! The file is an 8-byte ASCII version (`00000003`, `00000004` or
//! `00000005`) and a payload in repr's binary encoding (`int63` and `int64`
//! 8 bytes big-endian, `int` LEB128, `option` `00` or `ff ‖ value`, `bool`
//! `00` or `ff`, variants a LEB128 tag then their fields). V4 and V5
//! payloads carry an Adler-32 of the payload with its checksum field zero
//! (irmin's `unix/control_file.ml`).
//!
//! Invariants: decoding never panics and never reads past the file; a
//! payload whose checksum does not match is refused, as irmin refuses it.

use crate::error::{Error, Result};
use crate::read::Cursor;

/// The control file's name in a context directory.
pub const FILE: &str = "store.control";

/// What a reader needs from the control file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Control {
    /// The major version: 3, 4 or 5.
    pub version: u8,
    /// End of the valid bytes of `store.dict`.
    pub dict_end: u64,
    /// End of the valid bytes of the last (appendable) suffix chunk.
    pub appendable_chunk_end: u64,
    /// Suffix chunks `store.{chunk_start..chunk_start + chunk_num}.suffix`.
    pub chunk_start: u64,
    pub chunk_num: u64,
    /// Volumes of the lower layer (irmin's archive mode).
    pub volume_num: u64,
    pub status: Status,
}

/// The state of the directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Upgraded from irmin-pack 1 or 2: entries before the offset may be
    /// v1 entries, whose length only the index knows.
    UpgradedFromV1V2 {
        entry_offset_at_upgrade: u64,
    },
    NoGcYet,
    /// Written with an indexing strategy other than minimal; never collected.
    NonMinimalIndexing,
    /// Collected at least once.
    Gced(Gced),
}

/// Where the live data lies after a collection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gced {
    /// Global offset of the first byte the suffix serves.
    pub suffix_start_offset: u64,
    /// Number of collections: names `store.{generation}.prefix` and `.mapping`.
    pub generation: u64,
    /// Dead bytes at the start of the first suffix chunk.
    pub suffix_dead_bytes: u64,
    /// Valid length of the mapping file, when known.
    pub mapping_end: Option<u64>,
}

impl Control {
    /// Decodes the whole file; `bytes` is its content.
    pub fn decode(bytes: &[u8]) -> Result<Control> {
        let corrupt = |offset: usize, reason: String| Error::Corrupt { file: FILE.into(), offset: offset as u64, reason };
        if bytes.len() < 8 {
            return Err(corrupt(0, format!("{} bytes, shorter than its 8-byte version", bytes.len())));
        }
        let version = match &bytes[..8] {
            b"00000003" => 3,
            b"00000004" => 4,
            b"00000005" => 5,
            b"00000001" | b"00000002" => {
                return Err(Error::Unsupported(format!(
                    "{FILE}: irmin-pack version {} (before 3.0); open it once with irmin 3.x or Octez to upgrade it",
                    bytes[7] as char
                )));
            }
            other => {
                return Err(corrupt(
                    0,
                    format!("unknown version {:?} (expected 00000003 to 00000005)", String::from_utf8_lossy(other)),
                ));
            }
        };
        let payload = &bytes[8..];
        let mut c = Cursor::new(payload, FILE, 8);
        let dict_end = c.int63("dict_end_poff")?;
        let control = if version == 3 {
            let suffix_end = c.int63("suffix_end_poff")?;
            let status = status(&mut c, version)?;
            // One suffix file, named after the collections so far.
            let chunk_start = if let Status::Gced(gc) = &status { gc.generation } else { 0 };
            Control { version, dict_end, appendable_chunk_end: suffix_end, chunk_start, chunk_num: 1, volume_num: 0, status }
        } else {
            let appendable_chunk_end = c.int63("appendable_chunk_poff")?;
            if version == 4 {
                c.bool("upgraded_from_v3_to_v4")?;
            } else if c.option("upgraded_from")? {
                c.int("upgraded_from")?;
            }
            let checksum_at = c.pos();
            let stored_checksum = c.int63("checksum")?;
            let chunk_start = c.int("chunk_start_idx")?;
            let chunk_num = c.int("chunk_num")?;
            let volume_num = if version == 5 { c.int("volume_num")? } else { 0 };
            let status = status(&mut c, version)?;
            let mut zeroed = payload.to_vec();
            zeroed[checksum_at..checksum_at + 8].fill(0);
            let computed = u64::from(adler2::adler32_slice(&zeroed));
            if computed != stored_checksum {
                return Err(corrupt(
                    8 + checksum_at,
                    format!("checksum mismatch: stored {stored_checksum:#010x}, the payload sums to {computed:#010x}"),
                ));
            }
            if chunk_num == 0 {
                return Err(corrupt(8, "no suffix chunk".into()));
            }
            Control { version, dict_end, appendable_chunk_end, chunk_start, chunk_num, volume_num, status }
        };
        // repr's decoder, which irmin uses, requires the payload consumed exactly.
        if c.remaining() > 0 {
            return Err(c.error(format!("{} bytes after the payload", c.remaining())));
        }
        Ok(control)
    }
}

/// The status variant, last in every payload.
fn status(c: &mut Cursor<'_>, version: u8) -> Result<Status> {
    Ok(match c.tag("status")? {
        0 => Status::UpgradedFromV1V2 { entry_offset_at_upgrade: c.int63("entry_offset_at_upgrade_to_v3")? },
        1 => Status::NoGcYet,
        2 => Status::NonMinimalIndexing,
        3 => {
            let suffix_start_offset = c.int63("suffix_start_offset")?;
            let generation = c.int("generation")?;
            let (mut suffix_dead_bytes, mut mapping_end) = (0, None);
            if version > 3 {
                let _latest_gc_target_offset = c.int63("latest_gc_target_offset")?;
                suffix_dead_bytes = c.int63("suffix_dead_bytes")?;
                if version == 5 && c.option("mapping_end_poff")? {
                    mapping_end = Some(c.int63("mapping_end_poff")?);
                }
            }
            Status::Gced(Gced { suffix_start_offset, generation, suffix_dead_bytes, mapping_end })
        }
        t => return Err(c.error(format!("status tag {t} is not one irmin 3.7 writes"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A V5 payload as irmin writes it for a fresh store.
    fn fresh() -> Vec<u8> {
        let mut payload = Vec::new();
        payload.extend_from_slice(&100u64.to_be_bytes()); // dict end
        payload.extend_from_slice(&5000u64.to_be_bytes()); // appendable chunk end
        payload.push(0); // upgraded_from: None
        payload.extend_from_slice(&[0; 8]); // checksum
        payload.extend_from_slice(&[0, 1, 0, 1]); // chunk start, chunk num, volumes, No_gc_yet
        let sum = u64::from(adler2::adler32_slice(&payload));
        payload[17..25].copy_from_slice(&sum.to_be_bytes());
        [b"00000005".as_slice(), &payload].concat()
    }

    #[test]
    fn decodes_a_fresh_v5_payload() {
        let control = Control::decode(&fresh()).unwrap();
        assert_eq!(control.dict_end, 100);
        assert_eq!(control.appendable_chunk_end, 5000);
        assert_eq!((control.chunk_start, control.chunk_num, control.volume_num), (0, 1, 0));
        assert_eq!(control.status, Status::NoGcYet);
    }

    #[test]
    fn every_flipped_byte_or_cut_is_refused() {
        let good = fresh();
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x01;
            assert!(Control::decode(&bad).is_err(), "flip at {at} accepted");
        }
        for len in 0..good.len() {
            assert!(Control::decode(&good[..len]).is_err(), "cut at {len} accepted");
        }
    }

    /// A V4 payload after collections, as irmin 3.4-3.5 writes it.
    #[test]
    fn decodes_a_collected_v4_payload() {
        let mut payload = Vec::new();
        payload.extend_from_slice(&100u64.to_be_bytes()); // dict end
        payload.extend_from_slice(&700u64.to_be_bytes()); // appendable chunk end
        payload.push(0xff); // upgraded_from_v3_to_v4: true
        payload.extend_from_slice(&[0; 8]); // checksum
        payload.extend_from_slice(&[2, 2, 3]); // chunk start 2, 2 chunks, Gced
        payload.extend_from_slice(&5000u64.to_be_bytes()); // suffix start offset
        payload.push(4); // generation
        payload.extend_from_slice(&4900u64.to_be_bytes()); // latest gc target
        payload.extend_from_slice(&64u64.to_be_bytes()); // dead bytes
        let sum = u64::from(adler2::adler32_slice(&payload));
        payload[17..25].copy_from_slice(&sum.to_be_bytes());
        let control = Control::decode(&[b"00000004".as_slice(), &payload].concat()).unwrap();
        assert_eq!((control.version, control.chunk_start, control.chunk_num, control.appendable_chunk_end), (4, 2, 2, 700));
        assert_eq!(
            control.status,
            Status::Gced(Gced { suffix_start_offset: 5000, generation: 4, suffix_dead_bytes: 64, mapping_end: None })
        );
        payload[30] ^= 1;
        assert!(Control::decode(&[b"00000004".as_slice(), &payload].concat()).is_err(), "the checksum covers the status");
    }

    /// A V3 payload (no checksum): one suffix file, named after the
    /// collections so far.
    #[test]
    fn decodes_v3_payloads() {
        let mut payload = Vec::new();
        payload.extend_from_slice(&100u64.to_be_bytes());
        payload.extend_from_slice(&900u64.to_be_bytes()); // suffix end
        payload.push(1); // no collection yet
        let control = Control::decode(&[b"00000003".as_slice(), &payload].concat()).unwrap();
        assert_eq!((control.chunk_start, control.chunk_num, control.appendable_chunk_end), (0, 1, 900));
        assert_eq!(control.status, Status::NoGcYet);
        payload.pop();
        payload.push(3); // collected: suffix start, generation
        payload.extend_from_slice(&800u64.to_be_bytes());
        payload.push(2);
        let control = Control::decode(&[b"00000003".as_slice(), &payload].concat()).unwrap();
        assert_eq!((control.chunk_start, control.chunk_num), (2, 1));
        assert_eq!(
            control.status,
            Status::Gced(Gced { suffix_start_offset: 800, generation: 2, suffix_dead_bytes: 0, mapping_end: None })
        );
        payload.push(0);
        assert!(Control::decode(&[b"00000003".as_slice(), &payload].concat()).is_err(), "a byte after the payload");
    }

    #[test]
    fn stores_before_3_0_and_upgraded_ones_are_named() {
        assert!(matches!(Control::decode(b"00000002xxxxxxxx"), Err(Error::Unsupported(m)) if m.contains("before 3.0")));
        let mut payload = Vec::new();
        payload.extend_from_slice(&100u64.to_be_bytes());
        payload.extend_from_slice(&900u64.to_be_bytes());
        payload.push(0); // upgraded from v1 or v2
        payload.extend_from_slice(&500u64.to_be_bytes());
        let control = Control::decode(&[b"00000003".as_slice(), &payload].concat()).unwrap();
        assert_eq!(control.status, Status::UpgradedFromV1V2 { entry_offset_at_upgrade: 500 });
    }
}
