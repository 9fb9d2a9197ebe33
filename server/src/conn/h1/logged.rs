//! The request fields an exchange logs, kept as ranges of the read buffer.

use crate::exchange::{Protocol, RequestFields};
use crate::http::request::RequestHead;
use http::Method;
use std::ops::Range;

/// Where the logged request fields sit in the read buffer. The buffer is not compacted
/// until every queued response is written, so they are read from there when the
/// exchange is recorded, without copying them per request.
#[derive(Debug, Clone)]
pub(super) struct Logged {
    target: Range<usize>,
    referer: Option<Range<usize>>,
    user_agent: Option<Range<usize>>,
}

impl Logged {
    pub fn of(buf: &[u8], head: &RequestHead<'_>) -> Logged {
        let base = buf.as_ptr() as usize;
        let span = |s: &[u8]| {
            let at = s.as_ptr() as usize - base;
            at..at + s.len()
        };
        Logged {
            target: span(head.target.as_bytes()),
            referer: head.referer.map(span),
            user_agent: head.user_agent.map(span),
        }
    }

    pub fn fields<'b>(
        &self,
        buf: &'b [u8],
        method: &'b Method,
        protocol: Protocol,
    ) -> RequestFields<'b> {
        RequestFields {
            method,
            target: std::str::from_utf8(&buf[self.target.clone()]).unwrap_or("-"),
            protocol,
            referer: self.referer.clone().map(|r| &buf[r]),
            user_agent: self.user_agent.clone().map(|r| &buf[r]),
        }
    }
}
