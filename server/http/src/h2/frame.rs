//! RFC 9113 §4 and §6 frames: the 9-byte header, each frame type parsed from a byte slice
//! (borrowing its payload) with the RFC's error and scope, and encoders into a `Vec<u8>`.

use super::{Error, Reason, StreamId};

/// The frame header's length.
pub const HEADER_LEN: usize = 9;
/// The initial and smallest SETTINGS_MAX_FRAME_SIZE (RFC 9113 §4.2).
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 1 << 14;
/// The largest SETTINGS_MAX_FRAME_SIZE (2^24-1).
pub const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;
/// The largest flow-control window (2^31-1, RFC 9113 §6.9.1).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;
/// The window every stream and the connection start with (RFC 9113 §6.9.2).
pub const DEFAULT_WINDOW: u32 = 65_535;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const FLAG_END_STREAM: u8 = 0x1;
pub const FLAG_ACK: u8 = 0x1;
pub const FLAG_END_HEADERS: u8 = 0x4;
pub const FLAG_PADDED: u8 = 0x8;
pub const FLAG_PRIORITY: u8 = 0x20;

/// SETTINGS parameter identifiers (RFC 9113 §6.5.2).
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// The 9-byte frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Payload length (24 bits).
    pub len: u32,
    pub kind: u8,
    pub flags: u8,
    /// The reserved bit is dropped on parse, as §4.1 requires of receivers.
    pub stream: StreamId,
}

impl Head {
    pub fn parse(b: &[u8; HEADER_LEN]) -> Head {
        Head {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]),
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & MAX_WINDOW,
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut head = [0u8; HEADER_LEN];
        self.encode_into(&mut head);
        out.extend_from_slice(&head);
    }

    /// The 9 bytes in place: a header written before its payload's length was known.
    pub fn encode_into(&self, out: &mut [u8; HEADER_LEN]) {
        debug_assert!(self.len <= MAX_MAX_FRAME_SIZE);
        out[..3].copy_from_slice(&self.len.to_be_bytes()[1..]);
        out[3] = self.kind;
        out[4] = self.flags;
        out[5..].copy_from_slice(&(self.stream & MAX_WINDOW).to_be_bytes());
    }

    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// A PRIORITY frame's or HEADERS frame's priority fields. RFC 9113 §5.3.2 deprecates the
/// scheme: they are parsed only to check them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    pub exclusive: bool,
    pub depends_on: StreamId,
    /// The weight minus one, as sent.
    pub weight: u8,
}

impl Priority {
    fn parse(b: &[u8]) -> Priority {
        let dep = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        Priority {
            exclusive: dep & !MAX_WINDOW != 0,
            depends_on: dep & MAX_WINDOW,
            weight: b[4],
        }
    }
}

/// One parsed frame, borrowing its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    Data {
        stream: StreamId,
        data: &'a [u8],
        end_stream: bool,
        /// The whole payload length, padding included: what flow control counts (§6.9).
        flow_len: u32,
    },
    Headers {
        stream: StreamId,
        fragment: &'a [u8],
        end_stream: bool,
        end_headers: bool,
        priority: Option<Priority>,
    },
    Priority {
        stream: StreamId,
        priority: Priority,
    },
    RstStream {
        stream: StreamId,
        reason: Reason,
    },
    Settings {
        ack: bool,
        /// Six bytes per parameter; read with [`settings_params`].
        params: &'a [u8],
    },
    PushPromise {
        stream: StreamId,
        promised: StreamId,
        fragment: &'a [u8],
        end_headers: bool,
    },
    Ping {
        ack: bool,
        payload: [u8; 8],
    },
    GoAway {
        last_stream: StreamId,
        reason: Reason,
        debug: &'a [u8],
    },
    WindowUpdate {
        stream: StreamId,
        increment: u32,
    },
    Continuation {
        stream: StreamId,
        fragment: &'a [u8],
        end_headers: bool,
    },
    /// An extension frame type: ignored, as §5.5 requires (but not inside a header block).
    Unknown {
        kind: u8,
        stream: StreamId,
    },
}

fn conn_err(reason: Reason, why: &'static str) -> Error {
    Error::conn(reason, why)
}

/// Strips §6.1 padding: the Pad Length byte and that many trailing bytes.
fn unpad<'a>(head: &Head, payload: &'a [u8]) -> Result<&'a [u8], Error> {
    if !head.has(FLAG_PADDED) {
        return Ok(payload);
    }
    let (&pad, rest) = payload.split_first().ok_or(conn_err(
        Reason::FRAME_SIZE_ERROR,
        "padded frame without a pad length",
    ))?;
    // "If the length of the padding is the length of the frame payload or greater, the
    // recipient MUST treat this as a connection error of type PROTOCOL_ERROR."
    if pad as usize > rest.len() {
        return Err(conn_err(
            Reason::PROTOCOL_ERROR,
            "padding longer than the payload",
        ));
    }
    Ok(&rest[..rest.len() - pad as usize])
}

