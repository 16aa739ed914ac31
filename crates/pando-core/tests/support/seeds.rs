//! How property tests keep their seeds: read from the checkout, never
//! written into it.
//!
//! proptest's default persistence appends the seed of every failing case to
//! the `<test>.proptest-regressions` file beside the test, a tracked file:
//! one failing run left the checkout modified, and every later run replayed
//! that seed first and failed again until the file was checked out. With
//! [`config`], the committed seeds are still replayed before the random
//! cases, but a new failure is only printed (its seed line and its shrunk
//! input), for whoever reads it to add the line to the file or to turn the
//! input into a named test.
//!
//! Invariants:
//! - Nothing here writes a file, whatever fails.
//! - Each run draws fresh random cases after the committed seeds: no fixed
//!   seed (unless `PROPTEST_RNG_SEED` asks for one).
//!
//! One file for every crate's property tests: pando-core's include it as
//! `#[path = "support/seeds.rs"] mod seeds;`, the other crates' by a path
//! up to here.

use proptest::test_runner::{Config, FailurePersistence, FileFailurePersistence, PersistedSeed};
use std::any::Any;
use std::fmt::Debug;

/// Where committed seeds are read: `dir.rs`'s from `dir.proptest-regressions`
/// beside it (where proptest's default put them for an integration test).
pub const SEEDS: FileFailurePersistence = FileFailurePersistence::WithSource("proptest-regressions");

/// Replays the seeds committed beside a test; prints a new failure's seed
/// instead of saving it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadOnlySeeds;

impl FailurePersistence for ReadOnlySeeds {
    fn load_persisted_failures2(&self, source_file: Option<&'static str>) -> Vec<PersistedSeed> {
        SEEDS.load_persisted_failures2(source_file)
    }

    fn save_persisted_failure2(&mut self, source_file: Option<&'static str>, seed: PersistedSeed, shrunken_value: &dyn Debug) {
        // One line, as proptest would have written it.
        let input = format!("{shrunken_value:?}").replace(['\n', '\r'], " ");
        eprintln!(
            "proptest: this failure is not saved (tests never write into the checkout); to replay it before the random \
             cases, add this line to the `.proptest-regressions` file beside {}:\n{seed} # shrinks to {input}",
            source_file.unwrap_or("the test")
        );
    }

    fn box_clone(&self) -> Box<dyn FailurePersistence> {
        Box::new(self.clone())
    }

    fn eq(&self, other: &dyn FailurePersistence) -> bool {
        other.as_any().is::<Self>()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// proptest's default configuration with `cases` random cases and the
/// committed seeds read only.
pub fn config(cases: u32) -> Config {
    Config { cases, failure_persistence: Some(Box::new(ReadOnlySeeds)), ..Config::default() }
}
