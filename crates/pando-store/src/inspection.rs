//! What an audit of a store measures ([`Store::inspect`](crate::Store::inspect),
//! `pando stats`): plain numbers, and the pure accounting that turns records,
//! directories and file samples into them.
//!
//! The mechanism (scanning the pack, walking a commit's tree, reading
//! samples of files) is in `store/tools/inspect.rs`; everything here is fed bytes
//! and is tested without a disk.
//!
//! Invariants:
//! - Memory is bounded whatever the store's size: fixed histograms and
//!   counters, never a table with one row per record, commit or directory
//!   (tested by `a_tally_holds_as_much_memory_whatever_it_counts`).
//! - Bytes that passed a record's checksum but do not decode are an error
//!   (a reason; the caller names the file and offset), never a panic
//!   (tested by `a_value_inode_is_counted_and_a_damaged_one_refused`).

use hdrhistogram::Histogram;
use pando_core::Hash;

use crate::dict::{self, Dict};
use crate::format::node::{StoredChild, StoredEntry, StoredStep, stored_entries};
use crate::format::patch::StoredPatch;
use crate::format::record::{self, RecordKind};
use crate::pack::parse_hex_name;

/// What to inspect.
#[derive(Clone, Debug)]
pub struct InspectOptions {
    /// The commit whose tree is walked; `None`: the last commit.
    pub commit: Option<Hash>,
    /// At most about this many bytes of the files are read and compressed
    /// to measure their compressibility (0: none).
    pub sample_bytes: u64,
}

impl Default for InspectOptions {
    fn default() -> Self {
        InspectOptions { commit: None, sample_bytes: 64 << 20 }
    }
}

/// Bytes of one compressibility sample, compressed alone.
pub const SAMPLE_PIECE_BYTES: u64 = 1 << 20;
/// The zstd level samples are compressed at.
pub const SAMPLE_LEVEL: i32 = 3;

/// What an inspection is doing, for a progress bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Scanning the records: `done` and `total` in bytes.
    Records,
    /// Walking a tree: `done` directories, `total` unknown (0).
    Tree,
    /// Compressing samples: `done` and `total` in bytes.
    Samples,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub stage: Stage,
    pub done: u64,
    pub total: u64,
}

/// Everything [`Store::inspect`](crate::Store::inspect) measures.
#[derive(Clone, Debug)]
pub struct Inspection {
    /// Bytes of the pack's files (chunks, and the files below them).
    pub pack_bytes: u64,
    /// Commits in the index (not counting collected ones).
    pub commits: u64,
    /// Entries of the dictionary.
    pub dict_entries: u64,
    /// The layout generation (0 before any collection).
    pub generation: u64,
    pub records: PackRecords,
    /// The shape of the inspected commit's tree (`None`: no commit).
    pub tree: Option<TreeShape>,
    /// The store's files by kind, with their compressibility.
    pub files: Vec<FileSample>,
    /// Bytes the samples were asked to total.
    pub sample_budget_bytes: u64,
}

impl Inspection {
    /// Pack bytes per commit in the index.
    pub fn bytes_per_commit(&self) -> Option<u64> {
        self.pack_bytes.checked_div(self.commits)
    }
}

/// Counts of values in power-of-two buckets: 0, 1, 2-3, 4-7, ...
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log2Histogram {
    counts: [u64; 65],
    count: u64,
    sum: u64,
    max: u64,
}

impl Default for Log2Histogram {
    fn default() -> Self {
        Log2Histogram { counts: [0; 65], count: 0, sum: 0, max: 0 }
    }
}

impl Log2Histogram {
    /// The bucket of `value`: 0 for 0, then `i` for `2^(i-1) ..= 2^i - 1`.
    pub fn bucket_of(value: u64) -> usize {
        (u64::BITS - value.leading_zeros()) as usize
    }

    /// The values bucket `i` holds, `(low, high)` inclusive.
    pub fn bucket_range(i: usize) -> (u64, u64) {
        match i {
            0 => (0, 0),
            64 => (1 << 63, u64::MAX),
            i => (1 << (i - 1), (1 << i) - 1),
        }
    }

