//! An update changes an inode in place only when no other thread can
//! reach it: explored by Shuttle over every schedule (`check_dfs`) of a
//! thread that holds a `Weak` of the inode (or a clone), upgrades it and
//! reads the entries twice, against an update of the inode by its owner.
//! The reader must see the same entries both times: an inode another
//! thread holds never changes.
//!
//! This is the uniqueness test behind the `unsafe fn`
//! `dir::node::cleared` (`updatable`, `Arc::get_mut`). 0d5611f replaced it
//! by two loads (strong count, then weak count), unsound when a `Weak` is
//! upgraded between them; 12f4d23 restored `Arc::get_mut`. Checked by
//! putting the two loads back (28 November 2026, Shuttle 0.8.1):
//! - 0d5611f's `unique` (strong count, weak count, fence) in `updatable`
//!   and `cleared`, as it was: the three tests reached through a `Weak`
//!   fail within 4 s, the owner's `cleared` panicking ("updatable, or a
//!   fresh copy") in a schedule where the reader upgrades after
//!   `updatable`'s loads; those reached through a clone pass.
//! - `unique` in `updatable` only, `cleared` as it is now: the same three
//!   fail in 0.2 s on the reader's assertion ("an inode changed while
//!   another thread held it"; it read `a`, `c`, then `a`, `b`, `c`):
//!   the reader upgraded between the owner's two loads, which found a
//!   strong count of 1 and then no `Weak`.
//! - As it is (`Arc::get_mut`): all six pass, each with schedules
//!   updating in place and schedules copying.
//!
//! Built only with `--cfg pando_shuttle`, where the trie's `Arc` is a
//! model of the standard library's whose counts are Shuttle's atomics
//! (`pando_core::arc`); scripts/unsafe-check.sh runs it:
//! `RUSTFLAGS="--cfg pando_shuttle" cargo test -p pando-core --test shuttle_in_place_update`.
#![cfg(pando_shuttle)]

use pando_core::Hash;
use pando_core::arc::Arc;
use pando_core::dir::{self, Child, Hold, Inode, Resolve, Values};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Everything in memory: leaves are bytes, pointers are inodes.
struct Mem;

impl Hold for Mem {
    type Leaf = u8;
    type Ptr = Arc<Inode<Mem>>;
    type Meta = ();

    fn mem(inode: Arc<Inode<Mem>>) -> Self::Ptr {
        inode
    }
    fn as_mem(ptr: &Self::Ptr) -> Option<&Arc<Inode<Mem>>> {
        Some(ptr)
    }
    fn as_mem_mut(ptr: &mut Self::Ptr) -> Option<&mut Arc<Inode<Mem>>> {
        Some(ptr)
    }
    fn known_hash(_: &Self::Ptr) -> Option<Hash> {
        None
    }
    // A fresh one each time: the model's counts live in one Shuttle run.
    fn empty() -> Arc<Inode<Mem>> {
        Inode::values(Values::new())
    }
}

struct Nothing;

impl Resolve<Mem> for Nothing {
    type Error = String;
    fn load(&self, _: &Arc<Inode<Mem>>, _: u32) -> Result<Arc<Inode<Mem>>, String> {
        unreachable!("everything is in memory")
    }
    fn leaf_hash(&self, leaf: &u8) -> Result<Hash, String> {
        Ok(Hash::of_bytes(&[*leaf]))
    }
    fn broken(&self, _: &Inode<Mem>, reason: String) -> String {
        reason
    }
}

fn entries(root: &Inode<Mem>) -> Vec<(Vec<u8>, u8)> {
    dir::collect_sorted(root, &Nothing)
        .unwrap()
        .into_iter()
        .map(|(step, child)| match child {
            Child::Contents(byte) => (step.to_vec(), byte),
            Child::Dir(_) => unreachable!("no directories here"),
        })
        .collect()
}

/// How the reader reaches the inode.
#[derive(Clone, Copy)]
enum Reach {
    /// A `Weak`, upgraded in the reader's thread, then dropped.
    Weak,
    /// A clone, made by the owner and moved to the reader.
    Clone,
}

