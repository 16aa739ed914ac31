//! The functions of Octez's TezEdge binding (`rust_tezedge_gen.mli`):
//! indexes, contexts, trees and the fold's walker.
//!
//! Each C symbol is the OCaml name with a `pando_` prefix (`remove` and
//! `index` are also libc functions). Contexts and trees are persistent:
//! an update returns a new value and leaves its argument as it was.

use std::sync::{Arc, Mutex};

use ocaml::{Int, Pointer, Raw, Runtime, Value};
use pando_store::{CommitMeta, Create, Depth, Hash, Kind, Options, Order, Store, Tree, Update, Versions};

use crate::{
    Context, Holder, Index, Out, Shared, TreeValue, Walker, bytes_of, bytes_value, count, guard, hash_of, raise, raise_now,
    steps, text, tree_value, unlocked,
};

/// Opens (or creates) the store in `dir` for writing; one of `layout`
/// if given (created so, or refused if of the other), else of any.
pub(crate) fn open_writer(
    dir: &str,
    sync: pando_store::SyncPolicy,
    layout: Option<pando_core::inode::Layout>,
) -> Result<Arc<Shared>, String> {
    let dir = dir.to_string();
    unlocked(move || {
        let options = Options { create: Create::IfMissing, sync, layout, ..Options::default() };
        Ok(Shared::new(Store::open(&dir, options).map_err(text)?, false))
    })
}

#[ocaml::func]
#[ocaml::sig("string -> index")]
pub fn pando_index_init(dir: String) -> Out<Pointer<Index>> {
    raise(open_writer(&dir, Options::default().sync, None)).map(|shared| Pointer::alloc_custom(Index(shared)))
}

#[ocaml::func]
#[ocaml::sig("context -> index")]
pub fn pando_index(ctx: &Context) -> Pointer<Index> {
    Pointer::alloc_custom(Index(ctx.shared.clone()))
}

#[ocaml::func]
#[ocaml::sig("index -> context")]
pub fn pando_context_init(index: &Index) -> Out<Pointer<Context>> {
    let shared = &index.0;
    raise(guard(|| {
        let store = shared.store()?;
        let versions = Versions::with_base(store.empty_tree(), store.empty_tree());
        Ok(Pointer::alloc_custom(Context { shared: shared.clone(), versions, parent: None }))
    }))
}

/// The commit `ctx` would make, and its parents.
fn parents(ctx: &Context) -> Vec<Hash> {
    ctx.parent.into_iter().collect()
}

#[ocaml::func]
#[ocaml::sig("context -> int64 -> string -> string -> bytes")]
pub fn pando_commit(ctx: &Context, time: i64, author: String, message: String) -> Out<Value> {
    // `ctx` points into the OCaml heap, where a collection may move it
    // while the runtime lock is released: what is needed after is taken now.
    let (shared, versions, parents) = (ctx.shared.clone(), ctx.versions.clone(), parents(ctx));
    let tree = raise(versions.tree().map_err(text))?;
    let hash = raise(unlocked({
        let shared = shared.clone();
        move || {
            shared.check_open()?;
            let store = shared.store()?;
            store.commit(&tree, CommitMeta { parents: &parents, date: time, author: &author, message: &message }).map_err(text)
        }
    }))?;
    // The context holds its tree as read back from the store: the inodes
    // the commit wrote are then held by the store's kept tree alone, and
    // the next block's checkout updates them in place (not copies), even
    // while OCaml has not yet freed this context.
    if let Ok(Some(stored)) = shared.store().and_then(|store| store.stored_tree(&hash).map_err(text)) {
        versions.replace_newest(stored);
    }
    Ok(bytes_value(gc, hash.as_bytes()))
}

#[ocaml::func]
#[ocaml::sig("context -> int64 -> string -> string -> bytes")]
pub fn pando_hash(ctx: &Context, time: i64, author: String, message: String) -> Out<Value> {
    let hash = guard(|| {
        let root = ctx.read(|tree| tree.hash().map_err(text))?;
        let info = pando_core::CommitInfo { root, parents: parents(ctx), date: time, author, message };
        Ok(info.hash())
    });
    raise(hash).map(|hash| bytes_value(gc, hash.as_bytes()))
}

#[ocaml::func]
#[ocaml::sig("index -> bytes -> bool")]
pub fn pando_exists(index: &Index, hash: &[u8]) -> Out<bool> {
    raise(guard(|| Ok(index.0.store()?.exists(&hash_of(hash)?))))
}

