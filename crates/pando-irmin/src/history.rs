//! Every commit with its history (`pando import-irmin --all`).
//!
//! The oldest commit comes in whole, as a snapshot (`walk`). Each later
//! one is built on a commit already imported, its first parent when one
//! is: the two irmin trees are compared inode by inode, skipping every
//! pair with the same offset or hash, and only what differs is applied to
//! a pando tree checked out at the base, which is then committed with the
//! irmin commit's parents and info. The import goes on only if pando's
//! commit hash is the one irmin recorded.
//!
//! Invariants:
//! - The work per commit is proportional to what it changed (the pairs of
//!   inodes on the paths to its changes), not to the tree's size.
//! - Every contents read is re-hashed against its entry; every commit is
//!   checked whole through its hash (a damaged inode of a later commit is
//!   therefore reported at that commit's entry).
//! - Every pointer followed points below its entry (irmin writes children
//!   first), every name lies on its index path, and nesting is bounded: no
//!   damage can make the comparison loop or recurse without end.

use pando_core::dir::MAX_DEPTH;
use pando_core::inode::index;
use pando_core::{Hash, Kind};
use pando_store::{CommitMeta, Store, Tree};

use crate::dict::Dict;
use crate::entry::{self, Address, Entry, EntryKind, InodeBody};
use crate::error::{Error, Result};
use crate::space::Space;
use crate::walk::MAX_DIRS;

/// An entry of a directory: name, kind, address.
type DirEntry = (Vec<u8>, Kind, Address);

/// What the comparison of two trees changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiffStats {
    pub added: u64,
    pub removed: u64,
    /// Inode entries read to find the differences.
    pub inodes_read: u64,
}

pub struct Differ<'a> {
    pub space: &'a mut Space,
    pub dict: &'a Dict,
    pub stats: DiffStats,
}

