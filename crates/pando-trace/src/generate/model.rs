//! The generator's model of the context: enough structure to know the
//! answer of every read it records, without a map of every path.

use pando_core::trace::Key;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::preset::{MAX_VALUE_BYTES, VALUE_SIZE_SHARES};

/// SplitMix64: a fixed mixing function, so names do not depend on the RNG stream.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Lower-case hex of `bytes`, as a step.
pub fn hex_step(bytes: impl AsRef<[u8]>) -> Vec<u8> {
    bytes.as_ref().iter().flat_map(|b| [b"0123456789abcdef"[(b >> 4) as usize], b"0123456789abcdef"[(b & 15) as usize]]).collect()
}

fn mixed_bytes(seed: u64, n: usize) -> Vec<u8> {
    (0..n.div_ceil(8) as u64).flat_map(|i| mix(seed ^ mix(i)).to_be_bytes()).take(n).collect()
}

/// The fields an account may have, as steps below `contracts/index/<address>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Balance,
    Counter,
    Delegate,
    Script,
    Storage,
    UsedBytes,
    PaidBytes,
}

impl Field {
    fn steps(self) -> &'static [&'static [u8]] {
        match self {
            Field::Balance => &[b"balance"],
            Field::Counter => &[b"counter"],
            Field::Delegate => &[b"delegate"],
            Field::Script => &[b"data", b"code"],
            Field::Storage => &[b"data", b"storage"],
            Field::UsedBytes => &[b"used_bytes"],
            Field::PaidBytes => &[b"paid_bytes"],
        }
    }
}

/// A set of fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fields(u8);

impl Fields {
    pub fn contains(self, field: Field) -> bool {
        self.0 & (1 << field as u8) != 0
    }
    pub fn insert(&mut self, field: Field) {
        self.0 |= 1 << field as u8;
    }
}

pub struct Account {
    /// 22 bytes as 44 hex digits.
    pub address: Vec<u8>,
    pub fields: Fields,
    pub alive: bool,
}

impl Account {
    pub fn new(id: u32, seed: u64) -> Account {
        Account { address: hex_step(mixed_bytes(mix(seed) ^ u64::from(id), 22)), fields: Fields::default(), alive: true }
    }

    pub fn path(&self) -> Key {
        vec![b"contracts".to_vec(), b"index".to_vec(), self.address.clone()]
    }

    /// Implicit accounts (no script) are removed when emptied.
    pub fn removable(&self) -> bool {
        !self.fields.contains(Field::Script)
    }

    pub fn kill(&mut self) {
        self.alive = false;
        self.fields = Fields::default();
    }
}

pub fn field_key(path: &Key, field: Field) -> Key {
    let mut key = path.clone();
    key.extend(field.steps().iter().map(|s| s.to_vec()));
    key
}

/// A big map and its live entries.
pub struct BigMap {
    pub id: u64,
    next_entry: u64,
    live: Vec<u64>,
}

impl BigMap {
    pub fn new(id: u64) -> BigMap {
        BigMap { id, next_entry: 0, live: Vec::new() }
    }

    /// The entry the next insert creates.
    pub fn peek_next(&self) -> u64 {
        self.next_entry
    }

    pub fn insert(&mut self) -> u64 {
        let entry = self.next_entry;
        self.next_entry += 1;
        self.live.push(entry);
        entry
    }

    pub fn live_count(&self) -> usize {
        self.live.len()
    }

    pub fn pick(&self, rng: &mut ChaCha8Rng) -> u64 {
        self.live[rng.gen_range(0..self.live.len())]
    }

    pub fn remove(&mut self, entry: u64) {
        if let Some(i) = self.live.iter().position(|&e| e == entry) {
            self.live.swap_remove(i);
        }
    }
}

/// The 32-byte key hash of a big map entry.
pub fn entry_hash(map: u64, entry: u64) -> Vec<u8> {
    mixed_bytes(mix(map.wrapping_mul(0x1000_0000_01b3)) ^ entry, 32)
}

/// `big_maps/index/<id>/<rest>`.
pub fn big_map_key(id: u64, rest: &[&[u8]]) -> Key {
    let mut key = vec![b"big_maps".to_vec(), b"index".to_vec(), id.to_string().into_bytes()];
    key.extend(rest.iter().map(|s| s.to_vec()));
    key
}

/// A value size following the published distribution, tail included.
pub fn value_size(rng: &mut ChaCha8Rng) -> usize {
    let mut p: f64 = rng.r#gen();
    for (size, share) in VALUE_SIZE_SHARES {
        if p < share {
            return size;
        }
        p -= share;
    }
    tail_size(rng, 512)
}

/// Log-uniform between `min` and 256 KB.
fn tail_size(rng: &mut ChaCha8Rng, min: usize) -> usize {
    let (low, high) = ((min as f64).ln(), (MAX_VALUE_BYTES as f64).ln());
    rng.gen_range(low..high).exp() as usize
}

/// A contract script: a long-tail value of 1 KB and more.
pub fn script(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let len = tail_size(rng, 1024);
    let mut value = vec![0u8; len];
    rng.fill(&mut value[..]);
    value
}
