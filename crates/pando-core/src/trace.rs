//! irmin's replayable trace format (`IrmRepBT`, version 0), as pure
//! encoding and decoding of bytes.
//!
//! File: `"IrmRepBT" ‖ int32 BE version ‖ varint header length ‖ header ‖
//! (varint row length ‖ row)*`. The header of version 0 is `unit` (no
//! bytes). Rows are irmin `repr` binary values: strings and lists are
//! varint-length-prefixed, int64 is 8 bytes big-endian, a bool is one byte
//! (`00` false, `ff` true), a variant starts with its tag as a varint.
//!
//! Invariant: decoding never panics; what it allocates is bounded by the
//! input's size (keys and parent lists are capped in length); every error
//! says where in the row it happened.

use crate::varint;

/// The 8 magic bytes of a replayable trace.
pub const MAGIC: &[u8; 8] = b"IrmRepBT";
/// The only version this module reads and writes.
pub const VERSION: i32 = 0;
/// Most steps in a key and parents of a commit accepted in a row (Tezos
/// keys have about ten steps), which bounds what decoding allocates.
pub const MAX_KEY_STEPS: usize = 256;
pub const MAX_PARENTS: usize = 256;

/// A value tagged with whether this is its last occurrence in the trace.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Scope<T> {
    /// The last occurrence: a replayer may drop what it holds for it.
    Forget(T),
    /// The value occurs again later.
    Keep(T),
}

impl<T> Scope<T> {
    pub fn value(&self) -> &T {
        match self {
            Scope::Forget(v) | Scope::Keep(v) => v,
        }
    }

    pub fn value_mut(&mut self) -> &mut T {
        match self {
            Scope::Forget(v) | Scope::Keep(v) => v,
        }
    }

    pub fn is_keep(&self) -> bool {
        matches!(self, Scope::Keep(_))
    }

    /// The same scope of `f` of the value.
    pub fn map<'a, U>(&'a self, f: impl FnOnce(&'a T) -> U) -> Scope<U> {
        match self {
            Scope::Forget(v) => Scope::Forget(f(v)),
            Scope::Keep(v) => Scope::Keep(f(v)),
        }
    }
}

/// A path: a list of steps.
pub type Key = Vec<Vec<u8>>;
/// A context (tree) identifier of the trace.
pub type ContextId = i64;

/// One recorded operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Row {
    /// The tree of a commit becomes context `ctx`.
    Checkout {
        hash: Scope<Vec<u8>>,
        ctx: Scope<ContextId>,
    },
    Add {
        key: Key,
        value: Vec<u8>,
        in_ctx: Scope<ContextId>,
        out_ctx: Scope<ContextId>,
    },
    Remove {
        key: Key,
        in_ctx: Scope<ContextId>,
        out_ctx: Scope<ContextId>,
    },
    /// The subtree at `source` is added at `target`.
    Copy {
        source: Key,
        target: Key,
        in_ctx: Scope<ContextId>,
        out_ctx: Scope<ContextId>,
    },
    /// `find`: whether a contents was found.
    Find {
        key: Key,
        found: bool,
        ctx: Scope<ContextId>,
    },
    Mem {
        key: Key,
        found: bool,
        ctx: Scope<ContextId>,
    },
    MemTree {
        key: Key,
        found: bool,
        ctx: Scope<ContextId>,
    },
    Commit {
        hash: Scope<Vec<u8>>,
        date: i64,
        message: Vec<u8>,
        parents: Vec<Scope<Vec<u8>>>,
        in_ctx: Scope<ContextId>,
    },
}

