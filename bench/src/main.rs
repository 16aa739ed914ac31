//! pando-bench: one workload on pando and its peers, side by side.
//!
//! `pando-bench run --workload tezos:small --backends pando-tree,pando-flat,nomt,redb`
//! runs each backend in a child process of its own (clean memory and I/O
//! counters), then prints a table with every figure's ratio to pando, and
//! the floor: BLAKE2b over the bytes pando wrote per block plus one fsync.

mod backend;
mod html;
mod iavl;
mod profile;
mod radix;
#[cfg(feature = "rocksdb")]
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
use pando_store::io::IoTimes;
use pando_trace::replay::metrics::{ProcIo, peak_rss_bytes};
use pando_trace::report::human_bytes;
use workload::{Op, RandomWorkload};

/// Every backend, in the order of the table (jmt and rocksdb with the
/// `rocksdb` feature, on by default).
#[cfg(feature = "rocksdb")]
const BACKENDS: &str = "pando-tree,pando-flat,nomt,jmt,iavl,iavl2,rocksdb,redb";
#[cfg(not(feature = "rocksdb"))]
const BACKENDS: &str = "pando-tree,pando-flat,nomt,iavl,iavl2,redb";

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
        /// Comma-separated, from: pando-tree, pando-flat, nomt, jmt, iavl, iavl2, rocksdb, redb.
        #[arg(long, default_value = BACKENDS)]
        backends: String,
        /// Blocks to run (after loading, for the random workload).
        #[arg(long)]
        blocks: Option<usize>,
        /// Interleave the backends, in turns of this many blocks.
        #[arg(long)]
        interleave: Option<usize>,
        /// Directory for the stores and the results.
        #[arg(long, default_value = "bench-results")]
        out: PathBuf,
    },
    /// Prints the table again from the results a `run` saved in DIR.
    Report {
        #[arg(long, default_value = "bench-results")]
        out: PathBuf,
    },
    /// Where pando's time goes on a workload (runs it under `perf record`).
    Profile {
        #[arg(long, default_value = "tezos:small")]
        workload: String,
        #[arg(long)]
        blocks: Option<usize>,
        #[arg(long, default_value = "bench-results")]
        out: PathBuf,
    },
    /// RChain's RadixHistory table, reproduced on pando.
    Radix {
        #[arg(long, default_value = "bench-results")]
        out: PathBuf,
    },
    /// Serve one backend to `run`, in a child process (see `drive`).
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
    /// Wall time of each block, µs.
    #[serde(default)]
    block_us: Vec<u64>,
    /// pando's system calls during the measured blocks.
    #[serde(default)]
    io: Option<Io>,
}

impl RunResult {
    fn blocks_per_s(&self) -> f64 {
        self.blocks as f64 / self.total_s.max(1e-9)
    }
    fn updates_per_s(&self) -> f64 {
        self.writes as f64 / self.total_s.max(1e-9)
    }
    fn reads_per_s(&self) -> f64 {
        self.reads as f64 / self.total_s.max(1e-9)
    }
}

/// `pando_store::io::IoTimes`, as saved in the results.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Io {
    reads: u64,
    read_ns: u64,
    writes: u64,
    write_bytes: u64,
    write_ns: u64,
    syncs: u64,
    sync_ns: u64,
}

impl Io {
    /// What happened between `before` and `after`.
    fn between(before: IoTimes, after: IoTimes) -> Io {
        Io {
            reads: after.reads - before.reads,
            read_ns: after.read_ns - before.read_ns,
            writes: after.writes - before.writes,
            write_bytes: after.write_bytes - before.write_bytes,
            write_ns: after.write_ns - before.write_ns,
            syncs: after.syncs - before.syncs,
            sync_ns: after.sync_ns - before.sync_ns,
        }
    }
}

fn proc_io_write_bytes() -> u64 {
    ProcIo::now().write_bytes
}

/// What a child measures as it applies blocks.
#[derive(Default)]
struct Meter {
    block_us: Vec<u64>,
    commit_us: Vec<u64>,
    written_per_block: Vec<u64>,
    /// Time spent applying measured blocks (not waiting for the parent).
    running: Duration,
    last_io: u64,
}

impl Meter {
    fn block(&mut self, wall: Duration, commit: Duration) {
        self.block_us.push(wall.as_micros() as u64);
        self.commit_us.push(commit.as_micros() as u64);
        let io = proc_io_write_bytes();
        self.written_per_block.push(io - self.last_io);
        self.last_io = io;
    }
}

