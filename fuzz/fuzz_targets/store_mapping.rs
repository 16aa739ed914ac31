//! Fuzzes a collected store's mapping file (`mapping-<g>`). Nothing may
//! panic; runs that decode must encode to what decodes the same.
//! The checks are in `pando_store::fuzzing::mapping`, which the crate's tests also
//! run over this target's seeds (`fuzz/corpus/store_mapping/`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pando_store::fuzzing::mapping(data));
