//! RFC 7541 §5.2 / Appendix B Huffman code: encoding, and decoding four bits at a time
//! through a state table built at compile time from the code lengths.

use super::error::Error;

/// Code length in bits of each symbol, 256 being EOS (RFC 7541 Appendix B). The code is
/// canonical (codes of one length are consecutive, in symbol order), so the lengths alone
/// define it: `CODES` is derived from them, and tests check a few codes against the RFC.
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

const fn canonical_codes() -> [u32; 257] {
    let mut codes = [0u32; 257];
    let mut code = 0u32;
    let mut len = 5;
    while len <= 30 {
        let mut sym = 0;
        while sym < 257 {
            if LENGTHS[sym] == len {
                codes[sym] = code;
                code += 1;
            }
            sym += 1;
        }
        code <<= 1;
        len += 1;
    }
    codes
}

const CODES: [u32; 257] = canonical_codes();

/// A decoder transition: after feeding a nibble from `state`, the new state, the symbol
/// emitted if `flags & EMIT`, and whether the input may end there (`ACCEPT`: the bits
/// since the last symbol are at most 7 ones, the EOS prefix §5.2 allows as padding).
#[derive(Clone, Copy)]
struct Step {
    next: u8,
    sym: u8,
    flags: u8,
}

const EMIT: u8 = 1;
/// The nibble completed EOS, which §5.2 forbids inside a string.
const FAIL: u8 = 2;
const ACCEPT: u8 = 4;

/// The code tree has 257 leaves, so 256 internal nodes: those are the decoder's states
/// (0 is the root). A child below 0 is the leaf of symbol `-child - 1`.
const fn build_table() -> [[Step; 16]; 256] {
    let mut children = [[0i16; 2]; 256];
    let mut depth = [0u8; 256];
    let mut ones = [false; 256];
    ones[0] = true;
    let mut free = 1;
    let mut sym = 0;
    while sym < 257 {
        let len = LENGTHS[sym] as u32;
        let mut node = 0usize;
        let mut i = 0;
        while i < len {
            let bit = ((CODES[sym] >> (len - 1 - i)) & 1) as usize;
            if i + 1 == len {
                children[node][bit] = -(sym as i16) - 1;
            } else {
                if children[node][bit] == 0 {
                    children[node][bit] = free as i16;
                    depth[free] = depth[node] + 1;
                    ones[free] = ones[node] && bit == 1;
                    free += 1;
                }
                node = children[node][bit] as usize;
            }
            i += 1;
        }
        sym += 1;
    }
    let mut table = [[Step {
        next: 0,
        sym: 0,
        flags: 0,
    }; 16]; 256];
    let mut state = 0;
    while state < 256 {
        let mut nibble = 0;
        while nibble < 16 {
            let mut node = state;
            let mut step = Step {
                next: 0,
                sym: 0,
                flags: 0,
            };
            let mut b = 0;
            while b < 4 {
                let bit = (nibble >> (3 - b)) & 1;
                let child = children[node][bit];
                if child < 0 {
                    let s = -(child + 1);
                    if s == 256 {
                        step.flags |= FAIL;
                    } else {
                        step.flags |= EMIT;
                        step.sym = s as u8;
                    }
                    node = 0;
                } else {
                    node = child as usize;
                }
                b += 1;
            }
            step.next = node as u8;
            if node == 0 || (ones[node] && depth[node] <= 7) {
                step.flags |= ACCEPT;
            }
            table[state][nibble] = step;
            nibble += 1;
        }
        state += 1;
    }
    table
}

static DECODE: [[Step; 16]; 256] = build_table();

/// Appends the decoding of `src` to `dst`.
pub fn decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), Error> {
    // At most 8/5 symbols per byte: reserve once rather than grow.
    dst.reserve(src.len() * 8 / 5);
    let mut state = 0u8;
    let mut accept = true;
    for &byte in src {
        for nibble in [byte >> 4, byte & 0xf] {
            let step = DECODE[state as usize][nibble as usize];
            if step.flags & FAIL != 0 {
                return Err(Error::HuffmanEos);
            }
            if step.flags & EMIT != 0 {
                dst.push(step.sym);
            }
            state = step.next;
            accept = step.flags & ACCEPT != 0;
        }
    }
    if !accept {
        return Err(Error::HuffmanPadding);
    }
    Ok(())
}

