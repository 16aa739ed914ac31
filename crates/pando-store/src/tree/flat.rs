//! The flat read cache: what paths hold in one commit's tree, in a map from
//! the whole path, so that a read of a tree taken from that commit is one
//! lookup instead of a walk down the trie (geth's snapshot layer and reth's
//! hashed state serve reads the same way; this one is bounded and lives in
//! memory).
//!
//! Invariants:
//! - Every entry of [`FlatCache`] is what its path holds in the tree of the
//!   commit [`Inner::at`]: a contents, a directory, or nothing. Reads of
//!   trees taken from that commit add entries; a commit moves `at` to
//!   itself, applying in order the updates its tree logged since it was
//!   taken from `at` (or emptying the map when the tree was not taken from
//!   `at` or did not log them all). It does so in two steps: while it is
//!   written the updates are applied and `at` is no commit (no read is
//!   answered, none noted), then `at` names it, or the map empties if it
//!   failed. A commit made on another thread meanwhile empties the map,
//!   and the first commit leaves it unnamed. A resting cache holds nothing
//!   and names no commit. (Asserted in `get` and `committed`; in debug
//!   builds `Tree::read` checks each answer against a descent; tested by
//!   `interleaved_carries_name_no_commit_with_the_other_s_updates`.)
//! - `below` holds the hash of every strict prefix of every path given an
//!   entry since the map was last emptied: a path whose hash it lacks has
//!   no entry below it. An update of a path whose hash it has empties the
//!   map (what lay below is gone). (Asserted in `Inner::get`.)
//! - A tree's [`Writes`] lists its updates since it was taken from a
//!   commit, in order. Only a tree that has made none reads from the cache
//!   (it holds what the commit holds); the others walk, so that an update
//!   costs one entry in a list and a read of an updated tree nothing more.
//!   Clones share the updates made before they parted: a tree updated
//!   while a clone holds its log starts a new link, after the shared ones.
//!   (Asserted in `log`, `own_updates` and `carry`.)
//! - Paths are encoded as their steps, each preceded by its length as a
//!   varint, so a prefix's encoding is a prefix of the path's. (Asserted
//!   in `strict_prefixes`.)

use foldhash::fast::FixedState;
use hashbrown::HashTable;
use pando_core::Hash;
use parking_lot::RwLock;
use smallvec::SmallVec;
use std::collections::HashSet;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Contents longer than this are not held: a read of them walks.
pub(crate) const MAX_VALUE: usize = 256;

/// Updates a tree logs at most; past them it stops logging, and its commit
/// empties the cache.
const MAX_WRITES: usize = 1 << 16;

/// Commits over which the cache judges whether it pays.
pub(crate) const WINDOW: u64 = 32;

/// Commits the cache rests once it did not pay.
pub(crate) const REST: u64 = 256;

/// Bytes counted for an entry besides its path and value.
const ENTRY_OVERHEAD: usize = 64;

/// Bytes counted for a prefix hash in `below`.
const PREFIX_OVERHEAD: usize = 16;

/// What a path holds: a value owned, or borrowed from the map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Cached<V = Box<[u8]>> {
    Absent,
    Dir,
    Value(V),
}

impl Cached {
    fn as_ref(&self) -> Cached<&[u8]> {
        match self {
            Cached::Absent => Cached::Absent,
            Cached::Dir => Cached::Dir,
            Cached::Value(value) => Cached::Value(value),
        }
    }
}

/// An entry of the map: a path's encoding and what it holds, in one
/// allocation, so that a lookup loads one line past the table: the path's
/// length (four bytes), a tag, the path, then the value.
struct Entry(Box<[u8]>);

/// Bytes of an [`Entry`] before its path.
const HEAD: usize = 5;

const ABSENT: u8 = 0;
const DIR: u8 = 1;
const VALUE: u8 = 2;

impl Entry {
    fn new(key: &[u8], held: Cached<&[u8]>) -> Entry {
        let (tag, value): (u8, &[u8]) = match held {
            Cached::Absent => (ABSENT, &[]),
            Cached::Dir => (DIR, &[]),
            Cached::Value(value) => (VALUE, value),
        };
        let len = u32::try_from(key.len()).expect("a path of at most 4 GiB");
        let mut bytes = Vec::with_capacity(HEAD + key.len() + value.len());
        bytes.extend_from_slice(&len.to_ne_bytes());
        bytes.push(tag);
        bytes.extend_from_slice(key);
        bytes.extend_from_slice(value);
        Entry(bytes.into_boxed_slice())
    }

