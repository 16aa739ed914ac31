//! The `pando` command: create and inspect pando stores.
//!
//! Boundary: argument parsing and printing only; everything it does goes
//! through the `pando-store` library.

#![forbid(unsafe_code)]

/// `println!` that returns the write's error instead of panicking: a
/// reader that goes away (`pando log | head -1`) ends the command quietly
/// (see `main`), with destructors run (a replay's temporary directory). A
/// command whose exit status is a verdict prints with `outln_or_gone!`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// `print!` that returns the write's error (see `outln!`).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// `outln!` for a command whose exit status says more than that it
/// printed (a check's verdict, a replay's agreement, a repair or an import
/// done): a reader that goes away (`pando check | head -1`) stops the
/// printing, not the command, which ends with its own status.
macro_rules! outln_or_gone {
    ($($arg:tt)*) => {
        $crate::unless_gone(outln!($($arg)*))
    };
}

/// `out!` as `outln_or_gone!` prints.
macro_rules! out_or_gone {
    ($($arg:tt)*) => {
        $crate::unless_gone(out!($($arg)*))
    };
}

/// `eprintln!` that cannot panic: when standard error is closed too there
/// is nowhere left to say anything, so a failed write is dropped.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

mod commands;
mod progress;
mod scratch;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// pando: a versioned Merkle key-value store, bit-exact with the Tezos
/// context hash.
#[derive(Parser)]
#[command(name = "pando", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create an empty store in DIR (which must be empty or absent).
    Init {
        /// Directory of the new store.
        dir: PathBuf,
        /// The layout of its tries: `tezos` (an L1 node's context) or
        /// `tezos-binary` (a smart rollup node's or Etherlink's, Octez's
        /// `Context_binary`). Recorded in the store and checked at every open.
        #[arg(long, default_value = "tezos", value_parser = commands::parse_layout)]
        layout: pando_core::inode::Layout,
    },
    /// Commits, branches, last commit and file sizes of a store.
    Info {
        #[command(flatten)]
        store: commands::StoreArg,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Audit a store: records by kind, contents and directory sizes,
    /// dictionary use, bytes per commit, and (sampled) compressibility.
    Stats {
        #[command(flatten)]
        at: commands::AtCommit,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// MiB of the files to read as samples for the zstd ratios (0: none).
        #[arg(long, default_value_t = 64)]
        sample_mb: u64,
    },
    /// Print the contents at PATH (steps separated by '/').
    Get {
        /// Path such as `contracts/index/<address>/balance`.
        path: String,
        #[command(flatten)]
        at: commands::AtCommit,
        /// Print the value as hexadecimal, even if it is text. Without
        /// --hex or --raw, text is printed as it is and anything else as
        /// `0x` and hexadecimal.
        #[arg(long, conflicts_with = "raw")]
        hex: bool,
        /// Write the value's bytes exactly, with no newline.
        #[arg(long)]
        raw: bool,
    },
    /// List the entries of the directory at PATH (default: the root).
    Ls {
        /// Path of a directory; empty or `/` for the root.
        #[arg(default_value = "")]
        path: String,
        #[command(flatten)]
        at: commands::AtCommit,
        /// Skip this many entries.
        #[arg(long, default_value_t = 0)]
        offset: u64,
        /// Show at most this many entries.
        #[arg(long)]
        length: Option<u64>,
        /// Also print each entry's hash.
        #[arg(long)]
        hashes: bool,
    },
    /// Show the history from a commit, following first parents.
    Log {
        #[command(flatten)]
        at: commands::AtCommit,
        /// Show at most this many commits.
        #[arg(short = 'n', long, default_value_t = 20)]
        count: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check the store's integrity: one commit's records (default: the last), or --all.
    ///
    /// Re-hashes every record the commit reaches and compares it with what
    /// points to it; with --all, also reads every record of every file and
    /// checks every commit. Prints each problem as `file:position (offset
    /// N): what` and exits with status 1 if there is any.
    Check {
        #[command(flatten)]
        store: commands::StoreArg,
        /// A commit hash (`Co...` or hex) or a branch name [default: the last commit].
        #[arg(short, long, conflicts_with = "all")]
        commit: Option<String>,
        /// Every file, every record, every commit.
        #[arg(long)]
        all: bool,
        /// Rebuild a damaged index or dictionary from the pack (and rewrite
        /// a damaged control slot), verifying every hash, then check all;
        /// refuses, changing nothing, what it cannot rebuild.
        #[arg(long, conflicts_with_all = ["commit", "all", "json"])]
        repair: bool,
        /// Stop after reporting this many problems.
        #[arg(long, default_value_t = 100)]
        max_problems: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Garbage-collect: keep the last N commits (following first parents
    /// from the last commit) and every commit made after the N-th.
    Gc {
        #[command(flatten)]
        store: commands::StoreArg,
        /// How many levels of history to keep (in the hot files, with --archive).
        #[arg(long)]
        keep_last: u64,
        /// Archive mode: keep every commit, moving old data to cold files.
        #[arg(long)]
        archive: bool,
    },
    /// Write a Merkle proof of what each PATH holds at a commit (a value, a
    /// directory's hash, or nothing), checkable without the store.
    Prove {
        /// Paths such as `contracts/index/<address>/balance`.
        paths: Vec<String>,
        #[command(flatten)]
        at: commands::AtCommit,
        /// Also prove the paths listed in this file, one per line.
        #[arg(long)]
        paths_from: Option<PathBuf>,
        /// Where to write the proof.
        #[arg(short, long, default_value = "proof.bin")]
        output: PathBuf,
    },
    /// Check a proof written by `pando prove` against a commit hash (or the
    /// hash of the commit's tree) and print what it proves.
    VerifyProof {
        file: PathBuf,
        /// The commit hash (`Co...` or hex) the proof must be of.
        #[arg(long)]
        root: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Export one commit's tree to a file, or build a new store from one.
    Snapshot {
        #[command(subcommand)]
        command: SnapshotCommand,
    },
    /// Check an irmin-pack context (the files of an Octez or Brassaia
    /// node's `context` directory), or bring its commits into a new pando
    /// store; every object is re-hashed and every commit hash must be
    /// irmin's. Never writes to CONTEXT.
    #[command(name = "import-irmin")]
    ImportIrmin {
        /// The irmin-pack context directory (Octez: `<data-dir>/context`).
        context: PathBuf,
        /// The new store (absent or empty); not with --check-only.
        #[arg(required_unless_present = "check_only", conflicts_with = "check_only")]
        store: Option<PathBuf>,
        /// The commit (`Co...` or hex) [default: the newest in the files].
        #[arg(short, long, conflicts_with = "all")]
        commit: Option<String>,
        /// Every commit the files hold whole, with its history.
        #[arg(long)]
        all: bool,
        /// Only walk and re-hash (an integrity check); write nothing;
        /// exit status 1 on damage.
        #[arg(long)]
        check_only: bool,
        /// With --check-only: print JSON instead of text (damage included).
        #[arg(long, requires = "check_only")]
        json: bool,
    },
    /// Generate a Tezos-like trace (irmin's IrmRepBT format).
    Gen {
        /// tiny (200 blocks), small (5,000), medium (50,000) or large (300,000).
        #[arg(long, default_value = "small")]
        preset: String,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Output file [default: PRESET-SEED.repr, such as small-1.repr].
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Replay a trace into a store and report on it. With no trace, generate
    /// one (--preset, default small) into a temporary directory and replay it.
    Replay {
        /// Trace file (IrmRepBT); omitted: a generated one.
        trace: Option<PathBuf>,
        /// Store directory; without it, a temporary one, removed on exit.
        #[arg(short, long, env = "PANDO_STORE", hide_env_values = true)]
        store: Option<PathBuf>,
        /// The layout the trace's hashes are of (`tezos`, `tezos-binary`):
        /// the store is created with it, or must be of it.
        #[arg(long, default_value = "tezos", value_parser = commands::parse_layout)]
        layout: pando_core::inode::Layout,
        /// Where to write report.json and report.html.
        #[arg(long, default_value = "pando-report")]
        report: PathBuf,
        /// Name of this run in the report.
        #[arg(long)]
        label: Option<String>,
        /// Preset and seed of the generated trace when no trace is given.
        #[arg(long, default_value = "small")]
        preset: String,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Stop after this many blocks.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        blocks: Option<u64>,
        /// fsync policy: `every` commit (default), `pipelined` (every commit, on a second thread: durable when the next commit returns), `never` (until the end), or a number N (every N commits).
        #[arg(long, default_value = "every")]
        sync: String,
        /// Memory for decoded nodes, in MiB: three quarters for the nodes the last commits wrote, a quarter for the cache of nodes read.
        #[arg(long, default_value_t = 512)]
        cache_mb: u64,
        /// Memory for the flat read cache, in MiB: what paths hold in the newest commit, so that reads skip the walk down the trie; 0 turns it off.
        #[arg(long, default_value_t = 64)]
        read_cache_mb: u64,
        /// Keep only the last N commits: garbage-collect in the background
        /// (with --gc-every) as a rolling node does.
        #[arg(long, requires = "gc_every", value_parser = clap::value_parser!(u64).range(1..))]
        keep_last: Option<u64>,
        /// With --keep-last: start a collection every M commits.
        #[arg(long, requires = "keep_last", value_parser = clap::value_parser!(u64).range(1..))]
        gc_every: Option<u64>,
        /// With --keep-last: a collection traces only what was written
        /// since the last one's boundary until the older live records have
        /// grown by this many percent over what the last whole trace found;
        /// 0 traces them all every time.
        #[arg(long, default_value_t = pando_store::Options::default().gc_whole_trace_growth_percent)]
        whole_trace_growth: u64,
        /// Add the trace's commits to a store that has commits already:
        /// allowed only if the commit the trace's first block checks out
        /// is in the store. Without it, a store with commits is refused.
        #[arg(long)]
        append: bool,
        /// Replay a trace that ends inside a block (a tree changed after its
        /// last commit, as in a cut file) up to its last whole block:
        /// without it, that is an error naming the block.
        #[arg(long)]
        ignore_partial_tail: bool,
        /// The time a block may take, in seconds, against which the report
        /// page colours block times: 6, Tezos mainnet's block time since
        /// the T protocol.
        #[arg(long, value_name = "SECONDS", default_value_t = 6.0, value_parser = block_budget)]
        block_budget: f64,
        /// Compare two reports side by side instead of replaying.
        #[arg(long, num_args = 2, value_names = ["A.json", "B.json"], conflicts_with_all = ["trace", "store"])]
        compare: Option<Vec<PathBuf>>,
    },
    /// Read trace files.
    Trace {
        #[command(subcommand)]
        command: TraceCommand,
    },
}

#[derive(Subcommand)]
enum SnapshotCommand {
    /// Write the tree of a commit to FILE as a stream (memory bounded by the
    /// tree's depth, not its directories' sizes).
    Export {
        file: PathBuf,
        #[command(flatten)]
        at: commands::AtCommit,
    },
    /// Build a new store in DIR (absent or empty) from FILE, checking every
    /// hash against the commit the snapshot names.
    Import { file: PathBuf, dir: PathBuf },
}

#[derive(Subcommand)]
enum TraceCommand {
    /// Print a trace's rows as text, one per line (`!` marks a last use).
    Cat {
        file: PathBuf,
        /// Print at most this many rows.
        #[arg(short = 'n', long)]
        limit: Option<u64>,
        /// Accept a trace that ends inside a block (a tree changed after its
        /// last commit, as in a cut file): without it, that is an error.
        #[arg(long)]
        ignore_partial_tail: bool,
    },
    /// Summarise a trace: blocks, operations by kind, path prefixes, value sizes.
    Stats {
        file: PathBuf,
        /// Accept a trace that ends inside a block (a tree changed after its
        /// last commit, as in a cut file): without it, that is an error.
        #[arg(long)]
        ignore_partial_tail: bool,
    },
}

/// `--block-budget`: a number of seconds above zero.
fn block_budget(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds > 0.0 => Ok(seconds),
        _ => Err(format!("a number of seconds above zero, such as 6 or 0.5, not {text:?}")),
    }
}

fn sync_policy(text: &str) -> anyhow::Result<pando_store::SyncPolicy> {
    use pando_store::SyncPolicy;
    Ok(match text {
        "every" => SyncPolicy::EveryCommit,
        "never" => SyncPolicy::Never,
        "pipelined" => SyncPolicy::Pipelined,
        n => SyncPolicy::EveryN(
            n.parse()
                .ok()
                .filter(|&n: &u32| n > 0)
                .ok_or_else(|| anyhow::anyhow!("--sync takes every, pipelined, never or a number above 0, not {n:?}"))?,
        ),
    })
}

/// A write's result, with a write to a closed pipe counted as done
/// (`outln_or_gone!`).
fn unless_gone(result: std::io::Result<()>) -> std::io::Result<()> {
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// True if `error` is, or was caused by, a write to a closed pipe.
fn broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| cause.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe))
}

/// The store's logs (`tracing`) on standard error: warnings and errors by
/// default (a recovery that cut a torn write, a failed write, a slow
/// commit), more with `PANDO_LOG` (for example `PANDO_LOG=info` for each
/// collection's stages, `debug` for each commit).
fn logs() {
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("PANDO_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    use std::io::IsTerminal as _;
    let colours = std::io::stderr().is_terminal();
    // Through the progress bar shown, if any, so that a line never lands in the bar's.
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(colours).with_writer(progress::Logs).init();
}

fn main() -> std::process::ExitCode {
    // Best effort: a kernel without the flag (before 3.15) runs as before.
    pando_store::disable_transparent_huge_pages();
    logs();
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // The reader went away: what it read was right, and nothing is left to say.
        Err(e) if broken_pipe(&e) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            report(&e);
            std::process::ExitCode::FAILURE
        }
    }
}

/// Prints an error and its causes, as anyhow does but never with a
/// backtrace: an error here is the user's to read (a wrong path, a full
/// disk, a damaged file), not a bug, even where `RUST_BACKTRACE` is set.
fn report(e: &anyhow::Error) {
    errln!("Error: {e}");
    let causes: Vec<_> = e.chain().skip(1).collect();
    if !causes.is_empty() {
        errln!("\nCaused by:");
    }
    for (i, cause) in causes.iter().enumerate() {
        if causes.len() == 1 {
            errln!("    {cause}");
        } else {
            errln!("    {i}: {cause}");
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Init { dir, layout } => commands::init(&dir, layout),
        Command::Info { store, json } => commands::info(&store, json),
        Command::Stats { at, json, sample_mb } => commands::stats::stats(&at, json, sample_mb),
        Command::Get { path, at, hex, raw } => {
            let shown = if raw {
                commands::Shown::Raw
            } else if hex {
                commands::Shown::Hex
            } else {
                commands::Shown::Auto
            };
            commands::get(&at, &path, shown)
        }
        Command::Ls { path, at, offset, length, hashes } => commands::ls(&at, &path, offset, length, hashes),
        Command::Log { at, count, json } => commands::log(&at, count, json),
        Command::Check { store, repair: true, .. } => commands::repair::repair(&store),
        Command::Check { store, commit, all, max_problems, json, repair: false } => {
            if !commands::check::check(&store, commit.as_deref(), all, max_problems, json)? {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Gc { store, keep_last, archive } => commands::gc(&store, keep_last, archive),
        Command::Prove { paths, at, paths_from, output } => commands::proof::prove(&at, &paths, paths_from.as_deref(), &output),
        Command::VerifyProof { file, root, json } => commands::proof::verify(&file, &root, json),
        Command::Snapshot { command: SnapshotCommand::Export { file, at } } => commands::snapshot::export(&at, &file),
        Command::Snapshot { command: SnapshotCommand::Import { file, dir } } => commands::snapshot::import(&file, &dir),
        Command::ImportIrmin { context, store, commit, all, check_only, json } => {
            let args = commands::irmin::ImportArgs {
                context: &context,
                store: store.as_deref(),
                commit: commit.as_deref(),
                all,
                check_only,
                json,
            };
            if !commands::irmin::import_irmin(&args)? {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Gen { preset, seed, output } => {
            let preset = commands::trace::preset(&preset)?;
            let output = output.unwrap_or_else(|| PathBuf::from(format!("{}-{seed}.repr", preset.name)));
            let interrupted = commands::replay::on_interrupt()?;
            commands::trace::generate(preset, seed, &output, false, Some(&interrupted))
        }
        Command::Replay { compare: Some(files), .. } => commands::replay::compare(&files[0], &files[1]),
        Command::Replay {
            trace,
            store,
            layout,
            report,
            label,
            preset,
            seed,
            blocks,
            sync,
            cache_mb,
            read_cache_mb,
            keep_last,
            gc_every,
            whole_trace_growth,
            append,
            ignore_partial_tail,
            block_budget,
            compare: None,
        } => {
            let sync = sync_policy(&sync)?;
            let retention = match (keep_last, gc_every) {
                (Some(commits), Some(every)) => pando_store::Retention::KeepLast { commits, every },
                _ => pando_store::Retention::KeepAll,
            };
            commands::replay::replay(&commands::replay::ReplayArgs {
                trace,
                store,
                layout,
                report,
                label,
                preset,
                seed,
                blocks,
                sync,
                cache_mb,
                read_cache_mb,
                retention,
                whole_trace_growth,
                append,
                ignore_partial_tail,
                block_budget_ms: block_budget * 1_000.0,
            })
        }
        Command::Trace { command: TraceCommand::Cat { file, limit, ignore_partial_tail } } => {
            commands::trace::cat(&file, limit, ignore_partial_tail)
        }
        Command::Trace { command: TraceCommand::Stats { file, ignore_partial_tail } } => {
            commands::trace::stats(&file, ignore_partial_tail)
        }
    }
}
