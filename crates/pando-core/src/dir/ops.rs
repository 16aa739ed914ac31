//! Reading and updating a directory: find, set, remove, enumerate entries
//! (sorted or in storage order), and descend or update a path of directories
//! (one implementation for the store's trees and the proofs' partial trees).

use super::node::{cleared, replace_body, updatable};
use super::*;

/// The entry `step` of the directory whose root is `root`.
pub fn find<H: Hold, R: Resolve<H> + ?Sized>(root: &Arc<Inode<H>>, step: &[u8], r: &R) -> Result<Option<Child<H>>, R::Error> {
    with_step(root, step, r, |child| child.cloned())
}

/// Calls `f` on the entry `step` below `node` (an inode of a directory at
/// any depth), descending as [`with_path`] does.
fn with_step<H: Hold, R: Resolve<H> + ?Sized, T>(
    node: &Inode<H>,
    step: &[u8],
    r: &R,
    f: impl FnOnce(Option<&Child<H>>) -> T,
) -> Result<T, R::Error> {
    path_below(node, step, &[step], 0, None, (&r, r.layout()), &|_| r, |reached| f(reached.entry()))
}

/// Where a descent down a path stopped ([`with_path_reached`]).
pub enum Reached<'a, H: Hold> {
    /// The entry at the end of the path.
    Entry(&'a Child<H>),
    /// Nothing: a directory on the way has no entry for the next step.
    Absent,
    /// A contents the first `n` steps lead to (`n` short of the path's end).
    Contents(usize, &'a Child<H>),
}

impl<'a, H: Hold> Reached<'a, H> {
    /// The entry at the end of the path, if there is one.
    pub fn entry(self) -> Option<&'a Child<H>> {
        match self {
            Reached::Entry(child) => Some(child),
            Reached::Absent | Reached::Contents(..) => None,
        }
    }
}

/// Calls `f` on the entry at the end of `steps` below the entry `from`
/// (`from` itself for no step; `None` when the path holds nothing). The descent
/// follows inodes in memory by reference, touching no reference count, and
/// holds only what it has to load. `at(n)` is the resolver for the
/// directory the first `n` steps lead to (one that names paths in its
/// errors names that one; most resolvers ignore `n`), all of the layout
/// `at(0)` names, asked once.
pub fn with_path<H: Hold, R: Resolve<H>, T>(
    from: &Child<H>,
    steps: &[&[u8]],
    at: &impl Fn(usize) -> R,
    f: impl FnOnce(Option<&Child<H>>) -> T,
) -> Result<T, R::Error> {
    descend(from, steps, 0, None, (at, at(0).layout()), |reached| f(reached.entry()))
}