/// Answers the parent's commands on standard input, after printing `ready`:
/// `run K` applies up to K more blocks (0: all that remain) with `step`
/// and answers `done N`; `finish` (or the end of input) returns.
/// `step` applies one block and returns false when the workload is exhausted.
fn drive(limit: Option<usize>, mut step: impl FnMut(&mut Meter) -> anyhow::Result<bool>) -> anyhow::Result<Meter> {
    use std::io::{BufRead, Write};
    let mut meter = Meter { last_io: proc_io_write_bytes(), ..Meter::default() };
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    let mut exhausted = false;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let Some(k) = line.strip_prefix("run ") else { break };
        let k: usize = k.trim().parse().context("run <blocks>")?;
        let start = Instant::now();
        let mut n = 0;
        while !exhausted && (k == 0 || n < k) {
            if limit.is_some_and(|l| meter.block_us.len() >= l) || !step(&mut meter)? {
                exhausted = true;
            } else {
                n += 1;
            }
        }
        meter.running += start.elapsed();
        writeln!(out, "done {n}")?;
        out.flush()?;
    }
    Ok(meter)
}

/// The child's side of a run: opens `backend` in `dir`, loads the
/// workload's initial keys (not measured), then applies blocks as the
/// parent asks (see `drive`) and prints its `RunResult` as JSON.
fn serve(workload: &str, backend: &str, blocks: Option<usize>, dir: &Path, trace: Option<&Path>) -> anyhow::Result<RunResult> {
    let mut result = RunResult { backend: backend.to_string(), workload: workload.to_string(), ..RunResult::default() };
    let io_start = proc_io_write_bytes();
    let mut external = None;
    let meter = if backend == "pando-tree" {
        // The trace itself, through pando's tree API, every recorded read checked.
        let trace = trace.context("pando-tree runs the tezos workloads only")?;
        let store = pando_store::Store::open(dir, pando_store::Options::default())?;
        let mut replayer = pando_trace::replay::Replayer::new(&store);
        let mut rows = pando_trace::TraceReader::open(trace)?;
        let io_before = store.io_times().unwrap_or_default();
        let meter = drive(blocks, |meter| {
            for row in rows.by_ref() {
                if let pando_trace::replay::Applied::Block(sample) = replayer.apply(row?)? {
                    meter.block(Duration::from_micros(sample.wall_us), Duration::from_micros(sample.commit_us));
                    return Ok(true);
                }
            }
            Ok(false)
        })?;
        result.io = store.io_times().map(|after| Io::between(io_before, after));
        anyhow::ensure!(replayer.checks.all_passed(), "replay checks failed: {:?}", replayer.checks);
        result.reads = replayer.checks.reads_checked;
        result.writes = replayer.rows() - result.reads;
        result.disk_bytes = backend::dir_bytes(dir);
        meter
    } else {
        let parts: Vec<&str> = workload.split(':').collect();
        let (mut source, existing) = match parts.as_slice() {
            ["tezos", ..] => (workload::Blocks::trace(trace.context("a tezos workload needs its trace")?)?, 0),
            ["random", existing, rest @ ..] => {
                let existing: usize = existing.parse().context("random:<existing keys>")?;
                let updates: usize = rest.first().map_or(Ok(10_000), |u| u.parse()).context("random:<keys>:<updates>")?;
                (workload::Blocks::Random(Box::new(RandomWorkload::new(7, existing, updates))), existing)
            }
            _ => bail!("unknown workload {workload:?}: tezos:<preset>[:seed] or random:<keys>[:<updates>]"),
        };
        let mut store: Box<dyn Backend> = match backend {
            "pando-flat" => Box::new(backend::PandoFlat::open(dir)?),
            // NOMT's default is 64,000 buckets; large key sets need more.
            "nomt" => Box::new(backend::NomtBackend::open(dir, (existing as u32 / 8).max(64_000))?),
            "redb" => Box::new(backend::RedbBackend::open(dir)?),
            #[cfg(feature = "rocksdb")]
            "jmt" => Box::new(rocks::JmtBackend::open(dir)?),
            #[cfg(feature = "rocksdb")]
            "rocksdb" => Box::new(rocks::RocksBackend::open(dir)?),
            #[cfg(not(feature = "rocksdb"))]
            "jmt" | "rocksdb" => bail!("backend {backend} needs pando-bench's `rocksdb` feature (on by default)"),
            "iavl" => Box::new(iavl::IavlBackend::open(dir, iavl::Version::V1)?),
            "iavl2" => Box::new(iavl::IavlBackend::open(dir, iavl::Version::V2)?),
            other => bail!("unknown backend {other}"),
        };
        let start = Instant::now();
        if let workload::Blocks::Random(random) = &mut source {
            while let Some(block) = random.load_block(100_000) {
                store.apply(&block)?;
            }
        }
        result.load_s = start.elapsed().as_secs_f64();
        let (mut reads, mut writes) = (0, 0);
        let limit = blocks.or(matches!(source, workload::Blocks::Random(_)).then_some(50));
        let io_before = store.io_times();
        let meter = drive(limit, |meter| {
            let Some(block) = source.next_block()? else { return Ok(false) };
            let read = block.iter().filter(|op| matches!(op, Op::Read(_))).count() as u64;
            reads += read;
            writes += block.len() as u64 - read;
            let t = Instant::now();
            let commit = store.apply(&block)?;
            meter.block(t.elapsed(), commit);
            Ok(true)
        })?;
        (result.reads, result.writes) = (reads, writes);
        result.disk_bytes = store.disk_bytes();
        external = store.process_figures();
        result.io = io_before.zip(store.io_times()).map(|(before, after)| Io::between(before, after));
        meter
    };
    result.blocks = meter.block_us.len() as u64;
    result.total_s = meter.running.as_secs_f64();
    result.block_ms = Stats::of(&meter.block_us);
    result.commit_ms = Stats::of(&meter.commit_us);
    result.written_per_block = meter.written_per_block;
    result.block_us = meter.block_us;
    result.bytes_written = proc_io_write_bytes() - io_start;
    result.peak_rss_bytes = peak_rss_bytes("self");
    // A store in another process (IAVL): its own writes; both processes' memory.
    if let Some((written, rss)) = external {
        result.bytes_written = written;
        result.peak_rss_bytes += rss;
    }
    Ok(result)
}

