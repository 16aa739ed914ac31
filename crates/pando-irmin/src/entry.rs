//! Pack entries: the objects of an irmin-pack store.
//!
//! Every entry irmin-pack 3 writes is `hash[32] ‖ kind ‖ LEB128 length ‖
//! body[length]` (`pack_value.ml`; for contents the length is the value's
//! own length prefix, so the body is the value):
//!
//! | kind | object | body |
//! |---|---|---|
//! | `B` | contents | the value's bytes |
//! | `D` | commit | `Commit_direct`: node address, parent addresses, date, author, message |
//! | `P` | dangling parent commit | as `D`; a parent kept by a collection for its hash only |
//! | `R` / `O` | root / non-root inode | `Compress.v` (`inode.ml`): `Values` or `Tree` |
//!
//! An address is `00 ‖ int63 offset` or `01 ‖ hash[32]` (the latter only
//! when irmin did not know the offset; resolving it needs irmin's index).
//! Entries of irmin-pack 1 and 2 (`C`, `I`, `N`) have no length header and
//! are refused.
//!
//! Invariants: decoding never panics, and a body must be consumed exactly;
//! every error names the file and byte of the entry at fault (or of the
//! entry whose pointer is at fault).

use pando_core::{Hash, Kind};

use crate::dict::Dict;
use crate::error::{Error, Result};
use crate::read::Cursor;
use crate::space::{Place, Space};

/// Largest body accepted (irmin's own values are far smaller).
const MAX_BODY: u64 = 1 << 30;

/// The kind of an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    Contents,
    Commit,
    DanglingParent,
    Root,
    Inode,
}

/// Where an entry lies: its file and byte there (for errors).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loc {
    pub file: String,
    pub offset: u64,
}

impl Loc {
    pub fn error(&self, reason: impl Into<String>) -> Error {
        Error::Corrupt { file: self.file.clone(), offset: self.offset, reason: reason.into() }
    }
}

/// One entry, read whole.
pub struct Entry {
    /// Its global offset.
    pub offset: u64,
    pub hash: Hash,
    pub kind: EntryKind,
    pub body: Vec<u8>,
    pub loc: Loc,
    /// File byte of the body.
    pub body_at: u64,
    /// Bytes of the entry on disk.
    pub size: u64,
}

/// How a child is referred to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Address {
    Offset(u64),
    Hash(Hash),
}

/// A decoded commit.
#[derive(Clone, Debug)]
pub struct CommitBody {
    pub node: Address,
    pub parents: Vec<Address>,
    pub date: i64,
    pub author: String,
    pub message: String,
}

/// A decoded inode.
pub enum InodeBody {
    /// At most 32 entries: name, kind, address.
    Values(Vec<(Vec<u8>, Kind, Address)>),
    /// Pointers `(index, address)` to the inodes one level down.
    Tree { depth: u64, length: u64, pointers: Vec<(u8, Address)> },
}

/// An entry's header: what a scan needs.
pub struct Header {
    pub hash: Hash,
    pub kind: EntryKind,
    /// Bytes of the header (hash, kind, length).
    pub header: u64,
    /// Bytes of the whole entry.
    pub size: u64,
    pub loc: Loc,
    place: Place,
}

/// Reads the header of the entry at `offset`; `from` is where the pointer
/// to it was found.
pub fn header(space: &mut Space, offset: u64, from: &Loc) -> Result<Header> {
    let place = space.place(offset).map_err(|reason| from.error(format!("a pointer to a missing object: {reason}")))?;
    let loc = Loc { file: space.file_name(&place).to_string(), offset: place.file_offset };
    let mut head = [0u8; 43];
    let n = head.len().min(place.available as usize);
    space.read(&place, &mut head[..n])?;
    let mut c = Cursor::new(&head[..n], &loc.file, loc.offset);
    let hash = c.hash("entry hash")?;
    let kind = match c.u8("entry kind")? {
        b'B' => EntryKind::Contents,
        b'D' => EntryKind::Commit,
        b'P' => EntryKind::DanglingParent,
        b'R' => EntryKind::Root,
        b'O' => EntryKind::Inode,
        k @ (b'C' | b'I' | b'N') => {
            return Err(Error::Unsupported(format!(
                "{} at byte {}: an entry of irmin-pack 1 or 2 (kind {:?}), which has no length header",
                loc.file, loc.offset, k as char
            )));
        }
        k => return Err(loc.error(format!("unknown entry kind byte {k:#04x}"))),
    };
    let len = c.int("entry length")?;
    let header = c.pos() as u64;
    if len > MAX_BODY || header + len > place.available {
        return Err(loc.error(format!(
            "an entry of {} bytes, but its run holds {} (truncated, or a damaged length)",
            header.saturating_add(len),
            place.available
        )));
    }
    Ok(Header { hash, kind, header, size: header + len, loc, place })
}

/// Reads the entry at `offset` whole; `from` is where the pointer to it
/// was found.
pub fn read(space: &mut Space, offset: u64, from: &Loc) -> Result<Entry> {
    let Header { hash, kind, header, size, loc, place } = self::header(space, offset, from)?;
    // The header was read: only the body is.
    let mut body = vec![0u8; (size - header) as usize];
    space.read(&place.skip(header), &mut body)?;
    Ok(Entry { offset, hash, kind, body, body_at: loc.offset + header, size, loc })
}

/// Checks that names are sorted and unique (`what` says where they are).
pub fn check_sorted<T>(entries: &[(Vec<u8>, Kind, T)], loc: &Loc, what: &str) -> Result<()> {
    if entries.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err(loc.error(format!("{what}: names not sorted, or one held twice")));
    }
    Ok(())
}

