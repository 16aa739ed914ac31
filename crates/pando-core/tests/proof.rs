//! Tree proofs without a store: trees built in memory, proofs produced
//! through a `Reveal` over them, verified, re-encoded and mutated.
//!
//! Checked here: a tree built by updates hashes like the reference hasher;
//! every produced proof verifies with the answers of a `BTreeMap` model;
//! the encoding has the size of Octez's formula (`expected_encoding_size`
//! in `test_merkle_proof.ml`) and round-trips; any mutation of a proof is
//! rejected or gives the same answers, and never panics.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use pando_core::dir::{Body, Pointers, Values};
use pando_core::proof::encoding::{decode, encode};
use pando_core::proof::partial::{Cell, Entry, Inode as Node, PartialTree, Reveal, Revealed};
use pando_core::proof::types::{Extender, Inode, InodeTree, KindedHash, Tree, TreeProof};
use pando_core::proof::{Encoding, ProofError, produce_tree_proof, verify_tree_proof};
use pando_core::reference::RefTree;
use pando_core::{Hash, Kind};
use proptest::prelude::*;
#[path = "support/seeds.rs"]
mod seeds;

type Path = Vec<Vec<u8>>;

// ---------------------------------------------------------------- a store stand-in

/// Reveals parts of a fully known tree the way a store does: a directory as
/// all its entries (at most 256) or its root inode; children as hashes with
/// a handle.
struct MemReveal {
    full: PartialTree<'static>,
    parts: RefCell<Vec<Part>>,
}

#[derive(Clone)]
enum Part {
    Dir(Arc<Cell>),
    Inode(Arc<Cell>),
    Value(Vec<u8>),
}

impl MemReveal {
    fn new(full: &Entry) -> MemReveal {
        MemReveal { full: PartialTree::of_entry(full.clone()), parts: RefCell::new(Vec::new()) }
    }

    fn handle(&self, part: Part) -> Option<u64> {
        let mut parts = self.parts.borrow_mut();
        parts.push(part);
        Some(parts.len() as u64 - 1)
    }

    fn part(&self, handle: u64) -> Part {
        self.parts.borrow()[handle as usize].clone()
    }

    /// A blinded stand-in of a full entry.
    fn blind(&self, entry: &Entry) -> Entry {
        let hash = self.full.entry_hash(entry).unwrap();
        match entry {
            Entry::Contents(_) => {
                let bytes = PartialTree::of_entry(entry.clone()).find::<&[u8]>(&[]).unwrap().unwrap();
                Entry::blinded_contents(hash, self.handle(Part::Value(bytes)))
            }
            Entry::Dir(cell) => Entry::blinded_dir(hash, self.handle(Part::Dir(cell.clone()))),
        }
    }

    fn blind_inode(&self, inode: &Node) -> Arc<Node> {
        match &inode.body {
            Body::Values(values) => Node::values(Values::from_sorted(values.iter().map(|(s, e)| (s, self.blind(e))))),
            Body::Tree(pointers) => {
                let depth = pointers.depth;
                let children = pointers.iter().map(|(i, child)| {
                    (i, Cell::blinded(self.full.inode_hash(child, depth + 1).unwrap(), self.handle(Part::Inode(child.clone()))))
                });
                Arc::new(Node::new(Body::Tree(Pointers::new(depth, pointers.len, children.collect::<Vec<_>>()))))
            }
        }
    }
}

impl Reveal for MemReveal {
    fn dir(&self, handle: u64) -> Result<Revealed, String> {
        let Part::Dir(cell) = self.part(handle) else { return Err("not a directory".into()) };
        let root = cell.known_inode().unwrap();
        if root.len() <= 256 {
            let dir = PartialTree::of_entry(Entry::Dir(cell.clone()));
            let names = dir.list::<&[u8]>(&[]).unwrap();
            let entries = names
                .into_iter()
                .map(|(name, _)| {
                    let child = find_entry(&Entry::Dir(cell.clone()), &name);
                    (name, self.blind(&child))
                })
                .collect();
            Ok(Revealed::Entries(entries))
        } else {
            Ok(Revealed::Root(self.blind_inode(root)))
        }
    }

