//! The API example of the README, kept compiling and true.

use pando_store::{Options, Store};

#[test]
fn readme_example() -> Result<(), pando_store::Error> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pando");

    let store = Store::open(&path, Options::default())?;
    let mut tree = store.empty_tree();
    tree.add_mut(&["contracts", "global_counter"], b"42")?; // in place
    let tree = tree.add(&["version"], b"genesis")?; // or a new tree
    let genesis = store.commit(&tree, &[], 1_600_000_000, "Tezos", "block 0")?;

    let tree = store.checkout(&genesis)?.expect("just committed");
    assert_eq!(tree.find(&["contracts", "global_counter"])?.as_deref(), Some(&b"42"[..]));
    assert!(tree.mem_tree(&["contracts"])?);
    println!("{}", tree.hash()?); // Co...
    store.set_branch("main", &genesis)?;

    assert!(tree.hash()?.to_base58().starts_with("Co"));
    assert_eq!(store.branch("main"), Some(genesis));
    Ok(())
}
