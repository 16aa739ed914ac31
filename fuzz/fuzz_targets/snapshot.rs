//! Fuzzes snapshot import: the input as a snapshot file, and as the raw
//! stream put in frames. Nothing may panic; what imports must export to
//! the same file.
//! The checks are in `pando_store::fuzzing::snapshot`, which the crate's tests also
//! run over this target's seeds (`fuzz/corpus/snapshot/`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pando_store::fuzzing::snapshot(data));
