//! The API example of the README and the proof example of
//! docs/OPERATING.md, kept compiling and true.

use pando_store::{CommitMeta, Options, Store};

#[test]
fn readme_example() -> Result<(), pando_store::Error> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pando");

    let store = Store::open(&path, Options::default())?;
    let mut tree = store.empty_tree();
    tree.add_mut(&["contracts", "global_counter"], b"42")?; // in place
    let tree = tree.add(&["version"], b"genesis")?; // or a new tree
    let meta = CommitMeta { parents: &[], date: 1_600_000_000, author: "Tezos", message: "block 0" };
    let genesis = store.commit(&tree, meta)?;

    let tree = store.checkout(&genesis)?.expect("just committed");
    assert_eq!(tree.find(&["contracts", "global_counter"])?.as_deref(), Some(&b"42"[..]));
    assert!(tree.mem_tree(&["contracts"])?);
    println!("{}", tree.hash()?); // Co...
    store.set_branch("main", &genesis)?;

    assert!(tree.hash()?.to_base58().starts_with("Co"));
    assert_eq!(store.branch("main"), Some(genesis));
    Ok(())
}

/// The proof example of docs/OPERATING.md.
#[test]
fn readme_proof_example() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("pando"), Options::default())?;
    let addr = "tz1ddb9NMYHZi5UzPdzTZMYQQZoMub195zgv";
    let tree = store.empty_tree().add(&["contracts", "index", addr, "balance"], b"500")?;
    let commit = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "Tezos", message: "block 1" })?;

    // Producer, with the store: run a computation, get the proof of what it read.
    let (proof, balance) = store.produce_tree_proof(&commit, |tree| {
        let balance = tree.find(&["contracts", "index", addr, "balance"])?;
        tree.add(&["contracts", "index", addr, "balance"], b"1000")?; // writes too
        Ok(balance)
    })?;
    let bytes = pando_core::proof::encoding::encode(&proof)?;

    // Verifier, pando-core alone (no store, no I/O, builds for wasm32):
    let proof = pando_core::proof::encoding::decode(&bytes)?;
    let (tree, verified) = pando_core::proof::verify_tree_proof(&proof, |tree| {
        let balance = tree.find(&["contracts", "index", addr, "balance"])?;
        tree.add(&["contracts", "index", addr, "balance"], b"1000")?;
        Ok(balance)
    })?;

    assert_eq!(balance.as_deref(), Some(&b"500"[..]));
    assert_eq!(verified, balance);
    let expected = store.checkout(&commit)?.unwrap().add(&["contracts", "index", addr, "balance"], b"1000")?.hash()?;
    assert_eq!(tree.hash()?, expected);
    Ok(())
}
