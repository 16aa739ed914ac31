//! A cursor over bytes read from one irmin file, decoding repr's binary
//! encoding; every error names the file and the file offset where it was
//! found.
//!
//! Invariant: no method panics or reads past the slice, whatever the bytes.

use pando_core::Hash;

use crate::error::{Error, Result};

/// Bytes of `file` starting at file offset `base`.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    file: &'a str,
    base: u64,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8], file: &'a str, base: u64) -> Cursor<'a> {
        Cursor { bytes, pos: 0, file, base }
    }

    /// Bytes consumed so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// An error at the cursor's position.
    pub fn error(&self, reason: impl Into<String>) -> Error {
        Error::Corrupt { file: self.file.into(), offset: self.base + self.pos as u64, reason: reason.into() }
    }

    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if self.remaining() < n {
            return Err(self.error(format!("{what}: needs {n} bytes, {} left", self.remaining())));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }

    /// repr's `int63` and `int64`: 8 bytes big-endian.
    pub fn int63(&mut self, what: &str) -> Result<u64> {
        let bytes = self.take(8, what)?;
        Ok(u64::from_be_bytes(bytes.try_into().expect("8 bytes")))
    }

    /// repr's `int32`: 4 bytes big-endian.
    pub fn int32(&mut self, what: &str) -> Result<u32> {
        let bytes = self.take(4, what)?;
        Ok(u32::from_be_bytes(bytes.try_into().expect("4 bytes")))
    }

    /// repr's `int`: LEB128.
    pub fn int(&mut self, what: &str) -> Result<u64> {
        let start = self.pos;
        pando_core::varint::read_u64(self.bytes, &mut self.pos).map_err(|_| {
            self.pos = start;
            self.error(format!("{what}: bad or truncated variable-length integer"))
        })
    }

    /// An `int` that must fit in `usize` and be at most `max`.
    pub fn int_at_most(&mut self, max: u64, what: &str) -> Result<usize> {
        let at = self.pos;
        let value = self.int(what)?;
        if value > max {
            self.pos = at;
            return Err(self.error(format!("{what}: {value} is more than {max}")));
        }
        Ok(value as usize)
    }

    /// A variant's tag.
    pub fn tag(&mut self, what: &str) -> Result<u64> {
        self.int(what)
    }

    /// repr's `bool`: `00` false, any other byte true (irmin writes `ff`).
    pub fn bool(&mut self, what: &str) -> Result<bool> {
        Ok(self.u8(what)? != 0)
    }

    /// An option's tag: `true` when a value follows.
    pub fn option(&mut self, what: &str) -> Result<bool> {
        self.bool(what)
    }

    /// repr's `string`: a LEB128 length and the bytes.
    pub fn string(&mut self, what: &str) -> Result<&'a [u8]> {
        let len = self.int_at_most(self.remaining() as u64, what)?;
        self.take(len, what)
    }

    pub fn hash(&mut self, what: &str) -> Result<Hash> {
        Ok(Hash::from_slice(self.take(32, what)?).expect("32 bytes"))
    }
}
