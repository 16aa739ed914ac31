//! The hash memo of a pointer to an inode in memory, and beside it, in
//! the same word as its state, the pointer's prefetch hint (see
//! `pando_core::dir::hint`).
//!
//! Invariants:
//! - The hash is written once, by the one thread that moves the state to
//!   `WRITING`, and read only once `SET` is seen; the state goes back only
//!   through `&mut` (asserted in `set`: the thread that wins `WRITING`
//!   finds neither flag; Miri checks the rest, see scripts/unsafe-check.sh).
//! - The hint's bits and the state's never overlap: a hint keeps its two
//!   low bits 0 (asserted in `pack_hint`).

use pando_core::Hash;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The hash a memory pointer's inode has (see [`Ptr`](super::Ptr)):
/// set once hashed, and forgotten by `Hold::as_mem_mut`, the only way to
/// change the inode through the pointer. Beside it, in the same word as
/// its state, the pointer keeps the inode's prefetch hint
/// (`pando_core::dir::hint`), as of when an update last went through the
/// pointer (`Hold::as_mem_mut` on its way down, `Hold::refresh_hint` on
/// its way back up): so a pointer stays 48 bytes, and an entry 56, and
/// reads and hashing never compute one.
pub struct HashMemo {
    /// [`SET`] once `hash` holds the hash, [`WRITING`] while a thread
    /// writes it; the hint above them (whose two low bits are 0).
    word: AtomicU64,
    hash: UnsafeCell<Hash>,
}

// SAFETY: `hash` is written only by the one thread that moved the state
// from neither flag to `WRITING`, and read only after `SET` is seen with
// `Acquire`, which the writer publishes with `Release` once written. The
// state goes back to neither flag only through `&mut` (`forget`), after
// which `set` writes the hash again under `WRITING`. So no read races a
// write.
#[expect(unsafe_code, reason = "one writer then many readers of the hash, ordered by the state word")]
unsafe impl Sync for HashMemo {}

/// [`HashMemo`]'s state: the hash is there.
const SET: u64 = 1;
/// [`HashMemo`]'s state: a thread is writing the hash.
const WRITING: u64 = 2;
/// [`HashMemo`]'s bits that are not the hint (`dir::hint` keeps them 0).
const STATE: u64 = SET | WRITING;

impl HashMemo {
    pub(super) fn new(hash: Option<Hash>, hint: usize) -> HashMemo {
        let state = if hash.is_some() { SET } else { 0 };
        HashMemo { word: AtomicU64::new(pack_hint(hint) | state), hash: UnsafeCell::new(hash.unwrap_or_default()) }
    }

    #[expect(unsafe_code, reason = "reads the hash once its state says it is written")]
    pub(super) fn get(&self) -> Option<Hash> {
        // SAFETY: `SET` seen with `Acquire`: the hash is written, and stays
        // until `forget`, which takes `&mut self` (see `Sync` above).
        (self.word.load(Ordering::Acquire) & SET != 0).then(|| unsafe { *self.hash.get() })
    }

    /// Sets the hash, unless it is set; the hint stays. Once it
    /// returns, [`HashMemo::get`] has the hash. (A thread setting it at
    /// the same time hashed the same inode: the same hash. This one then
    /// waits the few instructions until it is written.)
    #[expect(unsafe_code, reason = "writes the hash by the one thread that moved the state to writing")]
    pub(super) fn set(&self, hash: Hash) {
        let mut spins = 0u32;
        loop {
            let word = self.word.load(Ordering::Acquire);
            if word & SET != 0 {
                return;
            }
            if word & WRITING == 0 {
                if self.word.compare_exchange(word, word | WRITING, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                    // SAFETY: this thread moved the state to `WRITING`: no
                    // other writes, and none reads before `SET` (see
                    // `Sync` above).
                    unsafe { *self.hash.get() = hash };
                    debug_assert_eq!(word & STATE, 0, "the hash is written by the one thread that found neither flag");
                    self.word.store((word & !STATE) | SET, Ordering::Release);
                    return;
                }
                continue;
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Forgets the hash, and keeps `hint` from now on.
    pub(super) fn forget(&mut self, hint: usize) {
        *self.word.get_mut() = pack_hint(hint);
    }

    /// Keeps `hint` from now on, the hash as it is.
    pub(super) fn take_hint(&mut self, hint: usize) {
        let word = self.word.get_mut();
        *word = (*word & STATE) | pack_hint(hint);
    }

    pub(super) fn hint(&self) -> usize {
        (self.word.load(Ordering::Relaxed) & !STATE) as usize
    }
}

/// A hint (`dir::hint`) as [`HashMemo`] keeps it, beside its state.
fn pack_hint(hint: usize) -> u64 {
    debug_assert_eq!(hint as u64 & STATE, 0, "a hint keeps its two low bits 0 (dir::hint)");
    hint as u64 & !STATE
}

impl Clone for HashMemo {
    fn clone(&self) -> Self {
        HashMemo::new(self.get(), self.hint())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pando_core::dir;

    /// A pointer's memo: a hash set once (by one thread of two racing to
    /// set it), read back, forgotten through `&mut`, cloned with its state;
    /// and the hint beside it kept whole by all of these, replaced only
    /// when the hash is forgotten.
    #[test]
    fn a_memo_holds_its_hash_once_and_its_hint_beside_it() {
        let (a, b) = (Hash::of_bytes(b"a"), Hash::of_bytes(b"b"));
        // No hint, a values inode's block (a line and its halves), a tree
        // inode's children (tagged).
        let hints = [0usize, 0x7f00_1234_5640 | 3 << 3, 0x7f00_1234_5678 | dir::TREE_HINT];
        for (hint, next) in hints.into_iter().zip(hints.into_iter().rev()) {
            let mut memo = HashMemo::new(None, hint);
            assert_eq!((memo.get(), memo.hint()), (None, hint));
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| {
                        memo.set(a);
                        assert_eq!(memo.get(), Some(a), "set when `set` returns, whichever thread wrote it");
                    });
                }
            });
            assert_eq!((memo.get(), memo.hint()), (Some(a), hint), "the hint kept beside the hash");
            memo.set(b);
            assert_eq!(memo.get(), Some(a), "set once");
            assert_eq!((memo.clone().get(), memo.clone().hint()), (Some(a), hint));
            memo.forget(next);
            assert_eq!((memo.get(), memo.hint()), (None, next), "forgotten, with the hint it is given");
            assert_eq!(memo.clone().get(), None);
            memo.set(b);
            assert_eq!((memo.get(), memo.hint()), (Some(b), next), "set again once forgotten");
        }
        // Many races: whoever loses waits for the winner's write. (Fewer
        // under Miri, which runs each a thousand times slower and draws
        // its own schedules: scripts/unsafe-check.sh.)
        for _ in 0..if cfg!(miri) { 20 } else { 2000 } {
            let memo = HashMemo::new(None, 0);
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| {
                        memo.set(a);
                        assert_eq!(memo.get(), Some(a));
                    });
                }
            });
        }
    }
}
