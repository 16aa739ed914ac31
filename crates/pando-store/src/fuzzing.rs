//! The store's decoders of bytes from disk, driven by arbitrary bytes for
//! the fuzz targets in `fuzz/` (built with the feature `fuzzing`; the
//! crate's own tests build it too and run it over the committed seeds).
//!
//! Each function decodes its input as one file or record would be read
//! and returns nothing: bad bytes must give an error, and a panic here is
//! a finding. Where an encoder exists, what decodes is encoded again and
//! must decode to the same thing. Checksums stop a fuzzer at the first
//! byte it changes, so each function also decodes its input once more
//! with the checksums made right, to reach what lies behind them.
//!
//! Boundary: only the decoders' own entry points are called, as the store
//! calls them; nothing here is used by the store itself.

use std::collections::BTreeMap;
use std::sync::Arc;

use pando_core::Hash;

use crate::dict::{self, Dict, RawSteps};
use crate::format::commit::CommitRecord;
use crate::format::control;
use crate::format::mapping;
use crate::format::node;
use crate::format::patch::{TreePatch, ValuesPatch};
use crate::format::record::{self, Parse, RecordKind};
use crate::io::MemStorage;
use crate::node::{Body, Child, Inode, Leaf, Pointers, Ptr, Step, Values, ValuesMarks};
use crate::store::{branches, index_file};
use crate::{Options, Store};

/// Where the records decoded here lie: far enough that any small delta
/// points inside the pack.
const AT: u64 = 1 << 40;

/// The dictionary the value inodes decoded here are read with: the one
/// of a store that replayed `pando gen --preset tiny` (where the seeds
/// come from).
fn sample_dict() -> Dict {
    const STEPS: &str = "0 1 2 3 balance code contents counter data delegates index key_type len paid_bytes \
        random_seed selected_stake_distribution storage total_bytes used_bytes value_type big_maps contracts current \
        cycle first_level_of_protocol global_counter staking_balance v1 version votes endorsement_branch \
        grand_parent_branch delegate snapshot 4 5 6 7 8 9";
    let mut dict = Dict::default();
    for step in STEPS.split_whitespace() {
        dict.push(Step::from_slice(step.as_bytes()));
    }
    dict
}

/// A child of a decoded value inode, as it can be compared.
#[derive(Debug, PartialEq, Eq)]
enum Entry {
    Dir(u64, Hash),
    Inline(Vec<u8>),
    Blob(u64, Hash),
}

fn values_entries(inode: &Inode) -> Vec<(Vec<u8>, Entry)> {
    let Body::Values(values) = &inode.body else { panic!("decode_values gave a tree inode") };
    values
        .iter()
        .map(|(step, child)| {
            let entry = match child {
                Child::Dir(Ptr::Stored { offset, hash }) => Entry::Dir(*offset, *hash),
                Child::Contents(Leaf::Inline(inline)) => Entry::Inline(inline.bytes().to_vec()),
                Child::Contents(Leaf::Blob { offset, hash }) => Entry::Blob(*offset, *hash),
                _ => panic!("a decoded value inode holds only stored children and inline contents"),
            };
            (step.to_vec(), entry)
        })
        .collect()
}

fn tree_children(pointers: &Pointers) -> Vec<(usize, u64, Hash)> {
    pointers
        .iter()
        .map(|(i, ptr)| match ptr {
            Ptr::Stored { offset, hash } => (i, *offset, *hash),
            Ptr::Mem(..) => panic!("a decoded tree inode holds only stored pointers"),
        })
        .collect()
}

/// A pack record: its framing (`kind ‖ length ‖ payload ‖ crc32c`), then
/// the payload of the kind its first byte names, as the loader and the
/// collection's reference scan read it; and the rest of the input as such
/// a payload without framing (so that no checksum stands in the way).
pub fn record(data: &[u8]) {
    match record::parse(data) {
        Parse::Record { kind, payload, total } => {
            assert!(total <= data.len() && payload.len() < total);
            let mut framed = Vec::new();
            record::append(&mut framed, kind, payload);
            assert_eq!(record::parse(&framed), Parse::Record { kind, payload, total: framed.len() });
            payload_of(kind, payload);
        }
        Parse::NeedMore { total } => assert!(total > data.len() || data.is_empty()),
        Parse::Invalid { .. } => {}
    }
    if let Some((&kind, payload)) = data.split_first()
        && let Some(kind) = RecordKind::from_byte(kind)
    {
        payload_of(kind, payload);
    }
}

