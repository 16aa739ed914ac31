//! Between proof trees ([`super::types`]) and partial trees
//! ([`super::partial`]): checking a proof's structure as it becomes a
//! partial tree, and showing what a computation revealed as a proof.
//!
//! Invariants:
//! - [`entry_of_tree`] accepts only trees that respect the layout rules
//!   (sorted unique steps, at most 256 entries in a node, 1 to 32 in a value
//!   inode, each on the index path of its position, tree inodes of more than
//!   32 entries whose children's lengths add up, more than 256 at a root,
//!   depths within bounds), so that no check is left to hashing, which
//!   asserts them.
//! - [`tree_of_entry`] shows a directory the way irmin does: all entries of
//!   a directory of at most 256, as a node; the root inode of a larger one
//!   with every child, blinded unless revealed; chains of single-child
//!   inodes as extenders.

use std::sync::Arc;

use super::ProofError;
use super::partial::{Cell, Entry, Inode as Node, Partial};
use super::types::{Extender, Inode, InodeTree, Tree};
use crate::dir::{self, Body, Child, Hold, MAX_DEPTH, Pointers, Values};
use crate::inode::{ENTRIES, Layout, STABLE_HASH, hashed_flat, index};

fn malformed(reason: impl Into<String>) -> ProofError {
    ProofError::Malformed(reason.into())
}

// ------------------------------------------------------------ proof → partial

/// The partial tree a proof tree shows, after checking its structure.
pub fn entry_of_tree(tree: &Tree) -> Result<Entry, ProofError> {
    Ok(match tree {
        Tree::Value(bytes) => Entry::contents(bytes),
        Tree::BlindedValue(hash) => Entry::blinded_contents(*hash, None),
        Tree::BlindedNode(hash) => Entry::blinded_dir(*hash, None),
        Tree::Node(entries) => {
            if !hashed_flat(entries.len() as u64) {
                return Err(malformed(format!("a node of {} entries (at most {STABLE_HASH})", entries.len())));
            }
            Entry::dir(dir::build(Layout::TEZOS, 0, entry_list(entries)?).ok_or_else(|| too_deep(0))?)
        }
        Tree::Inode(inode) => {
            root_length(inode.length)?;
            Entry::dir(tree_inode(inode, 0, &[])?)
        }
        Tree::Extender(extender) => {
            root_length(extender.length)?;
            Child::Dir(extend(extender, 0, &[])?)
        }
    })
}

fn too_deep(depth: u32) -> ProofError {
    malformed(format!("more than {ENTRIES} names colliding down to inode depth {depth} or deeper (at most {MAX_DEPTH})"))
}

fn root_length(length: u64) -> Result<(), ProofError> {
    if hashed_flat(length) {
        return Err(malformed(format!("a root inode of {length} entries (a node below {})", STABLE_HASH + 1)));
    }
    Ok(())
}

/// Entries of a node or value inode: strictly sorted steps.
fn entry_list(entries: &[(Vec<u8>, Tree)]) -> Result<Vec<(Vec<u8>, Entry)>, ProofError> {
    if let Some(w) = entries.windows(2).find(|w| w[0].0 >= w[1].0) {
        return Err(malformed(format!("entries not sorted: {:?} before {:?}", show(&w[0].0), show(&w[1].0))));
    }
    entries.iter().map(|(step, t)| Ok((step.clone(), entry_of_tree(t)?))).collect()
}

fn show(step: &[u8]) -> String {
    super::partial::show_path(&[step])
}

