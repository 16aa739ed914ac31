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
//!   checked whole through its hash.

use pando_core::{Hash, Kind};
use pando_store::{Store, Tree};

use crate::dict::Dict;
use crate::entry::{self, Address, Entry, EntryKind, InodeBody, Loc};
use crate::error::{Error, Result};
use crate::space::Space;

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
    fn read(&mut self, address: Address, from: &Loc) -> Result<Entry> {
        match address {
            Address::Offset(offset) => entry::read(self.space, offset, from),
            Address::Hash(hash) => Err(Error::Unsupported(format!(
                "{} at byte {}: a pointer by hash ({hash}), which only irmin's index resolves",
                from.file, from.offset
            ))),
        }
    }

    fn inode(&mut self, address: Address, from: &Loc, kind: EntryKind) -> Result<Entry> {
        let entry = self.read(address, from)?;
        entry.expect(&[kind], if kind == EntryKind::Root { "a directory's root inode" } else { "a non-root inode" })?;
        self.stats.inodes_read += 1;
        Ok(entry)
    }

    /// Applies to `tree` what turns directory `base` into `target` at `path`.
    pub fn dir(&mut self, base: Address, target: Address, from: &Loc, path: &mut Vec<Vec<u8>>, tree: &mut Tree) -> Result<()> {
        if base == target {
            return Ok(());
        }
        let base = self.inode(base, from, EntryKind::Root)?;
        let target = self.inode(target, from, EntryKind::Root)?;
        if base.hash == target.hash {
            return Ok(());
        }
        self.inodes(&base, &target, path, tree)
    }

    /// Compares two inodes at the same index path of one directory.
    fn inodes(&mut self, base: &Entry, target: &Entry, path: &mut Vec<Vec<u8>>, tree: &mut Tree) -> Result<()> {
        match (base.inode(self.dict)?, target.inode(self.dict)?) {
            (InodeBody::Tree { pointers: old, .. }, InodeBody::Tree { pointers: new, .. }) => {
                let (mut i, mut j) = (0, 0);
                while i < old.len() || j < new.len() {
                    let (a, b) = (old.get(i), new.get(j));
                    match (a, b) {
                        (Some(&(x, pa)), Some(&(y, pb))) if x == y => {
                            (i, j) = (i + 1, j + 1);
                            if pa == pb {
                                continue;
                            }
                            let ca = self.inode(pa, &base.loc, EntryKind::Inode)?;
                            let cb = self.inode(pb, &target.loc, EntryKind::Inode)?;
                            if ca.hash != cb.hash {
                                self.inodes(&ca, &cb, path, tree)?;
                            }
                        }
                        (Some(&(x, pa)), b) if b.is_none_or(|&(y, _)| x < y) => {
                            i += 1;
                            let gone = self.inode(pa, &base.loc, EntryKind::Inode)?;
                            for (name, _, _) in self.entries(&gone)? {
                                self.remove(path, name, tree)?;
                            }
                        }
                        (_, Some(&(_, pb))) => {
                            j += 1;
                            let new = self.inode(pb, &target.loc, EntryKind::Inode)?;
                            for (name, kind, address) in self.entries(&new)? {
                                self.add(path, name, kind, address, &new.loc, tree)?;
                            }
                        }
                        (_, None) => unreachable!("one side has a pointer left"),
                    }
                }
                Ok(())
            }
            // A values inode on one side: both hold few entries here.
            _ => {
                let (old, new) = (self.entries(base)?, self.entries(target)?);
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
                            self.add(path, name, kind, address, &target.loc, tree)?;
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
                                self.dir(pa, pb, &target.loc, path, tree)?;
                                path.pop();
                            } else {
                                self.add(path, name, kb, pb, &target.loc, tree)?;
                            }
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// Every entry under the inode, sorted by name.
    fn entries(&mut self, inode: &Entry) -> Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        self.collect(inode, &mut out, 0)?;
        out.sort_by(|a, b| a.0.cmp(&b.0));
        if out.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(inode.loc.error("a name held twice in one directory"));
        }
        Ok(out)
    }

    fn collect(&mut self, inode: &Entry, out: &mut Vec<DirEntry>, depth: u32) -> Result<()> {
        if depth > pando_core::dir::MAX_DEPTH {
            return Err(inode.loc.error("inodes nested deeper than any directory needs"));
        }
        match inode.inode(self.dict)? {
            InodeBody::Values(values) => out.extend(values),
            InodeBody::Tree { pointers, .. } => {
                for (_, address) in pointers {
                    let child = self.inode(address, &inode.loc, EntryKind::Inode)?;
                    self.collect(&child, out, depth + 1)?;
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

    /// Puts the entry (a contents, or a whole directory) at `path/name`.
    fn add(
        &mut self,
        path: &mut Vec<Vec<u8>>,
        name: Vec<u8>,
        kind: Kind,
        address: Address,
        from: &Loc,
        tree: &mut Tree,
    ) -> Result<()> {
        path.push(name);
        match kind {
            Kind::Contents => {
                let contents = self.read(address, from)?;
                contents.expect(&[EntryKind::Contents], "a contents")?;
                let found = pando_core::tezos::contents_hash(&contents.body);
                if found != contents.hash {
                    return Err(Error::HashMismatch {
                        file: contents.loc.file,
                        offset: contents.loc.offset,
                        what: "contents",
                        found,
                        stored: contents.hash,
                    });
                }
                tree.add_mut(path, &contents.body)?;
                self.stats.added += 1;
            }
            Kind::Dir => {
                if path.len() > 1024 {
                    return Err(from.error("directories nested more than 1024 deep"));
                }
                // A directory replacing a contents: the contents goes first.
                if tree.mem(path)? {
                    tree.remove_mut(path)?;
                }
                let root = self.inode(address, from, EntryKind::Root)?;
                for (name, kind, address) in self.entries(&root)? {
                    self.add(path, name, kind, address, &root.loc, tree)?;
                }
            }
        }
        path.pop();
        Ok(())
    }
}

/// Imports commit `target` (its entry, fields and parents' hashes) on top
/// of the imported commit `base` (its irmin root address and pando hash).
pub fn import_on(
    differ: &mut Differ<'_>,
    store: &Store,
    base: (Address, Hash),
    target: (&Entry, &entry::CommitBody, &[Hash]),
) -> Result<Hash> {
    let (entry, body, parents) = target;
    let mut tree = store.checkout(&base.1)?.ok_or(Error::UnknownCommit(base.1))?;
    differ.dir(base.0, body.node, &entry.loc, &mut Vec::new(), &mut tree)?;
    let hash = store.commit(&tree, parents, body.date, &body.author, &body.message).map_err(|e| match e {
        pando_store::Error::UnknownCommit(parent) => Error::Unsupported(format!(
            "{} at byte {}: commit {} has parent {parent}, which the files do not hold whole; \
             --all imports the commits that descend from the oldest one",
            entry.loc.file, entry.loc.offset, entry.hash
        )),
        other => other.into(),
    })?;
    if hash != entry.hash {
        return Err(Error::HashMismatch {
            file: entry.loc.file.clone(),
            offset: entry.loc.offset,
            what: "commit",
            found: hash,
            stored: entry.hash,
        });
    }
    Ok(hash)
}
