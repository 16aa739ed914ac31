//! `pando check`: the integrity check of a store (`Store::check`), with a
//! progress bar, a summary and one line per problem.

use pando_store::RecordCounts;
use pando_store::{CheckPhase, CheckProgress, CheckScope, Create, Error, Options, Problem, Store};

use super::{StoreArg, mb, resolve};

fn kinds(counts: &RecordCounts) -> String {
    format!(
        "{} value inodes, {} value patches, {} tree inodes, {} tree patches, {} blobs, {} commits, {} dictionary records",
        counts.values, counts.value_patches, counts.trees, counts.patches, counts.blobs, counts.commits, counts.dicts
    )
}

fn problem_json(problem: &Problem) -> serde_json::Value {
    serde_json::json!({ "file": problem.file, "position": problem.position, "offset": problem.offset, "what": problem.what })
}

fn counts_json(counts: &RecordCounts) -> serde_json::Value {
    serde_json::json!({
        "records": counts.records(),
        "bytes": counts.bytes,
        "value_inodes": counts.values,
        "value_patches": counts.value_patches,
        "tree_inodes": counts.trees,
        "tree_patches": counts.patches,
        "blobs": counts.blobs,
        "commits": counts.commits,
        "dictionary": counts.dicts,
    })
}

/// Checks the store; returns false if it found a problem. With `json`, one
/// JSON document on standard output says what the text would.
pub fn check(arg: &StoreArg, commit: Option<&str>, all: bool, max_problems: usize, json: bool) -> anyhow::Result<bool> {
    let store = match Store::open(&arg.store, Options { read_only: true, create: Create::Never, ..Options::default() }) {
        Ok(store) => store,
        // Damage that opening finds is the check's first problem.
        Err(e @ (Error::Corrupt { .. } | Error::ChecksumMismatch { .. } | Error::Io { .. })) => {
            let problem = Problem::of_error(&e);
            if json {
                let value = serde_json::json!({ "opened": false, "clean": false, "problems": [problem_json(&problem)] });
                outln_or_gone!("{}", serde_json::to_string_pretty(&value)?)?;
                return Ok(false);
            }
            outln_or_gone!("{problem}")?;
            outln_or_gone!("1 problem: the store does not open, nothing more is checked")?;
            return Ok(false);
        }
        Err(e) => return Err(super::open_error(&arg.store, e)),
    };
    // A store without commits has only its files to check.
    let scope = if all || (commit.is_none() && store.last_commit()?.is_none()) {
        CheckScope::All
    } else {
        CheckScope::Commit(resolve(&store, commit)?)
    };
    match scope {
        _ if json => {}
        CheckScope::All => {
            outln_or_gone!("checking every file and all {} commits of {}", store.commit_count(), store.describe())?
        }
        CheckScope::Commit(hash) => outln_or_gone!("checking commit {hash} of {}", store.describe())?,
    }
    let report = with_progress(|progress| store.check(scope, max_problems, progress))?;
    let seconds = report.duration.as_secs_f64();
    if json {
        let value = serde_json::json!({
            "opened": true,
            "store": store.describe(),
            "scope": match scope {
                CheckScope::All => "all".to_string(),
                CheckScope::Commit(hash) => hash.to_base58(),
            },
            "clean": report.is_clean(),
            "stopped_at_max_problems": report.stopped,
            "problems": report.problems.iter().map(problem_json).collect::<Vec<_>>(),
            "commits": report.commits,
            "scanned": counts_json(&report.scanned),
            "rehashed": counts_json(&report.walked),
            "hashed_bytes": report.hashed_bytes,
            "bytes_read": report.bytes_read,
            "pack_bytes": report.pack_bytes,
            "seconds": seconds,
        });
        outln_or_gone!("{}", serde_json::to_string_pretty(&value)?)?;
        return Ok(report.is_clean());
    }
    if scope == CheckScope::All {
        outln_or_gone!(
            "scanned:   {} records, {:.1} MB: {}",
            report.scanned.records(),
            mb(report.scanned.bytes),
            kinds(&report.scanned)
        )?;
    }
    outln_or_gone!(
        "re-hashed: {} records, {:.1} MB ({:.1} MB of encodings hashed), reachable from {} commit(s): {}",
        report.walked.records(),
        mb(report.walked.bytes),
        mb(report.hashed_bytes),
        report.commits,
        kinds(&report.walked)
    )?;
    outln_or_gone!(
        "read:      {:.1} MB in {seconds:.2} s ({:.0} MB/s); the pack is {:.1} MB",
        mb(report.bytes_read),
        mb(report.bytes_read) / seconds.max(1e-9),
        mb(report.pack_bytes)
    )?;
    for problem in &report.problems {
        outln_or_gone!("{problem}")?;
    }
    match report.problems.len() {
        0 => outln_or_gone!("no problems found")?,
        n if report.stopped => outln_or_gone!("{n} problems; stopped there (--max-problems)")?,
        1 => outln_or_gone!("1 problem")?,
        n => outln_or_gone!("{n} problems")?,
    }
    Ok(report.is_clean())
}

/// Runs `check` (a check or a repair) with a progress bar that follows it
/// (logs go around it), cleared once it returns.
pub fn with_progress<T>(check: impl FnOnce(&mut dyn FnMut(CheckProgress)) -> T) -> T {
    let bar = crate::progress::bar(0, "{spinner} [{elapsed_precise}] {msg:5} {wide_bar} {percent:>3}% ETA {eta}");
    let result = check(&mut |p| {
        bar.set_message(match p.phase {
            CheckPhase::Scan => "scan",
            CheckPhase::Walk => "walk",
        });
        bar.set_length(p.total);
        bar.set_position(p.done);
    });
    bar.finish_and_clear();
    result
}
