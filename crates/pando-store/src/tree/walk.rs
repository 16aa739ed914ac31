//! A depth-first walk of a stored tree in pre-order, through a loader:
//! each inode, then what it holds (a value inode's entries in order, a
//! directory entry's whole directory before the next entry; a tree inode's
//! children in index order). Snapshot export and `pando stats` walk trees
//! this way.
//!
//! Invariant: the walk holds one inode per level (an explicit stack, not
//! the thread's), so its memory is bounded by the tree's depth, never by
//! the size of a directory.

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
