//! Fuzzes a pack record: its framing, and the payload of each kind (value
//! inode, tree inode, tree patch, commit, dictionary entries). Nothing may
//! panic; what decodes must encode to what decodes the same.
//! The checks are in `pando_store::fuzzing::record`, which the crate's tests also
//! run over this target's seeds (`fuzz/corpus/store_record/`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pando_store::fuzzing::record(data));
