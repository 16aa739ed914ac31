//! The trie's nodes: inodes, values (their entries in `values`) or tree
//! (children found by a bitmap), copy-on-write updates ([`make_mut`]),
//! prefetch hints and the canonical build.
//!
//! Invariants:
//! - A hint is only ever prefetched, never read through: any value, stale
//!   or made up, is harmless.

use super::*;
use crate::inode::index;

/// The children of a tree inode: only those present, in index order, with
/// a bitmap of which indices they are.
pub struct Pointers<H: Hold> {
    pub depth: u32,
    bitmap: u32,
    /// Entries below this inode.
    pub len: u64,
    children: Box<[H::Ptr]>,
    /// The indices of the children set, cleared or reached to be changed
    /// since [`Pointers::forget_changes`] (all of them in new pointers):
    /// a holder that wrote this inode can tell which children a new
    /// version may differ in without reading the others.
    changed: u32,
}

impl<H: Hold> Clone for Pointers<H> {
    fn clone(&self) -> Self {
        Pointers { depth: self.depth, bitmap: self.bitmap, len: self.len, children: self.children.clone(), changed: self.changed }
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
        Pointers { depth, bitmap, len, children: out.into(), changed: u32::MAX }
    }

    fn slot(&self, i: usize) -> usize {
        (self.bitmap & ((1u32 << i) - 1)).count_ones() as usize
    }

    pub fn get(&self, i: usize) -> Option<&H::Ptr> {
        (self.bitmap & (1 << i) != 0).then(|| &self.children[self.slot(i)])
    }

    /// Child `i`, to be changed (it counts as changed).
    pub fn get_mut(&mut self, i: usize) -> Option<&mut H::Ptr> {
        let slot = self.slot(i);
        self.changed |= 1 << i;
        (self.bitmap & (1 << i) != 0).then(|| &mut self.children[slot])
    }

    /// The indices of the children changed since [`Pointers::forget_changes`],
    /// as bits (more, never fewer: a child reached to be changed counts).
    pub fn changed(&self) -> u32 {
        self.changed
    }

    /// From now on, no child counts as changed.
    pub fn forget_changes(&mut self) {
        self.changed = 0;
    }

    /// Sets or clears child `i`.
    pub fn put(&mut self, i: usize, ptr: Option<H::Ptr>) {
        self.changed |= 1 << i;
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
    /// At most the layout's `entries` (32 in L1), sorted by step, unique.
    Values(Values<H>),
    /// More than `entries` below, spread by `layout.index(depth, step)`.
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
    pub(super) hash: OnceLock<Hash>,
    /// For a directory's root: the directory's Tezos hash.
    pub(super) dir_hash: OnceLock<Hash>,
    pub meta: H::Meta,
}

impl<H: Hold> Inode<H> {
    pub fn new(body: Body<H>) -> Inode<H> {
        Inode::with_meta(body, H::Meta::default())
    }

