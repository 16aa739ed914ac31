//! The OCaml binding of pando: the C functions behind `ocaml/pando/pando.ml`.
//!
//! Octez's TezEdge context is a Rust store called from OCaml through the
//! `ocaml` crate; this crate offers the same functions, with the same
//! names and argument order (`rust_tezedge_gen.mli`), over pando's
//! [`Store`] and [`Tree`], plus what that binding leaves out (proofs,
//! collections, snapshots, read-only indexes). The OCaml side is
//! `ocaml/pando/pando.mli`, which documents each function.
//!
//! Invariants:
//! - Nothing unwinds into OCaml: every function runs its work under
//!   [`guard`], which turns a Rust panic into the OCaml exception
//!   `Pando.Error` (registered as `"pando.error"`), like every error.
//!   The exception is raised after the function's Rust values are dropped.
//! - OCaml values are touched only with the domain's runtime lock held.
//!   [`unlocked`] releases it around long work (commit, collections,
//!   snapshots); what runs there holds only Rust data, copied out first.
//! - Path steps are borrowed from the OCaml heap only while nothing is
//!   allocated on it (no collection can move them then).
//! - A lock is never waited for with the runtime lock held: the only lock
//!   shared between calls, [`Shared::store`], is held just to clone an
//!   `Arc`, and `close` waits for the calls in flight with it released.
//! - Indexes, contexts, trees and walkers are OCaml custom blocks whose
//!   finalizer drops the Rust value; each is `Send + Sync`, so any domain
//!   may use or finalize it.

mod context;
mod extra;

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ocaml::{Raw, Runtime, ToValue, Value};
use pando_store::{Hash, Store, Tree, Versions};
use smallvec::SmallVec;

/// An open store, shared by the index value and every context and tree
/// read from it.
pub struct Shared {
    /// `None` once closed.
    store: Mutex<Option<Arc<Store>>>,
    /// `store` is `None`, said without its lock: what the reads of contexts
    /// and trees check (they do not need the store itself).
    closed: AtomicBool,
    read_only: bool,
}

impl Shared {
    fn new(store: Store, read_only: bool) -> Arc<Shared> {
        Arc::new(Shared { store: Mutex::new(Some(Arc::new(store))), closed: AtomicBool::new(false), read_only })
    }

    /// The store, unless it was closed.
    fn store(&self) -> Result<Arc<Store>, String> {
        let store = self.store.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        store.clone().ok_or_else(closed)
    }

    fn check_open(&self) -> Result<(), String> {
        if self.closed.load(Ordering::Acquire) { Err(closed()) } else { Ok(()) }
    }
}

fn closed() -> String {
    "the index is closed".to_string()
}

/// `Pando.index`.
pub struct Index(Arc<Shared>);

/// `Pando.context`: a tree, the commit it was checked out from, its index.
/// The tree is a version of a line ([`Versions`]): an update of the newest
/// context of a line changes its tree in place, as a native replay does,
/// and the contexts OCaml still holds are rebuilt if they are used again.
pub struct Context {
    shared: Arc<Shared>,
    versions: Versions,
    parent: Option<Hash>,
}

/// `Pando.tree`, a version as a context is. `shared` is `None` for a tree
/// rebuilt from a proof.
pub struct TreeValue {
    shared: Option<Arc<Shared>>,
    versions: Versions,
}

/// What holds a tree, for the functions Octez's binding has twice (`find`
/// and `tree_find`, `add` and `tree_add`, ...): a context or a tree.
///
/// A version's reads and updates run under its line's lock, which a
/// finalizer of another version of the line takes too: nothing may
/// allocate on the OCaml heap (a collection could run that finalizer) or
/// release the runtime lock while it is held.
trait Holder: ocaml::Custom + Sized {
    /// The tree's version, unless its index was closed.
    fn versions(&self) -> Result<&Versions, String>;
    /// The index of the trees read from it (`None`: a proof's tree).
    fn shared(&self) -> Option<Arc<Shared>>;
    /// A new value like this one, holding `versions`.
    fn with_versions(&self, versions: Versions) -> Self;

    /// Runs `f` on the tree, under its line's lock.
    fn read<T>(&self, f: impl FnOnce(&Tree) -> Result<T, String>) -> Result<T, String> {
        self.versions()?.read(f).map_err(text)?
    }

    /// The tree, as a tree of its own.
    fn tree(&self) -> Result<Tree, String> {
        self.versions()?.tree().map_err(text)
    }
}

impl Holder for TreeValue {
    fn versions(&self) -> Result<&Versions, String> {
        if let Some(shared) = &self.shared {
            shared.check_open()?;
        }
        Ok(&self.versions)
    }

    fn shared(&self) -> Option<Arc<Shared>> {
        self.shared.clone()
    }

    fn with_versions(&self, versions: Versions) -> Self {
        TreeValue { shared: self.shared.clone(), versions }
    }
}

impl Holder for Context {
    fn versions(&self) -> Result<&Versions, String> {
        self.shared.check_open()?;
        Ok(&self.versions)
    }

    fn shared(&self) -> Option<Arc<Shared>> {
        Some(self.shared.clone())
    }

    fn with_versions(&self, versions: Versions) -> Self {
        Context { shared: self.shared.clone(), versions, parent: self.parent }
    }
}

/// `Pando.o_caml_tree_walker`: the subtrees a fold visits, in order.
pub struct Walker {
    shared: Option<Arc<Shared>>,
    rest: Mutex<std::vec::IntoIter<(Vec<Vec<u8>>, Tree)>>,
}