/// Decodes `payload` as a record of `kind` at [`AT`].
fn payload_of(kind: RecordKind, payload: &[u8]) {
    let mut references = Vec::new();
    let referenced = node::references(kind, payload, AT, 0, &mut references);
    match kind {
        RecordKind::Values => {
            let dict = sample_dict();
            let Ok(inode) = node::decode_values(payload, AT, &dict) else { return };
            assert!(referenced.is_ok(), "a value inode that decodes has references");
            let entries = values_entries(&inode);
            let Body::Values(values) = &inode.body else { unreachable!() };
            let mut out = Vec::new();
            let resolved = node::resolve_children(values, &[]);
            node::encode_values(values, AT, &resolved, &dict, Some(&mut RawSteps::default()), &mut out);
            let again = node::decode_values(&out, AT, &dict).expect("an encoded value inode decodes");
            assert_eq!(values_entries(&again), entries, "a value inode decodes to what it encodes");
        }
        RecordKind::Tree => {
            let depth = u32::from(payload.first().copied().unwrap_or(0));
            let Ok(inode) = node::decode_tree(payload, AT, depth) else { return };
            assert!(referenced.is_ok(), "a tree inode that decodes has references");
            let Body::Tree(pointers) = &inode.body else { panic!("decode_tree gave a value inode") };
            let children = tree_children(pointers);
            let mut out = Vec::new();
            node::encode_tree(depth, pointers.len, &children, AT, &mut out);
            let again = node::decode_tree(&out, AT, depth).expect("an encoded tree inode decodes");
            let Body::Tree(again) = &again.body else { unreachable!() };
            assert_eq!((again.len, tree_children(again)), (pointers.len, children));
        }
        RecordKind::TreePatch => {
            let depth = u32::from(payload.first().copied().unwrap_or(0));
            let Ok(patch) = TreePatch::decode(payload, AT, depth) else { return };
            assert!(referenced.is_ok(), "a tree patch that decodes has references");
            let mut out = Vec::new();
            patch.encode(AT, &mut out);
            let again = TreePatch::decode(&out, AT, depth).expect("an encoded tree patch decodes");
            assert_eq!(format!("{again:?}"), format!("{patch:?}"));
            // Applied to a tree inode of every child, and to one of none but the first.
            let hash = Hash([7; 32]);
            for count in [32, 1] {
                let base =
                    Inode::new(Body::Tree(Pointers::new(depth, 100, (0..count).map(|i| (i, Ptr::stored(i as u64 + 1, hash))))));
                if let Ok(applied) = patch.apply(&base) {
                    let Body::Tree(pointers) = &applied.body else { panic!("a patch gives a tree inode") };
                    assert!(pointers.count() > 0 && pointers.len == patch.len);
                }
            }
        }
        RecordKind::ValuesPatch => {
            let dict = sample_dict();
            let Ok(patch) = ValuesPatch::decode(payload, AT, &dict) else { return };
            assert!(referenced.is_ok(), "a value patch that decodes has references");
            // Applied to bases of 32 entries and of 1: what it gives, written
            // again as a patch over the same base, gives the same entries.
            for count in [32u64, 1] {
                let steps: Vec<Vec<u8>> = (0..count).map(|i| format!("{i:02}").into_bytes()).collect();
                let children = (0..count).map(|i| Child::Dir(Ptr::stored(i + 1, Hash([7; 32]))));
                let base = Inode::new(Body::Values(Values::from_sorted(steps.iter().map(|s| &s[..]).zip(children))));
                let Ok(applied) = patch.apply(&base) else { continue };
                let entries = values_entries(&applied);
                let Body::Values(values) = &applied.body else { panic!("a value patch gives a value inode") };
                let Body::Values(base_values) = &base.body else { unreachable!("a value inode") };
                let marks = ValuesMarks::between(base_values, values, same_stored);
                let resolved = node::resolve_children(values, &[]);
                let mut out = Vec::new();
                crate::format::patch::encode_values_patch(AT - 1000, &marks, values, &resolved, AT, AT, &dict, &mut out);
                let again = ValuesPatch::decode(&out, AT, &dict).expect("an encoded value patch decodes");
                let base_moved = Inode::new(base.body.clone());
                let again = again.apply(&base_moved).expect("an encoded value patch applies to its base");
                assert_eq!(values_entries(&again), entries, "a value patch gives what it was written from");
            }
        }
        RecordKind::Commit => {
            let Ok(commit) = CommitRecord::decode(payload, AT) else { return };
            assert!(referenced.is_ok(), "a commit that decodes has references");
            let again = CommitRecord::decode(&commit.encode(AT), AT).expect("an encoded commit decodes");
            assert_eq!(again, commit);
        }
        RecordKind::Dict => {
            let Ok((first, steps)) = dict::decode_record(payload) else { return };
            let first = usize::try_from(first).expect("a 64-bit machine");
            let again = dict::decode_record(&dict::encode_record(first, &steps)).expect("an encoded dictionary record decodes");
            assert_eq!(again, (first as u64, steps));
        }
        RecordKind::Blob => assert!(referenced.is_ok()),
    }
}