/// The cell of an inode tree at `depth` ≥ 1, reached by the child indices `at`.
fn inode_cell(tree: &InodeTree, depth: u32, at: &[u8]) -> Result<Arc<Cell>, ProofError> {
    if depth > MAX_DEPTH {
        return Err(malformed(format!("an inode at depth {depth} (at most {MAX_DEPTH})")));
    }
    Ok(match tree {
        InodeTree::BlindedInode(hash) => Cell::blinded(*hash, None),
        InodeTree::InodeValues(entries) => {
            if entries.is_empty() || entries.len() > ENTRIES {
                return Err(malformed(format!("a value inode of {} entries", entries.len())));
            }
            for (step, _) in entries {
                if let Some(d) = (0..depth).find(|&d| index(d, step) != usize::from(at[d as usize])) {
                    return Err(malformed(format!("entry {} is not at its index at depth {d}", show(step))));
                }
            }
            Partial::mem(Node::values(Values::from_sorted(entry_list(entries)?)))
        }
        InodeTree::InodeTree(inode) => Partial::mem(tree_inode(inode, depth, at)?),
        InodeTree::InodeExtender(extender) => extend(extender, depth, at)?,
    })
}

/// The length of a child cell, if known, for checking its parent's.
fn known_length(cell: &Cell) -> Option<u64> {
    cell.known_inode().map(|inode| inode.len())
}

fn tree_inode(inode: &Inode, depth: u32, at: &[u8]) -> Result<Arc<Node>, ProofError> {
    if inode.length <= ENTRIES as u64 {
        return Err(malformed(format!("a tree inode of {} entries (more than {ENTRIES} needed)", inode.length)));
    }
    if inode.proofs.is_empty() {
        return Err(malformed("a tree inode without children"));
    }
    let mut children = Vec::with_capacity(inode.proofs.len());
    let (mut known, mut blinded) = (0u64, 0u64);
    let mut previous = None;
    let mut path = at.to_vec();
    for (i, child) in &inode.proofs {
        if usize::from(*i) >= ENTRIES || previous.is_some_and(|p| p >= *i) {
            return Err(malformed(format!("inode child index {i} out of range or order")));
        }
        previous = Some(*i);
        path.push(*i);
        let cell = inode_cell(child, depth + 1, &path)?;
        path.pop();
        match known_length(&cell) {
            Some(n) => known = known.saturating_add(n),
            None => blinded += 1,
        }
        children.push((usize::from(*i), cell));
    }
    if known.saturating_add(blinded) > inode.length || (blinded == 0 && known != inode.length) {
        return Err(malformed(format!("a tree inode of length {} whose children hold {known} entries", inode.length)));
    }
    Ok(Arc::new(Node::new(Body::Tree(Pointers::new(depth, inode.length, children)))))
}

/// The chain of single-child tree inodes an extender stands for, from `depth`.
fn extend(extender: &Extender, depth: u32, at: &[u8]) -> Result<Arc<Cell>, ProofError> {
    let length = extender.length;
    if extender.segment.is_empty() {
        return Err(malformed("an extender with an empty segment"));
    }
    if length <= ENTRIES as u64 {
        return Err(malformed(format!("an extender of {length} entries (more than {ENTRIES} needed)")));
    }
    let n = extender.segment.len() as u32;
    if depth.saturating_add(n) > MAX_DEPTH {
        return Err(malformed(format!("an extender reaching depth {} (at most {MAX_DEPTH})", depth + n)));
    }
    if let Some(bad) = extender.segment.iter().find(|i| usize::from(**i) >= ENTRIES) {
        return Err(malformed(format!("an extender index of {bad}")));
    }
    let mut path = at.to_vec();
    path.extend_from_slice(&extender.segment);
    let mut cell = inode_cell(&extender.proof, depth + n, &path)?;
    if known_length(&cell).is_some_and(|len| len != length) {
        return Err(malformed(format!("an extender of length {length} ending in an inode of another length")));
    }
    for (k, i) in extender.segment.iter().enumerate().rev() {
        let pointers = Pointers::new(depth + k as u32, length, [(usize::from(*i), cell)]);
        cell = Partial::mem(Arc::new(Node::new(Body::Tree(pointers))));
    }
    Ok(cell)
}

