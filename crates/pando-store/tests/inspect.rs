//! `Store::inspect` on stores of known contents: exact counts of records,
//! contents sizes, steps and the tree's shape; after a collection (runs
//! below the first chunk) and read-only; and damaged records reported with
//! their file and offset.

use pando_core::inode::index;
use pando_store::format::record::{self, Parse, RecordKind};
use pando_store::inspection::{EntryKinds, FileKind, Inspection, StepUse};
use pando_store::io::{MemStorage, Storage};
use pando_store::{CommitMeta, Error, InspectOptions, Options, Store, Tree};
use std::collections::BTreeSet;
use std::sync::Arc;

fn inspect(store: &Store, options: &InspectOptions) -> Inspection {
    store.inspect(options, &mut |_| {}).unwrap()
}

/// The values of `small/`: sizes 0, 1, 3, 5, 32 (inline) and 33, 100 (blobs).
fn small_values(one: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("e", Vec::new()),
        ("one", one.to_vec()),
        ("three", b"abc".to_vec()),
        ("five", b"abcde".to_vec()),
        ("max", vec![b'm'; 32]),
        ("blob33", vec![b'b'; 33]),
        ("blob100", vec![b'c'; 100]),
    ]
}

fn big_step(i: usize) -> String {
    format!("k{i:02}")
}

/// Commit 1: `small/` (7 values), `big/` (40 values of 2 bytes: a tree
/// inode), `deep/00/ab/c0ffee/leaf` (hex steps). Commits 2 and 3 change
/// `small/one`: root and `small` are written as value patches, which
/// name only the child they replace (no step is written twice, so none is
/// promoted to the dictionary).
fn build(store: &Store) -> Vec<pando_store::Hash> {
    let mut tree: Tree = store.empty_tree();
    for (step, value) in small_values(b"x") {
        tree.add_mut(&["small", step], &value).unwrap();
    }
    for i in 0..40 {
        tree.add_mut(&["big", &big_step(i)], format!("{i:02}").as_bytes()).unwrap();
    }
    tree.add_mut(&["deep", "00", "ab", "c0ffee", "leaf"], b"7").unwrap();
    let mut commits = vec![store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "one" }).unwrap()];
    for (date, value) in [(2, b"y"), (3, b"z")] {
        tree.add_mut(&["small", "one"], value).unwrap();
        commits.push(
            store
                .commit(&tree, CommitMeta { parents: &commits[commits.len() - 1..], date, author: "Tezos", message: "next" })
                .unwrap(),
        );
    }
    commits
}