/// The Huffman-encoded length of `src` in bytes.
pub fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src.iter().map(|&b| LENGTHS[b as usize] as usize).sum();
    bits.div_ceil(8)
}

/// Appends the Huffman encoding of `src`, padded with the EOS prefix. Codes gather in a
/// 64-bit accumulator and leave 32 bits at a time (a code is at most 30 bits).
pub fn encode(src: &[u8], dst: &mut Vec<u8>) {
    // Usually shorter than the input; a byte with a long code grows the Vec as usual.
    dst.reserve(src.len());
    let mut acc: u64 = 0;
    let mut bits = 0u32;
    for &b in src {
        let len = LENGTHS[b as usize] as u32;
        acc = (acc << len) | CODES[b as usize] as u64;
        bits += len;
        if bits >= 32 {
            bits -= 32;
            dst.extend_from_slice(&((acc >> bits) as u32).to_be_bytes());
        }
    }
    while bits >= 8 {
        bits -= 8;
        dst.push((acc >> bits) as u8);
    }
    if bits > 0 {
        let pad = 8 - bits;
        dst.push(((acc << pad) as u8) | ((1u8 << pad) - 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_rfc() {
        // A few rows of RFC 7541 Appendix B.
        assert_eq!((CODES[b'0' as usize], LENGTHS[b'0' as usize]), (0x0, 5));
        assert_eq!((CODES[b' ' as usize], LENGTHS[b' ' as usize]), (0x14, 6));
        assert_eq!((CODES[b'A' as usize], LENGTHS[b'A' as usize]), (0x21, 6));
        assert_eq!((CODES[b'z' as usize], LENGTHS[b'z' as usize]), (0x7b, 7));
        assert_eq!((CODES[0], LENGTHS[0]), (0x1ff8, 13));
        assert_eq!((CODES[255], LENGTHS[255]), (0x3ffffee, 26));
        assert_eq!((CODES[256], LENGTHS[256]), (0x3fffffff, 30));
    }

    #[test]
    fn rfc_examples() {
        // RFC 7541 C.4.1: "www.example.com".
        let enc = [
            0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
        ];
        let mut out = Vec::new();
        encode(b"www.example.com", &mut out);
        assert_eq!(out, enc);
        assert_eq!(encoded_len(b"www.example.com"), enc.len());
        let mut dec = Vec::new();
        decode(&enc, &mut dec).unwrap();
        assert_eq!(dec, b"www.example.com");
    }

    #[test]
    fn every_byte_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        for s in [&all[..], b"", b"a", b"no-cache", b"\xff\xfe\x00"] {
            let mut enc = Vec::new();
            encode(s, &mut enc);
            assert_eq!(enc.len(), encoded_len(s));
            let mut dec = Vec::new();
            decode(&enc, &mut dec).unwrap();
            assert_eq!(dec, s);
        }
    }

    #[test]
    fn bad_padding_and_eos_are_rejected() {
        // 'a' is 00011 (5 bits): padded with three ones it is fine, with zeros it is not.
        let mut dec = Vec::new();
        decode(&[0b0001_1111], &mut dec).unwrap();
        assert_eq!(dec, b"a");
        assert_eq!(decode(&[0b0001_1000], &mut dec), Err(Error::HuffmanPadding));
        // A whole byte of ones after a symbol is padding longer than 7 bits.
        assert_eq!(
            decode(&[0b0001_1111, 0xff], &mut dec),
            Err(Error::HuffmanPadding)
        );
        // EOS itself (30 ones) inside the string.
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff], &mut dec),
            Err(Error::HuffmanEos)
        );
    }
}
