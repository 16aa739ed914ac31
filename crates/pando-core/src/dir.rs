//! The directory trie, once for every tree of pando: the store's trees
//! (`pando_store::tree::node`) and the partial trees of proofs
//! ([`crate::proof::partial`]); snapshot import and the integrity check
//! stream records and share its hashing rule and depth bound. It builds, finds, sets,
//! removes and enumerates entries, and hashes a directory by the one Tezos
//! rule: the flat node encoding up to [`STABLE_HASH`] entries, the inode
//! encoding above.
//!
//! A directory is the Tezos inode trie (see [`crate::inode`]): a values
//! inode holds at most 32 entries sorted by step; a tree inode at depth `d`
//! spreads more than 32 entries over 32 children by `index(d, step)`. The
//! layout is a function of the set of entries, so one shape serves memory,
//! disk and hash.
//!
//! Nodes are compact: a values inode keeps its steps in one buffer and its
//! children inline beside each step's end; a tree inode keeps only the
//! children it has, found by a bitmap. Nothing per pointer is locked.
//!
//! What children are is the holder's choice ([`Hold`]): a store holds
//! pointers that are in memory or on disk and contents that are values or
//! blobs; loading what a pointer names is the [`Resolve`]r's job. The trie
//! itself does no I/O and no locking.
//!
//! Invariants:
//! - Any sequence of [`set`] and [`remove`] yields exactly the layout
//!   [`build`] gives for the same set of entries (a tree inode iff more than
//!   32 entries below it), so the hash depends only on the entries.
//! - No inode lies deeper than [`MAX_DEPTH`]; an update that would go
//!   deeper fails (only steps chosen on purpose to collide get there).
//! - Updates copy the inodes on one path, or change them in place when the
//!   holder says nobody else can see them ([`make_mut`]); every other inode
//!   is shared. Memoised hashes are cleared by any change.

use std::sync::{Arc, OnceLock};

use crate::hash::Hash;
pub use crate::inode::{ENTRIES, STABLE_HASH, hashed_flat};
use crate::inode::{encode_tree, encode_values, index};
use crate::tezos::{Kind, encode_node};

/// The deepest inode (the root is at depth 0): deeper than any directory
/// not built of steps chosen to collide (a billion entries need depth 5).
/// Updates, snapshot import, proofs and the integrity check share it.
pub const MAX_DEPTH: u32 = 12;

/// How a trie holds its children.
pub trait Hold: Sized {
    /// A contents entry.
    type Leaf: Clone;
    /// A pointer to an inode: a directory's root (depth 0) or an inode below.
    type Ptr: Clone;
    /// What the holder keeps beside each inode.
    type Meta: Default;

    /// A pointer to an inode in memory.
    fn mem(inode: Arc<Inode<Self>>) -> Self::Ptr;
    /// The inode, when the pointer holds it in memory.
    fn as_mem(ptr: &Self::Ptr) -> Option<&Arc<Inode<Self>>>;
    /// The same, for updating it.
    fn as_mem_mut(ptr: &mut Self::Ptr) -> Option<&mut Arc<Inode<Self>>>;
    /// The hash the pointer carries, if it carries one: the directory hash
    /// for a root, the inode hash below.
    fn known_hash(ptr: &Self::Ptr) -> Option<Hash>;
    /// A shared empty values inode (cloning it allocates nothing).
    fn empty() -> Arc<Inode<Self>>;
    /// Whether the inode must never change in place (written somewhere).
    fn frozen(_inode: &Inode<Self>) -> bool {
        false
    }
    /// What a copy of `from`, about to be changed, keeps beside it.
    fn derive(_from: &Arc<Inode<Self>>) -> Self::Meta {
        Self::Meta::default()
    }
}

/// Loads what pointers name and hashes what leaves hold.
pub trait Resolve<H: Hold> {
    type Error;
    /// The inode a pointer that is not in memory names, at `depth`.
    fn load(&self, ptr: &H::Ptr, depth: u32) -> Result<Arc<Inode<H>>, Self::Error>;
    /// The hash of a contents.
    fn leaf_hash(&self, leaf: &H::Leaf) -> Result<Hash, Self::Error>;
    /// The error for a trie that breaks a rule: two children holding one
    /// step (only damage can do that), or an inode deeper than [`MAX_DEPTH`].
    fn broken(&self, inode: &Inode<H>, reason: String) -> Self::Error;
}

/// What a directory entry is.
pub enum Child<H: Hold> {
    Contents(H::Leaf),
    /// A directory, by a pointer to its root inode.
    Dir(H::Ptr),
}

