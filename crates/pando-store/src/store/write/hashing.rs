//! A commit's second thread: while the committing thread writes the
//! tree's new inodes (see `commit`), a helper hashes them
//! ([`HashingHelper`]): in a large commit ([`is_large`]) first the
//! subtrees of large directories, whole and level by level
//! (`dir::hash_subtree`), from the first the commit writes on, just ahead
//! of it; then the rest from the other end.
//!
//! Invariants:
//! - The helper only hashes (memos, set once, of inodes nobody changes
//!   while a commit holds the tree): it reads nothing from disk, since a
//!   stored pointer carries its hash, and leaves what it cannot hash to
//!   the committing thread (tested by
//!   `hashing_on_two_threads_hashes_as_the_reference`).
//! - A subtree is hashed by the thread that took it ([`Claims`]): the
//!   committing thread, reaching one the helper took, hashes the last ones
//!   nobody took meanwhile, then waits for it; the helper gives back a
//!   subtree it could not hash (an error or a panic), and the committing
//!   thread then hashes it (asserted in `give_back`; tested by
//!   `a_subtree_is_taken_once_and_given_back_unless_hashed`).
//! - The committing thread never waits for the helper to start; dropping
//!   the helper stops it and waits only for the subtree or inode it is
//!   hashing, and takes the tree back (its root and subtrees), so that no
//!   inode stays shared after the commit (tested by
//!   `the_helper_hashes_the_subtrees_nobody_took_even_after_a_late_start`).
//! - A commit's carry job ([`Carry`]: carrying the flat read cache over)
//!   runs once, on the helper after its hashing or on the committing
//!   thread if that takes it first; the commit returns only after it ran
//!   (or, for a failed commit, was dropped unrun; tested by
//!   `a_failed_commit_carries_nothing`).

use pando_core::dir::{dir_hash, hash_subtree, inode_hash};
use parking_lot::{Mutex, RwLock};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, mpsc};

use crate::error::Result;
use crate::node::{Body, Inode, Loader, NoLoader, child_pointers};

/// A commit with at least this many unhashed inodes in memory is hashed
/// on two threads ([`HashingHelper`]): waking the sleeping helper costs
/// the committing thread ~20 µs (a futex wake), and the helper
/// starts tens of microseconds later.
pub(in crate::store) const HELPER_INODES: usize = 64;

/// A tree updated at least this many times since it was taken from a
/// commit starts the helper without counting its unhashed inodes (see
/// [`HashingHelper::worth_it`]): the count walked 3% of a `small` commit
/// on the committing thread.
const HELPER_UPDATES: u32 = 48;

/// The children of an inode that are in memory and whose pointers do not
/// yet carry their hashes, each with its depth (a directory's root is at
/// 0, an inode below one at its parent's depth + 1).
fn children_unhashed(inode: &Inode) -> smallvec::SmallVec<[(&Arc<Inode>, u32); 32]> {
    child_pointers(inode).into_iter().filter_map(|(ptr, depth)| Some((ptr.unhashed_mem()?, depth))).collect()
}

/// Counts the unhashed inodes in memory below `inode` (itself included),
/// stopping at `cap`.
pub(in crate::store) fn count_unhashed(inode: &Inode, depth: u32, cap: usize) -> usize {
    if inode.memo_hash(depth).is_some() {
        return 0;
    }
    let mut count = 1;
    for (child, child_depth) in children_unhashed(inode) {
        if count >= cap {
            break;
        }
        count += count_unhashed(child, child_depth, cap - count);
    }
    count
}