impl Entry {
    /// The offset `address` names, as a pointer of this entry: irmin
    /// writes children before their parents, so it must be below this
    /// entry's (which also keeps every walk free of cycles).
    pub fn child(&self, address: Address) -> Result<u64> {
        match address {
            Address::Offset(offset) if offset < self.offset => Ok(offset),
            Address::Offset(offset) => Err(self.loc.error(format!(
                "a pointer forward, to offset {offset} from this entry at {} (irmin writes children first)",
                self.offset
            ))),
            Address::Hash(hash) => Err(Error::Unsupported(format!(
                "{} at byte {}: a pointer by hash ({hash}), which only irmin's index resolves",
                self.loc.file, self.loc.offset
            ))),
        }
    }

    /// Checks that `found`, the hash of what the entry holds, is the one
    /// irmin recorded; `what` names the object in the error.
    pub fn verify(&self, what: &'static str, found: Hash) -> Result<()> {
        if found == self.hash {
            return Ok(());
        }
        Err(Error::HashMismatch { file: self.loc.file.clone(), offset: self.loc.offset, what, found, stored: self.hash })
    }

    /// The contents `address` names, read and re-hashed.
    pub fn contents(&self, space: &mut Space, address: Address) -> Result<Entry> {
        let contents = read(space, self.child(address)?, &self.loc)?;
        contents.expect(&[EntryKind::Contents], "a contents")?;
        let found = pando_core::tezos::contents_hash(&contents.body);
        contents.verify("contents", found)?;
        Ok(contents)
    }

    fn cursor(&self) -> Cursor<'_> {
        Cursor::new(&self.body, &self.loc.file, self.body_at)
    }

    /// Checks that the entry is of `kind`.
    pub fn expect(&self, kinds: &[EntryKind], what: &str) -> Result<()> {
        if kinds.contains(&self.kind) {
            Ok(())
        } else {
            Err(self.loc.error(format!("{what} expected, found a {:?} entry", self.kind)))
        }
    }

    /// A commit's body.
    pub fn commit(&self) -> Result<CommitBody> {
        self.expect(&[EntryKind::Commit, EntryKind::DanglingParent], "a commit")?;
        let mut c = self.cursor();
        let node = address(&mut c)?;
        let n = c.int_at_most(c.remaining() as u64, "parent count")?;
        let parents = (0..n).map(|_| address(&mut c)).collect::<Result<Vec<_>>>()?;
        let date = c.int63("date")? as i64;
        let text = |c: &mut Cursor<'_>, what: &str| -> Result<String> {
            let at = c.pos();
            let bytes = c.string(what)?;
            String::from_utf8(bytes.to_vec()).map_err(|_| {
                Error::Unsupported(format!(
                    "{} at byte {}: a commit {what} that is not UTF-8",
                    self.loc.file,
                    self.body_at + at as u64
                ))
            })
        };
        let author = text(&mut c, "author")?;
        let message = text(&mut c, "message")?;
        end(&c)?;
        Ok(CommitBody { node, parents, date, author, message })
    }

    /// An inode's body, its names resolved through `dict`.
    pub fn inode(&self, dict: &Dict) -> Result<InodeBody> {
        self.expect(&[EntryKind::Root, EntryKind::Inode], "an inode")?;
        let mut c = self.cursor();
        let body = match c.tag("inode tag")? {
            0 => {
                let n = c.int_at_most(32, "inode entry count")?;
                let mut values = Vec::with_capacity(n);
                for _ in 0..n {
                    let at = c.pos();
                    let tag = c.tag("entry tag")?;
                    if tag > 11 {
                        return Err(Error::Corrupt {
                            file: self.loc.file.clone(),
                            offset: self.body_at + at as u64,
                            reason: format!("entry tag {tag} (0 to 11 exist)"),
                        });
                    }
                    // Tags in groups of three: contents, contents with
                    // metadata (none in Tezos: it adds no bytes), node;
                    // the groups: dict id and offset, dict id and hash,
                    // name and offset, name and hash.
                    let kind = if tag % 3 == 2 { Kind::Dir } else { Kind::Contents };
                    let name = if tag < 6 {
                        let id = c.int("dict id")?;
                        dict.get(id)
                            .ok_or_else(|| c.error(format!("dict id {id}, but the dictionary holds {} names", dict.len())))?
                            .to_vec()
                    } else {
                        c.string("name")?.to_vec()
                    };
                    let address =
                        if (tag / 3) % 2 == 0 { Address::Offset(c.int63("offset")?) } else { Address::Hash(c.hash("hash")?) };
                    values.push((name, kind, address));
                }
                InodeBody::Values(values)
            }
            1 => {
                let depth = c.int("depth")?;
                let length = c.int("length")?;
                let n = c.int_at_most(32, "pointer count")?;
                let mut pointers = Vec::with_capacity(n);
                for _ in 0..n {
                    let index = c.int_at_most(31, "pointer index")? as u8;
                    pointers.push((index, address(&mut c)?));
                }
                InodeBody::Tree { depth, length, pointers }
            }
            t => return Err(c.error(format!("inode tag {t} (0 or 1 exist)"))),
        };
        end(&c)?;
        Ok(body)
    }
}

fn address(c: &mut Cursor<'_>) -> Result<Address> {
    match c.tag("address tag")? {
        0 => Ok(Address::Offset(c.int63("offset")?)),
        1 => Ok(Address::Hash(c.hash("hash")?)),
        t => Err(c.error(format!("address tag {t} (0 or 1 exist)"))),
    }
}

fn end(c: &Cursor<'_>) -> Result<()> {
    if c.remaining() == 0 { Ok(()) } else { Err(c.error(format!("{} bytes left after the body", c.remaining()))) }
}
