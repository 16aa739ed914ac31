//! Unsigned LEB128 and fixed big-endian integers, as the Tezos encodings use them.
//!
//! Invariant: `read_u64` never reads past the slice and rejects encodings
//! longer than 10 bytes or overflowing 64 bits.

use crate::Error;

/// Appends `value` as unsigned LEB128.
pub fn write_u64(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Number of bytes `write_u64(value)` appends.
pub fn len_u64(value: u64) -> usize {
    let bits = 64 - value.leading_zeros() as usize;
    bits.div_ceil(7).max(1)
}

/// Reads an unsigned LEB128 integer at `*pos`, advancing `*pos`.
pub fn read_u64(bytes: &[u8], pos: &mut usize) -> Result<u64, Error> {
    let start = *pos;
    let mut value: u64 = 0;
    for i in 0..10 {
        let Some(&byte) = bytes.get(*pos) else {
            return Err(Error::Truncated { at: *pos, needed: 1 });
        };
        *pos += 1;
        let chunk = u64::from(byte & 0x7f);
        if i == 9 && (byte & 0x7f) > 1 {
            return Err(Error::VarintOverflow { at: start });
        }
        value |= chunk << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(Error::VarintOverflow { at: start })
}

/// Appends `value` as 8 bytes big-endian.
pub fn write_be64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn spec_example() {
        let mut out = Vec::new();
        write_u64(&mut out, 1_298_532);
        assert_eq!(out, vec![228, 160, 79]);
        assert_eq!(len_u64(1_298_532), 3);
        assert_eq!(len_u64(0), 1);
    }

    #[test]
    fn rejects_overflow_and_truncation() {
        assert!(read_u64(&[0xff; 11], &mut 0).is_err());
        assert!(read_u64(&[0x80], &mut 0).is_err());
        let mut max = Vec::new();
        write_u64(&mut max, u64::MAX);
        assert_eq!(read_u64(&max, &mut 0).unwrap(), u64::MAX);
        let mut too_big = max.clone();
        too_big[9] = 0x02;
        assert!(read_u64(&too_big, &mut 0).is_err());
    }

    proptest! {
        // No file beside the source: a failure prints its input, never
        // writes into the checkout (see pando-core's tests/support/seeds.rs).
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn round_trip(value: u64) {
            let mut out = Vec::new();
            write_u64(&mut out, value);
            prop_assert_eq!(out.len(), len_u64(value));
            let mut pos = 0;
            prop_assert_eq!(read_u64(&out, &mut pos).unwrap(), value);
            prop_assert_eq!(pos, out.len());
        }

        #[test]
        fn never_panics(bytes: Vec<u8>) {
            let _ = read_u64(&bytes, &mut 0);
        }
    }
}
