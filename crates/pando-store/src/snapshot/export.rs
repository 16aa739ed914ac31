//! Writing a commit's tree as a snapshot stream (grammar in `snapshot`).
//!
//! A depth-first walk with an explicit stack: one frame per inode being
//! written, so memory is one inode per level of the tree, and the tree's
//! depth never touches the thread's stack.

use pando_core::inode::ENTRIES;
use pando_core::varint::write_u64;
use std::io::Write;
use std::sync::Arc;

use super::{END, ENTRY_CONTENTS, ENTRY_DIR, FrameWriter, Header, SnapshotSummary, TAG_TREE, TAG_VALUES, write_frames};
use crate::error::Result;
use crate::tree::hash::value_of;
use crate::tree::node::{Body, Child, Inode, Loader, Ptr, load};

/// An inode being written and the next of its entries or children.
struct Frame {
    inode: Arc<Inode>,
    next: usize,
}

/// Writes the tree whose root directory is `root` under `header`.
pub(crate) fn export(loader: &dyn Loader, header: &Header, root: &Ptr, out: &mut (dyn Write + Send)) -> Result<SnapshotSummary> {
    let (mut summary, stream_bytes, file_bytes) = write_frames(out, |w| walk(loader, header, root, w))?;
    (summary.stream_bytes, summary.file_bytes) = (stream_bytes, file_bytes);
    Ok(summary)
}

/// Writes the stream: the header, the tree in pre-order, the end marker.
fn walk(loader: &dyn Loader, header: &Header, root: &Ptr, w: &mut FrameWriter) -> Result<SnapshotSummary> {
    let mut summary = SnapshotSummary { commit: header.commit, ..SnapshotSummary::default() };
    header.encode(w.buf());
    let mut stack = vec![open(w, &mut summary, load(root, 0, loader)?)];
    summary.directories += 1;
    while let Some(frame) = stack.last_mut() {
        let at = frame.next;
        frame.next += 1;
        let next = match &frame.inode.body {
            Body::Values(entries) => {
                let Some((step, child)) = entries.get(at) else {
                    stack.pop();
                    continue;
                };
                let buf = w.buf();
                write_u64(buf, step.len() as u64);
                buf.extend_from_slice(step);
                match child {
                    Child::Dir(ptr) => {
                        buf.push(ENTRY_DIR);
                        summary.directories += 1;
                        Some(load(ptr, 0, loader)?)
                    }
                    _ => {
                        let value = value_of(child, loader)?.expect("a contents entry has a value");
                        buf.push(ENTRY_CONTENTS);
                        write_u64(buf, value.bytes.len() as u64);
                        buf.extend_from_slice(&value.bytes);
                        summary.contents += 1;
                        summary.contents_bytes += value.bytes.len() as u64;
                        None
                    }
                }
            }
            Body::Tree { depth, children, .. } => {
                let Some(i) = (at..ENTRIES).find(|&i| children[i].is_some()) else {
                    stack.pop();
                    continue;
                };
                frame.next = i + 1;
                let ptr = children[i].as_ref().expect("found present");
                Some(load(ptr, depth + 1, loader)?)
            }
        };
        if let Some(inode) = next {
            let frame = open(w, &mut summary, inode);
            stack.push(frame);
        }
        w.maybe_flush()?;
    }
    w.buf().push(END);
    Ok(summary)
}

/// Writes an inode's own part (its tag, and a tree inode's length and
/// bitmap) and returns its frame.
fn open(w: &mut FrameWriter, summary: &mut SnapshotSummary, inode: Arc<Inode>) -> Frame {
    summary.inodes += 1;
    let buf = w.buf();
    match &inode.body {
        Body::Values(entries) => {
            buf.push(TAG_VALUES);
            write_u64(buf, entries.len() as u64);
        }
        Body::Tree { len, children, .. } => {
            buf.push(TAG_TREE);
            write_u64(buf, *len);
            let bitmap = children.iter().enumerate().filter(|(_, c)| c.is_some()).fold(0u32, |m, (i, _)| m | 1 << i);
            buf.extend_from_slice(&bitmap.to_le_bytes());
        }
    }
    Frame { inode, next: 0 }
}