/// The helper's last part of a commit's hashing: the tree walked from each
/// inode's last children to its first, the other way round from the
/// committing thread, so that the two meet in the middle; if the commit
/// hashes the subtrees of large directories whole (`whole`: see
/// [`Claims`]), they are left to whoever took them. An inode is
/// hashed only once all its children in memory are (by either thread);
/// the walk ends when `stop` is set. Returns whether the inode is hashed.
/// It reads nothing: a stored pointer carries its hash, so what a commit
/// hashes is in memory (what it cannot hash it leaves to the other thread).
pub(in crate::store) fn hash_backward(inode: &Arc<Inode>, depth: u32, whole: bool, stop: &AtomicBool) -> bool {
    if inode.memo_hash(depth).is_some() {
        return true;
    }
    if stop.load(Ordering::Relaxed) {
        return false;
    }
    if whole && is_subtree(inode, depth) {
        // Hashed by the thread that took it (see `Claims`), not yet.
        return false;
    }
    let mut all = true;
    for (child, child_depth) in children_unhashed(inode).into_iter().rev() {
        all &= hash_backward(child, child_depth, whole, stop);
    }
    if !all || stop.load(Ordering::Relaxed) {
        return false;
    }
    let hashed = if depth == 0 { dir_hash(inode, &NoLoader as &dyn Loader) } else { inode_hash(inode, &NoLoader as &dyn Loader) };
    hashed.is_ok()
}

/// Work a commit gives its helper besides the hashing: carrying the flat
/// read cache over the tree's updates (see `FlatCache::carry`), which the
/// helper does once it has hashed its half, while the committing thread
/// still encodes.
pub(crate) type CarryJob = Box<dyn FnOnce() + Send>;

/// A commit's [`CarryJob`], run once: by the helper, or by the committing
/// thread if the helper did not take it first (a commit too small for a
/// helper, or a helper that started late). Its lock is held while it runs,
/// so [`Carry::run`] returns only once it ran.
#[derive(Clone)]
pub(crate) struct Carry(Arc<Mutex<Option<CarryJob>>>);

impl Carry {
    pub(crate) fn new(job: CarryJob) -> Carry {
        Carry(Arc::new(Mutex::new(Some(job))))
    }

    /// Runs the job unless a thread did; waits while another runs it.
    pub(crate) fn run(&self) {
        let mut job = self.0.lock();
        if let Some(job) = job.take() {
            job();
        }
    }

    /// Drops the job unrun, unless a thread did run it; waits while
    /// another runs it.
    pub(crate) fn cancel(&self) {
        self.0.lock().take();
    }
}

/// A commit's tree as the hashing helper sees it: the committing thread
/// takes the tree back (and sets `stop`) when it has written it; the
/// helper holds a read lock while it walks, and finds no tree if it starts
/// late. Then the helper runs the carry job, if the committing thread did
/// not.
struct Backward {
    work: RwLock<Option<Work>>,
    stop: AtomicBool,
    carry: Carry,
    claims: Claims,
}

/// What the helper hashes: the root, and the subtrees ([`subtrees`]) of a
/// large commit, in the order the committing thread found them, which
/// [`Claims`] counts in.
struct Work {
    root: Arc<Inode>,
    subtrees: Vec<(Arc<Inode>, u32)>,
}

/// A subtree a commit hashes whole, level by level (see
/// `dir::hash_subtree`): a tree inode below a directory's root, so part
/// of a large directory, with at least [`BATCHED`] children changed, so
/// that its levels have inodes to hash together. (A few changes spread
/// over a large directory leave a handful of inodes per subtree, one per
/// level: gathering them costs more than it saves, and the two threads
/// are better apart, hashing from either end.)
pub(in crate::store) fn is_subtree(inode: &Inode, depth: u32) -> bool {
    depth > 0 && matches!(&inode.body, Body::Tree(pointers) if (pointers.changed() & pointers.bitmap()).count_ones() >= BATCHED)
}

/// Whether a commit of `root`'s tree is large enough to hash the subtrees
/// of its large directories whole ([`subtrees`]): at least
/// [`LARGE_UPDATES`] updates, by the tree's log of them (`logged`: `None`
/// if the tree keeps no log, the flat read cache being off or resting;
/// `Some(None)` if it stopped logging, past `flat::MAX_WRITES` updates or
/// after its root was replaced, when the new inodes are counted instead).
/// Finding the subtrees walks the tree's new inodes above them first, and
/// the helper then works beside the committing thread rather than from
/// the other end: for a block of a few hundred updates (`small`'s,
/// `medium`'s) that cost more than batching saved, as did counting the
/// new inodes of every commit to decide; for one of a thousand it saves
/// a tenth. A tree that keeps no log is hashed the usual way.
pub(in crate::store) fn is_large(root: &Inode, logged: Option<Option<usize>>) -> bool {
    match logged {
        Some(Some(updates)) => updates >= LARGE_UPDATES,
        Some(None) => count_unhashed(root, 0, LARGE_UPDATES) >= LARGE_UPDATES,
        None => false,
    }
}

