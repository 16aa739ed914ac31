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

use std::rc::Rc;

use super::ProofError;
use super::partial::{Body, Cell, Entry, MAX_INODE_DEPTH, build};
use super::types::{Extender, Inode, InodeTree, Tree};
use crate::inode::{ENTRIES, STABLE_HASH, hashed_flat, index};

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
            Entry::Dir(Cell::of_body(build(0, entry_list(entries)?)?))
        }
        Tree::Inode(inode) => {
            root_length(inode.length)?;
            Entry::Dir(Cell::of_body(tree_body(inode, 0, &[])?))
        }
        Tree::Extender(extender) => {
            root_length(extender.length)?;
            Entry::Dir(extend(extender, 0, &[])?)
        }
    })
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
fn inode_cell(tree: &InodeTree, depth: u32, at: &[u8]) -> Result<Rc<Cell>, ProofError> {
    if depth > MAX_INODE_DEPTH {
        return Err(malformed(format!("an inode at depth {depth} (at most {MAX_INODE_DEPTH})")));
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
            Cell::of_body(Body::Values(entry_list(entries)?))
        }
        InodeTree::InodeTree(inode) => Cell::of_body(tree_body(inode, depth, at)?),
        InodeTree::InodeExtender(extender) => extend(extender, depth, at)?,
    })
}

/// The length of a child cell, if known, for checking its parent's.
fn known_length(cell: &Cell) -> Option<u64> {
    cell.body.get().map(Body::len)
}

fn tree_body(inode: &Inode, depth: u32, at: &[u8]) -> Result<Body, ProofError> {
    if inode.length <= ENTRIES as u64 {
        return Err(malformed(format!("a tree inode of {} entries (more than {ENTRIES} needed)", inode.length)));
    }
    if inode.proofs.is_empty() {
        return Err(malformed("a tree inode without children"));
    }
    let mut children: Box<[Option<Rc<Cell>>; ENTRIES]> = Box::new(std::array::from_fn(|_| None));
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
        children[usize::from(*i)] = Some(cell);
    }
    if known.saturating_add(blinded) > inode.length || (blinded == 0 && known != inode.length) {
        return Err(malformed(format!("a tree inode of length {} whose children hold {known} entries", inode.length)));
    }
    Ok(Body::Tree { depth, len: inode.length, children })
}

/// The chain of single-child tree inodes an extender stands for, from `depth`.
fn extend(extender: &Extender, depth: u32, at: &[u8]) -> Result<Rc<Cell>, ProofError> {
    let length = extender.length;
    if extender.segment.is_empty() {
        return Err(malformed("an extender with an empty segment"));
    }
    if length <= ENTRIES as u64 {
        return Err(malformed(format!("an extender of {length} entries (more than {ENTRIES} needed)")));
    }
    let n = extender.segment.len() as u32;
    if depth.saturating_add(n) > MAX_INODE_DEPTH {
        return Err(malformed(format!("an extender reaching depth {} (at most {MAX_INODE_DEPTH})", depth + n)));
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
        let mut children: Box<[Option<Rc<Cell>>; ENTRIES]> = Box::new(std::array::from_fn(|_| None));
        children[usize::from(*i)] = Some(cell);
        cell = Cell::of_body(Body::Tree { depth: depth + k as u32, len: length, children });
    }
    Ok(cell)
}

// ------------------------------------------------------------ partial → proof

/// What `entry` shows of itself: the parts revealed, the rest blinded.
pub fn tree_of_entry(entry: &Entry) -> Result<Tree, ProofError> {
    match entry {
        Entry::Contents(c) => Ok(match c.bytes.get() {
            Some(bytes) => Tree::Value(bytes.to_vec()),
            None => Tree::BlindedValue(*c.hash.get().ok_or_else(|| malformed("a contents with neither bytes nor hash"))?),
        }),
        Entry::Dir(cell) => {
            let Some(body) = cell.body.get() else { return Ok(Tree::BlindedNode(blinded_hash(cell)?)) };
            if hashed_flat(body.len()) {
                let mut entries = Vec::new();
                revealed_entries(body, &mut entries)?;
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                let shown =
                    entries.iter().map(|(step, e)| Ok((step.clone(), tree_of_entry(e)?))).collect::<Result<_, ProofError>>()?;
                return Ok(Tree::Node(shown));
            }
            Ok(match inode_tree_of_body(body)? {
                InodeTree::InodeTree(inode) => Tree::Inode(inode),
                InodeTree::InodeExtender(extender) => Tree::Extender(extender),
                _ => return Err(malformed("a directory of more than 256 entries with a value inode at its root")),
            })
        }
    }
}

fn blinded_hash(cell: &Cell) -> Result<crate::Hash, ProofError> {
    cell.hash.get().copied().ok_or_else(|| malformed("an inode with neither body nor hash"))
}

/// The entries below a directory of at most 256 entries, all revealed.
fn revealed_entries(body: &Body, out: &mut Vec<(Vec<u8>, Entry)>) -> Result<(), ProofError> {
    match body {
        Body::Values(entries) => out.extend(entries.iter().cloned()),
        Body::Tree { children, .. } => {
            for child in children.iter().flatten() {
                let body = child.body.get().ok_or_else(|| malformed("a small directory with a blinded inode"))?;
                revealed_entries(body, out)?;
            }
        }
    }
    Ok(())
}

fn inode_tree_of_cell(cell: &Cell) -> Result<InodeTree, ProofError> {
    match cell.body.get() {
        None => Ok(InodeTree::BlindedInode(blinded_hash(cell)?)),
        Some(body) => inode_tree_of_body(body),
    }
}

fn inode_tree_of_body(body: &Body) -> Result<InodeTree, ProofError> {
    match body {
        Body::Values(entries) => Ok(InodeTree::InodeValues(
            entries.iter().map(|(step, e)| Ok((step.clone(), tree_of_entry(e)?))).collect::<Result<_, ProofError>>()?,
        )),
        Body::Tree { len, children, .. } => {
            let mut proofs = Vec::new();
            for (i, child) in children.iter().enumerate() {
                if let Some(child) = child {
                    proofs.push((i as u8, inode_tree_of_cell(child)?));
                }
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