    fn inode(&self, handle: u64, _depth: u32) -> Result<Arc<Node>, String> {
        let Part::Inode(cell) = self.part(handle) else { return Err("not an inode".into()) };
        Ok(self.blind_inode(cell.known_inode().unwrap()))
    }

    fn value(&self, handle: u64) -> Result<Vec<u8>, String> {
        let Part::Value(bytes) = self.part(handle) else { return Err("not a value".into()) };
        Ok(bytes)
    }
}

/// The entry `name` of a fully known directory.
fn find_entry(dir: &Entry, name: &[u8]) -> Entry {
    let Entry::Dir(cell) = dir else { panic!("a directory") };
    let mut inode = cell.known_inode().unwrap();
    loop {
        match &inode.body {
            Body::Values(values) => return values.iter().find(|(s, _)| *s == name).unwrap().1.clone(),
            Body::Tree(pointers) => {
                inode = pointers.get(pando_core::inode::index(pointers.depth, name)).unwrap().known_inode().unwrap();
            }
        }
    }
}

// ---------------------------------------------------------------- model and operations

#[derive(Clone, Debug)]
enum Op {
    Find(Path),
    Mem(Path),
    MemTree(Path),
    Length(Path),
    List(Path),
    Add(Path, Vec<u8>),
    Remove(Path),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Answer {
    Value(Option<Vec<u8>>),
    Bool(bool),
    Length(u64),
    List(Vec<(Vec<u8>, Kind)>),
    Done,
}

fn run(tree: &mut PartialTree<'_>, ops: &[Op]) -> Result<Vec<Answer>, ProofError> {
    ops.iter()
        .map(|op| {
            Ok(match op {
                Op::Find(p) => Answer::Value(tree.find(p)?),
                Op::Mem(p) => Answer::Bool(tree.mem(p)?),
                Op::MemTree(p) => Answer::Bool(tree.mem_tree(p)?),
                Op::Length(p) => Answer::Length(tree.length(p)?),
                Op::List(p) => Answer::List(tree.list(p)?),
                Op::Add(p, v) => {
                    tree.add(p, v)?;
                    Answer::Done
                }
                Op::Remove(p) => {
                    tree.remove(p)?;
                    Answer::Done
                }
            })
        })
        .collect()
}

/// The model: contents by full path (a prefix of a path never holds a contents).
type Model = BTreeMap<Path, Vec<u8>>;

fn model_run(model: &mut Model, ops: &[Op]) -> Vec<Answer> {
    fn below<'a>(model: &'a Model, p: &'a Path) -> impl Iterator<Item = (&'a Path, &'a Vec<u8>)> + 'a {
        model.range(p.clone()..).take_while(move |(k, _)| k.starts_with(p)).filter(move |(k, _)| k.len() > p.len())
    }
    let mut out = Vec::new();
    for op in ops {
        out.push(match op {
            Op::Find(p) => Answer::Value(model.get(p).cloned()),
            Op::Mem(p) => Answer::Bool(model.contains_key(p)),
            Op::MemTree(p) => Answer::Bool(p.is_empty() || model.contains_key(p) || below(model, p).next().is_some()),
            Op::Length(p) | Op::List(p) => {
                let mut names: BTreeMap<Vec<u8>, Kind> = BTreeMap::new();
                if !model.contains_key(p) {
                    for (k, _) in below(model, p) {
                        let kind = if k.len() == p.len() + 1 { Kind::Contents } else { Kind::Dir };
                        names.insert(k[p.len()].clone(), kind);
                    }
                }
                match op {
                    Op::Length(_) => Answer::Length(names.len() as u64),
                    _ => Answer::List(names.into_iter().collect()),
                }
            }
            Op::Add(p, v) => {
                // Contents on the way become directories; a directory at p is replaced.
                for n in 1..p.len() {
                    model.remove(&p[..n].to_vec());
                }
                let doomed: Vec<Path> = below(model, p).map(|(k, _)| k.clone()).collect();
                for k in doomed {
                    model.remove(&k);
                }
                model.insert(p.clone(), v.clone());
                Answer::Done
            }
            Op::Remove(p) => {
                model.remove(p);
                let doomed: Vec<Path> = below(model, p).map(|(k, _)| k.clone()).collect();
                for k in doomed {
                    model.remove(&k);
                }
                Answer::Done
            }
        });
    }
    out
}

fn reference(model: &Model) -> Hash {
    fn dir(model: &Model, prefix: &[Vec<u8>]) -> RefTree {
        let mut children: BTreeMap<Vec<u8>, ()> = BTreeMap::new();
        for k in model.keys().filter(|k| k.starts_with(prefix) && k.len() > prefix.len()) {
            children.insert(k[prefix.len()].clone(), ());
        }
        RefTree::Dir(
            children
                .into_keys()
                .map(|name| {
                    let mut path = prefix.to_vec();
                    path.push(name.clone());
                    let child = match model.get(&path) {
                        Some(v) => RefTree::Contents(v.clone()),
                        None => dir(model, &path),
                    };
                    (name, child)
                })
                .collect(),
        )
    }
    dir(model, &[]).hash()
}

/// A fully known tree holding the model.
fn full_tree(model: &Model) -> Entry {
    let mut tree = PartialTree::of_entry(Entry::empty_dir());
    for (k, v) in model {
        tree.add(k, v).unwrap();
    }
    tree.root().clone()
}

// ---------------------------------------------------------------- generators

/// Names of a directory with `n` entries: `n` crossing 32 and 256 makes
/// value inodes, tree inodes and inode roots.
fn names(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("k{i:04}").into_bytes()).collect()
}

