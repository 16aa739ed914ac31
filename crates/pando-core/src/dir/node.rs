//! The trie's nodes: values inodes (their entries in one block, or inside
//! them), tree inodes (children found by a bitmap), copy-on-write updates
//! ([`make_mut`]), prefetch hints and the canonical build.
//!
//! Invariants:
//! - A values inode's block owns its children as a `Vec` would: each is
//!   moved in once, dropped once (with the block) or moved out once
//!   (`Block::into_children`), and the block is freed with the layout it
//!   was made with.
//! - A hint is only ever prefetched, never read through: any value, stale
//!   or made up, is harmless.

use super::*;
use crate::inode::index;
use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::marker::PhantomData;
use std::ptr::NonNull;

/// The entries of a values inode: where each step ends (a `u32` per
/// entry), the steps end to end, then the children in order. A search
/// reads the ends (a cache line or two), the steps it compares and the one
/// child it finds. A small directory's entry
/// (one child, its end and step within [`NAMES_INLINE`] bytes: most
/// directories of a blockchain's state) lies inside the inode, so that
/// reaching it costs no load beyond the inode's own; larger ones lie in
/// one block beside it, ends and steps then children, so that one
/// prefetch of the block ([`hint`]: its first 14 lines, all of a block of
/// up to eight entries of 44-byte steps) asks for everything a search
/// reads.
pub struct Values<H: Hold>(Repr<H>);

enum Repr<H: Hold> {
    /// No entry (`child` none, `used` 0) or one.
    Inline {
        names: [u8; NAMES_INLINE],
        used: u8,
        child: Option<Child<H>>,
    },
    Block(Block<H>),
}

/// Bytes of a values inode's ends and steps held inside it.
pub const NAMES_INLINE: usize = 16;

impl<H: Hold> Clone for Values<H> {
    fn clone(&self) -> Self {
        match &self.0 {
            Repr::Inline { names, used, child } => Values(Repr::Inline { names: *names, used: *used, child: child.clone() }),
            Repr::Block(block) => Values(Repr::Block(Block::new(block.names(), block.children().to_vec()))),
        }
    }
}

/// Bytes of a step's end in [`Values`]' buffer.
const END: usize = std::mem::size_of::<u32>();

/// The entries of a values inode too large to lie inside it, in one
/// allocation: `names` bytes of ends and steps, then (aligned) `count`
/// children.
struct Block<H: Hold> {
    start: NonNull<u8>,
    count: u32,
    names: u32,
    /// Owns the children.
    owns: PhantomData<Child<H>>,
}

// SAFETY: a block owns its children as a `Vec` would (no other pointer to
// them exists, and shared access gives out only shared references).
unsafe impl<H: Hold> Send for Block<H> where Child<H>: Send {}
// SAFETY: as above: `&Block` gives only `&Child`.
unsafe impl<H: Hold> Sync for Block<H> where Child<H>: Sync {}

impl<H: Hold> Block<H> {
    /// Where the children start, after `names` bytes of ends and steps.
    fn children_at(names: usize) -> usize {
        names.next_multiple_of(std::mem::align_of::<Child<H>>())
    }

    fn layout(count: usize, names: usize) -> Layout {
        let size = Self::children_at(names) + count * std::mem::size_of::<Child<H>>();
        Layout::from_size_align(size, std::mem::align_of::<Child<H>>()).expect("a values inode's block fits memory")
    }