/// Updates of a commit that make it large (see [`is_large`]).
const LARGE_UPDATES: usize = 512;

/// Changed children of a tree inode that make it a subtree hashed whole
/// (see [`is_subtree`]): as many as blake2b hashes at once on AVX2.
const BATCHED: u32 = 4;

/// The subtrees (see [`is_subtree`]) not hashed yet below `inode`, at
/// `depth`, in the order a commit writes them, each with its depth.
pub(in crate::store) fn subtrees<'t>(inode: &'t Arc<Inode>, depth: u32, out: &mut Vec<(&'t Arc<Inode>, u32)>) {
    if inode.memo_hash(depth).is_some() {
        return;
    }
    if is_subtree(inode, depth) {
        out.push((inode, depth));
        return;
    }
    for (child, child_depth) in children_unhashed(inode) {
        subtrees(child, child_depth, out);
    }
}

/// Which of a commit's subtrees (see [`subtrees`]) a thread took to hash,
/// by their place in the list. The helper takes them from the first, just
/// ahead of the committing thread's writing; the committing thread, when
/// the next subtree it writes is not hashed yet, takes them from the
/// last. So the helper hashes while the committing thread writes, and
/// neither hashes a subtree the other took. (A subtree either thread
/// meets otherwise than in the order listed, or a part of one the other
/// is on, may be hashed by both: the same hashes, set once.) A helper
/// that panics gives its subtree back and is gone: later commits hash on
/// their own thread.
pub(in crate::store) struct Claims(Vec<AtomicBool>);

impl Claims {
    /// Claims on `count` subtrees, none taken.
    fn new(count: usize) -> Claims {
        Claims((0..count).map(|_| AtomicBool::new(false)).collect())
    }

    /// Takes subtree `k` to hash it: `false` if a thread did.
    pub(in crate::store) fn take(&self, k: usize) -> bool {
        !self.0[k].load(Ordering::Relaxed) && !self.0[k].swap(true, Ordering::AcqRel)
    }

    /// Gives subtree `k` back, not hashed.
    fn give_back(&self, k: usize) {
        debug_assert!(self.0[k].load(Ordering::Relaxed), "only a subtree taken is given back");
        self.0[k].store(false, Ordering::Release);
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Where `inode` is among `subtrees` (a commit's, see [`subtrees`]),
/// looking from `from` on: the place its claim has.
pub(in crate::store) fn position(subtrees: &[(&Arc<Inode>, u32)], inode: &Arc<Inode>, from: usize) -> Option<usize> {
    subtrees.get(from..)?.iter().position(|(top, _)| Arc::ptr_eq(top, inode)).map(|k| from + k)
}

/// The helper's part of hashing a commit's subtrees: from the first on,
/// each one not hashed and nobody took, until the commit stops it.
fn hash_subtrees_forward(subtrees: &[(Arc<Inode>, u32)], claims: &Claims, stop: &AtomicBool) {
    for (k, (inode, depth)) in subtrees.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        if inode.memo_hash(*depth).is_none() && claims.take(k) {
            // Given back unless hashed: the committing thread waits for it.
            let mut taken = Taken { claims, k, hashed: false };
            taken.hashed = hash_subtree(inode, *depth, &NoLoader as &dyn Loader).is_ok();
        }
    }
}

/// A subtree the helper took: given back when dropped unhashed (an error,
/// or a panic), so that the committing thread hashes it.
struct Taken<'c> {
    claims: &'c Claims,
    k: usize,
    hashed: bool,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        if !self.hashed {
            self.claims.give_back(self.k);
        }
    }
}

