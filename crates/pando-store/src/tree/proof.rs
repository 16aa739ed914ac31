//! Producing Merkle proofs from a store's tree: a [`Reveal`] that hands the
//! parts of a tree to `pando_core`'s partial tree as a computation reaches
//! them, loading them through the tree's [`Loader`].
//!
//! Invariants:
//! - Every part handed out carries the hash the store's pointer gives it
//!   (or, for parts in memory, the hash computed from them), so a proof
//!   produced here shows the tree the store holds, and nothing else
//!   (asserted in `produce`: the proof's state hashes to its `before`).
//! - A store error met while revealing is kept and returned as itself (a
//!   corrupt record stays `Corrupt { file, offset }`), not as text (tested
//!   by `unknown_commits_and_damaged_records_are_errors`).

use pando_core::proof::partial::{Cell, Entry, Inode as Shown, Reveal, Revealed};
use pando_core::proof::{PartialTree, ProofError, TreeProof, produce_tree_proof};
use std::cell::RefCell;
use std::sync::Arc;

use pando_core::dir::{self, Body, Pointers, Values};

use crate::error::{Error, Result};
use crate::node::{Child, Inode, Loader, Ptr, load, value_of};

/// What a handle names.
enum Part {
    Dir(Ptr),
    Inode(Ptr),
    Value(Child),
}

/// Reveals a store tree's parts; a handle is an index into `parts`.
struct StoreReveal<'a> {
    loader: &'a dyn Loader,
    parts: RefCell<Vec<Part>>,
    /// The first store error met, returned instead of its text.
    error: RefCell<Option<Error>>,
}

impl<'a> StoreReveal<'a> {
    fn handle(&self, part: Part) -> Option<u64> {
        let mut parts = self.parts.borrow_mut();
        parts.push(part);
        Some(parts.len() as u64 - 1)
    }

    /// Keeps a store error, handing its text to the partial tree.
    fn fail(&self, e: Error) -> String {
        let text = e.to_string();
        self.error.borrow_mut().get_or_insert(e);
        text
    }

    fn blind(&self, child: &Child) -> Result<Entry> {
        let hash = dir::child_hash(child, self.loader)?;
        Ok(match child {
            Child::Dir(ptr) => Entry::blinded_dir(hash, self.handle(Part::Dir(ptr.clone()))),
            Child::Contents(_) => Entry::blinded_contents(hash, self.handle(Part::Value(child.clone()))),
        })
    }

    /// The inode as a partial tree shows it: its children blinded.
    fn shown(&self, inode: &Inode) -> Result<Arc<Shown>> {
        Ok(match &inode.body {
            Body::Values(values) => {
                let entries = values.iter().map(|(step, child)| Ok((step, self.blind(child)?))).collect::<Result<Vec<_>>>()?;
                Shown::values(Values::from_sorted(entries))
            }
            Body::Tree(pointers) => {
                let mut cells = Vec::with_capacity(pointers.count());
                for (i, ptr) in pointers.iter() {
                    let hash = dir::inode_ptr_hash(ptr, pointers.depth + 1, self.loader)?;
                    cells.push((i, Cell::blinded(hash, self.handle(Part::Inode(ptr.clone())))));
                }
                Arc::new(Shown::new(Body::Tree(Pointers::new(pointers.depth, pointers.len, cells))))
            }
        })
    }

    fn part(&self, handle: u64) -> std::result::Result<std::cell::Ref<'_, Part>, String> {
        let parts = self.parts.borrow();
        if handle as usize >= parts.len() {
            return Err(format!("unknown handle {handle}"));
        }
        Ok(std::cell::Ref::map(parts, |p| &p[handle as usize]))
    }
}

impl Reveal for StoreReveal<'_> {
    fn dir(&self, handle: u64) -> std::result::Result<Revealed, String> {
        let ptr = match &*self.part(handle)? {
            Part::Dir(ptr) => ptr.clone(),
            _ => return Err(format!("handle {handle} is not a directory")),
        };
        let root = load(&ptr, 0, self.loader).map_err(|e| self.fail(e))?;
        let revealed = if pando_core::inode::hashed_flat(root.len()) {
            let entries = dir::collect_sorted(&root, self.loader).map_err(|e| self.fail(e))?;
            let mut out = Vec::with_capacity(entries.len());
            for (step, child) in &entries {
                out.push((step.to_vec(), self.blind(child).map_err(|e| self.fail(e))?));
            }
            Revealed::Entries(out)
        } else {
            Revealed::Root(self.shown(&root).map_err(|e| self.fail(e))?)
        };
        Ok(revealed)
    }

    fn inode(&self, handle: u64, depth: u32) -> std::result::Result<Arc<Shown>, String> {
        let ptr = match &*self.part(handle)? {
            Part::Inode(ptr) => ptr.clone(),
            _ => return Err(format!("handle {handle} is not an inode")),
        };
        let inode = load(&ptr, depth, self.loader).map_err(|e| self.fail(e))?;
        self.shown(&inode).map_err(|e| self.fail(e))
    }

    fn value(&self, handle: u64) -> std::result::Result<Vec<u8>, String> {
        let child = match &*self.part(handle)? {
            Part::Value(child) => child.clone(),
            _ => return Err(format!("handle {handle} is not a value")),
        };
        match value_of(&child, self.loader).map_err(|e| self.fail(e))? {
            Some(value) => Ok(value),
            None => Err(format!("handle {handle} is not a value")),
        }
    }
}

/// Runs `f` on the tree `root` and returns the proof of what it read.
pub(crate) fn produce<R>(
    root: &Child,
    loader: &dyn Loader,
    f: impl FnOnce(&mut PartialTree<'_>) -> std::result::Result<R, ProofError>,
) -> Result<(TreeProof, R)> {
    let reveal = StoreReveal { loader, parts: RefCell::new(Vec::new()), error: RefCell::new(None) };
    let root = reveal.blind(root)?;
    let (proof, result) = produce_tree_proof(root, &reveal, f).map_err(|e| match reveal.error.borrow_mut().take() {
        Some(store_error) => store_error,
        None => Error::Proof(e),
    })?;
    debug_assert!(
        !crate::DEEP_CHECKS
            || pando_core::proof::convert::entry_of_tree(&proof.state)
                .and_then(|shown| PartialTree::of_entry(shown).kinded_hash())
                == Ok(proof.before),
        "a proof's state, as revealed from the store, hashes to the store's hash of the tree"
    );
    Ok((proof, result))
}
