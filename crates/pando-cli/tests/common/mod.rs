//! What the tests of the command share: the binary run as a user runs it
//! (no `PANDO_STORE` from the environment, no backtraces), and what it said.

#![allow(dead_code, reason = "each test file uses some of these")]

use std::process::{Command, Output};

/// The `pando` binary, ready for arguments.
pub fn pando() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pando"));
    command.env_remove("PANDO_STORE").env("RUST_BACKTRACE", "0").env("RUST_LIB_BACKTRACE", "0");
    command
}

/// Runs `pando` with `args` to its end.
pub fn run(args: &[&str]) -> Output {
    pando().args(args).output().unwrap()
}

/// The standard output of a run that succeeded.
pub fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// The standard error of a run that failed, which must not be a panic.
pub fn failure(output: &Output) -> String {
    assert!(!output.status.success(), "succeeded: {}", String::from_utf8_lossy(&output.stdout));
    let stderr = String::from_utf8(output.stderr.clone()).unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}
