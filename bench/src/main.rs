//! pando-bench: one workload on pando and its peers, side by side.
//!
//! `pando-bench run --workload tezos:small --backends pando-tree,pando-flat,nomt,redb`
//! runs each backend in a child process of its own (clean memory and I/O
//! counters), then prints a table with every figure's ratio to pando, and
//! the floor: BLAKE2b over the bytes pando wrote per block plus one fsync.

mod backend;
mod iavl;
mod radix;
mod rocks;
mod workload;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use backend::Backend;
use workload::{Block, Op, RandomWorkload};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "pando-bench", about = "The same workload on pando and its peers, side by side")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a workload on every backend in turn and print the table.
    Run {
        /// `tezos:<preset>[:seed]` or `random:<existing keys>[:updates per block]`.
        #[arg(long, default_value = "tezos:tiny")]
        workload: String,
        /// Comma-separated: pando-tree, pando-flat, nomt, jmt, iavl, rocksdb, redb.
        #[arg(long, default_value = "pando-tree,pando-flat,nomt,jmt,iavl,rocksdb,redb")]
        backends: String,
        /// Blocks to run (after loading, for the random workload).
        #[arg(long)]
        blocks: Option<usize>,
        /// Directory for the stores and the results.
        #[arg(long, default_value = "bench-results")]
        out: PathBuf,
    },
    /// Prints the table again from the results a `run` saved in DIR.
    Report {
        #[arg(long, default_value = "bench-results")]
        out: PathBuf,
    },
    /// RChain's RadixHistory table, reproduced on pando.
    Radix {
        #[arg(long, default_value = "bench-results")]
        out: PathBuf,
    },
    /// Run one backend (used by `run`, in a child process); prints JSON.
    One {
        #[arg(long)]
        workload: String,
        #[arg(long)]
        backend: String,
        #[arg(long)]
        blocks: Option<usize>,
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        trace: Option<PathBuf>,
    },
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Stats {
    mean: f64,
    p50: f64,
    p99: f64,
    max: f64,
}

impl Stats {
    fn of(values_us: &[u64]) -> Stats {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds");
        for &v in values_us {
            h.record(v.clamp(1, 3_600_000_000)).expect("within bounds");
        }
        if h.is_empty() {
            return Stats::default();
        }
        let ms = |v: u64| v as f64 / 1000.0;
        Stats { mean: h.mean() / 1000.0, p50: ms(h.value_at_quantile(0.5)), p99: ms(h.value_at_quantile(0.99)), max: ms(h.max()) }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct RunResult {
    backend: String,
    workload: String,
    blocks: u64,
    reads: u64,
    writes: u64,
    total_s: f64,
    load_s: f64,
    block_ms: Stats,
    commit_ms: Stats,
    bytes_written: u64,
    disk_bytes: u64,
    peak_rss_bytes: u64,
    /// Bytes written per block (for the floor).
    written_per_block: Vec<u64>,
}

fn proc_io_write_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|t| t.lines().find(|l| l.starts_with("wchar:")).and_then(|l| l[6..].trim().parse().ok()))
        .unwrap_or(0)
}

fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()))
        })
        .map_or(0, |kb| kb * 1024)
}

/// The blocks of a workload, for the flat backends: (loading blocks, measured blocks).
fn flat_workload(workload: &str, trace: Option<&Path>, blocks: Option<usize>) -> anyhow::Result<(Vec<Block>, Vec<Block>)> {
    let parts: Vec<&str> = workload.split(':').collect();
    match parts.as_slice() {
        ["tezos", ..] => {
            let trace = trace.context("a tezos workload needs its trace")?;
            Ok((Vec::new(), workload::flat_blocks(trace, blocks)?))
        }
        ["random", existing, rest @ ..] => {
            let existing: usize = existing.parse().context("random:<existing keys>")?;
            let updates: usize = rest.first().map_or(Ok(10_000), |u| u.parse()).context("random:<keys>:<updates>")?;
            let mut w = RandomWorkload::new(7, existing, updates);
            let load = w.load_blocks(100_000);
            let measured = (0..blocks.unwrap_or(50)).map(|_| w.next_block()).collect();
            Ok((load, measured))
        }
        _ => bail!("unknown workload {workload:?}: tezos:<preset>[:seed] or random:<keys>[:<updates>]"),
    }
}

fn count(blocks: &[Block]) -> (u64, u64) {
    let reads = blocks.iter().flatten().filter(|op| matches!(op, Op::Read(_))).count() as u64;
    let ops: u64 = blocks.iter().map(|b| b.len() as u64).sum();
    (reads, ops - reads)
}