// ------------------------------------------------------------ partial → proof

/// What `entry` shows of itself: the parts revealed, the rest blinded.
pub fn tree_of_entry(entry: &Entry) -> Result<Tree, ProofError> {
    match entry {
        Child::Contents(c) => Ok(match c.known_bytes() {
            Some(bytes) => Tree::Value(bytes.to_vec()),
            None => Tree::BlindedValue(c.known_hash().ok_or_else(|| malformed("a contents with neither bytes nor hash"))?),
        }),
        Child::Dir(cell) => {
            let Some(root) = cell.known_inode() else { return Ok(Tree::BlindedNode(blinded_hash(cell)?)) };
            if hashed_flat(root.len()) {
                let mut entries = Vec::new();
                revealed_entries(root, &mut entries)?;
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                let shown =
                    entries.iter().map(|(step, e)| Ok((step.clone(), tree_of_entry(e)?))).collect::<Result<_, ProofError>>()?;
                return Ok(Tree::Node(shown));
            }
            Ok(match inode_tree_of(root)? {
                InodeTree::InodeTree(inode) => Tree::Inode(inode),
                InodeTree::InodeExtender(extender) => Tree::Extender(extender),
                _ => return Err(malformed("a directory of more than 256 entries with a value inode at its root")),
            })
        }
    }
}

fn blinded_hash(cell: &Cell) -> Result<crate::Hash, ProofError> {
    cell.blinded_hash().ok_or_else(|| malformed("an inode with neither body nor hash"))
}

/// The entries below a directory of at most 256 entries, all revealed.
fn revealed_entries(inode: &Node, out: &mut Vec<(Vec<u8>, Entry)>) -> Result<(), ProofError> {
    match &inode.body {
        Body::Values(values) => out.extend(values.iter().map(|(step, e)| (step.to_vec(), e.clone()))),
        Body::Tree(pointers) => {
            for (_, child) in pointers.iter() {
                let inode = child.known_inode().ok_or_else(|| malformed("a small directory with a blinded inode"))?;
                revealed_entries(inode, out)?;
            }
        }
    }
    Ok(())
}

fn inode_tree_of_cell(cell: &Cell) -> Result<InodeTree, ProofError> {
    match cell.known_inode() {
        None => Ok(InodeTree::BlindedInode(blinded_hash(cell)?)),
        Some(inode) => inode_tree_of(inode),
    }
}

fn inode_tree_of(inode: &Node) -> Result<InodeTree, ProofError> {
    match &inode.body {
        Body::Values(values) => Ok(InodeTree::InodeValues(
            values.iter().map(|(step, e)| Ok((step.to_vec(), tree_of_entry(e)?))).collect::<Result<_, ProofError>>()?,
        )),
        Body::Tree(pointers) => {
            let len = &pointers.len;
            let mut proofs = Vec::new();
            for (i, child) in pointers.iter() {
                proofs.push((i as u8, inode_tree_of_cell(child)?));
            }
            // As irmin: a single child that is itself a single-child inode
            // (or a chain of them) joins this one in an extender.
            if let [(i, _)] = proofs[..] {
                let (_, only) = proofs.pop().expect("one child");
                return Ok(match only {
                    InodeTree::InodeTree(Inode { proofs: mut below, .. }) if below.len() == 1 => {
                        let (j, proof) = below.pop().expect("one child");
                        InodeTree::InodeExtender(Extender { length: *len, segment: vec![i, j], proof: Box::new(proof) })
                    }
                    InodeTree::InodeExtender(Extender { mut segment, proof, .. }) => {
                        segment.insert(0, i);
                        InodeTree::InodeExtender(Extender { length: *len, segment, proof })
                    }
                    other => InodeTree::InodeTree(Inode { length: *len, proofs: vec![(i, other)] }),
                });
            }
            Ok(InodeTree::InodeTree(Inode { length: *len, proofs }))
        }
    }
}
