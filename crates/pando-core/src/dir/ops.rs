//! Reading and updating a directory: find, walk a path, set, remove, and
//! enumerate entries (sorted or in storage order).

use super::node::replace_body;
use super::*;
use crate::inode::index;

/// The entry `step` of the directory whose root is `root`.
pub fn find<H: Hold, R: Resolve<H> + ?Sized>(root: &Arc<Inode<H>>, step: &[u8], r: &R) -> Result<Option<Child<H>>, R::Error> {
    let mut node = root.clone();
    loop {
        let next = match &node.body {
            Body::Values(values) => return Ok(values.search(step).ok().map(|i| values.child(i).clone())),
            Body::Tree(pointers) => match pointers.get(index(pointers.depth, step)) {
                None => return Ok(None),
                Some(ptr) => load(ptr, pointers.depth + 1, r)?,
            },
        };
        node = next;
    }
}

/// Calls `f` on the entry at the end of `steps` below the entry `from`
/// (`from` itself for no step; `None` when the path holds nothing). The walk
/// follows inodes in memory by reference, touching no reference count, and
/// holds only what it has to load.
pub fn with_path<H: Hold, R: Resolve<H> + ?Sized, T>(
    from: &Child<H>,
    steps: &[&[u8]],
    r: &R,
    f: impl FnOnce(Option<&Child<H>>) -> T,
) -> Result<T, R::Error> {
    let Some((&step, rest)) = steps.split_first() else { return Ok(f(Some(from))) };
    let Child::Dir(ptr) = from else { return Ok(f(None)) };
    match H::as_mem(ptr) {
        Some(root) => path_below(root, step, rest, r, f),
        None => path_below(&*r.load(ptr, 0)?, step, rest, r, f),
    }
}

/// [`with_path`] from the entry `step` of the directory whose inode (at
/// any depth) is `node`.
fn path_below<H: Hold, R: Resolve<H> + ?Sized, T>(
    node: &Inode<H>,
    step: &[u8],
    rest: &[&[u8]],
    r: &R,
    f: impl FnOnce(Option<&Child<H>>) -> T,
) -> Result<T, R::Error> {
    match &node.body {
        Body::Values(values) => match values.search(step) {
            Ok(i) => with_path(values.child(i), rest, r, f),
            Err(_) => Ok(f(None)),
        },
        Body::Tree(pointers) => match pointers.get(index(pointers.depth, step)) {
            None => Ok(f(None)),
            Some(ptr) => match H::as_mem(ptr) {
                Some(child) => path_below(child, step, rest, r, f),
                None => path_below(&*r.load(ptr, pointers.depth + 1)?, step, rest, r, f),
            },
        },
    }
}

/// Sets `step` to `child` in the inode at `depth`, updating `node` (see
/// [`make_mut`]). Returns whether an entry was added rather than replaced.
/// On error `node` holds the same entries as before.
pub fn set<H: Hold, R: Resolve<H> + ?Sized>(
    node: &mut Arc<Inode<H>>,
    depth: u32,
    step: &[u8],
    child: Child<H>,
    r: &R,
) -> Result<bool, R::Error> {
    if let Body::Values(values) = &node.body
        && let Err(at) = values.search(step)
    {
        if values.len() < ENTRIES {
            let values = values.inserted(at, step, child);
            replace_body(node, Body::Values(values));
            return Ok(true);
        }
        // The 33rd entry: the inode becomes a tree inode.
        let mut entries: Vec<(&[u8], Child<H>)> = values.iter().map(|(s, c)| (s, c.clone())).collect();
        entries.insert(at, (step, child));
        match build(depth, entries) {
            Some(built) => *node = built,
            None => {
                return Err(r.broken(
                    node,
                    format!("more than {ENTRIES} steps colliding down to an inode deeper than {MAX_DEPTH} levels"),
                ));
            }
        }
        return Ok(true);
    }
    let inode = make_mut(node);
    match &mut inode.body {
        Body::Values(values) => {
            let i = values.search(step).expect("an absent step was inserted above");
            *values.child_mut(i) = child;
            Ok(false)
        }
        Body::Tree(pointers) => {
            assert_eq!(pointers.depth, depth, "tree inode found at the wrong depth");
            let i = index(depth, step);
            let added = match pointers.get_mut(i) {
                None => {
                    pointers.put(i, Some(H::mem(Inode::values(Values::from_sorted([(step, child)])))));
                    true
                }
                Some(ptr) => {
                    let mut current = take(ptr, depth + 1, r)?;
                    let added = set(&mut current, depth + 1, step, child, r);
                    // Put the (possibly updated) child back even on error.
                    *ptr = H::mem(current);
                    added?
                }
            };
            pointers.len += u64::from(added);
            Ok(added)
        }
    }
}

/// Removes `step` from the inode at `depth`, updating `node` like [`set`].
/// Returns whether it was present. The result may be empty. On error `node`
/// holds the same entries as before (every load happens before a change).
pub fn remove<H: Hold, R: Resolve<H> + ?Sized>(
    node: &mut Arc<Inode<H>>,
    depth: u32,
    step: &[u8],
    r: &R,
) -> Result<bool, R::Error> {
    // Look first, so that removing an absent step copies nothing.
    if find(node, step, r)?.is_none() {
        return Ok(false);
    }
    remove_present(node, depth, step, r)?;
    Ok(true)
}

