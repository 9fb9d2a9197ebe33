//! HPACK's integer (RFC 7541 §5.1) and string literal (§5.2) representations.

use super::error::Error;
use super::huffman;

/// Decodes an integer with an `prefix`-bit prefix (§5.1) from the start of `buf`: the value
/// and the bytes it took. Values past `u32::MAX` (or more than 5 continuation bytes, which
/// only a padded encoding needs) are refused rather than wrapped.
pub fn decode_int(buf: &[u8], prefix: u8) -> Result<(usize, usize), Error> {
    let mask = (1u32 << prefix) - 1;
    let first = *buf.first().ok_or(Error::Truncated)? as u32 & mask;
    if first < mask {
        return Ok((first as usize, 1));
    }
    let mut value = first as u64;
    for (i, &b) in buf[1..].iter().enumerate() {
        if i >= 5 {
            return Err(Error::IntegerOverflow);
        }
        value += ((b & 0x7f) as u64) << (7 * i);
        if value > u32::MAX as u64 {
            return Err(Error::IntegerOverflow);
        }
        if b & 0x80 == 0 {
            return Ok((value as usize, i + 2));
        }
    }
    Err(Error::Truncated)
}

/// Appends `value` with a `prefix`-bit prefix, OR-ing `flags` into the first byte.
pub fn encode_int(out: &mut Vec<u8>, value: usize, prefix: u8, flags: u8) {
    let mask = (1usize << prefix) - 1;
    if value < mask {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        out.push((rest as u8 & 0x7f) | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Appends a string literal (§5.2), Huffman-coded when that is shorter.
pub fn encode_str(out: &mut Vec<u8>, s: &[u8]) {
    // Most header values: both lengths fit the one-byte prefix, so encode at once and
    // fall back to the raw bytes in the rare case Huffman is not shorter.
    if s.len() < 127 {
        let at = out.len();
        out.push(0);
        huffman::encode(s, out);
        let huff = out.len() - at - 1;
        if huff < s.len() {
            out[at] = 0x80 | huff as u8;
        } else {
            out.truncate(at);
            out.push(s.len() as u8);
            out.extend_from_slice(s);
        }
        return;
    }
    let huff = huffman::encoded_len(s);
    if huff < s.len() {
        encode_int(out, huff, 7, 0x80);
        huffman::encode(s, out);
    } else {
        encode_int(out, s.len(), 7, 0);
        out.extend_from_slice(s);
    }
}
