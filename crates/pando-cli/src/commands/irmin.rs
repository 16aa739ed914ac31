//! `pando import-irmin`: check an irmin-pack context (Octez's, Brassaia's)
//! or bring its commits into a new pando store.

use anyhow::{Context as _, bail};
use indicatif::ProgressBar;
use pando_core::Hash;
use pando_irmin::{CommitRef, Context, WalkStats};
use pando_store::{Create, Options, Store};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::mb;
use super::replay::on_interrupt;
use super::snapshot::{check_new_store, remove_new_store};

/// What to do with the context.
pub struct ImportArgs<'a> {
    pub context: &'a Path,
    pub store: Option<&'a Path>,
    pub commit: Option<&'a str>,
    pub all: bool,
    pub check_only: bool,
    /// With `check_only`: one JSON document on standard output.
    pub json: bool,
}

fn bytes_bar() -> ProgressBar {
    crate::progress::spinner("{spinner} [{elapsed_precise}] {msg}")
}

fn walk_message(stats: &WalkStats, bytes_read: u64, started: Instant) -> String {
    let seconds = started.elapsed().as_secs_f64().max(1e-9);
    format!(
        "{} directories, {} contents; {:.1} MB of irmin entries, {:.1} MB read ({:.0} MB/s)",
        stats.directories,
        stats.contents,
        mb(stats.entry_bytes),
        mb(bytes_read),
        mb(bytes_read) / seconds
    )
}

fn commits_bar(total: usize) -> ProgressBar {
    crate::progress::bar(total as u64, "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} commits ETA {eta}")
}

/// Finds the commit to check or import, saying which when none was named.
fn pick(context: &mut Context, commit: Option<&str>) -> anyhow::Result<CommitRef> {
    let hash =
        commit.map(|c| c.parse::<Hash>().with_context(|| format!("{c:?} is not a commit hash (Co... or hex)"))).transpose()?;
    let found = context.find_commit(hash.as_ref())?;
    if hash.is_none() {
        errln!("no --commit given: taking the newest commit in the files, {}", found.hash);
    }
    Ok(found)
}

/// Checks or imports; returns false if a check found damage (an import
/// that finds damage fails).
pub fn import_irmin(args: &ImportArgs<'_>) -> anyhow::Result<bool> {
    let started = Instant::now();
    if args.check_only {
        return check_only(args, started);
    }
    let Some(dir) = args.store else { bail!("a store directory is needed to import into (or --check-only)") };
    let existed = check_new_store(dir, "an irmin context")?;
    let interrupted = on_interrupt()?;
    let mut context = Context::open(args.context)?;
    // A signal stops the walk within a few thousand objects, so that the
    // store it made is removed below.
    context.stop_when(interrupted.clone());
    let result = (|| {
        let store = Store::open(dir, Options { create: Create::New, ..Options::default() })
            .with_context(|| format!("cannot create a store in {}", dir.display()))?;
        if args.all {
            let bar = commits_bar(0);
            let history = context.import_all(&store, &mut |done, total, _| {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            })?;
            bar.finish_and_clear();
            store.close()?;
            let seconds = started.elapsed().as_secs_f64();
            outln_or_gone!(
                "imported {} commits into {}, the newest {} (every commit hash checked)",
                history.commits,
                dir.display(),
                history.head
            )?;
            outln_or_gone!(
                "  the oldest whole: {} directories, {} contents ({:.1} MB of values); the later ones: {} writes, {} removals",
                history.first.walk.directories,
                history.first.walk.contents,
                mb(history.first.walk.contents_bytes),
                history.diff.added,
                history.diff.removed
            )?;
            outln_or_gone!(
                "  {:.1} MB of irmin files read in {seconds:.2} s ({:.0} MB/s)",
                mb(history.bytes_read),
                mb(history.bytes_read) / seconds.max(1e-9)
            )?;
        } else {
            let commit = pick(&mut context, args.commit)?;
            let bar = bytes_bar();
            let imported =
                context.import_commit(&commit, &store, &mut |stats, read| bar.set_message(walk_message(stats, read, started)))?;
            bar.finish_and_clear();
            store.close()?;
            let seconds = started.elapsed().as_secs_f64();
            outln_or_gone!("imported commit {} into {} (every object re-hashed)", imported.commit.hash, dir.display())?;
            outln_or_gone!(
                "  {} directories, {} contents ({:.1} MB of values), {} inodes",
                imported.walk.directories,
                imported.walk.contents,
                mb(imported.walk.contents_bytes),
                imported.walk.inodes
            )?;
            outln_or_gone!(
                "  {:.1} MB of irmin entries, {:.1} MB read, in {seconds:.2} s ({:.0} MB/s of entries)",
                mb(imported.walk.entry_bytes),
                mb(imported.bytes_read),
                mb(imported.walk.entry_bytes) / seconds.max(1e-9)
            )?;
        }
        anyhow::Ok(())
    })();
    if let Err(e) = result {
        remove_new_store(dir, existed);
        if interrupted.load(Ordering::Relaxed) {
            bail!("interrupted: {} was left as it was", dir.display());
        }
        return Err(e.context(format!("import from {} failed; {} was left as it was", args.context.display(), dir.display())));
    }
    Ok(true)
}