impl Row {
    /// The row kind's name, as `pando trace` prints it.
    pub fn kind(&self) -> &'static str {
        match self {
            Row::Checkout { .. } => "checkout",
            Row::Add { .. } => "add",
            Row::Remove { .. } => "remove",
            Row::Copy { .. } => "copy",
            Row::Find { .. } => "find",
            Row::Mem { .. } => "mem",
            Row::MemTree { .. } => "mem_tree",
            Row::Commit { .. } => "commit",
        }
    }

    /// Appends the row's `repr` encoding (without its length prefix).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Row::Checkout { hash, ctx } => {
                varint::write_u64(out, 0);
                write_scope(out, hash, |o, h| write_bytes(o, h));
                write_scope(out, ctx, write_ctx);
            }
            Row::Add { key, value, in_ctx, out_ctx } => {
                varint::write_u64(out, 1);
                write_key(out, key);
                write_bytes(out, value);
                write_scope(out, in_ctx, write_ctx);
                write_scope(out, out_ctx, write_ctx);
            }
            Row::Remove { key, in_ctx, out_ctx } => {
                varint::write_u64(out, 2);
                write_key(out, key);
                write_scope(out, in_ctx, write_ctx);
                write_scope(out, out_ctx, write_ctx);
            }
            Row::Copy { source, target, in_ctx, out_ctx } => {
                varint::write_u64(out, 3);
                write_key(out, source);
                write_key(out, target);
                write_scope(out, in_ctx, write_ctx);
                write_scope(out, out_ctx, write_ctx);
            }
            Row::Find { key, found, ctx } | Row::Mem { key, found, ctx } | Row::MemTree { key, found, ctx } => {
                let tag = match self {
                    Row::Find { .. } => 4,
                    Row::Mem { .. } => 5,
                    _ => 6,
                };
                varint::write_u64(out, tag);
                write_key(out, key);
                out.push(if *found { 0xff } else { 0 });
                write_scope(out, ctx, write_ctx);
            }
            Row::Commit { hash, date, message, parents, in_ctx } => {
                varint::write_u64(out, 7);
                write_scope(out, hash, |o, h| write_bytes(o, h));
                out.extend_from_slice(&date.to_be_bytes());
                write_bytes(out, message);
                varint::write_u64(out, parents.len() as u64);
                for parent in parents {
                    write_scope(out, parent, |o, h| write_bytes(o, h));
                }
                write_scope(out, in_ctx, write_ctx);
            }
        }
    }

    /// Decodes one row, which must use all of `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Row, DecodeError> {
        RowRef::decode(bytes).map(|row| row.to_row())
    }

    /// The row, borrowed.
    pub fn as_ref(&self) -> RowRef<'_> {
        fn bytes(scope: &Scope<Vec<u8>>) -> Scope<&[u8]> {
            scope.map(|v| &v[..])
        }
        fn key(key: &Key) -> KeyRef<'_> {
            KeyRef(Steps::Owned(key))
        }
        match self {
            Row::Checkout { hash, ctx } => RowRef::Checkout { hash: bytes(hash), ctx: ctx.clone() },
            Row::Add { key: k, value, in_ctx, out_ctx } => {
                RowRef::Add { key: key(k), value, in_ctx: in_ctx.clone(), out_ctx: out_ctx.clone() }
            }
            Row::Remove { key: k, in_ctx, out_ctx } => {
                RowRef::Remove { key: key(k), in_ctx: in_ctx.clone(), out_ctx: out_ctx.clone() }
            }
            Row::Copy { source, target, in_ctx, out_ctx } => {
                RowRef::Copy { source: key(source), target: key(target), in_ctx: in_ctx.clone(), out_ctx: out_ctx.clone() }
            }
            Row::Find { key: k, found, ctx } => RowRef::Find { key: key(k), found: *found, ctx: ctx.clone() },
            Row::Mem { key: k, found, ctx } => RowRef::Mem { key: key(k), found: *found, ctx: ctx.clone() },
            Row::MemTree { key: k, found, ctx } => RowRef::MemTree { key: key(k), found: *found, ctx: ctx.clone() },
            Row::Commit { hash, date, message, parents, in_ctx } => RowRef::Commit {
                hash: bytes(hash),
                date: *date,
                message,
                parents: parents.iter().map(bytes).collect(),
                in_ctx: in_ctx.clone(),
            },
        }
    }
}

