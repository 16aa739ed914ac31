//! The walk: every record reachable from the roots, re-hashed.
//!
//! A record refers only to earlier records, so taking the highest pending
//! offset first visits every reachable record once, after all of its
//! referrers (as `gc_plan::live_records` does). Each pending offset carries
//! the claims its referrers made about it: what it is (a commit, a
//! directory's root inode, an inode at some depth and position, a blob,
//! the base of a tree patch) and the hash their pointer gives. Visiting a
//! record computes its hash from its own bytes and its pointers' hashes
//! (a tree patch resolved against its base first; a directory of at most
//! 256 entries stored as a tree inode hashed flat from its children's
//! entries, loaded through the store's cache) and compares it with each
//! claim; then it claims its children.
//!
//! A tree inode's entry count is checked against the sum of its children's:
//! each child's claim names its parent, whose pending count is kept until
//! its last child is visited.
//!
//! Memory: the pending offsets with their claims and the pending counts,
//! which is the frontier of the walk, not the set of visited records.

use pando_core::Hash;
use pando_core::tezos::contents_hash;
use smallvec::SmallVec;
use std::collections::{BTreeMap, HashMap};

use super::window::{Fault, Found, Window};
use super::{CheckPhase, CheckProgress, Problems, RecordCounts};
use crate::format::node::{CommitRecord, MAX_PATCH_CHAIN, TreePatch, decode_tree, decode_values, entries_belong};
use crate::format::record::RecordKind;
use crate::store::{Repo, index_file};
use crate::tree::hash::{dir_hash, inode_hash};
use crate::tree::node::{Body, Child, Inode, Ptr};

/// Deepest inode the walk follows (a position is 5 bits a level in a u64):
/// 33 entries colliding at 12 levels of a 32-way hash do not happen.
const MAX_DEPTH: u32 = 12;
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
    /// The base of a tree patch at `depth`: its hash is not claimed.
    Base {
        depth: u8,
    },
}

