//! The kept tree: the writer keeps the tree of its newest commit in memory,
//! as written (values in memory, hashes and offsets known), and a checkout
//! of that commit starts from it, so that the next block reads and updates
//! the inodes the last ones wrote without the cache or the disk. It holds
//! only inodes written by the last commits whose weights sum to at most
//! [`Options::keep_bytes`](crate::Options::keep_bytes) (a window counted
//! by [`KeptWindow`]): a written inode is kept as itself when all its
//! children in memory are kept, as a copy holding stored pointers instead
//! of the children that are not, and not at all (its parent holds a stored
//! pointer) once the commit has used the room. Each kept inode knows the
//! oldest commit of its kept subtree, so a later commit can tell whether
//! it is still inside the window without walking it. A commit's count in
//! the window follows what the kept tree holds of it: a kept inode knows
//! the commit and weight it is counted for; an update that changes it in
//! place (nothing else holds it) claims them, and once the new version is
//! written they leave the count ([`KeptWindow::release`]). A copy of a
//! shared inode claims nothing (another path or tree may keep it).
//! Nothing written goes to the cache, which holds what was read from disk.
//!
//! Invariants:
//! - The window's weight is the sum of its commits' weights, and its
//!   commits are in increasing order (asserted in `KeptWindow::check`).
//! - A claim leaves the window once, and never takes out more than its
//!   commit counts (asserted in `KeptWindow::release`).
//! - Commits are numbered from 1 in the order they start; each ends in
//!   the order it started (asserted in `KeptWindow::finish_commit`).

use std::collections::VecDeque;
use std::sync::Arc;

use crate::node::{Claim, Inode};

/// The writer's count of commits and the window of those whose inodes the
/// kept tree may hold: each with the weight of its kept inodes.
#[derive(Default)]
pub(in crate::store) struct KeptWindow {
    seq: u32,
    /// The commits whose inodes the kept tree may hold, oldest first,
    /// each with the weight counted for it.
    pub(in crate::store) window: VecDeque<(u32, u64)>,
    weight: u64,
}

impl KeptWindow {
    /// Starts a commit: its number, the oldest commit still kept, and the
    /// room the commit's kept inodes have. The oldest commits leave the
    /// window until half the budget is free.
    pub(in crate::store) fn start_commit(&mut self, budget: u64) -> Keeping {
        self.seq = self.seq.checked_add(1).expect("fewer than 2^32 commits in one process");
        while self.weight > budget / 2
            && let Some((_, weight)) = self.window.pop_front()
        {
            self.weight -= weight;
        }
        self.check();
        let cutoff = self.window.front().map_or(self.seq, |(seq, _)| *seq);
        let room = budget - self.weight.min(budget);
        Keeping { seq: self.seq, cutoff, weight: 0, room, superseded: Vec::new() }
    }

    /// Memory of the inodes of the commits in the window.
    pub(in crate::store) fn weight(&self) -> u64 {
        self.weight
    }

    /// Takes out of the window the weights of kept versions a commit
    /// replaced by new ones: they are no longer in the kept tree. Commits
    /// that left the window are skipped.
    pub(in crate::store) fn release(&mut self, superseded: &[Claim]) {
        for claim in superseded {
            // Commits follow each other in the window (each finished one is
            // pushed, a failed one stops the writer): where the claim's is,
            // unless that changes (the search then finds it).
            let at = match self.window.front() {
                Some(&(front, _)) if claim.seq >= front => (claim.seq - front) as usize,
                _ => 0,
            };
            let at = if self.window.get(at).is_some_and(|(s, _)| *s == claim.seq) {
                at
            } else {
                self.window.partition_point(|(s, _)| *s < claim.seq)
            };
            if let Some((s, counted)) = self.window.get_mut(at)
                && *s == claim.seq
            {
                debug_assert!(claim.weight <= *counted, "a claim takes out at most what its commit counts");
                let weight = claim.weight.min(*counted);
                *counted -= weight;
                self.weight -= weight;
            }
        }
        self.check();
    }

    /// Ends commit `seq` (the one started last): `kept` is the weight of
    /// its kept inodes, `None` when its root was not kept (nothing older
    /// is then kept either).
    pub(in crate::store) fn finish_commit(&mut self, seq: u32, kept: Option<u64>) {
        assert_eq!(seq, self.seq, "a commit ends before the next starts");
        match kept {
            Some(weight) => {
                self.window.push_back((seq, weight));
                self.weight += weight;
            }
            None => {
                self.window.clear();
                self.weight = 0;
            }
        }
        self.check();
    }

    /// The window's own rules: its weight is the sum of its commits', and
    /// they are in increasing order.
    fn check(&self) {
        debug_assert_eq!(
            self.weight,
            self.window.iter().map(|(_, weight)| weight).sum::<u64>(),
            "the window's weight is its commits'"
        );
        debug_assert!(
            self.window.iter().zip(self.window.iter().skip(1)).all(|(a, b)| a.0 < b.0),
            "the window's commits in order"
        );
    }
}

/// One commit's share of the kept window, as its inodes are written.
pub(in crate::store) struct Keeping {
    /// This commit's number in the writer's count, and the oldest commit
    /// whose inodes the kept tree may still hold.
    pub(in crate::store) seq: u32,
    pub(in crate::store) cutoff: u32,
    /// Memory the kept inodes of this commit hold, and how much they may.
    pub(in crate::store) weight: u64,
    pub(in crate::store) room: u64,
    /// The claims of kept versions this commit wrote new versions of:
    /// they leave the kept tree with it.
    pub(in crate::store) superseded: Vec<Claim>,
}

/// What the kept tree holds of an inode a batch wrote or met written.
pub(in crate::store) enum Kept {
    /// The inode itself.
    Itself,
    /// A copy of it holding stored pointers instead of some children.
    Copy(Arc<Inode>),
    /// Nothing: the kept tree has no room for it, or it is older than the
    /// window; its parent holds a stored pointer.
    No,
}
