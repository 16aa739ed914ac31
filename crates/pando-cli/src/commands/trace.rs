//! `pando gen`, `pando trace cat` and `pando trace stats`.

use anyhow::Context;
use pando_core::trace::{Key, Row, Scope};
use pando_store::{Options, Store, SyncPolicy};
use pando_trace::generate::{Generator, Preset, run_with_hashes};
use pando_trace::stats::TraceStats;
use pando_trace::{TraceError, TraceReader, TraceWriter};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::progress;
use pando_store::io::NewFile;

pub fn preset(name: &str) -> anyhow::Result<&'static Preset> {
    Preset::named(name).with_context(|| format!("unknown preset {name:?} (tiny, small, medium, large)"))
}

/// Writes the trace of `preset` and `seed` to `output`, whole or not at
/// all (under a temporary name until it is complete); stops with an error
/// once `interrupted` is set.
pub fn generate(preset: &Preset, seed: u64, output: &Path, quiet: bool, interrupted: Option<&AtomicBool>) -> anyhow::Result<()> {
    let start = Instant::now();
    let new = NewFile::create(output)?;
    let mut writer = TraceWriter::create(new.path())?;
    // Each block goes through a scratch store beside the output, so that
    // every commit row carries its real hash; the store is removed after.
    let beside = output.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    // What killed generators left there goes first.
    crate::scratch::sweep(beside, ".pando-gen-");
    let scratch = crate::scratch::Scratch::new_in(beside, ".pando-gen-")?;
    // Its commits are the generator's own, not the user's: a slow one (the
    // genesis of a large preset) is nothing an operator can act on.
    let options = Options { sync: SyncPolicy::Never, slow_commit_warning: None, ..Options::default() };
    let store = Store::open(scratch.path().join("store"), options)?;
    let bar = progress::bar(preset.blocks, "{spinner} [{elapsed_precise}] generating {wide_bar} {pos}/{len} blocks ETA {eta}");
    // The spinner and the clock move inside a long block (a genesis of
    // millions of writes) too.
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    let summary = run_with_hashes(&mut Generator::new(preset, seed), &store, &mut |row| {
        if interrupted.is_some_and(|flag| flag.load(Ordering::Relaxed)) {
            anyhow::bail!("interrupted: {} was not written", output.display());
        }
        if matches!(row, Row::Commit { .. }) {
            bar.inc(1);
        }
        Ok(writer.append(row)?)
    })?;
    bar.finish_and_clear();
    writer.finish()?;
    new.persist()?;
    drop(store);
    drop(scratch);
    if !quiet {
        let bytes = std::fs::metadata(output).map(|m| m.len()).unwrap_or(0);
        errln!(
            "generated {} ({} blocks with their commit hashes, {} rows: {} writes, {} reads, {} removes, {} copies; {} bytes) in {:.1?}",
            output.display(),
            summary.blocks,
            summary.rows,
            summary.writes,
            summary.reads,
            summary.removes,
            summary.copies,
            bytes,
            start.elapsed()
        );
    }
    Ok(())
}