/// [`remove`] of a step known to be below `node`.
fn remove_present<H: Hold, R: Resolve<H> + ?Sized>(
    node: &mut Arc<Inode<H>>,
    depth: u32,
    step: &[u8],
    r: &R,
) -> Result<(), R::Error> {
    if let Body::Values(values) = &node.body {
        let i = values.search(step).expect("found above");
        let values = values.removed(i);
        replace_body(node, Body::Values(values));
        return Ok(());
    }
    if let Body::Tree(pointers) = &node.body
        && pointers.len - 1 <= ENTRIES as u64
    {
        // Back to a values inode; loading the siblings comes first.
        let entries = collect_sorted(node, r)?;
        let values = Values::from_sorted(entries.into_iter().filter(|(s, _)| &s[..] != step));
        *node = Inode::values(values);
        return Ok(());
    }
    let inode = make_mut(node);
    let Body::Tree(pointers) = &mut inode.body else { unreachable!("a values inode was handled above") };
    let i = index(depth, step);
    let ptr = pointers.get_mut(i).expect("found above");
    let mut current = take(ptr, depth + 1, r)?;
    let removed = remove_present(&mut current, depth + 1, step, r);
    if current.is_empty() {
        pointers.put(i, None);
    } else {
        *ptr = H::mem(current);
    }
    removed?;
    pointers.len -= 1;
    Ok(())
}

/// Mutable access to the entry `step`, making the inodes on its way
/// updatable (see [`make_mut`]): the caller is about to change the entry.
pub fn find_mut<'a, H: Hold, R: Resolve<H> + ?Sized>(
    node: &'a mut Arc<Inode<H>>,
    depth: u32,
    step: &[u8],
    r: &R,
) -> Result<Option<&'a mut Child<H>>, R::Error> {
    let inode = make_mut(node);
    match &mut inode.body {
        Body::Values(values) => Ok(values.search(step).ok().map(|i| values.child_mut(i))),
        Body::Tree(pointers) => match pointers.get_mut(index(depth, step)) {
            None => Ok(None),
            Some(ptr) => {
                if H::as_mem(ptr).is_none() {
                    *ptr = H::mem(r.load(ptr, depth + 1)?);
                }
                let child = H::as_mem_mut(ptr).expect("made a memory pointer above");
                find_mut(child, depth + 1, step, r)
            }
        },
    }
}

/// What [`for_each`] calls on each entry: `false` stops the walk.
pub type Visit<'a, H, E> = dyn FnMut(&[u8], &Child<H>) -> Result<bool, E> + 'a;

/// Entries taken out of a trie, with their steps.
pub type Entries<H> = Vec<(Box<[u8]>, Child<H>)>;

/// Calls `f` on every entry below `node`, in inode order (by child index,
/// then by step). Stops early, returning `false`, when `f` does.
pub fn for_each<H: Hold, R: Resolve<H> + ?Sized>(
    node: &Inode<H>,
    r: &R,
    f: &mut Visit<'_, H, R::Error>,
) -> Result<bool, R::Error> {
    match &node.body {
        Body::Values(values) => {
            for (step, child) in values.iter() {
                if !f(step, child)? {
                    return Ok(false);
                }
            }
        }
        Body::Tree(pointers) => {
            for (_, ptr) in pointers.iter() {
                let child = load(ptr, pointers.depth + 1, r)?;
                if !for_each(&child, r, f)? {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

/// Every entry below `node`, sorted by step.
pub fn collect_sorted<H: Hold, R: Resolve<H> + ?Sized>(node: &Inode<H>, r: &R) -> Result<Entries<H>, R::Error> {
    // The length may come from disk: do not trust it for an allocation.
    let mut out = Vec::with_capacity(node.len().min(1024) as usize);
    for_each(node, r, &mut |step, child| {
        out.push((Box::from(step), child.clone()));
        Ok(true)
    })?;
    out.sort_by(|a: &(Box<[u8]>, Child<H>), b| a.0.cmp(&b.0));
    // Only damage can list an entry twice (two pointers to one child):
    // hashing such a list would break the encoders' invariant.
    if let Some(pair) = out.windows(2).find(|pair| pair[0].0 == pair[1].0) {
        let step = String::from_utf8_lossy(&pair[0].0);
        return Err(r.broken(node, format!("two of its children hold the entry {step:?}")));
    }
    Ok(out)
}

/// Up to `length` entries in inode order, after skipping `offset` of them.
/// Whole subtrees are skipped by their length.
pub fn list<H: Hold, R: Resolve<H> + ?Sized>(
    node: &Inode<H>,
    mut offset: u64,
    length: u64,
    r: &R,
) -> Result<Entries<H>, R::Error> {
    let mut remaining = length;
    let mut out = Vec::new();
    list_into(node, &mut offset, &mut remaining, r, &mut out)?;
    Ok(out)
}

fn list_into<H: Hold, R: Resolve<H> + ?Sized>(
    node: &Inode<H>,
    offset: &mut u64,
    remaining: &mut u64,
    r: &R,
    out: &mut Entries<H>,
) -> Result<(), R::Error> {
    match &node.body {
        Body::Values(values) => {
            for (step, child) in values.iter() {
                if *remaining == 0 {
                    return Ok(());
                }
                if *offset > 0 {
                    *offset -= 1;
                    continue;
                }
                out.push((Box::from(step), child.clone()));
                *remaining -= 1;
            }
        }
        Body::Tree(pointers) => {
            for (_, ptr) in pointers.iter() {
                if *remaining == 0 {
                    return Ok(());
                }
                let child = load(ptr, pointers.depth + 1, r)?;
                if *offset >= child.len() {
                    *offset -= child.len();
                    continue;
                }
                list_into(&child, offset, remaining, r, out)?;
            }
        }
    }
    Ok(())
}
