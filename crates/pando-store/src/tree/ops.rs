//! Persistent operations on a directory's inode trie: find, set, remove,
//! enumerate. Every update copies only the inodes on the path to the entry
//! (at most 32 entries or pointers each) and shares the rest.
//!
//! Invariant: the result of any sequence of `set` and `remove` has exactly
//! the layout [`build`] gives for the same set of entries (a `Tree` inode iff
//! more than 32 entries below it), so the hash depends only on the entries.

use pando_core::inode::{ENTRIES, index};
use std::sync::Arc;

use super::node::{Body, Child, Inode, Loader, Ptr, Step, load};
use crate::error::{Error, Result};

/// Builds the canonical trie at `depth` for entries sorted by step.
pub fn build(depth: u32, entries: Vec<(Step, Child)>) -> Arc<Inode> {
    if entries.len() <= ENTRIES {
        return Inode::values(entries);
    }
    let len = entries.len() as u64;
    let mut buckets: Vec<Vec<(Step, Child)>> = (0..ENTRIES).map(|_| Vec::new()).collect();
    for (step, child) in entries {
        buckets[index(depth, &step)].push((step, child));
    }
    let mut children: Box<[Option<Ptr>; ENTRIES]> = Box::new(std::array::from_fn(|_| None));
    for (i, bucket) in buckets.into_iter().enumerate() {
        if !bucket.is_empty() {
            children[i] = Some(Ptr::Mem(build(depth + 1, bucket)));
        }
    }
    Arc::new(Inode::new(Body::Tree { depth, len, children }))
}

/// Finds the entry `step` in the directory rooted at `root`.
pub fn find(root: &Arc<Inode>, step: &[u8], loader: &dyn Loader) -> Result<Option<Child>> {
    let mut node = root.clone();
    loop {
        let next = match &node.body {
            Body::Values(entries) => {
                return Ok(entries.binary_search_by(|(s, _)| s[..].cmp(step)).ok().map(|i| entries[i].1.clone()));
            }
            Body::Tree { depth, children, .. } => match &children[index(*depth, step)] {
                None => return Ok(None),
                Some(ptr) => load(ptr, depth + 1, loader)?,
            },
        };
        node = next;
    }
}

/// Sets `step` to `child` in the inode at `depth`, updating `node` (in
/// place where it is not shared, see [`Inode::make_mut`]). Returns whether
/// an entry was added rather than replaced.
pub fn set(node: &mut Arc<Inode>, depth: u32, step: &[u8], child: Child, loader: &dyn Loader) -> Result<bool> {
    let inode = Inode::make_mut(node);
    match &mut inode.body {
        Body::Values(entries) => {
            let added = match entries.binary_search_by(|(s, _)| s[..].cmp(step)) {
                Ok(i) => {
                    entries[i].1 = child;
                    false
                }
                Err(i) => {
                    entries.insert(i, (Step::from(step), child));
                    true
                }
            };
            if entries.len() > ENTRIES {
                *node = build(depth, std::mem::take(entries));
            }
            Ok(added)
        }
        Body::Tree { depth: tree_depth, len, children } => {
            assert_eq!(*tree_depth, depth, "tree inode found at the wrong depth");
            let slot = &mut children[index(depth, step)];
            let added = match slot {
                None => {
                    *slot = Some(Ptr::Mem(Inode::values(vec![(Step::from(step), child)])));
                    true
                }
                Some(ptr) => {
                    let mut current = match ptr {
                        Ptr::Mem(inode) => std::mem::replace(inode, Inode::empty()),
                        Ptr::Stored { .. } => load(ptr, depth + 1, loader)?,
                    };
                    let added = set(&mut current, depth + 1, step, child, loader);
                    // Put the (possibly updated) child back even on error.
                    *ptr = Ptr::Mem(current);
                    added?
                }
            };
            *len += u64::from(added);
            Ok(added)
        }
    }
}

/// Removes `step` from the inode at `depth`, updating `node` like [`set`].
/// Returns whether it was present. The result may be empty; the caller
/// removes empty directories. On error `node` holds the same entries as
/// before (every load happens before the change), as with [`set`].
pub fn remove(node: &mut Arc<Inode>, depth: u32, step: &[u8], loader: &dyn Loader) -> Result<bool> {
    // Look first, so that removing an absent step copies nothing.
    if !contains(node, step, loader)? {
        return Ok(false);
    }
    if let Body::Tree { len, .. } = &node.body
        && len - 1 <= ENTRIES as u64
    {
        // Back to a value inode. Everything that can fail (loading the
        // siblings) happens before anything changes.
        let mut entries = collect_sorted(node, loader)?;
        let i = entries.binary_search_by(|(s, _)| s[..].cmp(step)).expect("contains checked");
        entries.remove(i);
        *node = Inode::values(entries);
        return Ok(true);
    }
    let inode = Inode::make_mut(node);
    match &mut inode.body {
        Body::Values(entries) => {
            let i = entries.binary_search_by(|(s, _)| s[..].cmp(step)).expect("contains checked");
            entries.remove(i);
        }
        Body::Tree { len, children, .. } => {
            let slot = &mut children[index(depth, step)];
            let ptr = slot.as_mut().expect("contains checked");
            let mut current = match ptr {
                Ptr::Mem(inode) => std::mem::replace(inode, Inode::empty()),
                Ptr::Stored { .. } => load(ptr, depth + 1, loader)?,
            };
            let removed = remove(&mut current, depth + 1, step, loader);
            *slot = if current.is_empty() { None } else { Some(Ptr::Mem(current)) };
            removed?;
            *len -= 1;
        }
    }
    Ok(true)
}

