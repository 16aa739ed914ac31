//! The parsers of the files a live irmin node wrote, driven by arbitrary
//! bytes for the fuzz targets in `fuzz/` (built with the feature
//! `fuzzing`; the crate's own tests build it too and run it over the
//! committed seeds).
//!
//! Each function reads its input as the file it names and returns
//! nothing: bad bytes must give an error, never a panic, a loop or an
//! allocation the bytes do not pay for. irmin's files carry no checksum
//! but the control file's, which [`control`] also makes right to reach
//! what lies behind it.
//!
//! Boundary: the files are put in a [`MemStorage`] and read through the
//! crate's own entry points; nothing here is used by the crate itself.

use std::sync::Arc;

use pando_store::io::{MemStorage, Storage};
use pando_store::{Options, Store};

use crate::control::{self, Control};
use crate::dict::Dict;
use crate::entry::{self, EntryKind, Loc};
use crate::{Context, index};

/// `store.control` as read, and with its Adler-32 made right (versions 4
/// and 5, when the bytes reach the checksum).
pub fn control(data: &[u8]) {
    let _ = Control::decode(data);
    if let Some(fixed) = with_control_checksum(data) {
        let _ = Control::decode(&fixed);
    }
}

/// `data` with the Adler-32 of a version 4 or 5 control file made right.
fn with_control_checksum(data: &[u8]) -> Option<Vec<u8>> {
    let version = data.get(..8)?;
    // After the version: dict end and chunk end (8 bytes each), then a
    // bool (V4) or an option of an int (V5), then the checksum.
    let mut at = 8 + 16;
    match version {
        b"00000004" => at += 1,
        b"00000005" => {
            let some = *data.get(at)? != 0;
            at += 1;
            if some {
                pando_core::varint::read_u64(data, &mut at).ok()?;
            }
        }
        _ => return None,
    }
    let mut fixed = data.to_vec();
    fixed.get_mut(at..at + 8)?.fill(0);
    let sum = u64::from(adler2::adler32_slice(&fixed[8..]));
    fixed[at..at + 8].copy_from_slice(&sum.to_be_bytes());
    Some(fixed)
}

/// `store.dict`: every name, by id.
pub fn dict(data: &[u8]) {
    if let Ok(dict) = Dict::decode(data) {
        let names: usize = (0..dict.len() as u64).map(|id| dict.get(id).expect("every id below the length").len()).sum();
        assert!(names + 4 * dict.len() == data.len(), "the names and their lengths are the file");
        assert!(dict.get(dict.len() as u64).is_none());
    }
}

fn put(storage: &MemStorage, name: &str, bytes: &[u8]) {
    let file = storage.open(name, true).expect("a file in memory");
    file.write_all_at(bytes, 0).expect("a write to memory");
}

/// The index: `data` as each of its files (`data`, `log`, `log_async`)
/// in turn, every entry read.
pub fn index(data: &[u8]) {
    for name in ["data", "log", "log_async"] {
        let storage = MemStorage::new();
        put(&storage, name, data);
        let mut entries = 0u64;
        if index::for_each(&storage, &mut |_| entries += 1).is_ok() {
            assert!(entries * 45 <= data.len() as u64);
        }
    }
}

/// Splits a suffix input: `u16 LE n ‖ store.dict[n] ‖ store.0.suffix`.
fn split_suffix_input(data: &[u8]) -> (&[u8], &[u8]) {
    let Some((len, rest)) = data.split_first_chunk::<2>() else { return (&[], data) };
    rest.split_at(usize::from(u16::from_le_bytes(*len)).min(rest.len()))
}

