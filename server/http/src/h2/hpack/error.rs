//! Why an HPACK header block is refused.

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