impl<H: Hold> Clone for Child<H> {
    fn clone(&self) -> Self {
        match self {
            Child::Contents(leaf) => Child::Contents(leaf.clone()),
            Child::Dir(ptr) => Child::Dir(ptr.clone()),
        }
    }
}

impl<H: Hold> Child<H> {
    pub fn kind(&self) -> Kind {
        match self {
            Child::Contents(_) => Kind::Contents,
            Child::Dir(_) => Kind::Dir,
        }
    }
}

/// The entries of a values inode: steps end to end in one buffer, each
/// child beside the end of its step.
pub struct Values<H: Hold> {
    names: Box<[u8]>,
    entries: Box<[(u32, Child<H>)]>,
}

impl<H: Hold> Clone for Values<H> {
    fn clone(&self) -> Self {
        Values { names: self.names.clone(), entries: self.entries.clone() }
    }
}

impl<H: Hold> Values<H> {
    pub fn new() -> Values<H> {
        Values { names: Box::new([]), entries: Box::new([]) }
    }

    /// Values of entries sorted by step and unique (at most 32: checked by
    /// the inode that holds them).
    pub fn from_sorted<S: AsRef<[u8]>>(entries: impl IntoIterator<Item = (S, Child<H>)>) -> Values<H> {
        let mut builder = ValuesBuilder::new(0, 0);
        for (step, child) in entries {
            builder.push(step.as_ref(), child);
        }
        builder.finish()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The step of entry `i`.
    pub fn step(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.entries[i - 1].0 as usize };
        &self.names[start..self.entries[i].0 as usize]
    }

    pub fn child(&self, i: usize) -> &Child<H> {
        &self.entries[i].1
    }

    pub fn child_mut(&mut self, i: usize) -> &mut Child<H> {
        &mut self.entries[i].1
    }

    /// Where `step` is, or where it would go.
    pub fn search(&self, step: &[u8]) -> Result<usize, usize> {
        let (mut low, mut high) = (0, self.entries.len());
        while low < high {
            let mid = (low + high) / 2;
            match self.step(mid).cmp(step) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(low)
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&[u8], &Child<H>)> + Clone {
        (0..self.entries.len()).map(|i| (self.step(i), self.child(i)))
    }

    /// These entries with `step` inserted at `at` (from [`Values::search`]).
    fn inserted(&self, at: usize, step: &[u8], child: Child<H>) -> Values<H> {
        let mut builder = ValuesBuilder::new(self.names.len() + step.len(), self.len() + 1);
        let mut child = Some(child);
        for (i, (s, c)) in self.iter().enumerate() {
            if i == at {
                builder.push(step, child.take().expect("inserted once"));
            }
            builder.push(s, c.clone());
        }
        if let Some(child) = child {
            builder.push(step, child);
        }
        builder.finish()
    }

    /// These entries without entry `at`.
    fn removed(&self, at: usize) -> Values<H> {
        let mut builder = ValuesBuilder::new(self.names.len() - self.step(at).len(), self.len() - 1);
        for (i, (s, c)) in self.iter().enumerate() {
            if i != at {
                builder.push(s, c.clone());
            }
        }
        builder.finish()
    }

    /// Approximate bytes of memory held, without what children point to.
    pub fn weight(&self) -> usize {
        self.names.len() + std::mem::size_of_val::<[(u32, Child<H>)]>(&self.entries)
    }
}

impl<H: Hold> Default for Values<H> {
    fn default() -> Self {
        Values::new()
    }
}

/// Builds [`Values`] entry by entry, steps written straight into the
/// buffer (decoding a record needs no step of its own per entry).
pub struct ValuesBuilder<H: Hold> {
    names: Vec<u8>,
    entries: Vec<(u32, Child<H>)>,
}

impl<H: Hold> ValuesBuilder<H> {
    /// A builder expecting about `names` bytes of steps and `count` entries.
    pub fn new(names: usize, count: usize) -> ValuesBuilder<H> {
        ValuesBuilder { names: Vec::with_capacity(names), entries: Vec::with_capacity(count) }
    }

    /// Appends an entry whose step is larger than every step before it.
    pub fn push(&mut self, step: &[u8], child: Child<H>) {
        self.names.extend_from_slice(step);
        self.push_written(child);
    }

    /// Appends an entry whose step the caller wrote with [`Self::step_buf`].
    pub fn push_written(&mut self, child: Child<H>) {
        self.entries.push((self.names.len() as u32, child));
    }

    /// The buffer to write the next entry's step into (after the steps of
    /// the entries pushed so far).
    pub fn step_buf(&mut self) -> &mut Vec<u8> {
        &mut self.names
    }

