//! HPACK (RFC 7541) header compression: integers, strings, Huffman, the tables, a
//! bounded decoder and a response encoder.
//!
//! Written here rather than taken from a crate (looked at in 2026 for issue 20):
//! `loona-hpack` (fork of `hpack`) decodes Huffman a bit at a time through hash maps,
//! allocates two `Vec`s per decoded header, has no header-list limit, and its encoder indexes
//! every new field and never uses Huffman; `nahpack` needs pre-1.0 nightly features and
//! does not build; `httlib-hpack` drains its input `Vec` from the front and allocates per
//! field; h2's codec is private to h2. None bounds what a block may expand into.

mod decoder;
mod encoder;
pub mod huffman;
pub mod table;

pub use decoder::{Decoded, Decoder};
pub(crate) use encoder::is_connection_specific;
pub use encoder::{Encoder, Indexing};

/// Why a header block was rejected; each is a COMPRESSION_ERROR on the connection
/// (RFC 9113 §4.3), since the peer's and our tables can no longer agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("HPACK block ends inside a field")]
    Truncated,
    #[error("HPACK integer overflows")]
    IntegerOverflow,
    #[error("HPACK index 0")]
    IndexZero,
    #[error("HPACK index past the tables")]
    IndexOutOfRange,
    #[error("HPACK Huffman string contains EOS")]
    HuffmanEos,
    #[error("HPACK Huffman padding is not an EOS prefix of at most 7 bits")]
    HuffmanPadding,
    #[error("HPACK table size update above SETTINGS_HEADER_TABLE_SIZE")]
    SizeUpdateTooLarge,
    #[error("HPACK table size update after a field")]
    SizeUpdateLate,
    #[error("HPACK block expands far past the header list size")]
    ListTooLarge,
}

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
    let huff = huffman::encoded_len(s);
    if huff < s.len() {
        encode_int(out, huff, 7, 0x80);
        huffman::encode(s, out);
    } else {
        encode_int(out, s.len(), 7, 0);
        out.extend_from_slice(s);
    }
}

#[cfg(test)]
mod tests;
