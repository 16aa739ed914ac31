//! A values inode's entries (at most 32, sorted by step): in one block
//! beside the inode (the steps' ends, the steps, then the children), or
//! inside it for one short entry; and their builder.
//!
//! Invariants:
//! - A block owns its children as a `Vec` would: each is moved in once,
//!   dropped once (with the block) or moved out once
//!   (`Block::into_children`), and the block is freed with the layout it
//!   was made with.
//! - The ends are those of the steps in order; the steps are sorted and
//!   unique (the inode holding them checks their number).

use super::node::prefetch_bytes;
use super::*;
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
#[expect(unsafe_code, reason = "a block owns its children as a `Vec` does")]
unsafe impl<H: Hold> Send for Block<H> where Child<H>: Send {}
// SAFETY: as above: `&Block` gives only `&Child`.
#[expect(unsafe_code, reason = "a block owns its children as a `Vec` does")]
unsafe impl<H: Hold> Sync for Block<H> where Child<H>: Sync {}

#[expect(unsafe_code, reason = "one allocation laid out by hand: ends and steps, then the children")]
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

#[expect(unsafe_code, reason = "drops the children and frees the allocation, once")]
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