/// [`with_path`], telling `f` where the descent stopped: at the entry, at a
/// directory without the next step, or at a contents on the way.
pub fn with_path_reached<H: Hold, R: Resolve<H>, T>(
    from: &Child<H>,
    steps: &[&[u8]],
    at: &impl Fn(usize) -> R,
    f: impl FnOnce(Reached<'_, H>) -> T,
) -> Result<T, R::Error> {
    descend(from, steps, 0, None, (at, at(0).layout()), f)
}

/// [`with_path`] from the entry the first `n` of `steps` lead to; `known`
/// is the next step's index in that directory's root if a prefetch
/// computed it (see [`path_below`]).
fn descend<H: Hold, R: Resolve<H>, T>(
    from: &Child<H>,
    steps: &[&[u8]],
    n: usize,
    known: Option<usize>,
    (at, layout): (&impl Fn(usize) -> R, Layout),
    f: impl FnOnce(Reached<'_, H>) -> T,
) -> Result<T, R::Error> {
    let Some(&step) = steps.get(n) else { return Ok(f(Reached::Entry(from))) };
    let Child::Dir(ptr) = from else { return Ok(f(Reached::Contents(n, from))) };
    let r = at(n);
    match H::as_mem(ptr) {
        Some(root) => path_below(root, step, steps, n, known, (&r, layout), at, f),
        None => path_below(&*r.load(ptr, 0)?, step, steps, n, None, (&r, layout), at, f),
    }
}

/// [`descend`] from the entry `step` (the `n`th of `steps`) of the
/// directory whose inode (at any depth) is `node`; `r` is `at(n)`, `known`
/// `step`'s index in `node` if a search above computed it. The inode below
/// in memory is asked for with what its pointer's [`hint`] names of it
/// ([`prefetch_hint`]), as an update does (see [`place`]): the two misses
/// overlap, and the index the hint's prefetch computed is passed down.
#[expect(clippy::too_many_arguments, reason = "one descent's state, passed down a recursion")]
fn path_below<H: Hold, R: Resolve<H>, T>(
    node: &Inode<H>,
    step: &[u8],
    steps: &[&[u8]],
    n: usize,
    known: Option<usize>,
    (r, layout): (&R, Layout),
    at: &impl Fn(usize) -> R,
    f: impl FnOnce(Reached<'_, H>) -> T,
) -> Result<T, R::Error> {
    match &node.body {
        Body::Values(values) => match values.search(step) {
            Ok(i) => {
                let child = values.child(i);
                let mut below = None;
                // Only a directory the path goes on into: the entry at its
                // end is returned, not searched.
                if let (Child::Dir(ptr), Some(&next)) = (child, steps.get(n + 1))
                    && H::as_mem(ptr).is_some()
                {
                    below = prefetch_hint::<H>(H::hint(ptr), 0, Some(next));
                }
                descend(child, steps, n + 1, below, (at, layout), f)
            }
            Err(_) => Ok(f(Reached::Absent)),
        },
        Body::Tree(pointers) => {
            debug_assert!(known.is_none_or(|i| i == layout.index(pointers.depth, step)), "the index known above is the step's");
            match pointers.get(known.unwrap_or_else(|| layout.index(pointers.depth, step))) {
                None => Ok(f(Reached::Absent)),
                Some(ptr) => match H::as_mem(ptr) {
                    Some(child) => {
                        let below = prefetch_hint::<H>(H::hint(ptr), pointers.depth + 1, Some(step));
                        path_below(child, step, steps, n, below, (r, layout), at, f)
                    }
                    None => path_below(&*r.load(ptr, pointers.depth + 1)?, step, steps, n, None, (r, layout), at, f),
                },
            }
        }
    }
}

/// Sets the entry at `steps` (not empty) below the directory whose root
/// is `root` to `new`, or removes it (`None`): contents met on the way are
/// replaced by directories, and directories the removal leaves empty are
/// removed. `at(n)` is the resolver for the directory the first `n` steps
/// lead to, as for [`with_path`]. Inodes only this tree holds change in
/// place, shared ones are copied (see [`make_mut`]). Returns whether the
/// trie changed: removing what is not there touches (and copies) nothing.
/// What the update replaced goes into `replaced`, if given (its undo).
/// On error `root` still holds a consistent trie (each directory on the
/// path is put back), not necessarily the one before.
pub fn update_path<H: Hold, R: Resolve<H>>(
    root: &mut Arc<Inode<H>>,
    steps: &[&[u8]],
    new: Option<Child<H>>,
    at: &impl Fn(usize) -> R,
    replaced: Option<&mut Replaced<H>>,
) -> Result<bool, R::Error> {
    let mut replaced = replaced.map(|replaced| {
        *replaced = Replaced { depth: steps.len(), old: None };
        replaced
    });
    // One layout for every directory of the path, asked once.
    let layout = at(0).layout();
    if new.is_none() {
        // A removal's entry is cloned only for a caller that keeps it.
        let wanted = replaced.is_some();
        let found = path_below(root, steps[0], steps, 0, None, (&at(0), layout), at, |reached| {
            reached.entry().map(|old| if wanted { Some(old.clone()) } else { None })
        })?;
        let Some(old) = found else { return Ok(false) };
        if let Some(replaced) = replaced.as_deref_mut() {
            replaced.old = old;
        }
    }
    update_below(root, steps, 0, new, (at, layout), replaced)?;
    Ok(true)
}

/// What an update of a path replaced ([`update_path`]): putting `old`
/// back at the first `depth` steps of the path (removing what is there
/// for `None`) undoes it.
pub struct Replaced<H: Hold> {
    /// The path's length, or fewer steps: where a contents on the way
    /// was replaced by a directory.
    pub depth: usize,
    /// The entry there before the update, if any.
    pub old: Option<Child<H>>,
}

/// [`update_path`] in the directory the first `n` of `steps` lead to;
/// a removal's path holds something (what, the caller notes in
/// `replaced`).
fn update_below<H: Hold, R: Resolve<H>>(
    root: &mut Arc<Inode<H>>,
    steps: &[&[u8]],
    n: usize,
    new: Option<Child<H>>,
    (at, layout): (&impl Fn(usize) -> R, Layout),
    mut replaced: Option<&mut Replaced<H>>,
) -> Result<(), R::Error> {
    let step = steps[n];
    let r = at(n);
    if n + 1 == steps.len() {
        match new {
            Some(child) => {
                set_at(root, 0, step, None, child, (&r, layout), replaced.map(|replaced| &mut replaced.old))?;
            }
            None => remove_present(root, 0, step, (&r, layout))?,
        }
        return Ok(());
    }
    let emptied = match find_mut_at(root, 0, step, None, (&r, layout))? {
        Some(Child::Dir(ptr)) => {
            let sub = mem_mut(ptr, 0, &at(n + 1))?;
            update_below(sub, steps, n + 1, new, (at, layout), replaced)?;
            let emptied = sub.is_empty();
            H::refresh_hint(ptr);
            emptied
        }
        // A contents on the way, or nothing: a new directory goes there.
        _ => {
            let mut sub = H::empty();
            update_below(&mut sub, steps, n + 1, new, (at, layout), replaced.as_deref_mut())?;
            if !sub.is_empty() {
                let mut contents = None;
                set_at(root, 0, step, None, Child::Dir(H::mem(sub)), (&r, layout), Some(&mut contents))?;
                if let (Some(replaced), Some(contents)) = (replaced, contents) {
                    *replaced = Replaced { depth: n + 1, old: Some(contents) };
                }
            }
            false
        }
    };
    if emptied {
        remove_present(root, 0, step, (&r, layout))?;
    }
    Ok(())
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
    set_at(node, depth, step, None, child, (r, r.layout()), None)
}

/// [`set`], with `step`'s index at `depth` if known ([`place`]'s `below`);
/// an entry replaced is moved into `old` if given (else dropped where it
/// was).
#[expect(unsafe_code, reason = "calls `cleared` on an inode `updatable` allowed")]
fn set_at<H: Hold, R: Resolve<H> + ?Sized>(
    node: &mut Arc<Inode<H>>,
    depth: u32,
    step: &[u8],
    known: Option<usize>,
    child: Child<H>,
    (r, layout): (&R, Layout),
    old: Option<&mut Option<Child<H>>>,
) -> Result<bool, R::Error> {
    let (place, below) = place(layout, node, depth, step, known);
    match place {
        // A new entry of a values inode with room: in place when the inode
        // is only this tree's (its children move), on a copy otherwise.
        Place::Gap(at) if node.len() < layout.entries as u64 => {
            let inode = if updatable(node) {
                // SAFETY: updatable, and not cloned since.
                let inode = unsafe { cleared(node) };
                let Body::Values(values) = &mut inode.body else { unreachable!("a values inode") };
                values.insert(at, step, child);
                inode
            } else {
                let Body::Values(values) = &node.body else { unreachable!("a values inode") };
                let values = values.inserted(at, step, child);
                replace_body(node, Body::Values(values))
            };
            H::changing(Change::Values { meta: &mut inode.meta, change: ValuesChange::Inserted(at) });
            Ok(true)
        }
        // The 33rd entry (the 3rd in the binary layout): the inode
        // becomes a tree inode.
        Place::Gap(at) => {
            let Body::Values(values) = &node.body else { unreachable!("a values inode") };
            let mut entries: Vec<(&[u8], Child<H>)> = values.iter().map(|(s, c)| (s, c.clone())).collect();
            entries.insert(at, (step, child));
            match build(layout, depth, entries) {
                Some(built) => *node = built,
                None => {
                    let (entries, max_depth) = (layout.entries, layout.max_depth);
                    return Err(r.broken(
                        node,
                        format!("more than {entries} steps colliding down to an inode deeper than {max_depth} levels"),
                    ));
                }
            }
            Ok(true)
        }
        Place::Entry(i) => {
            let inode = make_mut(node);
            let Body::Values(values) = &mut inode.body else { unreachable!("a values inode") };
            match old {
                Some(old) => *old = Some(std::mem::replace(values.child_mut(i), child)),
                None => *values.child_mut(i) = child,
            }
            H::changing(Change::Values { meta: &mut inode.meta, change: ValuesChange::Replaced(i) });
            Ok(false)
        }
        Place::Child(i) => {
            let Body::Tree(pointers) = &mut make_mut(node).body else { unreachable!("a tree inode") };
            assert_eq!(pointers.depth, depth, "tree inode found at the wrong depth");
            let added = match pointers.get_mut(i) {
                None => {
                    pointers.put(i, Some(H::mem(Inode::values(Values::from_sorted([(step, child)])))));
                    true
                }
                Some(ptr) => {
                    let added = set_at(mem_mut(ptr, depth + 1, r)?, depth + 1, step, below, child, (r, layout), old)?;
                    H::refresh_hint(ptr);
                    added
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
    if !with_step(node, step, r, |child| child.is_some())? {
        return Ok(false);
    }
    remove_present(node, depth, step, (r, r.layout()))?;
    Ok(true)
}

/// [`remove`] of a step known to be below `node`.
fn remove_present<H: Hold, R: Resolve<H> + ?Sized>(
    node: &mut Arc<Inode<H>>,
    depth: u32,
    step: &[u8],
    (r, layout): (&R, Layout),
) -> Result<(), R::Error> {
    if let Body::Values(values) = &node.body {
        let i = values.search(step).expect("found above");
        let values = values.removed(i);
        let meta = &mut replace_body(node, Body::Values(values)).meta;
        H::changing(Change::Values { meta, change: ValuesChange::Removed(i) });
        return Ok(());
    }
    if let Body::Tree(pointers) = &node.body
        && pointers.len - 1 <= layout.entries as u64
    {
        // Back to a values inode; loading the siblings comes first.
        let entries = collect_sorted(node, r)?;
        let values = Values::from_sorted(entries.into_iter().filter(|(s, _)| &s[..] != step));
        *node = Inode::values(values);
        return Ok(());
    }
    let inode = make_mut(node);
    let Body::Tree(pointers) = &mut inode.body else { unreachable!("a values inode was handled above") };
    let i = layout.index(depth, step);
    let current = mem_mut(pointers.get_mut(i).expect("found above"), depth + 1, r)?;
    remove_present(current, depth + 1, step, (r, layout))?;
    if current.is_empty() {
        pointers.put(i, None);
    } else if let Some(ptr) = pointers.get_mut(i) {
        H::refresh_hint(ptr);
    }
    pointers.len -= 1;
    Ok(())
}

/// Mutable access to the entry `step`, making the inodes on its way
/// updatable (see [`make_mut`]): the caller is about to change the entry
/// (its holder marks it changed, [`Change::Values`]).
pub fn find_mut<'a, H: Hold, R: Resolve<H> + ?Sized>(
    node: &'a mut Arc<Inode<H>>,
    depth: u32,
    step: &[u8],
    r: &R,
) -> Result<Option<&'a mut Child<H>>, R::Error> {
    find_mut_at(node, depth, step, None, (r, r.layout()))
}

/// [`find_mut`], with `step`'s index at `depth` if known ([`place`]'s
/// `below`).
fn find_mut_at<'a, H: Hold, R: Resolve<H> + ?Sized>(
    node: &'a mut Arc<Inode<H>>,
    depth: u32,
    step: &[u8],
    known: Option<usize>,
    (r, layout): (&R, Layout),
) -> Result<Option<&'a mut Child<H>>, R::Error> {
    let (place, below) = place(layout, node, depth, step, known);
    let inode = make_mut(node);
    match (place, &mut inode.body) {
        (Place::Entry(i), Body::Values(values)) => {
            H::changing(Change::Values { meta: &mut inode.meta, change: ValuesChange::Replaced(i) });
            Ok(Some(values.child_mut(i)))
        }
        (Place::Gap(_), _) => Ok(None),
        (Place::Child(i), Body::Tree(pointers)) => match pointers.get_mut(i) {
            None => Ok(None),
            Some(ptr) => {
                if H::as_mem(ptr).is_none() {
                    *ptr = H::mem(r.load(ptr, depth + 1)?);
                }
                let child = H::as_mem_mut(ptr).expect("made a memory pointer above");
                find_mut_at(child, depth + 1, step, below, (r, layout))
            }
        },
        _ => unreachable!("an inode made updatable holds the same entries"),
    }
}

/// Where a step is in an inode: its entry, or where it would go, in a
/// values inode; its child's index in a tree inode.
#[derive(Clone, Copy)]
enum Place {
    Entry(usize),
    Gap(usize),
    Child(usize),
}

/// Where `step` is in `node`, an inode at `depth`, found before the update
/// makes the inode updatable (thaws or copies it, the same entries either
/// way); `known` is `step`'s index at `depth` if a search above computed
/// it. The inode below, when in memory, is asked for meanwhile, with
/// what the pointer's [`hint`] names of it ([`prefetch_hint`]): their cache
/// misses overlap that work and each other. Also returns `step`'s index at
/// `depth + 1` when the hint's prefetch computed it: the search of the
/// tree inode below takes it (an OCaml hash of the step is a tenth of
/// an update's work).
fn place<H: Hold>(layout: Layout, node: &Inode<H>, depth: u32, step: &[u8], known: Option<usize>) -> (Place, Option<usize>) {
    match &node.body {
        Body::Values(values) => match values.search(step) {
            Ok(i) => {
                if let Child::Dir(ptr) = values.child(i)
                    && let Some(below) = H::as_mem(ptr)
                {
                    prefetch_arc(below);
                    prefetch_hint::<H>(H::hint(ptr), 0, None);
                }
                (Place::Entry(i), None)
            }
            Err(at) => (Place::Gap(at), None),
        },
        Body::Tree(pointers) => {
            debug_assert!(known.is_none_or(|i| i == layout.index(depth, step)), "the index known above is the step's");
            let i = known.unwrap_or_else(|| layout.index(depth, step));
            let mut below = None;
            if let Some(ptr) = pointers.get(i)
                && let Some(inode) = H::as_mem(ptr)
            {
                prefetch_arc(inode);
                below = prefetch_hint::<H>(H::hint(ptr), depth + 1, Some(step));
            }
            (Place::Child(i), below)
        }
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
