//! Damaged copies of a real irmin-pack store (in memory): every damage is
//! refused with an error naming the file and byte at fault, never a panic,
//! and an import of a damaged store leaves the pando store empty.

use std::sync::Arc;

use pando_core::Hash;
use pando_store::io::{File, MemStorage, Storage};
use pando_store::{Options, Store};

use crate::entry::{self, EntryKind, Loc};
use crate::{Context, Error};

fn vector(name: &str) -> std::path::PathBuf {
    pando_vectors::path("irmin-stores").join(name)
}

/// The files of vector store `name` (its index aside) in memory.
fn load(name: &str) -> MemStorage {
    let storage = MemStorage::new();
    for entry in std::fs::read_dir(vector(name)).expect("the vector store") {
        let path = entry.unwrap().path();
        if path.is_file() {
            let file = storage.open(path.file_name().unwrap().to_str().unwrap(), true).unwrap();
            file.write_all_at(&std::fs::read(&path).unwrap(), 0).unwrap();
        }
    }
    storage
}

fn file(storage: &MemStorage, name: &str) -> Arc<dyn File> {
    storage.open(name, false).unwrap()
}

fn flip(storage: &MemStorage, name: &str, at: u64) {
    let file = file(storage, name);
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, at).unwrap();
    file.write_all_at(&[byte[0] ^ 0x20], at).unwrap();
}

fn head(name: &str) -> Hash {
    let text = std::fs::read_to_string(vector(&format!("{name}.json"))).unwrap();
    let side: serde_json::Value = serde_json::from_str(&text).unwrap();
    Hash::from_base58(side["head_commit"].as_str().unwrap()).unwrap()
}

/// Checks the head of a (possibly damaged) copy.
fn check_head(storage: &MemStorage, head: &Hash) -> crate::Result<()> {
    let mut context = Context::open_storage(storage)?;
    let commit = context.find_commit(Some(head))?;
    let (checked, _) = context.check_commit(&commit, &mut |_, _| {})?;
    assert_eq!(&checked.hash, head, "a check that passes found the head irmin recorded");
    Ok(())
}

#[test]
fn a_cut_suffix_is_refused_naming_it() {
    let storage = load("a-plain");
    let suffix = file(&storage, "store.0.suffix");
    let len = suffix.len().unwrap();
    suffix.truncate(len - 1000).unwrap();
    match Context::open_storage(&storage) {
        Err(Error::Corrupt { file, offset, reason }) => {
            assert_eq!((file.as_str(), offset), ("store.0.suffix", len - 1000));
            assert!(reason.contains("truncated"), "{reason}");
        }
        other => panic!("a cut suffix: {:?}", other.err()),
    }
}

#[test]
fn every_flipped_control_byte_is_refused_naming_the_control_file() {
    for name in ["a-plain", "a-gc"] {
        let len = load(name).open("store.control", false).unwrap().len().unwrap();
        for at in 0..len {
            let storage = load(name);
            flip(&storage, "store.control", at);
            match Context::open_storage(&storage) {
                Err(Error::Corrupt { file, .. }) => assert_eq!(file, "store.control", "{name}: flip at {at}"),
                Err(Error::Unsupported(m)) => assert!(m.contains("store.control"), "{name}: flip at {at}: {m}"),
                other => panic!("{name}: flip at {at} of the control file: {:?}", other.err()),
            }
        }
    }
}

