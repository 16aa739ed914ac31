//! OCaml's runtime string hash (`Hashtbl.seeded_hash` on a string).
//!
//! irmin places the entry named `s` of an inode at depth `d` in child
//! `ocaml_hash(d, s) mod 32`. This is OCaml's `caml_hash_mix_string` followed
//! by `caml_hash`'s final mix, masked to 30 bits (OCaml's non-negative int).

#[inline]
fn mix(h: u32, w: u32) -> u32 {
    let w = w.wrapping_mul(0xcc9e_2d51).rotate_left(15).wrapping_mul(0x1b87_3593);
    let h = (h ^ w).rotate_left(13);
    h.wrapping_mul(5).wrapping_add(0xe654_6b64)
}

/// The OCaml runtime hash of `bytes` with `seed`, in `0 .. 2^30`.
pub fn ocaml_hash(seed: u32, bytes: &[u8]) -> u32 {
    let mut h = seed;
    let mut chunks = bytes.chunks_exact(4);
    for chunk in &mut chunks {
        h = mix(h, u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = 0u32;
        for (i, &byte) in rest.iter().enumerate() {
            w |= u32::from(byte) << (8 * i);
        }
        h = mix(h, w);
    }
    // OCaml mixes the length as a 32-bit value.
    h ^= bytes.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h & 0x3fff_ffff
}
