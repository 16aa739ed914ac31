//! The control file: the single source of truth of what is durable.
//!
//! The file holds three slots of [`SLOT_SIZE`] bytes. A slot is
//! `magic ‖ fields ‖ crc32c`, all integers little-endian.
//! - The two *synced* slots, at offsets 0 and [`SLOT_SIZE`], are written
//!   with an fsync (checkpoints, collection steps, explicit flushes), each
//!   time to the slot that does not hold the newest synced state (the
//!   writer picks a `seq` of the other parity), so a torn write always
//!   leaves the newest synced state intact.
//! - The *hint* slot, at [`HINT_OFFSET`], is written after each commit's
//!   pack fsync without an fsync of its own: it tells readers in other
//!   processes how far to read, and saves the second fsync of a commit.
//!   Losing it loses nothing: opening for writing scans the pack past the
//!   durable end it finds (see `store/open`).
//!
//! Opening reads all three and takes the valid slot with the highest
//! sequence number. Every layout change is a synced write with a `seq`
//! above every hint written before it, so a stale hint can never win over it.
//!
//! Invariants:
//! - A slot (synced or hint) is written only after every byte it describes
//!   is durable, so whichever slot wins describes durable data (tested by
//!   `crash_without_fault_at_every_commit`).
//! - A synced write goes to the slot that does not hold the newest synced
//!   state (asserted in `next_synced_seq`).
//! - A state is written only if opening would take it: its fields agree
//!   (asserted in `encode`).
//! - The store's layout is named by every slot: [`FLAG_BINARY`] in a
//!   version 6 slot, L1's in a version 5 one (or older); a slot that
//!   says otherwise, or sets a flag this build does not know, is refused
//!   (checked in `inconsistency` on decode and encode alike; tested by
//!   `the_layout_is_named_by_the_flag_and_the_version_together`).

use super::{BINARY_LAYOUT_VERSION, FORMAT_VERSION};
use pando_core::inode::Layout;

/// See [`Control::flags`].
pub const FLAG_ARCHIVE: u64 = 1;
/// See [`Control::flags`].
pub const FLAG_BINARY: u64 = 2;

/// Bytes per slot; each slot sits in its own 4 KiB page.
pub const SLOT_SIZE: usize = 4096;
/// Offset of the hint slot, written without an fsync after each commit.
pub const HINT_OFFSET: u64 = 2 * SLOT_SIZE as u64;
const MAGIC: &[u8; 8] = b"PANDOCTL";
/// Bytes of a slot actually used.
const USED: usize = 8 + 4 + 8 * 13 + 4;

/// What the control file records.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Control {
    /// Incremented by every write of the control file.
    pub seq: u64,
    /// A new pack chunk is started once the current one reaches this size.
    pub chunk_target_bytes: u64,
    /// Logical offset of the first byte of the oldest chunk.
    pub first_chunk_start: u64,
    /// Logical pack offset below which every byte is durable and valid.
    pub durable_end: u64,
    /// Pack offset up to which the index and dictionary files are complete.
    pub checkpoint_end: u64,
    /// Entries in the index file that are valid.
    pub index_entries: u64,
    /// Valid bytes of the dictionary file.
    pub dict_bytes: u64,
    /// Entries in the dictionary file.
    pub dict_entries: u64,
    /// Commits in the store.
    pub commits: u64,
    /// Offset of the last commit record, or `u64::MAX` when there is none.
    pub last_commit: u64,
    /// The layout generation: bumped by every step of a collection that
    /// changes the layout below the first chunk; names `mapping-<g>`.
    pub generation: u64,
    /// Bit 0 ([`FLAG_ARCHIVE`]): the last collection moved the chunks it
    /// replaced to cold files (archive mode) instead of discarding them.
    /// Bit 1 ([`FLAG_BINARY`]): the store's tries are of the binary
    /// layout (written as version [`BINARY_LAYOUT_VERSION`]), L1's
    /// otherwise. Other bits are zero.
    pub flags: u64,
    /// The generation whose `index-<g>` is the index (0: `index`).
    pub index_generation: u64,
}