#[ocaml::func]
#[ocaml::sig("index -> bytes -> context option")]
pub fn pando_checkout(index: &Index, hash: &[u8]) -> Out<Option<Pointer<Context>>> {
    let (shared, hash) = (index.0.clone(), raise(hash_of(hash))?);
    let versions = unlocked({
        let shared = shared.clone();
        move || {
            let store = shared.store()?;
            match store.checkout(&hash) {
                // A collected commit is one the store no longer holds.
                Err(pando_store::Error::CollectedCommit(_)) => Ok(None),
                // The commit read back as the line's base: OCaml may hold the
                // checked-out context long after the block moved on.
                Ok(Some(tree)) => match store.stored_tree(&hash).map_err(text)? {
                    Some(base) => Ok(Some(Versions::with_base(tree, base))),
                    None => Ok(Some(Versions::new(tree))),
                },
                other => other.map(|tree| tree.map(Versions::new)).map_err(text),
            }
        }
    });
    raise(versions)
        .map(|versions| versions.map(|versions| Pointer::alloc_custom(Context { shared, versions, parent: Some(hash) })))
}

/// Runs a read of `tree` at the path `path`.
///
/// # Safety
/// `path` must be an OCaml `string list`; `read` must not allocate on the
/// OCaml heap.
pub(crate) unsafe fn read_at<T>(
    versions: Result<&Versions, String>,
    path: &Value,
    read: impl FnOnce(&Tree, &[&[u8]]) -> Result<T, String>,
) -> Result<T, String> {
    guard(|| {
        let versions = versions?;
        // SAFETY: the caller's; the steps are dropped before `read_at` returns.
        let steps = unsafe { steps(path) };
        versions.read(|tree| read(tree, &steps)).map_err(text)?
    })
}

// The reads of a block's inner loop (find, mem, mem_tree, length, on a
// context and on a tree) are plain C functions: `#[ocaml::func]` roots
// each argument and looks up an environment variable on every call, which
// doubled the cost of a cached `find` (`ocaml/bench`). They allocate only
// their result, after the last use of their arguments.

/// A read of the tree `holder` holds at `path`, its answer made an OCaml
/// value by `convert` (or `Pando.Error` raised).
///
/// # Safety
/// Called by OCaml, with `holder` a live `H` block and `path` a
/// `string list`; `read` allocates nothing on the OCaml heap.
unsafe fn read_raw<H: Holder, T>(
    holder: Raw,
    path: Raw,
    read: impl FnOnce(&Tree, &[&[u8]]) -> pando_store::Result<T>,
    convert: unsafe fn(T) -> Raw,
) -> Raw {
    // SAFETY: both are used before anything is allocated.
    let answer = unsafe {
        let holder = &*holder.as_pointer::<H>().as_ptr();
        read_at(holder.versions(), &Value::Raw(path.0), |tree, path| read(tree, path).map_err(text))
    };
    match answer {
        // SAFETY: called by OCaml, with the runtime lock held.
        Ok(answer) => unsafe { convert(answer) },
        Err(message) => raise_now(message),
    }
}

macro_rules! reads {
    ($($context_fn:ident, $tree_fn:ident: $read:expr => $convert:path;)*) => {$(
        /// # Safety
        /// Called by OCaml with a `context` and a `string list`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $context_fn(ctx: Raw, path: Raw) -> Raw {
            // SAFETY: the caller's.
            unsafe { read_raw::<Context, _>(ctx, path, $read, $convert) }
        }

        /// # Safety
        /// Called by OCaml with a `tree` and a `string list`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $tree_fn(tree: Raw, path: Raw) -> Raw {
            // SAFETY: the caller's.
            unsafe { read_raw::<TreeValue, _>(tree, path, $read, $convert) }
        }
    )*};
}

reads! {
    pando_find, pando_tree_find: |tree, path| tree.find(path) => bytes_option_raw;
    pando_mem, pando_tree_mem: |tree, path| tree.mem(path) => bool_raw;
    pando_mem_tree, pando_tree_mem_tree: |tree, path| tree.mem_tree(path) => bool_raw;
    pando_length, pando_tree_length: |tree, path| tree.length(path) => int_raw;
}

unsafe extern "C" {
    /// `Some v`, with `v` rooted during the allocation (OCaml >= 4.12).
    fn caml_alloc_some(value: ocaml::sys::Value) -> ocaml::sys::Value;
}