    /// The step being written: the bytes after the last entry's step.
    pub fn pending_step(&self) -> &[u8] {
        &self.names[self.entries.last().map_or(0, |e| e.0 as usize)..]
    }

    /// The last entry's step.
    pub fn last_step(&self) -> Option<&[u8]> {
        let n = self.entries.len();
        let end = self.entries.last()?.0 as usize;
        let start = if n < 2 { 0 } else { self.entries[n - 2].0 as usize };
        Some(&self.names[start..end])
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn finish(self) -> Values<H> {
        Values { names: self.names.into(), entries: self.entries.into() }
    }
}

/// The children of a tree inode: only those present, in index order, with
/// a bitmap of which indices they are.
pub struct Pointers<H: Hold> {
    pub depth: u32,
    bitmap: u32,
    /// Entries below this inode.
    pub len: u64,
    children: Box<[H::Ptr]>,
}

impl<H: Hold> Clone for Pointers<H> {
    fn clone(&self) -> Self {
        Pointers { depth: self.depth, bitmap: self.bitmap, len: self.len, children: self.children.clone() }
    }
}

impl<H: Hold> Pointers<H> {
    /// A tree inode at `depth` with `len` entries below, from its children
    /// in increasing index order (each below 32, unique).
    pub fn new(depth: u32, len: u64, children: impl IntoIterator<Item = (usize, H::Ptr)>) -> Pointers<H> {
        let mut bitmap = 0u32;
        let mut out = Vec::new();
        for (i, ptr) in children {
            assert!(i < ENTRIES && bitmap >> i == 0, "tree inode children in increasing index order");
            bitmap |= 1 << i;
            out.push(ptr);
        }
        Pointers { depth, bitmap, len, children: out.into() }
    }

    fn slot(&self, i: usize) -> usize {
        (self.bitmap & ((1u32 << i) - 1)).count_ones() as usize
    }

    pub fn get(&self, i: usize) -> Option<&H::Ptr> {
        (self.bitmap & (1 << i) != 0).then(|| &self.children[self.slot(i)])
    }

    pub fn get_mut(&mut self, i: usize) -> Option<&mut H::Ptr> {
        let slot = self.slot(i);
        (self.bitmap & (1 << i) != 0).then(|| &mut self.children[slot])
    }

    /// Sets or clears child `i`.
    pub fn put(&mut self, i: usize, ptr: Option<H::Ptr>) {
        let slot = self.slot(i);
        let present = self.bitmap & (1 << i) != 0;
        match (ptr, present) {
            (Some(ptr), true) => self.children[slot] = ptr,
            (Some(ptr), false) => {
                let mut children = std::mem::take(&mut self.children).into_vec();
                children.insert(slot, ptr);
                self.children = children.into();
                self.bitmap |= 1 << i;
            }
            (None, true) => {
                let mut children = std::mem::take(&mut self.children).into_vec();
                children.remove(slot);
                self.children = children.into();
                self.bitmap &= !(1 << i);
            }
            (None, false) => {}
        }
    }

    /// The children present, with their index, in index order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (usize, &H::Ptr)> + Clone {
        let mut bits = self.bitmap;
        self.children.iter().map(move |ptr| {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            (i, ptr)
        })
    }

    /// Bit `i` set for each child `i` present.
    pub fn bitmap(&self) -> u32 {
        self.bitmap
    }

    /// How many children are present.
    pub fn count(&self) -> usize {
        self.children.len()
    }

    /// Approximate bytes of memory held, without what children point to.
    pub fn weight(&self) -> usize {
        std::mem::size_of_val::<[H::Ptr]>(&self.children)
    }
}

/// The body of an inode.
pub enum Body<H: Hold> {
    /// At most 32 entries, sorted by step, unique.
    Values(Values<H>),
    /// More than 32 entries below, spread by `index(depth, step)`.
    Tree(Pointers<H>),
}

impl<H: Hold> Clone for Body<H> {
    fn clone(&self) -> Self {
        match self {
            Body::Values(values) => Body::Values(values.clone()),
            Body::Tree(pointers) => Body::Tree(pointers.clone()),
        }
    }
}

/// An inode of a directory trie, with its memoised hashes.
pub struct Inode<H: Hold> {
    pub body: Body<H>,
    /// The inode hash (value or tree encoding).
    hash: OnceLock<Hash>,
    /// For a directory's root: the directory's Tezos hash.
    dir_hash: OnceLock<Hash>,
    pub meta: H::Meta,
}

impl<H: Hold> Inode<H> {
    pub fn new(body: Body<H>) -> Inode<H> {
        Inode { body, hash: OnceLock::new(), dir_hash: OnceLock::new(), meta: H::Meta::default() }
    }

