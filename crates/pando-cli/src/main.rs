//! The `pando` command: create and inspect pando stores.
//!
//! Boundary: argument parsing and printing only; everything it does goes
//! through the `pando-store` library.

mod commands;

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
    },
    /// Commits, branches, last commit and file sizes of a store.
    Info {
        #[command(flatten)]
        store: commands::StoreArg,
    },
    /// Print the contents at PATH (steps separated by '/').
    Get {
        /// Path such as `contracts/index/<address>/balance`.
        path: String,
        #[command(flatten)]
        at: commands::AtCommit,
        /// Print the value as hexadecimal even if it is text.
        #[arg(long)]
        hex: bool,
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
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Init { dir } => commands::init(&dir),
        Command::Info { store } => commands::info(&store),
        Command::Get { path, at, hex } => commands::get(&at, &path, hex),
        Command::Ls { path, at, offset, length, hashes } => commands::ls(&at, &path, offset, length, hashes),
        Command::Log { at, count } => commands::log(&at, count),
    }
}