    fn key_end(&self) -> usize {
        HEAD + u32::from_ne_bytes(self.0[..4].try_into().expect("four bytes")) as usize
    }

    fn key(&self) -> &[u8] {
        &self.0[HEAD..self.key_end()]
    }

    fn cached(&self) -> Cached<&[u8]> {
        match self.0[4] {
            ABSENT => Cached::Absent,
            DIR => Cached::Dir,
            _ => Cached::Value(&self.0[self.key_end()..]),
        }
    }

    /// The value, to be overwritten by one of the same length.
    fn value_mut(&mut self) -> Option<&mut [u8]> {
        let end = self.key_end();
        (self.0[4] == VALUE).then(|| &mut self.0[end..])
    }

    /// The bytes the cache counts for it.
    fn weight(&self) -> usize {
        ENTRY_OVERHEAD + self.0.len() - HEAD
    }
}

/// A path encoded as one byte string (see [`encode_step`]).
#[derive(Clone)]
pub(crate) struct Key(SmallVec<[u8; 128]>);

impl Key {
    pub(crate) fn new(steps: &[&[u8]]) -> Key {
        let mut bytes = SmallVec::new();
        for step in steps {
            encode_step(&mut bytes, step);
        }
        Key(bytes)
    }
}

/// The encodings of the strict prefixes (at least one step) of an encoded
/// path, read off its steps' lengths: only an update that adds an entry
/// or may change the directories above needs them.
fn strict_prefixes(encoded: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at == encoded.len() {
            return None;
        }
        // The encodings are this module's own: a length always reads, and
        // the steps end where the path does.
        let len = pando_core::varint::read_u64(encoded, &mut at);
        debug_assert!(len.is_ok(), "a step's length in a path encoded here reads");
        at = at.saturating_add(usize::try_from(len.ok()?).ok()?);
        debug_assert!(at <= encoded.len(), "a step encoded here ends within its path");
        (at < encoded.len()).then(|| &encoded[..at])
    })
}

/// Appends a step: its length as a varint (as `pando_core::varint`
/// writes it, here into a key's inline buffer too), then its bytes.
fn encode_step(out: &mut impl Extend<u8>, step: &[u8]) {
    let mut len = step.len();
    while len >= 0x80 {
        out.extend([(len as u8) | 0x80]);
        len >>= 7;
    }
    out.extend([len as u8]);
    out.extend(step.iter().copied());
}

fn hash_of(bytes: &[u8]) -> u64 {
    FixedState::with_seed(0x70616e646f).hash_one(bytes)
}

type Set = HashSet<u64, FixedState>;

/// The cache of one store instance: reader threads look it up together.
pub struct FlatCache {
    inner: RwLock<Inner>,
    budget: usize,
    /// Not resting (see [`FlatCache::committed`]).
    armed: AtomicBool,
    /// Lookups answered and not, since the cache was made.
    hits: AtomicU64,
    misses: AtomicU64,
    /// Carries begun (see [`FlatCache::next_carry`]).
    carries: AtomicU64,
}

#[derive(Default)]
struct Inner {
    /// The commit whose tree the entries describe.
    at: Option<Hash>,
    entries: HashTable<Entry>,
    below: Set,
    bytes: usize,
    /// Commits since the cache was made; the current window (see
    /// [`FlatCache::committed`]) or rest ends at `window_end`; the window
    /// began when the cache's hits were `window_hits`; updates its commits
    /// logged.
    commits: u64,
    window_end: u64,
    window_hits: u64,
    window_writes: u64,
    /// The carry whose commit is being made (see [`FlatCache::carry`]):
    /// the entries are what that commit's tree holds, and no read is noted.
    pending: Option<u64>,
}

impl Inner {
    fn clear(&mut self) {
        self.entries = HashTable::new();
        self.below = Set::default();
        self.bytes = 0;
    }

    fn get(&self, key: &[u8]) -> Option<&Entry> {
        let found = self.entries.find(hash_of(key), |e| e.key() == key);
        // (A walk over the path's prefixes: the crate's tests only.)
        debug_assert!(
            !crate::DEEP_CHECKS || found.is_none() || strict_prefixes(key).all(|prefix| self.below.contains(&hash_of(prefix))),
            "`below` holds every prefix of a path given an entry"
        );
        found
    }

