//! `pando snapshot export` and `pando snapshot import`: one commit's tree
//! as a file, to bootstrap a store elsewhere.

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use pando_store::{Create, Options, SnapshotSummary, Store};
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use super::{AtCommit, mb, resolve};

/// A writer that moves a progress bar by the bytes it takes.
struct Counted<W> {
    inner: W,
    bar: ProgressBar,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bar.inc(n as u64);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn print_summary(summary: &SnapshotSummary, seconds: f64) -> std::io::Result<()> {
    outln!(
        "  {} directories, {} contents ({:.1} MB of values), {} inodes",
        summary.directories,
        summary.contents,
        mb(summary.contents_bytes),
        summary.inodes
    )?;
    outln!(
        "  stream {:.1} MB, file {:.1} MB (zstd), {seconds:.2} s ({:.0} MB/s of stream)",
        mb(summary.stream_bytes),
        mb(summary.file_bytes),
        mb(summary.stream_bytes) / seconds.max(1e-9)
    )
}

/// Writes the tree of the commit to `file` (first as `file.partial`, renamed
/// once complete, so a failed export leaves no snapshot behind).
pub fn export(at: &AtCommit, file: &Path) -> anyhow::Result<()> {
    // The walk reads each inode once: a small cache is enough, and keeps
    // the memory of an export small whatever the tree.
    let options = Options { read_only: true, create: Create::Never, cache_bytes: 16 << 20, ..Options::default() };
    let store = Store::open(&at.store.store, options).map_err(|e| super::open_error(&at.store.store, e))?;
    let commit = resolve(&store, at.commit.as_deref())?;
    let partial = file.with_extension("partial");
    let started = Instant::now();
    let result = (|| {
        let out = std::fs::File::create(&partial).with_context(|| format!("cannot create {}", partial.display()))?;
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] exporting: {bytes} written ({bytes_per_sec})")
                .expect("valid progress template"),
        );
        let mut out = Counted { inner: BufWriter::with_capacity(1 << 20, out), bar };
        let summary = store.export_snapshot(&commit, &mut out)?;
        out.bar.finish_and_clear();
        out.inner
            .into_inner()
            .map_err(|e| e.into_error())?
            .sync_all()
            .with_context(|| format!("cannot sync {}", partial.display()))?;
        std::fs::rename(&partial, file).with_context(|| format!("cannot rename {} to {}", partial.display(), file.display()))?;
        anyhow::Ok(summary)
    })();
    let summary = match result {
        Ok(summary) => summary,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    outln!("exported commit {commit} to {}", file.display())?;
    print_summary(&summary, started.elapsed().as_secs_f64())?;
    Ok(())
}

/// Checks that `dir` is absent or empty, to import `what` into; returns
/// whether it exists.
pub(super) fn check_new_store(dir: &Path, what: &str) -> anyhow::Result<bool> {
    super::refuse_a_file(dir)?;
    let existed = dir.exists();
    if existed && std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?.next().is_some() {
        bail!("{} is not empty: {what} is imported into a new store", dir.display());
    }
    Ok(existed)
}

/// Removes what a failed import made in `dir` (best effort: the error is
/// what the user needs to see).
pub(super) fn remove_new_store(dir: &Path, existed: bool) {
    if existed {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let _ = std::fs::remove_file(entry.path());
        }
    } else {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Builds a new store in `dir` (absent or empty) from `file`; on failure,
/// removes what it created.
pub fn import(file: &Path, dir: &Path) -> anyhow::Result<()> {
    let existed = check_new_store(dir, "a snapshot")?;
    let input = std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
    let length = input.metadata().map(|m| m.len()).unwrap_or(0);
    let bar = ProgressBar::new(length);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] importing {wide_bar} {bytes}/{total_bytes} ETA {eta}")
            .expect("valid progress template"),
    );
    let started = Instant::now();
    let result = (|| {
        let store = Store::open(dir, Options { create: Create::New, ..Options::default() })
            .with_context(|| format!("cannot create a store in {}", dir.display()))?;
        let summary = store.import_snapshot(&mut bar.wrap_read(BufReader::with_capacity(1 << 20, input)))?;
        bar.finish_and_clear();
        store.close()?;
        anyhow::Ok(summary)
    })();
    let summary = match result {
        Ok(summary) => summary,
        Err(e) => {
            remove_new_store(dir, existed);
            return Err(e.context(format!("import of {} failed; {} was left as it was", file.display(), dir.display())));
        }
    };
    outln!("imported commit {} into {} (every hash checked)", summary.commit, dir.display())?;
    print_summary(&summary, started.elapsed().as_secs_f64())?;
    Ok(())
}