fn arb_model() -> impl Strategy<Value = Model> {
    (1usize..40, prop_oneof![Just(0usize), 1usize..40, 250usize..300, 600usize..700]).prop_map(|(small, big)| {
        let mut model = Model::new();
        for (i, name) in names(small).into_iter().enumerate() {
            let path = if i % 3 == 0 { vec![b"a".to_vec(), name] } else { vec![b"a".to_vec(), b"s".to_vec(), name] };
            model.insert(path, vec![i as u8; 1 + i % 5]);
        }
        for (i, name) in names(big).into_iter().enumerate() {
            model.insert(vec![b"big".to_vec(), name], format!("v{i}").into_bytes());
        }
        model.insert(vec![b"top".to_vec()], b"x".to_vec());
        model
    })
}

fn arb_path() -> impl Strategy<Value = Path> {
    let step = prop_oneof![
        Just(b"a".to_vec()),
        Just(b"s".to_vec()),
        Just(b"big".to_vec()),
        Just(b"top".to_vec()),
        (0usize..720).prop_map(|i| format!("k{i:04}").into_bytes()),
        Just(b"zz".to_vec()),
    ];
    prop::collection::vec(step, 1..4)
}

fn arb_ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        3 => arb_path().prop_map(Op::Find),
        1 => arb_path().prop_map(Op::Mem),
        1 => arb_path().prop_map(Op::MemTree),
        1 => arb_path().prop_map(Op::Length),
        1 => arb_path().prop_map(Op::List),
        2 => (arb_path(), prop::collection::vec(any::<u8>(), 0..8)).prop_map(|(p, v)| Op::Add(p, v)),
        2 => arb_path().prop_map(Op::Remove),
    ];
    prop::collection::vec(op, 0..12)
}

// ---------------------------------------------------------------- Octez's size formula