#[test]
fn a_flipped_byte_in_a_live_contents_names_its_entry() {
    let name = "a-plain";
    let storage = load(name);
    // The entry of a value the head holds (`big_maps/index/169/key_type`).
    let value =
        hex_value("eab4497ef08639fb49cbee807ef7485de6c749007cbea19bd3cefee83e8e9cc449d7a69908c021e78094a2d21e9d02d085066db74a");
    let mut context = Context::open_storage(&storage).unwrap();
    let (_, end) = context.space.suffix_range();
    let (mut at, mut found) = (0, None);
    while at < end {
        let origin = Loc { file: "test".into(), offset: at };
        let entry = entry::read(&mut context.space, at, &origin).unwrap();
        at += entry.size;
        if entry.kind == EntryKind::Contents && entry.body == value {
            found = Some(entry);
        }
    }
    let entry = found.expect("the sample value is stored");
    drop(context);
    flip(&storage, "store.0.suffix", entry.body_at + 3);
    match check_head(&storage, &head(name)) {
        Err(Error::HashMismatch { file, offset, what, stored, .. }) => {
            assert_eq!((file.as_str(), offset, what, stored), ("store.0.suffix", entry.loc.offset, "contents", entry.hash));
        }
        other => panic!("a flipped value: {other:?}"),
    }
    // An import of the damaged store lands nothing.
    let store = Store::open_storage(Arc::new(MemStorage::new()), Options::default()).unwrap();
    let mut context = Context::open_storage(&storage).unwrap();
    let commit = context.find_commit(Some(&head(name))).unwrap();
    assert!(matches!(context.import_commit(&commit, &store, &mut |_, _| {}), Err(Error::HashMismatch { .. })));
    assert!(store.checkout(&head(name)).unwrap().is_none());
}

fn hex_value(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn flipped_bytes_across_the_files_never_pass_as_the_head() {
    for name in ["a-plain", "a-gc"] {
        let head = head(name);
        let clean = load(name);
        let mut refused = 0;
        let names: Vec<String> = clean
            .list()
            .unwrap()
            .into_iter()
            .filter(|n| n.ends_with("suffix") || n.ends_with("prefix") || n.ends_with("mapping") || n == "store.dict")
            .collect();
        // The head commit is the last entry of the last chunk holding any.
        let chunk =
            |n: &String| n.strip_prefix("store.").and_then(|n| n.strip_suffix(".suffix")).and_then(|i| i.parse::<u64>().ok());
        let head_file = names.iter().filter(|n| file(&clean, n).len().unwrap() > 0).max_by_key(|n| chunk(n)).unwrap().clone();
        for file_name in &names {
            let len = file(&clean, file_name).len().unwrap();
            // About 40 places per file, the last bytes included (the head
            // commit is the suffix's last entry).
            let step = (len / 40).max(1);
            for at in (0..len).step_by(step as usize).chain([len.saturating_sub(1)]) {
                if len == 0 {
                    break;
                }
                let storage = load(name);
                flip(&storage, file_name, at);
                match check_head(&storage, &head) {
                    // Dead bytes (versions the head no longer holds).
                    Ok(()) => assert!(!(*file_name == head_file && at + 1 == len), "{name}: the head commit's last byte"),
                    Err(Error::Corrupt { .. } | Error::HashMismatch { .. } | Error::Unsupported(_) | Error::UnknownCommit(_)) => {
                        refused += 1
                    }
                    Err(other) => panic!("{name}: flip at {file_name} byte {at}: {other}"),
                }
            }
        }
        assert!(refused >= 10, "{name}: only {refused} flips were noticed");
    }
}

#[test]
fn a_pointer_forward_or_to_itself_is_refused_not_followed() {
    let name = "a-plain";
    let storage = load(name);
    let mut context = Context::open_storage(&storage).unwrap();
    let head = context.find_commit(Some(&head(name))).unwrap();
    let origin = Loc { file: "test".into(), offset: head.offset };
    let entry = entry::read(&mut context.space, head.offset, &origin).unwrap();
    drop(context);
    // The commit's node address: tag 0, then the offset, made the commit's own.
    let file = file(&storage, "store.0.suffix");
    file.write_all_at(&head.offset.to_be_bytes(), entry.body_at + 1).unwrap();
    match check_head(&storage, &head.hash) {
        Err(Error::Corrupt { file, offset, reason }) => {
            assert_eq!((file.as_str(), offset), ("store.0.suffix", entry.loc.offset));
            assert!(reason.contains("a pointer forward"), "{reason}");
        }
        other => panic!("a commit pointing to itself: {other:?}"),
    }
}
