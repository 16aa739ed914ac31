//! The subcommands that create and inspect a store.

pub mod check;
pub mod irmin;
pub mod proof;
pub mod repair;
pub mod replay;
pub mod snapshot;
pub mod stats;
pub mod trace;

use anyhow::{Context, bail};
use pando_core::Hash;
use pando_core::inode::Layout;
use pando_store::{Create, Kind, Options, Store, Tree};
use std::path::{Path, PathBuf};

/// Bytes as (decimal) megabytes, for printing.
pub fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// Which store to open.
#[derive(clap::Args)]
pub struct StoreArg {
    /// Store directory.
    #[arg(short, long, env = "PANDO_STORE", hide_env_values = true, default_value = ".")]
    pub store: PathBuf,
}

/// Which store and which commit.
#[derive(clap::Args)]
pub struct AtCommit {
    #[command(flatten)]
    pub store: StoreArg,
    /// A commit hash (`Co...` or hex) or a branch name [default: the last commit].
    #[arg(short, long)]
    pub commit: Option<String>,
}

/// The error of opening the store in `dir`: one line for a path that is
/// wrong (a file, no directory, no store, an unfinished creation: the
/// message names the path and says it all), the store's error under
/// `cannot open the store in DIR` for anything else.
pub fn open_error(dir: &Path, error: pando_store::Error) -> anyhow::Error {
    failed_on(dir, "open", error)
}

/// `error` of the `action` ("open", "repair") of the store in `dir`, as
/// `open_error` words it.
pub fn failed_on(dir: &Path, action: &str, error: pando_store::Error) -> anyhow::Error {
    use pando_store::Error;
    match error {
        Error::NotADirectory { .. }
        | Error::NoSuchDirectory { .. }
        | Error::NotAStore { .. }
        | Error::StoreExists { .. }
        | Error::UnfinishedCreation { .. } => error.into(),
        _ => anyhow::Error::new(error).context(format!("cannot {action} the store in {}", dir.display())),
    }
}

/// The message for `dir` when it is a file, as the store's open says it,
/// for the commands that look at a path before opening it.
pub fn refuse_a_file(dir: &Path) -> anyhow::Result<()> {
    if dir.is_file() {
        return Err(pando_store::Error::NotADirectory { dir: dir.display().to_string() }.into());
    }
    Ok(())
}

/// Opens an existing store to read it; never creates or writes anything.
fn open_read_only(store: &StoreArg) -> anyhow::Result<Store> {
    Store::open(&store.store, Options { read_only: true, create: Create::Never, ..Options::default() })
        .map_err(|e| open_error(&store.store, e))
}

/// Resolves `--commit` to a hash: a hash, a branch name, or the last commit.
fn resolve(store: &Store, commit: Option<&str>) -> anyhow::Result<Hash> {
    match commit {
        None => store.last_commit()?.context("the store has no commits"),
        Some(text) => {
            if let Some(hash) = store.branch(text) {
                return Ok(hash);
            }
            let hash = Hash::parse(text).with_context(|| format!("{text:?} is neither a branch nor a commit hash"))?;
            if !store.exists(&hash) {
                // A collected commit is its own error.
                store.commit_info(&hash)?;
                bail!("unknown commit {hash}");
            }
            Ok(hash)
        }
    }
}

fn checkout(at: &AtCommit) -> anyhow::Result<(Store, Hash, Tree)> {
    let store = open_read_only(&at.store)?;
    let hash = resolve(&store, at.commit.as_deref())?;
    let tree = store.checkout(&hash)?.with_context(|| format!("unknown commit {hash}"))?;
    Ok((store, hash, tree))
}

fn split_path(path: &str) -> Vec<&str> {
    path.split('/').filter(|step| !step.is_empty()).collect()
}

fn printable(bytes: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(bytes).ok()?;
    text.chars().all(|c| !c.is_control() || c == '\n' || c == '\t').then_some(text)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A layout by its name, as `--layout` takes it.
pub fn parse_layout(name: &str) -> Result<Layout, String> {
    Layout::named(name).ok_or_else(|| {
        let names: Vec<&str> = Layout::NAMED.iter().map(|(n, _)| *n).collect();
        format!("no layout `{name}` (the layouts: {})", names.join(", "))
    })
}

/// The name of a store's layout.
fn layout_name(store: &Store) -> &'static str {
    store.layout().name().unwrap_or("unnamed")
}