/// `expected_encoding_size` of Octez's `test_merkle_proof.ml`, for V1.Tree32.
fn expected_size(proof: &TreeProof) -> usize {
    fn steps(entries: &[(Vec<u8>, Tree)]) -> usize {
        4 + entries.iter().map(|(s, t)| 1 + s.len() + tree(t)).sum::<usize>()
    }
    fn segment(seg: &[u8]) -> usize {
        1 + (seg.len() * 5 + 8) / 8
    }
    fn tree(t: &Tree) -> usize {
        1 + match t {
            Tree::Value(v) => 4 + v.len(),
            Tree::BlindedValue(_) | Tree::BlindedNode(_) => 32,
            Tree::Node(entries) => steps(entries),
            Tree::Inode(i) => inode(i),
            Tree::Extender(e) => extender(e),
        }
    }
    fn extender(e: &Extender) -> usize {
        8 + segment(&e.segment) + inode_tree(&e.proof)
    }
    fn inode(i: &Inode) -> usize {
        if i.proofs.len() < 16 {
            8 + 1 + 4 + i.proofs.iter().map(|(_, t)| 1 + inode_tree(t)).sum::<usize>()
        } else {
            8 + 1 + 32 + i.proofs.iter().map(|(_, t)| inode_tree(t) - 1).sum::<usize>()
        }
    }
    fn inode_tree(t: &InodeTree) -> usize {
        1 + match t {
            InodeTree::BlindedInode(_) => 32,
            InodeTree::InodeValues(entries) => steps(entries),
            InodeTree::InodeTree(i) => inode(i),
            InodeTree::InodeExtender(e) => extender(e),
        }
    }
    2 + 33 + 33 + tree(&proof.state)
}

// ---------------------------------------------------------------- tests

/// Lists of 63 entries and more are sized, values of 256 bytes and more
/// take a wider size, inodes of 15 children and more are dense, lengths
/// take the shortest integer: each form round-trips in V2, and the
/// other forms of the same value are refused.
#[test]
fn v2_wide_forms_round_trip() {
    let ch = Hash::from_slice(b"01234567890123456789012345678901").unwrap();
    let many: Vec<(Vec<u8>, Tree)> = (0..70).map(|i| (format!("e{i:02}").into_bytes(), Tree::BlindedValue(ch))).collect();
    let dense: Vec<(u8, InodeTree)> = (0..15).map(|i| (i * 2, InodeTree::BlindedInode(ch))).collect();
    for state in [
        Tree::Node(many.clone()),
        Tree::Node(many[..62].to_vec()),
        Tree::Node(vec![(b"v".to_vec(), Tree::Value(vec![7; 300]))]),
        Tree::Node(vec![(b"v".to_vec(), Tree::Value(vec![7; 70_000]))]),
        Tree::Inode(Inode { length: 70_000, proofs: dense.clone() }),
        Tree::Inode(Inode { length: 5_000_000_000, proofs: dense[..14].to_vec() }),
    ] {
        let proof = TreeProof { version: 0, before: KindedHash::Node(ch), after: KindedHash::Node(ch), state };
        let bytes = Encoding::V2.encode_tree_proof(&proof).unwrap();
        assert_eq!(Encoding::V2.decode_tree_proof(&bytes).unwrap(), proof);
        assert_eq!(bytes[0], 0b11, "both hashes are of nodes");
    }
    // 62 entries counted in the tag: 10 111110.
    let proof = TreeProof {
        version: 0,
        before: KindedHash::Node(ch),
        after: KindedHash::Node(ch),
        state: Tree::Node(many[..62].to_vec()),
    };
    assert_eq!(Encoding::V2.encode_tree_proof(&proof).unwrap()[67], 0b1011_1110);
    // 70 entries: tag 10 111111 and a 4-byte size.
    let proof = TreeProof { version: 0, before: KindedHash::Node(ch), after: KindedHash::Node(ch), state: Tree::Node(many) };
    let bytes = Encoding::V2.encode_tree_proof(&proof).unwrap();
    assert_eq!(bytes[67], 0b1011_1111);
    assert_eq!(u32::from_be_bytes(bytes[68..72].try_into().unwrap()) as usize, bytes.len() - 72);
}