fn run_one(workload: &str, backend: &str, blocks: Option<usize>, dir: &Path, trace: Option<&Path>) -> anyhow::Result<RunResult> {
    let mut result = RunResult { backend: backend.to_string(), workload: workload.to_string(), ..RunResult::default() };
    let mut block_us = Vec::new();
    let mut commit_us = Vec::new();
    let mut external = None;
    let io_start = proc_io_write_bytes();
    if backend == "pando-tree" {
        // The trace itself, through pando's tree API.
        let trace = trace.context("pando-tree runs the tezos workloads only")?;
        let store = pando_store::Store::open(dir, pando_store::Options::default())?;
        let mut replayer = pando_trace::replay::Replayer::new(&store);
        let start = Instant::now();
        let mut last_io = proc_io_write_bytes();
        for row in pando_trace::TraceReader::open(trace)? {
            if let pando_trace::replay::Applied::Block(sample) = replayer.apply(row?)? {
                block_us.push(sample.wall_us);
                commit_us.push(sample.commit_us);
                let io = proc_io_write_bytes();
                result.written_per_block.push(io - last_io);
                last_io = io;
                if blocks.is_some_and(|b| block_us.len() >= b) {
                    break;
                }
            }
        }
        result.total_s = start.elapsed().as_secs_f64();
        anyhow::ensure!(replayer.checks.all_passed(), "replay checks failed: {:?}", replayer.checks);
        result.reads = replayer.checks.reads_checked;
        result.writes = replayer.rows() - result.reads;
        result.disk_bytes = backend::dir_bytes(dir);
    } else {
        let (load, measured) = flat_workload(workload, trace, blocks)?;
        let (reads, writes) = count(&measured);
        result.reads = reads;
        result.writes = writes;
        let mut store: Box<dyn Backend> = match backend {
            "pando-flat" => Box::new(backend::PandoFlat::open(dir)?),
            // NOMT's default is 64,000 buckets; large key sets need more.
            "nomt" => Box::new(backend::NomtBackend::open(dir, (load.len() as u32 * 100_000 / 8).max(64_000))?),
            "redb" => Box::new(backend::RedbBackend::open(dir)?),
            "jmt" => Box::new(rocks::JmtBackend::open(dir)?),
            "rocksdb" => Box::new(rocks::RocksBackend::open(dir)?),
            "iavl" => Box::new(iavl::IavlBackend::open(dir)?),
            other => bail!("unknown backend {other}"),
        };
        let start = Instant::now();
        for block in &load {
            store.apply(block)?;
        }
        result.load_s = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let mut last_io = proc_io_write_bytes();
        for block in &measured {
            let t = Instant::now();
            let commit = store.apply(block)?;
            block_us.push(t.elapsed().as_micros() as u64);
            commit_us.push(commit.as_micros() as u64);
            let io = proc_io_write_bytes();
            result.written_per_block.push(io - last_io);
            last_io = io;
        }
        result.total_s = start.elapsed().as_secs_f64();
        result.disk_bytes = store.disk_bytes();
        external = store.process_figures();
    }
    result.blocks = block_us.len() as u64;
    result.block_ms = Stats::of(&block_us);
    result.commit_ms = Stats::of(&commit_us);
    result.bytes_written = proc_io_write_bytes() - io_start;
    result.peak_rss_bytes = peak_rss();
    // A store in another process (IAVL): its own writes; both processes' memory.
    if let Some((written, rss)) = external {
        result.bytes_written = written;
        result.peak_rss_bytes += rss;
    }
    Ok(result)
}

/// The floor of one block: BLAKE2b over `bytes` in messages of 128 bytes
/// (about one node each) and one fsync of that many bytes.
fn floor_block(bytes: u64, scratch: &Path) -> anyhow::Result<Duration> {
    use std::io::Write;
    let data = vec![0x5au8; bytes as usize];
    let start = Instant::now();
    for chunk in data.chunks(128) {
        std::hint::black_box(pando_core::Hash::of_bytes(chunk));
    }
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(scratch)?;
    file.write_all(&data)?;
    file.sync_data()?;
    Ok(start.elapsed())
}

fn ratio(pando: f64, peer: f64) -> String {
    if pando == 0.0 || peer == 0.0 { "-".into() } else { format!("{:.2}x", peer / pando) }
}

fn human(bytes: f64) -> String {
    if bytes >= 1e9 {
        format!("{:.2} GB", bytes / 1e9)
    } else if bytes >= 1e6 {
        format!("{:.1} MB", bytes / 1e6)
    } else {
        format!("{:.0} KB", bytes / 1e3)
    }
}

