//! Which entries of a value inode changed since the written version it
//! derives from: marks kept as updates make them, so that writing it as a
//! patch compares nothing and the written version is never copied.
//!
//! Invariants:
//! - `new` has a bit for each of the inode's entries that its base does
//!   not hold; every other entry is, in order, one of the base's entries
//!   not in `removed` (tested by `marks_follow_updates`, against a
//!   comparison of the two versions).
//! - `replaced` and `removed` are disjoint masks over the base's
//!   entries (as many as the inode holds, less the new, plus the
//!   removed). `replaced` has every entry an update set or went
//!   through to change a directory below (`dir::find_mut`), however long
//!   ago: the directory may be written by another tree's commit before
//!   this inode's. Not marked: a child written again because a collection
//!   removed its record; the writer finds it by its offset (at or after
//!   the commit's first record), as it does a tree inode's. (Asserted
//!   in `note`.)

use pando_core::dir::ValuesChange;
use pando_core::inode::ENTRIES;

/// The marks of a value inode's changes over its base (see the module).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ValuesMarks {
    /// The base's entries whose child was replaced, by base index.
    pub replaced: u32,
    /// The base's entries removed, by base index.
    pub removed: u32,
    /// The entries the base does not hold, by position.
    pub new: u32,
}

/// The bits of `mask` below bit `p`.
fn below(mask: u32, p: usize) -> u32 {
    mask & ((1u64 << p) - 1) as u32
}

impl ValuesMarks {
    /// Records a change an update made.
    pub fn note(&mut self, change: ValuesChange) {
        match change {
            ValuesChange::Replaced(p) => {
                if let Some(i) = self.base_index(p) {
                    self.replaced |= 1 << i;
                }
            }
            ValuesChange::Removed(p) => {
                if let Some(i) = self.base_index(p) {
                    self.removed |= 1 << i;
                    self.replaced &= !(1 << i);
                }
                self.new = below(self.new, p) | ((u64::from(self.new) >> (p + 1)) << p) as u32;
            }
            ValuesChange::Inserted(p) => {
                self.new = below(self.new, p) | ((u64::from(self.new) >> p) << (p + 1)) as u32 | 1 << p;
            }
        }
        debug_assert_eq!(self.replaced & self.removed, 0, "an entry of the base is replaced or removed, not both");
    }

    /// The base's index of the entry at position `p`; `None` for a new one.
    fn base_index(&self, p: usize) -> Option<usize> {
        self.sources(p + 1).last().and_then(Result::ok)
    }

    /// Where each of the `len` entries of the inode comes from: the base's
    /// index of each entry it holds, or, for a new one, `Err` with the
    /// base's index of the first of the base's kept entries after it (its
    /// length if none).
    pub fn sources(&self, len: usize) -> impl Iterator<Item = Result<usize, usize>> + '_ {
        let kept = move |i: usize| (i..ENTRIES).find(|&i| self.removed & (1 << i) == 0);
        let mut next = kept(0);
        (0..len).map(move |p| {
            if self.new & (1 << p) != 0 {
                // (None kept from here below 32: the base holds 32.)
                return Err(next.unwrap_or(ENTRIES));
            }
            let i = next.expect("an entry that is not new is one of the base's");
            next = kept(i + 1);
            Ok(i)
        })
    }

    /// The marks of `now` over `base` found by comparing them (entries by
    /// step, children by `same`): what the updates from one to the other
    /// would have marked, but for a child replaced by an equal one. For
    /// tests and fuzzing.
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn between(base: &super::Values, now: &super::Values, same: impl Fn(&super::Child, &super::Child) -> bool) -> ValuesMarks {
        let mut marks = ValuesMarks::default();
        let (mut i, mut j) = (0, 0);
        while i < base.len() || j < now.len() {
            let order = match (i < base.len(), j < now.len()) {
                (true, true) => base.step(i).cmp(now.step(j)),
                (true, false) => std::cmp::Ordering::Less,
                (false, _) => std::cmp::Ordering::Greater,
            };
            match order {
                std::cmp::Ordering::Less => {
                    marks.removed |= 1 << i;
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    marks.new |= 1 << j;
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    if !same(base.child(i), now.child(j)) {
                        marks.replaced |= 1 << i;
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
        marks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{BaseShape, Child, Inode, Leaf, Loader, NoLoader, State, Values, value_child};
    use pando_core::dir::{self, Body};

    /// Marks kept through any sequence of updates, in place or on copies of
    /// a shared version, are those a comparison of the two versions finds,
    /// and say where each entry comes from.
    #[test]
    fn marks_follow_updates() {
        let r = &NoLoader as &dyn Loader;
        let step = |k: u32| format!("{k:02}").into_bytes();
        let mut rng = 0x9e37_79b9_u32;
        let mut next = move |n: u32| {
            rng ^= rng << 13;
            rng ^= rng >> 17;
            rng ^= rng << 5;
            rng % n
        };
        let same = |a: &Child, b: &Child| match (a, b) {
            (Child::Contents(Leaf::Inline(a)), Child::Contents(Leaf::Inline(b))) => a.bytes() == b.bytes(),
            _ => false,
        };
        let values = |inode: &Inode| match &inode.body {
            Body::Values(values) => values.clone(),
            Body::Tree(_) => unreachable!("at most 32 entries"),
        };
        for round in 0..500u32 {
            // (Not the shared empty inode: this one is marked written.)
            let mut root = Inode::values(Values::new());
            for k in 0..next(33) {
                dir::set(&mut root, 0, &step(k * 2), value_child(&[k as u8]), r).unwrap();
            }
            std::sync::Arc::get_mut(&mut root).expect("not shared").meta = State::loaded(1, 100, 0);
            let base = values(&root);
            for _ in 0..next(12) {
                let k = next(70);
                let present = holds(&root, &step(k));
                // (A removed entry of the base put back is marked removed
                // and new, where a comparison finds it replaced.)
                if !present && base.search(&step(k)).is_ok() {
                    continue;
                }
                // Sometimes the version is shared: the update copies it.
                let shared = (next(3) == 0).then(|| root.clone());
                if present && next(2) == 0 {
                    assert!(dir::remove(&mut root, 0, &step(k), r).unwrap());
                } else if present || root.len() < 32 {
                    dir::set(&mut root, 0, &step(k), value_child(&[100 + (round % 100) as u8]), r).unwrap();
                }
                drop(shared);
            }
            let now = values(&root);
            // (Not updated at all, it is still the written version.)
            let changed = if root.meta.get().is_some() { None } else { root.meta.begin_write() };
            let marks = match changed.map(|changed| changed.base.shape) {
                Some(BaseShape::Values(marks)) => marks,
                Some(BaseShape::Tree { .. }) => unreachable!("a value inode"),
                None => ValuesMarks::default(),
            };
            assert_eq!(marks, ValuesMarks::between(&base, &now, same), "round {round}");
            for (p, source) in marks.sources(now.len()).enumerate() {
                match source {
                    Ok(i) => assert_eq!(base.step(i), now.step(p)),
                    Err(before) => {
                        assert!(base.search(now.step(p)).is_err());
                        assert!(before == base.len() || base.step(before) > now.step(p));
                    }
                }
            }
        }
    }

    /// Whether the value inode holds `step`.
    fn holds(root: &Inode, step: &[u8]) -> bool {
        matches!(&root.body, Body::Values(values) if values.search(step).is_ok())
    }
}