fn require_stream(stream: StreamId, why: &'static str) -> Result<(), Error> {
    if stream == 0 {
        return Err(conn_err(Reason::PROTOCOL_ERROR, why));
    }
    Ok(())
}

fn require_conn(stream: StreamId, why: &'static str) -> Result<(), Error> {
    if stream != 0 {
        return Err(conn_err(Reason::PROTOCOL_ERROR, why));
    }
    Ok(())
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Parses one frame whose header is `head` and whose payload is `payload`
/// (`payload.len() == head.len`). The frame size limit is the caller's: it depends on the
/// settings in force.
pub fn parse<'a>(head: &Head, payload: &'a [u8]) -> Result<Frame<'a>, Error> {
    debug_assert_eq!(payload.len(), head.len as usize);
    let stream = head.stream;
    match head.kind {
        DATA => {
            require_stream(stream, "DATA on stream 0")?;
            Ok(Frame::Data {
                stream,
                data: unpad(head, payload)?,
                end_stream: head.has(FLAG_END_STREAM),
                flow_len: head.len,
            })
        }
        HEADERS => {
            require_stream(stream, "HEADERS on stream 0")?;
            let mut block = unpad(head, payload)?;
            let priority = if head.has(FLAG_PRIORITY) {
                if block.len() < 5 {
                    return Err(conn_err(
                        Reason::FRAME_SIZE_ERROR,
                        "HEADERS too short for its priority",
                    ));
                }
                let p = Priority::parse(block);
                block = &block[5..];
                Some(p)
            } else {
                None
            };
            Ok(Frame::Headers {
                stream,
                fragment: block,
                end_stream: head.has(FLAG_END_STREAM),
                end_headers: head.has(FLAG_END_HEADERS),
                priority,
            })
        }
        PRIORITY => {
            require_stream(stream, "PRIORITY on stream 0")?;
            if payload.len() != 5 {
                return Err(Error::stream(
                    stream,
                    Reason::FRAME_SIZE_ERROR,
                    "PRIORITY length is not 5",
                ));
            }
            let priority = Priority::parse(payload);
            if priority.depends_on == stream {
                return Err(Error::stream(
                    stream,
                    Reason::PROTOCOL_ERROR,
                    "stream depends on itself",
                ));
            }
            Ok(Frame::Priority { stream, priority })
        }
        RST_STREAM => {
            require_stream(stream, "RST_STREAM on stream 0")?;
            if payload.len() != 4 {
                return Err(conn_err(
                    Reason::FRAME_SIZE_ERROR,
                    "RST_STREAM length is not 4",
                ));
            }
            Ok(Frame::RstStream {
                stream,
                reason: Reason(be32(payload)),
            })
        }
        SETTINGS => {
            require_conn(stream, "SETTINGS on a stream")?;
            let ack = head.has(FLAG_ACK);
            if ack && !payload.is_empty() {
                return Err(conn_err(
                    Reason::FRAME_SIZE_ERROR,
                    "SETTINGS ack with a payload",
                ));
            }
            if !payload.len().is_multiple_of(6) {
                return Err(conn_err(
                    Reason::FRAME_SIZE_ERROR,
                    "SETTINGS length is not a multiple of 6",
                ));
            }
            Ok(Frame::Settings {
                ack,
                params: payload,
            })
        }
        PUSH_PROMISE => {
            require_stream(stream, "PUSH_PROMISE on stream 0")?;
            let block = unpad(head, payload)?;
            if block.len() < 4 {
                return Err(conn_err(Reason::FRAME_SIZE_ERROR, "PUSH_PROMISE too short"));
            }
            Ok(Frame::PushPromise {
                stream,
                promised: be32(block) & MAX_WINDOW,
                fragment: &block[4..],
                end_headers: head.has(FLAG_END_HEADERS),
            })
        }
        PING => {
            require_conn(stream, "PING on a stream")?;
            let payload: [u8; 8] = payload
                .try_into()
                .map_err(|_| conn_err(Reason::FRAME_SIZE_ERROR, "PING length is not 8"))?;
            Ok(Frame::Ping {
                ack: head.has(FLAG_ACK),
                payload,
            })
        }
        GOAWAY => {
            require_conn(stream, "GOAWAY on a stream")?;
            if payload.len() < 8 {
                return Err(conn_err(Reason::FRAME_SIZE_ERROR, "GOAWAY shorter than 8"));
            }
            Ok(Frame::GoAway {
                last_stream: be32(payload) & MAX_WINDOW,
                reason: Reason(be32(&payload[4..])),
                debug: &payload[8..],
            })
        }
        WINDOW_UPDATE => {
            if payload.len() != 4 {
                return Err(conn_err(
                    Reason::FRAME_SIZE_ERROR,
                    "WINDOW_UPDATE length is not 4",
                ));
            }
            let increment = be32(payload) & MAX_WINDOW;
            if increment == 0 {
                return Err(if stream == 0 {
                    conn_err(Reason::PROTOCOL_ERROR, "connection WINDOW_UPDATE of 0")
                } else {
                    Error::stream(stream, Reason::PROTOCOL_ERROR, "WINDOW_UPDATE of 0")
                });
            }
            Ok(Frame::WindowUpdate { stream, increment })
        }
        CONTINUATION => {
            require_stream(stream, "CONTINUATION on stream 0")?;
            Ok(Frame::Continuation {
                stream,
                fragment: payload,
                end_headers: head.has(FLAG_END_HEADERS),
            })
        }
        kind => Ok(Frame::Unknown { kind, stream }),
    }
}

