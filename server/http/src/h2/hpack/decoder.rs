//! The HPACK decoder: a header block to (name, value) callbacks, within a size budget.

use super::error::Error;
use super::huffman;
use super::primitive::decode_int;
use super::table::{Dynamic, ENTRY_OVERHEAD, STATIC};

/// Where a decoded string lives until both halves of a field are read: the block, the
/// decoder's Huffman scratch, or a table entry's name or value (so nothing is copied per
/// field).
#[derive(Clone, Copy)]
enum Src {
    Block(usize, usize),
    Scratch(usize, usize),
    Static(usize, bool),
    Dynamic(usize, bool),
}

/// What a decoded block came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded {
    /// The header list size as RFC 9113 §6.5.2 counts it (name + value + 32 per field),
    /// including fields past the limit.
    pub list_size: usize,
    /// The list went past `max_list_size`: fields from there on were decoded (the table
    /// must stay in step) but not passed on.
    pub over_limit: bool,
}

/// How far past `max_list_size` (times it, at least `MIN_EXPANSION` bytes) a block may
/// expand before it is refused: each indexed name re-inserted is a copy, so a 32 KiB block
/// of them would copy tens of megabytes. The connection ends, so the table needs no sync.
const EXPANSION: usize = 4;
const MIN_EXPANSION: usize = 16 << 10;
/// Scratch capacity kept between blocks: a burst's larger one is given back, so an idle
/// connection holds little.
const KEEP_SCRATCH: usize = 8 << 10;

pub struct Decoder {
    table: Dynamic,
    /// Our SETTINGS_HEADER_TABLE_SIZE: the most a size update may ask for (§4.2).
    max_size: usize,
    /// Huffman output of the current field; kept to reuse its allocation.
    scratch: Vec<u8>,
}

impl Decoder {
    /// A decoder for a peer told `max_size` as SETTINGS_HEADER_TABLE_SIZE.
    pub fn new(max_size: usize) -> Decoder {
        Decoder {
            table: Dynamic::new(max_size),
            max_size,
            scratch: Vec::new(),
        }
    }

    /// A new SETTINGS_HEADER_TABLE_SIZE of ours, once acknowledged: bounds later size
    /// updates (the peer shrinks the table itself, with one).
    pub fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
    }

    pub fn table_size(&self) -> usize {
        self.table.size()
    }

    /// Decodes one complete header block, calling `field(name, value)` for each field
    /// while the list stays within `max_list_size`. The block is always decoded to its
    /// end, so the dynamic table stays in step with the peer's even when fields are
    /// dropped. Names and values are passed as they are; validating them is the caller's.
    pub fn decode(
        &mut self,
        block: &[u8],
        max_list_size: usize,
        field: impl FnMut(&[u8], &[u8]),
    ) -> Result<Decoded, Error> {
        let decoded = self.decode_fields(block, max_list_size, field);
        if self.scratch.capacity() > KEEP_SCRATCH {
            self.scratch = Vec::new();
        }
        decoded
    }

    #[cfg(test)]
    pub(crate) fn scratch_capacity(&self) -> usize {
        self.scratch.capacity()
    }

    fn decode_fields(
        &mut self,
        block: &[u8],
        max_list_size: usize,
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<Decoded, Error> {
        let mut pos = 0;
        let mut decoded = Decoded {
            list_size: 0,
            over_limit: false,
        };
        let mut seen_field = false;
        let budget = max_list_size.saturating_mul(EXPANSION).max(MIN_EXPANSION);
        while pos < block.len() {
            let b = block[pos];
            if b & 0xe0 == 0x20 {
                // §6.3 dynamic table size update: only before the first field (§4.2).
                if seen_field {
                    return Err(Error::SizeUpdateLate);
                }
                let (size, n) = decode_int(&block[pos..], 5)?;
                pos += n;
                if size > self.max_size {
                    return Err(Error::SizeUpdateTooLarge);
                }
                self.table.set_max_size(size);
                continue;
            }
            seen_field = true;
            self.scratch.clear();
            let (name, value, insert) = if b & 0x80 != 0 {
                // §6.1 indexed field.
                let (index, n) = decode_int(&block[pos..], 7)?;
                pos += n;
                let (name, value) = self.index(index)?;
                (name, value, false)
            } else {
                // §6.2 literals: with incremental indexing (01), without (0000), never (0001).
                let (prefix, insert) = if b & 0x40 != 0 { (6, true) } else { (4, false) };
                let (index, n) = decode_int(&block[pos..], prefix)?;
                pos += n;
                let name = if index == 0 {
                    string(block, &mut pos, &mut self.scratch)?
                } else {
                    self.index(index)?.0
                };
                let value = string(block, &mut pos, &mut self.scratch)?;
                (name, value, insert)
            };
            let (n, v) = (self.resolve(block, name), self.resolve(block, value));
            decoded.list_size = decoded
                .list_size
                .saturating_add(n.len() + v.len() + ENTRY_OVERHEAD);
            if decoded.list_size > budget {
                return Err(Error::ListTooLarge);
            } else if decoded.list_size > max_list_size {
                decoded.over_limit = true;
            } else {
                field(n, v);
            }
            // Copied out before the table is changed: the name may be one of its entries.
            let entry = insert.then(|| ([n, v].concat(), n.len()));
            if let Some((bytes, name_len)) = entry {
                self.table.insert_entry(bytes, name_len);
            }
        }
        Ok(decoded)
    }

    /// The name and value of HPACK index `index` (§2.3.3).
    fn index(&self, index: usize) -> Result<(Src, Src), Error> {
        match index {
            0 => Err(Error::IndexZero),
            i if i <= STATIC.len() => Ok((Src::Static(i - 1, false), Src::Static(i - 1, true))),
            i => {
                let d = i - STATIC.len() - 1;
                if d >= self.table.len() {
                    return Err(Error::IndexOutOfRange);
                }
                Ok((Src::Dynamic(d, false), Src::Dynamic(d, true)))
            }
        }
    }

    fn resolve<'a>(&'a self, block: &'a [u8], src: Src) -> &'a [u8] {
        match src {
            Src::Block(a, b) => &block[a..b],
            Src::Scratch(a, b) => &self.scratch[a..b],
            Src::Static(i, value) => {
                let (n, v) = STATIC[i];
                if value { v } else { n }.as_bytes()
            }
            Src::Dynamic(i, value) => {
                let (n, v) = self.table.get(i).unwrap_or_default();
                if value {
                    v
                } else {
                    n
                }
            }
        }
    }
}

/// Reads a string literal (§5.2) at `*pos`, Huffman-decoding it into `scratch`.
fn string(block: &[u8], pos: &mut usize, scratch: &mut Vec<u8>) -> Result<Src, Error> {
    let huffman = *block.get(*pos).ok_or(Error::Truncated)? & 0x80 != 0;
    let (len, n) = decode_int(&block[*pos..], 7)?;
    let start = *pos + n;
    let end = start.checked_add(len).ok_or(Error::Truncated)?;
    if end > block.len() {
        return Err(Error::Truncated);
    }
    *pos = end;
    if !huffman {
        return Ok(Src::Block(start, end));
    }
    let from = scratch.len();
    huffman::decode(&block[start..end], scratch)?;
    Ok(Src::Scratch(from, scratch.len()))
}