impl Differ<'_> {
    /// The inode `parent` points to at `address`.
    fn inode(&mut self, parent: &Entry, address: Address, kind: EntryKind) -> Result<Entry> {
        let entry = entry::read(self.space, parent.child(address)?, &parent.loc)?;
        entry.expect(&[kind], if kind == EntryKind::Root { "a directory's root inode" } else { "a non-root inode" })?;
        self.stats.inodes_read += 1;
        Ok(entry)
    }

    /// Applies to `tree` what turns directory `base` into `target` at
    /// `path`; each is given as the entry pointing to it and the address.
    pub fn dir(
        &mut self,
        base: (&Entry, Address),
        target: (&Entry, Address),
        path: &mut Vec<Vec<u8>>,
        tree: &mut Tree,
    ) -> Result<()> {
        if path.len() >= MAX_DIRS {
            return Err(target.0.loc.error(format!("directories nested more than {MAX_DIRS} deep")));
        }
        if base.1 == target.1 {
            return Ok(());
        }
        let base = self.inode(base.0, base.1, EntryKind::Root)?;
        let target = self.inode(target.0, target.1, EntryKind::Root)?;
        if base.hash == target.hash {
            return Ok(());
        }
        self.inodes(&base, &target, path, tree, 0)
    }

    /// Compares two inodes at the same index path, at `depth`, of one
    /// directory.
    fn inodes(&mut self, base: &Entry, target: &Entry, path: &mut Vec<Vec<u8>>, tree: &mut Tree, depth: u32) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(target.loc.error(format!("inodes nested deeper than {MAX_DEPTH}")));
        }
        match (base.inode(self.dict)?, target.inode(self.dict)?) {
            (InodeBody::Tree { pointers: old, .. }, InodeBody::Tree { pointers: new, .. }) => {
                let (mut i, mut j) = (0, 0);
                while i < old.len() || j < new.len() {
                    match (old.get(i), new.get(j)) {
                        (Some(&(x, pa)), Some(&(y, pb))) if x == y => {
                            (i, j) = (i + 1, j + 1);
                            if pa == pb {
                                continue;
                            }
                            let ca = self.inode(base, pa, EntryKind::Inode)?;
                            let cb = self.inode(target, pb, EntryKind::Inode)?;
                            if ca.hash != cb.hash {
                                self.inodes(&ca, &cb, path, tree, depth + 1)?;
                            }
                        }
                        (Some(&(x, pa)), b) if b.is_none_or(|&(y, _)| x < y) => {
                            i += 1;
                            let gone = self.inode(base, pa, EntryKind::Inode)?;
                            for (name, _, _) in self.entries(&gone, depth + 1, x)? {
                                self.remove(path, name, tree)?;
                            }
                        }
                        (_, Some(&(y, pb))) => {
                            j += 1;
                            let new = self.inode(target, pb, EntryKind::Inode)?;
                            for (name, kind, address) in self.entries(&new, depth + 1, y)? {
                                self.add(path, name, kind, address, &new, tree)?;
                            }
                        }
                        (_, None) => unreachable!("one side has a pointer left"),
                    }
                }
                Ok(())
            }
            // A values inode on one side: the other holds what came or went
            // as the directory crossed 32 entries.
            _ => {
                let (old, new) = (self.entries(base, depth, NO_INDEX)?, self.entries(target, depth, NO_INDEX)?);
                let (mut i, mut j) = (0, 0);
                while i < old.len() || j < new.len() {
                    let order = match (old.get(i), new.get(j)) {
                        (Some(a), Some(b)) => a.0.cmp(&b.0),
                        (Some(_), None) => std::cmp::Ordering::Less,
                        (None, _) => std::cmp::Ordering::Greater,
                    };
                    match order {
                        std::cmp::Ordering::Less => {
                            self.remove(path, old[i].0.clone(), tree)?;
                            i += 1;
                        }
                        std::cmp::Ordering::Greater => {
                            let (name, kind, address) = new[j].clone();
                            self.add(path, name, kind, address, target, tree)?;
                            j += 1;
                        }
                        std::cmp::Ordering::Equal => {
                            let ((name, ka, pa), (_, kb, pb)) = (old[i].clone(), new[j].clone());
                            (i, j) = (i + 1, j + 1);
                            if pa == pb && ka == kb {
                                continue;
                            }
                            if ka == Kind::Dir && kb == Kind::Dir {
                                path.push(name);
                                self.dir((base, pa), (target, pb), path, tree)?;
                                path.pop();
                            } else {
                                self.add(path, name, kb, pb, target, tree)?;
                            }
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// Every entry under `inode`, which lies at `depth` of its directory
    /// (under index `at` of its parent, or [`NO_INDEX`] when unknown),
    /// sorted by name. Each name must lie on the index path below, so no
    /// inode is met twice.
    fn entries(&mut self, inode: &Entry, depth: u32, at: u8) -> Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        let mut path = Vec::new();
        if at != NO_INDEX {
            path.push((depth - 1, at));
        }
        self.collect(inode, &mut out, depth, &mut path)?;
        out.sort_by(|a, b| a.0.cmp(&b.0));
        entry::check_sorted(&out, &inode.loc, "a directory")?;
        Ok(out)
    }

    /// Collects the entries under `inode` (at `depth`), each of which
    /// must go to index `i` at depth `d` for every `(d, i)` of `path`.
    fn collect(&mut self, inode: &Entry, out: &mut Vec<DirEntry>, depth: u32, path: &mut Vec<(u32, u8)>) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(inode.loc.error(format!("inodes nested deeper than {MAX_DEPTH}")));
        }
        match inode.inode(self.dict)? {
            InodeBody::Values(values) => {
                for (name, _, _) in &values {
                    if !path.iter().all(|&(d, i)| index(d, name) == usize::from(i)) {
                        return Err(inode
                            .loc
                            .error(format!("entry {:?} lies outside its inode's index path", String::from_utf8_lossy(name))));
                    }
                }
                out.extend(values);
            }
            InodeBody::Tree { pointers, .. } => {
                for (i, address) in pointers {
                    let child = self.inode(inode, address, EntryKind::Inode)?;
                    path.push((depth, i));
                    self.collect(&child, out, depth + 1, path)?;
                    path.pop();
                }
            }
        }
        Ok(())
    }

    fn remove(&mut self, path: &mut Vec<Vec<u8>>, name: Vec<u8>, tree: &mut Tree) -> Result<()> {
        path.push(name);
        tree.remove_mut(path)?;
        path.pop();
        self.stats.removed += 1;
        Ok(())
    }

    /// Puts the entry (a contents, or a whole directory) that inode
    /// `parent` holds at `path/name`.
    fn add(
        &mut self,
        path: &mut Vec<Vec<u8>>,
        name: Vec<u8>,
        kind: Kind,
        address: Address,
        parent: &Entry,
        tree: &mut Tree,
    ) -> Result<()> {
        path.push(name);
        match kind {
            Kind::Contents => {
                let contents = parent.contents(self.space, address)?;
                tree.add_mut(path, &contents.body)?;
                self.stats.added += 1;
            }
            Kind::Dir => {
                if path.len() >= MAX_DIRS {
                    return Err(parent.loc.error(format!("directories nested more than {MAX_DIRS} deep")));
                }
                // A directory replacing a contents: the contents goes first.
                if tree.mem(path)? {
                    tree.remove_mut(path)?;
                }
                let root = self.inode(parent, address, EntryKind::Root)?;
                for (name, kind, address) in self.entries(&root, 0, NO_INDEX)? {
                    self.add(path, name, kind, address, &root, tree)?;
                }
            }
        }
        path.pop();
        Ok(())
    }
}

/// No index path is known above the inode (a directory's root, or both
/// sides of a comparison checked from their common path).
const NO_INDEX: u8 = u8::MAX;

/// Imports commit `target` (its entry, fields and parents' hashes) on top
/// of the imported commit `base` (its irmin entry and fields).
pub fn import_on(
    differ: &mut Differ<'_>,
    store: &Store,
    base: (&Entry, &entry::CommitBody),
    target: (&Entry, &entry::CommitBody, &[Hash]),
) -> Result<Hash> {
    let (entry, body, parents) = target;
    let mut tree = store.checkout(&base.0.hash)?.ok_or(Error::UnknownCommit(base.0.hash))?;
    differ.dir((base.0, base.1.node), (entry, body.node), &mut Vec::new(), &mut tree)?;
    let hash = store
        .commit(&tree, CommitMeta { parents, date: body.date, author: &body.author, message: &body.message })
        .map_err(|e| match e {
            pando_store::Error::UnknownCommit(parent) => Error::Unsupported(format!(
                "{} at byte {}: commit {} has parent {parent}, which the files do not hold whole; \
             --all imports the commits that descend from the oldest one",
                entry.loc.file, entry.loc.offset, entry.hash
            )),
            other => other.into(),
        })?;
    entry.verify("commit", hash)?;
    Ok(hash)
}