/// The check: `Ok(false)` when the files are damaged (said on standard
/// output with `--json`, as an error otherwise).
fn check_only(args: &ImportArgs<'_>, started: Instant) -> anyhow::Result<bool> {
    let mut read = 0;
    let result = (|| {
        let mut context = Context::open(args.context)?;
        let commits = if args.all { context.commits()? } else { vec![pick(&mut context, args.commit)?] };
        if args.all {
            context.remember_checked();
        }
        let bar = if args.all { commits_bar(commits.len()) } else { bytes_bar() };
        let mut total = WalkStats::default();
        for (i, commit) in commits.iter().enumerate() {
            let (_, stats) = context.check_commit(commit, &mut |stats, read| {
                if !args.all {
                    bar.set_message(walk_message(stats, read, started));
                }
            })?;
            bar.set_position(i as u64 + 1);
            total += &stats;
            read = context.bytes_read();
        }
        bar.finish_and_clear();
        anyhow::Ok((commits, total))
    })();
    let seconds = started.elapsed().as_secs_f64();
    let (commits, total) = match result {
        Ok(done) => done,
        Err(e) if args.json => {
            use pando_irmin::Error::{Corrupt, HashMismatch};
            let Some(Corrupt { file, offset, .. } | HashMismatch { file, offset, .. }) = e.downcast_ref::<pando_irmin::Error>()
            else {
                return Err(e);
            };
            let value =
                serde_json::json!({ "intact": false, "damage": { "file": file, "offset": offset, "what": e.to_string() } });
            outln_or_gone!("{}", serde_json::to_string_pretty(&value)?)?;
            return Ok(false);
        }
        Err(e) => return Err(e),
    };
    if args.json {
        let value = serde_json::json!({
            "intact": true,
            "commits": commits.iter().map(|c| c.hash.to_base58()).collect::<Vec<_>>(),
            "directories": total.directories,
            "contents": total.contents,
            "contents_bytes": total.contents_bytes,
            "entry_bytes": total.entry_bytes,
            "bytes_read": read,
            "seconds": seconds,
        });
        outln_or_gone!("{}", serde_json::to_string_pretty(&value)?)?;
        return Ok(true);
    }
    match &commits[..] {
        [one] => outln_or_gone!("commit {} and its tree are intact: every object hashes to what irmin recorded", one.hash)?,
        many => outln_or_gone!("{} commits and their trees are intact: every object hashes to what irmin recorded", many.len())?,
    }
    outln_or_gone!(
        "  {} directories, {} contents ({:.1} MB of values); {:.1} MB of entries, {:.1} MB read in {seconds:.2} s ({:.0} MB/s)",
        total.directories,
        total.contents,
        mb(total.contents_bytes),
        mb(total.entry_bytes),
        mb(read),
        mb(read) / seconds.max(1e-9)
    )?;
    Ok(true)
}