/// Every schedule of a reader that reaches the root as `reach` says and
/// reads its entries twice, against `update` of the root by its owner
/// (`expected`: the entries after it).
fn race(reach: Reach, update: fn(&mut Arc<Inode<Mem>>), expected: &'static [(&'static [u8], u8)]) {
    // Schedules in which the owner's update changed the inode in place, and
    // in which it copied it: both must occur, or the model never reached
    // one of the two paths.
    let counts = std::sync::Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let tally = counts.clone();
    shuttle::check_dfs(
        move || {
            let mut root = Mem::empty();
            for (step, value) in [(&b"a"[..], 1), (b"c", 3)] {
                dir::set(&mut root, 0, step, Child::Contents(value), &Nothing).unwrap();
            }
            let before = entries(&root);
            let reader = match reach {
                Reach::Weak => {
                    let weak = Arc::downgrade(&root);
                    shuttle::thread::spawn(move || {
                        let held = weak.upgrade();
                        drop(weak);
                        read_twice(held)
                    })
                }
                Reach::Clone => {
                    let held = root.clone();
                    shuttle::thread::spawn(move || read_twice(Some(held)))
                }
            };
            let original = Arc::as_ptr(&root);
            update(&mut root);
            let in_place = Arc::as_ptr(&root) == original;
            if let Some(seen) = reader.join().unwrap() {
                assert!(seen == before || in_place, "a reader of the original saw entries it never had");
            }
            let after = entries(&root);
            assert_eq!(after, expected.iter().map(|(s, v)| (s.to_vec(), *v)).collect::<Vec<_>>());
            tally[usize::from(!in_place)].fetch_add(1, Ordering::Relaxed);
        },
        None,
    );
    let [in_place, copied] = [0, 1].map(|i| counts[i].load(Ordering::Relaxed));
    assert!(in_place > 0 && copied > 0, "both paths explored: {in_place} in place, {copied} copied");
}

/// The entries of the inode, read twice with a chance for the owner to
/// run in between; they must not differ.
fn read_twice(held: Option<Arc<Inode<Mem>>>) -> Option<Vec<(Vec<u8>, u8)>> {
    let held = held?;
    let first = entries(&held);
    shuttle::thread::yield_now();
    let second = entries(&held);
    assert_eq!(first, second, "an inode changed while another thread held it");
    Some(first)
}

fn replace(root: &mut Arc<Inode<Mem>>) {
    // An entry replaced: `make_mut`.
    assert!(!dir::set(root, 0, b"a", Child::Contents(2), &Nothing).unwrap());
}

fn insert(root: &mut Arc<Inode<Mem>>) {
    // An entry added to a values inode with room: `updatable`, then
    // `cleared` (or a copy).
    assert!(dir::set(root, 0, b"b", Child::Contents(2), &Nothing).unwrap());
}

fn remove(root: &mut Arc<Inode<Mem>>) {
    // An entry removed: `replace_body`.
    assert!(dir::remove(root, 0, b"a", &Nothing).unwrap());
}

#[test]
fn an_entry_replaced_never_changes_an_inode_a_weak_reaches() {
    race(Reach::Weak, replace, &[(b"a", 2), (b"c", 3)]);
}

#[test]
fn an_entry_added_never_changes_an_inode_a_weak_reaches() {
    race(Reach::Weak, insert, &[(b"a", 1), (b"b", 2), (b"c", 3)]);
}

#[test]
fn an_entry_removed_never_changes_an_inode_a_weak_reaches() {
    race(Reach::Weak, remove, &[(b"c", 3)]);
}

#[test]
fn an_entry_replaced_never_changes_an_inode_a_clone_holds() {
    race(Reach::Clone, replace, &[(b"a", 2), (b"c", 3)]);
}

#[test]
fn an_entry_added_never_changes_an_inode_a_clone_holds() {
    race(Reach::Clone, insert, &[(b"a", 1), (b"b", 2), (b"c", 3)]);
}

#[test]
fn an_entry_removed_never_changes_an_inode_a_clone_holds() {
    race(Reach::Clone, remove, &[(b"c", 3)]);
}
