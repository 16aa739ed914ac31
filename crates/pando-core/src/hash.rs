//! Context hashes: BLAKE2b-256 digests, their hex and base58check forms.
//!
//! The printed form of a Tezos context hash is base58check of the 2-byte
//! prefix `\079\199` followed by the 32 digest bytes, which always gives 52
//! characters starting with `Co`.

use std::fmt;

use crate::Error;

/// The base58check prefix of Tezos context hashes (`Co...`).
pub const CONTEXT_HASH_PREFIX: [u8; 2] = [79, 199];
/// Size of a digest in bytes.
pub const HASH_SIZE: usize = 32;

/// A BLAKE2b-256 digest identifying a contents, a node, an inode or a commit.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Hash(pub [u8; HASH_SIZE]);

impl Hash {
    /// BLAKE2b-256 of `bytes`.
    pub fn of_bytes(bytes: &[u8]) -> Hash {
        let digest = blake2b_simd::Params::new().hash_length(HASH_SIZE).hash(bytes);
        Hash::from_slice(digest.as_bytes()).expect("the digest has the requested length")
    }

    /// BLAKE2b-256 of each input, several at once: on AVX2 four inputs
    /// share the vector lanes, about twice the throughput of one at a time.
    pub fn of_many<'a>(inputs: impl IntoIterator<Item = &'a [u8]>) -> Vec<Hash> {
        let mut params = blake2b_simd::Params::new();
        params.hash_length(HASH_SIZE);
        let mut jobs: Vec<_> = inputs.into_iter().map(|input| blake2b_simd::many::HashManyJob::new(&params, input)).collect();
        blake2b_simd::many::hash_many(jobs.iter_mut());
        jobs.iter().map(|job| Hash::from_slice(job.to_hash().as_bytes()).expect("the digest has the requested length")).collect()
    }

    /// BLAKE2b-256 of the parts end to end, without copying them together.
    pub fn of_parts(parts: &[&[u8]]) -> Hash {
        let mut state = blake2b_simd::Params::new().hash_length(HASH_SIZE).to_state();
        for part in parts {
            state.update(part);
        }
        Hash::from_slice(state.finalize().as_bytes()).expect("the digest has the requested length")
    }

    pub fn as_bytes(&self) -> &[u8; HASH_SIZE] {
        &self.0
    }

    /// Reads a hash from exactly 32 bytes.
    pub fn from_slice(bytes: &[u8]) -> Option<Hash> {
        <[u8; HASH_SIZE]>::try_from(bytes).ok().map(Hash)
    }

    /// The base58check `Co...` form used by Octez.
    pub fn to_base58(&self) -> String {
        let mut payload = Vec::with_capacity(2 + HASH_SIZE);
        payload.extend_from_slice(&CONTEXT_HASH_PREFIX);
        payload.extend_from_slice(&self.0);
        bs58::encode(payload).with_check().into_string()
    }

    /// Parses the base58check `Co...` form, checking prefix and checksum.
    pub fn from_base58(text: &str) -> Result<Hash, Error> {
        let bad = |reason| Error::BadHashText { text: text.to_string(), reason };
        let bytes =
            bs58::decode(text).with_check(None).into_vec().map_err(|_| bad("not base58check (bad character or checksum)"))?;
        if bytes.len() != 2 + HASH_SIZE {
            return Err(bad("wrong length"));
        }
        if bytes[..2] != CONTEXT_HASH_PREFIX {
            return Err(bad("not a context hash (prefix is not Co)"));
        }
        Ok(Hash::from_slice(&bytes[2..]).expect("length checked above"))
    }

    /// Lower-case hexadecimal.
    pub fn to_hex(&self) -> String {
        let mut out = String::with_capacity(2 * HASH_SIZE);
        for byte in self.0 {
            out.push_str(&format!("{byte:02x}"));
        }
        out
    }

    /// Parses either the `Co...` form or 64 hex digits.
    pub fn parse(text: &str) -> Result<Hash, Error> {
        if text.len() == 2 * HASH_SIZE && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            let mut out = [0u8; HASH_SIZE];
            for (i, chunk) in text.as_bytes().chunks(2).enumerate() {
                let digits = std::str::from_utf8(chunk).expect("ascii hex digits");
                out[i] = u8::from_str_radix(digits, 16).expect("checked hex digits");
            }
            return Ok(Hash(out));
        }
        Hash::from_base58(text)
    }
}

/// `"Co...".parse::<Hash>()` or 64 hex digits, as [`Hash::parse`].
impl std::str::FromStr for Hash {
    type Err = Error;
    fn from_str(text: &str) -> Result<Hash, Error> {
        Hash::parse(text)
    }
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_base58())
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hash({})", self.to_base58())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_with_str_parse() {
        let h = Hash::of_bytes(b"pando");
        assert_eq!(h.to_base58().parse::<Hash>().unwrap(), h);
        assert_eq!(h.to_hex().parse::<Hash>().unwrap(), h);
        assert!("Co".parse::<Hash>().is_err());
    }

    #[test]
    fn base58_round_trip_and_rejects() {
        let h = Hash::of_bytes(b"pando");
        let text = h.to_base58();
        assert_eq!(text.len(), 52);
        assert!(text.starts_with("Co"));
        assert_eq!(Hash::from_base58(&text).unwrap(), h);
        assert_eq!(Hash::parse(&h.to_hex()).unwrap(), h);
        let mut broken = text.clone().into_bytes();
        broken[10] = if broken[10] == b'a' { b'b' } else { b'a' };
        assert!(Hash::from_base58(std::str::from_utf8(&broken).unwrap()).is_err());
        assert!(Hash::from_base58("").is_err());
        assert!(Hash::from_base58("0OIl").is_err());
    }
}