    pub fn add(&mut self, value: u64) {
        let bucket = Self::bucket_of(value);
        debug_assert!(
            (Self::bucket_range(bucket).0..=Self::bucket_range(bucket).1).contains(&value),
            "a value's bucket holds it"
        );
        self.counts[bucket] += 1;
        self.count += 1;
        self.sum = self.sum.saturating_add(value);
        self.max = self.max.max(value);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The sum of the values (saturating).
    pub fn sum(&self) -> u64 {
        self.sum
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum as f64 / self.count as f64)
    }

    /// The buckets from the first non-empty one to the last: `(low, high, count)`.
    pub fn buckets(&self) -> Vec<(u64, u64, u64)> {
        let first = self.counts.iter().position(|&c| c > 0);
        let last = self.counts.iter().rposition(|&c| c > 0);
        let (Some(first), Some(last)) = (first, last) else { return Vec::new() };
        (first..=last)
            .map(|i| {
                let (low, high) = Self::bucket_range(i);
                (low, high, self.counts[i])
            })
            .collect()
    }
}

/// Records of one kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KindTotals {
    pub records: u64,
    /// Whole records: header, payload and checksum.
    pub bytes: u64,
    pub payload_bytes: u64,
}

impl KindTotals {
    /// Bytes of headers and checksums.
    pub fn overhead_bytes(&self) -> u64 {
        self.bytes - self.payload_bytes
    }

    fn add(&mut self, payload_len: u64) {
        self.records += 1;
        self.payload_bytes += payload_len;
        self.bytes += record_len(payload_len);
    }
}

/// Bytes of a whole record holding `payload_len` bytes.
pub fn record_len(payload_len: u64) -> u64 {
    record::header_len(payload_len) as u64 + payload_len + 4
}

/// Steps of value inode entries stored one way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepUse {
    pub count: u64,
    /// Bytes of the encoded steps (id or length varint and bytes).
    pub stored_bytes: u64,
    /// Bytes of the names they stand for.
    pub name_bytes: u64,
}

impl StepUse {
    fn add(&mut self, stored: usize, name: usize) {
        self.count += 1;
        self.stored_bytes += stored as u64;
        self.name_bytes += name as u64;
    }
}

/// How the steps of the value inodes scanned are stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepsStored {
    pub dict_id: StepUse,
    pub raw: StepUse,
    pub hex: StepUse,
}

/// What the entries of the value inodes scanned point to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EntryKinds {
    pub dirs: u64,
    pub inline: u64,
    pub blobs: u64,
}

/// The contents values stored in the pack: inline in value inodes and in
/// blob records, each stored copy counted (a value inode is written anew
/// when any of its entries changes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContentsSizes {
    /// Sizes in bytes, inline and blobs together.
    pub sizes: Log2Histogram,
    pub inline: u64,
    pub inline_bytes: u64,
    pub blobs: u64,
    pub blob_bytes: u64,
}

/// Quantiles of a distribution (hdrhistogram, within 0.1%); `max` exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quantiles {
    pub median: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

/// Commit batches in the chunks: from the end of a commit record (or the
/// first chunk's start) to the end of the next commit record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batches {
    pub sizes: Log2Histogram,
    pub quantiles: Quantiles,
}

/// What a scan of every record the pack holds counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackRecords {
    /// By kind, in the order of [`RecordKind::ALL`].
    pub kinds: [KindTotals; RecordKind::ALL.len()],
    /// Bytes of records scanned in the chunks.
    pub chunk_bytes: u64,
    /// Runs below the first chunk (after a collection) and their bytes.
    pub runs: u64,
    pub run_bytes: u64,
    pub entries: EntryKinds,
    pub steps: StepsStored,
    pub contents: ContentsSizes,
    /// Entries the dictionary records scanned define.
    pub dict_defined: u64,
    pub batches: Batches,
}

impl PackRecords {
    pub fn kind(&self, kind: RecordKind) -> &KindTotals {
        &self.kinds[kind_slot(kind)]
    }

    /// All kinds together.
    pub fn total(&self) -> KindTotals {
        self.kinds.iter().fold(KindTotals::default(), |a, k| KindTotals {
            records: a.records + k.records,
            bytes: a.bytes + k.bytes,
            payload_bytes: a.payload_bytes + k.payload_bytes,
        })
    }
}

fn kind_slot(kind: RecordKind) -> usize {
    RecordKind::ALL.iter().position(|&k| k == kind).expect("every kind is listed")
}

