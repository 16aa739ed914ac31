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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{Inline, Leaf, Pointers, Value, Values};
    use pando_core::Hash;
    use std::cell::{Cell, RefCell};
    use std::sync::{Arc, Weak};

    /// Directories below the root, per level: each is a tree inode of two
    /// value inodes, each of which holds two contents and, above the last
    /// level, two directories.
    const LEVELS: u64 = 4;

    /// A tree made up as it is loaded: each inode is new (an offset names a
    /// directory, `offset >> 2`, and its part: 0 its tree inode, 1 and 2
    /// its value inodes); the loader counts the inodes still alive.
    struct MadeUp {
        loaded: RefCell<Vec<Weak<Inode>>>,
        most_alive: Cell<usize>,
        count: Cell<u64>,
    }

    /// The level of directory `dir`, numbered as a heap of four children each.
    fn level(mut dir: u64) -> u64 {
        let mut level = 0;
        while dir > 0 {
            dir = (dir - 1) / 4;
            level += 1;
        }
        level
    }

    impl Loader for MadeUp {
        fn load_inode(&self, offset: u64, _hash: &Hash, _depth: u32) -> Result<Arc<Inode>> {
            let (dir, part) = (offset >> 2, offset & 3);
            let hash = Hash([0; 32]);
            let body = if part == 0 {
                Body::Tree(Pointers::new(0, 40, [(3, Ptr::stored(dir << 2 | 1, hash)), (9, Ptr::stored(dir << 2 | 2, hash))]))
            } else {
                let mut entries = vec![
                    (format!("c{part}a"), Child::Contents(Leaf::Inline(Inline::new(b"small").unwrap()))),
                    (format!("c{part}b"), Child::Contents(Leaf::Value(Arc::new(Value::new(vec![7; 100]))))),
                ];
                if level(dir) < LEVELS {
                    for k in 0..2 {
                        let child = 4 * dir + 1 + 2 * (part - 1) + k;
                        entries.push((format!("d{part}{k}"), Child::Dir(Ptr::stored(child << 2, hash))));
                    }
                }
                Body::Values(Values::from_sorted(entries))
            };
            let inode = Arc::new(Inode::new(body));
            let mut loaded = self.loaded.borrow_mut();
            loaded.retain(|inode| inode.strong_count() > 0);
            loaded.push(Arc::downgrade(&inode));
            self.most_alive.set(self.most_alive.get().max(loaded.len()));
            self.count.set(self.count.get() + 1);
            Ok(inode)
        }

        fn load_blob(&self, _offset: u64, _hash: &Hash) -> Result<Arc<Value>> {
            unreachable!("the made-up tree holds no blob")
        }
    }

    /// However many inodes the tree holds, export keeps those of the path
    /// it is on: two per directory level (its tree inode, a value inode).
    #[test]
    fn export_holds_one_inode_per_level() {
        let loader = MadeUp { loaded: RefCell::default(), most_alive: Cell::new(0), count: Cell::new(0) };
        let header = Header { commit: Hash([1; 32]), parents: vec![], date: 0, author: "a".into(), message: "m".into() };
        let mut out = Vec::new();
        let summary = export(&loader, &header, &Ptr::stored(0, Hash([0; 32])), &mut out).unwrap();
        let directories: u64 = (0..=LEVELS).map(|l| 4u64.pow(l as u32)).sum();
        assert_eq!((summary.directories, summary.inodes), (directories, 3 * directories));
        assert_eq!(loader.count.get(), 3 * directories);
        let levels = 2 * (LEVELS as usize + 1);
        assert!(loader.most_alive.get() <= levels, "{} inodes alive at once, for {levels} levels", loader.most_alive.get());
        assert!(loader.most_alive.get() >= levels - 1, "the walk reached the last level");
    }
}