#[test]
fn octez_sample_round_trips_with_octez_size() {
    // `test_sample` of test_merkle_proof.ml (Proof32).
    let ch = Hash::from_slice(b"01234567890123456789012345678901").unwrap();
    let tree_a = Tree::Value(b"a".to_vec());
    let tree_b = Tree::Extender(Extender {
        length: 10,
        segment: vec![0, 1, 0, 31],
        proof: Box::new(InodeTree::InodeTree(Inode { length: 8, proofs: vec![(0, InodeTree::BlindedInode(ch))] })),
    });
    let tree_c = Tree::Extender(Extender {
        length: 10,
        segment: vec![1, 2, 3, 4, 5, 6, 7, 8],
        proof: Box::new(InodeTree::InodeValues(vec![(b"z".to_vec(), tree_b.clone())])),
    });
    let inode_tree = InodeTree::InodeValues(vec![(b"a".to_vec(), tree_a), (b"b".to_vec(), tree_b), (b"c".to_vec(), tree_c)]);
    let proof = TreeProof {
        version: 1,
        before: KindedHash::Value(ch),
        after: KindedHash::Node(ch),
        state: Tree::Inode(Inode { length: 100, proofs: vec![(0, inode_tree)] }),
    };
    let bytes = encode(&proof).unwrap();
    assert_eq!(bytes.len(), expected_size(&proof));
    assert_eq!(decode(&bytes).unwrap(), proof);
    // The first bytes: version 1, `Value ch`, `Node ch`, tag 4, length 100, sparse.
    assert_eq!(&bytes[..3], &[0, 1, 0]);
    assert_eq!(&bytes[3..35], ch.as_bytes());
    assert_eq!(bytes[35], 1);
    assert_eq!(&bytes[68..78], &[4, 0, 0, 0, 0, 0, 0, 0, 100, 0]);

    // `sample_large_inode_tree` with 20 and 32 children: dense arrays.
    for n in [20usize, 32] {
        let mut proofs: Vec<(u8, InodeTree)> = (0..n)
            .map(|i| {
                let c = i.to_string();
                (
                    (i * 15 % 32) as u8,
                    InodeTree::InodeValues(vec![(format!("{c}a").into_bytes(), Tree::Value(format!("a{c}").into_bytes()))]),
                )
            })
            .collect();
        proofs.sort_by_key(|(i, _)| *i);
        let proof = TreeProof {
            version: 1,
            before: KindedHash::Value(ch),
            after: KindedHash::Node(ch),
            state: Tree::Inode(Inode { length: 100, proofs }),
        };
        let bytes = encode(&proof).unwrap();
        assert_eq!(bytes.len(), expected_size(&proof));
        assert_eq!(bytes[68 + 9], 1, "dense from 16 children");
        assert_eq!(decode(&bytes).unwrap(), proof);
    }
}

fn arb_hash() -> impl Strategy<Value = Hash> {
    any::<[u8; 32]>().prop_map(Hash)
}

fn arb_step() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 3..10)
}

/// Random proof trees, as Octez's `Gen.tree` (not meaningful, only encodable).
fn arb_tree() -> impl Strategy<Value = Tree> {
    let leaf = prop_oneof![
        prop::collection::vec(any::<u8>(), 3..10).prop_map(Tree::Value),
        arb_hash().prop_map(Tree::BlindedValue),
        arb_hash().prop_map(Tree::BlindedNode),
    ];
    leaf.prop_recursive(4, 64, 5, |inner| {
        let values = inner.clone();
        let inode_tree = arb_hash().prop_map(InodeTree::BlindedInode).prop_recursive(3, 32, 4, move |it| {
            prop_oneof![
                prop::collection::vec((arb_step(), values.clone()), 1..4).prop_map(InodeTree::InodeValues),
                arb_inode(it.clone()).prop_map(InodeTree::InodeTree),
                arb_extender(it).prop_map(InodeTree::InodeExtender),
            ]
        });
        prop_oneof![
            prop::collection::vec((arb_step(), inner.clone()), 1..5).prop_map(Tree::Node),
            arb_inode(inode_tree.clone()).prop_map(Tree::Inode),
            arb_extender(inode_tree).prop_map(Tree::Extender),
        ]
    })
}

fn arb_inode(child: impl Strategy<Value = InodeTree> + Clone) -> impl Strategy<Value = Inode> {
    (1u64..1_000_000, prop::collection::btree_map(0u8..32, child, 1..20))
        .prop_map(|(length, proofs)| Inode { length, proofs: proofs.into_iter().collect() })
}