impl Role {
    fn describe(&self) -> String {
        match self {
            Role::Commit => "a commit".into(),
            Role::Dir { top: true } => "a commit's root directory".into(),
            Role::Dir { top: false } => "a directory".into(),
            Role::Inode { depth, .. } => format!("an inode at depth {depth}"),
            Role::Blob => "a blob".into(),
            Role::Base { depth } => format!("the base of a tree patch at depth {depth}"),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Claim {
    role: Role,
    hash: Hash,
    /// The offset of the record making the claim ([`INDEX`] for the index).
    by: u64,
}

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
    pending: BTreeMap<u64, SmallVec<[Claim; 2]>>,
    counts: HashMap<u64, Count>,
    walked: RecordCounts,
    commits: u64,
}

/// Re-hashes every record reachable from the commit records `roots`
/// (hash from the index, offset).
pub(super) fn walk(
    repo: &Repo,
    roots: Vec<(Hash, u64)>,
    problems: &mut Problems,
    progress: &mut dyn FnMut(CheckProgress),
) -> Walked {
    let mut state =
        State { repo, problems, pending: BTreeMap::new(), counts: HashMap::new(), walked: RecordCounts::default(), commits: 0 };
    for (hash, offset) in roots {
        state.claim(offset, Claim { role: Role::Commit, hash, by: INDEX });
    }
    let top = state.pending.keys().next_back().map_or(0, |&o| o + 1);
    let mut window = Window::default();
    let mut visited = 0u64;
    while let Some((at, claims)) = state.pending.pop_last() {
        if state.problems.full() {
            break;
        }
        let pending = &state.pending;
        let found = window.read(&repo.pack, at, |floor| pending.range(floor..at).next().map(|(&o, _)| o));
        let entries = match found {
            Ok(found) => state.visit(at, &claims, &found, &window),
            Err(fault) => {
                state.unreadable(at, &claims, fault);
                None
            }
        };
        for claim in claims.iter().filter(|c| matches!(c.role, Role::Inode { .. })) {
            state.count(claim.by, entries);
        }
        visited += 1;
        if visited.is_multiple_of(PROGRESS_EVERY) {
            progress(CheckProgress { phase: CheckPhase::Walk, done: top - at, total: top });
        }
    }
    progress(CheckProgress { phase: CheckPhase::Walk, done: top, total: top });
    Walked { counts: state.walked, commits: state.commits, bytes_read: window.bytes_read }
}

/// The child indices packed in `path`, from the root down to `depth`.
fn unpack(path: u64, depth: u8) -> SmallVec<[usize; 12]> {
    (0..u32::from(depth)).map(|d| ((path >> (5 * d)) & 31) as usize).collect()
}

impl State<'_> {
    fn claim(&mut self, offset: u64, claim: Claim) {
        self.pending.entry(offset).or_default().push(claim);
    }

    fn problem(&mut self, here: &Here<'_>, what: impl Into<String>) {
        self.problems.push(here.file, here.position, Some(here.at), what);
    }

    /// A problem about the record at `offset` found while visiting another
    /// one (a referrer): located where that record lies.
    fn problem_at(&mut self, offset: u64, what: String) {
        match self.repo.pack.region(offset) {
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

    fn unreadable(&mut self, at: u64, claims: &[Claim], fault: Fault) {
        let Some(&claim) = claims.first() else { return };
        let others = match claims.len() {
            1 => String::new(),
            n => format!(" (and {} other referrers)", n - 1),
        };
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
    fn visit(&mut self, at: u64, claims: &[Claim], found: &Found, window: &Window) -> Option<u64> {
        let here = Here { at, file: window.file(), position: found.position };
        let payload = window.payload(found);
        self.walked.add(found.kind, found.total);
        match found.kind {
            RecordKind::Commit => {
                self.commit(&here, claims, payload);
                None
            }
            RecordKind::Blob => {
                let hash = contents_hash(payload);
                for claim in claims {
                    match claim.role {
                        Role::Blob => self.verify(&here, claim, "the blob", hash),
                        _ => self.wrong_kind(&here, claim, "a blob"),
                    }
                }
                None
            }
            RecordKind::Values => self.values(&here, claims, payload),
            RecordKind::Tree | RecordKind::TreePatch => self.tree(&here, claims, found.kind, payload),
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
            let known = self.repo.index.read().get(parent).copied();
            match known {
                None => self.problem(here, format!("parent {parent} is not in the index")),
                Some(o) if o != *offset && o != index_file::COLLECTED => {
                    self.problem(here, format!("parent {parent} is at offset {offset} here, at {o} in the index"))
                }
                Some(_) => {}
            }
        }
        self.claim(record.root_offset, Claim { role: Role::Dir { top: true }, hash: record.root_hash, by: here.at });
    }

    fn values(&mut self, here: &Here<'_>, claims: &[Claim], payload: &[u8]) -> Option<u64> {
        let decoded = decode_values(payload, here.at, &self.repo.dict.read());
        let inode = match decoded {
            Ok(inode) => inode,
            Err(reason) => {
                self.problem(here, format!("damaged value inode: {reason}"));
                return None;
            }
        };
        let Body::Values(entries) = &inode.body else { return None };
        let mut wanted = false;
        for claim in claims {
            match claim.role {
                Role::Dir { top } => {
                    wanted = true;
                    if !top && entries.is_empty() {
                        self.problem(here, format!("an empty directory ({})", claim.referrer()));
                    }
                    self.verify_hash(here, claim, &inode, true);
                }
                Role::Inode { depth, path } => {
                    wanted = true;
                    if entries.is_empty() {
                        self.problem(here, format!("an empty inode below a directory root ({})", claim.referrer()));
                    }
                    if !entries_belong(&inode, &unpack(path, depth)) {
                        self.problem(here, format!("entries that do not belong where {} puts them", claim.referrer()));
                    }
                    self.verify_hash(here, claim, &inode, false);
                }
                _ => self.wrong_kind(here, claim, "a value inode"),
            }
        }
        if wanted {
            for (_, child) in entries {
                match child {
                    Child::Dir(Ptr::Stored { offset, hash, .. }) => {
                        self.claim(*offset, Claim { role: Role::Dir { top: false }, hash: *hash, by: here.at })
                    }
                    Child::Blob { offset, hash } => self.claim(*offset, Claim { role: Role::Blob, hash: *hash, by: here.at }),
                    _ => {}
                }
            }
        }
        Some(entries.len() as u64)
    }

    /// Compares an inode's directory hash (`as_dir`) or inode hash with a claim.
    fn verify_hash(&mut self, here: &Here<'_>, claim: &Claim, inode: &Inode, as_dir: bool) {
        let computed = if as_dir { dir_hash(inode, self.repo) } else { inode_hash(inode, self.repo) };
        match computed {
            Ok(hash) => self.verify(here, claim, if as_dir { "the directory" } else { "the inode" }, hash),
            Err(e) => self.problem(here, format!("cannot hash it: {e}")),
        }
    }

    fn tree(&mut self, here: &Here<'_>, claims: &[Claim], kind: RecordKind, payload: &[u8]) -> Option<u64> {
        let Some(&depth) = payload.first() else {
            self.problem(here, "an empty tree record");
            return None;
        };
        let found = if kind == RecordKind::Tree { "a tree inode" } else { "a tree patch" };
        // The position the walk reached it at (depth, path), from the first
        // claim that agrees with the record; the others must agree with it.
        let mut position: Option<u64> = None;
        for claim in claims {
            let (claimed, path) = match claim.role {
                Role::Dir { .. } => (0, Some(0)),
                Role::Inode { depth, path } => (depth, Some(path)),
                Role::Base { depth } => (depth, None),
                _ => {
                    self.wrong_kind(here, claim, found);
                    continue;
                }
            };
            if claimed != depth {
                self.problem(
                    here,
                    format!("{} expected ({}), found {found} of depth {depth}", claim.role.describe(), claim.referrer()),
                );
            } else if let Some(path) = path {
                match position {
                    None => position = Some(path),
                    Some(first) if first != path => {
                        self.problem(here, format!("reached at two positions in its directory ({})", claim.referrer()))
                    }
                    Some(_) => {}
                }
            }
        }
        let depth = u32::from(depth);
        let inode = if kind == RecordKind::Tree {
            decode_tree(payload, here.at, depth).map_err(|reason| format!("damaged tree inode: {reason}"))
        } else {
            match TreePatch::decode(payload, here.at, depth) {
                Ok(patch) => {
                    self.claim(patch.base, Claim { role: Role::Base { depth: depth as u8 }, hash: Hash::default(), by: here.at });
                    if position.is_none() {
                        return Some(patch.len);
                    }
                    self.resolve(&patch)
                }
                Err(reason) => Err(format!("damaged tree patch: {reason}")),
            }
        };
        let inode = match inode {
            Ok(inode) => inode,
            Err(what) => {
                self.problem(here, what);
                return None;
            }
        };
        let Body::Tree { len, children, .. } = &inode.body else { return None };
        let Some(path) = position else { return Some(*len) };
        for claim in claims.iter().filter(|c| matches!(c.role, Role::Dir { .. } | Role::Inode { .. })) {
            self.verify_hash(here, claim, &inode, matches!(claim.role, Role::Dir { .. }));
        }
        if depth + 1 > MAX_DEPTH {
            self.problem(here, format!("a tree inode at depth {depth}: deeper than {MAX_DEPTH} levels"));
            return Some(*len);
        }
        let mut present = 0;
        for (index, child) in children.iter().enumerate() {
            if let Some(Ptr::Stored { offset, hash, .. }) = child {
                let role = Role::Inode { depth: depth as u8 + 1, path: path | (index as u64) << (5 * depth) };
                self.claim(*offset, Claim { role, hash: *hash, by: here.at });
                present += 1;
            }
        }
        if present > 0 {
            self.counts.insert(here.at, Count { expected: *len, remaining: present, sum: 0, broken: false });
        }
        Some(*len)
    }

    /// The tree inode a patch describes, its base loaded through the cache.
    fn resolve(&mut self, patch: &TreePatch) -> Result<Inode, String> {
        let base = self
            .repo
            .load_inode_at(patch.base, patch.depth, MAX_PATCH_CHAIN - 1)
            .map_err(|e| format!("cannot resolve the tree patch against its base at offset {}: {e}", patch.base))?;
        if base.patch_chain.get().copied().unwrap_or(0) + 1 > MAX_PATCH_CHAIN {
            return Err(format!("a chain of tree patches longer than {MAX_PATCH_CHAIN}"));
        }
        patch.apply(&base).map_err(|reason| format!("cannot apply the tree patch: {reason}"))
    }
}