#[test]
fn counts_of_a_known_store() {
    let storage = MemStorage::new();
    let store = Store::open_storage(Arc::new(storage.clone()), Options::default()).unwrap();
    let commits = build(&store);
    let i = inspect(&store, &InspectOptions::default());
    let r = &i.records;

    // The child value inodes of `big/`'s tree inode: one per index in use.
    let big_children = (0..40).map(|i| index(0, big_step(i).as_bytes())).collect::<BTreeSet<_>>().len() as u64;
    // Commit 1: root, small, deep, 00, ab, c0ffee and big's children; then
    // root and small twice, as patches.
    assert_eq!(r.kind(RecordKind::Values).records, 6 + big_children);
    assert_eq!(r.kind(RecordKind::ValuesPatch).records, 4);
    assert_eq!(r.kind(RecordKind::Tree).records, 1);
    assert_eq!(r.kind(RecordKind::TreePatch).records, 0);
    assert_eq!(r.kind(RecordKind::Blob).records, 2);
    assert_eq!(r.kind(RecordKind::Commit).records, 3);
    assert_eq!(r.kind(RecordKind::Dict).records, 0);
    // Every byte of the pack is a record, scanned in the chunks.
    assert_eq!(r.total().bytes, i.pack_bytes);
    assert_eq!((r.chunk_bytes, r.run_bytes, r.runs), (i.pack_bytes, 0, 0));
    let blob = r.kind(RecordKind::Blob);
    assert_eq!(blob.payload_bytes, 133);
    assert_eq!(blob.overhead_bytes(), 2 * (1 + 1 + 4));

    // Contents: inline 5 in small + 40 in big + 1 leaf, then `small/one`
    // twice (the patches); blobs 33 and 100.
    let c = &r.contents;
    assert_eq!((c.inline, c.blobs, c.blob_bytes), (48, 2, 133));
    assert_eq!(c.inline_bytes, (3 + 5 + 32) + 3 + 40 * 2 + 1);
    let buckets = c.sizes.buckets();
    assert_eq!(buckets, vec![(0, 0, 1), (1, 1, 4), (2, 3, 41), (4, 7, 1), (8, 15, 0), (16, 31, 0), (32, 63, 2), (64, 127, 1)]);
    // The patches of root name `small` again, those of `small` only `one`.
    assert_eq!(r.entries, EntryKinds { dirs: 6 + 1 + 1, inline: 48, blobs: 2 });

    // Steps: commit 1 writes 51 raw and 3 hex; the patches write none.
    let names: usize =
        ["big", "deep", "small"].iter().chain(&["e", "one", "three", "five", "max", "blob33", "blob100"]).map(|s| s.len()).sum();
    assert_eq!(i.dict_entries, 0);
    assert_eq!(r.dict_defined, 0);
    assert_eq!(r.steps.dict_id, StepUse { count: 0, stored_bytes: 0, name_bytes: 0 });
    assert_eq!(r.steps.hex, StepUse { count: 3, stored_bytes: 2 + 2 + 4, name_bytes: 2 + 2 + 6 });
    assert_eq!(r.steps.raw.count, 51);
    assert_eq!(r.steps.raw.name_bytes, names as u64 + 40 * 3 + "leaf".len() as u64);

    // Batches: one per commit, summing to the pack.
    let b = &r.batches;
    assert_eq!(b.sizes.count(), 3);
    assert_eq!(b.sizes.sum(), i.pack_bytes);
    assert_eq!(b.quantiles.max, b.sizes.max());
    assert!(b.quantiles.median < b.quantiles.max);

    // The last commit's tree.
    let t = i.tree.as_ref().expect("a tree");
    assert_eq!(t.commit, commits[2]);
    assert_eq!((t.directories, t.contents, t.blobs, t.max_depth), (7, 48, 2, 5));
    assert_eq!((t.largest_path.clone(), t.largest_entries), (vec![b"big".to_vec()], 40));
    assert_eq!(t.sizes.buckets(), vec![(1, 1, 4), (2, 3, 1), (4, 7, 1), (8, 15, 0), (16, 31, 0), (32, 63, 1)]);
    // Another commit, by hash.
    let first = inspect(&store, &InspectOptions { commit: Some(commits[0]), sample_bytes: 0 });
    assert_eq!(first.tree.as_ref().unwrap().commit, commits[0]);
    assert_eq!(first.tree.as_ref().unwrap().sizes, t.sizes);

    // Files: everything sampled, it is far below the budget.
    let chunks = i.files.iter().find(|f| f.kind == FileKind::Chunk).unwrap();
    assert_eq!((chunks.files, chunks.file_bytes, chunks.sampled_bytes), (1, i.pack_bytes, i.pack_bytes));
    assert!(chunks.compressed_bytes > 0 && chunks.ratio().unwrap() > 0.5);
    // With no budget, nothing is read.
    assert!(first.files.iter().all(|f| f.sampled_bytes == 0 && f.ratio().is_none()));
    // An unknown commit is refused.
    let unknown = pando_store::Hash::from_slice(&[9; 32]).unwrap();
    let refused = store.inspect(&InspectOptions { commit: Some(unknown), sample_bytes: 0 }, &mut |_| {});
    assert!(matches!(refused, Err(Error::UnknownCommit(h)) if h == unknown));
}

#[test]
fn an_empty_store_has_no_tree() {
    let store = Store::open_storage(Arc::new(MemStorage::new()), Options::default()).unwrap();
    let i = inspect(&store, &InspectOptions::default());
    assert!(i.tree.is_none());
    assert_eq!((i.records.total().records, i.pack_bytes, i.commits), (0, 0, 0));
}

/// Blocks rewriting some of 300 accounts, with a blob each, as the GC tests do.
fn blocks(store: &Store, n: u32) -> Vec<pando_store::Hash> {
    let mut tree = store.empty_tree();
    let mut commits: Vec<pando_store::Hash> = Vec::new();
    for b in 0..n {
        for i in 0..40u32 {
            let account = format!("{:04}", (b * 7 + i * 13) % 300);
            tree.add_mut(&["contracts", &account, "balance"], format!("{b}-{i}").as_bytes()).unwrap();
        }
        tree.add_mut(&["big", &format!("{}", b % 5)], &[b as u8; 100]).unwrap();
        let parents: Vec<_> = commits.last().copied().into_iter().collect();
        commits.push(
            store.commit(&tree, CommitMeta { parents: &parents, date: i64::from(b), author: "Tezos", message: "block" }).unwrap(),
        );
    }
    commits
}

