//! IAVL (github.com/cosmos/iavl, Go) driven over a pipe: the Go programs in
//! `bench/iavl` (v1, over goleveldb) and `bench/iavl2` (v2, over SQLite)
//! read blocks on their standard input and answer with each commit's
//! duration. Built with `go build` when the backend is opened.

use anyhow::{Context, bail};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use crate::backend::{Backend, dir_bytes};
use crate::workload::{Block, Op};

#[derive(Clone, Copy, Debug)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    fn program(self) -> &'static str {
        match self {
            Version::V1 => "iavl",
            Version::V2 => "iavl2",
        }
    }
}

/// Builds the Go program (Go's cache makes this quick when nothing
/// changed) and returns its path.
pub fn build(version: Version) -> anyhow::Result<PathBuf> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(version.program());
    let binary = Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join(format!("{}-bench", version.program()));
    let status = Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(&binary)
        .arg(".")
        .current_dir(&source)
        .status()
        .context("running go build")?;
    if !status.success() {
        bail!("go build of {} failed", source.display());
    }
    Ok(binary)
}

pub struct IavlBackend {
    dir: PathBuf,
    child: Child,
    input: BufWriter<ChildStdin>,
    output: ChildStdout,
}

impl IavlBackend {
    pub fn open(dir: &Path, version: Version) -> anyhow::Result<IavlBackend> {
        std::fs::create_dir_all(dir)?;
        let mut child = Command::new(build(version)?).arg(dir).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
        let input = BufWriter::with_capacity(1 << 20, child.stdin.take().context("stdin")?);
        let output = child.stdout.take().context("stdout")?;
        Ok(IavlBackend { dir: dir.to_path_buf(), child, input, output })
    }
}

fn bytes(out: &mut impl Write, data: &[u8]) -> std::io::Result<()> {
    out.write_all(&(data.len() as u32).to_le_bytes())?;
    out.write_all(data)
}

impl Backend for IavlBackend {
    fn apply(&mut self, block: &Block) -> anyhow::Result<Duration> {
        self.input.write_all(&(block.len() as u32).to_le_bytes())?;
        for op in block {
            match op {
                Op::Read(key) => {
                    self.input.write_all(&[0])?;
                    bytes(&mut self.input, key)?;
                }
                Op::Write(key, Some(value)) => {
                    self.input.write_all(&[1])?;
                    bytes(&mut self.input, key)?;
                    bytes(&mut self.input, value)?;
                }
                Op::Write(key, None) => {
                    self.input.write_all(&[2])?;
                    bytes(&mut self.input, key)?;
                }
            }
        }
        self.input.flush()?;
        let mut nanos = [0u8; 8];
        self.output.read_exact(&mut nanos).context("the IAVL program stopped")?;
        Ok(Duration::from_nanos(u64::from_le_bytes(nanos)))
    }

    fn disk_bytes(&self) -> u64 {
        dir_bytes(&self.dir)
    }

    fn process_figures(&self) -> Option<(u64, u64)> {
        use pando_trace::replay::metrics::{ProcIo, peak_rss_bytes};
        let pid = self.child.id().to_string();
        Some((ProcIo::of(&pid).write_bytes, peak_rss_bytes(&pid)))
    }
}

impl Drop for IavlBackend {
    fn drop(&mut self) {
        let _ = self.input.flush();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
