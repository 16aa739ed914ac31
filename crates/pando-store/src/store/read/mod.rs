//! The readers' side of the store: how trees load what lies on disk
//! (`source`), how a read-only store follows the writer of another
//! process (`follow`), and proofs of reads at a commit (`proofs`).
//!
//! [`ReadSide`] is the reading half of an open store (`Repo`): the pack,
//! the caches, the index, the dictionary and the branches as last read,
//! with the lookups every reader makes; its `impl` blocks are here and in
//! `follow` and `source`.
//!
//! Invariant: a read here waits for the writer only to take a snapshot
//! of the index or the dictionary, and never writes a file (tested by
//! `a_read_only_store_reads_and_writes_no_file` and
//! `readers_see_every_commit_while_the_writer_commits`). (The one write a
//! tree asks of its source, staging large contents, is the writer's:
//! `Source::stage` is declared here with the other methods of that trait,
//! and a read-only store stages nothing.)

pub(super) mod follow;
pub(super) mod proofs;
pub(super) mod source;

use pando_core::Hash;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use crate::cache::NodeCache;
use crate::dict::Dict;
use crate::error::{Error, Result};
use crate::format::commit::CommitRecord;
use crate::format::control::Control;
use crate::format::record::RecordKind;
use crate::io::Storage;
use crate::options::Options;
use crate::pack::Pack;
use crate::store::index_file;
use crate::tracer::{TraceSink, Tracer};
use crate::tree::flat::FlatCache;

/// What every reader of an open store uses: the files as last read, the
/// caches, and the trace being recorded.
pub(crate) struct ReadSide {
    pub(in crate::store) id: u64,
    pub(in crate::store) storage: Arc<dyn Storage>,
    pub(in crate::store) pack: Pack,
    pub(in crate::store) cache: NodeCache,
    pub(in crate::store) dict: RwLock<Dict>,
    pub(in crate::store) index: RwLock<HashMap<Hash, u64>>,
    pub(in crate::store) branches: RwLock<BTreeMap<String, Hash>>,
    /// Read-only: the control slot last taken in (see `read::follow`).
    pub(in crate::store) follower: Option<Mutex<Control>>,
    pub(in crate::store) options: Options,
    /// The layout of the store's tries, from its control file (the
    /// options' is what the opener asked for, if anything).
    pub(in crate::store) layout: pando_core::inode::Layout,
    /// Offset of the newest commit record, `u64::MAX` when there is none.
    pub(in crate::store) last_commit: AtomicU64,
    /// Records calls as a trace, when asked to.
    pub(in crate::store) tracer: Option<Tracer>,
    /// Index entries of collected commits.
    pub(in crate::store) collected_commits: AtomicU64,
    /// What paths hold in the newest commit's tree (see `tree::flat`).
    pub(in crate::store) flat: FlatCache,
}

impl ReadSide {
    /// Where calls are recorded, when the store records a trace.
    pub(in crate::store) fn trace_sink(&self) -> Option<&dyn TraceSink> {
        self.tracer.as_ref().filter(|r| r.is_tracing()).map(|r| r as &dyn TraceSink)
    }

    pub(in crate::store) fn tracing(&self) -> bool {
        self.trace_sink().is_some()
    }

    /// Runs `f` on the trace sink, if the store is recording.
    pub(in crate::store) fn trace<T>(&self, f: impl FnOnce(&dyn TraceSink) -> T) -> Option<T> {
        self.trace_sink().map(f)
    }

    /// The index entry of `commit`; a read-only store that does not know
    /// it refreshes first.
    pub(in crate::store) fn commit_offset(&self, commit: &Hash) -> Result<Option<u64>> {
        let found = self.index.read().get(commit).copied();
        if found.is_none() && self.follower.is_some() && self.refresh()? > 0 {
            return Ok(self.index.read().get(commit).copied());
        }
        Ok(found)
    }

    pub(in crate::store) fn commit_record(&self, commit: &Hash) -> Result<Option<CommitRecord>> {
        let Some(offset) = self.commit_offset(commit)? else { return Ok(None) };
        if offset == index_file::COLLECTED {
            return Err(Error::CollectedCommit(*commit));
        }
        let record = self.read_commit_at(offset)?;
        let found = record.info().hash();
        if found != *commit {
            return Err(Error::corrupt("pack", offset, format!("commit record hashes to {found}, the index says {commit}")));
        }
        Ok(Some(record))
    }

    pub(in crate::store) fn read_commit_at(&self, offset: u64) -> Result<CommitRecord> {
        let (kind, payload) = self.pack.read_record(offset)?;
        if kind != RecordKind::Commit {
            return Err(Error::corrupt("pack", offset, format!("expected a commit record, found {kind:?}")));
        }
        CommitRecord::decode(&payload, offset).map_err(|reason| Error::corrupt("pack", offset, reason))
    }
}

#[cfg(test)]
mod tests {
    use crate::io::FsStorage;
    use crate::{CommitMeta, Options, Store, SyncPolicy};
    use pando_core::proof::Encoding;
    use std::sync::Arc;

    /// The store's files, by name, with their bytes.
    fn files(dir: &std::path::Path) -> Vec<(std::ffi::OsString, Vec<u8>)> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| (e.file_name(), std::fs::read(e.path()).unwrap()))
            .collect();
        files.sort();
        files
    }

    /// Reads of every kind by a read-only store on a storage that refuses
    /// every write (checkouts, lookups, a proof, following the writer, an
    /// update in memory) succeed and leave every file as it was.
    #[test]
    fn a_read_only_store_reads_and_writes_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let writer = Store::open(dir.path(), Options { sync: SyncPolicy::EveryCommit, ..Options::default() }).unwrap();
        let meta = |parents| CommitMeta { parents, date: 1, author: "Tezos", message: "block" };
        let mut tree = writer.empty_tree();
        for i in 0..300u32 {
            tree.add_mut(&["d", &format!("{i:03}")], &i.to_le_bytes()).unwrap();
        }
        tree.add_mut(&["blob"], &[7; 5000]).unwrap();
        let first = writer.commit(&tree, meta(&[])).unwrap();
        let storage = Arc::new(FsStorage::read_only(dir.path()).unwrap());
        let reader = Store::open_storage(storage, Options { read_only: true, ..Options::default() }).unwrap();
        tree.add_mut(&["e"], b"1").unwrap();
        let second = writer.commit(&tree, meta(&[first])).unwrap();
        let before = files(dir.path());

        let mut read = reader.checkout(&first).unwrap().unwrap();
        assert_eq!(read.length(&["d"]).unwrap(), 300);
        assert_eq!(read.find(&["blob"]).unwrap(), Some(vec![7; 5000]));
        let path = vec![vec![b"d".to_vec(), b"007".to_vec()]];
        reader.produce_stream_proof(&first, &path, Encoding::V1).unwrap();
        read.add_mut(&["big"], &[1; 100_000]).unwrap();
        assert!(read.mem(&["big"]).unwrap());
        // A commit made after the reader opened: found by following the writer.
        assert!(reader.checkout(&second).unwrap().unwrap().mem(&["e"]).unwrap());
        assert_eq!(files(dir.path()), before, "a read changed a file");
    }
}