/// `Some bytes` or `None`, unrooted: the caller returns it at once.
///
/// # Safety
/// The runtime lock must be held.
unsafe fn bytes_option_raw(bytes: Option<Vec<u8>>) -> Raw {
    match bytes {
        None => Raw(ocaml::sys::NONE),
        // SAFETY: the string is passed straight to `caml_alloc_some`,
        // which roots it while it allocates.
        Some(bytes) => unsafe {
            let string = ocaml::sys::caml_alloc_initialized_string(bytes.len(), bytes.as_ptr().cast());
            Raw(caml_alloc_some(string))
        },
    }
}

/// An OCaml `bool`.
unsafe fn bool_raw(b: bool) -> Raw {
    Raw(if b { ocaml::sys::TRUE } else { ocaml::sys::FALSE })
}

/// An OCaml `int` (a count past `max_int` is `max_int`).
unsafe fn int_raw(n: u64) -> Raw {
    Raw(((n.min(Int::MAX as u64 >> 1) as ocaml::sys::Value) << 1) | 1)
}

/// `find_tree` of what `holder` holds.
fn find_tree_in<H: Holder>(holder: &H, path: &Value) -> Out<Option<Pointer<TreeValue>>> {
    // SAFETY: `path` is a `string list`; the read allocates nothing.
    let found = raise(unsafe { read_at(holder.versions(), path, |tree, path| tree.find_tree(path).map_err(text)) })?;
    Ok(found.map(|found| tree_value(&holder.shared(), found)))
}

#[ocaml::func]
#[ocaml::sig("context -> string list -> tree option")]
pub fn pando_find_tree(ctx: &Context, path: Value) -> Out<Option<Pointer<TreeValue>>> {
    find_tree_in(ctx, &path)
}

#[ocaml::func]
#[ocaml::sig("tree -> string list -> tree option")]
pub fn pando_tree_find_tree(tree: &TreeValue, path: Value) -> Out<Option<Pointer<TreeValue>>> {
    find_tree_in(tree, &path)
}

/// `list` of what `holder` holds: names and trees as an OCaml array of
/// pairs.
fn list_in<H: Holder>(rt: &Runtime, holder: &H, offset: Option<Int>, length: Option<Int>, path: &Value) -> Out<Value> {
    let (offset, length) = (count(offset).unwrap_or(0), count(length));
    // SAFETY: `path` is a `string list`; the read allocates nothing.
    let listed = raise(unsafe { read_at(holder.versions(), path, |tree, path| tree.list(path, offset, length).map_err(text)) })?;
    let shared = holder.shared();
    let pairs: Vec<(Value, Pointer<TreeValue>)> =
        listed.into_iter().map(|(name, tree)| (bytes_value(rt, &name), tree_value(&shared, tree))).collect();
    Ok(ocaml::ToValue::to_value(&pairs, rt))
}

#[ocaml::func]
#[ocaml::sig("context -> int option -> int option -> string list -> (string * tree) array")]
pub fn pando_list(ctx: &Context, offset: Option<Int>, length: Option<Int>, path: Value) -> Out<Value> {
    list_in(gc, ctx, offset, length, &path)
}

#[ocaml::func]
#[ocaml::sig("tree -> int option -> int option -> string list -> (string * tree) array")]
pub fn pando_tree_list(tree: &TreeValue, offset: Option<Int>, length: Option<Int>, path: Value) -> Out<Value> {
    list_in(gc, tree, offset, length, &path)
}

// The updates (add, remove and add_tree, on a context and on a tree) are
// plain C functions, as the reads above are, and return their new block
// unrooted: `#[ocaml::func]`'s roots and environment lookup cost 3% of a
// replay through the binding.

/// An update of the tree `holder` holds at `path`: a new `H` block (or
/// `Pando.Error` raised).
///
/// # Safety
/// Called by OCaml, with `holder` a live `H` block and `path` a `string
/// list`; `update` allocates nothing on the OCaml heap.
unsafe fn update_raw<H: Holder>(
    holder: Raw,
    path: Raw,
    update: impl FnOnce(&Versions, &[&[u8]]) -> Result<Versions, String>,
) -> Raw {
    // SAFETY: the arguments are read before the new block is allocated.
    let next = unsafe {
        let holder = &*holder.as_pointer::<H>().as_ptr();
        guard(|| {
            let versions = holder.versions()?;
            let path = Value::Raw(path.0);
            update(versions, &steps(&path))
        })
        .map(|next| holder.with_versions(next))
    };
    match next {
        // SAFETY: called by OCaml, with the runtime lock held.
        Ok(next) => unsafe { custom_raw(next) },
        Err(message) => raise_now(message),
    }
}

