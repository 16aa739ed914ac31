//! Fuzzes the store's dictionary file. Nothing may panic; entries that
//! decode must encode to what decodes the same.
//! The checks are in `pando_store::fuzzing::dict_file`, which the crate's tests also
//! run over this target's seeds (`fuzz/corpus/store_dict/`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pando_store::fuzzing::dict_file(data));