#[test]
fn after_a_collection_and_read_only() {
    let storage = MemStorage::new();
    let options = Options { chunk_target_bytes: 8 << 10, checkpoint_commits: 4, ..Options::default() };
    let store = Store::open_storage(Arc::new(storage.clone()), options.clone()).unwrap();
    let commits = blocks(&store, 60);
    store.gc(&commits[40]).unwrap();
    store.wait_gc().unwrap().expect("a collection ran");
    let stats = store.info();
    assert!(stats.generation > 0 && stats.collected_live_bytes > 0, "{stats:?}");
    let i = inspect(&store, &InspectOptions::default());
    let r = &i.records;
    // Every live byte below the first chunk is a record, and so is every byte of the chunks.
    assert!(r.runs > 0);
    assert_eq!(r.run_bytes, stats.collected_live_bytes);
    let chunk_bytes: u64 = stats.chunks.iter().map(|c| c.1).sum();
    assert_eq!(r.chunk_bytes, chunk_bytes);
    assert_eq!(r.total().bytes, r.run_bytes + r.chunk_bytes);
    assert_eq!(i.commits, 20);
    // Batches are measured in the chunks only: one per commit record there.
    assert!(r.batches.sizes.count() > 0 && r.batches.sizes.count() <= r.kind(RecordKind::Commit).records);
    let t = i.tree.as_ref().unwrap();
    assert_eq!(t.commit, commits[59]);
    assert_eq!(t.largest_path, vec![b"contracts".to_vec()]);
    let accounts = (0..60u32).flat_map(|b| (0..40u32).map(move |i| (b * 7 + i * 13) % 300)).collect::<BTreeSet<_>>().len() as u64;
    // The root, contracts/, one directory per account and big/.
    assert_eq!((t.largest_entries, t.directories, t.max_depth), (accounts, accounts + 3, 3));
    assert_eq!((t.contents, t.blobs), (accounts + 5, 5));
    assert!(i.files.iter().any(|f| f.kind == FileKind::Segment && f.files > 0), "{:?}", i.files);
    store.close().unwrap();

    // The same from a read-only open.
    let reader = Store::open_storage(Arc::new(storage), Options { read_only: true, ..options }).unwrap();
    let again = inspect(&reader, &InspectOptions::default());
    assert_eq!(again.records, *r);
    assert_eq!(again.tree.as_ref(), Some(t));
}

/// The position and bytes of the first value inode record in `chunk`.
fn first_value_record(storage: &MemStorage, chunk: &str) -> (u64, Vec<u8>) {
    let bytes = pando_store::io::read_all(&*storage.open(chunk, false).unwrap()).unwrap();
    let mut pos = 0;
    loop {
        match record::parse(&bytes[pos..]) {
            Parse::Record { kind: RecordKind::Values, total, .. } => return (pos as u64, bytes[pos..pos + total].to_vec()),
            Parse::Record { total, .. } => pos += total,
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn damage_names_file_and_offset() {
    let storage = MemStorage::new();
    let store = Store::open_storage(Arc::new(storage.clone()), Options::default()).unwrap();
    build(&store);
    store.close().unwrap();
    let chunk = "chunk-0000000000000000.pack";
    let (at, original) = first_value_record(&storage, chunk);
    let file = storage.open(chunk, false).unwrap();
    let read_only = Options { read_only: true, ..Options::default() };

    // A flipped byte: the checksum fails.
    let mut flipped = original.clone();
    flipped[3] ^= 0x40;
    file.write_all_at(&flipped, at).unwrap();
    let store = Store::open_storage(Arc::new(storage.clone()), read_only.clone()).unwrap();
    match store.inspect(&InspectOptions::default(), &mut |_| {}) {
        Err(Error::Corrupt { file, offset, reason }) => {
            assert_eq!((file.as_str(), offset), (chunk, at), "{reason}");
            assert!(reason.contains("checksum"), "{reason}");
        }
        other => panic!("{:?}", other.map(|_| ())),
    }

    // A valid checksum over an unknown step kind: the decoding fails.
    let Parse::Record { payload, .. } = record::parse(&original) else { panic!("a record") };
    let mut payload = payload.to_vec();
    payload[1] |= 3;
    let mut rewritten = Vec::new();
    record::append(&mut rewritten, RecordKind::Values, &payload);
    assert_eq!(rewritten.len(), original.len());
    file.write_all_at(&rewritten, at).unwrap();
    let store = Store::open_storage(Arc::new(storage), read_only).unwrap();
    match store.inspect(&InspectOptions::default(), &mut |_| {}) {
        Err(Error::Corrupt { file, offset, reason }) => {
            assert_eq!((file.as_str(), offset), (chunk, at), "{reason}");
            assert!(reason.contains("unknown step kind"), "{reason}");
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
}
