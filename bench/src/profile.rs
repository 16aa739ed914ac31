//! Where pando's time goes on a workload: a run of pando (its tree API on a
//! Tezos-like trace, flat keys on the random workload) under `perf record`,
//! enabled for the measured blocks only, with the store's own count of
//! system-call wall time.
//!
//! Method: the wall time of reads, writes and fsyncs is the store's own
//! measure (`Store::io_times`, around each system call). The rest of each
//! block's time is split by where `perf` found the CPU, outside those
//! system calls: every sample goes to one category, by its innermost frame
//! (or, in the kernel, by the system call or fault it serves). Samples are
//! a statistical estimate; the categories are listed in `CATEGORIES`.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::Command;

use crate::{Child, RunResult};

/// A category of CPU samples and the symbol fragments that select it,
/// tried in order on the innermost user frame.
const CATEGORIES: &[(&str, &[&str])] = &[
    ("hashing", &["blake2b", "tree::hash::", "ocaml_hash", "pando_core::hash"]),
    ("encoding, decoding, checksums", &["write_inode", "format::", "encode", "decode", "crc32c", "varint", "TreePatch"]),
    (
        "allocation, freeing",
        &["mi_", "malloc", "free", "drop_in_place", "drop_slow", "__rust_alloc", "__rust_dealloc", "realloc"],
    ),
    ("memory copies", &["memmove", "memcpy", "memset", "memcmp", "Clone>::clone", "extend"]),
    ("node cache", &["quick_cache", "pando_store::cache", "hashbrown"]),
    ("locking, once-cells", &["futex", "parking_lot", "Once", "Mutex", "RwLock", "lock_api"]),
    (
        "tree operations",
        &["pando_store::tree", "pando_store::node", "pando_store::store", "pando_store::pack", "pando_store::dict", "smallvec"],
    ),
    (
        "workload driver (trace, replay, timers)",
        &["pando_trace", "pando_core::trace", "pando_bench", "hdrhistogram", "clock_gettime", "workload"],
    ),
];

/// Kernel samples, by the first frame of their chain that matches, tried
/// from the innermost frame outwards.
const KERNEL: &[(&str, &[&str])] = &[
    ("fsync", &["sys_fdatasync", "sys_fsync", "ext4_sync_file"]),
    ("read", &["sys_pread64", "sys_read"]),
    ("write", &["sys_pwrite64", "sys_write"]),
    ("allocation, freeing", &["exc_page_fault", "sys_mmap", "sys_munmap", "sys_madvise", "sys_brk"]),
];

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Profile {
    pub workload: String,
    pub backend: String,
    pub blocks: u64,
    /// Mean wall time of a block, ms.
    pub block_ms: f64,
    /// (category, ms per block), largest first.
    pub split: Vec<(String, f64)>,
    pub samples: u64,
    /// The same run's figures.
    pub run: RunResult,
}

/// Sorts one sample (its frames, innermost first) into a category.
fn categorize(frames: &[(String, bool)]) -> &'static str {
    let kernel_end = frames.iter().position(|(_, kernel)| !kernel).unwrap_or(frames.len());
    for (name, fragments) in KERNEL {
        if frames[..kernel_end].iter().any(|(symbol, _)| fragments.iter().any(|f| symbol.contains(f))) {
            return name;
        }
    }
    if kernel_end > 0 {
        // Kernel work that is not a store system call: scheduling, timers.
        if frames[..kernel_end].iter().any(|(symbol, _)| symbol.contains("clock_gettime")) {
            return "workload driver (trace, replay, timers)";
        }
        return "kernel, other";
    }
    let Some((symbol, _)) = frames.first() else { return "other" };
    CATEGORIES.iter().find(|(_, fragments)| fragments.iter().any(|f| symbol.contains(f))).map_or("other", |(name, _)| name)
}

/// Counts the samples of `perf script` output by category.
fn count_samples(script: impl BufRead) -> anyhow::Result<BTreeMap<&'static str, u64>> {
    let mut counts = BTreeMap::new();
    let mut frames: Vec<(String, bool)> = Vec::new();
    let mut flush = |frames: &mut Vec<(String, bool)>| {
        if !frames.is_empty() {
            *counts.entry(categorize(frames)).or_insert(0) += 1;
            frames.clear();
        }
    };
    for line in script.lines() {
        let line = line?;
        let line = line.trim();
        if line.is_empty() {
            flush(&mut frames);
            continue;
        }
        // "<address> <symbol> (<dso>)"
        let Some((_, rest)) = line.split_once(' ') else { continue };
        let (symbol, dso) = rest.rsplit_once(" (").unwrap_or((rest, ""));
        frames.push((symbol.to_string(), dso.starts_with("[kernel")));
    }
    flush(&mut frames);
    Ok(counts)
}

fn mkfifo(path: &Path) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(path);
    let status = Command::new("mkfifo").arg(path).status().context("mkfifo")?;
    anyhow::ensure!(status.success(), "mkfifo {} failed", path.display());
    Ok(())
}

/// Sends a command to `perf record --control` and waits for its ack.
fn control(ctl: &mut std::fs::File, ack: &mut std::io::BufReader<std::fs::File>, command: &str) -> anyhow::Result<()> {
    writeln!(ctl, "{command}")?;
    ctl.flush()?;
    let mut line = String::new();
    ack.read_line(&mut line)?;
    // perf ends each ack with a NUL.
    anyhow::ensure!(line.trim_start_matches('\0').starts_with("ack"), "perf did not acknowledge {command:?}: {line:?}");
    Ok(())
}

