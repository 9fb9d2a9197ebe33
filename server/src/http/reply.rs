//! A protocol-neutral response: status, headers and a body that may point into a file.
//! The HTTP/1.1 fast path writes it with writev/sendfile; the hyper path adapts it.

use bytes::Bytes;
use http::{HeaderName, HeaderValue, StatusCode};
use skiff_http::h2::hpack::{varies_per_response, Precoded};
use std::fs::File;
use std::sync::Arc;

/// A slice of an open file, sent with sendfile(2) or pread(2), never mmap (truncation
/// under a mapping is SIGBUS).
#[derive(Debug, Clone)]
pub struct FileSlice {
    pub file: Arc<File>,
    pub offset: u64,
    pub len: u64,
}

#[derive(Debug, Clone)]
pub enum Part {
    Bytes(Bytes),
    File(FileSlice),
}

impl Part {
    pub fn len(&self) -> u64 {
        match self {
            Part::Bytes(b) => b.len() as u64,
            Part::File(f) => f.len,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub enum Body {
    #[default]
    Empty,
    Bytes(Bytes),
    File(FileSlice),
    /// multipart/byteranges and other bodies made of several pieces.
    Parts(Vec<Part>),
    /// The same bytes in memory and on an open descriptor: the connection layer picks
    /// sendfile or a memory write by size (measured crossover: BENCHMARKS.md).
    Mirrored(Bytes, FileSlice),
}

impl Body {
    pub fn len(&self) -> u64 {
        match self {
            Body::Empty => 0,
            Body::Bytes(b) => b.len() as u64,
            Body::File(f) => f.len,
            Body::Parts(p) => p.iter().map(Part::len).sum(),
            Body::Mirrored(b, _) => b.len() as u64,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Response headers built once and shared by every response that uses them (the 200 of
/// a cached file): as fields for hyper, as ready HTTP/1.1 lines for the fast path, and
/// the per-response ones HPACK-coded for HTTP/2.
#[derive(Debug)]
pub struct PrebuiltHead {
    pub fields: Vec<(HeaderName, HeaderValue)>,
    /// `fields` as "Name: value\r\n" lines, followed by the Content-Length line.
    pub wire: Bytes,
    pub content_length: u64,
    /// The validators and Content-Length, their HPACK strings coded once for the file
    /// version; the HTTP/2 driver sends the rest of `fields` through its encoder alone.
    pub h2_precoded: Precoded,
}

impl PrebuiltHead {
    pub fn new(fields: Vec<(HeaderName, HeaderValue)>, content_length: u64) -> PrebuiltHead {
        let mut wire = Vec::with_capacity(256);
        let mut h2_precoded = Precoded::default();
        for (name, value) in &fields {
            wire.extend_from_slice(name.as_str().as_bytes());
            wire.extend_from_slice(b": ");
            wire.extend_from_slice(value.as_bytes());
            wire.extend_from_slice(b"\r\n");
            if varies_per_response(name) {
                h2_precoded.push(name, value.as_bytes());
            }
        }
        let length_at = wire.len() + b"Content-Length: ".len();
        wire.extend_from_slice(b"Content-Length: ");
        crate::http::text::push_decimal(&mut wire, content_length);
        h2_precoded.push(&http::header::CONTENT_LENGTH, &wire[length_at..]);
        wire.extend_from_slice(b"\r\n");
        PrebuiltHead {
            fields,
            wire: Bytes::from(wire),
            content_length,
            h2_precoded,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    /// Shared headers (with Content-Length) sent before `headers`, when present.
    pub shared_head: Option<Arc<PrebuiltHead>>,
    /// Headers other than Date, Server, Content-Length and Connection, which the
    /// connection layer owns.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Body,
    /// Whether the cache served this reply without touching the file system.
    pub cache_hit: bool,
    /// Bandwidth limits for the body, if any apply.
    pub throttle: Option<Arc<crate::shaping::Throttle>>,
}

impl Reply {
    pub fn new(status: StatusCode) -> Reply {
        Reply {
            status,
            shared_head: None,
            headers: Vec::new(),
            body: Body::Empty,
            cache_hit: false,
            throttle: None,
        }
    }

    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Reply {
        self.headers.push((name, value));
        self
    }

    /// A short HTML error page: the status line as text.
    pub fn error(status: StatusCode) -> Reply {
        let reason = status.canonical_reason().unwrap_or("Error");
        let body = format!(
            "<!DOCTYPE html>\n<html><head><title>{code} {reason}</title></head><body><h1>{code} {reason}</h1></body></html>\n",
            code = status.as_u16()
        );
        Reply {
            status,
            shared_head: None,
            headers: vec![(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            )],
            body: Body::Bytes(Bytes::from(body)),
            cache_hit: false,
            throttle: None,
        }
    }

    /// Every header field: the shared ones, then the reply's own.
    pub fn header_fields(&self) -> impl Iterator<Item = &(HeaderName, HeaderValue)> {
        self.shared_head
            .iter()
            .flat_map(|h| h.fields.iter())
            .chain(self.headers.iter())
    }

    /// Whether this status may carry a body and Content-Length (RFC 9110 §6.4.1).
    pub fn has_body_semantics(&self) -> bool {
        !(self.status.is_informational()
            || self.status == StatusCode::NO_CONTENT
            || self.status == StatusCode::NOT_MODIFIED)
    }
}
