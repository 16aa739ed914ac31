//! The tools over a whole store, each behind a `Store` method and a
//! `pando` command: the integrity check (`check`), the audit behind
//! `pando stats` (`inspect`), building a store from a snapshot
//! (`import`), and repair of a damaged index, dictionary or control slot
//! (`repair`).
//!
//! Invariant: only `import` (into an empty store) and `repair` (when
//! asked to) write; `check` and `inspect` read only (tested by
//! `checking_and_inspecting_write_nothing`).

pub(super) mod check;
pub(super) mod import;
pub(super) mod inspect;
pub(super) mod repair;
