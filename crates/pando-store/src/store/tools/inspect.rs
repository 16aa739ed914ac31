//! `Store::inspect`: the audit behind `pando stats`. It scans every record
//! the pack holds, walks one commit's tree and compresses samples of the
//! files; `crate::inspect` does the counting.
//!
//! Invariants:
//! - Reads only, through the pack and the `Storage`: works on a read-only
//!   open and after a collection (tested by
//!   `after_a_collection_and_read_only` and
//!   `checking_and_inspecting_write_nothing`).
//! - The runs below the first chunk and the chunks are scanned each from
//!   its start to its end: every byte is counted in one record (asserted
//!   in `scan_records`).
//! - Bounded memory: the scan reads a region at a time (the pack's scan);
//!   the tree walk (`tree::walk`) holds one inode per level of the tree,
//!   and the visitor one step per directory it is in, each left as it was
//!   entered (asserted in `walk_tree`).
//! - Each sample read lies inside its file (asserted in `sample_files`).
//! - Damage is an error naming the file and the position there (or, for a
//!   node the walk loads, the pack offset), never a panic (tested by
//!   `damage_names_file_and_offset`).
//!
//! Boundary: what an archive-mode collection moved to cold files is
//! scanned only where a run points into it; the cold files' sizes are
//! reported with the other files.

use pando_core::Hash;

use crate::error::{Error, Result};
use crate::format::record::RecordKind;
use crate::inspection::{
    FileKind, FileSample, InspectOptions, Inspection, PackRecords, Progress, RecordTally, SAMPLE_LEVEL, SAMPLE_PIECE_BYTES,
    Stage, TreeShape, plan_samples, share_budget,
};
use crate::io::Storage;
use crate::node::{Child, Inode, Leaf, Ptr, Step};
use crate::pack::PackFile;
use crate::store::{Repo, Store};
use crate::tree::walk::{Visitor, walk};

/// Bytes scanned between two progress reports.
const PROGRESS_BYTES: u64 = 4 << 20;
/// Directories walked between two progress reports.
const PROGRESS_DIRECTORIES: u64 = 4096;

// Every public method is documented: an embedder reads these first.
#[deny(missing_docs)]
impl Store {
    /// Measures the store: its records by kind, the sizes of the contents
    /// they hold, how steps are stored, the commits' batches, the shape of
    /// one commit's tree (`options.commit`, default the last one) and how
    /// well samples of the files compress. Calls `progress` now and then.
    ///
    /// Meant for a read-only open: a collection finishing in this process
    /// during the scan can make it fail (`Collected`).
    pub fn inspect(&self, options: &InspectOptions, progress: &mut dyn FnMut(Progress)) -> Result<Inspection> {
        let repo = &self.repo;
        let commit = match options.commit {
            Some(hash) => Some(hash),
            None => self.last_commit()?,
        };
        // An unknown or collected commit is refused before the long scan.
        let root = match commit {
            Some(hash) => {
                let record = repo.read.commit_record(&hash)?.ok_or(Error::UnknownCommit(hash))?;
                Some((hash, record.root_offset, record.root_hash))
            }
            None => None,
        };
        let stats = self.info();
        let records = scan_records(repo, progress)?;
        let tree = match root {
            Some((hash, offset, root_hash)) => Some(walk_tree(repo, hash, Ptr::stored(offset, root_hash), progress)?),
            None => None,
        };
        let files = sample_files(&*repo.read.storage, options.sample_bytes, progress)?;
        Ok(Inspection {
            pack_bytes: stats.pack_bytes,
            commits: stats.commits,
            dict_entries: stats.dict_entries as u64,
            generation: stats.generation,
            records,
            tree,
            files,
            sample_budget_bytes: options.sample_bytes,
        })
    }
}

/// Counts every record of the runs below the first chunk, then of the chunks.
fn scan_records(repo: &Repo, progress: &mut dyn FnMut(Progress)) -> Result<PackRecords> {
    let pack = &repo.read.pack;
    let first = pack.first_chunk_start();
    let end = pack.end();
    let collected = pack.collected();
    let runs = collected.as_ref().map_or(&[][..], |c| &c.runs[..]);
    let total = runs.iter().map(|r| r.len).sum::<u64>() + (end - first);
    let mut tally = RecordTally::new();
    let mut reported = 0;
    progress(Progress { stage: Stage::Records, done: 0, total });
    let mut scan = |tally: &mut RecordTally, from: u64, to: u64| {
        pack.scan(from, to, &mut |offset, kind, payload| {
            // Taken per record: a writer in this process adds entries meanwhile.
            let counted = tally.count(offset, kind, payload, &repo.read.dict.read());
            counted.map_err(|reason| corrupt_record(repo, offset, kind, reason))?;
            if tally.scanned_bytes() - reported >= PROGRESS_BYTES {
                reported = tally.scanned_bytes();
                progress(Progress { stage: Stage::Records, done: reported, total });
            }
            Ok(())
        })
    };
    for run in runs {
        tally.enter_run();
        scan(&mut tally, run.old, run.old + run.len)?;
    }
    tally.enter_chunks(first);
    scan(&mut tally, first, end)?;
    assert_eq!(tally.scanned_bytes(), total, "the records scanned cover the runs and the chunks exactly");
    progress(Progress { stage: Stage::Records, done: total, total });
    Ok(tally.finish())
}