/// The second thread of a commit with at least [`HELPER_INODES`] unhashed
/// inodes in memory. The committing thread writes the tree's new inodes
/// children first, first child to last, and a record needs its children's
/// hashes. In a large commit ([`is_large`]) the helper first hashes the
/// subtrees of large directories the commit writes (see [`subtrees`]) in
/// that same order, each whole and level by level, several inodes at
/// once, so that the committing thread mostly finds them hashed; when it reaches one the helper is still
/// hashing, it hashes the last subtrees nobody took meanwhile (see
/// [`Claims`]), so that the two threads share the hashing while one of
/// them also writes. Then the helper walks the rest the other way round
/// ([`hash_backward`]), meeting the committing thread about the middle.
/// Hashes are memoised; an inode both reach at once is hashed by both:
/// the same hash. The committing thread never waits for the helper to
/// start (waking a sleeping thread takes tens of microseconds here):
/// dropping the helper stops it and waits only for what it is hashing.
pub(in crate::store) struct HashingHelper {
    shared: Arc<Backward>,
}

impl HashingHelper {
    /// Whether `root`'s tree, updated `updates` times since it was taken
    /// from a commit, has enough to hash for a helper: at least
    /// [`HELPER_UPDATES`] updates say so without a walk, unless the tree
    /// was hashed already; fewer are counted. (Of the commits whose
    /// updates the flat cache logged, 2026-12-02: all of `small`'s with
    /// that many had at least [`HELPER_INODES`] unhashed inodes; 3 of
    /// `irmin-diff-a`'s 44 had fewer, a wake for little work.)
    pub(in crate::store) fn worth_it(root: &Inode, updates: u32) -> bool {
        if updates >= HELPER_UPDATES {
            return root.memo_hash(0).is_none();
        }
        count_unhashed(root, 0, HELPER_INODES) >= HELPER_INODES
    }

    /// Starts the helper on `root`'s tree (see [`HashingHelper::worth_it`]);
    /// `subtrees` are the root's [`subtrees`], which it hashes first, then
    /// it runs `carry`, unless the committing thread did. `None` if no
    /// helper thread could be started.
    pub(in crate::store) fn start(root: &Arc<Inode>, subtrees: &[(&Arc<Inode>, u32)], carry: &Carry) -> Option<HashingHelper> {
        let work = Work { root: root.clone(), subtrees: subtrees.iter().map(|&(inode, depth)| (inode.clone(), depth)).collect() };
        let shared = Arc::new(Backward {
            work: RwLock::new(Some(work)),
            stop: AtomicBool::new(false),
            carry: carry.clone(),
            claims: Claims::new(subtrees.len()),
        });
        helper_thread()?.send(shared.clone()).ok()?;
        Some(HashingHelper { shared })
    }
}

/// The thread the helpers' walks run on, started by the first commit that
/// needs one and shared by every store of the process. It sleeps in `recv`
/// between commits: a pool's idle workers (rayon's, before) spin in
/// `sched_yield` after each job, on the core the sync thread, the trace
/// reader and a collection need. `None` if it could not be started (the
/// commit then hashes on its own thread).
fn helper_thread() -> Option<&'static mpsc::Sender<Arc<Backward>>> {
    static HELPER: OnceLock<Option<mpsc::Sender<Arc<Backward>>>> = OnceLock::new();
    HELPER
        .get_or_init(|| {
            let (send, receive) = mpsc::channel::<Arc<Backward>>();
            let walks = move || {
                for walk in receive {
                    if let Some(work) = walk.work.read().as_ref() {
                        hash_subtrees_forward(&work.subtrees, &walk.claims, &walk.stop);
                        hash_backward(&work.root, 0, !walk.claims.is_empty(), &walk.stop);
                    }
                    walk.carry.run();
                }
            };
            std::thread::Builder::new().name("pando-commit-hash".into()).spawn(walks).ok().map(|_| send)
        })
        .as_ref()
}

impl HashingHelper {
    /// The claims on the subtrees the helper was started with.
    pub(in crate::store) fn claims(&self) -> &Claims {
        &self.shared.claims
    }
}

