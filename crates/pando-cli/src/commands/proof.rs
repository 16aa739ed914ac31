//! `pando prove` and `pando verify-proof`: Merkle proofs of paths at a commit.

use anyhow::{Context, bail};
use pando_core::Hash;
use pando_core::proof::keys::{Found, KeysProof};
use pando_store::io::NewFile;
use std::io::Write as _;
use std::path::Path;

use super::{AtCommit, hex, open_read_only, printable, resolve, split_path};

fn show_value(value: &[u8]) -> String {
    match printable(value) {
        Some(text) => format!("{text:?}"),
        None => format!("0x{}", hex(value)),
    }
}

/// Writes a proof of what `paths` (and those listed in `paths_from`) hold.
pub fn prove(at: &AtCommit, paths: &[String], paths_from: Option<&Path>, out: &Path) -> anyhow::Result<()> {
    let store = open_read_only(&at.store)?;
    let commit = resolve(&store, at.commit.as_deref())?;
    let mut all: Vec<String> = paths.to_vec();
    if let Some(file) = paths_from {
        let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
        for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
            let line = std::str::from_utf8(line)
                .map_err(|e| anyhow::anyhow!("{}: line {} is not UTF-8 ({e})", file.display(), i + 1))?
                .trim_end_matches('\r');
            if !line.trim().is_empty() {
                all.push(line.to_string());
            }
        }
    }
    if all.is_empty() {
        bail!("no path to prove: give PATH arguments or --paths-from");
    }
    let steps: Vec<Vec<Vec<u8>>> = all.iter().map(|p| split_path(p).iter().map(|s| s.as_bytes().to_vec()).collect()).collect();
    let proof = store.prove_keys(&commit, &steps)?;
    let bytes = proof.encode()?;
    let tree_bytes = pando_core::proof::encoding::encode(&proof.proof)?.len();
    // Whole or not at all: a failure leaves a file already there as it was.
    let new = NewFile::create(out)?;
    new.file().write_all(&bytes).with_context(|| format!("cannot write {}", new.path().display()))?;
    new.persist()?;
    outln!(
        "wrote {}: {} paths at commit {commit}, {} bytes (Octez tree proof {tree_bytes} bytes)",
        out.display(),
        all.len(),
        bytes.len()
    )?;
    Ok(())
}

/// Checks a proof file against `root` and prints what each path holds.
pub fn verify(file: &Path, root: &str, json: bool) -> anyhow::Result<()> {
    let root = Hash::parse(root).with_context(|| format!("--root {root:?} is not a hash"))?;
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let proof = KeysProof::decode(&bytes).with_context(|| format!("{} is not a valid proof", file.display()))?;
    let values = proof.verify(&root).with_context(|| format!("{} does not prove anything at {root}", file.display()))?;
    if json {
        let paths: Vec<serde_json::Value> = proof
            .paths
            .iter()
            .zip(&values)
            .map(|(path, held)| {
                let steps: Vec<String> = path.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect();
                match held {
                    Found::Value(v) => {
                        serde_json::json!({ "path": steps.join("/"), "kind": "value", "hex": hex(v), "text": printable(v) })
                    }
                    Found::Dir(hash) => {
                        serde_json::json!({ "path": steps.join("/"), "kind": "directory", "hash": hash.to_base58() })
                    }
                    Found::Absent => serde_json::json!({ "path": steps.join("/"), "kind": "absent" }),
                }
            })
            .collect();
        let value = serde_json::json!({ "valid": true, "root": root.to_base58(), "bytes": bytes.len(), "paths": paths });
        outln!("{}", serde_json::to_string_pretty(&value)?)?;
        return Ok(());
    }
    outln!("valid: {} paths at {root} ({} bytes)", proof.paths.len(), bytes.len())?;
    for (path, value) in proof.paths.iter().zip(&values) {
        let shown: Vec<String> = path.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect();
        match value {
            Found::Value(v) => outln!("{} = {}", shown.join("/"), show_value(v))?,
            Found::Dir(hash) => outln!("{}: a directory, hash {hash}", shown.join("/"))?,
            Found::Absent => outln!("{}: absent", shown.join("/"))?,
        }
    }
    Ok(())
}
