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
use crate::error::Result;

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

/// Sets `step` to `child` in the inode at `depth`. Returns the new inode and
/// whether an entry was added (rather than replaced).
pub fn set(node: &Inode, depth: u32, step: &Step, child: Child, loader: &dyn Loader) -> Result<(Arc<Inode>, bool)> {
    match &node.body {
        Body::Values(entries) => {
            let mut entries = entries.clone();
            let added = match entries.binary_search_by(|(s, _)| s[..].cmp(step)) {
                Ok(i) => {
                    entries[i].1 = child;
                    false
                }
                Err(i) => {
                    entries.insert(i, (step.clone(), child));
                    true
                }
            };
            Ok((build(depth, entries), added))
        }
        Body::Tree { depth: tree_depth, len, children } => {
            assert_eq!(*tree_depth, depth, "tree inode found at the wrong depth");
            let i = index(depth, step);
            let (new_child, added) = match &children[i] {
                None => (Inode::values(vec![(step.clone(), child)]), true),
                Some(ptr) => {
                    let current = load(ptr, depth + 1, loader)?;
                    set(&current, depth + 1, step, child, loader)?
                }
            };
            let mut children = children.clone();
            children[i] = Some(Ptr::Mem(new_child));
            let len = len + u64::from(added);
            Ok((Arc::new(Inode::new(Body::Tree { depth, len, children })), added))
        }
    }
}

/// Removes `step` from the inode at `depth`. `None` when it was absent.
/// The result may be empty; the caller removes empty directories.
pub fn remove(node: &Inode, depth: u32, step: &[u8], loader: &dyn Loader) -> Result<Option<Arc<Inode>>> {
    match &node.body {
        Body::Values(entries) => match entries.binary_search_by(|(s, _)| s[..].cmp(step)) {
            Err(_) => Ok(None),
            Ok(i) => {
                let mut entries = entries.clone();
                entries.remove(i);
                Ok(Some(Inode::values(entries)))
            }
        },
        Body::Tree { len, children, .. } => {
            let i = index(depth, step);
            let Some(ptr) = &children[i] else { return Ok(None) };
            let current = load(ptr, depth + 1, loader)?;
            let Some(new_child) = remove(&current, depth + 1, step, loader)? else { return Ok(None) };
            let mut children = children.clone();
            children[i] = if new_child.is_empty() { None } else { Some(Ptr::Mem(new_child)) };
            let len = len - 1;
            let tree = Inode::new(Body::Tree { depth, len, children });
            if len as usize <= ENTRIES {
                // Back to a value inode: gather what is left.
                return Ok(Some(Inode::values(collect_sorted(&tree, loader)?)));
            }
            Ok(Some(Arc::new(tree)))
        }
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
    let mut out = Vec::with_capacity(node.len() as usize);
    for_each(node, loader, &mut |step, child| {
        out.push((step.clone(), child.clone()));
        Ok(true)
    })?;
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Up to `length` entries in inode order, after skipping `offset` of them.
/// Whole subtrees are skipped by their length.
pub fn list(node: &Inode, mut offset: u64, length: u64, loader: &dyn Loader) -> Result<Vec<(Step, Child)>> {
    fn walk(node: &Inode, offset: &mut u64, remaining: &mut u64, loader: &dyn Loader, out: &mut Vec<(Step, Child)>) -> Result<()> {
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
