//! `pando check --repair`: rebuilds a damaged index or dictionary from the
//! pack (`Store::repair`), checks the result, and says what it found and
//! did. It refuses, changing nothing, what it cannot rebuild.

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use pando_store::{CheckPhase, Options, Store};

use super::StoreArg;

/// Repairs the store; an error if it cannot.
pub fn repair(arg: &StoreArg) -> anyhow::Result<()> {
    if !arg.store.is_dir() {
        bail!("cannot repair the store in {}: no such directory", arg.store.display());
    }
    outln!("repairing {}", arg.store.display())?;
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg:5} {wide_bar} {percent:>3}% ETA {eta}")
            .expect("valid progress template"),
    );
    let report = Store::repair(&arg.store, Options::default(), &mut |p| {
        bar.set_message(match p.phase {
            CheckPhase::Scan => "scan",
            CheckPhase::Walk => "walk",
        });
        bar.set_length(p.total);
        bar.set_position(p.done);
    });
    bar.finish_and_clear();
    let report = report.with_context(|| format!("cannot repair the store in {}", arg.store.display()))?;
    for finding in &report.findings {
        outln!("{finding}")?;
    }
    outln!(
        "checked:   {} records re-hashed, reachable from {} commit(s); no problems found",
        report.check.walked.records(),
        report.check.commits
    )?;
    if report.unchanged() {
        outln!("nothing to repair: the index, the dictionary and the control file agree with the pack")?;
    } else {
        outln!(
            "repaired:  rewrote {} ({} index entries, {} dictionary entries)",
            report.rewritten.join(", "),
            report.index_entries,
            report.dict_entries
        )?;
    }
    Ok(())
}