    fn set(&mut self, key: &[u8], held: Cached<&[u8]>) {
        let entry = Entry::new(key, held);
        self.bytes += entry.weight();
        match self.entries.entry(hash_of(key), |e| e.key() == key, |e| hash_of(e.key())) {
            hashbrown::hash_table::Entry::Occupied(mut old) => {
                self.bytes -= old.get().weight();
                *old.get_mut() = entry;
            }
            hashbrown::hash_table::Entry::Vacant(slot) => {
                slot.insert(entry);
            }
        }
        for prefix in strict_prefixes(key) {
            if self.below.insert(hash_of(prefix)) {
                self.bytes += PREFIX_OVERHEAD;
            }
        }
    }

    fn forget(&mut self, key: &[u8]) {
        if let Ok(found) = self.entries.find_entry(hash_of(key), |e| e.key() == key) {
            let (old, _) = found.remove();
            self.bytes -= old.weight();
        }
    }

    /// Applies one update of the tree of `at`, in the order made.
    fn apply(&mut self, key: &[u8], write: Write<'_>) {
        // The common case, one lookup: a contents replaced by a contents
        // of the same length, in place. Nothing lies below a contents, and
        // the directories above stay.
        if let Some(entry) = find_mut(&mut self.entries, key)
            && let Some(old) = entry.value_mut()
        {
            match write {
                Write::Value(new) if new.len() == old.len() => {
                    old.copy_from_slice(new);
                    return;
                }
                Write::Value(new) => {
                    self.bytes = self.bytes - old.len() + new.len();
                    *entry = Entry::new(key, Cached::Value(new));
                    return;
                }
                Write::Unknown => {
                    self.forget(key);
                    return;
                }
                Write::Absent | Write::Dir => {}
            }
        }
        if self.below.contains(&hash_of(key)) {
            // Entries below the path may describe what it no longer holds.
            self.clear();
        }
        match write {
            Write::Value(value) => self.set(key, Cached::Value(value)),
            Write::Absent => self.set(key, Cached::Absent),
            Write::Dir => self.set(key, Cached::Dir),
            Write::Unknown => self.forget(key),
        }
        for prefix in strict_prefixes(key) {
            // A removal may empty (and so remove) the directories above;
            // anything else leaves them directories.
            match write {
                Write::Absent => self.forget(prefix),
                _ => {
                    if let Some(entry) = find_mut(&mut self.entries, prefix)
                        && entry.cached() != Cached::Dir
                    {
                        let weight = entry.weight();
                        *entry = Entry::new(prefix, Cached::Dir);
                        self.bytes = self.bytes - weight + entry.weight();
                    }
                }
            }
        }
    }
}

fn find_mut<'a>(entries: &'a mut HashTable<Entry>, key: &[u8]) -> Option<&'a mut Entry> {
    entries.find_mut(hash_of(key), |e| e.key() == key)
}

/// Empties the map and forgets the pending carry when dropped unfinished.
struct EmptiedUnlessDone<'a>(&'a mut Inner, bool);

impl Drop for EmptiedUnlessDone<'_> {
    fn drop(&mut self) {
        if !self.1 {
            self.0.clear();
            self.0.pending = None;
        }
    }
}

fn cached_len<V: AsRef<[u8]>>(held: &Cached<V>) -> usize {
    match held {
        Cached::Value(v) => v.as_ref().len(),
        _ => 0,
    }
}