/// Counts records as a scan meets them: first the runs below the first
/// chunk, each after [`enter_run`](RecordTally::enter_run), then the chunks
/// after [`enter_chunks`](RecordTally::enter_chunks).
pub struct RecordTally {
    records: PackRecords,
    /// In the chunks: where the current batch started.
    batch_start: Option<u64>,
    batch_sizes: Histogram<u64>,
}

impl Default for RecordTally {
    fn default() -> Self {
        RecordTally::new()
    }
}

impl RecordTally {
    pub fn new() -> RecordTally {
        // Three significant digits: quantiles within 0.1%, in fixed memory
        // (the histogram grows with the largest value, not with the count).
        let batch_sizes = Histogram::new(3).expect("3 significant digits are valid");
        RecordTally { records: PackRecords::default(), batch_start: None, batch_sizes }
    }

    /// The records that follow are a run below the first chunk.
    pub fn enter_run(&mut self) {
        assert!(self.batch_start.is_none(), "the runs are counted before the chunks");
        self.records.runs += 1;
        self.batch_start = None;
    }

    /// The records that follow are the chunks', from `start`, the first
    /// chunk's start (a batch starts there: batches never straddle chunks).
    pub fn enter_chunks(&mut self, start: u64) {
        assert!(self.batch_start.is_none(), "the chunks are entered once");
        self.batch_start = Some(start);
    }

    /// Bytes of the records counted so far.
    pub fn scanned_bytes(&self) -> u64 {
        self.records.chunk_bytes + self.records.run_bytes
    }

    /// Counts the record of `kind` at `offset`; `dict` gives the names of
    /// dictionary ids. Errors if its payload does not decode.
    pub fn count(&mut self, offset: u64, kind: RecordKind, payload: &[u8], dict: &Dict) -> Result<(), String> {
        let payload_len = payload.len() as u64;
        let len = record_len(payload_len);
        match kind {
            RecordKind::Values | RecordKind::ValuesPatch => {
                let PackRecords { steps, entries, contents, .. } = &mut self.records;
                // Every entry a record writes: a patch's replaced entries
                // keep their base's step, which it does not write again.
                let mut entry = |stored: Option<StoredEntry<'_>>, child: StoredChild<'_>| -> Result<(), String> {
                    match stored.map(|entry| (entry.step, entry.step_bytes)) {
                        Some((StoredStep::Dict(id), stored_bytes)) => {
                            let name = dict.step_of(id).ok_or_else(|| format!("unknown dictionary id {id}"))?;
                            steps.dict_id.add(stored_bytes, name.len());
                        }
                        Some((StoredStep::Raw(name), stored_bytes)) => steps.raw.add(stored_bytes, name.len()),
                        Some((StoredStep::Hex(bytes), stored_bytes)) => steps.hex.add(stored_bytes, 2 * bytes.len()),
                        None => {}
                    }
                    match child {
                        StoredChild::Dir(_) => entries.dirs += 1,
                        StoredChild::Blob(_) => entries.blobs += 1,
                        StoredChild::Inline(bytes) => {
                            entries.inline += 1;
                            contents.inline += 1;
                            contents.inline_bytes += bytes.len() as u64;
                            contents.sizes.add(bytes.len() as u64);
                        }
                    }
                    Ok(())
                };
                if kind == RecordKind::Values {
                    stored_entries(payload, offset, &mut |stored| entry(Some(stored), stored.child))?;
                } else {
                    let patch = StoredPatch::parse(payload, offset)?;
                    for child in &patch.replaced {
                        entry(None, *child)?;
                    }
                    for (_, stored) in &patch.inserted {
                        entry(Some(*stored), stored.child)?;
                    }
                }
            }
            RecordKind::Blob => {
                let contents = &mut self.records.contents;
                contents.blobs += 1;
                contents.blob_bytes += payload_len;
                contents.sizes.add(payload_len);
            }
            RecordKind::Dict => {
                let (_, steps) = dict::decode_record(payload)?;
                self.records.dict_defined += steps.len() as u64;
            }
            RecordKind::Commit => {
                crate::format::commit::CommitRecord::decode(payload, offset)?;
                if let Some(start) = self.batch_start {
                    debug_assert!(start <= offset, "the chunks' records are counted in the order of their offsets");
                    let end = offset + len;
                    self.records.batches.sizes.add(end - start);
                    // Grows to hold the value; fails only if its counts
                    // would not fit a usize, then the top value takes it.
                    if self.batch_sizes.record(end - start).is_err() {
                        self.batch_sizes.saturating_record(end - start);
                    }
                    self.batch_start = Some(end);
                }
            }
            // Counted by their framing: their pointers are checked when a
            // tree reaches them.
            RecordKind::Tree | RecordKind::TreePatch => {}
        }
        self.records.kinds[kind_slot(kind)].add(payload_len);
        if self.batch_start.is_some() {
            self.records.chunk_bytes += len;
        } else {
            self.records.run_bytes += len;
        }
        Ok(())
    }

