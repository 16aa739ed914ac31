//! [`Versions`] over a store's trees: the newest version changed in place,
//! older ones rebuilt from the undo log, read against persistent updates
//! of the same checkout (the model), through the flat cache and the
//! loader, and committed: every commit hash as the model's.

use pando_store::io::MemStorage;
use pando_store::{CommitMeta, Options, Store, Tree, Update, Versions};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::sync::Arc;

fn key(n: u16) -> Vec<Vec<u8>> {
    let steps = ["contracts".into(), "index".into(), format!("tz{:03}", n % 997), ["balance", "counter"][n as usize % 2].into()];
    steps.into_iter().map(String::into_bytes).collect()
}

/// What the host does: update a live value, read one, commit one, drop one.
#[derive(Clone, Debug)]
enum Step {
    Add(usize, u16, u8),
    Remove(usize, u16),
    /// Copies the directory of the first key's account to the second's.
    Copy(usize, u16, u16),
    Read(usize, u16),
    Commit(usize),
    Drop(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (any::<usize>(), any::<u16>(), any::<u8>()).prop_map(|(i, k, v)| Step::Add(i, k, v)),
        2 => (any::<usize>(), any::<u16>()).prop_map(|(i, k)| Step::Remove(i, k)),
        1 => (any::<usize>(), any::<u16>(), any::<u16>()).prop_map(|(i, a, b)| Step::Copy(i, a, b)),
        3 => (any::<usize>(), any::<u16>()).prop_map(|(i, k)| Step::Read(i, k)),
        1 => any::<usize>().prop_map(Step::Commit),
        2 => any::<usize>().prop_map(Step::Drop),
    ]
}

#[test]
fn versions_of_a_checkout_read_and_commit_as_persistent_updates() {
    let store = Store::open_storage(Arc::new(MemStorage::new()), Options::default()).unwrap();
    let mut base = store.empty_tree();
    for n in 0..3000u16 {
        base.add_mut(&key(n), &n.to_le_bytes()).unwrap();
    }
    let base = store.commit(&base, CommitMeta { parents: &[], date: 0, author: "", message: "" }).unwrap();
    let mut runner = TestRunner::new(Config { cases: 48, failure_persistence: None, ..Config::default() });
    runner
        .run(&proptest::collection::vec(step(), 1..150), |steps| {
            let checkout = || store.checkout(&base).unwrap().unwrap();
            // Lines with a base (the commit read back) and without, alternately.
            let mut lines = 0;
            let mut line = || {
                lines += 1;
                let tree = checkout();
                if lines % 2 == 0 {
                    Versions::new(tree)
                } else {
                    Versions::with_base(tree, store.stored_tree(&base).unwrap().unwrap())
                }
            };
            let mut live: Vec<(Versions, Tree)> = vec![(line(), checkout())];
            for step in steps {
                if live.is_empty() {
                    live.push((line(), checkout()));
                }
                let at = |i: usize| i % live.len();
                match step {
                    Step::Add(i, k, v) => {
                        let (versions, model) = &live[at(i)];
                        let next = versions.update(&key(k), Update::Add(&[v])).unwrap();
                        let model = model.add(&key(k), &[v]).unwrap();
                        live.push((next, model));
                    }
                    Step::Remove(i, k) => {
                        let (versions, model) = &live[at(i)];
                        let next = versions.update(&key(k), Update::Remove).unwrap();
                        live.push((next, model.remove(&key(k)).unwrap()));
                    }
                    Step::Copy(i, a, b) => {
                        let (versions, model) = &live[at(i)];
                        let (from, to) = (&key(a)[..3], &key(b)[..3]);
                        // The binding's `copy`: a find_tree, then an add_tree.
                        let next = match versions.read(|t| t.find_tree(from)).unwrap().unwrap() {
                            Some(found) => versions.update(to, Update::AddTree(&found)).unwrap(),
                            None => versions.clone(),
                        };
                        let mut model = model.clone();
                        model.copy_mut(from, to).unwrap();
                        live.push((next, model));
                    }
                    Step::Read(i, k) => {
                        let (versions, model) = &live[at(i)];
                        prop_assert_eq!(versions.read(|t| t.find(&key(k)).unwrap()).unwrap(), model.find(&key(k)).unwrap());
                    }
                    Step::Commit(i) => {
                        let (versions, model) = &live[at(i)];
                        let tree = versions.tree().unwrap();
                        prop_assert_eq!(
                            store.commit(&tree, CommitMeta { parents: &[base], date: 1, author: "", message: "" }).unwrap(),
                            store.commit(model, CommitMeta { parents: &[base], date: 1, author: "", message: "" }).unwrap()
                        );
                    }
                    Step::Drop(i) => {
                        let i = at(i);
                        live.remove(i);
                    }
                }
            }
            for (versions, model) in &live {
                prop_assert_eq!(versions.read(|t| t.hash().unwrap()).unwrap(), model.hash().unwrap());
            }
            Ok(())
        })
        .unwrap();
}
