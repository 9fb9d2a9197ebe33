//! HTTP/2 (RFC 9113) with no I/O: frames, HPACK and the server connection state machine.
//!
//! A driver feeds the bytes it read to [`conn::Connection::recv`], takes [`conn::Event`]s,
//! answers with `send_response`/`send_data`, and writes what `poll_transmit` put in its
//! buffer with one write. Nothing here touches a socket or a clock.

pub mod conn;
pub mod frame;
pub mod hpack;
pub mod priority;
pub mod request;
pub mod source;
mod stream;

use std::fmt;

/// A stream identifier (31 bits; 0 is the connection).
pub type StreamId = u32;

/// An RFC 9113 §7 error code. A newtype, not an enum: a peer may send codes we do not know
/// and they must be carried, not rejected.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reason(pub u32);

impl Reason {
    pub const NO_ERROR: Reason = Reason(0x0);
    pub const PROTOCOL_ERROR: Reason = Reason(0x1);
    pub const INTERNAL_ERROR: Reason = Reason(0x2);
    pub const FLOW_CONTROL_ERROR: Reason = Reason(0x3);
    pub const SETTINGS_TIMEOUT: Reason = Reason(0x4);
    pub const STREAM_CLOSED: Reason = Reason(0x5);
    pub const FRAME_SIZE_ERROR: Reason = Reason(0x6);
    pub const REFUSED_STREAM: Reason = Reason(0x7);
    pub const CANCEL: Reason = Reason(0x8);
    pub const COMPRESSION_ERROR: Reason = Reason(0x9);
    pub const CONNECT_ERROR: Reason = Reason(0xa);
    pub const ENHANCE_YOUR_CALM: Reason = Reason(0xb);
    pub const INADEQUATE_SECURITY: Reason = Reason(0xc);
    pub const HTTP_1_1_REQUIRED: Reason = Reason(0xd);

    fn name(self) -> Option<&'static str> {
        const NAMES: [&str; 14] = [
            "NO_ERROR",
            "PROTOCOL_ERROR",
            "INTERNAL_ERROR",
            "FLOW_CONTROL_ERROR",
            "SETTINGS_TIMEOUT",
            "STREAM_CLOSED",
            "FRAME_SIZE_ERROR",
            "REFUSED_STREAM",
            "CANCEL",
            "COMPRESSION_ERROR",
            "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY",
            "HTTP_1_1_REQUIRED",
        ];
        NAMES.get(self.0 as usize).copied()
    }
}

impl fmt::Debug for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "Reason({:#x})", self.0),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A protocol error, with the RFC 9113 §5.4 scope that decides what is sent: a stream
/// error resets one stream (RST_STREAM), a connection error ends the connection (GOAWAY).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("HTTP/2 connection error {reason}: {why}")]
    Connection { reason: Reason, why: &'static str },
    #[error("HTTP/2 stream {stream} error {reason}: {why}")]
    Stream {
        stream: StreamId,
        reason: Reason,
        why: &'static str,
    },
}

impl Error {
    pub(crate) fn conn(reason: Reason, why: &'static str) -> Error {
        Error::Connection { reason, why }
    }

    pub(crate) fn stream(stream: StreamId, reason: Reason, why: &'static str) -> Error {
        Error::Stream {
            stream,
            reason,
            why,
        }
    }

    pub fn reason(&self) -> Reason {
        match self {
            Error::Connection { reason, .. } | Error::Stream { reason, .. } => *reason,
        }
    }

    pub fn is_connection(&self) -> bool {
        matches!(self, Error::Connection { .. })
    }
}