pub fn init(dir: &Path, layout: Layout) -> anyhow::Result<()> {
    if let Ok(store) = Store::open(dir, Options { read_only: true, create: Create::Never, ..Options::default() }) {
        bail!("{} already holds a pando store ({} commits); nothing was changed", dir.display(), store.commit_count());
    }
    let store =
        Store::open(dir, Options { create: Create::New, layout: Some(layout), ..Options::default() }).map_err(|e| match e {
            pando_store::Error::Io { .. } => anyhow::Error::new(e).context(format!("cannot create a store in {}", dir.display())),
            other => open_error(dir, other),
        })?;
    let name = layout_name(&store);
    store.close()?;
    outln!("created an empty store in {} (layout {name})", dir.display())?;
    Ok(())
}

/// A commit date (seconds since 1970, UTC) as a person reads it.
fn date(seconds: i64) -> String {
    match jiff::Timestamp::from_second(seconds) {
        Ok(time) => format!("{time} ({seconds})"),
        Err(_) => seconds.to_string(),
    }
}

/// A commit date as JSON: the number and, when it is a valid time, RFC 3339.
fn date_json(seconds: i64) -> serde_json::Value {
    let utc = jiff::Timestamp::from_second(seconds).ok().map(|time| time.to_string());
    serde_json::json!({ "seconds": seconds, "utc": utc })
}

pub fn info(arg: &StoreArg, json: bool) -> anyhow::Result<()> {
    let store = open_read_only(arg)?;
    let stats = store.info();
    let last = match store.last_commit()? {
        Some(hash) => Some((hash, store.commit_info(&hash)?.context("last commit unreadable")?)),
        None => None,
    };
    if json {
        let value = serde_json::json!({
            "store": store.describe(),
            "layout": layout_name(&store),
            "commits": stats.commits,
            "last_commit": last.as_ref().map(|(hash, info)| serde_json::json!({
                "hash": hash.to_base58(),
                "date": date_json(info.date),
                "message": info.message,
            })),
            "branches": store.branches().into_iter().map(|(name, hash)| (name, hash.to_base58().into())).collect::<serde_json::Map<String, serde_json::Value>>(),
            "pack_bytes": stats.pack_bytes,
            "chunks": stats.chunks.iter().map(|(name, bytes)| serde_json::json!({ "name": name, "bytes": bytes })).collect::<Vec<_>>(),
            "dictionary_entries": stats.dict_entries,
            "gc": (stats.generation > 0).then(|| serde_json::json!({
                "generation": stats.generation,
                "collected_commits": stats.collected_commits,
                "collected_live_bytes": stats.collected_live_bytes,
                "collected_files": stats.collected_files,
                "collected_file_bytes": stats.collected_file_bytes,
            })),
        });
        outln!("{}", serde_json::to_string_pretty(&value)?)?;
        return Ok(());
    }
    outln!("store:        {}", store.describe())?;
    outln!("layout:       {}", layout_name(&store))?;
    outln!("commits:      {}", stats.commits)?;
    match &last {
        Some((hash, info)) => outln!("last commit:  {hash} ({}, {:?})", date(info.date), info.message)?,
        None => outln!("last commit:  none")?,
    }
    outln!("branches:     {}", stats.branches)?;
    for (name, hash) in store.branches() {
        outln!("  {name:<12} {hash}")?;
    }
    outln!("pack:         {} bytes in {} chunk(s)", stats.pack_bytes, stats.chunks.len())?;
    for (name, size) in &stats.chunks {
        outln!("  {name:<28} {size} bytes")?;
    }
    if let Some(per_commit) = stats.pack_bytes.checked_div(stats.commits) {
        outln!("bytes/commit: {per_commit}")?;
    }
    outln!("dictionary:   {} entries", stats.dict_entries)?;
    if stats.generation > 0 {
        outln!(
            "collected:    generation {}, {} commits collected; below the first chunk {} live bytes in {} file(s) of {} bytes",
            stats.generation,
            stats.collected_commits,
            stats.collected_live_bytes,
            stats.collected_files,
            stats.collected_file_bytes
        )?;
    }
    Ok(())
}