fn arb_extender(child: impl Strategy<Value = InodeTree>) -> impl Strategy<Value = Extender> {
    (1u64..10, prop::collection::vec(0u8..32, 1..7), child).prop_map(|(length, segment, proof)| Extender {
        length,
        segment,
        proof: Box::new(proof),
    })
}

proptest! {
    #![proptest_config(seeds::config(128))]

    #[test]
    fn random_proof_trees_encode_at_octez_size(state in arb_tree(), before in arb_hash(), after in arb_hash()) {
        let proof = TreeProof { version: 0, before: KindedHash::Node(before), after: KindedHash::Value(after), state };
        let bytes = encode(&proof).unwrap();
        prop_assert_eq!(bytes.len(), expected_size(&proof));
        prop_assert_eq!(decode(&bytes).unwrap(), proof);
        for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
            prop_assert!(decode(&bytes[..cut]).is_err());
        }
    }

    /// V2 (`Data_encoding.Compact`) round-trips, and a proof read from its
    /// V1 bytes, written in V2 and read back is the same proof.
    #[test]
    fn random_proof_trees_round_trip_in_v2(state in arb_tree(), before in arb_hash(), after in arb_hash(), version in any::<i16>()) {
        let proof = TreeProof { version, before: KindedHash::Value(before), after: KindedHash::Node(after), state };
        let v1 = encode(&proof).unwrap();
        let from_v1 = decode(&v1).unwrap();
        let v2 = Encoding::V2.encode_tree_proof(&from_v1).unwrap();
        prop_assert_eq!(&Encoding::V2.decode_tree_proof(&v2).unwrap(), &proof);
        prop_assert!(v2.len() <= v1.len(), "the compact form is not larger");
        for cut in [0, 1, v2.len() / 2, v2.len() - 1] {
            prop_assert!(Encoding::V2.decode_tree_proof(&v2[..cut]).is_err());
        }
        let mut trailing = v2.clone();
        trailing.push(0);
        prop_assert!(Encoding::V2.decode_tree_proof(&trailing).is_err());
    }

    #[test]
    fn produced_proofs_verify_like_the_model(model in arb_model(), ops in arb_ops()) {
        let full = full_tree(&model);
        prop_assert_eq!(PartialTree::of_entry(full.clone()).hash().unwrap(), reference(&model));
        let reveal = MemReveal::new(&full);
        let root = reveal.blind(&full);
        let (proof, answers) = produce_tree_proof(root, &reveal, |t| run(t, &ops)).unwrap();
        let mut after = model.clone();
        prop_assert_eq!(&answers, &model_run(&mut after, &ops));
        prop_assert_eq!(proof.before, KindedHash::Node(reference(&model)));
        prop_assert_eq!(proof.after, KindedHash::Node(reference(&after)));

        let bytes = encode(&proof).unwrap();
        prop_assert_eq!(bytes.len(), expected_size(&proof));
        let decoded = decode(&bytes).unwrap();
        prop_assert_eq!(&decoded, &proof);
        let (tree, verified) = verify_tree_proof(&decoded, |t| run(t, &ops)).unwrap();
        prop_assert_eq!(&verified, &answers);
        prop_assert_eq!(tree.hash().unwrap(), reference(&after));
    }

    #[test]
    fn mutated_proofs_are_rejected(model in arb_model(), ops in arb_ops(), flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..4), cut in any::<prop::sample::Index>()) {
        let full = full_tree(&model);
        let reveal = MemReveal::new(&full);
        let (proof, answers) = produce_tree_proof(reveal.blind(&full), &reveal, |t| run(t, &ops)).unwrap();
        let bytes = encode(&proof).unwrap();
        // The encoding is canonical and everything in it is bound by a
        // hash, the version or a structural rule: any change is rejected.
        let check = |bytes: &[u8], what: &str| -> Result<(), TestCaseError> {
            if let Ok(p) = decode(bytes)
                && let Ok((_, got)) = verify_tree_proof(&p, |t| run(t, &ops))
            {
                prop_assert!(false, "{} proof accepted (answers equal: {})", what, got == answers);
            }
            Ok(())
        };
        let mut flipped = bytes.clone();
        for (at, bit) in &flips {
            flipped[at.index(bytes.len())] ^= 1 << bit;
        }
        if flipped != bytes {
            check(&flipped, "a bit-flipped")?;
        }
        check(&bytes[..cut.index(bytes.len())], "a truncated")?;
        let mut longer = bytes.clone();
        longer.push(0);
        check(&longer, "an extended")?;
        for mutated in mutations(&proof) {
            if let Ok(encoded) = encode(&mutated) {
                check(&encoded, "a structurally mutated")?;
            }
        }
    }
}

