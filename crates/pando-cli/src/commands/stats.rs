//! `pando stats`: what an audit of a store measures (`Store::inspect`),
//! printed as text or JSON.

use indicatif::{ProgressBar, ProgressStyle};
use pando_store::RecordKind;
use pando_store::inspection::{FileKind, Log2Histogram, Progress, SAMPLE_LEVEL, SAMPLE_PIECE_BYTES, Stage, StepUse, TreeShape};
use pando_store::{InspectOptions, Inspection};
use serde_json::{Value, json};
use std::fmt::Write;

use super::{AtCommit, hex, open_read_only, printable, resolve};

pub fn stats(at: &AtCommit, json: bool, sample_mb: u64) -> anyhow::Result<()> {
    let store = open_read_only(&at.store)?;
    // Without --commit, the last commit if there is one: an empty store has stats too.
    let commit = match at.commit.as_deref() {
        Some(text) => Some(resolve(&store, Some(text))?),
        None => None,
    };
    let options = InspectOptions { commit, sample_bytes: sample_mb.saturating_mul(1 << 20) };
    let bar = ProgressBar::new(0);
    let mut stage = None;
    let inspection = store.inspect(&options, &mut |p: Progress| {
        if stage != Some(p.stage) {
            stage = Some(p.stage);
            let (template, message) = match p.stage {
                Stage::Records => ("{spinner} {msg} {wide_bar} {bytes}/{total_bytes} ETA {eta}", "scanning records"),
                Stage::Tree => ("{spinner} {msg} {pos} directories", "walking the tree"),
                Stage::Samples => ("{spinner} {msg} {wide_bar} {bytes}/{total_bytes} ETA {eta}", "compressing samples"),
            };
            bar.set_style(ProgressStyle::with_template(template).expect("valid progress template"));
            bar.set_message(message);
            bar.set_length(p.total);
        }
        bar.set_position(p.done);
    })?;
    bar.finish_and_clear();
    if json {
        outln!("{}", serde_json::to_string_pretty(&to_json(&store.describe(), &inspection))?)?;
    } else {
        out!("{}", render(&store.describe(), &inspection))?;
    }
    Ok(())
}

/// Bytes with a binary unit, for reading at a glance.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 { "-".to_string() } else { format!("{:.1}%", part as f64 * 100.0 / whole as f64) }
}

fn path_text(path: &[Vec<u8>]) -> String {
    let steps: Vec<String> = path.iter().map(|s| printable(s).map_or_else(|| hex(s), str::to_string)).collect();
    format!("/{}", steps.join("/"))
}

fn bucket_label(low: u64, high: u64) -> String {
    if low == high { format!("{low}") } else { format!("{low}-{high}") }
}

/// A histogram's buckets as lines under a header naming the value and the count.
fn histogram(out: &mut String, h: &Log2Histogram, value: &str, count: &str) {
    let _ = writeln!(out, "  {value:<22} {count:>12} {:>8}", "share");
    for (low, high, n) in h.buckets() {
        let _ = writeln!(out, "  {:<22} {n:>12} {:>8}", bucket_label(low, high), percent(n, h.count()));
    }
}

fn step_line(out: &mut String, name: &str, s: &StepUse) {
    let _ = writeln!(out, "  {name:<16} {:>12} {:>14} {:>14}", s.count, s.stored_bytes, s.name_bytes);
}

