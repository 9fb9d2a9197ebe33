//! The request fields an exchange logs, kept as spans of the read buffer.

use crate::exchange::{Protocol, RequestFields};
use crate::http::request::RequestHead;
use http::Method;

/// A span of the read buffer (which is `max_header_bytes` long: far below 4 GiB, but a
/// span that does not fit reads back as "-" rather than as other bytes).
#[derive(Debug, Clone, Copy)]
struct Span {
    at: u32,
    len: u32,
}

impl Span {
    /// Reads back as "-".
    const NONE: Span = Span {
        at: u32::MAX,
        len: 0,
    };

    fn of(base: usize, s: &[u8]) -> Span {
        let at = s.as_ptr() as usize - base;
        match (u32::try_from(at), u32::try_from(s.len())) {
            (Ok(at), Ok(len)) if at.checked_add(len).is_some() => Span { at, len },
            _ => Span::NONE,
        }
    }

    fn in_buf(self, buf: &[u8]) -> &[u8] {
        let (at, end) = (self.at as usize, (self.at as usize) + self.len as usize);
        buf.get(at..end).unwrap_or(b"-")
    }
}

/// Where the logged request fields sit in the read buffer. The buffer is not compacted
/// until every queued response is written, so they are read from there when the
/// exchange is recorded, without copying them per request. Kept small: one is queued
/// per pipelined response.
#[derive(Debug, Clone, Copy)]
pub(super) struct Logged {
    target: Span,
    referer: Option<Span>,
    user_agent: Option<Span>,
}

impl Logged {
    #[inline]
    pub fn of(buf: &[u8], head: &RequestHead<'_>) -> Logged {
        let base = buf.as_ptr() as usize;
        Logged {
            target: Span::of(base, head.target.as_bytes()),
            referer: head.referer.map(|s| Span::of(base, s)),
            user_agent: head.user_agent.map(|s| Span::of(base, s)),
        }
    }

    /// For a head refused before its request line was read: every field logs as "-".
    pub fn unparsed() -> Logged {
        Logged {
            target: Span::NONE,
            referer: None,
            user_agent: None,
        }
    }

    #[inline]
    pub fn fields<'b>(
        &self,
        buf: &'b [u8],
        method: &'b Method,
        protocol: Protocol,
    ) -> RequestFields<'b> {
        RequestFields {
            method,
            target: self.target.in_buf(buf),
            protocol,
            referer: self.referer.map(|s| s.in_buf(buf)),
            user_agent: self.user_agent.map(|s| s.in_buf(buf)),
        }
    }
}
