//! The HPACK encoder for responses: static indices for `:status` and known names,
//! the dynamic table for values that repeat across responses (a static server's
//! `server`, `content-type`, `cache-control`), literals for values that do not.

use super::primitive::{encode_int, encode_str};
use super::table::{static_name_index, Dynamic, ENTRY_OVERHEAD};
use http::{HeaderMap, HeaderName, StatusCode};

/// How a literal field is represented (§6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Indexing {
    /// Added to both tables: the next identical field is one byte.
    Incremental,
    /// Not added: for values that change with each response.
    Without,
    /// Not added, and intermediaries must not add it either (§7.1.3): for secrets.
    Never,
}

/// The table size the peer assumes before its SETTINGS (RFC 9113 §6.5.2).
const DEFAULT_TABLE_SIZE: usize = 4096;

pub struct Encoder {
    table: Dynamic,
    /// Our own ceiling on the table (memory per connection), below the peer's limit if
    /// it is larger.
    cap: usize,
    /// A table size change not yet signalled: the smallest size since the last block and
    /// the size now. §4.2 requires the smallest to be sent when it was lower.
    pending: Option<(usize, usize)>,
}

impl Encoder {
    /// An encoder whose table never exceeds `cap` bytes.
    pub fn new(cap: usize) -> Encoder {
        let size = cap.min(DEFAULT_TABLE_SIZE);
        Encoder {
            table: Dynamic::new(size),
            cap,
            // The decoder starts at 4096: a smaller table has to be announced.
            pending: (size != DEFAULT_TABLE_SIZE).then_some((size, size)),
        }
    }

    /// The dynamic table's size as §4.1 counts it (the peer's decoder holds the same).
    pub fn table_size(&self) -> usize {
        self.table.size()
    }

    /// Applies the peer's SETTINGS_HEADER_TABLE_SIZE.
    pub fn set_peer_table_size(&mut self, peer: u32) {
        let size = (peer as usize).min(self.cap);
        if size == self.table.max_size() && self.pending.is_none() {
            return;
        }
        let low = self.pending.map_or(size, |(low, _)| low.min(size));
        self.pending = Some((low, size));
        self.table.set_max_size(low);
        self.table.set_max_size(size);
    }

    /// Starts a header block: emits any table size update owed.
    pub fn begin_block(&mut self, out: &mut Vec<u8>) {
        if let Some((low, size)) = self.pending.take() {
            if low < size {
                encode_int(out, low, 5, 0x20);
            }
            encode_int(out, size, 5, 0x20);
        }
    }

    /// `:status`, indexed when the static table has it (§A: 200 204 206 304 400 404 500).
    pub fn status(&mut self, out: &mut Vec<u8>, status: StatusCode) {
        let index = match status.as_u16() {
            200 => 8,
            204 => 9,
            206 => 10,
            304 => 11,
            400 => 12,
            404 => 13,
            500 => 14,
            _ => 0,
        };
        if index != 0 {
            out.push(0x80 | index);
        } else {
            // Literal without indexing, name index 8: the code varies too little to
            // earn a table entry.
            out.push(0x08);
            encode_str(out, status.as_str().as_bytes());
        }
    }

    /// One field: fully indexed when the dynamic table has it, else a literal whose name
    /// is indexed when either table has it.
    pub fn field(&mut self, out: &mut Vec<u8>, name: &[u8], value: &[u8], indexing: Indexing) {
        let (exact, dyn_name) = self.table.find(name, value);
        if let (Some(i), false) = (exact, indexing == Indexing::Never) {
            encode_int(out, 62 + i, 7, 0x80);
            return;
        }
        let name_index = static_name_index(name).or(dyn_name.map(|i| 62 + i));
        literal_head(out, name_index, indexing);
        if name_index.is_none() {
            encode_str(out, name);
        }
        encode_str(out, value);
        if indexing == Indexing::Incremental {
            self.table.insert(name, value);
        }
    }

    /// A response's header block: status, then every field but the connection-specific
    /// ones RFC 9113 §8.2.2 forbids.
    pub fn response(&mut self, out: &mut Vec<u8>, status: StatusCode, headers: &HeaderMap) {
        self.begin_response(out, status);
        for (name, value) in headers {
            self.header(out, name, value.as_bytes());
        }
    }

    /// Starts a response's block: any table size update owed, then `:status`.
    pub fn begin_response(&mut self, out: &mut Vec<u8>, status: StatusCode) {
        self.begin_block(out);
        self.status(out, status);
    }

    /// One response field, indexed or not as `indexing` decides; a connection-specific
    /// field (RFC 9113 §8.2.2) is dropped.
    pub fn header(&mut self, out: &mut Vec<u8>, name: &HeaderName, value: &[u8]) {
        if is_connection_specific(name.as_str().as_bytes()) {
            return;
        }
        let indexing = self.indexing(name, value);
        self.field(out, name.as_str().as_bytes(), value, indexing);
    }