fn render(store: &str, i: &Inspection) -> String {
    let mut out = String::new();
    let r = &i.records;
    let o = &mut out;
    let _ = writeln!(o, "store:       {store}");
    let _ =
        writeln!(o, "commits:     {} in the index, {} commit records in the pack", i.commits, r.kind(RecordKind::Commit).records);
    let per_commit = i.bytes_per_commit().map_or_else(String::new, |b| format!(", {b} bytes/commit"));
    let _ = writeln!(o, "pack:        {} bytes ({}){per_commit}", i.pack_bytes, size(i.pack_bytes));
    let _ = writeln!(
        o,
        "scanned:     {} bytes of records in the chunks, {} bytes in {} run(s) below the first chunk (generation {})",
        r.chunk_bytes, r.run_bytes, r.runs, i.generation
    );
    if let Some(cold) = i.files.iter().find(|f| f.kind == FileKind::Cold && f.files > 0) {
        let _ = writeln!(
            o,
            "cold:        {} file(s), {} bytes: older commits' records, scanned only where a run points into them",
            cold.files, cold.file_bytes
        );
    }

    let _ = writeln!(o, "\nrecords by kind:     records        bytes      payload     overhead    share");
    let total = r.total();
    for kind in RecordKind::ALL {
        let k = r.kind(kind);
        let _ = writeln!(
            o,
            "  {:<14} {:>12} {:>12} {:>12} {:>12} {:>8}",
            kind.name(),
            k.records,
            k.bytes,
            k.payload_bytes,
            k.overhead_bytes(),
            percent(k.bytes, total.bytes)
        );
    }
    let _ = writeln!(
        o,
        "  {:<14} {:>12} {:>12} {:>12} {:>12} {:>8}",
        "total",
        total.records,
        total.bytes,
        total.payload_bytes,
        total.overhead_bytes(),
        percent(total.bytes, total.bytes)
    );

    let c = &r.contents;
    let _ = writeln!(
        o,
        "\ncontents in the pack (every stored copy): {} inline ({} bytes), {} blobs ({} bytes)",
        c.inline, c.inline_bytes, c.blobs, c.blob_bytes
    );
    histogram(o, &c.sizes, "bytes", "contents");

    let s = &r.steps;
    let _ = writeln!(
        o,
        "\ndictionary:  {} entries ({} defined by the {} dictionary record(s) scanned)",
        i.dict_entries,
        r.dict_defined,
        r.kind(RecordKind::Dict).records
    );
    let e = &r.entries;
    let _ = writeln!(
        o,
        "entries of value inodes: {} ({} directories, {} inline contents, {} blob pointers)",
        e.dirs + e.inline + e.blobs,
        e.dirs,
        e.inline,
        e.blobs
    );
    let _ = writeln!(o, "  {:<16} {:>12} {:>14} {:>14}", "steps stored as", "count", "stored bytes", "name bytes");
    step_line(o, "dictionary id", &s.dict_id);
    step_line(o, "raw", &s.raw);
    step_line(o, "hex as binary", &s.hex);

    let b = &r.batches;
    let _ = writeln!(o, "\nbatches (bytes from a commit record's end to the next one's, in the chunks): {}", b.sizes.count());
    if let Some(mean) = b.sizes.mean() {
        let q = &b.quantiles;
        let _ = writeln!(o, "  mean {mean:.0}, median {}, p90 {}, p99 {}, max {}", q.median, q.p90, q.p99, q.max);
        histogram(o, &b.sizes, "bytes", "batches");
    }

    match &i.tree {
        Some(t) => render_tree(o, t),
        None => {
            let _ = writeln!(o, "\ntree:        no commit");
        }
    }

    let sampled: u64 = i.files.iter().map(|f| f.sampled_bytes).sum();
    let file_bytes: u64 = i.files.iter().map(|f| f.file_bytes).sum();
    let _ = writeln!(
        o,
        "\ncompressibility, sampled: zstd level {SAMPLE_LEVEL} on samples of up to {} each compressed alone; {} of {} read (budget {})",
        size(SAMPLE_PIECE_BYTES),
        size(sampled),
        size(file_bytes),
        size(i.sample_budget_bytes)
    );
    let _ = writeln!(o, "  {:<10} {:>6} {:>14} {:>14} {:>14} {:>7}", "files", "count", "bytes", "sampled", "compressed", "ratio");
    for f in i.files.iter().filter(|f| f.files > 0) {
        let ratio = f.ratio().map_or_else(|| "-".to_string(), |r| format!("{r:.2}"));
        let _ = writeln!(
            o,
            "  {:<10} {:>6} {:>14} {:>14} {:>14} {ratio:>7}",
            f.kind.name(),
            f.files,
            f.file_bytes,
            f.sampled_bytes,
            f.compressed_bytes
        );
    }
    out
}