/// The control file: its three slots as opening reads them, and each slot
/// alone with its checksum made right.
pub fn control(data: &[u8]) {
    if let Ok(slots) = control::decode(data) {
        assert!(slots.newest.seq >= slots.synced_seq);
        check_slot(&slots.newest);
    }
    for slot in data.chunks(control::SLOT_SIZE).take(3) {
        if let Ok(decoded) = control::decode_slot(slot) {
            check_slot(&decoded);
        }
        // The checksum is the last 4 of the slot's 124 used bytes.
        if slot.len() >= 124 {
            let mut fixed = slot.to_vec();
            let crc = crc32c::crc32c(&fixed[..120]);
            fixed[120..124].copy_from_slice(&crc.to_le_bytes());
            if let Ok(decoded) = control::decode_slot(&fixed) {
                check_slot(&decoded);
            }
        }
    }
}

fn check_slot(slot: &control::Control) {
    let encoded = slot.encode();
    assert_eq!(encoded.len(), control::SLOT_SIZE);
    assert_eq!(control::decode_slot(&encoded).as_ref(), Ok(slot), "a slot decodes to what it encodes");
}

/// Replaces the last 4 bytes of `data` with the crc32c of the bytes before.
fn with_trailing_crc(data: &[u8]) -> Option<Vec<u8>> {
    let body = data.len().checked_sub(4)?;
    let mut fixed = data.to_vec();
    let crc = crc32c::crc32c(&fixed[..body]);
    fixed[body..].copy_from_slice(&crc.to_le_bytes());
    Some(fixed)
}

/// A mapping file (`mapping-<g>`), below a first chunk at the offset its
/// first 8 bytes give (the rest is the file), as read and with its
/// checksum made right.
pub fn mapping(data: &[u8]) {
    let (boundary, file) = match data.split_first_chunk::<8>() {
        Some((boundary, file)) => (u64::from_le_bytes(*boundary), file),
        None => (u64::MAX, data),
    };
    for bytes in [Some(file.to_vec()), with_trailing_crc(file)].into_iter().flatten() {
        let Ok(runs) = mapping::decode(&bytes, boundary) else { continue };
        let again = mapping::decode(&mapping::encode(&runs), boundary).expect("an encoded mapping decodes");
        assert_eq!(again, runs, "a mapping decodes to what it encodes");
        let index = mapping::RunIndex::new(&runs);
        for run in &runs {
            for offset in [run.old, run.end() - 1] {
                assert_eq!(index.find(&runs, offset), Some(run));
            }
        }
        // Files just long enough for their runs pass; one byte shorter fails.
        let mut ends: BTreeMap<u64, u64> = BTreeMap::new();
        for run in &runs {
            let end = ends.entry(run.file).or_default();
            *end = (*end).max(run.new + run.len);
        }
        let overlap = mapping::check_files(&runs, |file| ends.get(&file).copied());
        if overlap.is_ok()
            && let Some(run) = runs.first()
        {
            let short = |file: u64| ends.get(&file).map(|&end| if file == run.file { end - 1 } else { end });
            let _ = mapping::check_files(&runs, short);
        }
    }
}

