//! Tree inodes and tree patches in the walk.
//!
//! A tree inode is hashed from its pointers alone ([`Pointers`]); a patch
//! from its base's pointers with its changes applied. Resolving a patch
//! reads its base chain ahead of the walk (from the window when it holds
//! them, else one small read each) and keeps each base's pointers until
//! the walk visits that base: by then every patch over it, all at higher
//! offsets, has been visited. So each record is decoded for resolution
//! once, and the kept bases are part of the frontier.
//!
//! Invariants:
//! - A position is one 5-bit child index per level above the inode, the
//!   root's lowest (asserted in `tree`).
//! - A base's kept pointers are its own record's: a tree inode's lead to
//!   no patch, a tree patch's through at least one (asserted in `tree`).
//! - A tree inode's entry count is pending once, from its visit until its
//!   last child's (asserted in `tree`).

use pando_core::Hash;
use pando_core::inode::{ENTRIES, hashed_flat};
use smallvec::SmallVec;
use std::rc::Rc;

use super::{Claim, Count, Here, MAX_DEPTH, Pending, Role, State};
use crate::format::node::{decode_tree, misshapen};
use crate::format::patch::{MAX_PATCH_CHAIN, TreePatch};
use crate::format::record::RecordKind;
use crate::node::{self, Body, Inode, Loader, Pointers as StorePointers, Ptr};
use crate::pack::window::Window;
use pando_core::dir::collect_sorted;
use pando_core::inode::Layout;

/// A tree inode as its pointers, in index order.
pub(super) struct Pointers {
    len: u64,
    /// How many patches lead from its record to a full one.
    chain: u8,
    children: SmallVec<[(usize, u64, Hash); ENTRIES]>,
}

impl Pointers {
    fn of_tree(payload: &[u8], at: u64, depth: u32, layout: Layout) -> Result<Pointers, String> {
        let inode = decode_tree(payload, at, depth).map_err(|reason| format!("damaged tree inode: {reason}"))?;
        if let Some(reason) = misshapen(&inode, layout) {
            return Err(format!("damaged tree inode: {reason}"));
        }
        let Body::Tree(pointers) = &inode.body else { return Err("not a tree inode".into()) };
        let children = pointers.iter().filter_map(|(i, child)| match child {
            Ptr::Stored { offset, hash } => Some((i, *offset, *hash)),
            Ptr::Mem(_, _) => None,
        });
        Ok(Pointers { len: pointers.len, chain: 0, children: children.collect() })
    }

    /// The pointers of `patch` over `self` (as `TreePatch::apply`).
    fn patched(&self, patch: &TreePatch) -> Result<Pointers, String> {
        if self.chain >= MAX_PATCH_CHAIN {
            return Err(format!("a chain of tree patches longer than {MAX_PATCH_CHAIN}"));
        }
        if patch.len <= ENTRIES as u64 {
            return Err(format!("tree inode with only {} entries", patch.len));
        }
        let mut slots: [Option<(u64, Hash)>; ENTRIES] = [None; ENTRIES];
        for &(index, offset, hash) in &self.children {
            slots[index] = Some((offset, hash));
        }
        for &(index, pointer) in &patch.changes {
            slots[index] = pointer;
        }
        let children: SmallVec<_> = slots.iter().enumerate().filter_map(|(i, s)| s.map(|(o, h)| (i, o, h))).collect();
        if children.is_empty() {
            return Err("tree inode without children".into());
        }
        Ok(Pointers { len: patch.len, chain: self.chain + 1, children })
    }

    /// The inode hash (tree encoding) at `depth`, encoded in `buf`.
    fn inode_hash(&self, depth: u32, buf: &mut Vec<u8>) -> Hash {
        pando_core::dir::tree_hash(buf, depth, self.len, self.children.iter().map(|(i, _, h)| (*i, h)))
    }

    /// The inode of the record at `at`, to hash flat through the store's
    /// loader (`instance`: the store's).
    fn inode(&self, depth: u32, at: u64, instance: u64) -> Inode {
        let children = self.children.iter().map(|&(index, offset, hash)| (index, Ptr::stored(offset, hash)));
        Inode::with_meta(Body::Tree(StorePointers::new(depth, self.len, children)), node::State::loaded(instance, at, self.chain))
    }
}

