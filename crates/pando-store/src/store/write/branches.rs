//! Branches: names pointing to commits, in one small file replaced
//! atomically (write a temporary file, fsync it, rename, fsync the directory).
//!
//! Layout: `"PANDOBR1" ‖ u32 LE count ‖ (LEB128 len ‖ name ‖ hash)* ‖ crc32c`.

use pando_core::{Hash, varint};
use std::collections::BTreeMap;

use crate::dict::read_bytes;
use crate::error::{Error, Result};
use crate::store::Repo;

pub const FILE: &str = "branches";
pub const TEMP_FILE: &str = "branches.tmp";
const MAGIC: &[u8; 8] = b"PANDOBR1";

pub fn encode(branches: &BTreeMap<String, Hash>) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(branches.len() as u32).to_le_bytes());
    for (name, hash) in branches {
        varint::write_u64(&mut out, name.len() as u64);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(hash.as_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

pub fn decode(bytes: &[u8]) -> Result<BTreeMap<String, Hash>, (u64, String)> {
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err((0, "bad magic".into()));
    }
    let body_end = bytes.len() - 4;
    let stored = u32::from_le_bytes(bytes[body_end..].try_into().expect("4 bytes"));
    if crc32c::crc32c(&bytes[..body_end]) != stored {
        return Err((body_end as u64, "checksum mismatch".into()));
    }
    let body = &bytes[..body_end];
    let count = u32::from_le_bytes(body[8..12].try_into().expect("4 bytes"));
    let mut pos = 12;
    let mut out = BTreeMap::new();
    for _ in 0..count {
        let at = pos as u64;
        let name = read_bytes(body, &mut pos).map_err(|e| (at, e))?;
        let name = String::from_utf8(name.to_vec()).map_err(|_| (at, "branch name is not UTF-8".to_string()))?;
        let hash = body.get(pos..pos + 32).and_then(Hash::from_slice).ok_or((pos as u64, "truncated hash".to_string()))?;
        pos += 32;
        out.insert(name, hash);
    }
    if pos != body.len() {
        return Err((pos as u64, "trailing bytes".into()));
    }
    Ok(out)
}

impl Repo {
    pub(in crate::store) fn set_branch(&self, name: &str, commit: Option<&Hash>) -> Result<()> {
        self.write.check_writable()?;
        if name.is_empty() || name.len() > 255 {
            return Err(Error::Invalid(format!("branch name {name:?} must be 1 to 255 bytes")));
        }
        if let Some(commit) = commit
            && !self.read.index.read().contains_key(commit)
        {
            return Err(Error::UnknownCommit(*commit));
        }
        // The writer lock orders branch updates with commits.
        let mut writer = self.write.writer.as_ref().expect("checked writable").lock();
        let mut branches = self.read.branches.read().clone();
        match commit {
            Some(commit) => branches.insert(name.to_string(), *commit),
            None => branches.remove(name),
        };
        let bytes = encode(&branches);
        let result = (|| {
            // A branch must not point to a commit that a crash could lose.
            self.flush_locked(&mut writer, false)?;
            let temp = self.read.storage.open(TEMP_FILE, true).map_err(Error::io(TEMP_FILE, "create"))?;
            temp.truncate(0).map_err(Error::io(TEMP_FILE, "truncate"))?;
            temp.write_all_at(&bytes, 0).map_err(Error::io(TEMP_FILE, "write"))?;
            temp.sync().map_err(Error::io(TEMP_FILE, "sync"))?;
            self.read.storage.rename(TEMP_FILE, FILE).map_err(Error::io(FILE, "rename"))?;
            self.read.storage.sync_dir().map_err(Error::io(self.read.storage.describe(), "sync directory"))
        })();
        self.write.guard(result)?;
        *self.read.branches.write() = branches;
        Ok(())
    }
}