    pub fn values(values: Values<H>) -> Arc<Inode<H>> {
        assert!(values.len() <= ENTRIES, "a values inode holds at most 32 entries");
        Arc::new(Inode::new(Body::Values(values)))
    }

    /// Number of entries below this inode.
    pub fn len(&self) -> u64 {
        match &self.body {
            Body::Values(values) => values.len() as u64,
            Body::Tree(pointers) => pointers.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Remembers a hash known from elsewhere (a pointer on disk): the
    /// directory hash for a root (`depth == 0`), the inode hash below.
    pub fn remember_hash(&self, depth: u32, hash: Hash) {
        let memo = if depth == 0 { &self.dir_hash } else { &self.hash };
        let _ = memo.set(hash);
    }

    /// The hash memoised for this inode at `depth`: the directory hash for
    /// a root (`depth == 0`), the inode hash below; `None` if not computed.
    pub fn memo_hash(&self, depth: u32) -> Option<Hash> {
        let memo = if depth == 0 { &self.dir_hash } else { &self.hash };
        memo.get().copied()
    }

    /// Takes the hashes `other` memoised, for a copy of the same entries.
    pub fn remember_hashes_of(&self, other: &Inode<H>) {
        if let Some(&hash) = other.hash.get() {
            let _ = self.hash.set(hash);
        }
        if let Some(&hash) = other.dir_hash.get() {
            let _ = self.dir_hash.set(hash);
        }
    }

    /// Approximate bytes of memory held, without what children point to.
    pub fn weight(&self) -> usize {
        std::mem::size_of::<Inode<H>>()
            + match &self.body {
                Body::Values(values) => values.weight(),
                Body::Tree(pointers) => pointers.weight(),
            }
    }
}

/// Mutable access for an update: in place when nobody else holds the inode
/// and the holder does not freeze it, otherwise on a fresh copy. Memoised
/// hashes are cleared either way.
pub fn make_mut<H: Hold>(this: &mut Arc<Inode<H>>) -> &mut Inode<H> {
    if !updatable(this) {
        let body = this.body.clone();
        replace_body(this, body);
    }
    let inode = Arc::get_mut(this).expect("unique after copy");
    inode.hash = OnceLock::new();
    inode.dir_hash = OnceLock::new();
    inode
}

fn updatable<H: Hold>(this: &mut Arc<Inode<H>>) -> bool {
    !H::frozen(this) && Arc::get_mut(this).is_some()
}

/// Gives the inode a new body, as [`make_mut`] would, without copying the
/// old one first when it is shared.
fn replace_body<H: Hold>(this: &mut Arc<Inode<H>>, body: Body<H>) {
    if updatable(this) {
        let inode = Arc::get_mut(this).expect("checked unique");
        (inode.body, inode.hash, inode.dir_hash) = (body, OnceLock::new(), OnceLock::new());
    } else {
        *this = Arc::new(Inode { body, hash: OnceLock::new(), dir_hash: OnceLock::new(), meta: H::derive(this) });
    }
}

/// The inode a pointer names, from memory or through the resolver.
pub fn load<H: Hold, R: Resolve<H> + ?Sized>(ptr: &H::Ptr, depth: u32, r: &R) -> Result<Arc<Inode<H>>, R::Error> {
    match H::as_mem(ptr) {
        Some(inode) => Ok(inode.clone()),
        None => r.load(ptr, depth),
    }
}

/// Takes the inode out of a pointer for an update, leaving the shared empty
/// inode in its place (the caller puts the result back).
pub fn take<H: Hold, R: Resolve<H> + ?Sized>(ptr: &mut H::Ptr, depth: u32, r: &R) -> Result<Arc<Inode<H>>, R::Error> {
    match H::as_mem_mut(ptr) {
        Some(inode) => Ok(std::mem::replace(inode, H::empty())),
        None => r.load(ptr, depth),
    }
}

/// Builds the canonical trie at `depth` for entries sorted by step and
/// unique; `None` if it would hold an inode deeper than [`MAX_DEPTH`] (more
/// than 32 steps colliding at every level).
pub fn build<H: Hold, S: AsRef<[u8]>>(depth: u32, entries: Vec<(S, Child<H>)>) -> Option<Arc<Inode<H>>> {
    if entries.len() <= ENTRIES {
        return Some(Inode::values(Values::from_sorted(entries)));
    }
    if depth >= MAX_DEPTH {
        return None;
    }
    let len = entries.len() as u64;
    let mut buckets: Vec<Vec<(S, Child<H>)>> = (0..ENTRIES).map(|_| Vec::new()).collect();
    for (step, child) in entries {
        buckets[index(depth, step.as_ref())].push((step, child));
    }
    let children = buckets
        .into_iter()
        .enumerate()
        .filter(|(_, bucket)| !bucket.is_empty())
        .map(|(i, bucket)| Some((i, H::mem(build(depth + 1, bucket)?))))
        .collect::<Option<Vec<_>>>()?;
    Some(Arc::new(Inode::new(Body::Tree(Pointers::new(depth, len, children)))))
}

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

/// The hash of what an entry is.
pub fn child_hash<H: Hold, R: Resolve<H> + ?Sized>(child: &Child<H>, r: &R) -> Result<Hash, R::Error> {
    match child {
        Child::Contents(leaf) => r.leaf_hash(leaf),
        Child::Dir(ptr) => dir_ptr_hash(ptr, r),
    }
}

/// The hash of the directory a pointer to its root names.
pub fn dir_ptr_hash<H: Hold, R: Resolve<H> + ?Sized>(ptr: &H::Ptr, r: &R) -> Result<Hash, R::Error> {
    match (H::known_hash(ptr), H::as_mem(ptr)) {
        (Some(hash), _) => Ok(hash),
        (None, Some(root)) => dir_hash(root, r),
        (None, None) => dir_hash(&*r.load(ptr, 0)?, r),
    }
}

/// The inode hash of the inode a pointer below a root names.
pub fn inode_ptr_hash<H: Hold, R: Resolve<H> + ?Sized>(ptr: &H::Ptr, depth: u32, r: &R) -> Result<Hash, R::Error> {
    match (H::known_hash(ptr), H::as_mem(ptr)) {
        (Some(hash), _) => Ok(hash),
        (None, Some(inode)) => inode_hash(inode, r),
        (None, None) => inode_hash(&*r.load(ptr, depth)?, r),
    }
}

/// The Tezos hash of the directory whose root is `root`: the flat node
/// encoding of all its entries up to [`STABLE_HASH`] of them, the root's
/// inode hash above.
pub fn dir_hash<H: Hold, R: Resolve<H> + ?Sized>(root: &Inode<H>, r: &R) -> Result<Hash, R::Error> {
    if let Some(hash) = root.dir_hash.get() {
        return Ok(*hash);
    }
    let hash = if hashed_flat(root.len()) {
        let mut buf = Vec::with_capacity(8 + 80 * root.len() as usize);
        match &root.body {
            Body::Values(values) => {
                let hashes = values.iter().map(|(_, c)| child_hash(c, r)).collect::<Result<Vec<_>, _>>()?;
                encode_node(&mut buf, values.len(), values.iter().zip(&hashes).map(|((s, c), h)| (s, c.kind(), h)));
            }
            Body::Tree(_) => {
                let entries = collect_sorted(root, r)?;
                let hashes = entries.iter().map(|(_, c)| child_hash(c, r)).collect::<Result<Vec<_>, _>>()?;
                encode_node(&mut buf, entries.len(), entries.iter().zip(&hashes).map(|((s, c), h)| (&s[..], c.kind(), h)));
            }
        }
        Hash::of_bytes(&buf)
    } else {
        inode_hash(root, r)?
    };
    let _ = root.dir_hash.set(hash);
    Ok(hash)
}

/// The inode hash (values or tree encoding) of an inode.
pub fn inode_hash<H: Hold, R: Resolve<H> + ?Sized>(inode: &Inode<H>, r: &R) -> Result<Hash, R::Error> {
    if let Some(hash) = inode.hash.get() {
        return Ok(*hash);
    }
    let mut buf = Vec::new();
    match &inode.body {
        Body::Values(values) => {
            let hashes = values.iter().map(|(_, c)| child_hash(c, r)).collect::<Result<Vec<_>, _>>()?;
            encode_values(&mut buf, values.len(), values.iter().zip(&hashes).map(|((s, c), h)| (s, c.kind(), h)));
        }
        Body::Tree(pointers) => {
            let hashes = pointers
                .iter()
                .map(|(i, ptr)| Ok((i, inode_ptr_hash(ptr, pointers.depth + 1, r)?)))
                .collect::<Result<Vec<_>, _>>()?;
            encode_tree(&mut buf, pointers.depth, pointers.len, hashes.iter().map(|(i, h)| (*i, h)));
        }
    }
    let hash = Hash::of_bytes(&buf);
    let _ = inode.hash.set(hash);
    Ok(hash)
}