impl State<'_> {
    /// Checks a tree inode or patch against its claims, claims the
    /// children it holds (and its base); returns its entry count.
    /// `known`: its pointers, if resolved earlier as a base.
    pub(super) fn tree(
        &mut self,
        here: &Here<'_>,
        pending: &Pending,
        kind: RecordKind,
        payload: &[u8],
        window: &Window,
        known: Option<Rc<Pointers>>,
    ) -> Option<u64> {
        let Some(&depth) = payload.first() else {
            self.problem(here, "an empty tree record");
            return None;
        };
        let found = if kind == RecordKind::Tree { "a tree inode" } else { "a tree patch" };
        // The position the walk reached it at, from the first claim that
        // agrees with the record's depth; the others must agree with it.
        let (mut path, mut positional) = (None, false);
        for claim in &pending.claims {
            let (claimed, at_path) = match claim.role {
                Role::Dir { .. } => (0, 0),
                Role::Inode { depth, path } | Role::Base { depth, path } => (depth, path),
                _ => {
                    self.wrong_kind(here, claim, found);
                    continue;
                }
            };
            if claimed != depth {
                self.problem(
                    here,
                    format!("{} expected ({}), found {found} of depth {depth}", claim.role.describe(), claim.referrer()),
                );
                continue;
            }
            positional |= !matches!(claim.role, Role::Base { .. });
            match path {
                None => path = Some(at_path),
                Some(first) if first != at_path => {
                    self.problem(here, format!("reached at two positions in its directory ({})", claim.referrer()))
                }
                Some(_) => {}
            }
        }
        let path = path?;
        let depth = u32::from(depth);
        if depth + 1 > MAX_DEPTH {
            self.problem(here, format!("a tree inode at depth {depth}: deeper than {MAX_DEPTH} levels"));
            return None;
        }
        debug_assert!(path >> (5 * depth) == 0, "a position holds one child index per level above its inode");
        debug_assert!(
            known.as_ref().is_none_or(|base| (base.chain == 0) == (kind == RecordKind::Tree)),
            "the pointers kept for a base are its own record's"
        );
        // The pointers the record holds itself; for a patch, its base and
        // the indices it changes.
        let (len, own, patch) = if kind == RecordKind::Tree {
            match known.clone().map_or_else(|| Pointers::of_tree(payload, here.at, depth, self.repo.read.layout).map(Rc::new), Ok)
            {
                Ok(pointers) => (pointers.len, pointers, None),
                Err(what) => {
                    self.problem(here, what);
                    return None;
                }
            }
        } else {
            match TreePatch::decode(payload, here.at, depth) {
                Ok(patch) => {
                    let changes = patch.changes.iter().filter_map(|&(i, pointer)| pointer.map(|(o, h)| (i, o, h)));
                    let own = Pointers { len: patch.len, chain: 0, children: changes.collect() };
                    let changed = patch.changes.iter().fold(0u32, |mask, (i, _)| mask | 1 << i);
                    (patch.len, Rc::new(own), Some((patch, changed)))
                }
                Err(reason) => {
                    self.problem(here, format!("damaged tree patch: {reason}"));
                    return None;
                }
            }
        };
        // Who counts each child: this inode if a claim reached it as one,
        // and the patches inheriting the index.
        let mut parents: SmallVec<[u64; 4]> = SmallVec::new();
        for &(index, offset, hash) in &own.children {
            parents.clear();
            if positional {
                parents.push(here.at);
            }
            parents.extend(pending.heirs.iter().filter(|(_, mask)| mask & (1 << index) == 0).map(|(heir, _)| *heir));
            if !parents.is_empty() {
                let role = Role::Inode { depth: depth as u8 + 1, path: path | (index as u64) << (5 * depth) };
                self.claim(offset, Claim { role, hash, by: here.at }, &parents);
            }
        }
        let pointers = match patch {
            None if positional => own,
            None => return Some(len),
            Some((patch, changed)) => {
                let role = Role::Base { depth: depth as u8, path };
                let base = self.claim(patch.base, Claim { role, hash: Hash::default(), by: here.at }, &[]);
                base.heirs.extend(pending.heirs.iter().map(|&(heir, mask)| (heir, mask | changed)));
                if !positional {
                    return Some(len);
                }
                base.heirs.push((here.at, changed));
                let resolved = match known {
                    Some(pointers) => Ok(pointers),
                    None => self
                        .pointers(patch.base, depth, window, MAX_PATCH_CHAIN - 1)
                        .and_then(|base| base.patched(&patch).map(Rc::new)),
                };
                match resolved {
                    Ok(pointers) => pointers,
                    Err(what) => {
                        self.problem(
                            here,
                            format!("cannot resolve the tree patch over its base at offset {}: {what}", patch.base),
                        );
                        return Some(len);
                    }
                }
            }
        };
        for claim in pending.claims.iter().filter(|c| matches!(c.role, Role::Dir { .. } | Role::Inode { .. })) {
            let flat = matches!(claim.role, Role::Dir { .. }) && hashed_flat(pointers.len);
            let (what, hash) = if flat {
                // Hashed flat from its entries, which its children hold.
                let entries = match collect_sorted(&pointers.inode(depth, here.at, self.repo.read.id), self.repo as &dyn Loader) {
                    Ok(entries) => entries,
                    Err(e) => {
                        self.problem(here, format!("cannot read the entries to hash it: {e}"));
                        continue;
                    }
                };
                ("the directory", self.values_hash(entries.iter().map(|(s, c)| (&s[..], c)), true))
            } else {
                let hash = pointers.inode_hash(depth, &mut self.buf);
                self.hashed_bytes += self.buf.len() as u64;
                ("the inode", hash)
            };
            self.verify(here, claim, what, hash);
        }
        let present = pointers.children.len() as u32;
        if present > 0 {
            let pending = self.counts.insert(here.at, Count { expected: len, remaining: present, sum: 0, broken: false });
            debug_assert!(pending.is_none(), "a tree inode's entry count is pending once");
        }
        Some(len)
    }

    /// The resolved pointers of the tree record at `offset`, a base read
    /// ahead of the walk (kept until the walk visits it), following at most
    /// `patches` patch records.
    fn pointers(&mut self, offset: u64, depth: u32, window: &Window, patches: u8) -> Result<Rc<Pointers>, String> {
        if let Some(pointers) = self.bases.get(&offset) {
            return Ok(pointers.clone());
        }
        let (kind, payload) = self.record_ahead(offset, window)?;
        let payload = &payload[..];
        let pointers = match kind {
            RecordKind::Tree => Pointers::of_tree(payload, offset, depth, self.repo.read.layout)?,
            RecordKind::TreePatch => {
                let Some(patches) = patches.checked_sub(1) else {
                    return Err(format!("a chain of tree patches longer than {MAX_PATCH_CHAIN}"));
                };
                let patch =
                    TreePatch::decode(payload, offset, depth).map_err(|reason| format!("damaged tree patch: {reason}"))?;
                self.pointers(patch.base, depth, window, patches)?.patched(&patch)?
            }
            other => return Err(format!("the base at offset {offset} is a {other:?} record")),
        };
        let pointers = Rc::new(pointers);
        self.bases.insert(offset, pointers.clone());
        Ok(pointers)
    }
}
