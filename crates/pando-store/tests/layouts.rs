//! A store of the binary layout (rollups', Etherlink's): irmin 3.7.2's
//! vectors of that layout built through a store of it, committed, read back
//! after a reopen; the layout recorded in the control file and checked at
//! every open; trees of one layout refused by a store or tree of the other.

mod common;

use common::{Path, flatten};
use pando_core::inode::Layout;
use pando_store::{CommitMeta, Error, Options, Store, Tree};
use serde_json::Value;

const META: CommitMeta<'static> = CommitMeta { parents: &[], date: 0, author: "Tezos", message: "" };

fn binary() -> Options {
    Options { layout: Some(Layout::TEZOS_BINARY), ..Options::default() }
}

/// The control file's version, as its first slot says.
fn control_version(dir: &std::path::Path) -> u32 {
    let bytes = std::fs::read(dir.join("control")).unwrap();
    u32::from_le_bytes(bytes[8..12].try_into().unwrap())
}

#[test]
fn irmins_binary_vectors_through_a_binary_store() {
    let path = pando_vectors::path("tezos-binary-inodes.json");
    let vectors: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut commits = Vec::new();
    {
        let store = Store::open(dir.path(), binary()).unwrap();
        for v in vectors.as_array().unwrap().iter().filter(|v| v["kind"] == "node" && v["entry_count"] != 0) {
            let mut leaves = Vec::new();
            flatten(&v["entries"], &Vec::new(), &mut leaves);
            // Not in the sorted order: every seventh leaf first, and so on.
            let mut tree = store.empty_tree();
            for start in 0..7 {
                for (path, value) in leaves.iter().skip(start).step_by(7) {
                    tree.add_mut(path, value).unwrap();
                }
            }
            let expected = v["hash"].as_str().unwrap();
            assert_eq!(tree.hash().unwrap().to_base58(), expected, "vector {}", v["name"]);
            let commit = store.commit(&tree, META).unwrap();
            commits.push((commit, expected.to_string(), leaves));
        }
        assert_eq!(commits.len(), 18);
        store.close().unwrap();
    }
    assert_eq!(control_version(dir.path()), 6);
    // Opened without naming a layout (as tools do), with a small cache:
    // the tries are read back from disk.
    let store = Store::open(dir.path(), Options { cache_bytes: 1 << 20, ..Options::default() }).unwrap();
    for (commit, expected, leaves) in &commits {
        let tree = store.checkout(commit).unwrap().unwrap();
        assert_eq!(tree.hash().unwrap().to_base58(), *expected);
        for (path, value) in leaves.iter().step_by(97) {
            assert_eq!(tree.find(path).unwrap().as_deref(), Some(value.as_slice()));
        }
    }
    // Updated after a reopen, loaded from disk: removals shrink the
    // 1,000-entry directory back as irmin did ("shrink-1000-to-2").
    let (commit, _, leaves) = commits.iter().find(|(_, _, leaves)| leaves.len() == 1000).unwrap();
    let mut tree = store.checkout(commit).unwrap().unwrap();
    for (path, _) in leaves.iter().filter(|(path, _)| !matches!(&path[0][..], b"key0" | b"key1")) {
        tree.remove_mut(path).unwrap();
    }
    let two = vectors.as_array().unwrap().iter().find(|v| v["name"] == "dir-2").unwrap();
    let mut expected = store.empty_tree();
    for (path, value) in [(b"key0", b"v0"), (b"key1", b"v1")] {
        expected.add_mut(&[path.as_slice()], value).unwrap();
    }
    assert_eq!(tree.hash().unwrap(), expected.hash().unwrap());
    assert_ne!(tree.hash().unwrap().to_base58(), two["hash"].as_str().unwrap(), "the names differ from dir-2's");
}

#[test]
fn a_store_is_opened_only_with_its_layout() {
    let binary_dir = tempfile::tempdir().unwrap();
    Store::open(binary_dir.path(), binary()).unwrap().close().unwrap();
    let l1_dir = tempfile::tempdir().unwrap();
    Store::open(l1_dir.path(), Options::default()).unwrap().close().unwrap();
    assert_eq!(control_version(l1_dir.path()), 5, "an L1 store stays readable by builds that know no layout");

    let error = Store::open(binary_dir.path(), Options { layout: Some(Layout::TEZOS), ..Options::default() }).err().unwrap();
    assert!(matches!(error, Error::LayoutMismatch { found: "tezos-binary", expected: "tezos", .. }), "{error}");
    assert!(error.to_string().contains("is of the tezos-binary layout, not the tezos layout"), "{error}");
    let read_only = Options { read_only: true, layout: Some(Layout::TEZOS), ..Options::default() };
    assert!(matches!(Store::open(binary_dir.path(), read_only).err().unwrap(), Error::LayoutMismatch { .. }));
    let error = Store::open(l1_dir.path(), binary()).err().unwrap();
    assert!(matches!(error, Error::LayoutMismatch { found: "tezos", expected: "tezos-binary", .. }), "{error}");
    // Nothing was written by the refused opens: each opens with its own.
    Store::open(binary_dir.path(), binary()).unwrap().close().unwrap();
    Store::open(l1_dir.path(), Options { layout: Some(Layout::TEZOS), ..Options::default() }).unwrap().close().unwrap();
    let irmin_small = Layout { entries: 2, stable_hash: 3, max_depth: 64 };
    let error = Store::open(tempfile::tempdir().unwrap().path(), Options { layout: Some(irmin_small), ..Options::default() });
    assert!(matches!(error.err().unwrap(), Error::Invalid(_)));
}