fn render_tree(o: &mut String, t: &TreeShape) {
    let _ = writeln!(o, "\ntree of commit {}:", t.commit);
    let _ =
        writeln!(o, "  {} directories, {} contents ({} in blobs), max depth {}", t.directories, t.contents, t.blobs, t.max_depth);
    let _ = writeln!(o, "  largest directory: {} ({} entries)", path_text(&t.largest_path), t.largest_entries);
    histogram(o, &t.sizes, "entries", "directories");
}

fn histogram_json(h: &Log2Histogram) -> Value {
    json!({
        "count": h.count(),
        "sum": h.sum(),
        "max": h.max(),
        "buckets": h.buckets().iter().map(|&(low, high, count)| json!({"low": low, "high": high, "count": count})).collect::<Vec<_>>(),
    })
}

fn steps_json(s: &StepUse) -> Value {
    json!({"count": s.count, "stored_bytes": s.stored_bytes, "name_bytes": s.name_bytes})
}

fn to_json(store: &str, i: &Inspection) -> Value {
    let r = &i.records;
    let kinds: serde_json::Map<String, Value> = RecordKind::ALL
        .iter()
        .map(|&kind| {
            let k = r.kind(kind);
            let value = json!({"records": k.records, "bytes": k.bytes, "payload_bytes": k.payload_bytes, "overhead_bytes": k.overhead_bytes()});
            (kind.name().replace(' ', "_"), value)
        })
        .collect();
    let total = r.total();
    let q = &r.batches.quantiles;
    let tree = i.tree.as_ref().map(|t| {
        json!({
            "commit": t.commit.to_base58(),
            "directories": t.directories,
            "contents": t.contents,
            "blobs": t.blobs,
            "max_depth": t.max_depth,
            "largest_directory": {"path": path_text(&t.largest_path), "entries": t.largest_entries},
            "directory_entries": histogram_json(&t.sizes),
        })
    });
    let files: Vec<Value> = i
        .files
        .iter()
        .map(|f| {
            json!({
                "kind": f.kind.name(),
                "files": f.files,
                "bytes": f.file_bytes,
                "sampled_bytes": f.sampled_bytes,
                "compressed_bytes": f.compressed_bytes,
                "ratio": f.ratio(),
            })
        })
        .collect();
    json!({
        "store": store,
        "commits": i.commits,
        "pack_bytes": i.pack_bytes,
        "bytes_per_commit": i.bytes_per_commit(),
        "generation": i.generation,
        "scanned": {"chunk_bytes": r.chunk_bytes, "runs": r.runs, "run_bytes": r.run_bytes},
        "records": kinds,
        "records_total": {"records": total.records, "bytes": total.bytes, "payload_bytes": total.payload_bytes, "overhead_bytes": total.overhead_bytes()},
        "contents": {
            "inline": r.contents.inline,
            "inline_bytes": r.contents.inline_bytes,
            "blobs": r.contents.blobs,
            "blob_bytes": r.contents.blob_bytes,
            "sizes": histogram_json(&r.contents.sizes),
        },
        "dictionary": {
            "entries": i.dict_entries,
            "records": r.kind(RecordKind::Dict).records,
            "defined_in_records": r.dict_defined,
            "steps": {"dict_id": steps_json(&r.steps.dict_id), "raw": steps_json(&r.steps.raw), "hex": steps_json(&r.steps.hex)},
        },
        "value_entries": {"dirs": r.entries.dirs, "inline": r.entries.inline, "blobs": r.entries.blobs},
        "batches": {
            "sizes": histogram_json(&r.batches.sizes),
            "mean": r.batches.sizes.mean(),
            "median": q.median,
            "p90": q.p90,
            "p99": q.p99,
            "max": q.max,
        },
        "tree": tree,
        "compressibility": {
            "sampled": true,
            "zstd_level": SAMPLE_LEVEL,
            "sample_piece_bytes": SAMPLE_PIECE_BYTES,
            "budget_bytes": i.sample_budget_bytes,
            "files": files,
        },
    })
}
