//! A commit's batch: its records' bytes, in the order they are encoded,
//! handed to the pack in pieces while the next ones are encoded once the
//! batch grows large (`Options::commit_spill_bytes`).
//!
//! Invariants:
//! - Records are appended at consecutive logical offsets from the
//!   batch's start, the pieces in order, each at the offset its first
//!   byte was given (asserted in `Batch::push` and `Batch::spill`).
//! - A batch never straddles two chunks: every piece goes to the chunk
//!   the batch started in (the pack refuses otherwise; tested by
//!   `large_commits_spill_in_pieces`).

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::ScopedJoinHandle;

use crate::crash_point;
use crate::error::Result;
use crate::format::record::{self, RecordKind};
use crate::pack::Pack;

/// One commit's records, as bytes: those not yet handed to the pack, from
/// logical offset `base`.
pub(in crate::store) struct Batch<'a, 's> {
    /// Logical offset of the batch's first byte: records from there on
    /// are this commit's.
    start: u64,
    /// Logical offset of `buf`'s first byte (past the pieces handed on).
    base: u64,
    buf: Vec<u8>,
    /// Bytes of records held before they are handed to the pack.
    spill_bytes: usize,
    pack: &'a Pack,
    /// Where a thread appending the pieces of a large batch is started.
    scope: &'s std::thread::Scope<'s, 'a>,
    spill: Option<Spill<'s>>,
}

/// The thread appending a large batch's pieces to the pack while the next
/// ones are encoded, in order; it hands the emptied buffers back.
struct Spill<'s> {
    pieces: SyncSender<(u64, Vec<u8>)>,
    emptied: Receiver<Vec<u8>>,
    writer: ScopedJoinHandle<'s, Result<()>>,
}

impl<'a, 's> Batch<'a, 's> {
    /// A batch starting at `start` (the pack's end), in `buf` (emptied).
    pub(in crate::store) fn new(
        pack: &'a Pack,
        start: u64,
        mut buf: Vec<u8>,
        spill_bytes: u64,
        scope: &'s std::thread::Scope<'s, 'a>,
    ) -> Batch<'a, 's> {
        buf.clear();
        let spill_bytes = usize::try_from(spill_bytes).unwrap_or(usize::MAX).max(1);
        Batch { start, base: start, buf, spill_bytes, pack, scope, spill: None }
    }

    /// The offset of the batch's first record.
    pub(in crate::store) fn start(&self) -> u64 {
        self.start
    }

    /// The offset the next record gets.
    pub(in crate::store) fn next_offset(&self) -> u64 {
        self.base + self.buf.len() as u64
    }

    /// Appends `payload` as a record; returns its offset. The batch so
    /// far goes to the pack once it holds `spill_bytes`.
    pub(in crate::store) fn push(&mut self, kind: RecordKind, payload: &[u8]) -> Result<u64> {
        let at = self.next_offset();
        record::append(&mut self.buf, kind, payload);
        debug_assert_eq!(
            self.next_offset() - at,
            record::header_len(payload.len() as u64) as u64 + payload.len() as u64 + 4,
            "a record is its header, its payload and its checksum"
        );
        if self.buf.len() >= self.spill_bytes {
            self.spill()?;
        }
        Ok(at)
    }

    /// Hands the batch so far to the spill thread (started on the first
    /// piece) and goes on in an emptied buffer.
    fn spill(&mut self) -> Result<()> {
        let pack = self.pack;
        let spill = self.spill.get_or_insert_with(|| {
            let (pieces, received) = sync_channel::<(u64, Vec<u8>)>(1);
            let (give_back, emptied) = sync_channel(2);
            let writer = self.scope.spawn(move || {
                let mut next = None;
                for (at, mut piece) in received {
                    assert!(next.is_none_or(|next| next == at), "a batch's pieces are appended in order, with no gap");
                    pack.append(at, &piece)?;
                    crash_point::reach("after-spill");
                    next = Some(at + piece.len() as u64);
                    piece.clear();
                    let _ = give_back.try_send(piece);
                }
                Ok(())
            });
            Spill { pieces, emptied, writer }
        });
        let next = spill.emptied.try_recv().unwrap_or_else(|_| Vec::with_capacity(self.buf.capacity()));
        let piece = std::mem::replace(&mut self.buf, next);
        let at = self.base;
        self.base += piece.len() as u64;
        if spill.pieces.send((at, piece)).is_err() {
            // The thread stopped on an error: that error.
            self.finish_spill()?;
            unreachable!("the spill thread stops early only on an error");
        }
        Ok(())
    }

    /// Waits until the pieces handed to the spill thread are in the pack.
    fn finish_spill(&mut self) -> Result<()> {
        let Some(Spill { pieces, writer, .. }) = self.spill.take() else { return Ok(()) };
        drop(pieces);
        writer.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    /// Ends the batch once every piece is in the pack: the offset of the
    /// bytes not handed on, and those bytes.
    pub(in crate::store) fn finish(mut self) -> Result<(u64, Vec<u8>)> {
        self.finish_spill()?;
        assert_eq!(self.pack.end(), self.base, "the pieces handed on end where the rest starts");
        Ok((self.base, std::mem::take(&mut self.buf)))
    }
}

#[cfg(test)]
mod tests {
    use crate::{CommitMeta, Options, Store, Tree};

    /// A batch larger than `commit_spill_bytes` goes to the pack in
    /// pieces, in order, as it is encoded: the same commit, the same
    /// bytes, in more writes, and every entry reads back after a reopen.
    #[test]
    fn large_commits_spill_in_pieces() {
        let tree = || {
            let mut tree = Tree::empty();
            for i in 0..5_000u32 {
                tree.add_mut(&["index".to_string(), format!("{i:08x}"), "balance".to_string()], &[i as u8; 40]).unwrap();
            }
            tree
        };
        let commit = |spill: u64| {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path(), Options { commit_spill_bytes: spill, ..Options::default() }).unwrap();
            let before = store.io_times().unwrap();
            let hash = store.commit(&tree(), CommitMeta { parents: &[], date: 1, author: "t", message: "" }).unwrap();
            let after = store.io_times().unwrap();
            drop(store);
            let store = Store::open(dir.path(), Options::default()).unwrap();
            let read = store.checkout(&hash).unwrap().unwrap();
            for i in (0..5_000u32).step_by(97) {
                let path = ["index".to_string(), format!("{i:08x}"), "balance".to_string()];
                assert_eq!(read.find(&path).unwrap(), Some(vec![i as u8; 40]));
            }
            (hash, after.writes - before.writes, after.write_bytes - before.write_bytes)
        };
        let (whole, whole_writes, whole_bytes) = commit(64 << 20);
        let (pieces, piece_writes, piece_bytes) = commit(4 << 10);
        assert_eq!(whole, pieces);
        assert_eq!(whole_bytes, piece_bytes, "the same bytes written");
        assert!(piece_writes >= whole_writes + 10, "{piece_writes} writes in pieces, {whole_writes} whole");
    }
}
