//! The walk: every record reachable from the roots, re-hashed.
//!
//! A record refers only to earlier records, so taking the highest pending
//! offset first visits every reachable record once, after all of its
//! referrers (as `gc_plan::live_records` does). Each pending offset carries
//! the claims its referrers made about it: what it is (a commit, a
//! directory's root inode, an inode at some depth and position, a blob,
//! the base of a tree patch) and the hash their pointer gives. Visiting a
//! record computes its hash from its own bytes and its pointers' hashes
//! (a tree patch resolved against its base chain, see `tree`; a directory
//! of at most 256 entries stored as a tree inode hashed flat from its
//! children's entries, loaded through the store's cache) and compares it
//! with each claim; then it claims its children.
//!
//! A tree patch claims only the children it changed; the others it
//! inherits from its base, which it claims as such, passing down which
//! patches inherit which children (the indices changed on the way are
//! masked, as in `gc_plan`). So a child shared by a chain of patches is
//! claimed once, by the record that holds its pointer, and a child that a
//! collection may have discarded because every patch replaced it is never
//! asked for.
//!
//! A tree inode's entry count is checked against the sum of its children's:
//! a child's pending entry lists the tree inodes (its parent, and the
//! patches inheriting it) whose count it is part of, and each of those
//! keeps a pending count until its last child is visited.
//!
//! Memory: the pending offsets with their claims, the pending counts and
//! the bases read ahead: the frontier of the walk, not the set of visited
//! records.
//!
//! Invariants:
//! - A record claims only records below it (the decoders refuse a pointer
//!   that is not), so offsets are visited strictly from the highest down,
//!   each once (asserted in `claim` and `walk`).
//! - The frontier drains: once no offset is pending, no claim is left; and
//!   with nothing found wrong, no base read ahead is left (asserted in
//!   `walk`).

mod tree;

use pando_core::Hash;
use pando_core::dir::{self, MAX_DEPTH};
use pando_core::inode::ENTRIES;
use pando_core::tezos::contents_hash;
use smallvec::SmallVec;
use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;

use super::{CheckPhase, CheckProgress, Problems, RecordCounts};
use crate::format::commit::{ABSENT_PARENT, CommitRecord};
use crate::format::node::{decode_values, entries_belong};
use crate::format::patch::{MAX_PATCH_CHAIN, ValuesPatch};
use crate::format::record::RecordKind;
use crate::node::{Body, Child, Leaf, Ptr};
use crate::pack::window::{Fault, Found, Window};
use crate::store::{Repo, index_file};
use tree::Pointers;

// The deepest inode the walk follows is the trie's own bound: a position
// is 5 bits a level in a u64.
const _: () = assert!(5 * MAX_DEPTH <= 64);
/// The referrer of a commit record: the index.
const INDEX: u64 = u64::MAX;
/// How many records between two progress reports.
const PROGRESS_EVERY: u64 = 1 << 14;

/// What a referrer says a record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Commit,
    /// The root inode of a directory (`top`: of a commit).
    Dir {
        top: bool,
    },
    /// An inode below a directory root, at `depth`, reached through the
    /// child indices packed in `path` (5 bits a level, the root's lowest).
    Inode {
        depth: u8,
        path: u64,
    },
    Blob,
    /// The base of a tree patch at `depth` and `path`: its hash is not claimed.
    Base {
        depth: u8,
        path: u64,
    },
    /// The base of a value patch: a value inode or patch, its hash not
    /// claimed, its children claimed by the patches over it.
    ValuesBase,
}

