//! Fuzzes pando-irmin's reader of irmin's index files. Nothing may panic.
//! The checks are in `pando_irmin::fuzzing::index`, which the crate's tests also
//! run over this target's seeds (`fuzz/corpus/irmin_index/`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pando_irmin::fuzzing::index(data));