/// Makes a type an OCaml custom block named `$name`, dropped by its
/// finalizer. `USED`/`MAX` tell the GC that each block holds memory
/// outside its heap: a full major cycle per 100,000 blocks allocated, so
/// that dropped trees are finalized even when a program allocates few OCaml
/// values of its own.
macro_rules! custom_block {
    ($type:ident, $name:literal) => {
        impl ocaml::Custom for $type {
            ocaml::custom! { name: $name }
            const USED: usize = 1;
            const MAX: usize = 100_000;
        }
    };
}

custom_block!(Index, "pando.index");
custom_block!(Context, "pando.context");
custom_block!(TreeValue, "pando.tree");
custom_block!(Walker, "pando.walker");

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Index>();
    send_sync::<Context>();
    send_sync::<TreeValue>();
    send_sync::<Walker>();
};

/// Runs `work`, turning a panic into an error message.
fn guard<T>(work: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(work)) {
        Ok(result) => result,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(format!("internal error in pando (please report it): {what}"))
        }
    }
}

/// Runs `work` (under [`guard`]) with the domain's runtime lock released,
/// so that other threads and domains run OCaml meanwhile. `work` must not
/// touch an OCaml value.
fn unlocked<T: Send>(work: impl FnOnce() -> Result<T, String> + Send) -> Result<T, String> {
    struct Relock;
    impl Drop for Relock {
        fn drop(&mut self) {
            ocaml::runtime::leave_blocking_section();
        }
    }
    ocaml::runtime::enter_blocking_section();
    let _relock = Relock;
    guard(work)
}

/// The result of a binding function: an error becomes `Pando.Error`.
type Out<T> = Result<T, ocaml::Error>;

/// Converts an error message into the raising of `Pando.Error`.
fn raise<T>(result: Result<T, String>) -> Out<T> {
    result.map_err(|message| {
        // SAFETY: called with the runtime lock held (every binding function
        // holds it when it returns); the string is rooted by `Value`.
        let arg = unsafe { Value::string(&message) };
        match ocaml::Error::raise_with_arg("pando.error", arg) {
            Err(error) => error,
            Ok(()) => ocaml::Error::Message("Pando.Error is not registered"),
        }
    })
}

/// Raises `Pando.Error message` from a function that does not go
/// through `#[ocaml::func]`: `message` is dropped before the raise, which
/// unwinds no Rust frame.
fn raise_now(message: String) -> ! {
    // SAFETY: called with the runtime lock held; the exception's argument is
    // passed straight to `caml_raise_with_arg`, which roots it.
    unsafe {
        let exception = ocaml::sys::caml_named_value(c"pando.error".as_ptr());
        let arg = ocaml::sys::caml_alloc_initialized_string(message.len(), message.as_ptr().cast());
        drop(message);
        if exception.is_null() {
            ocaml::sys::caml_failwith(c"Pando.Error is not registered".as_ptr());
        }
        ocaml::sys::caml_raise_with_arg(*exception, arg);
    }
    unreachable!("caml_raise_with_arg returns only by raising")
}

/// Anything displayable as an error message.
fn text(error: impl std::fmt::Display) -> String {
    error.to_string()
}

/// The steps of an OCaml `string list`, borrowed from the OCaml heap.
///
/// # Safety
/// `list` must be a `string list`, and nothing may be allocated on the
/// OCaml heap (or the runtime lock released) while the steps are used.
unsafe fn steps(list: &Value) -> SmallVec<[&[u8]; 8]> {
    let mut out = SmallVec::new();
    let mut cell = list.raw().0;
    // SAFETY: a list is the immediate `[]` or a block (head, tail); each
    // head is a string, whose bytes stay put while nothing is allocated.
    unsafe {
        while ocaml::sys::is_block(cell) {
            out.push(bytes_of(Raw(*ocaml::sys::field(cell, 0))));
            cell = *ocaml::sys::field(cell, 1);
        }
    }
    out
}

/// The bytes of an OCaml `string` or `bytes` value, borrowed.
///
/// # Safety
/// `bytes` is a live `string` or `bytes` value, and nothing is allocated
/// on the OCaml heap (or the runtime lock released) while the slice is
/// used.
unsafe fn bytes_of<'a>(bytes: Raw) -> &'a [u8] {
    // SAFETY: the caller's.
    unsafe {
        let len = ocaml::sys::caml_string_length(bytes.0);
        std::slice::from_raw_parts(ocaml::sys::string_val(bytes.0), len)
    }
}

/// An OCaml `string list list`, copied.
fn paths(list: &Value) -> Vec<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut cell = list.raw().0;
    // SAFETY: as in `steps`; each head is a `string list`, copied at once.
    unsafe {
        while ocaml::sys::is_block(cell) {
            let head = Value::Raw(*ocaml::sys::field(cell, 0));
            out.push(steps(&head).iter().map(|s| s.to_vec()).collect());
            cell = *ocaml::sys::field(cell, 1);
        }
    }
    out
}

/// A 32-byte hash from OCaml bytes.
fn hash_of(bytes: &[u8]) -> Result<Hash, String> {
    Hash::from_slice(bytes).ok_or_else(|| format!("a hash is 32 bytes, not {}", bytes.len()))
}

/// OCaml bytes holding `bytes`.
fn bytes_value(rt: &Runtime, bytes: &[u8]) -> Value {
    bytes.to_value(rt)
}

/// A new `Pando.tree` of `tree`, read from `shared`'s index.
fn tree_value(shared: &Option<Arc<Shared>>, tree: Tree) -> ocaml::Pointer<TreeValue> {
    ocaml::Pointer::alloc_custom(TreeValue { shared: shared.clone(), versions: Versions::new(tree) })
}

/// An OCaml `int option` as an optional count; a negative one is 0.
fn count(value: Option<ocaml::Int>) -> Option<u64> {
    value.map(|n| n.max(0) as u64)
}