impl Role {
    fn describe(&self) -> String {
        match self {
            Role::Commit => "a commit".into(),
            Role::Dir { top: true } => "a commit's root directory".into(),
            Role::Dir { top: false } => "a directory".into(),
            Role::Inode { depth, .. } => format!("an inode at depth {depth}"),
            Role::Blob => "a blob".into(),
            Role::Base { depth, .. } => format!("the base of a tree patch at depth {depth}"),
            Role::ValuesBase => "the base of a value patch".into(),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Claim {
    role: Role,
    hash: Hash,
    /// The offset of the (first) record making the claim ([`INDEX`] for the index).
    by: u64,
}

/// What the walk knows of a pending record.
#[derive(Default)]
struct Pending {
    /// The distinct claims made about it (a shared record gets the same
    /// claim from many referrers).
    claims: SmallVec<[Claim; 1]>,
    /// The tree inodes whose entry count it is part of, once per pointer.
    parents: SmallVec<[u64; 2]>,
    /// As the base of tree patches: the patches inheriting its children,
    /// with the indices they do not inherit (changed on the way).
    heirs: SmallVec<[(u64, u32); 1]>,
}

/// Hashes offsets by a multiplication: they are not chosen by an attacker
/// who could gain from collisions, and the walk looks one up per pointer.
#[derive(Default)]
struct OffsetHasher(u64);

impl Hasher for OffsetHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.write_u64(u64::from_le_bytes(word.try_into().expect("8 bytes")));
        }
        let mut last = [0u8; 8];
        last[..words.remainder().len()].copy_from_slice(words.remainder());
        self.write_u64(u64::from_le_bytes(last));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(26);
    }
}

type OffsetMap<V> = HashMap<u64, V, BuildHasherDefault<OffsetHasher>>;

impl Claim {
    fn referrer(&self) -> String {
        if self.by == INDEX { "the index".into() } else { format!("the pointer in the record at offset {}", self.by) }
    }
}

/// A tree inode's entry count, while its children are pending.
struct Count {
    expected: u64,
    remaining: u32,
    sum: u64,
    broken: bool,
}

/// What the walk did.
pub(super) struct Walked {
    pub counts: RecordCounts,
    pub commits: u64,
    pub bytes_read: u64,
    pub hashed_bytes: u64,
}

/// Where the record being visited lies, for problems.
struct Here<'a> {
    at: u64,
    file: &'a str,
    position: u64,
}

struct State<'a> {
    repo: &'a Repo,
    problems: &'a mut Problems,
    /// The pending offsets, highest first, and what is known of each.
    order: BinaryHeap<u64>,
    pending: OffsetMap<Pending>,
    counts: OffsetMap<Count>,
    /// Tree records read ahead as the bases of patches, until visited.
    bases: OffsetMap<Rc<Pointers>>,
    /// Scratch space for the encodings hashed.
    buf: Vec<u8>,
    walked: RecordCounts,
    commits: u64,
    /// Bytes of the encodings hashed.
    hashed_bytes: u64,
}

/// Re-hashes every record reachable from the commit records `roots`
/// (hash from the index, offset).
pub(super) fn walk(
    repo: &Repo,
    roots: Vec<(Hash, u64)>,
    problems: &mut Problems,
    progress: &mut dyn FnMut(CheckProgress),
) -> Walked {
    let mut state = State {
        repo,
        problems,
        order: BinaryHeap::new(),
        pending: OffsetMap::default(),
        counts: OffsetMap::default(),
        bases: OffsetMap::default(),
        buf: Vec::new(),
        walked: RecordCounts::default(),
        commits: 0,
        hashed_bytes: 0,
    };
    for (hash, offset) in roots {
        state.claim(offset, Claim { role: Role::Commit, hash, by: INDEX }, &[]);
    }
    let top = state.order.peek().map_or(0, |&o| o + 1);
    let mut window = Window::default();
    let mut visited = 0u64;
    let mut last = None;
    while let Some(at) = state.order.pop() {
        if state.problems.full() {
            break;
        }
        debug_assert!(last.is_none_or(|last| at < last), "the walk visits offsets strictly from the highest down");
        last = Some(at);
        let Some(pending) = state.pending.remove(&at) else { continue };
        // Every patch over a base read ahead has been visited: it is its turn.
        let known = state.bases.remove(&at);
        let entries = match window.read(&repo.read.pack, at) {
            Ok(found) => state.visit(at, &pending, &found, &window, known),
            Err(fault) => {
                state.unreadable(at, &pending, fault);
                None
            }
        };
        for &parent in &pending.parents {
            state.count(parent, entries);
        }
        visited += 1;
        if visited.is_multiple_of(PROGRESS_EVERY) {
            progress(CheckProgress { phase: CheckPhase::Walk, done: top - at, total: top });
        }
    }
    // Not stopped at the cap: the walk went to the end of the frontier.
    if state.order.is_empty() && !state.problems.full() {
        assert!(state.pending.is_empty(), "every claimed record is visited: no claim outlives the walk");
        if state.problems.list.is_empty() {
            assert!(state.bases.is_empty(), "every base read ahead is visited, and dropped then");
        }
    }
    // Every child claimed is visited once and counted: with nothing found
    // wrong, every count must have been completed.
    if state.order.is_empty() && state.problems.list.is_empty() {
        let mut left: Vec<(u64, u32)> = state.counts.iter().map(|(&at, count)| (at, count.remaining)).collect();
        left.sort_unstable();
        for (at, remaining) in left {
            state.problem_at(at, format!("its entry count was not checked: {remaining} of its children were not reached"));
        }
    }
    progress(CheckProgress { phase: CheckPhase::Walk, done: top, total: top });
    Walked { counts: state.walked, commits: state.commits, bytes_read: window.bytes_read, hashed_bytes: state.hashed_bytes }
}

