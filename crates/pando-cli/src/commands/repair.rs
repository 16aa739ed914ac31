//! `pando check --repair`: rebuilds a damaged index or dictionary from the
//! pack (`Store::repair`), checks the result, and says what it found and
//! did. It refuses, changing nothing, what it cannot rebuild.

use pando_store::{Options, Store};

use super::StoreArg;

/// Repairs the store; an error if it cannot.
pub fn repair(arg: &StoreArg) -> anyhow::Result<()> {
    outln_or_gone!("repairing {}", arg.store.display())?;
    let report = super::check::with_progress(|progress| Store::repair(&arg.store, Options::default(), progress));
    let report = report.map_err(|e| super::failed_on(&arg.store, "repair", e))?;
    for finding in &report.findings {
        outln_or_gone!("{finding}")?;
    }
    outln_or_gone!(
        "checked:   {} records re-hashed, reachable from {} commit(s); no problems found",
        report.check.walked.records(),
        report.check.commits
    )?;
    if report.unchanged() {
        outln_or_gone!("nothing to repair: the index, the dictionary and the control file agree with the pack")?;
    } else {
        outln_or_gone!(
            "repaired:  rewrote {} ({} index entries, {} dictionary entries)",
            report.rewritten.join(", "),
            report.index_entries,
            report.dict_entries
        )?;
    }
    Ok(())
}