/// A backend running in a child process of its own (see `drive`).
struct Child {
    name: String,
    process: std::process::Child,
    input: std::process::ChildStdin,
    output: std::io::BufReader<std::process::ChildStdout>,
}

impl Child {
    /// Starts the child and waits until it has loaded its initial keys.
    fn spawn(workload: &str, backend: &str, blocks: Option<usize>, dir: &Path, trace: Option<&Path>) -> anyhow::Result<Child> {
        Child::spawn_with(None, workload, backend, blocks, dir, trace)
    }

    /// The same, run by `wrapper` (such as `perf record ... --`).
    fn spawn_with(
        wrapper: Option<Command>,
        workload: &str,
        backend: &str,
        blocks: Option<usize>,
        dir: &Path,
        trace: Option<&Path>,
    ) -> anyhow::Result<Child> {
        use std::process::Stdio;
        let mut command = match wrapper {
            Some(mut wrapper) => {
                wrapper.arg(std::env::current_exe()?);
                wrapper
            }
            None => Command::new(std::env::current_exe()?),
        };
        command.args(["one", "--workload", workload, "--backend", backend, "--dir"]).arg(dir);
        if let Some(trace) = trace {
            command.arg("--trace").arg(trace);
        }
        if let Some(b) = blocks {
            command.args(["--blocks", &b.to_string()]);
        }
        let mut process = command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
        let input = process.stdin.take().context("stdin")?;
        let output = std::io::BufReader::new(process.stdout.take().context("stdout")?);
        let mut child = Child { name: backend.to_string(), process, input, output };
        child.expect("ready")?;
        Ok(child)
    }

    fn line(&mut self) -> anyhow::Result<String> {
        use std::io::BufRead;
        let mut line = String::new();
        if self.output.read_line(&mut line)? == 0 {
            bail!("{} stopped (its error is printed above)", self.name);
        }
        Ok(line.trim_end().to_string())
    }

    fn expect(&mut self, word: &str) -> anyhow::Result<()> {
        let line = self.line()?;
        anyhow::ensure!(line == word, "{}: expected {word:?}, got {line:?}", self.name);
        Ok(())
    }

    /// Applies up to `k` more blocks (0: all); returns how many it applied.
    fn run(&mut self, k: usize) -> anyhow::Result<usize> {
        use std::io::Write;
        writeln!(self.input, "run {k}")?;
        self.input.flush()?;
        let line = self.line()?;
        line.strip_prefix("done ").and_then(|n| n.parse().ok()).with_context(|| format!("{}: unexpected {line:?}", self.name))
    }