/// Profiles pando on `workload` and writes `profile.json` in `out`.
pub fn run(workload: &str, blocks: Option<usize>, out: &Path) -> anyhow::Result<Profile> {
    std::fs::create_dir_all(out)?;
    let out = out.canonicalize()?;
    let trace = crate::prepare_trace(workload, &out)?;
    let backend = if trace.is_some() { "pando-tree" } else { "pando-flat" };
    let dir = out.join(format!("store-{backend}"));
    let _ = std::fs::remove_dir_all(&dir);
    let (ctl_path, ack_path, data) = (out.join("perf-ctl.fifo"), out.join("perf-ack.fifo"), out.join("perf.data"));
    mkfifo(&ctl_path)?;
    mkfifo(&ack_path)?;
    let mut perf = Command::new("perf");
    perf.args(["record", "--quiet", "-F", "999", "-g", "-D", "-1", "--control"])
        .arg(format!("fifo:{},{}", ctl_path.display(), ack_path.display()))
        .arg("-o")
        .arg(&data)
        .arg("--");
    eprintln!("profiling {backend} on {workload} under perf ...");
    let mut child = Child::spawn_with(Some(perf), workload, backend, blocks, &dir, trace.as_deref())?;
    let mut ctl = std::fs::OpenOptions::new().write(true).open(&ctl_path)?;
    let mut ack = std::io::BufReader::new(std::fs::File::open(&ack_path)?);
    control(&mut ctl, &mut ack, "enable")?;
    child.run(0)?;
    control(&mut ctl, &mut ack, "disable")?;
    drop((ctl, ack));
    let result = child.finish()?;
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&ctl_path);
    let _ = std::fs::remove_file(&ack_path);

    let script = Command::new("perf")
        .args(["script", "--no-inline", "-F", "ip,sym,dso", "-i"])
        .arg(&data)
        .stderr(std::process::Stdio::null())
        .output()
        .context("perf script")?;
    anyhow::ensure!(script.status.success(), "perf script failed");
    let counts = count_samples(std::io::Cursor::new(script.stdout))?;
    let _ = std::fs::remove_file(&data);

    let blocks = result.blocks.max(1) as f64;
    let block_ms = result.total_s * 1e3 / blocks;
    let io = result.io.unwrap_or_default();
    let io_ms = |ns: u64| ns as f64 / 1e6 / blocks;
    let mut split = vec![
        ("fsync (wall)".to_string(), io_ms(io.sync_ns)),
        ("read system calls (wall)".to_string(), io_ms(io.read_ns)),
        ("write system calls (wall)".to_string(), io_ms(io.write_ns)),
    ];
    // The rest of the block's time, split by the CPU samples outside those calls.
    let rest = (block_ms - split.iter().map(|s| s.1).sum::<f64>()).max(0.0);
    let cpu: u64 = counts.iter().filter(|(c, _)| !matches!(**c, "fsync" | "read" | "write")).map(|(_, n)| n).sum();
    for (category, n) in counts.iter().filter(|(c, _)| !matches!(**c, "fsync" | "read" | "write")) {
        split.push((category.to_string(), rest * *n as f64 / cpu.max(1) as f64));
    }
    split.sort_by(|a, b| b.1.total_cmp(&a.1));
    let profile = Profile {
        workload: workload.to_string(),
        backend: backend.to_string(),
        blocks: result.blocks,
        block_ms,
        split,
        samples: counts.values().sum(),
        run: result,
    };
    std::fs::write(out.join("profile.json"), serde_json::to_vec_pretty(&profile)?)?;
    print(&profile);
    Ok(profile)
}

pub fn print(profile: &Profile) {
    println!(
        "where {}'s time goes on {} ({} blocks, mean {:.2} ms per block, {} CPU samples):",
        profile.backend, profile.workload, profile.blocks, profile.block_ms, profile.samples
    );
    for (category, ms) in &profile.split {
        println!("  {category:<42} {ms:>8.3} ms  {:>5.1}%", 100.0 * ms / profile.block_ms.max(1e-9));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_sorted_by_innermost_frame_and_system_call() {
        let script = "\
\tffffffff8100 clear_page_erms ([kernel.kallsyms])
\tffffffff8101 exc_page_fault ([kernel.kallsyms])
\t32ba16 mi_page_free_list_extend (/bench)

\tffffffff8100 iowrite16 ([kernel.kallsyms])
\tffffffff8102 ext4_sync_file ([kernel.kallsyms])
\tffffffff8103 __x64_sys_fdatasync ([kernel.kallsyms])
\t1234 fdatasync (/libc.so.6)

\t1234 blake2b_simd::avx2::compress1_loop (/bench)
\t1235 pando_store::tree::hash::dir_hash (/bench)

\t1234 blake2b_simd::avx2::compress1_loop (/bench)

\t99 something_unknown (/bench)
";
        let counts = count_samples(std::io::Cursor::new(script)).unwrap();
        assert_eq!(counts.get("hashing"), Some(&2));
        assert_eq!(counts.get("fsync"), Some(&1));
        assert_eq!(counts.get("allocation, freeing"), Some(&1));
        assert_eq!(counts.get("other"), Some(&1));
        assert_eq!(counts.values().sum::<u64>(), 5);
    }
}
