//! A commit's second thread: while the committing thread writes the
//! tree's new inodes (see `commit`), a helper hashes them from the other
//! end ([`HashingHelper`]).
//!
//! Invariants:
//! - The helper only hashes (memos, set once, of inodes nobody changes
//!   while a commit holds the tree): it reads nothing from disk, since a
//!   stored pointer carries its hash, and leaves what it cannot hash to
//!   the committing thread.
//! - The committing thread never waits for the helper to start; dropping
//!   the helper stops it and waits only for the inode it is hashing, and
//!   takes the root back, so that no inode stays shared after the commit.
//! - A commit's side job ([`Side`]: carrying the flat read cache over)
//!   runs once, on the helper after its hashing or on the committing
//!   thread if that takes it first; the commit returns only after it ran
//!   (or, for a failed commit, was dropped unrun).

use pando_core::dir::{dir_hash, inode_hash};
use parking_lot::{Mutex, RwLock};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, mpsc};

use crate::tree::node::{Inode, Loader, NoLoader, child_pointers};

/// A commit with at least this many unhashed inodes in memory is hashed
/// on two threads ([`HashingHelper`]): waking the sleeping helper costs
/// the committing thread ~20 µs (a futex wake), and the helper
/// starts tens of microseconds later.
pub(super) const HELPER_INODES: usize = 64;

/// The children of an inode that are in memory and whose pointers do not
/// yet carry their hashes, each with its depth (a directory's root is at
/// 0, an inode below one at its parent's depth + 1).
fn children_unhashed(inode: &Inode) -> smallvec::SmallVec<[(&Arc<Inode>, u32); 32]> {
    child_pointers(inode).into_iter().filter_map(|(ptr, depth)| Some((ptr.unhashed_mem()?, depth))).collect()
}

/// Counts the unhashed inodes in memory below `inode` (itself included),
/// stopping at `cap`.
pub(super) fn count_unhashed(inode: &Inode, depth: u32, cap: usize) -> usize {
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

/// The helper's half of a commit's hashing: the tree walked from each
/// inode's last children to its first, the other way round from the
/// committing thread, so that the two meet in the middle. An inode is
/// hashed only once all its children in memory are (by either thread);
/// the walk ends when `stop` is set. Returns whether the inode is hashed.
/// It reads nothing: a stored pointer carries its hash, so what a commit
/// hashes is in memory (what it cannot hash it leaves to the other thread).
pub(super) fn hash_backward(inode: &Arc<Inode>, depth: u32, stop: &AtomicBool) -> bool {
    if inode.memo_hash(depth).is_some() {
        return true;
    }
    if stop.load(Ordering::Relaxed) {
        return false;
    }
    let mut all = true;
    for (child, child_depth) in children_unhashed(inode).into_iter().rev() {
        all &= hash_backward(child, child_depth, stop);
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
pub(crate) type SideJob = Box<dyn FnOnce() + Send>;

/// A commit's [`SideJob`], run once: by the helper, or by the committing
/// thread if the helper did not take it first (a commit too small for a
/// helper, or a helper that started late). Its lock is held while it runs,
/// so [`Side::run`] returns only once it ran.
#[derive(Clone)]
pub(crate) struct Side(Arc<Mutex<Option<SideJob>>>);

impl Side {
    pub(crate) fn new(job: SideJob) -> Side {
        Side(Arc::new(Mutex::new(Some(job))))
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
/// takes the root back (and sets `stop`) when it has written the tree; the
/// helper holds a read lock while it walks, and finds no root if it starts
/// late. Then the helper runs the side job, if the committing thread did
/// not.
struct Backward {
    root: RwLock<Option<Arc<Inode>>>,
    stop: AtomicBool,
    side: Side,
}

/// The second thread of a commit with at least [`HELPER_INODES`] unhashed
/// inodes in memory: while the committing thread writes the tree's new
/// inodes children first, first child to last, hashing each when its
/// parent's record needs it, the helper thread walks the tree the
/// other way round ([`hash_backward`]). Hashes are memoised, so the
/// committing thread finds the hashes the helper made and only encodes
/// those records, and they meet about the middle; no walk beforehand cuts
/// the work into jobs. The committing thread never waits for the helper
/// to start (waking a sleeping thread takes tens of microseconds here):
/// dropping the helper stops it and waits only for the inode it is
/// hashing. An inode both reach at once is hashed by both: the same hash.
pub(super) struct HashingHelper {
    shared: Arc<Backward>,
}

impl HashingHelper {
    /// Starts the helper on `root`'s tree, if it has enough to hash; it
    /// then runs `side`, unless the committing thread did.
    pub(super) fn start(root: &Arc<Inode>, side: &Side) -> Option<HashingHelper> {
        if count_unhashed(root, 0, HELPER_INODES) < HELPER_INODES {
            return None;
        }
        let shared =
            Arc::new(Backward { root: RwLock::new(Some(root.clone())), stop: AtomicBool::new(false), side: side.clone() });
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
                    if let Some(root) = walk.root.read().as_ref() {
                        hash_backward(root, 0, &walk.stop);
                    }
                    walk.side.run();
                }
            };
            std::thread::Builder::new().name("pando-commit-hash".into()).spawn(walks).ok().map(|_| send)
        })
        .as_ref()
}

impl Drop for HashingHelper {
    /// Stops the helper and takes the root back, so that no inode stays
    /// shared once the commit is done.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        loop {
            if let Some(mut taken) = self.shared.root.try_write() {
                *taken = None;
                break;
            }
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemStorage;
    use crate::options::Options;
    use crate::store::Store;
    use crate::tree::Tree;
    use crate::tree::node::{Child, Ptr};

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

            let commit = store.commit(&tree, &[], 1, "Tezos", "two threads").unwrap();
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
        assert!(!hash_backward(&root_of(&stopped), 0, &AtomicBool::new(true)));
        assert!(
            root_of(&stopped).memo_hash(0).is_none() && dir_of(&stopped, 299).memo_hash(0).is_none(),
            "a stopped walk hashed"
        );

        let backward = build();
        assert!(hash_backward(&root_of(&backward), 0, &AtomicBool::new(false)));
        assert_eq!(root_of(&backward).memo_hash(0), Some(expected));
        for d in 0..300 {
            assert!(dir_of(&backward, d).memo_hash(0).is_some(), "directory d{d} was not hashed by the backward walk");
        }

        let parallel = build();
        assert_eq!(count_unhashed(&root_of(&parallel), 0, HELPER_INODES), HELPER_INODES);
        // The commit writes the tree while the helper hashes it backward.
        store.commit(&parallel, &[], 1, "Tezos", "two threads").unwrap();
        assert_eq!(root_of(&parallel).memo_hash(0), Some(expected));
        assert_eq!(parallel.hash().unwrap(), expected);
    }
}