    /// Index what repeats; not what changes per response (it would only evict what
    /// repeats) nor what is secret, nor anything taking over a quarter of the table.
    fn indexing(&self, name: &HeaderName, value: &[u8]) -> Indexing {
        use http::header::*;
        if name == SET_COOKIE
            || name == AUTHORIZATION
            || name == PROXY_AUTHORIZATION
            || name == COOKIE
        {
            return Indexing::Never;
        }
        // Date changes once a second: indexed, every other response in that second on the
        // connection sends it as one byte.
        if varies_per_response(name) || !self.worth_an_entry(name.as_str().len() + value.len()) {
            return Indexing::Without;
        }
        Indexing::Incremental
    }

    /// Whether a field of `len` name and value bytes may enter the table: not past a
    /// quarter of it, where it would evict what repeats.
    fn worth_an_entry(&self, len: usize) -> bool {
        len + ENTRY_OVERHEAD <= self.table.max_size() / 4
    }
}

/// Fields whose value changes from one response to the next (validators, lengths,
/// ranges): `header` does not index them (a cached file's go through `Precoded`).
pub fn varies_per_response(name: &HeaderName) -> bool {
    use http::header::*;
    [
        CONTENT_LENGTH,
        ETAG,
        LAST_MODIFIED,
        CONTENT_RANGE,
        LOCATION,
        AGE,
        EXPIRES,
    ]
    .contains(name)
}

/// Fields whose strings are HPACK-coded once ahead of time (a cached file's validators
/// and length: Huffman-coded once per file version, not per response). The encoder sends
/// each as an index when the connection's table holds it, else as that literal, entering
/// the table: a file asked for again on a connection costs the peer a byte per field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Precoded(Vec<PrecodedField>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct PrecodedField {
    /// Name then value, as a table entry holds them.
    entry: Box<[u8]>,
    name_len: usize,
    static_name: Option<usize>,
    /// The name and the value as string literals (§5.2), the name's `coded_name` first.
    coded: Box<[u8]>,
    coded_name: usize,
}

impl Precoded {
    pub fn push(&mut self, name: &HeaderName, value: &[u8]) {
        let name = name.as_str().as_bytes();
        if is_connection_specific(name) {
            return;
        }
        let mut coded = Vec::with_capacity(name.len() + value.len() + 2);
        encode_str(&mut coded, name);
        let coded_name = coded.len();
        encode_str(&mut coded, value);
        self.0.push(PrecodedField {
            entry: [name, value].concat().into_boxed_slice(),
            name_len: name.len(),
            static_name: static_name_index(name),
            coded: coded.into_boxed_slice(),
            coded_name,
        });
    }
}

impl Encoder {
    /// Fields coded ahead of time: indexed when the table has them, else their literal
    /// with incremental indexing (without, past a quarter of the table, as `indexing`).
    pub fn precoded(&mut self, out: &mut Vec<u8>, fields: &Precoded) {
        for f in &fields.0 {
            let (name, value) = f.entry.split_at(f.name_len);
            let (exact, dyn_name) = self.table.find(name, value);
            if let Some(i) = exact {
                encode_int(out, 62 + i, 7, 0x80);
                continue;
            }
            let incremental = self.worth_an_entry(f.entry.len());
            let indexing = if incremental {
                Indexing::Incremental
            } else {
                Indexing::Without
            };
            let name_index = f.static_name.or(dyn_name.map(|i| 62 + i));
            literal_head(out, name_index, indexing);
            let strings = if name_index.is_some() {
                &f.coded[f.coded_name..]
            } else {
                &f.coded[..]
            };
            out.extend_from_slice(strings);
            if incremental {
                self.table.insert_entry(f.entry.to_vec(), f.name_len);
            }
        }
    }
}

/// A literal field's first bytes (§6.2): its representation and its name's index (0: the
/// name follows as a string).
fn literal_head(out: &mut Vec<u8>, name_index: Option<usize>, indexing: Indexing) {
    let (prefix, flags) = match indexing {
        Indexing::Incremental => (6, 0x40),
        Indexing::Without => (4, 0x00),
        Indexing::Never => (4, 0x10),
    };
    encode_int(out, name_index.unwrap_or(0), prefix, flags);
}

/// RFC 9113 §8.2.2: fields HTTP/2 does not carry (names in lowercase).
pub(crate) fn is_connection_specific(name: &[u8]) -> bool {
    matches!(
        name,
        b"connection" | b"transfer-encoding" | b"upgrade" | b"keep-alive" | b"proxy-connection"
    )
}