/// A path of a row, borrowed: its steps as the row encodes them (checked
/// when the row was decoded), or those of a [`Row`].
#[derive(Clone, Copy, Debug)]
pub struct KeyRef<'a>(Steps<'a>);

#[derive(Clone, Copy, Debug)]
enum Steps<'a> {
    /// `count` steps, each `varint length ‖ bytes`.
    Encoded {
        bytes: &'a [u8],
        count: usize,
    },
    Owned(&'a [Vec<u8>]),
}

impl<'a> KeyRef<'a> {
    /// How many steps.
    pub fn len(&self) -> usize {
        match self.0 {
            Steps::Encoded { count, .. } => count,
            Steps::Owned(steps) => steps.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The steps in order.
    pub fn steps(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let (mut encoded, owned) = match self.0 {
            Steps::Encoded { bytes, count } => (Some((Reader { bytes, pos: 0 }, count)), None),
            Steps::Owned(steps) => (None, Some(steps.iter().map(|s| &s[..]))),
        };
        // Encoded steps were checked when decoded: reading them again
        // cannot fail, and would only end early if it did.
        let encoded = std::iter::from_fn(move || {
            let (reader, left) = encoded.as_mut()?;
            *left = left.checked_sub(1)?;
            reader.bytes_ref().ok()
        });
        encoded.chain(owned.into_iter().flatten())
    }

    /// The path, copied.
    pub fn to_key(&self) -> Key {
        self.steps().map(<[u8]>::to_vec).collect()
    }
}

/// A row, borrowed from the bytes it was decoded from (or from a [`Row`]):
/// what a replay reads without copying each step and value.
#[derive(Clone, Debug)]
pub enum RowRef<'a> {
    Checkout { hash: Scope<&'a [u8]>, ctx: Scope<ContextId> },
    Add { key: KeyRef<'a>, value: &'a [u8], in_ctx: Scope<ContextId>, out_ctx: Scope<ContextId> },
    Remove { key: KeyRef<'a>, in_ctx: Scope<ContextId>, out_ctx: Scope<ContextId> },
    Copy { source: KeyRef<'a>, target: KeyRef<'a>, in_ctx: Scope<ContextId>, out_ctx: Scope<ContextId> },
    Find { key: KeyRef<'a>, found: bool, ctx: Scope<ContextId> },
    Mem { key: KeyRef<'a>, found: bool, ctx: Scope<ContextId> },
    MemTree { key: KeyRef<'a>, found: bool, ctx: Scope<ContextId> },
    Commit { hash: Scope<&'a [u8]>, date: i64, message: &'a [u8], parents: Vec<Scope<&'a [u8]>>, in_ctx: Scope<ContextId> },
}

impl<'a> RowRef<'a> {
    /// Decodes one row, which must use all of `bytes`, borrowing its steps
    /// and values from them.
    pub fn decode(bytes: &'a [u8]) -> Result<RowRef<'a>, DecodeError> {
        let mut r = Reader { bytes, pos: 0 };
        let row = match r.varint()? {
            0 => RowRef::Checkout { hash: r.scope(Reader::bytes_ref)?, ctx: r.scope(Reader::ctx)? },
            1 => RowRef::Add {
                key: r.key_ref()?,
                value: r.bytes_ref()?,
                in_ctx: r.scope(Reader::ctx)?,
                out_ctx: r.scope(Reader::ctx)?,
            },
            2 => RowRef::Remove { key: r.key_ref()?, in_ctx: r.scope(Reader::ctx)?, out_ctx: r.scope(Reader::ctx)? },
            3 => RowRef::Copy {
                source: r.key_ref()?,
                target: r.key_ref()?,
                in_ctx: r.scope(Reader::ctx)?,
                out_ctx: r.scope(Reader::ctx)?,
            },
            4 => RowRef::Find { key: r.key_ref()?, found: r.bool()?, ctx: r.scope(Reader::ctx)? },
            5 => RowRef::Mem { key: r.key_ref()?, found: r.bool()?, ctx: r.scope(Reader::ctx)? },
            6 => RowRef::MemTree { key: r.key_ref()?, found: r.bool()?, ctx: r.scope(Reader::ctx)? },
            7 => {
                let hash = r.scope(Reader::bytes_ref)?;
                let date = r.i64()?;
                let message = r.bytes_ref()?;
                let count = r.count()?;
                if count > MAX_PARENTS {
                    return Err(r.error(format!("{count} parents (at most {MAX_PARENTS})")));
                }
                let mut parents = Vec::with_capacity(count.min(16));
                for _ in 0..count {
                    parents.push(r.scope(Reader::bytes_ref)?);
                }
                RowRef::Commit { hash, date, message, parents, in_ctx: r.scope(Reader::ctx)? }
            }
            tag => return Err(r.error(format!("unknown row tag {tag}"))),
        };
        if r.pos != bytes.len() {
            return Err(r.error(format!("{} bytes left after the row", bytes.len() - r.pos)));
        }
        Ok(row)
    }

    /// The row, copied.
    pub fn to_row(&self) -> Row {
        let bytes = |scope: &Scope<&[u8]>| scope.map(|v| v.to_vec());
        match self {
            RowRef::Checkout { hash, ctx } => Row::Checkout { hash: bytes(hash), ctx: ctx.clone() },
            RowRef::Add { key, value, in_ctx, out_ctx } => {
                Row::Add { key: key.to_key(), value: value.to_vec(), in_ctx: in_ctx.clone(), out_ctx: out_ctx.clone() }
            }
            RowRef::Remove { key, in_ctx, out_ctx } => {
                Row::Remove { key: key.to_key(), in_ctx: in_ctx.clone(), out_ctx: out_ctx.clone() }
            }
            RowRef::Copy { source, target, in_ctx, out_ctx } => {
                Row::Copy { source: source.to_key(), target: target.to_key(), in_ctx: in_ctx.clone(), out_ctx: out_ctx.clone() }
            }
            RowRef::Find { key, found, ctx } => Row::Find { key: key.to_key(), found: *found, ctx: ctx.clone() },
            RowRef::Mem { key, found, ctx } => Row::Mem { key: key.to_key(), found: *found, ctx: ctx.clone() },
            RowRef::MemTree { key, found, ctx } => Row::MemTree { key: key.to_key(), found: *found, ctx: ctx.clone() },
            RowRef::Commit { hash, date, message, parents, in_ctx } => Row::Commit {
                hash: bytes(hash),
                date: *date,
                message: message.to_vec(),
                parents: parents.iter().map(bytes).collect(),
                in_ctx: in_ctx.clone(),
            },
        }
    }
}

/// Where a row failed to decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// Byte offset inside the row.
    pub at: usize,
    pub reason: String,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (byte {} of the row)", self.reason, self.at)
    }
}

fn write_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    varint::write_u64(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn write_key(out: &mut Vec<u8>, key: &Key) {
    varint::write_u64(out, key.len() as u64);
    for step in key {
        write_bytes(out, step);
    }
}

fn write_ctx(out: &mut Vec<u8>, ctx: &ContextId) {
    out.extend_from_slice(&ctx.to_be_bytes());
}

fn write_scope<T>(out: &mut Vec<u8>, scope: &Scope<T>, write: impl Fn(&mut Vec<u8>, &T)) {
    match scope {
        Scope::Forget(v) => {
            out.push(0);
            write(out, v);
        }
        Scope::Keep(v) => {
            out.push(1);
            write(out, v);
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn error(&self, reason: impl Into<String>) -> DecodeError {
        DecodeError { at: self.pos, reason: reason.into() }
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let at = self.pos;
        varint::read_u64(self.bytes, &mut self.pos).map_err(|e| DecodeError { at, reason: e.to_string() })
    }

    /// A length or count, which cannot exceed the bytes left.
    fn count(&mut self) -> Result<usize, DecodeError> {
        let n = self.varint()?;
        let left = (self.bytes.len() - self.pos) as u64;
        if n > left {
            return Err(self.error(format!("length {n} but only {left} bytes left")));
        }
        Ok(n as usize)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.bytes.len() - self.pos < n {
            return Err(self.error(format!("truncated: {n} bytes needed")));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn bytes_ref(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.count()?;
        self.take(n)
    }

    /// A key's steps, checked and borrowed.
    fn key_ref(&mut self) -> Result<KeyRef<'a>, DecodeError> {
        let count = self.count()?;
        if count > MAX_KEY_STEPS {
            return Err(self.error(format!("a key of {count} steps (at most {MAX_KEY_STEPS})")));
        }
        let start = self.pos;
        for _ in 0..count {
            self.bytes_ref()?;
        }
        Ok(KeyRef(Steps::Encoded { bytes: &self.bytes[start..self.pos], count }))
    }

    fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.take(1)?[0] {
            0 => Ok(false),
            0xff => Ok(true),
            other => Err(self.error(format!("bad bool byte {other:#04x}"))),
        }
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn ctx(&mut self) -> Result<ContextId, DecodeError> {
        self.i64()
    }

    fn scope<T>(&mut self, read: impl Fn(&mut Self) -> Result<T, DecodeError>) -> Result<Scope<T>, DecodeError> {
        match self.take(1)?[0] {
            0 => Ok(Scope::Forget(read(self)?)),
            1 => Ok(Scope::Keep(read(self)?)),
            other => Err(self.error(format!("bad scope tag {other}"))),
        }
    }
}

/// The bytes that start a trace file: magic, version and the empty header.
pub fn file_header() -> Vec<u8> {
    let mut out = Vec::with_capacity(13);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    varint::write_u64(&mut out, 0);
    out
}

/// Appends a row with its length prefix.
pub fn append_row(out: &mut Vec<u8>, row: &Row) {
    let mut body = Vec::with_capacity(64);
    row.encode(&mut body);
    varint::write_u64(out, body.len() as u64);
    out.extend_from_slice(&body);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample_rows() -> Vec<Row> {
        let key = vec![b"contracts".to_vec(), b"index".to_vec()];
        vec![
            Row::Checkout { hash: Scope::Keep(b"CoV...".to_vec()), ctx: Scope::Forget(7) },
            Row::Add { key: key.clone(), value: vec![1, 2, 3], in_ctx: Scope::Forget(0), out_ctx: Scope::Keep(1) },
            Row::Remove { key: key.clone(), in_ctx: Scope::Keep(1), out_ctx: Scope::Keep(2) },
            Row::Copy { source: key.clone(), target: vec![b"x".to_vec()], in_ctx: Scope::Forget(2), out_ctx: Scope::Keep(3) },
            Row::Find { key: key.clone(), found: true, ctx: Scope::Keep(3) },
            Row::Mem { key: key.clone(), found: false, ctx: Scope::Keep(3) },
            Row::MemTree { key, found: true, ctx: Scope::Keep(3) },
            Row::Commit {
                hash: Scope::Keep(b"h".to_vec()),
                date: -5,
                message: b"block 1".to_vec(),
                parents: vec![Scope::Forget(b"p".to_vec())],
                in_ctx: Scope::Forget(3),
            },
        ]
    }

    #[test]
    fn rows_round_trip() {
        for row in sample_rows() {
            let mut bytes = Vec::new();
            row.encode(&mut bytes);
            assert_eq!(Row::decode(&bytes).unwrap(), row);
            for cut in 0..bytes.len() {
                assert!(Row::decode(&bytes[..cut]).is_err(), "{} truncated at {cut} accepted", row.kind());
            }
        }
    }

    /// A row read borrowed holds what the row holds: its steps in order,
    /// its values, and copies back to the same row; a row borrowed from a
    /// `Row` too.
    #[test]
    fn rows_borrowed_hold_the_same() {
        for row in sample_rows() {
            let mut bytes = Vec::new();
            row.encode(&mut bytes);
            let borrowed = RowRef::decode(&bytes).unwrap();
            assert_eq!(borrowed.to_row(), row);
            assert_eq!(row.as_ref().to_row(), row);
            if let (RowRef::Add { key, value, .. }, Row::Add { key: steps, value: bytes, .. }) = (&borrowed, &row) {
                assert_eq!(key.len(), steps.len());
                assert_eq!(key.steps().collect::<Vec<_>>(), steps.iter().map(|s| &s[..]).collect::<Vec<_>>());
                assert_eq!(value, bytes);
            }
        }
    }

    proptest! {
        // No file beside the source: a failure prints its input, never
        // writes into the checkout (see pando-core's tests/support/seeds.rs).
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn decoding_random_bytes_never_panics(bytes: Vec<u8>) {
            let _ = Row::decode(&bytes);
        }
    }
}

/// Finds the last occurrence of every context id and commit hash of a
/// trace, so that a recording made with `Keep` everywhere can be rewritten
/// with `Forget` at each last occurrence (which lets a replayer drop what
/// it holds). Two passes: [`Scoper::note`] every row in order, then
/// [`Scoper::apply`] to every row in the same order.
#[derive(Default)]
pub struct Scoper {
    last_ctx: std::collections::HashMap<ContextId, u64>,
    last_hash: std::collections::HashMap<Vec<u8>, u64>,
}

impl Scoper {
    fn visit(row: &mut Row, f: &mut dyn FnMut(Ref<'_>)) {
        match row {
            Row::Checkout { hash, ctx } => {
                f(Ref::Hash(hash));
                f(Ref::Ctx(ctx));
            }
            Row::Add { in_ctx, out_ctx, .. } | Row::Remove { in_ctx, out_ctx, .. } | Row::Copy { in_ctx, out_ctx, .. } => {
                f(Ref::Ctx(in_ctx));
                f(Ref::Ctx(out_ctx));
            }
            Row::Find { ctx, .. } | Row::Mem { ctx, .. } | Row::MemTree { ctx, .. } => f(Ref::Ctx(ctx)),
            Row::Commit { hash, parents, in_ctx, .. } => {
                for parent in parents {
                    f(Ref::Hash(parent));
                }
                f(Ref::Ctx(in_ctx));
                f(Ref::Hash(hash));
            }
        }
    }

    /// First pass: row number `index` occurs.
    pub fn note(&mut self, index: u64, row: &Row) {
        let mut row = row.clone();
        Scoper::visit(&mut row, &mut |r| match r {
            Ref::Ctx(scope) => {
                self.last_ctx.insert(*scope.value(), index);
            }
            Ref::Hash(scope) => {
                self.last_hash.insert(scope.value().clone(), index);
            }
        });
    }

    /// Second pass: marks the last occurrences in row `index` as `Forget`.
    pub fn apply(&self, index: u64, row: &mut Row) {
        Scoper::visit(row, &mut |r| match r {
            Ref::Ctx(scope) => {
                let id = *scope.value();
                *scope = if self.last_ctx.get(&id) == Some(&index) { Scope::Forget(id) } else { Scope::Keep(id) };
            }
            Ref::Hash(scope) => {
                let last = self.last_hash.get(scope.value()) == Some(&index);
                let value = scope.value().clone();
                *scope = if last { Scope::Forget(value) } else { Scope::Keep(value) };
            }
        });
    }
}

enum Ref<'a> {
    Ctx(&'a mut Scope<ContextId>),
    Hash(&'a mut Scope<Vec<u8>>),
}