impl Drop for HashingHelper {
    /// Stops the helper and takes the tree back (its root and subtrees), so
    /// that no inode stays shared once the commit is done.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        loop {
            if let Some(mut taken) = self.shared.work.try_write() {
                *taken = None;
                break;
            }
            std::hint::spin_loop();
        }
    }
}

/// The committing thread's view of the subtrees it hashes with the
/// helper (see `hashing::Claims`).
pub(in crate::store) struct SharedHashing<'a> {
    subtrees: &'a [(&'a Arc<Inode>, u32)],
    claims: &'a Claims,
    /// The next subtree to write, and the one before which this thread
    /// takes subtrees to hash from the last.
    next: usize,
    last: usize,
}

impl<'a> SharedHashing<'a> {
    /// The committing thread's view of `subtrees`, which the helper holding
    /// `claims` hashes ahead of it.
    pub(in crate::store) fn new(subtrees: &'a [(&'a Arc<Inode>, u32)], claims: &'a Claims) -> SharedHashing<'a> {
        SharedHashing { subtrees, claims, next: 0, last: subtrees.len() }
    }

    /// Sees that `inode`, a subtree at `depth` about to be written, is
    /// hashed: by the helper, or by this thread if the helper did not
    /// take it. While the helper hashes it, this thread hashes the last
    /// subtrees nobody took, then waits.
    pub(in crate::store) fn hashed(&mut self, inode: &Arc<Inode>, depth: u32, loader: &dyn Loader) -> Result<()> {
        let Some(k) = position(self.subtrees, inode, self.next) else {
            hash_subtree(inode, depth, loader)?;
            return Ok(());
        };
        self.next = k + 1;
        if self.claims.take(k) {
            hash_subtree(inode, depth, loader)?;
            return Ok(());
        }
        let mut spins = 0u32;
        while inode.memo_hash(depth).is_none() {
            if self.last > self.next {
                self.last -= 1;
                if self.claims.take(self.last) {
                    let (other, other_depth) = self.subtrees[self.last];
                    hash_subtree(other, other_depth, loader)?;
                }
                continue;
            }
            if self.claims.take(k) {
                // Given back: the helper could not hash it.
                hash_subtree(inode, depth, loader)?;
                break;
            }
            // The helper hashes it (a block's subtree takes it tens of
            // microseconds; a huge commit's, longer: then this thread
            // lets others run while it waits).
            spins += 1;
            if spins < SPINS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        Ok(())
    }
}