fn text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(t) if t.chars().all(|c| !c.is_control()) => t.to_string(),
        _ => format!("0x{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

fn key(key: &Key) -> String {
    let steps: Vec<String> = key.iter().map(|s| text(s)).collect();
    format!("/{}", steps.join("/"))
}

fn ctx(scope: &Scope<i64>) -> String {
    match scope {
        Scope::Keep(c) => format!("{c}"),
        Scope::Forget(c) => format!("{c}!"),
    }
}

fn hash(scope: &Scope<Vec<u8>>) -> String {
    match scope {
        Scope::Keep(h) => text(h),
        Scope::Forget(h) => format!("{}!", text(h)),
    }
}

fn value(bytes: &[u8]) -> String {
    if bytes.len() > 48 { format!("<{} bytes>", bytes.len()) } else { text(bytes) }
}

/// One row as a line of text. Context ids and hashes seen for the last
/// time are marked with `!`.
pub fn row_line(row: &Row) -> String {
    match row {
        Row::Checkout { hash: h, ctx: c } => format!("checkout {} -> ctx {}", hash(h), ctx(c)),
        Row::Add { key: k, value: v, in_ctx, out_ctx } => {
            format!("add {} = {} (ctx {} -> {})", key(k), value(v), ctx(in_ctx), ctx(out_ctx))
        }
        Row::Remove { key: k, in_ctx, out_ctx } => format!("remove {} (ctx {} -> {})", key(k), ctx(in_ctx), ctx(out_ctx)),
        Row::Copy { source, target, in_ctx, out_ctx } => {
            format!("copy {} -> {} (ctx {} -> {})", key(source), key(target), ctx(in_ctx), ctx(out_ctx))
        }
        Row::Find { key: k, found, ctx: c } => format!("find {} = {found} (ctx {})", key(k), ctx(c)),
        Row::Mem { key: k, found, ctx: c } => format!("mem {} = {found} (ctx {})", key(k), ctx(c)),
        Row::MemTree { key: k, found, ctx: c } => format!("mem_tree {} = {found} (ctx {})", key(k), ctx(c)),
        Row::Commit { hash: h, date, message, parents, in_ctx } => {
            let parents: Vec<String> = parents.iter().map(hash).collect();
            format!(
                "commit {} date {date} message {:?} parents [{}] (ctx {})",
                hash(h),
                text(message),
                parents.join(", "),
                ctx(in_ctx)
            )
        }
    }
}

/// Opens a trace; one that ends inside a block is an error at its end
/// unless `ignore_partial_tail`.
pub fn open(path: &Path, ignore_partial_tail: bool) -> anyhow::Result<TraceReader> {
    let mut reader = TraceReader::open(path)?;
    reader.accept_partial_tail(ignore_partial_tail);
    Ok(reader)
}

/// Says which block the end of a trace read with `--ignore-partial-tail`
/// left out, if it ended inside one.
pub fn say_dropped_tail(reader: &TraceReader) {
    if let Some(tail) = reader.dropped_tail() {
        let cut = if tail.cut { ", the last cut short by the end of the file" } else { "" };
        errln!(
            "the trace ends inside block {} (0 is the first): its {} rows from row {} (byte {}){cut} were left out",
            tail.block,
            tail.rows,
            tail.row,
            tail.offset
        );
    }
}

/// The hint added to an error of a trace that ends inside a block.
pub fn partial_tail_hint(error: anyhow::Error) -> anyhow::Error {
    if matches!(error.downcast_ref::<TraceError>(), Some(TraceError::PartialTail { .. })) {
        error.context("the trace is cut short (--ignore-partial-tail takes the whole blocks before its end)")
    } else {
        error
    }
}

pub fn cat(path: &Path, limit: Option<u64>, ignore_partial_tail: bool) -> anyhow::Result<()> {
    use std::io::Write;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for (i, row) in open(path, ignore_partial_tail)?.enumerate() {
        if limit.is_some_and(|l| i as u64 >= l) {
            break;
        }
        let row = match row {
            Ok(row) => row,
            Err(e) => {
                // The rows before the error are shown first.
                let _ = out.flush();
                return Err(partial_tail_hint(e.into()));
            }
        };
        if writeln!(out, "{}", row_line(&row)).is_err() {
            // The reader went away (a pipe closed): stop quietly.
            return Ok(());
        }
    }
    Ok(())
}

pub fn stats(path: &Path, ignore_partial_tail: bool) -> anyhow::Result<()> {
    let mut stats = TraceStats::default();
    let mut reader = open(path, ignore_partial_tail)?;
    let mut error = None;
    for row in &mut reader {
        match row {
            Ok(row) => stats.add(&row),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    out!("{}", stats.render())?;
    if error.is_none() {
        say_dropped_tail(&reader);
    }
    match error {
        // What came before the damage is summarised, then the error is reported.
        Some(e) => Err(partial_tail_hint(e.into())),
        None => Ok(()),
    }
}
