//! The Tezos inode vectors built through the store's incremental API, in a
//! shuffled order, committed and read back after a reopen; and directories
//! crossing 32 and 256 entries both ways, checked against the reference
//! hasher at every size.

mod common;

use common::*;
use pando_store::io::MemStorage;
use pando_store::{CommitMeta, Options, Store, Tree};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use serde_json::Value;
use std::sync::Arc;

fn vectors() -> Vec<Value> {
    let path = pando_vectors::path("tezos-inodes.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str::<Value>(&text).unwrap().as_array().unwrap().clone()
}

#[test]
fn inode_vectors_through_the_store() {
    let storage = MemStorage::new();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut commits = Vec::new();
    {
        let store = Store::open_storage(Arc::new(storage.clone()), Options::default()).unwrap();
        for v in vectors() {
            let mut leaves = Vec::new();
            flatten(&v["entries"], &Vec::new(), &mut leaves);
            leaves.shuffle(&mut rng);
            let mut tree = store.empty_tree();
            for (path, value) in &leaves {
                tree = tree.add(path, value).unwrap();
            }
            let expected = v["hash"].as_str().unwrap();
            assert_eq!(tree.hash().unwrap().to_base58(), expected, "vector {}", v["name"]);
            let commit = store.commit(&tree, CommitMeta { parents: &[], date: 0, author: "Tezos", message: "" }).unwrap();
            commits.push((commit, expected.to_string(), leaves));
        }
    }
    let store = Store::open_storage(Arc::new(storage), Options { cache_bytes: 1 << 20, ..Options::default() }).unwrap();
    for (commit, expected, leaves) in commits {
        let tree = store.checkout(&commit).unwrap().unwrap();
        assert_eq!(tree.hash().unwrap().to_base58(), expected);
        for (path, value) in leaves.iter().take(200) {
            assert_eq!(tree.find(path).unwrap().as_deref(), Some(value.as_slice()));
        }
    }
}

#[test]
fn crossing_thresholds_both_ways_in_any_order() {
    let store =
        Store::open_storage(Arc::new(MemStorage::new()), Options { cache_bytes: 256 << 10, ..Options::default() }).unwrap();
    for seed in 0..3u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut names: Vec<u32> = (0..700).collect();
        names.shuffle(&mut rng);
        let mut tree = store.empty_tree();
        let mut model = Model::new();
        let checkpoints = [1, 31, 32, 33, 255, 256, 257, 300, 699, 700];
        for (count, name) in names.iter().enumerate() {
            let path = vec![b"dir".to_vec(), format!("{name:x}").into_bytes()];
            let value = vec![rng.r#gen::<u8>(); rng.gen_range(0..40)];
            tree = tree.add(&path, &value).unwrap();
            model_add(&mut model, &path, &value);
            if checkpoints.contains(&(count + 1)) {
                check_tree(&tree, &model).unwrap();
                // Through the disk as well: commit, check out, compare.
                let hash = store.commit(&tree, CommitMeta { parents: &[], date: 0, author: "Tezos", message: "" }).unwrap();
                tree = store.checkout(&hash).unwrap().unwrap();
                check_tree(&tree, &model).unwrap();
            }
        }
        names.shuffle(&mut rng);
        for (removed, name) in names.iter().enumerate() {
            let path = vec![b"dir".to_vec(), format!("{name:x}").into_bytes()];
            tree = tree.remove(&path).unwrap();
            model_remove(&mut model, &path);
            let left = 700 - removed - 1;
            if [400, 257, 256, 255, 33, 32, 31, 1, 0].contains(&left) {
                check_tree(&tree, &model).unwrap();
                assert_eq!(tree.length(&[b"dir"]).unwrap(), left as u64);
                let hash = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "" }).unwrap();
                tree = store.checkout(&hash).unwrap().unwrap();
                check_tree(&tree, &model).unwrap();
            }
        }
        assert!(!tree.mem_tree(&[b"dir"]).unwrap(), "an emptied directory disappears");
        assert_eq!(tree.hash().unwrap(), Tree::empty().hash().unwrap());
    }
}

#[test]
fn list_pages_cover_the_directory_in_a_stable_order() {
    let store = Store::open_storage(Arc::new(MemStorage::new()), Options::default()).unwrap();
    let mut tree = store.empty_tree();
    for i in 0..1000u32 {
        tree = tree.add(&["big".as_bytes(), format!("k{i}").as_bytes()], &i.to_le_bytes()).unwrap();
    }
    let hash = store.commit(&tree, CommitMeta { parents: &[], date: 0, author: "Tezos", message: "" }).unwrap();
    let tree = store.checkout(&hash).unwrap().unwrap();
    let all: Vec<Vec<u8>> = tree.list(&["big"], 0, None).unwrap().into_iter().map(|(k, _)| k).collect();
    assert_eq!(all.len(), 1000);
    let mut paged = Vec::new();
    let mut offset = 0;
    while offset < 1000 {
        let page = tree.list(&["big"], offset, Some(37)).unwrap();
        assert!(!page.is_empty());
        offset += page.len() as u64;
        paged.extend(page.into_iter().map(|(k, _)| k));
    }
    assert_eq!(paged, all, "pages concatenate to the full listing");
    let mut sorted = all.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 1000);
}

#[test]
fn one_change_in_a_large_directory_writes_a_patch_not_the_directory() {
    let storage = MemStorage::new();
    let mut model = Model::new();
    let mut commits = Vec::new();
    {
        let store = Store::open_storage(Arc::new(storage.clone()), Options::default()).unwrap();
        let mut tree = store.empty_tree();
        for i in 0..5000u32 {
            let path = vec![b"big".to_vec(), format!("key-{i}").into_bytes()];
            tree.add_mut(&path, &i.to_le_bytes()).unwrap();
            model_add(&mut model, &path, &i.to_le_bytes());
        }
        let mut head = store.commit(&tree, CommitMeta { parents: &[], date: 0, author: "Tezos", message: "" }).unwrap();
        let mut full_rewrites = 0;
        // Many single changes in a row: chains of patches, then full records again.
        for round in 0..12u32 {
            let before = store.info().pack_bytes;
            let mut tree = store.checkout(&head).unwrap().unwrap();
            let path = vec![b"big".to_vec(), format!("key-{}", round * 7).into_bytes()];
            tree.add_mut(&path, b"changed").unwrap();
            model_add(&mut model, &path, b"changed");
            head = store.commit(&tree, CommitMeta { parents: &[head], date: 1, author: "Tezos", message: "" }).unwrap();
            commits.push((head, model.clone()));
            let written = store.info().pack_bytes - before;
            // Full tree inodes at depths 0 and 1 alone would be over 2 KB.
            // A patch of the depth-0 tree inode is tens of bytes; the full
            // record (32 children with their hashes) over 1 KB. Every fifth
            // change ends a chain of 4 patches: it patches the chain's full
            // record, naming the (at most 12) children changed since, in
            // a few hundred bytes, and a new chain starts.
            if written > 1000 {
                full_rewrites += 1;
            }
            assert!(written < 2000, "round {round}: one change wrote {written} bytes");
        }
        assert_eq!(full_rewrites, 0, "chains start again over their full record, none written again");
    }
    // Read back through the disk, patches and all.
    let store = Store::open_storage(Arc::new(storage), Options { cache_bytes: 4 << 10, ..Options::default() }).unwrap();
    for (hash, model) in &commits {
        let tree = store.checkout(hash).unwrap().unwrap();
        check_tree(&tree, model).unwrap();
        assert_eq!(tree.length(&[b"big"]).unwrap(), 5000);
    }
}