#[test]
fn trees_of_one_layout_do_not_enter_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), binary()).unwrap();
    let three: Vec<Path> = (0..3).map(|i| vec![b"d".to_vec(), format!("{i}").into_bytes()]).collect();
    // A tree of no store is L1's: a directory of 3 is one values inode there.
    let mut free = Tree::empty();
    for path in &three {
        free.add_mut(path, b"v").unwrap();
    }
    let error = store.commit(&free, META).err().unwrap();
    assert!(matches!(error, Error::LayoutMismatch { found: "tezos", expected: "tezos-binary", .. }), "{error}");
    let mut tree = store.empty_tree();
    tree.add_mut(&[b"x"], b"x").unwrap();
    let sub = free.find_tree(&[b"d"]).unwrap().unwrap();
    assert!(matches!(tree.add_tree(&[b"e"], &sub).err().unwrap(), Error::LayoutMismatch { .. }));
    // A value of no store enters; an empty tree of no store takes the
    // store's layout with the first directory added to it.
    tree.add_tree_mut(&[b"y"], &Tree::of_value(b"y")).unwrap();
    let mut made = store.empty_tree();
    for path in &three {
        made.add_mut(path, b"v").unwrap();
    }
    let mut adopting = Tree::empty();
    adopting.add_tree_mut(&[b"top"], &made).unwrap();
    let commit = store.commit(&adopting, META).unwrap();
    assert_eq!(
        store.checkout(&commit).unwrap().unwrap().find(&[b"top".as_slice(), b"d", b"2"]).unwrap().as_deref(),
        Some(&b"v"[..])
    );
    let committed = store.commit(&made, META).unwrap();
    assert_eq!(store.checkout(&committed).unwrap().unwrap().hash().unwrap(), made.hash().unwrap());
    assert_ne!(made.hash().unwrap(), free.hash().unwrap(), "3 entries hash differently in the two layouts");
}

#[test]
fn a_binary_store_collects_and_refuses_what_knows_only_l1() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), binary()).unwrap();
    let mut tree = store.empty_tree();
    let mut commits = Vec::new();
    for block in 0..20u32 {
        for i in 0..30u32 {
            tree.add_mut(&[b"accounts".to_vec(), format!("{}", (block * 7 + i) % 50).into_bytes()], &block.to_le_bytes())
                .unwrap();
        }
        let parents: Vec<_> = commits.last().copied().into_iter().collect();
        let commit = store.commit(&tree, CommitMeta { parents: &parents, ..META }).unwrap();
        commits.push(commit);
        tree = store.checkout(&commit).unwrap().unwrap();
    }
    store.gc(&commits[15]).unwrap();
    store.wait_gc().unwrap();
    let expected = tree.hash().unwrap();
    let unsupported = |e: Error| matches!(e, Error::LayoutUnsupported { layout: "tezos-binary", .. });
    assert!(unsupported(store.prove_keys(&commits[19], &[&[b"accounts".as_slice()][..]]).err().unwrap()));
    assert!(unsupported(store.export_snapshot(&commits[19], &mut Vec::new()).err().unwrap()));
    let error = store.check(pando_store::CheckScope::All, 10, &mut |_| {}).err().unwrap();
    assert!(
        error.to_string().contains("the integrity check is not yet written for stores of the tezos-binary layout"),
        "{error}"
    );
    store.close().unwrap();
    // The collection's control writes kept the layout.
    assert_eq!(control_version(dir.path()), 6);
    let store = Store::open(dir.path(), binary()).unwrap();
    assert!(matches!(store.checkout(&commits[10]).err().unwrap(), Error::CollectedCommit(_)));
    assert_eq!(store.checkout(&commits[19]).unwrap().unwrap().hash().unwrap(), expected);
    let empty = tempfile::tempdir().unwrap();
    let fresh = Store::open(empty.path(), binary()).unwrap();
    assert!(unsupported(fresh.import_snapshot(&mut &b"PANDOSNP"[..]).err().unwrap()));
}

#[test]
fn a_reader_follows_a_binary_store() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Store::open(dir.path(), binary()).unwrap();
    let mut tree = writer.empty_tree();
    for i in 0..40u32 {
        tree.add_mut(&[b"d".to_vec(), i.to_be_bytes().to_vec()], b"v").unwrap();
    }
    let first = writer.commit(&tree, META).unwrap();
    writer.flush().unwrap();
    let reader = Store::open(dir.path(), Options { read_only: true, ..Options::default() }).unwrap();
    assert_eq!(reader.layout(), Layout::TEZOS_BINARY);
    assert_eq!(reader.checkout(&first).unwrap().unwrap().hash().unwrap(), tree.hash().unwrap());
    tree.remove_mut(&[b"d".to_vec(), 7u32.to_be_bytes().to_vec()]).unwrap();
    let second = writer.commit(&tree, CommitMeta { parents: &[first], ..META }).unwrap();
    writer.flush().unwrap();
    reader.refresh().unwrap();
    let seen = reader.checkout(&second).unwrap().unwrap();
    assert_eq!(seen.hash().unwrap(), tree.hash().unwrap());
    assert_eq!(seen.list(&[b"d"], 0, None).unwrap().len(), 39);
}