/// A context directory of one suffix chunk and a dictionary, both from
/// `data` (`u16 LE n ‖ store.dict[n] ‖ store.0.suffix`), and a control
/// file (version 5, never collected) saying their lengths. Every entry is
/// read and decoded, a few commits are checked, and the whole history is
/// imported into an empty pando store.
pub fn suffix(data: &[u8]) {
    let (dict, suffix) = split_suffix_input(data);
    let storage = MemStorage::new();
    put(&storage, control::FILE, &fresh_control(dict.len() as u64, suffix.len() as u64));
    put(&storage, crate::dict::FILE, dict);
    put(&storage, "store.0.suffix", suffix);
    let Ok(mut context) = Context::open_storage(&storage) else { return };
    // Every entry, as a scan meets it, decoded by its kind.
    let mut at = 0;
    let from = Loc { file: "fuzz".into(), offset: 0 };
    while let Ok(entry) = entry::read(&mut context.space, at, &from) {
        assert!(entry.size > 0 && entry.body.len() as u64 <= entry.size);
        match entry.kind {
            EntryKind::Commit | EntryKind::DanglingParent => {
                let _ = entry.commit();
            }
            EntryKind::Root | EntryKind::Inode => {
                let _ = entry.inode(&context.dict);
            }
            EntryKind::Contents => {}
        }
        at += entry.size;
    }
    let Ok(commits) = context.commits() else { return };
    for commit in commits.iter().rev().take(4) {
        if let Ok((checked, _)) = context.check_commit(commit, &mut |_, _| {}) {
            assert_eq!(checked.hash, commit.hash, "a commit that checks is the one irmin recorded");
        }
    }
    let Ok(store) = Store::open_storage(Arc::new(MemStorage::new()), Options::default()) else {
        panic!("an empty store in memory opens")
    };
    if let Ok(history) = context.import_all(&store, &mut |_, _, _| {}) {
        assert_eq!(history.commits, commits.len());
        assert!(store.exists(&history.head));
    }
}

/// A version 5 control file of a store never collected, with one suffix
/// chunk of `suffix_end` bytes and a dictionary of `dict_end`.
fn fresh_control(dict_end: u64, suffix_end: u64) -> Vec<u8> {
    let mut payload = Vec::new();
    payload.extend_from_slice(&dict_end.to_be_bytes());
    payload.extend_from_slice(&suffix_end.to_be_bytes());
    payload.push(0); // upgraded_from: None
    payload.extend_from_slice(&[0; 8]); // checksum, set below
    payload.extend_from_slice(&[0, 1, 0, 1]); // chunk start 0, one chunk, no volume, no collection yet
    let sum = u64::from(adler2::adler32_slice(&payload));
    payload[17..25].copy_from_slice(&sum.to_be_bytes());
    [b"00000005".as_slice(), &payload].concat()
}

#[cfg(test)]
mod tests {
    use pando_vectors::each_fuzz_seed as each_seed;

    #[test]
    fn the_fuzz_seeds_decode_without_a_panic() {
        each_seed("irmin_control", super::control);
        each_seed("irmin_dict", super::dict);
        each_seed("irmin_index", super::index);
        each_seed("irmin_suffix", super::suffix);
    }

    /// The seeds are real files: the control files decode, and the suffix
    /// seed holds commits that check.
    #[test]
    fn the_seeds_are_real_files() {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
        let control = std::fs::read(dir.join("irmin_control/a-plain")).unwrap();
        assert!(crate::Control::decode(&control).is_ok());
        let suffix = std::fs::read(dir.join("irmin_suffix/a-plain-start")).unwrap();
        let (dict, suffix) = super::split_suffix_input(&suffix);
        let storage = pando_store::io::MemStorage::new();
        super::put(&storage, crate::control::FILE, &super::fresh_control(dict.len() as u64, suffix.len() as u64));
        super::put(&storage, crate::dict::FILE, dict);
        super::put(&storage, "store.0.suffix", suffix);
        let mut context = crate::Context::open_storage(&storage).unwrap();
        let commits = context.commits().unwrap();
        assert!(commits.len() >= 2, "{} commits", commits.len());
        let (checked, _) = context.check_commit(commits.last().unwrap(), &mut |_, _| {}).unwrap();
        assert_eq!(checked.hash, commits.last().unwrap().hash);
    }
}