/// Structural mutations of a proof: each child dropped, a child added, each
/// length changed, each blinded hash changed, in turn.
fn mutations(proof: &TreeProof) -> Vec<TreeProof> {
    let mut out = Vec::new();
    let mut n = 0;
    loop {
        let mut p = proof.clone();
        let mut k = n;
        if !mutate_tree(&mut p.state, &mut k) {
            return out;
        }
        out.push(p);
        n += 1;
        if n > 400 {
            return out;
        }
    }
}

/// Applies mutation number `*k` (counting down through the tree); true if applied.
fn mutate_tree(t: &mut Tree, k: &mut usize) -> bool {
    fn hit(k: &mut usize) -> bool {
        if *k == 0 {
            return true;
        }
        *k -= 1;
        false
    }
    match t {
        Tree::Value(v) => {
            if hit(k) {
                v.push(0);
                return true;
            }
        }
        Tree::BlindedValue(h) | Tree::BlindedNode(h) => {
            if hit(k) {
                h.0[0] ^= 1;
                return true;
            }
        }
        Tree::Node(entries) => {
            for i in 0..entries.len() {
                if hit(k) {
                    entries.remove(i);
                    return true;
                }
            }
            if hit(k) {
                entries.push((b"\xffextra".to_vec(), Tree::Value(b"v".to_vec())));
                return true;
            }
            for (_, child) in entries.iter_mut() {
                if mutate_tree(child, k) {
                    return true;
                }
            }
        }
        Tree::Inode(i) => return mutate_inode(i, k),
        Tree::Extender(e) => return mutate_extender(e, k),
    }
    false
}

fn mutate_inode(i: &mut Inode, k: &mut usize) -> bool {
    for delta in [1u64, u64::MAX] {
        if *k == 0 {
            i.length = i.length.wrapping_add(delta);
            return true;
        }
        *k -= 1;
    }
    for n in 0..i.proofs.len() {
        if *k == 0 {
            i.proofs.remove(n);
            return true;
        }
        *k -= 1;
    }
    if let Some(free) = (0..32u8).find(|x| !i.proofs.iter().any(|(j, _)| j == x)) {
        if *k == 0 {
            i.proofs.push((free, InodeTree::BlindedInode(Hash([7; 32]))));
            i.proofs.sort_by_key(|(j, _)| *j);
            return true;
        }
        *k -= 1;
    }
    i.proofs.iter_mut().any(|(_, child)| mutate_inode_tree(child, k))
}

fn mutate_extender(e: &mut Extender, k: &mut usize) -> bool {
    if *k == 0 {
        e.length += 1;
        return true;
    }
    *k -= 1;
    if *k == 0 {
        e.segment[0] = (e.segment[0] + 1) % 32;
        return true;
    }
    *k -= 1;
    mutate_inode_tree(&mut e.proof, k)
}

fn mutate_inode_tree(t: &mut InodeTree, k: &mut usize) -> bool {
    match t {
        InodeTree::BlindedInode(h) => {
            if *k == 0 {
                h.0[31] ^= 0x80;
                return true;
            }
            *k -= 1;
            false
        }
        InodeTree::InodeValues(entries) => {
            let mut node = Tree::Node(std::mem::take(entries));
            let done = mutate_tree(&mut node, k);
            let Tree::Node(back) = node else { unreachable!() };
            *entries = back;
            done
        }
        InodeTree::InodeTree(i) => mutate_inode(i, k),
        InodeTree::InodeExtender(e) => mutate_extender(e, k),
    }
}

