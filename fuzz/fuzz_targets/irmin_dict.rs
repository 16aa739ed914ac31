//! Fuzzes pando-irmin's reader of irmin's `store.dict`. Nothing may panic.
//! The checks are in `pando_irmin::fuzzing::dict`, which the crate's tests also
//! run over this target's seeds (`fuzz/corpus/irmin_dict/`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pando_irmin::fuzzing::dict(data));
