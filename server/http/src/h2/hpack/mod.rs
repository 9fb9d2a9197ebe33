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
mod error;
pub mod huffman;
mod primitive;
pub mod table;

pub use decoder::{Decoded, Decoder};
pub(crate) use encoder::is_connection_specific;
pub use encoder::{varies_per_response, Encoder, Indexing, Precoded};
pub use error::Error;
pub use primitive::{decode_int, encode_int, encode_str};

#[cfg(test)]
mod tests;