pub fn gc(arg: &StoreArg, keep_last: u64, archive: bool) -> anyhow::Result<()> {
    anyhow::ensure!(keep_last > 0, "--keep-last must be at least 1");
    // The retention policy's numbers play no part in a collection started by hand.
    let retention = if archive {
        pando_store::Retention::Archive { commits: keep_last, every: u64::MAX }
    } else {
        Options::default().retention
    };
    let store = Store::open(&arg.store, Options { retention, create: Create::Never, ..Options::default() })
        .map_err(|e| open_error(&arg.store, e))?;
    let last = store.last_commit()?.context("the store has no commits")?;
    let keep_from = store.ancestor(&last, keep_last)?;
    let before = store.pack_bytes();
    store.gc(&keep_from)?;
    let mut shown = None;
    while let Some(status) = store.gc_status() {
        if shown != Some(status.phase) {
            errln!("{} ...", gc_phase(status.phase));
            shown = Some(status.phase);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let report = store.wait_gc()?.context("the collection did not run")?;
    let after = store.pack_bytes();
    outln!("kept from:     {keep_from}")?;
    // Each relocation step after the switch is a generation of its own:
    // the store is at the last one (what `pando info` shows).
    if report.last_generation == report.generation {
        outln!("generation:    {}", report.generation)?;
    } else {
        outln!(
            "generation:    {} (switched at {}, then {} relocation step(s))",
            report.last_generation,
            report.generation,
            report.segments
        )?;
    }
    outln!("collected:     {} commits", report.collected_commits)?;
    outln!("live:          {} bytes in {} runs below the boundary", report.live_bytes, report.live_runs)?;
    outln!("rewritten:     {} bytes into {} segment(s)", report.copied_bytes, report.segments)?;
    outln!("pack:          {before} bytes -> {after} bytes (at most {} during)", report.peak_bytes)?;
    outln!(
        "took:          {:.2} s (writer held at most {:.2} ms)",
        report.duration.as_secs_f64(),
        report.longest_pause().as_secs_f64() * 1e3
    )?;
    if after >= before {
        outln!("reclaimed:     nothing: {}", why_nothing(&store, &keep_from, keep_last, report.collected_commits)?)?;
    }
    store.close()?;
    Ok(())
}

/// What a collection is doing, as `pando gc` says it.
fn gc_phase(phase: pando_store::GcPhase) -> &'static str {
    use pando_store::GcPhase;
    match phase {
        GcPhase::Scanning => "scanning the kept records for references to older ones",
        GcPhase::Tracing => "tracing the older records still referred to",
        GcPhase::CatchingUp => "scanning the records written meanwhile",
        GcPhase::Relocating => "rewriting files that are mostly garbage",
    }
}

/// Why a collection that kept the history from `keep_from` (the last
/// `keep_last` levels) and collected `collected` commits made the pack
/// no smaller.
fn why_nothing(store: &Store, keep_from: &Hash, keep_last: u64, collected: u64) -> anyhow::Result<String> {
    if collected > 0 {
        return Ok(format!(
            "the {collected} commits collected share their files with kept records (a collection keeps the chunk \
             holding the oldest kept commit whole, and rewrites an older file only when less than 80% of it is live); \
             a later collection, once the window has moved past them, reclaims their space"
        ));
    }
    let info = store.commit_info(keep_from)?.with_context(|| format!("commit {keep_from} is missing"))?;
    Ok(match info.parents.first() {
        None => format!("the history has no more than {keep_last} levels (--keep-last): no commit is older than the window"),
        Some(parent) => match store.commit_info(parent) {
            Err(pando_store::Error::CollectedCommit(_)) => {
                "the commits older than the window were collected before; this collection found no new garbage".to_string()
            }
            Ok(None) => "the commits older than the window are not in this store (it was imported from a snapshot)".to_string(),
            _ => "no commit older than the window could be collected".to_string(),
        },
    })
}

/// How `pando get` shows a value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// Text as it is, anything else as `0x` and hexadecimal.
    Auto,
    /// Hexadecimal, without `0x`.
    Hex,
    /// The bytes themselves.
    Raw,
}