#[test]
fn blinded_parts_are_errors_not_answers() {
    let mut model = Model::new();
    for name in names(300) {
        model.insert(vec![b"big".to_vec(), name], b"v".to_vec());
    }
    model.insert(vec![b"other".to_vec()], b"o".to_vec());
    let full = full_tree(&model);
    let reveal = MemReveal::new(&full);
    let read = vec![b"big".to_vec(), b"k0007".to_vec()];
    let (proof, value) = produce_tree_proof(reveal.blind(&full), &reveal, |t| t.find(&read)).unwrap();
    assert_eq!(value, Some(b"v".to_vec()));
    // The proof shows a root inode of 300 entries, one path revealed.
    let Tree::Node(top) = &proof.state else { panic!("a small root is a node") };
    assert!(matches!(top[0].1, Tree::Inode(Inode { length: 300, .. })));
    assert!(matches!(top[1].1, Tree::BlindedValue(_)));
    // Another entry of `big`, the value of `other`, the list of `big`: blinded.
    for ops in [
        vec![Op::Find(vec![b"big".to_vec(), b"k0100".to_vec()])],
        vec![Op::Find(vec![b"other".to_vec()])],
        vec![Op::List(vec![b"big".to_vec()])],
    ] {
        let Err(err) = verify_tree_proof(&proof, |t| run(t, &ops)) else { panic!("a blinded part was answered") };
        assert!(matches!(err, ProofError::Blinded { .. }), "{err}");
    }
    // What needs no blinded part is answered: `other` holds a contents.
    let (_, answers) =
        verify_tree_proof(&proof, |t| run(t, &[Op::Mem(vec![b"other".to_vec()]), Op::Length(vec![b"big".to_vec()])])).unwrap();
    assert_eq!(answers, vec![Answer::Bool(true), Answer::Length(300)]);
    // A wrong version is refused before anything else.
    let mut other = proof.clone();
    other.version = 1;
    assert!(matches!(verify_tree_proof(&other, |_| Ok(())), Err(ProofError::UnsupportedVersion(1))));
}

#[test]
fn hostile_nesting_is_an_error_not_a_crash() {
    // 100,000 nested nodes: the decoder stops at its nesting bound.
    let mut bytes = vec![0, 0, 1];
    bytes.extend_from_slice(&[0; 32]);
    bytes.push(1);
    bytes.extend_from_slice(&[0; 32]);
    for _ in 0..100_000 {
        bytes.extend_from_slice(&[2, 0x3f, 0xff, 0xff, 0xff, 1, b'a']);
    }
    assert!(decode(&bytes).is_err());
}

#[test]
fn the_deepest_accepted_proof_fits_a_small_stack() {
    // Directories nested as deep as the decoder accepts (one entry each),
    // decoded, checked, hashed and verified on a 1 MiB stack, WebAssembly's
    // default; one level more is refused.
    fn nested(levels: usize) -> Tree {
        let mut t = Tree::Value(b"leaf".to_vec());
        for _ in 0..levels {
            t = Tree::Node(vec![(b"a".to_vec(), t)]);
        }
        t
    }
    let deepest = pando_core::proof::encoding::MAX_NESTING - 1;
    let handle = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            let state = nested(deepest);
            let root = pando_core::proof::convert::entry_of_tree(&state).unwrap();
            let hash = PartialTree::of_entry(root).hash().unwrap();
            let proof = TreeProof { version: 0, before: KindedHash::Node(hash), after: KindedHash::Node(hash), state };
            let decoded = decode(&encode(&proof).unwrap()).unwrap();
            let (_, length) = verify_tree_proof(&decoded, |t| t.length(&[b"a"])).unwrap();
            assert_eq!(length, 1);
            let deeper = TreeProof { state: nested(deepest + 1), ..proof };
            assert!(decode(&encode(&deeper).unwrap()).is_err());
        })
        .unwrap();
    handle.join().unwrap();
}
