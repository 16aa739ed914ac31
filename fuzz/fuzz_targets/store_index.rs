//! Fuzzes the store's commit index file and its branches file. Nothing may
//! panic; what decodes must encode to what decodes the same.
//! The checks are in `pando_store::fuzzing::index_and_branches`, which the crate's tests also
//! run over this target's seeds (`fuzz/corpus/store_index/`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pando_store::fuzzing::index_and_branches(data));
