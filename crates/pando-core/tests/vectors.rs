//! The published Tezos hash vectors (the repository's `tests/vectors/`), and the
//! fixed vectors of irmin's `test/irmin-pack/test_hashes.ml`.

use pando_core::reference::{Layout, RefTree, dir_hash_with};
use pando_core::tezos::{CommitInfo, Kind, contents_hash};
use pando_core::{Hash, ocaml_hash::ocaml_hash};
use serde_json::Value;

fn load(name: &str) -> Value {
    let path = pando_vectors::path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).expect("vector file is JSON")
}

#[test]
fn ocaml_hash_vectors() {
    let vectors = load("tezos-ocaml-hash.json");
    let vectors = vectors.as_array().unwrap();
    assert!(vectors.len() > 10);
    for v in vectors {
        let s = v["s"].as_str().unwrap();
        let seed = v["seed"].as_u64().unwrap() as u32;
        let expected = v["ocaml_hash"].as_u64().unwrap() as u32;
        assert_eq!(ocaml_hash(seed, s.as_bytes()), expected, "ocaml_hash({seed}, {s:?})");
    }
}

#[test]
fn tezos_node_vectors() {
    let vectors = load("tezos-nodes.json");
    let vectors = vectors.as_array().unwrap();
    assert_eq!(vectors.len(), 100);
    for v in vectors {
        let mut entries: Vec<(Vec<u8>, Kind, Hash)> = v["bindings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                let kind = match b["kind"].as_str().unwrap() {
                    "Tree" => Kind::Dir,
                    "Contents" => Kind::Contents,
                    other => panic!("unknown kind {other}"),
                };
                let hash = Hash::from_base58(b["hash"].as_str().unwrap()).unwrap();
                (b["name"].as_str().unwrap().as_bytes().to_vec(), kind, hash)
            })
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let got = dir_hash_with(Layout::TEZOS, &entries);
        assert_eq!(got.to_base58(), v["hash"].as_str().unwrap());
    }
}

/// Builds a reference tree from a vector's entry list.
pub fn ref_tree(entries: &Value) -> RefTree {
    RefTree::Dir(
        entries
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let name = e["name"].as_str().unwrap().as_bytes().to_vec();
                let child = match e["kind"].as_str().unwrap() {
                    "contents" => RefTree::Contents(hex::decode(e["value"].as_str().unwrap()).unwrap()),
                    "node" => ref_tree(&e["subtree"]),
                    other => panic!("unknown kind {other}"),
                };
                (name, child)
            })
            .collect(),
    )
}

#[test]
fn tezos_inode_vectors() {
    let vectors = load("tezos-inodes.json");
    let vectors = vectors.as_array().unwrap();
    assert_eq!(vectors.len(), 21);
    for v in vectors {
        let tree = ref_tree(&v["entries"]);
        assert_eq!(tree.hash().to_hex(), v["hash_hex"].as_str().unwrap(), "vector {}", v["name"]);
        assert_eq!(tree.hash().to_base58(), v["hash"].as_str().unwrap());
    }
}

/// The binary layout's vectors, made by irmin 3.7.2 over Octez's
/// `Context_binary.Conf` (`ocaml/duo/binary_vectors.ml`): contents,
/// directories of 0 to 100,000 entries, deep and unbalanced trees, and
/// directories shrunk by removals after a commit.
#[test]
fn tezos_binary_inode_vectors() {
    let vectors = load("tezos-binary-inodes.json");
    let vectors = vectors.as_array().unwrap();
    assert_eq!(vectors.len(), 23);
    let mut directories = 0;
    for v in vectors {
        let hash = match v["kind"].as_str().unwrap() {
            "contents" => contents_hash(&hex::decode(v["value"].as_str().unwrap()).unwrap()),
            _ => {
                directories += 1;
                ref_tree(&v["entries"]).hash_with(Layout::TEZOS_BINARY)
            }
        };
        assert_eq!(hash.to_hex(), v["hash_hex"].as_str().unwrap(), "vector {}", v["name"]);
        assert_eq!(hash.to_base58(), v["hash"].as_str().unwrap());
    }
    assert_eq!(directories, 19);
    // The layouts differ wherever a directory has more than 2 entries.
    let ten = vectors.iter().find(|v| v["name"] == "dir-10").unwrap();
    assert_ne!(ref_tree(&ten["entries"]).hash().to_hex(), ten["hash_hex"].as_str().unwrap());
}

