//! Fuzzes the store's control file (three slots). Nothing may panic; a slot
//! that decodes must encode to what decodes the same.
//! The checks are in `pando_store::fuzzing::control`, which the crate's tests also
//! run over this target's seeds (`fuzz/corpus/store_control/`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pando_store::fuzzing::control(data));
