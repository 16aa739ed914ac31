//! `pando check`: the integrity check of a store (`Store::check`), with a
//! progress bar, a summary and one line per problem.

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use pando_store::store::RecordCounts;
use pando_store::{CheckPhase, CheckScope, Error, Options, Problem, Store};

use super::{StoreArg, resolve};

fn megabytes(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn kinds(counts: &RecordCounts) -> String {
    format!(
        "{} value inodes, {} tree inodes, {} tree patches, {} blobs, {} commits, {} dictionary records",
        counts.values, counts.trees, counts.patches, counts.blobs, counts.commits, counts.dicts
    )
}

/// Checks the store; returns false if it found a problem.
pub fn check(arg: &StoreArg, commit: Option<&str>, all: bool, max_problems: usize) -> anyhow::Result<bool> {
    if !arg.store.is_dir() {
        bail!("cannot open the store in {}: no such directory", arg.store.display());
    }
    let store = match Store::open(&arg.store, Options { read_only: true, ..Options::default() }) {
        Ok(store) => store,
        // Damage that opening finds is the check's first problem.
        Err(e @ (Error::Corrupt { .. } | Error::ChecksumMismatch { .. } | Error::Io { .. })) => {
            println!("{}", Problem::of_error(&e));
            println!("1 problem: the store does not open, nothing more is checked");
            return Ok(false);
        }
        Err(e) => return Err(e).with_context(|| format!("cannot open the store in {}", arg.store.display())),
    };
    // A store without commits has only its files to check.
    let scope = if all || (commit.is_none() && store.last_commit()?.is_none()) {
        CheckScope::All
    } else {
        CheckScope::Commit(resolve(&store, commit)?)
    };
    match scope {
        CheckScope::All => println!("checking every file and all {} commits of {}", store.commit_count(), store.describe()),
        CheckScope::Commit(hash) => println!("checking commit {hash} of {}", store.describe()),
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg:5} {wide_bar} {percent:>3}% ETA {eta}")
            .expect("valid progress template"),
    );
    let report = store.check(scope, max_problems, &mut |p| {
        bar.set_message(match p.phase {
            CheckPhase::Scan => "scan",
            CheckPhase::Walk => "walk",
        });
        bar.set_length(p.total);
        bar.set_position(p.done);
    })?;
    bar.finish_and_clear();
    let seconds = report.duration.as_secs_f64();
    if scope == CheckScope::All {
        println!(
            "scanned:   {} records, {:.1} MB: {}",
            report.scanned.records(),
            megabytes(report.scanned.bytes),
            kinds(&report.scanned)
        );
    }
    println!(
        "re-hashed: {} records, {:.1} MB ({:.1} MB of encodings hashed), reachable from {} commit(s): {}",
        report.walked.records(),
        megabytes(report.walked.bytes),
        megabytes(report.hashed_bytes),
        report.commits,
        kinds(&report.walked)
    );
    println!(
        "read:      {:.1} MB in {seconds:.2} s ({:.0} MB/s); the pack is {:.1} MB",
        megabytes(report.bytes_read),
        megabytes(report.bytes_read) / seconds.max(1e-9),
        megabytes(report.pack_bytes)
    );
    for problem in &report.problems {
        println!("{problem}");
    }
    match report.problems.len() {
        0 => println!("no problems found"),
        n if report.stopped => println!("{n} problems; stopped there (--max-problems)"),
        1 => println!("1 problem"),
        n => println!("{n} problems"),
    }
    Ok(report.is_clean())
}
