//! What Octez's TezEdge binding leaves out: read-only indexes, close and
//! sync, collections, snapshots, commit metadata, proofs and base58check
//! hashes.
//!
//! Invariants: a snapshot file is written as the `pando` command writes
//! its files (`pando_store::io::NewFile`), so `export_snapshot` leaves it
//! whole or absent; `close` waits for the calls in flight (with the
//! runtime lock released) before it closes the store.

use std::io::{BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ocaml::{Int, Pointer, Value};
use pando_core::proof::Encoding;
use pando_store::io::NewFile;
use pando_store::{Create, Hash, Options, Store, SyncPolicy};

use crate::context::open_writer;
use crate::{Context, Holder, Index, Out, Shared, TreeValue, bytes_value, guard, hash_of, paths, raise, text, unlocked};

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
    raise(open_writer(&dir, sync_policy(sync), None)).map(|shared| Pointer::alloc_custom(Index(shared)))
}

/// The OCaml `sync_policy`'s constructor, by its number.
fn sync_policy(sync: Int) -> SyncPolicy {
    match sync {
        0 => SyncPolicy::EveryCommit,
        1 => SyncPolicy::Pipelined,
        _ => SyncPolicy::Never,
    }
}

#[ocaml::func]
#[ocaml::sig("layout -> sync_policy -> string -> index")]
pub fn pando_index_init_layout(layout: Int, sync: Int, dir: String) -> Out<Pointer<Index>> {
    let layout = if layout == 0 { pando_core::inode::Layout::TEZOS } else { pando_core::inode::Layout::TEZOS_BINARY };
    raise(open_writer(&dir, sync_policy(sync), Some(layout))).map(|shared| Pointer::alloc_custom(Index(shared)))
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
        if shared.read_only { store.refresh().map(drop).map_err(text) } else { store.flush().map_err(text) }
    }))
}

#[ocaml::func]
#[ocaml::sig("int option -> tree -> unit")]
pub fn pando_tree_clear(_depth: Option<Int>, tree: &TreeValue) -> Out<()> {
    // A pando tree holds no copy of what it read from the store: its stored
    // parts are read through the store's cache, whose size is bounded, and
    // its unstored parts are its updates. So there is nothing to drop; the
    // check keeps the closed-index rule of every tree function.
    raise(tree.versions().map(drop))
}

