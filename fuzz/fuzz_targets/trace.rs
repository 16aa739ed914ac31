//! Fuzzes the trace readers (`IrmRepBT`): pando-trace's `TraceReader`,
//! the scoping pass of a store's recording, and pando-core's row decoder.
//! Nothing may panic; every row read must encode to what decodes the same.
//! The checks are in `pando_trace::fuzzing::trace`, which the crate's tests also
//! run over this target's seeds (`fuzz/corpus/trace/`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pando_trace::fuzzing::trace(data));