    fn finish(mut self) -> anyhow::Result<RunResult> {
        use std::io::Write;
        writeln!(self.input, "finish")?;
        self.input.flush()?;
        let json = self.line()?;
        let status = self.process.wait()?;
        anyhow::ensure!(status.success(), "{} exited with {status}", self.name);
        Ok(serde_json::from_str(&json)?)
    }
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

/// For a `tezos:<preset>[:seed]` workload, generates its trace in `out`.
fn prepare_trace(workload: &str, out: &Path) -> anyhow::Result<Option<PathBuf>> {
    let parts: Vec<&str> = workload.split(':').collect();
    let ["tezos", preset, rest @ ..] = parts.as_slice() else { return Ok(None) };
    let preset = pando_trace::generate::Preset::named(preset).context("unknown preset")?;
    let seed: u64 = rest.first().map_or(Ok(1), |s| s.parse())?;
    let path = out.join(format!("{}-{seed}.repr", preset.name));
    let mut writer = pando_trace::TraceWriter::create(&path)?;
    pando_trace::generate::Generator::new(preset, seed).run(&mut |row| writer.append(row))?;
    writer.finish()?;
    Ok(Some(path))
}

/// Runs `workload` on each backend, each in a child process on a fresh
/// directory. With `interleave`, every child is started (and loaded) first,
/// then they take turns of that many blocks, so a change in the machine's
/// load falls on all of them alike; otherwise they run one after another.
fn run(workload: &str, backends: &str, blocks: Option<usize>, interleave: Option<usize>, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    let out = out.canonicalize()?;
    let trace = prepare_trace(workload, &out)?;
    let backends: Vec<&str> =
        backends.split(',').map(str::trim).filter(|b| !b.is_empty() && (*b != "pando-tree" || trace.is_some())).collect();
    let store_dir = |backend: &str| out.join(format!("store-{backend}"));
    let spawn = |backend: &str| -> anyhow::Result<Child> {
        let _ = std::fs::remove_dir_all(store_dir(backend));
        eprintln!("starting {backend} on {workload} ...");
        Child::spawn(workload, backend, blocks, &store_dir(backend), trace.as_deref())
    };
    // Saved at once, so a long run keeps what it finished.
    let save = |child: Child| -> anyhow::Result<RunResult> {
        let name = child.name.clone();
        let result = child.finish()?;
        std::fs::write(out.join(format!("result-{name}.json")), serde_json::to_vec(&result)?)?;
        eprintln!("  {name}: {} blocks in {:.1} s, commit p99 {:.2} ms", result.blocks, result.total_s, result.commit_ms.p99);
        let _ = std::fs::remove_dir_all(store_dir(&name));
        Ok(result)
    };
    let mut results = Vec::new();
    match interleave {
        Some(turn) => {
            let mut children = backends.iter().map(|b| spawn(b)).collect::<anyhow::Result<Vec<_>>>()?;
            let mut active = vec![true; children.len()];
            let mut round = 0;
            while active.iter().any(|a| *a) {
                for (child, active) in children.iter_mut().zip(&mut active).filter(|(_, a)| **a) {
                    *active = child.run(turn.max(1))? > 0;
                }
                round += 1;
                if round % 10 == 0 {
                    eprintln!("  {} blocks per backend", round * turn);
                }
            }
            for child in children {
                results.push(save(child)?);
            }
        }
        None => {
            for backend in &backends {
                let mut child = spawn(backend)?;
                child.run(0)?;
                results.push(save(child)?);
            }
        }
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
        let bps = r.blocks_per_s();
        println!(
            "{:<11} {:>10.1} {:>10} {:>10.0} {:>10.0} {:>8.2}ms {:>8.2}ms {:>8.1}ms {:>10} {:>10} {:>10}",
            r.backend,
            bps,
            ratio(pando.blocks_per_s(), bps),
            r.updates_per_s(),
            r.reads_per_s(),
            r.commit_ms.p50,
            r.commit_ms.p99,
            r.commit_ms.max,
            human_bytes(r.bytes_written as f64),
            human_bytes(r.disk_bytes as f64),
            human_bytes(r.peak_rss_bytes as f64),
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
    // A profile taken in the same directory, of the same workload, joins the page.
    let profile: Option<profile::Profile> = std::fs::read(out.join("profile.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .filter(|p: &profile::Profile| p.workload == workload);
    if let Some(profile) = &profile {
        profile::print(profile);
    }
    let page = out.join("report.html");
    std::fs::write(&page, html::render(workload, results, &floor, profile.as_ref()))?;
    println!("page: {}", page.display());
    Ok(())
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Cmd::Run { workload, backends, blocks, interleave, out } => run(&workload, &backends, blocks, interleave, &out),
        Cmd::Report { out } => {
            let mut results = Vec::new();
            for backend in BACKENDS.split(',') {
                if let Ok(bytes) = std::fs::read(out.join(format!("result-{backend}.json"))) {
                    results.push(serde_json::from_slice::<RunResult>(&bytes)?);
                }
            }
            let workload = results.first().map(|r| r.workload.clone()).context("no results in that directory")?;
            report(&workload, &results, &out)
        }
        Cmd::Profile { workload, blocks, out } => profile::run(&workload, blocks, &out).map(drop),
        Cmd::Radix { out } => {
            std::fs::create_dir_all(&out)?;
            radix::run(&out)
        }
        Cmd::One { workload, backend, blocks, dir, trace } => {
            let result = serve(&workload, &backend, blocks, &dir, trace.as_deref())?;
            println!("{}", serde_json::to_string(&result)?);
            Ok(())
        }
    }
}