/// The dictionary file: entries `LEB128 len ‖ bytes ‖ crc32c`, as read and
/// with every entry's checksum made right.
pub fn dict_file(data: &[u8]) {
    for bytes in [data.to_vec(), with_entry_crcs(data)] {
        let mut pos = 0;
        let mut entries = 0u64;
        while pos < bytes.len() {
            let before = pos;
            if dict::read_file_entry(&bytes, &mut pos).is_err() {
                break;
            }
            assert!(pos > before, "an entry takes bytes");
            entries += 1;
        }
        let Ok(steps) = dict::decode_file(&bytes, entries) else { continue };
        assert_eq!(steps.len() as u64, entries);
        let again = dict::decode_file(&dict::encode_file_entries(&steps), entries).expect("encoded entries decode");
        assert_eq!(again, steps, "dictionary entries decode to what they encode");
    }
}

/// `data` with the checksum after each entry made right, as far as the
/// entries' lengths hold.
fn with_entry_crcs(data: &[u8]) -> Vec<u8> {
    let mut fixed = data.to_vec();
    let mut pos = 0;
    while pos < fixed.len() {
        let start = pos;
        if dict::read_bytes(&fixed, &mut pos).is_err() || pos + 4 > fixed.len() {
            break;
        }
        let crc = crc32c::crc32c(&fixed[start..pos]);
        fixed[pos..pos + 4].copy_from_slice(&crc.to_le_bytes());
        pos += 4;
    }
    fixed
}

/// The commit index file (`index`) against a durable end its first 8
/// bytes give, and the branches file, as read and with their checksums
/// made right.
pub fn index_and_branches(data: &[u8]) {
    let (durable_end, file) = match data.split_first_chunk::<8>() {
        Some((end, file)) => (u64::from_le_bytes(*end), file),
        None => (u64::MAX, data),
    };
    let mut fixed = file.to_vec();
    for entry in fixed.chunks_exact_mut(index_file::ENTRY_BYTES) {
        let crc = crc32c::crc32c(&entry[..40]);
        entry[40..].copy_from_slice(&crc.to_le_bytes());
    }
    for bytes in [file, &fixed[..]] {
        if let Ok(entries) = index_file::decode(bytes, durable_end) {
            assert_eq!(entries.len(), bytes.len() / index_file::ENTRY_BYTES);
            assert_eq!(index_file::decode(&index_file::encode(&entries), durable_end), Ok(entries));
        }
    }
    for bytes in [Some(data.to_vec()), with_trailing_crc(data)].into_iter().flatten() {
        if let Ok(branches) = branches::decode(&bytes) {
            assert_eq!(branches::decode(&branches::encode(&branches)), Ok(branches), "branches decode to what they encode");
        }
    }
}

fn mem_store() -> Store {
    Store::open_storage(Arc::new(MemStorage::new()), Options::default()).expect("an empty store in memory opens")
}

/// A snapshot file imported into an empty store; and the input as the
/// raw stream, put in frames by the snapshot writer, imported too. What
/// imports exports again to the same file.
pub fn snapshot(data: &[u8]) {
    let _ = mem_store().import_snapshot(&mut &data[..]);
    let mut framed = Vec::new();
    crate::snapshot::write_frames(&mut framed, |frames| {
        frames.buf().extend_from_slice(data);
        frames.maybe_flush()
    })
    .expect("frames are written to memory");
    let store = mem_store();
    if let Ok(summary) = store.import_snapshot(&mut &framed[..]) {
        let mut out = Vec::new();
        store.export_snapshot(&summary.commit, &mut out).expect("an imported commit exports");
        assert_eq!(out, framed, "an imported snapshot exports to the same bytes");
    }
}

/// Whether two children of stored records are the same: the same record,
/// or the same inline bytes.
fn same_stored(a: &Child, b: &Child) -> bool {
    match (a, b) {
        (Child::Dir(Ptr::Stored { offset: x, .. }), Child::Dir(Ptr::Stored { offset: y, .. })) => x == y,
        (Child::Contents(Leaf::Blob { offset: x, .. }), Child::Contents(Leaf::Blob { offset: y, .. })) => x == y,
        (Child::Contents(Leaf::Inline(x)), Child::Contents(Leaf::Inline(y))) => x.bytes() == y.bytes(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use pando_vectors::each_fuzz_seed as each_seed;

    #[test]
    fn the_fuzz_seeds_decode_without_a_panic() {
        each_seed("store_record", super::record);
        each_seed("store_control", super::control);
        each_seed("store_mapping", super::mapping);
        each_seed("store_dict", super::dict_file);
        each_seed("store_index", super::index_and_branches);
        each_seed("snapshot", super::snapshot);
    }
}