/// The error for a record at `offset` whose payload does not decode, naming
/// the file holding it and the position there.
fn corrupt_record(repo: &Repo, offset: u64, kind: RecordKind, reason: String) -> Error {
    let reason = format!("{} record at pack offset {offset}: {reason}", kind.name());
    match repo.read.pack.file_position(offset) {
        Ok((file, position)) => Error::corrupt(file, position, reason),
        Err(_) => Error::corrupt("pack", offset, reason),
    }
}

/// Walks the tree whose root directory `root` points to (`tree::walk`).
fn walk_tree(repo: &Repo, commit: Hash, root: Ptr, progress: &mut dyn FnMut(Progress)) -> Result<TreeShape> {
    let mut shaper = Shaper { shape: TreeShape::new(commit), path: Vec::new(), progress };
    walk(&root, repo, &mut shaper)?;
    assert!(shaper.path.is_empty(), "the walk leaves each directory it enters");
    let Shaper { shape, progress, .. } = shaper;
    progress(Progress { stage: Stage::Tree, done: shape.directories, total: 0 });
    Ok(shape)
}

/// The walk's visitor: the directories' sizes and paths, the contents' depths.
struct Shaper<'a> {
    shape: TreeShape,
    /// Steps from the root to the directory being walked.
    path: Vec<Step>,
    progress: &'a mut dyn FnMut(Progress),
}

impl Visitor for Shaper<'_> {
    fn inode(&mut self, inode: &Inode, root: bool) -> Result<()> {
        if root {
            let path: Vec<&[u8]> = self.path.iter().map(|s| &s[..]).collect();
            self.shape.directory(&path, inode.len());
            if self.shape.directories.is_multiple_of(PROGRESS_DIRECTORIES) {
                (self.progress)(Progress { stage: Stage::Tree, done: self.shape.directories, total: 0 });
            }
        }
        Ok(())
    }

    fn contents(&mut self, _step: &[u8], child: &Child) -> Result<()> {
        self.shape.contents(self.path.len() as u64 + 1, matches!(child, Child::Contents(Leaf::Blob { .. } | Leaf::Staged(_))));
        Ok(())
    }

    fn enter(&mut self, step: &[u8]) -> Result<()> {
        self.path.push(Step::from_slice(step));
        Ok(())
    }

    fn leave(&mut self) -> Result<()> {
        let left = self.path.pop();
        debug_assert!(left.is_some(), "the walk leaves only a directory it entered");
        Ok(())
    }
}

/// Lists the store's files by kind and compresses samples of them, about
/// `budget` bytes in all.
fn sample_files(storage: &dyn Storage, budget: u64, progress: &mut dyn FnMut(Progress)) -> Result<Vec<FileSample>> {
    let mut names = storage.list().map_err(Error::io(storage.describe(), "list"))?;
    names.sort();
    let mut groups: Vec<(FileKind, Vec<PackFile>)> = FileKind::ALL.iter().map(|&k| (k, Vec::new())).collect();
    for name in names {
        let Some(kind) = FileKind::of(&name) else { continue };
        let file = match storage.open(&name, false) {
            Ok(file) => file,
            // Removed since the listing (a collection finished meanwhile).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(name, "open")(e)),
        };
        let len = file.len().map_err(Error::io(name.as_str(), "stat"))?;
        groups.iter_mut().find(|(k, _)| *k == kind).expect("every kind has a group").1.push(PackFile { name, file, len });
    }
    let totals: Vec<u64> = groups.iter().map(|(_, files)| files.iter().map(|f| f.len).sum()).collect();
    let shares = share_budget(&totals, budget);
    let plans: Vec<Vec<(usize, u64, u64)>> = groups
        .iter()
        .zip(&shares)
        .map(|((_, files), &share)| {
            let sizes: Vec<u64> = files.iter().map(|f| f.len).collect();
            plan_samples(&sizes, share, SAMPLE_PIECE_BYTES)
        })
        .collect();
    let total: u64 = plans.iter().flatten().map(|p| p.2).sum();
    let mut done = 0;
    progress(Progress { stage: Stage::Samples, done, total });
    let mut buf = Vec::new();
    let mut out = Vec::new();
    for (((kind, files), plan), file_bytes) in groups.iter().zip(&plans).zip(totals) {
        let mut sample = FileSample { kind: *kind, files: files.len() as u64, file_bytes, sampled_bytes: 0, compressed_bytes: 0 };
        for &(i, offset, len) in plan {
            let PackFile { name, file, len: file_len } = &files[i];
            assert!(offset + len <= *file_len, "a sample lies inside its file");
            buf.resize(len as usize, 0);
            file.read_exact_at(&mut buf, offset).map_err(Error::io(name.as_str(), "read"))?;
            let compressed = zstd::bulk::compress(&buf, SAMPLE_LEVEL).map_err(Error::io(name.as_str(), "compress"))?;
            sample.sampled_bytes += len;
            sample.compressed_bytes += compressed.len() as u64;
            done += len;
            progress(Progress { stage: Stage::Samples, done, total });
        }
        out.push(sample);
    }
    Ok(out)
}