    /// A block of `names` (ends then steps) and `children` (at least one),
    /// moved in.
    fn new(names: &[u8], mut children: Vec<Child<H>>) -> Block<H> {
        let count = children.len();
        let (Ok(count32), Ok(names32)) = (u32::try_from(count), u32::try_from(names.len())) else {
            panic!("a values inode's block over 4 GiB")
        };
        let layout = Self::layout(count, names.len());
        assert!(count > 0 && layout.size() > 0, "a block holds at least one entry");
        // SAFETY: the layout's size is not zero (checked above).
        let Some(start) = NonNull::new(unsafe { alloc(layout) }) else { handle_alloc_error(layout) };
        // SAFETY: the allocation holds `names` bytes at its start and
        // `count` children from `children_at`, aligned for them; the
        // children move from the vector, which forgets them (its length
        // set to 0) and frees only its buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(names.as_ptr(), start.as_ptr(), names.len());
            let at = start.as_ptr().add(Self::children_at(names.len())).cast::<Child<H>>();
            std::ptr::copy_nonoverlapping(children.as_ptr(), at, count);
            children.set_len(0);
        }
        Block { start, count: count32, names: names32, owns: PhantomData }
    }

    fn names(&self) -> &[u8] {
        // SAFETY: the block's first `names` bytes, written by `new`.
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.names as usize) }
    }

    fn children_ptr(&self) -> *mut Child<H> {
        // SAFETY: within the allocation (see `layout`).
        unsafe { self.start.as_ptr().add(Self::children_at(self.names as usize)).cast() }
    }

    fn children(&self) -> &[Child<H>] {
        // SAFETY: `count` children, written by `new`, owned by the block.
        unsafe { std::slice::from_raw_parts(self.children_ptr(), self.count as usize) }
    }

    fn children_mut(&mut self) -> &mut [Child<H>] {
        // SAFETY: as `children`, borrowed mutably with the block.
        unsafe { std::slice::from_raw_parts_mut(self.children_ptr(), self.count as usize) }
    }

    /// The allocation's start and size.
    fn extent(&self) -> (*const u8, usize) {
        (self.start.as_ptr(), Self::layout(self.count as usize, self.names as usize).size())
    }

    /// The children, moved out; the block is freed.
    fn into_children(self) -> Vec<Child<H>> {
        let this = std::mem::ManuallyDrop::new(self);
        let count = this.count as usize;
        let mut children = Vec::with_capacity(count + 1);
        // SAFETY: the children move to the vector (its capacity suffices);
        // the block, never dropped, neither drops nor reads them again, and
        // its allocation is freed with the layout it was made with.
        unsafe {
            std::ptr::copy_nonoverlapping(this.children_ptr(), children.as_mut_ptr(), count);
            children.set_len(count);
            dealloc(this.start.as_ptr(), Self::layout(count, this.names as usize));
        }
        children
    }
}

impl<H: Hold> Drop for Block<H> {
    fn drop(&mut self) {
        let layout = Self::layout(self.count as usize, self.names as usize);
        // SAFETY: the block owns its children, dropped once here, and its
        // allocation, made with `layout`.
        unsafe {
            std::ptr::drop_in_place(self.children_mut() as *mut [Child<H>]);
            dealloc(self.start.as_ptr(), layout);
        }
    }
}

impl<H: Hold> Values<H> {
    pub fn new() -> Values<H> {
        Values(Repr::Inline { names: [0; NAMES_INLINE], used: 0, child: None })
    }

    /// Entries from their ends and steps and their children: inside the
    /// inode when they fit, in a block otherwise.
    fn from_parts(names: &[u8], children: Vec<Child<H>>) -> Values<H> {
        if children.len() <= 1 && names.len() <= NAMES_INLINE {
            let mut inline = [0; NAMES_INLINE];
            inline[..names.len()].copy_from_slice(names);
            let used = u8::try_from(names.len()).expect("at most NAMES_INLINE bytes");
            Values(Repr::Inline { names: inline, used, child: children.into_iter().next() })
        } else {
            Values(Repr::Block(Block::new(names, children)))
        }
    }