impl Control {
    /// Whether the last collection kept the chunks it replaced as cold
    /// files ([`FLAG_ARCHIVE`]).
    pub fn archive(&self) -> bool {
        self.flags & FLAG_ARCHIVE != 0
    }

    /// The layout of the store's tries ([`FLAG_BINARY`]).
    pub fn layout(&self) -> Layout {
        if self.flags & FLAG_BINARY != 0 { Layout::TEZOS_BINARY } else { Layout::TEZOS }
    }

    /// The control file's version this state is written with: 6 for the
    /// binary layout, 5 otherwise.
    pub fn version(&self) -> u32 {
        if self.flags & FLAG_BINARY != 0 { BINARY_LAYOUT_VERSION } else { FORMAT_VERSION }
    }

    /// Offset in the control file of the synced slot this state is
    /// written to (by its `seq`'s parity).
    pub fn slot_offset(&self) -> u64 {
        (self.seq % 2) * SLOT_SIZE as u64
    }

    /// The `seq` of the next synced write after this state (the newest,
    /// synced or hinted), when the newest synced slot holds `synced_seq`:
    /// the smallest higher `seq` whose slot is the other one.
    pub fn next_synced_seq(&self, synced_seq: u64) -> u64 {
        assert!(synced_seq <= self.seq, "the newest state is at least as new as the newest synced one");
        let seq = self.seq + 1;
        let next = if seq % 2 == synced_seq % 2 { seq + 1 } else { seq };
        assert_ne!(next % 2, synced_seq % 2, "a synced write goes to the slot without the newest synced state");
        next
    }