    pub fn finish(mut self) -> PackRecords {
        let h = &self.batch_sizes;
        if !h.is_empty() {
            self.records.batches.quantiles = Quantiles {
                median: h.value_at_quantile(0.5),
                p90: h.value_at_quantile(0.9),
                p99: h.value_at_quantile(0.99),
                max: self.records.batches.sizes.max(),
            };
        }
        self.records
    }
}

/// The shape of one commit's tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeShape {
    pub commit: Hash,
    /// Directories, the root included.
    pub directories: u64,
    /// Contents, inline and blobs.
    pub contents: u64,
    pub blobs: u64,
    /// The most steps in the path of an entry (the root's entries are at 1).
    pub max_depth: u64,
    /// The directory with the most entries (the first met among equals).
    pub largest_path: Vec<Vec<u8>>,
    pub largest_entries: u64,
    /// Entries per directory.
    pub sizes: Log2Histogram,
}

impl TreeShape {
    pub fn new(commit: Hash) -> TreeShape {
        TreeShape {
            commit,
            directories: 0,
            contents: 0,
            blobs: 0,
            max_depth: 0,
            largest_path: Vec::new(),
            largest_entries: 0,
            sizes: Log2Histogram::default(),
        }
    }

    /// Counts a directory of `entries` entries at `path`.
    pub fn directory(&mut self, path: &[&[u8]], entries: u64) {
        self.directories += 1;
        self.sizes.add(entries);
        self.max_depth = self.max_depth.max(path.len() as u64);
        if entries > self.largest_entries || self.directories == 1 {
            self.largest_entries = entries;
            self.largest_path = path.iter().map(|s| s.to_vec()).collect();
        }
    }

    /// Counts a contents at depth `depth` (steps of its path).
    pub fn contents(&mut self, depth: u64, blob: bool) {
        self.contents += 1;
        self.blobs += u64::from(blob);
        self.max_depth = self.max_depth.max(depth);
    }
}

/// Kinds of files an inspection samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FileKind {
    Chunk,
    Segment,
    Cold,
    Index,
    Dict,
}

impl FileKind {
    pub const ALL: [FileKind; 5] = [FileKind::Chunk, FileKind::Segment, FileKind::Cold, FileKind::Index, FileKind::Dict];

    /// The kind of the store file `name`, if it is one of these.
    pub fn of(name: &str) -> Option<FileKind> {
        Some(if parse_hex_name(name, "chunk-", ".pack").is_some() {
            FileKind::Chunk
        } else if parse_hex_name(name, "segment-", ".pack").is_some() {
            FileKind::Segment
        } else if parse_hex_name(name, "cold-", ".pack").is_some() {
            FileKind::Cold
        } else if name == "index" || parse_hex_name(name, "index-", "").is_some() {
            FileKind::Index
        } else if name == "dict" {
            FileKind::Dict
        } else {
            return None;
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            FileKind::Chunk => "chunks",
            FileKind::Segment => "segments",
            FileKind::Cold => "cold",
            FileKind::Index => "index",
            FileKind::Dict => "dict",
        }
    }
}

/// The files of one kind and how well samples of them compress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileSample {
    pub kind: FileKind,
    pub files: u64,
    pub file_bytes: u64,
    /// Bytes read as samples, each of at most [`SAMPLE_PIECE_BYTES`].
    pub sampled_bytes: u64,
    /// Their size once each is compressed alone at [`SAMPLE_LEVEL`].
    pub compressed_bytes: u64,
}

impl FileSample {
    /// Sampled bytes per compressed byte.
    pub fn ratio(&self) -> Option<f64> {
        (self.compressed_bytes > 0).then(|| self.sampled_bytes as f64 / self.compressed_bytes as f64)
    }
}