/// Spins the committing thread waits for the helper before it yields.
const SPINS: u32 = 1 << 12;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemStorage;
    use crate::node::{Child, Ptr};
    use crate::options::Options;
    use crate::store::Store;
    use crate::tree::Tree;

    /// A commit hashes on two threads as pando-core's reference hashes from
    /// scratch, for a block-sized tree and a genesis-sized one, with a
    /// directory of more than 256 entries (inode hashing) and a subtree
    /// held at two paths, which both threads may meet.
    #[test]
    fn hashing_on_two_threads_hashes_as_the_reference() {
        use pando_core::reference::RefTree;
        for accounts in [400u32, 20_000] {
            let store = Store::open_storage(Arc::new(MemStorage::new()), Options::default()).unwrap();
            let mut tree = Tree::empty();
            let mut index = Vec::new();
            for i in 0..accounts {
                let id = format!("tz{i:05}");
                let (balance, counter) = (format!("{}", i * 7), format!("{}", i % 13));
                tree.add_mut(&["index", &id, "balance"], balance.as_bytes()).unwrap();
                tree.add_mut(&["index", &id, "counter"], counter.as_bytes()).unwrap();
                index.push((
                    id.into_bytes(),
                    RefTree::Dir(vec![
                        (b"balance".to_vec(), RefTree::Contents(balance.into_bytes())),
                        (b"counter".to_vec(), RefTree::Contents(counter.into_bytes())),
                    ]),
                ));
            }
            tree.copy_mut(&["index"], &["copy"]).unwrap();
            let reference =
                RefTree::Dir(vec![(b"index".to_vec(), RefTree::Dir(index.clone())), (b"copy".to_vec(), RefTree::Dir(index))]);

            let Ok(Child::Dir(Ptr::Mem(root, _))) = tree.node() else { panic!("a new tree is in memory") };
            assert_eq!(count_unhashed(root, 0, HELPER_INODES), HELPER_INODES, "{accounts} accounts: hashed on one thread");

            let commit = store
                .commit(&tree, crate::CommitMeta { parents: &[], date: 1, author: "Tezos", message: "two threads" })
                .unwrap();
            assert_eq!(tree.hash().unwrap(), reference.hash(), "{accounts} accounts");
            let again = store.checkout(&commit).unwrap().unwrap();
            assert_eq!(again.hash().unwrap(), reference.hash());
        }
    }

    /// The helper's walk alone (from last children to first) memoises the
    /// hashes one thread would, every inode's; told to stop, it hashes
    /// nothing; and hashing on two threads gives the sequential hash.
    #[test]
    fn hashing_backward_gives_the_sequential_hashes() {
        let store = Store::open_storage(Arc::new(MemStorage::new()), Options::default()).unwrap();
        let build = || {
            let mut tree = Tree::empty();
            for d in 0..300 {
                for e in 0..20 {
                    tree.add_mut(&[format!("d{d}"), format!("e{e}")], format!("{d}-{e}").as_bytes()).unwrap();
                }
            }
            tree
        };
        let root_of = |tree: &Tree| match tree.node().unwrap() {
            Child::Dir(Ptr::Mem(root, _)) => root.clone(),
            _ => unreachable!("a tree built in memory"),
        };
        let dir_of = |tree: &Tree, d: u32| match tree.get(&[format!("d{d}")]).unwrap().unwrap() {
            Child::Dir(Ptr::Mem(dir, _)) => dir,
            _ => unreachable!("a directory built in memory"),
        };
        let expected = build().hash().unwrap();

        let stopped = build();
        assert!(!hash_backward(&root_of(&stopped), 0, false, &AtomicBool::new(true)));
        assert!(
            root_of(&stopped).memo_hash(0).is_none() && dir_of(&stopped, 299).memo_hash(0).is_none(),
            "a stopped walk hashed"
        );

        let backward = build();
        assert!(hash_backward(&root_of(&backward), 0, false, &AtomicBool::new(false)));
        assert_eq!(root_of(&backward).memo_hash(0), Some(expected));
        for d in 0..300 {
            assert!(dir_of(&backward, d).memo_hash(0).is_some(), "directory d{d} was not hashed by the backward walk");
        }

        let parallel = build();
        assert_eq!(count_unhashed(&root_of(&parallel), 0, HELPER_INODES), HELPER_INODES);
        // The commit writes the tree while the helper hashes it backward.
        store.commit(&parallel, crate::CommitMeta { parents: &[], date: 1, author: "Tezos", message: "two threads" }).unwrap();
        assert_eq!(root_of(&parallel).memo_hash(0), Some(expected));
        assert_eq!(parallel.hash().unwrap(), expected);
    }

    /// Blocks that each change a few accounts of a large directory (so
    /// touch most of its subtrees, each a little): committed while the
    /// helper hashes the subtrees ahead of the committing thread, they
    /// hash as the reference does from scratch.
    #[test]
    fn blocks_of_a_large_directory_hash_as_the_reference() {
        use pando_core::reference::RefTree;
        let store = Store::open_storage(Arc::new(MemStorage::new()), Options::default()).unwrap();
        let mut balances: Vec<u32> = (0..12_000).collect();
        let mut tree = Tree::empty();
        for (i, balance) in balances.iter().enumerate() {
            tree.add_mut(&["index", &format!("tz{i:05}"), "balance"], balance.to_string().as_bytes()).unwrap();
        }
        let mut head =
            store.commit(&tree, crate::CommitMeta { parents: &[], date: 0, author: "Tezos", message: "genesis" }).unwrap();
        drop(tree);
        for block in 1..4u32 {
            let mut tree = store.checkout(&head).unwrap().unwrap();
            for n in 0..400u32 {
                let i = ((n * 7919 + block * 104_729) % 12_000) as usize;
                balances[i] = block * 1_000_000 + n;
                tree.add_mut(&["index", &format!("tz{i:05}"), "balance"], balances[i].to_string().as_bytes()).unwrap();
            }
            let Ok(Child::Dir(Ptr::Mem(root, _))) = tree.node() else { panic!("an updated tree is in memory") };
            let mut found = Vec::new();
            subtrees(root, 0, &mut found);
            assert_eq!(found.len(), 32, "block {block}: every subtree of the index changed");
            head = store
                .commit(&tree, crate::CommitMeta { parents: &[head], date: i64::from(block), author: "Tezos", message: "block" })
                .unwrap();
            let index = balances
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    let account = RefTree::Dir(vec![(b"balance".to_vec(), RefTree::Contents(b.to_string().into_bytes()))]);
                    (format!("tz{i:05}").into_bytes(), account)
                })
                .collect();
            let reference = RefTree::Dir(vec![(b"index".to_vec(), RefTree::Dir(index))]).hash();
            assert_eq!(tree.hash().unwrap(), reference, "block {block}");
            assert_eq!(store.checkout(&head).unwrap().unwrap().hash().unwrap(), reference, "block {block}, read back");
        }
    }

    /// A subtree is taken once; one the helper gives back (it could not
    /// hash it, or panicked) can be taken again; and it is found by its top
    /// inode from where the committing thread is on.
    #[test]
    fn a_subtree_is_taken_once_and_given_back_unless_hashed() {
        let inodes: Vec<Arc<Inode>> = (0..3).map(|_| Inode::values(pando_core::dir::Values::new())).collect();
        let listed: Vec<(&Arc<Inode>, u32)> = inodes.iter().map(|inode| (inode, 1)).collect();
        let claims = Claims::new(listed.len());
        assert_eq!(position(&listed, &inodes[1], 0), Some(1));
        assert_eq!(position(&listed, &inodes[1], 2), None, "looked for from after it");
        assert!(claims.take(1));
        assert!(!claims.take(1), "taken twice");
        drop(Taken { claims: &claims, k: 1, hashed: false });
        assert!(claims.take(1), "given back when dropped unhashed");
        assert!(claims.take(2));
        drop(Taken { claims: &claims, k: 2, hashed: true });
        assert!(!claims.take(2), "kept once hashed");
    }

    /// The helper hashes every subtree nobody took, also when the
    /// committing thread hashed the first ones before the helper started
    /// (it passes over those hashed), and none it took.
    #[test]
    fn the_helper_hashes_the_subtrees_nobody_took_even_after_a_late_start() {
        let mut tree = Tree::empty();
        for i in 0..6_000u32 {
            tree.add_mut(&["index", &format!("tz{i:05}"), "balance"], i.to_string().as_bytes()).unwrap();
        }
        let Ok(Child::Dir(Ptr::Mem(root, _))) = tree.node() else { panic!("a new tree is in memory") };
        let mut listed = Vec::new();
        subtrees(root, 0, &mut listed);
        assert_eq!(listed.len(), 32);
        let claims = Claims::new(listed.len());
        // The committing thread took and hashed the first two, and took the
        // third without hashing it yet.
        for k in 0..3 {
            assert!(claims.take(k));
        }
        for &(inode, depth) in &listed[..2] {
            hash_subtree(inode, depth, &NoLoader as &dyn Loader).unwrap();
        }
        let work: Vec<(Arc<Inode>, u32)> = listed.iter().map(|&(inode, depth)| (inode.clone(), depth)).collect();
        hash_subtrees_forward(&work, &claims, &AtomicBool::new(false));
        assert!(listed[2].0.memo_hash(listed[2].1).is_none(), "the helper hashed a subtree it did not take");
        for (k, &(inode, depth)) in listed.iter().enumerate().skip(3) {
            assert!(inode.memo_hash(depth).is_some(), "subtree {k} was left unhashed");
        }
    }
}