    /// An inode born with what its holder keeps beside it (read from a
    /// record, say).
    pub fn with_meta(body: Body<H>, meta: H::Meta) -> Inode<H> {
        Inode { body, hash: OnceLock::new(), dir_hash: OnceLock::new(), meta }
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

    /// Remembers a hash computed or known from elsewhere (a pointer on
    /// disk): the directory hash for a root (`depth == 0`), the inode hash
    /// below. A root of more than [`STABLE_HASH`] entries is hashed as an
    /// inode: its directory hash is its inode hash, remembered as both.
    pub fn remember_hash(&self, layout: Layout, depth: u32, hash: Hash) {
        if depth > 0 || !layout.hashed_flat(self.len()) {
            let _ = self.hash.set(hash);
        }
        if depth == 0 {
            let _ = self.dir_hash.set(hash);
        }
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

/// Where `inode` keeps, outside itself, what a search of it reads first:
/// a values inode's block of entries (0 when they lie inside it), a tree
/// inode's children. A holder keeps it in its pointers ([`Hold::hint`]),
/// so that a walk can prefetch it together with the inode instead of
/// after it: one cache miss less per level. Its two low bits are always 0
/// (a holder may keep flags there). A full tree inode's children (all 32:
/// a step's child is at its L1 index; only L1's tree inodes have 32) are
/// an address to 8 bytes, tagged by bit 2 ([`TREE_HINT`]); otherwise the hint names cache lines: the first
/// one's address, and in bits 3 to 5 half how many to prefetch from it
/// (at most [`HINT_HALVES`] pairs: the start of a larger block).
pub fn hint<H: Hold>(inode: &Inode<H>) -> usize {
    let lines = |start: *const u8, size: usize| {
        let lead = start as usize % LINE;
        let halves = (lead + size).div_ceil(2 * LINE).min(HINT_HALVES);
        (start as usize - lead) | (halves << 3)
    };
    match &inode.body {
        Body::Values(values) => values.block().map_or(0, |(start, size)| lines(start, size)),
        Body::Tree(pointers) if pointers.count() == ENTRIES => (pointers.children.as_ptr() as usize & !7) | TREE_HINT,
        Body::Tree(pointers) => lines(pointers.children.as_ptr().cast(), pointers.weight()),
    }
}

/// [`hint`]'s tag of a tree inode's children.
pub const TREE_HINT: usize = 4;
/// [`hint`]'s most pairs of lines to prefetch.
pub const HINT_HALVES: usize = 7;
/// A cache line's bytes.
const LINE: usize = 64;

/// Prefetches what a [`hint`] names, for a search of its inode at `depth`
/// for `step` (`None`: not known yet): the slot of a full tree inode where
/// `step`'s child is, or the lines named. Any value is harmless: a stale
/// hint's prefetch is wasted, never wrong. Returns `step`'s index at
/// `depth` when it computed it (a tree hint: a full L1 tree inode, the
/// only one with 32 children), so that the search of that inode need not
/// compute it again.
#[inline(always)]
pub fn prefetch_hint<H: Hold>(hint: usize, depth: u32, step: Option<&[u8]>) -> Option<usize> {
    if hint == 0 {
        return None;
    }
    if hint & TREE_HINT == 0 {
        // An address only, never read through: no provenance needed.
        prefetch_bytes(std::ptr::without_provenance(hint & !(LINE - 1)), ((hint >> 3) & HINT_HALVES) * 2 * LINE);
        None
    } else {
        let i = index(depth, step?);
        let at = (hint & !7).wrapping_add(i * std::mem::size_of::<H::Ptr>());
        prefetch_bytes(std::ptr::without_provenance(at), std::mem::size_of::<H::Ptr>());
        Some(i)
    }
}

/// Asks the processor to bring in the cache lines of `x` (the first
/// sixteen at most), so that their misses overlap; a hint, which changes
/// nothing.
#[inline(always)]
pub fn prefetch<T: ?Sized>(x: &T) {
    prefetch_bytes(core::ptr::from_ref(x).cast(), core::mem::size_of_val(x));
}

/// [`prefetch`] of an inode and the reference counts its `Arc` keeps
/// before it (two words, as the standard library lays them out today; the
/// hint is wasted, never wrong, if that changes).
#[inline(always)]
pub(super) fn prefetch_arc<T>(x: &Arc<T>) {
    const COUNTS: usize = 2 * core::mem::size_of::<usize>();
    prefetch_bytes(Arc::as_ptr(x).cast::<u8>().wrapping_sub(COUNTS), COUNTS + core::mem::size_of::<T>());
}

#[inline(always)]
#[cfg_attr(target_arch = "x86_64", expect(unsafe_code, reason = "a prefetch instruction, which never faults"))]
pub(super) fn prefetch_bytes(start: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // From the line `start` lies in to the one holding its last byte.
        let lead = start as usize % LINE;
        let lines = (lead + len).div_ceil(LINE).min(16);
        let first = start.wrapping_sub(lead);
        for line in 0..lines {
            // SAFETY: a prefetch never faults, whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(first.wrapping_add(line * LINE).cast()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, len);
}

/// Mutable access for an update: in place when nobody else holds the inode
/// and the holder does not freeze it, otherwise on a fresh copy. Memoised
/// hashes are cleared either way.
#[expect(unsafe_code, reason = "calls `cleared` on an inode `updatable` allowed or a fresh copy")]
pub fn make_mut<H: Hold>(this: &mut Arc<Inode<H>>) -> &mut Inode<H> {
    if !updatable(this) {
        copy_with(this, this.body.clone(), true);
    }
    // SAFETY: updatable, or the fresh copy `copy_with` just made.
    unsafe { cleared(this) }
}

/// Whether an update may change the inode in place: nothing else holds
/// it (the holder is told, [`Change::InPlace`]).
pub(super) fn updatable<H: Hold>(this: &mut Arc<Inode<H>>) -> bool {
    prefetch_arc(this);
    match Arc::get_mut(this) {
        Some(inode) => {
            H::changing(Change::InPlace(inode));
            true
        }
        None => false,
    }
}

/// The inode [`updatable`] just allowed to change in place (or a fresh
/// copy), its memoised hashes cleared.
///
/// # Safety
/// `this` is unique: [`updatable`] returned `true` for it (`Arc::get_mut`
/// found no other `Arc` and no `Weak`), or it was made since, and it was
/// not cloned or downgraded after. Borrowed mutably all along, it could
/// not be; so `Arc::get_mut` would only check again (an atomic
/// read-modify-write on every inode of every update). A check by loads
/// instead of `Arc::get_mut` is unsound (0d5611f): the Shuttle model
/// `tests/shuttle_in_place_update.rs` fails with one.
#[expect(unsafe_code, reason = "skips `Arc::get_mut`'s second check, which `updatable` made")]
pub(super) unsafe fn cleared<H: Hold>(this: &mut Arc<Inode<H>>) -> &mut Inode<H> {
    debug_assert!(Arc::get_mut(this).is_some(), "updatable, or a fresh copy");
    // SAFETY: by the caller's promise no other `Arc` or `Weak` of the inode
    // exists, and none can appear while `this` is borrowed mutably: the
    // result is the only reference to the inode.
    let inode = unsafe { &mut *Arc::as_ptr(this).cast_mut() };
    inode.hash = OnceLock::new();
    inode.dir_hash = OnceLock::new();
    inode
}

/// Gives the inode a new body, as [`make_mut`] would, without copying the
/// old one first when it is shared; returns it.
#[expect(unsafe_code, reason = "calls `cleared` on an inode `updatable` allowed, or on a fresh copy")]
pub(super) fn replace_body<H: Hold>(this: &mut Arc<Inode<H>>, body: Body<H>) -> &mut Inode<H> {
    if updatable(this) {
        // SAFETY: updatable, and not cloned since.
        let inode = unsafe { cleared(this) };
        inode.body = body;
        inode
    } else {
        copy_with(this, body, false);
        // SAFETY: the fresh copy `copy_with` just made, not cloned since.
        unsafe { cleared(this) }
    }
}

/// Replaces a shared inode by a new one with `body` (a copy of its own if
/// `copied`, built anew otherwise), which remembers it.
fn copy_with<H: Hold>(this: &mut Arc<Inode<H>>, mut body: Body<H>, copied: bool) {
    let mut meta = H::Meta::default();
    H::changing(Change::NewVersion { from: this, body: &mut body, copied, meta: &mut meta });
    *this = Arc::new(Inode::with_meta(body, meta));
}

/// The inode a pointer names, from memory or through the resolver.
pub fn load<H: Hold, R: Resolve<H> + ?Sized>(ptr: &H::Ptr, depth: u32, r: &R) -> Result<Arc<Inode<H>>, R::Error> {
    match H::as_mem(ptr) {
        Some(inode) => Ok(inode.clone()),
        None => r.load(ptr, depth),
    }
}

/// The inode a pointer names, for an update where it is: a pointer not in
/// memory is replaced by one holding the inode loaded to be changed
/// ([`Resolve::load_to_update`]), and a pointer in memory forgets the hash
/// it may carry ([`Hold::as_mem_mut`]).
pub fn mem_mut<'a, H: Hold, R: Resolve<H> + ?Sized>(
    ptr: &'a mut H::Ptr,
    depth: u32,
    r: &R,
) -> Result<&'a mut Arc<Inode<H>>, R::Error> {
    if H::as_mem(ptr).is_none() {
        *ptr = H::mem(r.load_to_update(ptr, depth)?);
    }
    Ok(H::as_mem_mut(ptr).expect("a pointer in memory"))
}

/// Builds the canonical trie of `layout` at `depth` for entries sorted by
/// step and unique; `None` if it would hold an inode deeper than the
/// layout's `max_depth` (more than `entries` steps colliding at every
/// level).
pub fn build<H: Hold, S: AsRef<[u8]>>(layout: Layout, depth: u32, entries: Vec<(S, Child<H>)>) -> Option<Arc<Inode<H>>> {
    if entries.len() <= layout.entries {
        return Some(Inode::values(Values::from_sorted(entries)));
    }
    if depth >= layout.max_depth {
        return None;
    }
    let len = entries.len() as u64;
    let mut buckets: Vec<Vec<(S, Child<H>)>> = (0..layout.entries).map(|_| Vec::new()).collect();
    for (step, child) in entries {
        buckets[layout.index(depth, step.as_ref())].push((step, child));
    }
    let children = buckets
        .into_iter()
        .enumerate()
        .filter(|(_, bucket)| !bucket.is_empty())
        .map(|(i, bucket)| Some((i, H::mem(build(layout, depth + 1, bucket)?))))
        .collect::<Option<Vec<_>>>()?;
    Some(Arc::new(Inode::new(Body::Tree(Pointers::new(depth, len, children)))))
}
