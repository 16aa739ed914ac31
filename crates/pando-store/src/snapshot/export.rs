//! Writing a commit's tree as a snapshot stream (grammar in `snapshot`),
//! by the tree's pre-order walk (`tree::walk`): one inode per level in
//! memory.

use pando_core::varint::write_u64;
use std::io::Write;

use super::{END, ENTRY_CONTENTS, ENTRY_DIR, FrameWriter, Header, SnapshotSummary, TAG_TREE, TAG_VALUES, write_frames};
use crate::error::Result;
use crate::node::{Body, Child, Inode, Loader, Ptr, with_value};
use crate::tree::walk::{Visitor, walk};

/// Writes the tree whose root directory is `root` under `header`.
pub(crate) fn export(loader: &dyn Loader, header: &Header, root: &Ptr, out: &mut (dyn Write + Send)) -> Result<SnapshotSummary> {
    let (mut summary, stream_bytes, file_bytes) = write_frames(out, |w| {
        let mut summary = SnapshotSummary { commit: header.commit, directories: 1, ..SnapshotSummary::default() };
        header.encode(w.buf());
        walk(root, loader, &mut Writer { w, loader, summary: &mut summary })?;
        w.buf().push(END);
        Ok(summary)
    })?;
    (summary.stream_bytes, summary.file_bytes) = (stream_bytes, file_bytes);
    Ok(summary)
}

/// The walk's visitor: each node and entry as the grammar writes it.
struct Writer<'a> {
    w: &'a mut FrameWriter,
    loader: &'a dyn Loader,
    summary: &'a mut SnapshotSummary,
}

impl Writer<'_> {
    fn step(&mut self, step: &[u8], kind: u8) {
        let buf = self.w.buf();
        write_u64(buf, step.len() as u64);
        buf.extend_from_slice(step);
        buf.push(kind);
    }
}

impl Visitor for Writer<'_> {
    fn inode(&mut self, inode: &Inode, _root: bool) -> Result<()> {
        self.summary.inodes += 1;
        let buf = self.w.buf();
        match &inode.body {
            Body::Values(values) => {
                buf.push(TAG_VALUES);
                write_u64(buf, values.len() as u64);
            }
            Body::Tree(pointers) => {
                buf.push(TAG_TREE);
                write_u64(buf, pointers.len);
                buf.extend_from_slice(&pointers.bitmap().to_le_bytes());
            }
        }
        self.w.maybe_flush()
    }

    fn contents(&mut self, step: &[u8], child: &Child) -> Result<()> {
        self.step(step, ENTRY_CONTENTS);
        let buf = self.w.buf();
        let len = with_value(child, self.loader, |value| {
            write_u64(buf, value.len() as u64);
            buf.extend_from_slice(value);
            value.len() as u64
        })?
        .expect("a contents entry has a value");
        self.summary.contents += 1;
        self.summary.contents_bytes += len;
        self.w.maybe_flush()
    }

    fn enter(&mut self, step: &[u8]) -> Result<()> {
        self.step(step, ENTRY_DIR);
        self.summary.directories += 1;
        Ok(())
    }
}