#[test]
fn layouts_are_named() {
    assert_eq!(Layout::named("tezos"), Some(Layout::TEZOS));
    assert_eq!(Layout::named("tezos-binary"), Some(Layout::TEZOS_BINARY));
    assert_eq!(Layout::named("binary"), None);
    assert_eq!(Layout::TEZOS_BINARY.name(), Some("tezos-binary"));
    assert_eq!(Layout { entries: 2, stable_hash: 3, max_depth: 64 }.name(), None);
}

const ZERO: &[u8] = b"0000000000";

fn two_entries() -> RefTree {
    RefTree::Dir(vec![(b"00".to_vec(), RefTree::Contents(ZERO.to_vec())), (b"01".to_vec(), RefTree::Contents(ZERO.to_vec()))])
}

#[test]
fn irmin_test_hashes_contents() {
    let h = contents_hash(ZERO);
    assert_eq!(h.to_hex(), "d81e60258ecc8bd7064c8703888aececfc54e29ff94f7a2d9a84667a500548e1");
    assert_eq!(h.to_base58(), "CoWHVKM5r2eiHQxhicqakkr5FwJfabahGBwCCWzRPCNPs79CoZty");
}

#[test]
fn irmin_test_hashes_node() {
    let h = two_entries().hash();
    assert_eq!(h.to_hex(), "83722c2791a1c47dada4718656a20a2f3a063ae9945b475e67bbb6ef29d88ca4");
    assert_eq!(h.to_base58(), "CoVeCU4o3dqmfdwqt2vh8LDz9X6qGbTUyLhgVvFReyzAvTf92AKx");
}

#[test]
fn irmin_test_hashes_commit() {
    // The parent: a singleton tree committed with empty info.
    let singleton = RefTree::Dir(vec![(b"singleton-step".to_vec(), RefTree::Contents(b"singleton-val".to_vec()))]);
    let parent =
        CommitInfo { root: singleton.hash(), parents: vec![], date: 0, author: String::new(), message: String::new() }.hash();
    assert_eq!(parent.to_hex(), "634d894802f9032ef48bbe1253563dbeb2aad7dc684da83bdea5692fde2185ae");
    let commit =
        CommitInfo { root: two_entries().hash(), parents: vec![parent], date: 0, author: "Tezos".into(), message: String::new() };
    assert_eq!(commit.hash().to_hex(), "c20860adda3c3d40d8d03fab22b07e889979cdac880d979711aa852a0896ae30");
    assert_eq!(commit.hash().to_base58(), "CoW7mALEs2vue5cfTMdJfSAjNmjmALYS1YyqSsYr9siLcNEcrvAm");
}

#[test]
fn irmin_test_hashes_small_conf_inode_tree() {
    let steps = ["00", "01", "02", "03", "04", "05"];
    let tree = RefTree::Dir(steps.iter().map(|s| (s.as_bytes().to_vec(), RefTree::Contents(ZERO.to_vec()))).collect());
    let h = tree.hash_with(Layout { entries: 2, stable_hash: 3, max_depth: 64 });
    assert_eq!(h.to_hex(), "e670a325ac78b2b6949b8f9fa448b17aa708ef39eb29c9e364be473f988329ea");
    assert_eq!(h.to_base58(), "CoWPo8s8h81q8skRqfPLTAJvq4ioFKS6rQhdRcY5nd6HQz2upwp4");
}