fn run(workload: &str, backends: &str, blocks: Option<usize>, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    let out = out.canonicalize()?;
    let trace = match workload.split(':').collect::<Vec<_>>().as_slice() {
        ["tezos", preset, rest @ ..] => {
            let preset = pando_trace::generate::Preset::named(preset).context("unknown preset")?;
            let seed: u64 = rest.first().map_or(Ok(1), |s| s.parse())?;
            let path = out.join(format!("{}-{seed}.repr", preset.name));
            let mut writer = pando_trace::TraceWriter::create(&path)?;
            pando_trace::generate::Generator::new(preset, seed).run(&mut |row| writer.append(row))?;
            writer.finish()?;
            Some(path)
        }
        _ => None,
    };
    let mut results: Vec<RunResult> = Vec::new();
    for backend in backends.split(',').map(str::trim).filter(|b| !b.is_empty()) {
        if backend == "pando-tree" && trace.is_none() {
            continue;
        }
        let dir = out.join(format!("store-{backend}"));
        let _ = std::fs::remove_dir_all(&dir);
        let mut command = Command::new(std::env::current_exe()?);
        command.args(["one", "--workload", workload, "--backend", backend, "--dir"]).arg(&dir);
        if let Some(trace) = &trace {
            command.arg("--trace").arg(trace);
        }
        if let Some(b) = blocks {
            command.args(["--blocks", &b.to_string()]);
        }
        eprintln!("running {backend} on {workload} ...");
        let output = command.output()?;
        if !output.status.success() {
            bail!("{backend} failed: {}", String::from_utf8_lossy(&output.stderr));
        }
        // Saved at once, so a long run keeps what it finished.
        std::fs::write(out.join(format!("result-{backend}.json")), &output.stdout)?;
        let result: RunResult = serde_json::from_slice(&output.stdout)?;
        eprintln!("  {backend}: {} blocks in {:.1} s, commit p99 {:.2} ms", result.blocks, result.total_s, result.commit_ms.p99);
        results.push(result);
        let _ = std::fs::remove_dir_all(&dir);
    }
    report(workload, &results, &out)
}

/// Prints the table of `results` (and the floor, measured now) and writes
/// results.json in `out`.
fn report(workload: &str, results: &[RunResult], out: &Path) -> anyhow::Result<()> {
    let pando = results.iter().find(|r| r.backend.starts_with("pando")).cloned().unwrap_or_default();

    // The floor, measured now on the same machine: hash what pando wrote, fsync once.
    let scratch = out.join("floor.tmp");
    // Genesis (block 0) writes the whole initial state: it is left out here
    // and medians are compared, so one huge block does not set the floor.
    let rest = pando.written_per_block.get(1..).unwrap_or(&[]);
    let sample: Vec<u64> = rest.iter().step_by((rest.len() / 200).max(1)).copied().collect();
    let mut floor_us = Vec::new();
    for &bytes in &sample {
        floor_us.push(floor_block(bytes, &scratch)?.as_micros() as u64);
    }
    let _ = std::fs::remove_file(&scratch);
    let floor = Stats::of(&floor_us);

    println!("workload {workload}: {} measured blocks per backend, fsync per commit", pando.blocks);
    println!(
        "{:<11} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10}",
        "backend",
        "blocks/s",
        "ratio",
        "updates/s",
        "reads/s",
        "commit50",
        "commit99",
        "commitmax",
        "written",
        "disk",
        "peak RSS"
    );
    for r in results {
        let bps = r.blocks as f64 / r.total_s.max(1e-9);
        println!(
            "{:<11} {:>10.1} {:>10} {:>10.0} {:>10.0} {:>8.2}ms {:>8.2}ms {:>8.1}ms {:>10} {:>10} {:>10}",
            r.backend,
            bps,
            ratio(pando.blocks as f64 / pando.total_s.max(1e-9), bps),
            r.writes as f64 / r.total_s.max(1e-9),
            r.reads as f64 / r.total_s.max(1e-9),
            r.commit_ms.p50,
            r.commit_ms.p99,
            r.commit_ms.max,
            human(r.bytes_written as f64),
            human(r.disk_bytes as f64),
            human(r.peak_rss_bytes as f64),
        );
    }
    println!(
        "floor (BLAKE2b over the bytes {} wrote per block, one fsync; genesis left out): median {:.2} ms per block; \
         {}'s median block takes {:.2} ms, {:.1}x the floor",
        pando.backend,
        floor.p50,
        pando.backend,
        pando.block_ms.p50,
        pando.block_ms.p50 / floor.p50.max(1e-9)
    );
    let json = out.join("results.json");
    std::fs::write(
        &json,
        serde_json::to_vec_pretty(&serde_json::json!({ "workload": workload, "floor_ms": floor, "results": results }))?,
    )?;
    println!("results: {}", json.display());
    Ok(())
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Cmd::Run { workload, backends, blocks, out } => run(&workload, &backends, blocks, &out),
        Cmd::Report { out } => {
            let mut results = Vec::new();
            let order = ["pando-tree", "pando-flat", "nomt", "jmt", "iavl", "rocksdb", "redb"];
            for backend in order {
                if let Ok(bytes) = std::fs::read(out.join(format!("result-{backend}.json"))) {
                    results.push(serde_json::from_slice::<RunResult>(&bytes)?);
                }
            }
            let workload = results.first().map(|r| r.workload.clone()).context("no results in that directory")?;
            report(&workload, &results, &out)
        }
        Cmd::Radix { out } => {
            std::fs::create_dir_all(&out)?;
            radix::run(&out)
        }
        Cmd::One { workload, backend, blocks, dir, trace } => {
            let result = run_one(&workload, &backend, blocks, &dir, trace.as_deref())?;
            println!("{}", serde_json::to_string(&result)?);
            Ok(())
        }
    }
}
