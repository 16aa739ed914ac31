//! `Options::create` on real directories: an open that may not create
//! writes nothing where it finds no store (not even a directory or a lock
//! file); a creating open makes the directory; a path that is a file, a
//! missing directory and a store where a new one is asked for are each
//! their own error.

use pando_store::{CommitMeta, Create, Error, Options, Store};
use std::path::Path;

fn open(dir: &Path, create: Create, read_only: bool) -> Result<Store, Error> {
    Store::open(dir, Options { create, read_only, cache_bytes: 1 << 20, ..Options::default() })
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

#[test]
fn an_open_of_an_existing_store_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing").join("store");
    for read_only in [false, true] {
        match open(&missing, Create::Never, read_only) {
            Err(Error::NoSuchDirectory { dir }) => assert_eq!(dir, missing.display().to_string()),
            other => panic!("read-only {read_only}: {:?}", other.map(|_| ())),
        }
        // Read-only never creates, whatever `create` says.
        assert!(matches!(open(&missing, Create::IfMissing, true), Err(Error::NoSuchDirectory { .. })));
    }
    assert!(!dir.path().join("missing").exists());

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for read_only in [false, true] {
        let error = open(&empty, Create::Never, read_only).err().unwrap();
        assert!(error.to_string().contains("the directory is empty"), "{error}");
    }
    assert_eq!(listing(&empty), Vec::<String>::new(), "not even a lock file");
}

#[test]
fn a_file_is_named_as_such_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "text").unwrap();
    for create in [Create::Never, Create::IfMissing, Create::New] {
        for read_only in [false, true] {
            let error = open(&file, create, read_only).err().unwrap();
            assert_eq!(error.to_string(), format!("{} is a file, not a store directory", file.display()));
        }
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"text");
}

#[test]
fn creating_opens_make_the_store_and_new_refuses_an_existing_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a").join("b");
    open(&path, Create::New, false).unwrap().close().unwrap();
    let store = open(&path, Create::Never, false).unwrap();
    let mut tree = store.empty_tree();
    tree.add_mut(&["k"], b"v").unwrap();
    store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "test", message: "one" }).unwrap();
    drop(tree);
    store.close().unwrap();
    match open(&path, Create::New, false) {
        Err(Error::StoreExists { dir }) => assert_eq!(dir, path.display().to_string()),
        other => panic!("{:?}", other.map(|_| ())),
    }
    // The default opens it, and creates where nothing is.
    assert_eq!(Options::default().create, Create::IfMissing);
    open(&path, Create::IfMissing, false).unwrap();
    open(&dir.path().join("c"), Create::IfMissing, false).unwrap();
    // A directory that holds something else is never taken.
    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), "mine").unwrap();
    for create in [Create::Never, Create::IfMissing, Create::New] {
        assert!(matches!(open(&foreign, create, false), Err(Error::NotAStore { .. })));
    }
    assert_eq!(listing(&foreign), ["notes.txt"], "no lock file left in a directory that is not a store");
}

#[test]
fn the_leftovers_of_a_creation_are_named_then_cleared_by_a_creating_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    std::fs::create_dir(&path).unwrap();
    // What a creation killed after its first file leaves.
    std::fs::write(path.join("lock"), "").unwrap();
    std::fs::write(path.join("chunk-0000000000000000.pack"), "").unwrap();
    for read_only in [false, true] {
        let error = open(&path, Create::Never, read_only).err().unwrap();
        assert!(matches!(error, Error::UnfinishedCreation { .. }), "{error}");
        let text = error.to_string();
        assert!(text.contains("whose creation did not finish") && text.contains("`pando init`"), "{text}");
        assert!(!text.contains("not a pando store"), "{text}");
    }
    assert_eq!(listing(&path), ["chunk-0000000000000000.pack", "lock"]);
    open(&path, Create::New, false).unwrap().close().unwrap();
    assert_eq!(open(&path, Create::Never, true).unwrap().commit_count(), 0);
}

/// A store closed (or dropped) while a tree read from it lives on, as a
/// binding's garbage collector keeps trees, frees its directory at once:
/// the next writer opens it, and the old tree still reads.
#[test]
fn a_closed_store_frees_its_directory_while_its_trees_live() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path(), Options::default())?;
    let tree = store.empty_tree().add(&["a"], b"1")?;
    let commit = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "", message: "" })?;
    let kept = store.checkout(&commit)?.expect("just committed");
    store.close()?;
    let next = Store::open(dir.path(), Options::default())?;
    assert_eq!(next.checkout(&commit)?.expect("durable").find(&["a"])?, Some(b"1".to_vec()));
    assert_eq!(kept.find(&["a"])?, Some(b"1".to_vec()));
    drop(next);
    Ok(())
}

/// One writer per store directory: while a store is open for writing, a
/// second writable open (here in the same process, through its own file
/// lock) is refused and changes nothing; a read-only open reads, and the
/// directory is free again once the first writer closes.
#[test]
fn a_second_writer_is_refused_while_the_first_is_open() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = open(dir.path(), Create::IfMissing, false)?;
    let tree = store.empty_tree().add(&["a"], b"1")?;
    let commit = store.commit(&tree, CommitMeta { parents: &[], date: 1, author: "", message: "" })?;
    let before = listing(dir.path());
    match open(dir.path(), Create::Never, false) {
        Err(Error::Io { op: "lock", error, .. }) => assert_eq!(error.kind(), std::io::ErrorKind::WouldBlock, "{error}"),
        other => panic!("a second writer: {:?}", other.map(|_| ())),
    }
    assert_eq!(listing(dir.path()), before, "the refused open changed nothing");
    let reader = open(dir.path(), Create::Never, true)?;
    assert_eq!(reader.checkout(&commit)?.expect("durable").find(&["a"])?, Some(b"1".to_vec()));
    store.close()?;
    let next = open(dir.path(), Create::Never, false)?;
    assert!(next.exists(&commit));
    drop(reader);
    Ok(())
}