#[ocaml::func]
#[ocaml::sig("index -> bytes -> unit")]
pub fn pando_gc(index: &Index, commit: &[u8]) -> Out<()> {
    let (shared, commit) = (index.0.clone(), raise(hash_of(commit))?);
    // The store refuses an unknown or collected commit itself.
    raise(unlocked(move || shared.store()?.gc(&commit).map_err(text)))
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

/// Writes the snapshot of `commit` to `file`, whole or not at all.
fn export(store: &Store, commit: &Hash, file: &Path) -> Result<(), String> {
    if std::fs::symlink_metadata(file).is_ok() {
        return Err(format!("{}: the file exists; a snapshot is written to a new file", file.display()));
    }
    let new = NewFile::create(file).map_err(text)?;
    let mut out = BufWriter::new(new.file());
    store.export_snapshot(commit, &mut out).map_err(text)?;
    out.flush().map_err(|e| format!("{}: {e}", new.path().display()))?;
    drop(out);
    new.persist().map_err(text)
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

/// `proof_encoding`: `V1` is 0, `V2` is 1.
fn encoding_of(encoding: Int) -> Encoding {
    if encoding == 0 { Encoding::V1 } else { Encoding::V2 }
}

/// A proof of `kind` (tree or stream) of reading `paths` at `commit`.
fn produce(index: &Index, commit: &[u8], paths_value: &Value, encoding: Int, stream: bool) -> Result<Vec<u8>, String> {
    let (shared, commit, paths, encoding) = (index.0.clone(), hash_of(commit)?, paths(paths_value), encoding_of(encoding));
    unlocked(move || {
        let store = shared.store()?;
        let proof = if stream {
            store.produce_stream_proof(&commit, &paths, encoding)
        } else {
            store.produce_tree_proof_of_paths(&commit, &paths, encoding)
        };
        proof.map_err(text)
    })
}

#[ocaml::func]
#[ocaml::sig("index -> bytes -> string list list -> proof_encoding -> bytes")]
pub fn pando_produce_tree_proof(index: &Index, commit: &[u8], paths: Value, encoding: Int) -> Out<Value> {
    raise(produce(index, commit, &paths, encoding, false)).map(|bytes| bytes_value(gc, &bytes))
}

#[ocaml::func]
#[ocaml::sig("index -> bytes -> string list list -> proof_encoding -> bytes")]
pub fn pando_produce_stream_proof(index: &Index, commit: &[u8], paths: Value, encoding: Int) -> Out<Value> {
    raise(produce(index, commit, &paths, encoding, true)).map(|bytes| bytes_value(gc, &bytes))
}

#[ocaml::func]
#[ocaml::sig("proof_encoding -> bytes -> bytes -> tree")]
pub fn pando_verify_tree_proof(encoding: Int, proof: &[u8], root: &[u8]) -> Out<Pointer<TreeValue>> {
    let proven = guard(|| {
        let root = hash_of(root)?;
        pando_store::verify_tree_proof(encoding_of(encoding), proof, &root).map_err(text)
    });
    raise(proven).map(|proven| crate::tree_value(&None, proven.tree))
}

#[ocaml::func]
#[ocaml::sig("proof_encoding -> bytes -> bytes -> string list list -> tree")]
pub fn pando_verify_stream_proof(encoding: Int, proof: &[u8], root: &[u8], paths_value: Value) -> Out<Pointer<TreeValue>> {
    let paths = paths(&paths_value);
    let proven = guard(|| {
        let root = hash_of(root)?;
        pando_store::verify_stream_proof(encoding_of(encoding), proof, &root, &paths).map_err(text)
    });
    raise(proven).map(|proven| crate::tree_value(&None, proven.tree))
}

#[ocaml::func]
#[ocaml::sig("proof_encoding -> bytes -> bytes -> string list list -> tree * int")]
pub fn pando_verify_stream_proof_reads(encoding: Int, proof: &[u8], root: &[u8], paths_value: Value) -> Out<Value> {
    let paths = paths(&paths_value);
    let proven = guard(|| {
        let root = hash_of(root)?;
        pando_store::verify_stream_proof_reads(encoding_of(encoding), proof, &root, &paths).map_err(text)
    });
    let (proven, unread) = raise(proven)?;
    let pair = (crate::tree_value(&None, proven.tree), unread.min(Int::MAX as usize >> 1) as Int);
    Ok(ocaml::ToValue::to_value(&pair, gc))
}

/// A kinded hash as OCaml's `kind * bytes` (`Value` is 0, `Tree` 1).
fn kinded(rt: &ocaml::Runtime, hash: &pando_core::proof::KindedHash) -> (Int, Value) {
    let node = matches!(hash, pando_core::proof::KindedHash::Node(_));
    (Int::from(node), bytes_value(rt, hash.hash().as_bytes()))
}

#[ocaml::func]
#[ocaml::sig("proof_encoding -> bool -> bytes -> (kind * bytes) * (kind * bytes)")]
pub fn pando_proof_hashes(encoding: Int, stream: bool, proof: &[u8]) -> Out<Value> {
    let hashes = guard(|| {
        let encoding = encoding_of(encoding);
        if stream {
            let proof = encoding.decode_stream_proof(proof).map_err(text)?;
            Ok((proof.before, proof.after))
        } else {
            let proof = encoding.decode_tree_proof(proof).map_err(text)?;
            Ok((proof.before, proof.after))
        }
    });
    let (before, after) = raise(hashes)?;
    let pair = (kinded(gc, &before), kinded(gc, &after));
    Ok(ocaml::ToValue::to_value(&pair, gc))
}

#[ocaml::func]
#[ocaml::sig("unit -> tree")]
pub fn pando_empty_tree() -> Pointer<TreeValue> {
    crate::tree_value(&None, pando_store::Tree::empty())
}

/// `pando_store::disable_transparent_huge_pages`, what the `pando`
/// command does for itself.
#[ocaml::func]
#[ocaml::sig("unit -> bool")]
pub fn pando_disable_transparent_huge_pages() -> bool {
    pando_store::disable_transparent_huge_pages()
}

#[ocaml::func]
#[ocaml::sig("index -> string -> bytes -> unit")]
pub fn pando_set_branch(index: &Index, name: String, commit: &[u8]) -> Out<()> {
    let (shared, commit) = (index.0.clone(), raise(hash_of(commit))?);
    raise(unlocked(move || shared.store()?.set_branch(&name, &commit).map_err(text)))
}

#[ocaml::func]
#[ocaml::sig("int -> bytes -> bytes")]
pub fn pando_blake2b(size: Int, data: &[u8]) -> Out<Value> {
    if !(1..=64).contains(&size) {
        return raise(Err(format!("a BLAKE2b digest is 1 to 64 bytes, not {size}")));
    }
    let digest = blake2b_simd::Params::new().hash_length(size as usize).hash(data);
    Ok(bytes_value(gc, digest.as_bytes()))
}

#[ocaml::func]
#[ocaml::sig("string -> bytes -> string")]
pub fn pando_b58check_encode(prefix: &[u8], payload: &[u8]) -> String {
    let mut data = Vec::with_capacity(prefix.len() + payload.len());
    data.extend_from_slice(prefix);
    data.extend_from_slice(payload);
    bs58::encode(data).with_check().into_string()
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

/// `Pando.Internal.find_in_rust ctx path n`: seconds taken by `n` calls
/// of `find` on the context's tree made from Rust, for the benchmark that
/// measures what a call through the binding adds (`ocaml/bench`).
#[ocaml::func]
#[ocaml::sig("context -> string list -> int -> float")]
pub fn pando_find_in_rust(ctx: &Context, path: Value, n: Int) -> Out<f64> {
    // SAFETY: `path` is a `string list`; the loop allocates nothing in OCaml.
    raise(unsafe {
        crate::context::read_at(ctx.versions(), &path, |tree, path| {
            let started = std::time::Instant::now();
            for _ in 0..n.max(0) {
                std::hint::black_box(tree.find(std::hint::black_box(path)).map_err(text)?);
            }
            Ok(started.elapsed().as_secs_f64())
        })
    })
}
