//! A depth-first walk of a stored tree in pre-order, through a loader:
//! each inode, then what it holds (a value inode's entries in order, a
//! directory entry's whole directory before the next entry; a tree inode's
//! children in index order). Snapshot export and `pando stats` walk trees
//! this way.
//!
//! Invariant: the walk holds one inode per level (an explicit stack, not
//! the thread's), so its memory is bounded by the tree's depth, never by
//! the size of a directory (tested by `a_walk_holds_one_inode_per_level`).

use pando_core::dir::ENTRIES;
use std::sync::Arc;

use crate::error::Result;
use crate::node::{Body, Child, Inode, Loader, Ptr, load};

/// What a walk reports, in order.
pub trait Visitor {
    /// An inode, before what it holds; `root`: the root inode of a directory.
    fn inode(&mut self, inode: &Inode, root: bool) -> Result<()>;
    /// A contents entry of a value inode (inline or a blob, not loaded).
    fn contents(&mut self, step: &[u8], child: &Child) -> Result<()>;
    /// A directory entry, before its directory is walked.
    fn enter(&mut self, step: &[u8]) -> Result<()>;
    /// The directory of the last `enter` not yet left has been walked.
    fn leave(&mut self) -> Result<()> {
        Ok(())
    }
}

/// An inode being walked and the next of its entries or children.
struct Frame {
    inode: Arc<Inode>,
    next: usize,
    root: bool,
}

/// Walks the directory whose root inode `root` points to.
pub fn walk(root: &Ptr, loader: &dyn Loader, visitor: &mut dyn Visitor) -> Result<()> {
    let inode = load(root, 0, loader)?;
    visitor.inode(&inode, true)?;
    let mut stack = vec![Frame { inode, next: 0, root: true }];
    while let Some(frame) = stack.last_mut() {
        let at = frame.next;
        frame.next += 1;
        let next = match &frame.inode.body {
            Body::Values(values) => match (at < values.len()).then(|| (values.step(at), values.child(at))) {
                None => None,
                Some((step, Child::Dir(ptr))) => {
                    visitor.enter(step)?;
                    Some((load(ptr, 0, loader)?, true))
                }
                Some((step, child)) => {
                    visitor.contents(step, child)?;
                    continue;
                }
            },
            Body::Tree(pointers) => match (at..ENTRIES).find_map(|i| pointers.get(i).map(|ptr| (i, ptr))) {
                None => None,
                Some((i, ptr)) => {
                    frame.next = i + 1;
                    Some((load(ptr, pointers.depth + 1, loader)?, false))
                }
            },
        };
        match next {
            Some((inode, root)) => {
                visitor.inode(&inode, root)?;
                stack.push(Frame { inode, next: 0, root });
            }
            None => {
                let done = stack.pop().expect("the frame just read");
                if done.root && !stack.is_empty() {
                    visitor.leave()?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CommitMeta, Options, Store};
    use pando_core::Hash;
    use std::sync::{Mutex, Weak};

    /// Loads through a store that keeps nothing, noting each inode loaded.
    struct Watching<'a> {
        loader: &'a dyn Loader,
        loaded: Mutex<Vec<Weak<Inode>>>,
    }

    impl Loader for Watching<'_> {
        fn load_inode(&self, offset: u64, hash: &Hash, depth: u32) -> Result<Arc<Inode>> {
            let inode = self.loader.load_inode(offset, hash, depth)?;
            self.loaded.lock().unwrap().push(Arc::downgrade(&inode));
            Ok(inode)
        }

        fn load_blob(&self, offset: u64, hash: &Hash) -> Result<Arc<crate::node::Value>> {
            self.loader.load_blob(offset, hash)
        }
    }

    /// The most inodes alive at once, and how many were visited.
    struct Alive<'a>(&'a Watching<'a>, usize, usize);

    impl Visitor for Alive<'_> {
        fn inode(&mut self, _: &Inode, _: bool) -> Result<()> {
            let alive = self.0.loaded.lock().unwrap().iter().filter(|inode| inode.strong_count() > 0).count();
            self.1 = self.1.max(alive);
            self.2 += 1;
            Ok(())
        }
        fn contents(&mut self, _: &[u8], _: &Child) -> Result<()> {
            Ok(())
        }
        fn enter(&mut self, _: &[u8]) -> Result<()> {
            Ok(())
        }
    }

    /// A directory of 5,000 entries (a few hundred inodes) and a path of
    /// eight directories: the walk holds at most one inode per level of
    /// each, however many it visits.
    #[test]
    fn a_walk_holds_one_inode_per_level() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options { cache_bytes: 0, read_cache_bytes: 0, ..Options::default() };
        let store = Store::open(dir.path(), options.clone()).unwrap();
        let mut tree = store.empty_tree();
        for i in 0..5000u32 {
            tree.add_mut(&["wide", &format!("{i:04}")], &i.to_le_bytes()).unwrap();
        }
        tree.add_mut(&["a", "b", "c", "d", "e", "f", "g", "h"], b"deep").unwrap();
        let commit = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "wide" }).unwrap();
        drop(tree);
        store.close().unwrap();

        let store = Store::open(dir.path(), options).unwrap();
        let tree = store.checkout(&commit).unwrap().unwrap();
        let Child::Dir(root) = tree.node().unwrap() else { panic!("a directory") };
        let source = tree.source().unwrap();
        let watching = Watching { loader: source.as_ref(), loaded: Mutex::new(Vec::new()) };
        let mut alive = Alive(&watching, 0, 0);
        walk(root, &watching, &mut alive).unwrap();
        assert!(alive.2 > 150, "{} inodes visited", alive.2);
        assert!(alive.1 <= 10, "{} inodes alive at once", alive.1);
    }
}