/// The (identifier, value) pairs of a SETTINGS payload, in order (later ones win, §6.5).
pub fn settings_params(params: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    params
        .chunks_exact(6)
        .map(|p| (u16::from_be_bytes([p[0], p[1]]), be32(&p[2..])))
}

fn head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: StreamId) {
    Head {
        len: len as u32,
        kind,
        flags,
        stream,
    }
    .encode(out);
}

/// A DATA frame's header only: the caller appends `len` payload bytes, which saves
/// copying them twice.
pub fn encode_data_head(out: &mut Vec<u8>, stream: StreamId, len: usize, end_stream: bool) {
    let flags = if end_stream { FLAG_END_STREAM } else { 0 };
    head(out, len, DATA, flags, stream);
}

pub fn encode_data(out: &mut Vec<u8>, stream: StreamId, data: &[u8], end_stream: bool) {
    encode_data_head(out, stream, data.len(), end_stream);
    out.extend_from_slice(data);
}

/// A header block as HEADERS plus as many CONTINUATION frames as `max_frame` needs.
pub fn encode_headers(
    out: &mut Vec<u8>,
    stream: StreamId,
    block: &[u8],
    end_stream: bool,
    max_frame: usize,
) {
    let max_frame = max_frame.max(1);
    let mut chunks = block.chunks(max_frame);
    let first = chunks.next().unwrap_or(&[]);
    let single = block.len() <= max_frame;
    let mut flags = if end_stream { FLAG_END_STREAM } else { 0 };
    if single {
        flags |= FLAG_END_HEADERS;
    }
    head(out, first.len(), HEADERS, flags, stream);
    out.extend_from_slice(first);
    let rest = block.len().saturating_sub(max_frame);
    let mut sent = 0;
    for chunk in chunks {
        sent += chunk.len();
        let flags = if sent == rest { FLAG_END_HEADERS } else { 0 };
        head(out, chunk.len(), CONTINUATION, flags, stream);
        out.extend_from_slice(chunk);
    }
}

pub fn encode_priority(out: &mut Vec<u8>, stream: StreamId, p: Priority) {
    head(out, 5, PRIORITY, 0, stream);
    let e = if p.exclusive { 1 << 31 } else { 0 };
    out.extend_from_slice(&(p.depends_on | e).to_be_bytes());
    out.push(p.weight);
}

pub fn encode_rst_stream(out: &mut Vec<u8>, stream: StreamId, reason: Reason) {
    head(out, 4, RST_STREAM, 0, stream);
    out.extend_from_slice(&reason.0.to_be_bytes());
}

pub fn encode_settings(out: &mut Vec<u8>, params: &[(u16, u32)]) {
    head(out, params.len() * 6, SETTINGS, 0, 0);
    for &(id, value) in params {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

pub fn encode_settings_ack(out: &mut Vec<u8>) {
    head(out, 0, SETTINGS, FLAG_ACK, 0);
}

pub fn encode_push_promise(out: &mut Vec<u8>, stream: StreamId, promised: StreamId, block: &[u8]) {
    head(out, 4 + block.len(), PUSH_PROMISE, FLAG_END_HEADERS, stream);
    out.extend_from_slice(&(promised & MAX_WINDOW).to_be_bytes());
    out.extend_from_slice(block);
}

pub fn encode_ping(out: &mut Vec<u8>, ack: bool, payload: [u8; 8]) {
    head(out, 8, PING, if ack { FLAG_ACK } else { 0 }, 0);
    out.extend_from_slice(&payload);
}

pub fn encode_goaway(out: &mut Vec<u8>, last_stream: StreamId, reason: Reason, debug: &[u8]) {
    head(out, 8 + debug.len(), GOAWAY, 0, 0);
    out.extend_from_slice(&(last_stream & MAX_WINDOW).to_be_bytes());
    out.extend_from_slice(&reason.0.to_be_bytes());
    out.extend_from_slice(debug);
}

pub fn encode_window_update(out: &mut Vec<u8>, stream: StreamId, increment: u32) {
    debug_assert!(increment > 0 && increment <= MAX_WINDOW);
    head(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

#[cfg(test)]
mod tests;