/// Splits `budget` between groups of `totals` bytes: each gets an equal
/// part, and what a small group does not need goes to the larger ones.
pub fn share_budget(totals: &[u64], budget: u64) -> Vec<u64> {
    let mut order: Vec<usize> = (0..totals.len()).collect();
    order.sort_by_key(|&i| totals[i]);
    let mut left = budget;
    let mut shares = vec![0; totals.len()];
    for (done, &i) in order.iter().enumerate() {
        let share = totals[i].min(left / (totals.len() - done) as u64);
        shares[i] = share;
        left -= share;
    }
    assert_eq!(
        shares.iter().sum::<u64>(),
        budget.min(totals.iter().sum()),
        "the budget is shared out whole, or every group gets all it holds"
    );
    shares
}

/// Where to read samples of files of `sizes` bytes, taken one after the
/// other, to read about `share` bytes: all of them if they hold no more,
/// otherwise pieces of at most `piece_bytes` evenly spaced over them, each
/// cut at its file's end. Returns `(file, offset, len)` in order.
pub fn plan_samples(sizes: &[u64], share: u64, piece_bytes: u64) -> Vec<(usize, u64, u64)> {
    assert!(piece_bytes > 0, "samples have a size");
    let total: u64 = sizes.iter().sum();
    let mut out = Vec::new();
    if total == 0 || share == 0 {
        return out;
    }
    if total <= share {
        for (file, &size) in sizes.iter().enumerate() {
            let mut at = 0;
            while at < size {
                let len = piece_bytes.min(size - at);
                out.push((file, at, len));
                at += len;
            }
        }
        return out;
    }
    let pieces = share.div_ceil(piece_bytes);
    let position = |k: u64| (u128::from(total) * u128::from(k) / u128::from(pieces)) as u64;
    let (mut file, mut file_start) = (0, 0);
    for k in 0..pieces {
        let at = position(k);
        while at >= file_start + sizes[file] {
            file_start += sizes[file];
            file += 1;
        }
        let pos = at - file_start;
        let len = piece_bytes.min(position(k + 1) - at).min(sizes[file] - pos);
        assert!(len > 0 && pos + len <= sizes[file], "a sample is a piece of one file");
        out.push((file, pos, len));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_buckets() {
        let mut h = Log2Histogram::default();
        for v in [0, 1, 2, 3, 4, 7, 8, 1000] {
            h.add(v);
        }
        assert_eq!(Log2Histogram::bucket_of(u64::MAX), 64);
        assert_eq!(Log2Histogram::bucket_range(64), (1 << 63, u64::MAX));
        let buckets = h.buckets();
        assert_eq!(buckets[..5], [(0, 0, 1), (1, 1, 1), (2, 3, 2), (4, 7, 2), (8, 15, 1)]);
        assert_eq!(buckets.last(), Some(&(512, 1023, 1)));
        assert_eq!(buckets.len(), 11);
        assert_eq!((h.count(), h.sum(), h.max()), (8, 1025, 1000));
        assert!(Log2Histogram::default().buckets().is_empty());
    }

    #[test]
    fn budget_goes_to_the_large_groups() {
        assert_eq!(share_budget(&[10, 1000, 50], 300), vec![10, 240, 50]);
        assert_eq!(share_budget(&[10, 20], 300), vec![10, 20]);
        assert_eq!(share_budget(&[], 300), Vec::<u64>::new());
    }

    #[test]
    fn samples_are_spread_and_cut_at_file_ends() {
        // Everything, when it fits.
        assert_eq!(plan_samples(&[5, 0, 3], 100, 4), vec![(0, 0, 4), (0, 4, 1), (2, 0, 3)]);
        // Two pieces over 100 bytes: at 0 and 50, the second in the second file.
        assert_eq!(plan_samples(&[40, 60], 8, 4), vec![(0, 0, 4), (1, 10, 4)]);
        // A piece is cut at its file's end.
        assert_eq!(plan_samples(&[52, 48], 8, 4), vec![(0, 0, 4), (0, 50, 2)]);
        // Pieces never overlap when the share nearly covers the files.
        let plan = plan_samples(&[100], 99, 10);
        assert_eq!(plan.iter().map(|p| p.2).sum::<u64>(), 100);
        assert!(plan.windows(2).all(|w| w[0].1 + w[0].2 <= w[1].1));
        assert!(plan_samples(&[100], 0, 10).is_empty());
    }

    #[test]
    fn batches_end_at_commit_records() {
        use crate::format::commit::CommitRecord;
        let dict = Dict::default();
        let mut tally = RecordTally::new();
        tally.enter_chunks(1000);
        let mut at = 1000;
        let mut sizes = Vec::new();
        for i in 1..=100u64 {
            let blob = vec![0u8; (i * 997 % 5000) as usize];
            tally.count(at, RecordKind::Blob, &blob, &dict).unwrap();
            let commit_at = at + record_len(blob.len() as u64);
            let commit = CommitRecord {
                root_offset: at,
                root_hash: Hash::from_slice(&[1; 32]).unwrap(),
                parents: Vec::new(),
                date: 0,
                author: String::new(),
                message: String::new(),
            }
            .encode(commit_at);
            tally.count(commit_at, RecordKind::Commit, &commit, &dict).unwrap();
            let end = commit_at + record_len(commit.len() as u64);
            sizes.push(end - at);
            at = end;
        }
        let records = tally.finish();
        sizes.sort_unstable();
        let q = records.batches.quantiles;
        let near = |found: u64, exact: u64| found.abs_diff(exact) * 1000 <= exact;
        assert!(near(q.median, sizes[49]) && near(q.p90, sizes[89]) && near(q.p99, sizes[98]), "{q:?} {sizes:?}");
        assert_eq!(q.max, sizes[99]);
        assert_eq!(records.batches.sizes.count(), 100);
        assert_eq!(records.chunk_bytes, at - 1000);
        assert_eq!((records.run_bytes, records.kind(RecordKind::Commit).records), (0, 100));
    }

    /// The tally's memory is the same after 200,000 commit records as after
    /// a thousand: its histograms have fixed buckets.
    #[test]
    fn a_tally_holds_as_much_memory_whatever_it_counts() {
        use crate::format::commit::CommitRecord;
        let dict = Dict::default();
        let mut tally = RecordTally::new();
        tally.enter_chunks(0);
        let commit = CommitRecord {
            root_offset: 0,
            root_hash: Hash::from_slice(&[1; 32]).unwrap(),
            parents: Vec::new(),
            date: 0,
            author: String::new(),
            message: String::new(),
        };
        let mut at = 0;
        let mut held = 0;
        for i in 0..200_000u64 {
            if i == 1000 {
                held = tally.batch_sizes.distinct_values();
            }
            // Batches of up to 60,000 bytes, the largest first: a blob's
            // room, then a commit.
            at += if i == 0 { 60_000 } else { (i * 7919) % 50_000 };
            let payload = commit.encode(at);
            tally.count(at, RecordKind::Commit, &payload, &dict).unwrap();
            at += record_len(payload.len() as u64);
        }
        assert_eq!(tally.batch_sizes.distinct_values(), held);
        let records = tally.finish();
        assert_eq!(records.kind(RecordKind::Commit).records, 200_000);
    }

    #[test]
    fn a_value_inode_is_counted_and_a_damaged_one_refused() {
        use crate::node::Step;
        let mut dict = Dict::default();
        dict.push(Step::from_slice(b"balance"));
        // Two entries: dictionary id 0 -> inline "abc"; hex "00ab" -> a directory at delta 5.
        let mut payload = vec![2, 0b0100, 0, 3, b'a', b'b', b'c', 0b0010, 2, 0x00, 0xab, 5];
        payload.extend_from_slice(&[7; 32]);
        let mut tally = RecordTally::new();
        tally.enter_chunks(0);
        tally.count(100, RecordKind::Values, &payload, &dict).unwrap();
        let records = tally.finish();
        assert_eq!(records.steps.dict_id, StepUse { count: 1, stored_bytes: 1, name_bytes: 7 });
        assert_eq!(records.steps.hex, StepUse { count: 1, stored_bytes: 3, name_bytes: 4 });
        assert_eq!(records.entries, EntryKinds { dirs: 1, inline: 1, blobs: 0 });
        assert_eq!(records.contents.sizes.buckets(), vec![(2, 3, 1)]);
        assert_eq!(records.kind(RecordKind::Values).bytes, record_len(payload.len() as u64));
        assert_eq!(records.chunk_bytes, record_len(payload.len() as u64));

        let mut tally = RecordTally::new();
        payload[2] = 9;
        assert!(tally.count(100, RecordKind::Values, &payload, &dict).unwrap_err().contains("dictionary id 9"));
        payload.pop();
        payload[2] = 0;
        assert!(tally.count(100, RecordKind::Values, &payload, &dict).is_err());
    }
}