/// The child indices packed in `path`, from the root down to `depth`.
fn unpack(path: u64, depth: u8) -> SmallVec<[usize; 12]> {
    (0..u32::from(depth)).map(|d| ((path >> (5 * d)) & 31) as usize).collect()
}

impl State<'_> {
    /// Notes a claim about the record at `offset`, a part of the entry
    /// counts of the tree inodes `parents`.
    fn claim(&mut self, offset: u64, claim: Claim, parents: &[u64]) -> &mut Pending {
        debug_assert!(claim.by == INDEX || offset < claim.by, "a record claims only records below it");
        let pending = match self.pending.entry(offset) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => {
                self.order.push(offset);
                entry.insert(Pending::default())
            }
        };
        if !pending.claims.iter().any(|c| c.role == claim.role && c.hash == claim.hash) {
            pending.claims.push(claim);
        }
        pending.parents.extend_from_slice(parents);
        pending
    }

    fn problem(&mut self, here: &Here<'_>, what: impl Into<String>) {
        self.problems.push(here.file, here.position, Some(here.at), what);
    }

    /// A problem about the record at `offset` found while visiting another
    /// one (a referrer): located where that record lies.
    fn problem_at(&mut self, offset: u64, what: String) {
        match self.repo.read.pack.region(offset) {
            Ok(region) => self.problems.push(region.name, region.pos + (offset - region.start), Some(offset), what),
            Err(_) if offset == INDEX => self.problems.push("index", 0, None, what),
            Err(_) => self.problems.push("pack", offset, Some(offset), what),
        }
    }

    /// Compares a hash computed from the record's bytes with a claim.
    fn verify(&mut self, here: &Here<'_>, claim: &Claim, what: &str, found: Hash) {
        if found != claim.hash {
            let what = format!("hash mismatch: {what} hashes to {found}, {} says {}", claim.referrer(), claim.hash);
            self.problem(here, what);
        }
    }

    fn wrong_kind(&mut self, here: &Here<'_>, claim: &Claim, found: &str) {
        let what = format!("{} expected ({}), found {found}", claim.role.describe(), claim.referrer());
        self.problem(here, what);
    }

    /// Adds a child's entry count (`None`: unknown, the child is damaged)
    /// to its parent's pending count; compares once the last one is in.
    fn count(&mut self, parent: u64, entries: Option<u64>) {
        let Some(count) = self.counts.get_mut(&parent) else { return };
        match entries {
            Some(n) => count.sum += n,
            None => count.broken = true,
        }
        count.remaining = count.remaining.saturating_sub(1);
        if count.remaining == 0
            && let Some(Count { expected, sum, broken: false, .. }) = self.counts.remove(&parent)
            && sum != expected
        {
            self.problem_at(parent, format!("tree inode says it holds {expected} entries, its children hold {sum}"));
        }
    }

    fn unreadable(&mut self, at: u64, pending: &Pending, fault: Fault) {
        let Some(&claim) = pending.claims.first() else { return };
        let others = pending.claims.len() + pending.parents.len() + pending.heirs.len() > 2;
        let others = if others { " (and other referrers)" } else { "" };
        match fault {
            Fault::Collected => {
                let what = format!("refers to the record at offset {at}, which the store no longer holds{others}");
                self.problem_at(claim.by, what);
            }
            Fault::Damaged { file, position, what } => {
                let what = format!("{what}; reached as {} from {}{others}", claim.role.describe(), claim.referrer());
                self.problems.push(file, position, Some(at), what);
            }
        }
    }

    /// Checks the record at `at` against its claims and claims its
    /// children; returns its entry count if it is an inode.
    fn visit(&mut self, at: u64, pending: &Pending, found: &Found, window: &Window, known: Option<Rc<Pointers>>) -> Option<u64> {
        let here = Here { at, file: window.file(), position: found.position };
        let claims = &pending.claims[..];
        let payload = window.payload(found);
        self.walked.add(found.kind, found.total);
        match found.kind {
            RecordKind::Commit => {
                self.commit(&here, claims, payload);
                None
            }
            RecordKind::Blob => {
                let hash = contents_hash(payload);
                self.hashed_bytes += 8 + payload.len() as u64;
                for claim in claims {
                    match claim.role {
                        Role::Blob => self.verify(&here, claim, "the blob", hash),
                        _ => self.wrong_kind(&here, claim, "a blob"),
                    }
                }
                None
            }
            RecordKind::Values => match decode_values(payload, here.at, &self.repo.read.dict.read()) {
                Ok(inode) => self.values(&here, claims, &inode),
                Err(reason) => {
                    self.problem(&here, format!("damaged value inode: {reason}"));
                    None
                }
            },
            RecordKind::ValuesPatch => self.values_patch(&here, claims, payload, window),
            RecordKind::Tree | RecordKind::TreePatch => self.tree(&here, pending, found.kind, payload, window, known),
            RecordKind::Dict => {
                for claim in claims {
                    self.wrong_kind(&here, claim, "a dictionary record");
                }
                None
            }
        }
    }

    fn commit(&mut self, here: &Here<'_>, claims: &[Claim], payload: &[u8]) {
        let record = match CommitRecord::decode(payload, here.at) {
            Ok(record) => record,
            Err(reason) => return self.problem(here, format!("damaged commit record: {reason}")),
        };
        let hash = record.info().hash();
        let mut wanted = false;
        for claim in claims {
            match claim.role {
                Role::Commit => {
                    wanted = true;
                    self.verify(here, claim, "the commit record", hash);
                }
                _ => self.wrong_kind(here, claim, "a commit record"),
            }
        }
        if !wanted {
            return;
        }
        self.commits += 1;
        for (parent, offset) in &record.parents {
            let known = self.repo.read.index.read().get(parent).copied();
            match known {
                // The parent of a commit imported from a snapshot.
                None if *offset == ABSENT_PARENT => {}
                None => self.problem(here, format!("parent {parent} is not in the index")),
                // Committed after the import, from the same fields.
                Some(_) if *offset == ABSENT_PARENT => {}
                Some(o) if o != *offset && o != index_file::COLLECTED => {
                    self.problem(here, format!("parent {parent} is at offset {offset} here, at {o} in the index"))
                }
                Some(_) => {}
            }
        }
        self.claim(record.root_offset, Claim { role: Role::Dir { top: true }, hash: record.root_hash, by: here.at }, &[]);
    }

    /// Checks a value patch: resolved over its base chain (read ahead of
    /// the walk, one small read each), it is checked as the value inode it
    /// gives, whose children it claims, kept ones included; its base is
    /// claimed as such (its structure checked, its hash and children not).
    fn values_patch(&mut self, here: &Here<'_>, claims: &[Claim], payload: &[u8], window: &Window) -> Option<u64> {
        let patch = match ValuesPatch::decode(payload, here.at, &self.repo.read.dict.read()) {
            Ok(patch) => patch,
            Err(reason) => {
                self.problem(here, format!("damaged value patch: {reason}"));
                return None;
            }
        };
        self.claim(patch.base, Claim { role: Role::ValuesBase, hash: Hash::default(), by: here.at }, &[]);
        if claims.iter().all(|claim| claim.role == Role::ValuesBase) {
            return Some(patch.count as u64);
        }
        let resolved = self.values_base(patch.base, window, MAX_PATCH_CHAIN - 1).and_then(|base| patch.apply(&base));
        match resolved {
            Ok(inode) => self.values(here, claims, &inode),
            Err(what) => {
                self.problem(here, format!("cannot resolve the value patch over its base at offset {}: {what}", patch.base));
                None
            }
        }
    }

    /// The record at `offset`, a base read ahead of the walk: from the
    /// window when it holds it, else one small read.
    fn record_ahead<'w>(&self, offset: u64, window: &'w Window) -> Result<(RecordKind, Cow<'w, [u8]>), String> {
        Ok(match window.peek(offset) {
            Some((kind, payload)) => (kind, Cow::Borrowed(payload)),
            None => {
                let (kind, payload) = self.repo.read.pack.read_record(offset).map_err(|e| e.to_string())?;
                (kind, Cow::Owned(payload))
            }
        })
    }

    /// The value inode the record at `offset` gives, following at most
    /// `patches` value patches.
    fn values_base(&self, offset: u64, window: &Window, patches: u8) -> Result<crate::node::Inode, String> {
        let (kind, payload) = self.record_ahead(offset, window)?;
        let payload = &payload[..];
        let dict = self.repo.read.dict.read();
        match kind {
            RecordKind::Values => {
                decode_values(payload, offset, &dict).map_err(|reason| format!("damaged value inode: {reason}"))
            }
            RecordKind::ValuesPatch => {
                let Some(patches) = patches.checked_sub(1) else {
                    return Err(format!("a chain of value patches longer than {MAX_PATCH_CHAIN}"));
                };
                let patch =
                    ValuesPatch::decode(payload, offset, &dict).map_err(|reason| format!("damaged value patch: {reason}"))?;
                drop(dict);
                patch.apply(&self.values_base(patch.base, window, patches)?)
            }
            other => Err(format!("the base at offset {offset} is a {other:?} record")),
        }
    }

    fn values(&mut self, here: &Here<'_>, claims: &[Claim], inode: &crate::node::Inode) -> Option<u64> {
        let Body::Values(values) = &inode.body else { return None };
        let mut wanted = false;
        for claim in claims {
            match claim.role {
                Role::Dir { top } => {
                    wanted = true;
                    if !top && values.is_empty() {
                        self.problem(here, format!("an empty directory ({})", claim.referrer()));
                    }
                    let hash = self.values_hash(values.iter(), true);
                    self.verify(here, claim, "the directory", hash);
                }
                Role::Inode { depth, path } => {
                    wanted = true;
                    if values.is_empty() {
                        self.problem(here, format!("an empty inode below a directory root ({})", claim.referrer()));
                    }
                    if !entries_belong(inode, &unpack(path, depth)) {
                        self.problem(here, format!("entries that do not belong where {} puts them", claim.referrer()));
                    }
                    let hash = self.values_hash(values.iter(), false);
                    self.verify(here, claim, "the inode", hash);
                }
                Role::ValuesBase => {}
                _ => self.wrong_kind(here, claim, "a value inode"),
            }
        }
        if wanted {
            for child in values.children() {
                match child {
                    Child::Dir(Ptr::Stored { offset, hash }) => {
                        self.claim(*offset, Claim { role: Role::Dir { top: false }, hash: *hash, by: here.at }, &[]);
                    }
                    Child::Contents(Leaf::Blob { offset, hash }) => {
                        self.claim(*offset, Claim { role: Role::Blob, hash: *hash, by: here.at }, &[]);
                    }
                    _ => {}
                }
            }
        }
        Some(values.len() as u64)
    }

    /// The hash of a value inode's entries: as a directory (`flat`), or
    /// as an inode below a directory root.
    fn values_hash<'e>(&mut self, entries: impl ExactSizeIterator<Item = (&'e [u8], &'e Child)> + Clone, flat: bool) -> Hash {
        let mut hashes: SmallVec<[Hash; ENTRIES]> = SmallVec::new();
        for (_, child) in entries.clone() {
            hashes.push(match child {
                Child::Contents(Leaf::Inline(inline)) => {
                    self.hashed_bytes += 8 + inline.bytes().len() as u64;
                    contents_hash(inline.bytes())
                }
                // Decoding gives inline contents and blob pointers only.
                Child::Contents(Leaf::Value(_) | Leaf::Staged(_)) => Hash::default(),
                Child::Contents(Leaf::Blob { hash, .. }) | Child::Dir(Ptr::Stored { hash, .. }) => *hash,
                // Decoding gives stored pointers only.
                Child::Dir(Ptr::Mem(_, _)) => Hash::default(),
            });
        }
        let count = entries.len();
        let named = entries.zip(&hashes).map(|((step, child), hash)| (step, child.kind(), hash));
        let hash = dir::values_hash(&mut self.buf, flat, count, named);
        self.hashed_bytes += self.buf.len() as u64;
        hash
    }
}