fn contains(node: &Arc<Inode>, step: &[u8], loader: &dyn Loader) -> Result<bool> {
    Ok(find(node, step, loader)?.is_some())
}

/// Mutable access to the entry `step`, making the inodes on its way
/// updatable (see [`Inode::make_mut`]). The caller is about to change the
/// entry: hashes memoised on the way are cleared.
pub fn find_mut<'a>(node: &'a mut Arc<Inode>, depth: u32, step: &[u8], loader: &dyn Loader) -> Result<Option<&'a mut Child>> {
    let inode = Inode::make_mut(node);
    match &mut inode.body {
        Body::Values(entries) => Ok(match entries.binary_search_by(|(s, _)| s[..].cmp(step)) {
            Ok(i) => Some(&mut entries[i].1),
            Err(_) => None,
        }),
        Body::Tree { children, .. } => match &mut children[index(depth, step)] {
            None => Ok(None),
            Some(ptr) => {
                if let Ptr::Stored { .. } = ptr {
                    *ptr = Ptr::Mem(load(ptr, depth + 1, loader)?);
                }
                let Ptr::Mem(child) = ptr else { unreachable!("made a memory pointer above") };
                find_mut(child, depth + 1, step, loader)
            }
        },
    }
}

/// Calls `f` on every entry below `node`, in inode order (by child index,
/// then by step). Stops early when `f` returns `false`.
pub fn for_each(node: &Inode, loader: &dyn Loader, f: &mut dyn FnMut(&Step, &Child) -> Result<bool>) -> Result<bool> {
    match &node.body {
        Body::Values(entries) => {
            for (step, child) in entries {
                if !f(step, child)? {
                    return Ok(false);
                }
            }
        }
        Body::Tree { depth, children, .. } => {
            for ptr in children.iter().flatten() {
                let child = load(ptr, depth + 1, loader)?;
                if !for_each(&child, loader, f)? {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

/// Every entry below `node`, sorted by step.
pub fn collect_sorted(node: &Inode, loader: &dyn Loader) -> Result<Vec<(Step, Child)>> {
    // The length comes from disk: do not trust it for an allocation.
    let mut out = Vec::with_capacity(node.len().min(1024) as usize);
    for_each(node, loader, &mut |step, child| {
        out.push((step.clone(), child.clone()));
        Ok(true)
    })?;
    out.sort_by(|a, b| a.0.cmp(&b.0));
    // Only damage on disk can list an entry twice (two pointers to one
    // child): hashing such a list would break the encoders' invariant.
    if let Some(pair) = out.windows(2).find(|pair| pair[0].0 == pair[1].0) {
        let offset = node.stored_at().unwrap_or(0);
        let step = String::from_utf8_lossy(&pair[0].0);
        return Err(Error::corrupt("pack", offset, format!("two of its children hold the entry {step:?}")));
    }
    Ok(out)
}

/// Up to `length` entries in inode order, after skipping `offset` of them.
/// Whole subtrees are skipped by their length.
pub fn list(node: &Inode, mut offset: u64, length: u64, loader: &dyn Loader) -> Result<Vec<(Step, Child)>> {
    fn walk(
        node: &Inode,
        offset: &mut u64,
        remaining: &mut u64,
        loader: &dyn Loader,
        out: &mut Vec<(Step, Child)>,
    ) -> Result<()> {
        match &node.body {
            Body::Values(entries) => {
                for (step, child) in entries {
                    if *remaining == 0 {
                        return Ok(());
                    }
                    if *offset > 0 {
                        *offset -= 1;
                        continue;
                    }
                    out.push((step.clone(), child.clone()));
                    *remaining -= 1;
                }
            }
            Body::Tree { depth, children, .. } => {
                for ptr in children.iter().flatten() {
                    if *remaining == 0 {
                        return Ok(());
                    }
                    let child = load(ptr, depth + 1, loader)?;
                    if *offset >= child.len() {
                        *offset -= child.len();
                        continue;
                    }
                    walk(&child, offset, remaining, loader, out)?;
                }
            }
        }
        Ok(())
    }
    let mut remaining = length;
    let mut out = Vec::new();
    walk(node, &mut offset, &mut remaining, loader, &mut out)?;
    Ok(out)
}
