//! Fuzzes pando-irmin's readers of pack entries (contents, commits,
//! inodes) through a context of one suffix chunk and a dictionary taken
//! from the input: scans, checks and an import. Nothing may panic.
//! The checks are in `pando_irmin::fuzzing::suffix`, which the crate's tests also
//! run over this target's seeds (`fuzz/corpus/irmin_suffix/`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pando_irmin::fuzzing::suffix(data));
