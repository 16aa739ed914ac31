//! Decompresses the repository's `tests/vectors/` into `OUT_DIR/vectors`
//! once, then checks every file against `tests/vectors/SHA256SUMS`.
//!
//! What each file of `tests/vectors/` becomes:
//! - `NAME.tar.zst`: a tar of a directory, unpacked (regular files and
//!   directories only, each path relative and without `..`);
//! - `NAME.zst`: the file `NAME`;
//! - `README.md`, `SHA256SUMS`: nothing (they describe the others);
//! - any other file: copied as it is.
//!
//! Invariants: once this script succeeds, `OUT_DIR/vectors` holds exactly
//! the files `SHA256SUMS` lists, each with the listed SHA-256, and every file
//! is read-only (tests copy what they change); a missing, extra or damaged
//! file fails the build with its name. `OUT_DIR/manifest.rs` lists the files
//! and their lengths for the library's cheap check at run time. The script
//! runs again only when something under `tests/vectors/` changes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

/// The largest window a compressed vector may use (`zstd --long=27`).
const WINDOW_LOG_MAX: u32 = 27;

fn main() {
    if let Err(message) = run() {
        eprintln!("error: test vectors: {message}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let manifest = PathBuf::from(env_var("CARGO_MANIFEST_DIR")?);
    let source = manifest.join("../../tests/vectors");
    let out = PathBuf::from(env_var("OUT_DIR")?);
    println!("cargo::rerun-if-changed={}", source.display());
    println!("cargo::rerun-if-changed=build.rs");

    let sums_path = source.join("SHA256SUMS");
    let sums = parse_sums(&read_to_string(&sums_path)?, &sums_path)?;

    let target = out.join("vectors");
    remove_tree(&target)?;
    fs::create_dir_all(&target).map_err(|e| format!("cannot create {}: {e}", target.display()))?;
    let mut entries: Vec<PathBuf> = fs::read_dir(&source)
        .map_err(|e| format!("cannot read {}: {e}", source.display()))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<io::Result<_>>()
        .map_err(|e| format!("cannot read {}: {e}", source.display()))?;
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| format!("{}: not a UTF-8 name", path.display()))?;
        if name == "README.md" || name == "SHA256SUMS" {
            continue;
        }
        if let Some(_stem) = name.strip_suffix(".tar.zst") {
            unpack(&path, &target)?;
        } else if let Some(stem) = name.strip_suffix(".zst") {
            let mut decoder = decoder(&path)?;
            write_file(&target.join(stem), &mut decoder, &path)?;
        } else {
            let mut file = fs::File::open(&path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
            write_file(&target.join(name), &mut file, &path)?;
        }
    }

    // Exactly the listed files, each with its listed hash.
    let found = list_files(&target, &target)?;
    let mut lengths = BTreeMap::new();
    for name in sums.keys() {
        if !found.contains(name) {
            return Err(format!("{name} is listed in {} but no file of tests/vectors/ gives it", sums_path.display()));
        }
    }
    for name in &found {
        let Some(expected) = sums.get(name) else {
            return Err(format!("{name} comes out of tests/vectors/ but {} does not list it", sums_path.display()));
        };
        let path = target.join(name);
        let bytes = fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let actual = hex(&Sha256::digest(&bytes));
        if &actual != expected {
            return Err(format!("{name} is damaged: its SHA-256 is {actual}, SHA256SUMS says {expected}"));
        }
        lengths.insert(name.clone(), bytes.len() as u64);
        let mut permissions = fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?.permissions();
        permissions.set_readonly(true);
        fs::set_permissions(&path, permissions).map_err(|e| format!("cannot make {} read-only: {e}", path.display()))?;
    }

    let mut code = String::from("/// Every vector file (relative path, `/`-separated) and its length in bytes.\n");
    code.push_str("pub(crate) const FILES: &[(&str, u64)] = &[\n");
    for (name, length) in &lengths {
        writeln!(code, "    ({name:?}, {length}),").expect("writing to a String");
    }
    code.push_str("];\n");
    let manifest_rs = out.join("manifest.rs");
    fs::write(&manifest_rs, code).map_err(|e| format!("cannot write {}: {e}", manifest_rs.display()))
}

fn env_var(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|e| format!("{name}: {e}"))
}

fn read_to_string(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// `sha256sum`'s output: `HEX  PATH` per line.
fn parse_sums(text: &str, path: &Path) -> Result<BTreeMap<String, String>, String> {
    let mut sums = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        let bad = || format!("{} line {}: not `SHA256  PATH`", path.display(), number + 1);
        let (hash, name) = line.split_once("  ").ok_or_else(bad)?;
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) || name.is_empty() {
            return Err(bad());
        }
        if sums.insert(name.to_string(), hash.to_ascii_lowercase()).is_some() {
            return Err(format!("{} line {}: {name} is listed twice", path.display(), number + 1));
        }
    }
    Ok(sums)
}

fn decoder(path: &Path) -> Result<zstd::stream::read::Decoder<'static, io::BufReader<fs::File>>, String> {
    let file = fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut decoder = zstd::stream::read::Decoder::new(file).map_err(|e| format!("{}: {e}", path.display()))?;
    decoder.window_log_max(WINDOW_LOG_MAX).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(decoder)
}

/// Writes what `from` (read out of `source`) gives into a new file `to`.
fn write_file(to: &Path, from: &mut dyn Read, source: &Path) -> Result<(), String> {
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let mut file =
        fs::File::create_new(to).map_err(|e| format!("cannot create {} (from {}): {e}", to.display(), source.display()))?;
    io::copy(from, &mut file).map_err(|e| format!("{} is damaged or unreadable: {e}", source.display()))?;
    Ok(())
}

/// Unpacks the regular files and directories of a compressed tar into `target`.
fn unpack(path: &Path, target: &Path) -> Result<(), String> {
    let mut archive = tar::Archive::new(decoder(path)?);
    let damaged = |e: io::Error| format!("{} is damaged or unreadable: {e}", path.display());
    for entry in archive.entries().map_err(damaged)? {
        let mut entry = entry.map_err(damaged)?;
        let name = entry.path().map_err(damaged)?.into_owned();
        if name.components().any(|c| !matches!(c, Component::Normal(_) | Component::CurDir)) {
            return Err(format!("{}: {} leaves the vectors' directory", path.display(), name.display()));
        }
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            let dir = target.join(&name);
            fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        } else if kind.is_file() {
            write_file(&target.join(&name), &mut entry, path)?;
        } else {
            return Err(format!("{}: {} is neither a file nor a directory", path.display(), name.display()));
        }
    }
    Ok(())
}

/// The files under `dir`, as paths relative to `root` joined by `/`.
fn list_files(dir: &Path, root: &Path) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))? {
        let path = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?.path();
        if path.is_dir() {
            out.extend(list_files(&path, root)?);
        } else {
            let relative = path.strip_prefix(root).expect("read_dir gives paths under the directory it reads");
            let parts: Option<Vec<&str>> = relative.components().map(|c| c.as_os_str().to_str()).collect();
            let parts = parts.ok_or_else(|| format!("{}: not a UTF-8 name", path.display()))?;
            out.push(parts.join("/"));
        }
    }
    out.sort();
    Ok(out)
}

/// Removes a previous build's vectors (read-only files in writable
/// directories), if any.
fn remove_tree(dir: &Path) -> Result<(), String> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot remove the previous {}: {e}", dir.display())),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