pub fn get(at: &AtCommit, path: &str, shown: Shown) -> anyhow::Result<()> {
    let (_store, hash, tree) = checkout(at)?;
    let steps = split_path(path);
    match tree.find_tree(&steps)? {
        None => bail!("nothing at {path:?} in commit {hash}"),
        Some(sub) if sub.kind() == Kind::Dir => {
            bail!("{path:?} is a directory ({} entries); use `pando ls`", tree.length(&steps)?)
        }
        Some(sub) => {
            let value = sub.to_value()?.context("contents expected")?;
            match (shown, printable(&value)) {
                (Shown::Raw, _) => {
                    use std::io::Write as _;
                    let mut stdout = std::io::stdout().lock();
                    stdout.write_all(&value)?;
                    stdout.flush()?;
                }
                (Shown::Hex, _) => outln!("{}", hex(&value))?,
                (Shown::Auto, Some(text)) => outln!("{text}")?,
                (Shown::Auto, None) => outln!("0x{}", hex(&value))?,
            }
            Ok(())
        }
    }
}

pub fn ls(at: &AtCommit, path: &str, offset: u64, length: Option<u64>, hashes: bool) -> anyhow::Result<()> {
    let (_store, hash, tree) = checkout(at)?;
    let steps = split_path(path);
    match tree.find_tree(&steps)? {
        None => bail!("nothing at {path:?} in commit {hash}"),
        Some(sub) if sub.kind() == Kind::Contents => bail!("{path:?} is a contents; use `pando get`"),
        Some(_) => {}
    }
    for (name, child) in tree.list(&steps, offset, length)? {
        let name = printable(&name).map_or_else(|| hex(&name), str::to_string);
        let kind = match child.kind() {
            Kind::Dir => "dir ",
            Kind::Contents => "file",
        };
        if hashes {
            outln!("{kind} {} {name}", child.hash()?)?;
        } else {
            outln!("{kind} {name}")?;
        }
    }
    Ok(())
}

pub fn log(at: &AtCommit, count: usize, json: bool) -> anyhow::Result<()> {
    let store = open_read_only(&at.store)?;
    let mut next = Some(resolve(&store, at.commit.as_deref())?);
    let mut commits = Vec::new();
    let mut older = None;
    while let Some(hash) = next {
        if commits.len() == count {
            break;
        }
        let info = match store.commit_info(&hash) {
            Err(pando_store::Error::CollectedCommit(_)) => {
                older = Some("older history was garbage-collected");
                break;
            }
            Ok(None) if !commits.is_empty() => {
                older = Some("older history is not in this store: it was imported from a snapshot");
                break;
            }
            other => other?.with_context(|| format!("commit {hash} is missing"))?,
        };
        next = info.parents.first().copied();
        commits.push((hash, info));
    }
    if json {
        let list: Vec<serde_json::Value> = commits
            .iter()
            .map(|(hash, info)| {
                serde_json::json!({
                    "hash": hash.to_base58(),
                    "date": date_json(info.date),
                    "author": info.author,
                    "message": info.message,
                    "parents": info.parents.iter().map(Hash::to_base58).collect::<Vec<_>>(),
                })
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&serde_json::json!({ "commits": list, "older": older }))?)?;
        return Ok(());
    }
    for (hash, info) in &commits {
        outln!("commit {hash}")?;
        outln!("date   {}", date(info.date))?;
        outln!("author {}", info.author)?;
        if info.parents.len() > 1 {
            let parents: Vec<String> = info.parents.iter().map(Hash::to_base58).collect();
            outln!("merge  {}", parents.join(" "))?;
        }
        outln!("    {}\n", info.message)?;
    }
    if let Some(note) = older {
        outln!("({note})")?;
    }
    Ok(())
}