/// A new custom block holding `value`, unrooted: the caller returns it at
/// once.
///
/// # Safety
/// The runtime lock must be held.
unsafe fn custom_raw<T: ocaml::Custom>(value: T) -> Raw {
    // SAFETY: the block is allocated for a `T` and written before it is
    // returned; the runtime lock is held.
    unsafe {
        let ops = T::ops() as *const ocaml::custom::CustomOps as *const ocaml::sys::custom_operations;
        let block = Raw(ocaml::sys::caml_alloc_custom(ops, std::mem::size_of::<T>(), T::USED, T::MAX));
        block.as_pointer::<T>().set(value);
        block
    }
}

/// # Safety
/// Called by OCaml with a `context`, a `string list` and `bytes`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pando_add(ctx: Raw, path: Raw, value: Raw) -> Raw {
    // SAFETY: the caller's; the value is copied in before the allocation.
    unsafe {
        update_raw::<Context>(ctx, path, |versions, path| versions.update(path, Update::Add(bytes_of(value))).map_err(text))
    }
}

/// # Safety
/// Called by OCaml with a `tree`, a `string list` and `bytes`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pando_tree_add(tree: Raw, path: Raw, value: Raw) -> Raw {
    // SAFETY: as `pando_add`.
    unsafe {
        update_raw::<TreeValue>(tree, path, |versions, path| versions.update(path, Update::Add(bytes_of(value))).map_err(text))
    }
}

/// # Safety
/// Called by OCaml with a `context` and a `string list`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pando_remove(ctx: Raw, path: Raw) -> Raw {
    // SAFETY: the caller's.
    unsafe { update_raw::<Context>(ctx, path, |versions, path| versions.update(path, Update::Remove).map_err(text)) }
}

/// # Safety
/// Called by OCaml with a `tree` and a `string list`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pando_tree_remove(tree: Raw, path: Raw) -> Raw {
    // SAFETY: the caller's.
    unsafe { update_raw::<TreeValue>(tree, path, |versions, path| versions.update(path, Update::Remove).map_err(text)) }
}

/// `add_tree` of `added` into `tree`. A tree of another index or of a
/// proof, which the store refuses to graft (its pointers name another
/// source), is added as a copy in memory, read whole (a part a proof
/// blinds is an error).
fn graft(versions: &Versions, path: &[&[u8]], added: &Tree) -> pando_store::Result<Versions> {
    match versions.update(path, Update::AddTree(added)) {
        Err(pando_store::Error::ForeignTree) => versions.update(path, Update::AddTree(&detached(added)?)),
        other => other,
    }
}

/// A copy of `tree` held in memory alone: every value read and added to
/// an empty tree (the same contents, so the same hash).
fn detached(tree: &Tree) -> pando_store::Result<Tree> {
    if let Some(value) = tree.to_value()? {
        return Ok(Tree::of_value(&value));
    }
    let mut copy = Tree::empty();
    let no_path: [&[u8]; 0] = [];
    tree.fold(&no_path, None, Order::Undefined, &mut |key: &[Vec<u8>], subtree: &Tree| {
        if let Some(value) = subtree.to_value()? {
            copy.add_mut(key, &value)?;
        }
        Ok(())
    })?;
    Ok(copy)
}

/// `add_tree` through [`update_raw`]: `added` is a `tree` block, read
/// (under its own line's lock) before the update takes `holder`'s.
///
/// # Safety
/// As [`update_raw`], with `added` a live `tree` block.
unsafe fn add_tree_raw<H: Holder>(holder: Raw, path: Raw, added: Raw) -> Raw {
    // SAFETY: the caller's; `added` is read before anything is allocated.
    unsafe {
        update_raw::<H>(holder, path, |versions, path| {
            let added = (*added.as_pointer::<TreeValue>().as_ptr()).tree()?;
            graft(versions, path, &added).map_err(text)
        })
    }
}

/// # Safety
/// Called by OCaml with a `context`, a `string list` and a `tree`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pando_add_tree(ctx: Raw, path: Raw, tree: Raw) -> Raw {
    // SAFETY: the caller's.
    unsafe { add_tree_raw::<Context>(ctx, path, tree) }
}

/// # Safety
/// Called by OCaml with a `tree`, a `string list` and a `tree`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pando_tree_add_tree(tree: Raw, path: Raw, added: Raw) -> Raw {
    // SAFETY: the caller's.
    unsafe { add_tree_raw::<TreeValue>(tree, path, added) }
}

#[ocaml::func]
#[ocaml::sig("context -> tree")]
pub fn pando_get_tree(ctx: &Context) -> Out<Pointer<TreeValue>> {
    let tree = raise(ctx.tree())?;
    Ok(tree_value(&Some(ctx.shared.clone()), tree))
}