    /// Why the fields contradict each other, if they do: what
    /// [`decode_slot`] refuses as [`SlotError::Inconsistent`].
    fn inconsistency(&self) -> Option<&'static str> {
        if self.checkpoint_end > self.durable_end || self.first_chunk_start > self.durable_end {
            Some("offsets out of order")
        } else if self.index_generation > self.generation {
            Some("index generation after the layout generation")
        } else if self.chunk_target_bytes == 0 {
            Some("zero chunk size")
        } else if self.last_commit != u64::MAX && self.last_commit >= self.durable_end {
            Some("last commit past the durable end")
        } else if self.flags & !(FLAG_ARCHIVE | FLAG_BINARY) != 0 {
            Some("flags this build does not know")
        } else {
            None
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        // Opening would refuse the slot, and take an older state.
        let why = self.inconsistency();
        assert!(why.is_none(), "a control state is written only with fields that agree: {}", why.unwrap_or_default());
        let mut out = Vec::with_capacity(SLOT_SIZE);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.version().to_le_bytes());
        for field in [
            self.seq,
            self.chunk_target_bytes,
            self.first_chunk_start,
            self.durable_end,
            self.checkpoint_end,
            self.index_entries,
            self.dict_bytes,
            self.dict_entries,
            self.commits,
            self.last_commit,
            self.generation,
            self.flags,
            self.index_generation,
        ] {
            out.extend_from_slice(&field.to_le_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(out.len(), USED);
        out.resize(SLOT_SIZE, 0);
        out
    }
}

/// Why a slot was not usable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotError {
    /// All zeros: never written.
    Empty,
    BadMagic,
    BadChecksum,
    UnsupportedVersion(u32),
    /// The fields contradict each other.
    Inconsistent(&'static str),
}

/// Decodes one slot.
pub fn decode_slot(bytes: &[u8]) -> Result<Control, SlotError> {
    if bytes.len() < USED {
        return Err(SlotError::Empty);
    }
    if bytes[..USED].iter().all(|&b| b == 0) {
        return Err(SlotError::Empty);
    }
    if &bytes[..8] != MAGIC {
        return Err(SlotError::BadMagic);
    }
    let crc_at = USED - 4;
    let stored = u32::from_le_bytes(bytes[crc_at..USED].try_into().expect("4 bytes"));
    if crc32c::crc32c(&bytes[..crc_at]) != stored {
        return Err(SlotError::BadChecksum);
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if !(super::OLDEST_READ_VERSION..=BINARY_LAYOUT_VERSION).contains(&version) {
        return Err(SlotError::UnsupportedVersion(version));
    }
    let field = |i: usize| u64::from_le_bytes(bytes[12 + 8 * i..20 + 8 * i].try_into().expect("8 bytes"));
    let control = Control {
        seq: field(0),
        chunk_target_bytes: field(1),
        first_chunk_start: field(2),
        durable_end: field(3),
        checkpoint_end: field(4),
        index_entries: field(5),
        dict_bytes: field(6),
        dict_entries: field(7),
        commits: field(8),
        last_commit: field(9),
        generation: field(10),
        flags: field(11),
        index_generation: field(12),
    };
    match control.inconsistency() {
        Some(why) => Err(SlotError::Inconsistent(why)),
        // The flag and the version name the layout together.
        None if (version == BINARY_LAYOUT_VERSION) != (control.flags & FLAG_BINARY != 0) => {
            Err(SlotError::Inconsistent("a layout flag and a version that disagree"))
        }
        None => Ok(control),
    }
}

/// What a control file holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slots {
    /// The newest valid state, synced or hinted.
    pub newest: Control,
    /// The `seq` of the newest valid synced slot: the next synced write
    /// goes to the other one.
    pub synced_seq: u64,
    /// The slots that hold something other than a valid state (never
    /// written is not damage): `(slot, why)`, slots 0 and 1 synced, 2 the
    /// hint.
    pub damaged: Vec<(usize, SlotError)>,
}

impl Slots {
    /// The damaged synced slots: a crash during a synced write, or damage.
    /// The store is read at an older state than the one such a slot held.
    pub fn damaged_synced(&self) -> impl Iterator<Item = &(usize, SlotError)> {
        self.damaged.iter().filter(|(i, _)| *i < 2)
    }
}

/// Picks the newest valid slot of a control file's bytes. A synced slot
/// must be valid (a hint alone is not a store); on failure, returns the
/// errors of both synced slots.
pub fn decode(bytes: &[u8]) -> Result<Slots, (SlotError, SlotError)> {
    let [first, second, hint] = [0, 1, 2].map(|i: usize| {
        let rest = bytes.get(i * SLOT_SIZE..).unwrap_or(&[]);
        decode_slot(&rest[..rest.len().min(SLOT_SIZE)])
    });
    let damaged = [&first, &second, &hint]
        .into_iter()
        .enumerate()
        .filter_map(|(i, slot)| match slot {
            Err(error) if *error != SlotError::Empty => Some((i, error.clone())),
            _ => None,
        })
        .collect();
    let synced = match (first, second) {
        (Ok(a), Ok(b)) => {
            if a.seq >= b.seq {
                a
            } else {
                b
            }
        }
        (Ok(a), Err(_)) => a,
        (Err(_), Ok(b)) => b,
        (Err(a), Err(b)) => return Err((a, b)),
    };
    let synced_seq = synced.seq;
    let newest = match hint {
        Ok(hint) if hint.seq > synced_seq => hint,
        _ => synced,
    };
    Ok(Slots { newest, synced_seq, damaged })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(seq: u64) -> Control {
        Control { seq, chunk_target_bytes: 1 << 20, durable_end: 100 + seq, last_commit: u64::MAX, ..Control::default() }
    }

    /// `slot` with its version set to `version` and its checksum made again.
    fn with_version(mut slot: Vec<u8>, version: u32) -> Vec<u8> {
        slot[8..12].copy_from_slice(&version.to_le_bytes());
        let crc = crc32c::crc32c(&slot[..USED - 4]);
        slot[USED - 4..USED].copy_from_slice(&crc.to_le_bytes());
        slot
    }

    #[test]
    fn the_layout_is_named_by_the_flag_and_the_version_together() {
        let l1 = sample(1);
        let binary = Control { flags: FLAG_BINARY | FLAG_ARCHIVE, ..sample(1) };
        assert_eq!(decode_slot(&l1.encode()).unwrap().layout(), Layout::TEZOS);
        assert_eq!(&l1.encode()[8..12], &5u32.to_le_bytes());
        let decoded = decode_slot(&binary.encode()).unwrap();
        assert_eq!((decoded.layout(), decoded.archive()), (Layout::TEZOS_BINARY, true));
        assert_eq!(&binary.encode()[8..12], &6u32.to_le_bytes());
        let disagree = Err(SlotError::Inconsistent("a layout flag and a version that disagree"));
        assert_eq!(decode_slot(&with_version(binary.encode(), 5)), disagree);
        assert_eq!(decode_slot(&with_version(l1.encode(), 6)), disagree);
        assert_eq!(decode_slot(&with_version(l1.encode(), 7)), Err(SlotError::UnsupportedVersion(7)));
        // A flag this build does not know: refused, never ignored.
        let mut unknown = binary.encode();
        unknown[12 + 8 * 11] |= 4;
        let unknown = with_version(unknown, 6);
        assert_eq!(decode_slot(&unknown), Err(SlotError::Inconsistent("flags this build does not know")));
    }

    #[test]
    fn newest_valid_slot_wins() {
        let mut file = vec![0u8; 2 * SLOT_SIZE];
        for seq in 1..=3 {
            let c = sample(seq);
            let at = c.slot_offset() as usize;
            file[at..at + SLOT_SIZE].copy_from_slice(&c.encode());
        }
        assert_eq!(decode(&file).unwrap().newest.seq, 3);
        // Tear the newest slot: the previous state remains.
        file[SLOT_SIZE + 20] ^= 0xff;
        assert_eq!(decode(&file).unwrap().newest.seq, 2);
        assert_eq!(decode(&file).unwrap().damaged, vec![(1, SlotError::BadChecksum)], "named, the hint's absence is not");
        file[20] ^= 0xff;
        assert!(decode(&file).is_err());
        assert!(decode(&[]).is_err());
    }

    #[test]
    fn a_newer_hint_wins_and_a_torn_or_older_one_is_ignored() {
        let mut file = vec![0u8; 3 * SLOT_SIZE];
        let synced = sample(4);
        file[..SLOT_SIZE].copy_from_slice(&synced.encode());
        let hint = |file: &mut Vec<u8>, seq: u64| {
            let at = HINT_OFFSET as usize;
            file[at..at + SLOT_SIZE].copy_from_slice(&sample(seq).encode());
        };
        hint(&mut file, 6);
        let slots = decode(&file).unwrap();
        assert_eq!((slots.newest.seq, slots.synced_seq), (6, 4));
        // The next synced write skips to the other slot's parity.
        assert_eq!(slots.newest.next_synced_seq(slots.synced_seq), 7);
        assert_eq!(sample(5).next_synced_seq(4), 7);
        file[HINT_OFFSET as usize + 20] ^= 0xff;
        assert_eq!(decode(&file).unwrap().newest.seq, 4);
        // A hint older than the synced state (written before a collection
        // step) never wins.
        hint(&mut file, 3);
        assert_eq!(decode(&file).unwrap().newest.seq, 4);
        // A hint alone is not a store.
        file[..SLOT_SIZE].fill(0);
        hint(&mut file, 9);
        assert!(decode(&file).is_err());
    }

    #[test]
    fn every_flipped_bit_is_caught() {
        let good = sample(7).encode();
        for bit in 0..USED * 8 {
            let mut slot = good.clone();
            slot[bit / 8] ^= 1 << (bit % 8);
            assert!(decode_slot(&slot).is_err(), "bit {bit}");
        }
    }
}