impl FlatCache {
    /// A cache of at most `budget` bytes (counted roughly: paths, values
    /// and a fixed cost per entry); 0 holds nothing.
    pub(crate) fn new(budget: u64) -> FlatCache {
        FlatCache {
            inner: RwLock::new(Inner { window_end: WINDOW, ..Inner::default() }),
            budget: usize::try_from(budget).unwrap_or(usize::MAX),
            armed: AtomicBool::new(budget > 0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            carries: AtomicU64::new(0),
        }
    }

    /// Whether trees log their updates and read from the cache: it has a
    /// budget and is not resting (see [`FlatCache::committed`]).
    pub(crate) fn is_on(&self) -> bool {
        self.armed.load(Ordering::Relaxed)
    }

    /// Calls `f` on what `key` holds in the tree of commit `at`, if known
    /// (asked only of a cache that [`FlatCache::is_on`]).
    pub(crate) fn get<T>(&self, at: &Hash, key: &Key, f: impl FnOnce(&Cached<&[u8]>) -> T) -> Option<T> {
        let inner = self.inner.read();
        let found = if inner.at.as_ref() == Some(at) { inner.get(&key.0).map(|e| f(&e.cached())) } else { None };
        debug_assert!(found.is_none() || inner.pending.is_none(), "no read is answered while a commit's carry is pending");
        let counter = if found.is_some() { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Notes what `key` holds in the tree of commit `at`, read from it.
    pub(crate) fn insert(&self, at: &Hash, key: &Key, held: Cached) {
        // A resting cache notes nothing (checked again under the lock).
        if !self.is_on() {
            return;
        }
        let mut inner = self.inner.write();
        // Armed is set under the lock: a cache that came to rest while
        // this read waited for it stays empty.
        if inner.pending.is_some() || !self.is_on() {
            // A commit is being made: its carried entries stay its own.
            return;
        }
        if inner.at.as_ref() != Some(at) {
            // A reader's cache follows the commit it reads, once empty.
            if !inner.entries.is_empty() {
                return;
            }
            inner.at = Some(*at);
        }
        if inner.bytes + ENTRY_OVERHEAD + key.0.len() + cached_len(&held) > self.budget {
            inner.clear();
        }
        inner.set(&key.0, held.as_ref());
    }

    /// A token naming one commit's carry (see [`FlatCache::carry`]).
    pub(crate) fn next_carry(&self) -> u64 {
        self.carries.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The first of a commit's two steps moving the cache to it: applies
    /// the updates `writes` logged (`None`: not known) to a tree taken from
    /// `writes.base`, while the commit is written (on the commit's helper
    /// thread when it has one, see `store::write::hashing`), and leaves the cache
    /// at no commit, noting no read, until [`FlatCache::committed`] names
    /// the commit of carry `token` (or [`FlatCache::abandon`] empties the
    /// cache if it failed). A carry while another is pending (commits on
    /// two threads) empties the cache: the first to be named finds its
    /// carry gone.
    pub(crate) fn carry(&self, token: u64, writes: Option<&Writes>) {
        if self.budget == 0 {
            return;
        }
        let mut inner = self.inner.write();
        inner.window_writes += writes.map_or(0, |w| w.len() as u64);
        let alone = inner.pending.is_none();
        inner.pending = Some(token);
        if !self.is_on() {
            return;
        }
        let continues = alone && writes.is_some_and(|w| w.base.is_some() && w.base == inner.at);
        if !continues {
            inner.clear();
        }
        // No reader takes the entries for the last commit's any more.
        inner.at = None;
        match writes.filter(|w| alone && w.complete) {
            Some(writes) => {
                // A carry cut short (a panic) leaves the map empty, and
                // its commit unnamed.
                let mut inner = EmptiedUnlessDone(&mut inner, false);
                let mut applied = 0;
                for (key, write) in writes.updates() {
                    inner.0.apply(key, write);
                    applied += 1;
                }
                assert_eq!(applied, writes.len(), "a carry applies every update its tree logged");
                inner.1 = true;
            }
            None => inner.clear(),
        }
    }

    /// Empties the cache after the commit of carry `token` failed.
    pub(crate) fn abandon(&self, token: u64) {
        let mut inner = self.inner.write();
        if inner.pending == Some(token) {
            inner.pending = None;
            inner.clear();
            inner.at = None;
        }
    }

    /// Names `commit`, whose updates carry `token` applied; a carry that
    /// another replaced since (see [`FlatCache::carry`]) leaves the cache
    /// as it is.
    ///
    /// Like InnoDB's adaptive hash index, the cache is kept only while it
    /// pays: every [`WINDOW`] commits, if the reads it answered are fewer
    /// than an eighth of the updates logged (a read it answers saves a walk
    /// of several inodes; logging and carrying an update over cost a
    /// fraction of one), it empties and rests for [`REST`] commits: trees
    /// taken meanwhile neither log nor read from it. Then it starts again,
    /// empty.
    pub(crate) fn committed(&self, commit: Hash, token: u64) {
        if self.budget == 0 {
            return;
        }
        let mut inner = self.inner.write();
        let carried = inner.pending == Some(token);
        if carried {
            inner.pending = None;
        }
        inner.commits += 1;
        if inner.commits >= inner.window_end {
            // The end of a window judged, or of a rest.
            let hits_now = self.hits.load(Ordering::Relaxed);
            let pays = (hits_now - inner.window_hits) * 8 >= inner.window_writes;
            let rest = self.is_on() && !pays;
            if !rest && !self.is_on() {
                assert!(inner.entries.is_empty() && inner.at.is_none(), "a resting flat cache starts again empty");
            }
            self.armed.store(!rest, Ordering::Relaxed);
            inner.window_end = inner.commits + if rest { REST } else { WINDOW };
            inner.window_hits = hits_now;
            inner.window_writes = 0;
        }
        if !self.is_on() {
            inner.clear();
            inner.at = None;
            return;
        }
        if carried {
            inner.at = Some(commit);
        }
        if inner.bytes > self.budget {
            inner.clear();
        }
    }

    /// Entries held, their weight in bytes, lookups answered and not.
    pub(crate) fn counts(&self) -> (usize, u64, u64, u64) {
        let inner = self.inner.read();
        (inner.entries.len(), inner.bytes as u64, self.hits.load(Ordering::Relaxed), self.misses.load(Ordering::Relaxed))
    }
}

/// An update as the cache learns it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Write<'a> {
    /// The path now holds this contents.
    Value(&'a [u8]),
    /// The path now holds nothing.
    Absent,
    /// The path now holds a directory.
    Dir,
    /// The path holds a contents too long to hold, or one not known.
    Unknown,
}

/// One logged update: where its key and value end in `Writes::bytes`.
#[derive(Clone, Copy, Debug)]
struct Logged {
    key_end: usize,
    end: usize,
    kind: Kind,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Value,
    Absent,
    Dir,
    Unknown,
}

/// The updates of a tree since it was taken from commit `base` (`None`:
/// made empty), in order: those of `earlier` (shared with clones), then
/// each of this link's, its encoded path then its value in one buffer, so
/// that logging an update is one copy.
#[derive(Debug)]
pub(crate) struct Writes {
    pub(crate) base: Option<Hash>,
    earlier: Option<Arc<Writes>>,
    /// Updates logged, `earlier`'s included.
    count: usize,
    bytes: Vec<u8>,
    ops: Vec<Logged>,
    /// False once an update was not logged: the tree no longer knows what
    /// it changed.
    complete: bool,
}

impl Drop for Writes {
    /// Drops the links only this log holds one by one: a chain of
    /// thousands would overflow the stack dropped recursively.
    fn drop(&mut self) {
        let mut next = self.earlier.take();
        while let Some(link) = next {
            next = match Arc::try_unwrap(link) {
                Ok(mut link) => link.earlier.take(),
                Err(_) => None,
            };
        }
    }
}

impl Writes {
    pub(crate) fn new(base: Option<Hash>) -> Arc<Writes> {
        Arc::new(Writes::empty(base, true))
    }

    fn empty(base: Option<Hash>, complete: bool) -> Writes {
        Writes { base, earlier: None, count: 0, bytes: Vec::new(), ops: Vec::new(), complete }
    }

    /// Whether the tree holds what commit `base` holds: it made no update.
    pub(crate) fn is_clean(&self) -> bool {
        self.complete && self.count == 0
    }

    /// Updates logged.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// How many updates the tree made, if it logged them all.
    pub(crate) fn known_len(&self) -> Option<usize> {
        self.complete.then_some(self.count)
    }

    /// Logs an update of `steps`, in a new link when a clone shares `writes`.
    pub(crate) fn log(writes: &mut Arc<Writes>, steps: &[&[u8]], write: Write<'_>) {
        if !writes.complete {
            return;
        }
        if writes.count >= MAX_WRITES {
            Writes::lose(writes);
            return;
        }
        if Arc::get_mut(writes).is_none() {
            let mut link = Writes::empty(writes.base, true);
            link.count = writes.count;
            link.earlier = Some(Arc::clone(writes));
            *writes = Arc::new(link);
        }
        let w = Arc::get_mut(writes).expect("a link of its own");
        for step in steps {
            encode_step(&mut w.bytes, step);
        }
        let key_end = w.bytes.len();
        let kind = match write {
            Write::Value(value) => {
                w.bytes.extend_from_slice(value);
                Kind::Value
            }
            Write::Absent => Kind::Absent,
            Write::Dir => Kind::Dir,
            Write::Unknown => Kind::Unknown,
        };
        w.ops.push(Logged { key_end, end: w.bytes.len(), kind });
        w.count += 1;
        debug_assert_eq!(
            w.count,
            w.earlier.as_ref().map_or(0, |earlier| earlier.count) + w.ops.len(),
            "a link's count is its shared updates' and its own"
        );
    }

    /// Stops logging: what the tree changed is no longer known.
    pub(crate) fn lose(writes: &mut Arc<Writes>) {
        if writes.complete {
            *writes = Arc::new(Writes::empty(writes.base, false));
        }
    }

    /// The updates, in order: the oldest link's first.
    fn updates(&self) -> impl Iterator<Item = (&[u8], Write<'_>)> {
        let mut links = Vec::new();
        let mut link = Some(self);
        while let Some(this) = link {
            links.push(this);
            link = this.earlier.as_deref();
        }
        links.into_iter().rev().flat_map(Writes::own_updates)
    }

    /// This link's updates, in order.
    fn own_updates(&self) -> impl Iterator<Item = (&[u8], Write<'_>)> {
        let mut start = 0;
        self.ops.iter().map(move |op| {
            debug_assert!(
                start < op.key_end && (op.key_end == op.end || matches!(op.kind, Kind::Value)),
                "a logged update has a path, and only a contents has bytes after it"
            );
            let key = &self.bytes[start..op.key_end];
            let write = match op.kind {
                Kind::Value => Write::Value(&self.bytes[op.key_end..op.end]),
                Kind::Absent => Write::Absent,
                Kind::Dir => Write::Dir,
                Kind::Unknown => Write::Unknown,
            };
            start = op.end;
            (key, write)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(n: u8) -> Hash {
        Hash::of_bytes(&[n])
    }

    /// A log of value updates of `paths` on a tree taken from `base`.
    fn writes(base: Hash, updates: &[(&[&[u8]], &[u8])]) -> Arc<Writes> {
        let mut writes = Writes::new(Some(base));
        for (steps, value) in updates {
            Writes::log(&mut writes, steps, Write::Value(value));
        }
        writes
    }

    fn read(cache: &FlatCache, at: Hash, steps: &[&[u8]]) -> Option<Cached> {
        cache.get(&at, &Key::new(steps), |held| match held {
            Cached::Absent => Cached::Absent,
            Cached::Dir => Cached::Dir,
            Cached::Value(value) => Cached::Value(Box::from(*value)),
        })
    }

    /// Two commits' carries interleaved (commits on two threads): the
    /// first to be named finds its carry replaced and names nothing, so no
    /// read of it is answered with the other's updates; the second is
    /// named with an empty cache; a failed commit empties the cache.
    #[test]
    fn interleaved_carries_name_no_commit_with_the_other_s_updates() {
        let cache = FlatCache::new(1 << 20);
        let (base, first, second) = (hash(0), hash(1), hash(2));
        let path: &[&[u8]] = &[b"a", b"v"];
        cache.insert(&base, &Key::new(path), Cached::Value(b"base".to_vec().into()));
        let (a, b) = (cache.next_carry(), cache.next_carry());
        cache.carry(a, Some(&writes(base, &[(path, b"first")])));
        cache.carry(b, Some(&writes(base, &[(path, b"second")])));
        cache.committed(first, a);
        assert_eq!(read(&cache, first, path), None, "the first commit read the second's update");
        // No read is noted while the second commit is being made.
        cache.insert(&first, &Key::new(path), Cached::Value(b"first".to_vec().into()));
        cache.committed(second, b);
        assert_eq!(read(&cache, second, path), None, "the second commit's carry was emptied");
        cache.insert(&second, &Key::new(path), Cached::Value(b"second".to_vec().into()));
        assert_eq!(read(&cache, second, path), Some(Cached::Value(b"second".to_vec().into())));

        // In turn, a commit's carry is named with its updates.
        let c = cache.next_carry();
        cache.carry(c, Some(&writes(second, &[(path, b"third")])));
        assert_eq!(read(&cache, second, path), None, "a read of the parent answered during the carry");
        cache.committed(hash(3), c);
        assert_eq!(read(&cache, hash(3), path), Some(Cached::Value(b"third".to_vec().into())));

        // A failed commit empties the cache; naming a commit later finds nothing carried.
        let d = cache.next_carry();
        cache.carry(d, Some(&writes(hash(3), &[(path, b"fourth")])));
        cache.abandon(d);
        cache.committed(hash(4), d);
        assert_eq!(read(&cache, hash(4), path), None);
        assert_eq!(read(&cache, hash(3), path), None);
    }
}