/// `o_caml_depth`, a variant of 5 constructors with an `int` each.
fn depth_of(value: &Value) -> Option<Depth> {
    // SAFETY: `value` is an `o_caml_depth option`: `None` or a block whose
    // field is a block of tag 0-4 holding an int.
    unsafe {
        if !value.is_block() {
            return None;
        }
        let depth = value.field(0);
        let n = depth.field(0).int_val().clamp(0, u32::MAX as isize) as u32;
        Some(match depth.tag().0 {
            0 => Depth::Eq(n),
            1 => Depth::Le(n),
            2 => Depth::Lt(n),
            3 => Depth::Ge(n),
            _ => Depth::Gt(n),
        })
    }
}

#[ocaml::func]
#[ocaml::sig("tree -> o_caml_depth option -> string list -> o_caml_order -> o_caml_tree_walker")]
pub fn pando_make_tree_walker(tree: &TreeValue, depth: Value, path: Value, order: Int) -> Out<Pointer<Walker>> {
    let depth = depth_of(&depth);
    let order = if order == 0 { Order::Sorted } else { Order::Undefined };
    // SAFETY: `path` is a `string list`; the fold allocates nothing in OCaml.
    let visited = raise(unsafe {
        read_at(tree.versions(), &path, |tree, path| {
            let mut visited = Vec::new();
            tree.fold(path, depth, order, &mut |key: &[Vec<u8>], subtree: &Tree| {
                visited.push((key.to_vec(), subtree.clone()));
                Ok(())
            })
            .map_err(text)?;
            Ok(visited)
        })
    })?;
    Ok(Pointer::alloc_custom(Walker { shared: tree.shared.clone(), rest: Mutex::new(visited.into_iter()) }))
}

#[ocaml::func]
#[ocaml::sig("o_caml_tree_walker -> (string array * tree) option")]
pub fn pando_tree_walker_next(walker: &Walker) -> Out<Value> {
    let next = raise(guard(|| {
        if let Some(shared) = &walker.shared {
            shared.check_open()?;
        }
        Ok(walker.rest.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).next())
    }))?;
    let rt: &Runtime = gc;
    Ok(match next {
        None => Value::none(),
        Some((key, tree)) => {
            let steps: Vec<Value> = key.iter().map(|step| bytes_value(rt, step)).collect();
            let pair = (steps, tree_value(&walker.shared, tree));
            // SAFETY: the runtime lock is held.
            unsafe { Value::some(rt, pair) }
        }
    })
}

#[ocaml::func]
#[ocaml::sig("tree -> kind")]
pub fn pando_tree_kind(tree: &TreeValue) -> Out<Int> {
    let kind = raise(tree.read(|tree| Ok(tree.kind())))?;
    Ok(if kind == Kind::Contents { 0 } else { 1 })
}

#[ocaml::func]
#[ocaml::sig("tree -> bool")]
pub fn pando_tree_is_empty(tree: &TreeValue) -> Out<bool> {
    raise(guard(|| tree.read(|tree| tree.is_empty().map_err(text))))
}

#[ocaml::func]
#[ocaml::sig("context -> tree")]
pub fn pando_tree_empty(ctx: &Context) -> Pointer<TreeValue> {
    tree_value(&Some(ctx.shared.clone()), Tree::empty())
}

/// # Safety
/// Called by OCaml with a `tree`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pando_tree_to_value(tree: Raw) -> Raw {
    // SAFETY: the caller's; the empty list is the path of the tree itself.
    unsafe { read_raw::<TreeValue, _>(tree, Raw(ocaml::sys::EMPTY_LIST), |tree, _| tree.to_value(), bytes_option_raw) }
}

#[ocaml::func]
#[ocaml::sig("context -> bytes -> tree")]
pub fn pando_tree_of_value(ctx: &Context, value: &[u8]) -> Pointer<TreeValue> {
    let tree = Tree::of_value(value);
    tree_value(&Some(ctx.shared.clone()), tree)
}

#[ocaml::func]
#[ocaml::sig("tree -> bytes")]
pub fn pando_tree_hash(tree: &TreeValue) -> Out<Value> {
    let hash = raise(guard(|| tree.read(|tree| tree.hash().map_err(text))))?;
    Ok(bytes_value(gc, hash.as_bytes()))
}

#[ocaml::func]
#[ocaml::sig("tree -> tree -> bool")]
pub fn pando_tree_equal(a: &TreeValue, b: &TreeValue) -> Out<bool> {
    raise(guard(|| Ok(a.read(|a| a.hash().map_err(text))? == b.read(|b| b.hash().map_err(text))?)))
}
