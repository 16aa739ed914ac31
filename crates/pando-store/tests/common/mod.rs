//! Shared helpers of the store's integration tests: the `BTreeMap` model of
//! a tree and its reference hash.

#![allow(dead_code)]

pub mod held;
pub mod paths;

use pando_core::Hash;
use pando_core::reference::RefTree;
use pando_store::Tree;
use std::collections::BTreeMap;

pub type Path = Vec<Vec<u8>>;
/// A tree as a map from contents paths to values.
pub type Model = BTreeMap<Path, Vec<u8>>;

fn is_prefix(prefix: &[Vec<u8>], path: &[Vec<u8>]) -> bool {
    prefix.len() <= path.len() && path[..prefix.len()] == *prefix
}

/// Removes `path` and everything below it (the keys below it follow it
/// in the map's order: a range, not a pass over the whole model).
pub fn model_remove(model: &mut Model, path: &[Vec<u8>]) {
    let below: Vec<Path> =
        model.range(path.to_vec()..).map(|(key, _)| key).take_while(|key| is_prefix(path, key)).cloned().collect();
    for key in below {
        model.remove(&key);
    }
}

/// Sets `path` to `value`, replacing contents met on the way and whatever was below.
pub fn model_add(model: &mut Model, path: &[Vec<u8>], value: &[u8]) {
    model_clear_for(model, path);
    model.insert(path.to_vec(), value.to_vec());
}

/// Removes `path`, everything below it and contents on the way to it.
fn model_clear_for(model: &mut Model, path: &[Vec<u8>]) {
    model_remove(model, path);
    for end in 1..path.len() {
        model.remove(&path[..end]);
    }
}

/// The subtree at `path` as a model rooted there; `None` if nothing is there.
pub fn model_subtree(model: &Model, path: &[Vec<u8>]) -> Option<Model> {
    let sub: Model = model
        .iter()
        .filter(|(key, _)| is_prefix(path, key))
        .map(|(key, value)| (key[path.len()..].to_vec(), value.clone()))
        .collect();
    if sub.is_empty() { None } else { Some(sub) }
}

/// Puts `subtree` at `path`.
pub fn model_add_tree(model: &mut Model, path: &[Vec<u8>], subtree: &Model) {
    model_clear_for(model, path);
    for (key, value) in subtree {
        let mut full = path.to_vec();
        full.extend(key.iter().cloned());
        model.insert(full, value.clone());
    }
}

/// The reference (from scratch) hash of a model.
pub fn model_hash(model: &Model) -> Hash {
    type Leaf<'a> = (&'a [Vec<u8>], &'a Vec<u8>);
    fn build(entries: &[Leaf<'_>]) -> RefTree {
        if entries.len() == 1 && entries[0].0.is_empty() {
            return RefTree::Contents(entries[0].1.clone());
        }
        let mut groups: BTreeMap<&Vec<u8>, Vec<Leaf<'_>>> = BTreeMap::new();
        for (path, value) in entries {
            groups.entry(&path[0]).or_default().push((&path[1..], value));
        }
        RefTree::Dir(groups.into_iter().map(|(name, sub)| (name.clone(), build(&sub))).collect())
    }
    let entries: Vec<Leaf<'_>> = model.iter().map(|(k, v)| (k.as_slice(), v)).collect();
    if entries.is_empty() {
        return RefTree::Dir(Vec::new()).hash();
    }
    build(&entries).hash()
}

/// Checks a tree against a model: the hash, and every value.
pub fn check_tree(tree: &Tree, model: &Model) -> Result<(), String> {
    let hash = tree.hash().map_err(|e| e.to_string())?;
    let expected = model_hash(model);
    if hash != expected {
        return Err(format!("hash {hash} but the model hashes to {expected}"));
    }
    for (path, value) in model {
        let found = tree.find(path).map_err(|e| e.to_string())?;
        if found.as_deref() != Some(value.as_slice()) {
            return Err(format!("{path:?}: found {found:?}, model has {value:?}"));
        }
    }
    Ok(())
}

/// The leaves of a vector's entry list (`tests/vectors/`' JSON: each a
/// contents value in hex or a subtree), with their paths below `prefix`.
pub fn flatten(entries: &serde_json::Value, prefix: &Path, out: &mut Vec<(Path, Vec<u8>)>) {
    for e in entries.as_array().unwrap() {
        let mut path = prefix.clone();
        path.push(e["name"].as_str().unwrap().as_bytes().to_vec());
        match e["kind"].as_str().unwrap() {
            "contents" => out.push((path, hex::decode(e["value"].as_str().unwrap()).unwrap())),
            _ => flatten(&e["subtree"], &path, out),
        }
    }
}

/// Rewrites every valid slot of a store's control file as a valid slot of
/// format `version` (its checksum made again, its fields unchanged).
pub fn rewrite_control_version(control: &dyn pando_store::io::File, version: u32) {
    use pando_store::format::control::{SLOT_SIZE, decode_slot};
    // Magic, version and 13 fields, then the checksum.
    let used = 8 + 4 + 8 * 13;
    for at in (0..3u64).map(|i| i * SLOT_SIZE as u64) {
        let mut slot = vec![0u8; SLOT_SIZE];
        if control.read_exact_at(&mut slot, at).is_err() || decode_slot(&slot).is_err() {
            continue;
        }
        slot[8..12].copy_from_slice(&version.to_le_bytes());
        let crc = crc32c::crc32c(&slot[..used]);
        slot[used..used + 4].copy_from_slice(&crc.to_le_bytes());
        control.write_all_at(&slot, at).unwrap();
    }
}
