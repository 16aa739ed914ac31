//! What Octez's TezEdge binding leaves out: read-only indexes, close and
//! sync, collections, snapshots, commit metadata, proofs and base58check
//! hashes.
//!
//! Invariants: a snapshot file is written under a temporary name and
//! renamed once whole and synced, so `export_snapshot` leaves the file
//! whole or absent; `close` waits for the calls in flight (with the
//! runtime lock released) before it closes the store.

use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ocaml::{Int, Pointer, Value};
use pando_store::{Create, Hash, Options, Store, SyncPolicy};

use crate::context::open_writer;
use crate::{Index, Out, Shared, TreeValue, bytes_value, guard, hash_of, paths, raise, text, unlocked};

#[ocaml::func]
#[ocaml::sig("string -> index")]
pub fn pando_index_open_readonly(dir: String) -> Out<Pointer<Index>> {
    let shared = unlocked(move || {
        let options = Options { create: Create::Never, read_only: true, ..Options::default() };
        Ok(Shared::new(Store::open(&dir, options).map_err(text)?, true))
    });
    raise(shared).map(|shared| Pointer::alloc_custom(Index(shared)))
}

#[ocaml::func]
#[ocaml::sig("sync_policy -> string -> index")]
pub fn pando_index_init_with(sync: Int, dir: String) -> Out<Pointer<Index>> {
    let sync = match sync {
        0 => SyncPolicy::EveryCommit,
        1 => SyncPolicy::Pipelined,
        _ => SyncPolicy::Never,
    };
    raise(open_writer(&dir, sync)).map(|shared| Pointer::alloc_custom(Index(shared)))
}

#[ocaml::func]
#[ocaml::sig("index -> unit")]
pub fn pando_close(index: &Index) -> Out<()> {
    let shared = index.0.clone();
    raise(unlocked(move || {
        let taken = shared.store.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
        shared.closed.store(true, Ordering::Release);
        let Some(mut store) = taken else { return Ok(()) };
        // Calls in flight hold a clone of the store for their duration.
        let store = loop {
            match Arc::try_unwrap(store) {
                Ok(store) => break store,
                Err(shared) => {
                    store = shared;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        };
        store.wait_gc().map_err(text)?;
        store.close().map_err(text)
    }))
}

#[ocaml::func]
#[ocaml::sig("index -> unit")]
pub fn pando_sync(index: &Index) -> Out<()> {
    let shared = index.0.clone();
    raise(unlocked(move || {
        let store = shared.store()?;
        if shared.read_only { store.sync().map(drop).map_err(text) } else { store.flush().map_err(text) }
    }))
}

#[ocaml::func]
#[ocaml::sig("int option -> tree -> unit")]
pub fn pando_tree_clear(_depth: Option<Int>, tree: &TreeValue) -> Out<()> {
    // A pando tree holds no copy of what it read from the store: its stored
    // parts are read through the store's cache, whose size is bounded, and
    // its unstored parts are its updates. So there is nothing to drop; the
    // check keeps the closed-index rule of every tree function.
    raise(tree.tree().map(drop))
}

#[ocaml::func]
#[ocaml::sig("index -> bytes -> unit")]
pub fn pando_gc(index: &Index, commit: &[u8]) -> Out<()> {
    let (shared, commit) = (index.0.clone(), raise(hash_of(commit))?);
    raise(unlocked(move || {
        let store = shared.store()?;
        if !store.exists(&commit) {
            return Err(format!("cannot collect: unknown commit {}", commit.to_base58()));
        }
        store.gc(&commit).map_err(text)
    }))
}

#[ocaml::func]
#[ocaml::sig("index -> unit")]
pub fn pando_wait_gc_completion(index: &Index) -> Out<()> {
    let shared = index.0.clone();
    raise(unlocked(move || shared.store()?.wait_gc().map(drop).map_err(text)))
}

#[ocaml::func]
#[ocaml::sig("index -> bool")]
pub fn pando_is_gc_allowed(index: &Index) -> bool {
    !index.0.read_only && !index.0.closed.load(Ordering::Acquire)
}

/// A name beside `target` for the file being written.
fn temporary_beside(target: &Path) -> PathBuf {
    let mut name = target.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".partial-{}", std::process::id()));
    target.with_file_name(name)
}