    /// The ends, then the steps.
    fn names(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { names, used, .. } => &names[..usize::from(*used)],
            Repr::Block(block) => block.names(),
        }
    }

    fn children_slice(&self) -> &[Child<H>] {
        match &self.0 {
            Repr::Inline { child, .. } => child.as_slice(),
            Repr::Block(block) => block.children(),
        }
    }

    /// Bytes of the steps, end to end.
    fn steps_len(&self) -> usize {
        self.names().len() - self.len() * END
    }

    /// Where the block of entries lies and its size, when not inside.
    pub(super) fn block(&self) -> Option<(*const u8, usize)> {
        match &self.0 {
            Repr::Inline { .. } => None,
            Repr::Block(block) => Some(block.extent()),
        }
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
        self.children_slice().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The step of entry `i`.
    pub fn step(&self, i: usize) -> &[u8] {
        step_of(self.names(), self.len(), i)
    }

    pub fn child(&self, i: usize) -> &Child<H> {
        &self.children_slice()[i]
    }

    pub fn child_mut(&mut self, i: usize) -> &mut Child<H> {
        match &mut self.0 {
            Repr::Inline { child, .. } => &mut child.as_mut_slice()[i],
            Repr::Block(block) => &mut block.children_mut()[i],
        }
    }

    /// Where `step` is, or where it would go.
    pub fn search(&self, step: &[u8]) -> Result<usize, usize> {
        // The binary search's loads depend on each other; asked for at
        // once, the block's cache misses overlap instead.
        if let Some((start, size)) = self.block() {
            prefetch_bytes(start, size);
        }
        let (names, n) = (self.names(), self.len());
        let (mut low, mut high) = (0, n);
        while low < high {
            let mid = (low + high) / 2;
            match step_of(names, n, mid).cmp(step) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(low)
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&[u8], &Child<H>)> + Clone {
        let (names, children) = (self.names(), self.children_slice());
        children.iter().enumerate().map(move |(i, child)| (step_of(names, children.len(), i), child))
    }

    /// These entries' children, in order.
    pub fn children(&self) -> impl ExactSizeIterator<Item = &Child<H>> + Clone {
        self.children_slice().iter()
    }

    /// These entries with `step` inserted at `at` (from [`Values::search`]).
    pub(super) fn inserted(&self, at: usize, step: &[u8], child: Child<H>) -> Values<H> {
        let mut builder = ValuesBuilder::new(self.steps_len() + step.len(), self.len() + 1);
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

    /// Inserts `step` at `at` (from [`Values::search`]) in place: the
    /// children move, none is cloned; the ends and steps are copied once,
    /// the ends after `at` moved by the step's length on the way.
    pub(super) fn insert(&mut self, at: usize, step: &[u8], child: Child<H>) {
        let n = self.len();
        let (ends, steps) = self.names().split_at(n * END);
        let start = if at == 0 { 0 } else { end_of(ends, at - 1) };
        let grown = u32::try_from(step.len()).expect("steps of a values inode fit u32");
        let mut names = Vec::with_capacity(ends.len() + END + steps.len() + step.len());
        names.extend_from_slice(&ends[..at * END]);
        let end = u32::try_from(start + step.len()).expect("steps of a values inode fit u32");
        names.extend_from_slice(&end.to_ne_bytes());
        for later in ends[at * END..].chunks_exact(END) {
            let moved = u32::from_ne_bytes(later.try_into().expect("four bytes")) + grown;
            names.extend_from_slice(&moved.to_ne_bytes());
        }
        names.extend_from_slice(&steps[..start]);
        names.extend_from_slice(step);
        names.extend_from_slice(&steps[start..]);
        let mut children = match std::mem::take(self).0 {
            Repr::Inline { child, .. } => {
                let mut children = Vec::with_capacity(2);
                children.extend(child);
                children
            }
            Repr::Block(block) => block.into_children(),
        };
        children.insert(at, child);
        *self = Values::from_parts(&names, children);
    }

    /// These entries without entry `at`.
    pub(super) fn removed(&self, at: usize) -> Values<H> {
        let mut builder = ValuesBuilder::new(self.steps_len() - self.step(at).len(), self.len() - 1);
        for (i, (s, c)) in self.iter().enumerate() {
            if i != at {
                builder.push(s, c.clone());
            }
        }
        builder.finish()
    }

    /// Approximate bytes of memory held outside the inode, without what
    /// children point to.
    pub fn weight(&self) -> usize {
        self.block().map_or(0, |(_, size)| size)
    }
}

/// Where the steps of entries `..=i` end in the steps' part of `names`
/// (ends, then steps).
fn end_of(names: &[u8], i: usize) -> usize {
    let at = i * END;
    u32::from_ne_bytes(names[at..at + END].try_into().expect("four bytes")) as usize
}

/// The step of entry `i` of the `n` entries whose ends and steps are `names`.
fn step_of(names: &[u8], n: usize, i: usize) -> &[u8] {
    let start = if i == 0 { 0 } else { end_of(names, i - 1) };
    &names[n * END..][start..end_of(names, i)]
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
    ends: Vec<u32>,
    children: Vec<Child<H>>,
}

impl<H: Hold> ValuesBuilder<H> {
    /// A builder expecting about `names` bytes of steps and `count` entries
    /// (its buffer has room for their ends too, which [`Self::finish`]
    /// puts ahead of the steps).
    pub fn new(names: usize, count: usize) -> ValuesBuilder<H> {
        ValuesBuilder {
            names: Vec::with_capacity(names + count * END),
            ends: Vec::with_capacity(count),
            children: Vec::with_capacity(count),
        }
    }

    /// Appends an entry whose step is larger than every step before it.
    pub fn push(&mut self, step: &[u8], child: Child<H>) {
        self.names.extend_from_slice(step);
        self.push_written(child);
    }

    /// Appends an entry whose step the caller wrote with [`Self::step_buf`].
    pub fn push_written(&mut self, child: Child<H>) {
        self.ends.push(u32::try_from(self.names.len()).expect("steps of a values inode fit u32"));
        self.children.push(child);
    }

    /// The buffer to write the next entry's step into (after the steps of
    /// the entries pushed so far).
    pub fn step_buf(&mut self) -> &mut Vec<u8> {
        &mut self.names
    }

    /// The step being written: the bytes after the last entry's step.
    pub fn pending_step(&self) -> &[u8] {
        &self.names[self.ends.last().map_or(0, |&end| end as usize)..]
    }

    /// The last entry's step.
    pub fn last_step(&self) -> Option<&[u8]> {
        let n = self.ends.len();
        let end = *self.ends.last()? as usize;
        let start = if n < 2 { 0 } else { self.ends[n - 2] as usize };
        Some(&self.names[start..end])
    }

    pub fn len(&self) -> usize {
        self.children.len()
    }

    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    pub fn finish(self) -> Values<H> {
        // The ends go ahead of the steps, in the same buffer (moved within
        // it: `new` left room for them).
        // (Zeros first, then the ends: `splice` moves the steps once only
        // for an iterator of known length.)
        let mut names = self.names;
        let room = self.ends.len() * END;
        names.splice(0..0, std::iter::repeat_n(0, room));
        for (at, end) in names[..room].chunks_exact_mut(END).zip(&self.ends) {
            at.copy_from_slice(&end.to_ne_bytes());
        }
        Values::from_parts(&names, self.children)
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
    pub(super) hash: OnceLock<Hash>,
    /// For a directory's root: the directory's Tezos hash.
    pub(super) dir_hash: OnceLock<Hash>,
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

/// Where `inode` keeps, outside itself, what a search of it reads first:
/// a values inode's block of entries (0 when they lie inside it), a tree
/// inode's children. A holder keeps it in its pointers ([`Hold::hint`]),
/// so that a walk can prefetch it together with the inode instead of
/// after it: one cache miss less per level. Its two low bits are always 0
/// (a holder may keep flags there). A full tree inode's children (all 32:
/// a step's child is at its index) are an address to 8 bytes, tagged by
/// bit 2 ([`TREE_HINT`]); otherwise the hint names cache lines: the first
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
/// hint's prefetch is wasted, never wrong.
#[inline(always)]
pub fn prefetch_hint<H: Hold>(hint: usize, depth: u32, step: Option<&[u8]>) {
    if hint == 0 {
        return;
    }
    if hint & TREE_HINT == 0 {
        prefetch_bytes((hint & !(LINE - 1)) as *const u8, ((hint >> 3) & HINT_HALVES) * 2 * LINE);
    } else if let Some(step) = step {
        let at = (hint & !7).wrapping_add(index(depth, step) * std::mem::size_of::<H::Ptr>());
        prefetch_bytes(at as *const u8, std::mem::size_of::<H::Ptr>());
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
fn prefetch_bytes(start: *const u8, len: usize) {
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
pub fn make_mut<H: Hold>(this: &mut Arc<Inode<H>>) -> &mut Inode<H> {
    if !updatable(this) {
        copy_with(this, this.body.clone(), true);
    }
    // SAFETY: updatable, or the fresh copy `copy_with` just made.
    unsafe { cleared(this) }
}

/// Whether an update may change the inode in place: nothing else holds
/// it, and the holder thawed it.
pub(super) fn updatable<H: Hold>(this: &mut Arc<Inode<H>>) -> bool {
    prefetch_arc(this);
    Arc::get_mut(this).is_some_and(H::thaw)
}

/// The inode [`updatable`] just allowed to change in place (or a fresh
/// copy), its memoised hashes cleared.
///
/// # Safety
/// `this` is unique: [`updatable`] returned `true` for it (`Arc::get_mut`
/// found no other `Arc` and no `Weak`), or it was made since, and it was
/// not cloned or downgraded after. Borrowed mutably all along, it could
/// not be; so `Arc::get_mut` would only check again (an atomic
/// read-modify-write on every inode of every update).
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
/// old one first when it is shared.
pub(super) fn replace_body<H: Hold>(this: &mut Arc<Inode<H>>, body: Body<H>) {
    if updatable(this) {
        // SAFETY: updatable, and not cloned since.
        unsafe { cleared(this) }.body = body;
    } else {
        copy_with(this, body, false);
    }
}

/// Replaces a shared inode by a new one with `body` (a copy of its own if
/// `copied`, built anew otherwise), which remembers it.
fn copy_with<H: Hold>(this: &mut Arc<Inode<H>>, mut body: Body<H>, copied: bool) {
    let meta = H::derive(this, copied.then_some(&mut body));
    *this = Arc::new(Inode { body, hash: OnceLock::new(), dir_hash: OnceLock::new(), meta });
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
