//! `store.dict`: step names irmin stores once and refers to by number.
//!
//! The file is a sequence of `int32 length (big-endian) ‖ bytes`; the n-th
//! string has id n. Only the bytes before the control file's
//! `dict_end_poff` are valid.
//!
//! Invariant: the whole valid dictionary is read at open (irmin caps it at
//! 100,000 names), and a truncated entry is an error naming its byte.

use pando_store::io::Storage;

use crate::error::{Error, Result};
use crate::read::Cursor;

pub const FILE: &str = "store.dict";

/// The step names by id.
pub struct Dict {
    names: Vec<Box<[u8]>>,
}

impl Dict {
    /// Reads the first `end` bytes of `store.dict` in `dir`.
    pub fn open(dir: &dyn Storage, end: u64) -> Result<Dict> {
        let file = dir.open(FILE, false).map_err(Error::io(FILE, "open"))?;
        let size = file.len().map_err(Error::io(FILE, "read the size of"))?;
        if size < end {
            return Err(Error::Corrupt {
                file: FILE.into(),
                offset: size,
                reason: format!("{size} bytes, but {} says {end} are valid (truncated)", crate::control::FILE),
            });
        }
        let mut bytes = vec![0u8; end as usize];
        file.read_exact_at(&mut bytes, 0).map_err(Error::io(FILE, "read"))?;
        Dict::decode(&bytes)
    }

    pub fn decode(bytes: &[u8]) -> Result<Dict> {
        let mut c = Cursor::new(bytes, FILE, 0);
        let mut names = Vec::new();
        while c.remaining() > 0 {
            let len = c.int32("name length")? as usize;
            names.push(c.take(len, "name")?.into());
        }
        Ok(Dict { names })
    }

    /// The name with id `id`.
    pub fn get(&self, id: u64) -> Option<&[u8]> {
        self.names.get(usize::try_from(id).ok()?).map(|n| &n[..])
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }
}