/// Writes the snapshot of `commit` to `file`, whole or not at all.
fn export(store: &Store, commit: &Hash, file: &Path) -> Result<(), String> {
    if std::fs::symlink_metadata(file).is_ok() {
        return Err(format!("{}: the file exists; a snapshot is written to a new file", file.display()));
    }
    let temporary = temporary_beside(file);
    let written = (|| {
        let out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)
            .map_err(|e| format!("{}: {e}", temporary.display()))?;
        let mut out = BufWriter::new(out);
        store.export_snapshot(commit, &mut out).map_err(text)?;
        let out = out.into_inner().map_err(|e| format!("{}: {}", temporary.display(), e.error()))?;
        out.sync_all().map_err(|e| format!("{}: {e}", temporary.display()))?;
        std::fs::rename(&temporary, file).map_err(|e| format!("{}: {e}", file.display()))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

#[ocaml::func]
#[ocaml::sig("index -> bytes -> string -> unit")]
pub fn pando_export_snapshot(index: &Index, commit: &[u8], file: String) -> Out<()> {
    let (shared, commit) = (index.0.clone(), raise(hash_of(commit))?);
    raise(unlocked(move || export(&*shared.store()?, &commit, Path::new(&file))))
}

#[ocaml::func]
#[ocaml::sig("index -> string -> bytes")]
pub fn pando_import_snapshot(index: &Index, file: String) -> Out<Value> {
    let shared = index.0.clone();
    let commit = unlocked(move || {
        let input = std::fs::File::open(&file).map_err(|e| format!("{file}: {e}"))?;
        let summary = shared.store()?.import_snapshot(&mut BufReader::new(input)).map_err(text)?;
        Ok(summary.commit)
    });
    raise(commit).map(|commit| bytes_value(gc, commit.as_bytes()))
}

#[ocaml::func]
#[ocaml::sig("index -> bytes -> commit_info option")]
pub fn pando_commit_info(index: &Index, commit: &[u8]) -> Out<Value> {
    let info = raise(guard(|| index.0.store()?.commit_info(&hash_of(commit)?).map_err(text)))?;
    let Some(info) = info else { return Ok(Value::none()) };
    let mut parents = std::collections::LinkedList::new();
    for parent in &info.parents {
        parents.push_back(bytes_value(gc, parent.as_bytes()));
    }
    let record = (info.date, info.author, info.message, parents);
    // SAFETY: the runtime lock is held.
    Ok(unsafe { Value::some(gc, record) })
}

#[ocaml::func]
#[ocaml::sig("index -> bytes -> string list list -> proof_encoding -> bytes")]
pub fn pando_produce_tree_proof(index: &Index, commit: &[u8], paths_value: Value, encoding: Int) -> Out<Value> {
    let (shared, commit, paths) = (index.0.clone(), raise(hash_of(commit))?, paths(&paths_value));
    let proof = unlocked(move || {
        let store = shared.store()?;
        let (proof, _) =
            store.produce_tree_proof(&commit, |tree| pando_core::proof::keys::read_paths(tree, &paths)).map_err(text)?;
        match encoding {
            0 => pando_core::proof::encoding::encode(&proof).map_err(text),
            _ => Err("V2 Tree32 proofs are not yet produced".to_string()),
        }
    });
    raise(proof).map(|bytes| bytes_value(gc, &bytes))
}

#[ocaml::func]
#[ocaml::sig("bytes -> string")]
pub fn pando_hash_to_b58check(hash: &[u8]) -> Out<String> {
    raise(hash_of(hash).map(|hash| hash.to_base58()))
}

#[ocaml::func]
#[ocaml::sig("string -> bytes")]
pub fn pando_hash_of_b58check(text_form: String) -> Out<Value> {
    let hash = raise(Hash::from_base58(&text_form).map_err(text))?;
    Ok(bytes_value(gc, hash.as_bytes()))
}
