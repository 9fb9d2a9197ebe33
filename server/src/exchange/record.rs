//! The exchange record: what one finished request did, turned into its access-log line and
//! its metrics in one place, whatever the protocol (HTTP/1.1 fast path, hyper's HTTP/1.1,
//! HTTP/2) and whatever answered (a file, a rule, a backend pool).

use crate::access_log::LogRecord;
use crate::state::with_worker;
use http::Method;
use std::time::Instant;

/// The protocol version as the access log writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http10,
    Http11,
    Http2,
}

impl Protocol {
    pub fn of(version: http::Version) -> Protocol {
        match version {
            http::Version::HTTP_2 => Protocol::Http2,
            http::Version::HTTP_10 | http::Version::HTTP_09 => Protocol::Http10,
            _ => Protocol::Http11,
        }
    }

    pub fn of_minor(minor: u8) -> Protocol {
        if minor == 0 {
            Protocol::Http10
        } else {
            Protocol::Http11
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Http10 => "HTTP/1.0",
            Protocol::Http11 => "HTTP/1.1",
            Protocol::Http2 => "HTTP/2.0",
        }
    }
}

/// The request line and the logged request fields, borrowed from wherever the connection
/// keeps them.
#[derive(Debug, Clone, Copy)]
pub struct RequestFields<'a> {
    pub method: &'a Method,
    pub target: &'a [u8],
    pub protocol: Protocol,
    pub referer: Option<&'a [u8]>,
    pub user_agent: Option<&'a [u8]>,
}

/// The status recorded for a request whose client left before a pool answered it
/// (nginx's 499, client closed request): the backend may have run it all the same.
pub const CLIENT_CLOSED_REQUEST: u16 = 499;

/// A finished request's outcome.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    /// The virtual server that answered (a configured name, or "unknown").
    pub vhost: &'static str,
    pub status: u16,
    /// Body bytes handed to the connection: written to the socket on the fast path, taken
    /// by hyper on the hyper path; also when the connection failed part way (0 for HEAD
    /// and bodiless replies).
    pub body_bytes: u64,
    /// `Some(hit)` when the reply came from the I/O cache's view of a file.
    pub cache_hit: Option<bool>,
    /// The backend pool that answered, if one did.
    pub pool: Option<&'static str>,
}

/// One exchange, from its complete request head to its last body byte.
pub struct Exchange<'a> {
    pub remote: std::net::IpAddr,
    pub request: RequestFields<'a>,
    pub outcome: Outcome,
    /// When the request head was complete.
    pub started: Instant,
    /// When the response head was ready to go: `started` for replies built in place (a
    /// file, a redirect; on every path), when the backend's head arrived for a pool.
    pub head_ready: Instant,
    /// When the last body byte was handed to the connection (or the exchange ended). A
    /// pipelined batch on the fast path ends together, with its last write; a batch of
    /// cache hits written at once, when its requests were read (the time of that turn).
    pub ended: Instant,
}

impl Exchange<'_> {
    /// Writes the access-log line and updates the request metrics, on this worker's
    /// buffers (a no-op off the worker threads).
    #[inline]
    pub fn record(&self) {
        let duration = self.ended.saturating_duration_since(self.started);
        with_worker(|w| {
            let o = &self.outcome;
            w.metrics.record(
                o.vhost,
                self.request.method,
                o.status,
                o.body_bytes,
                duration.as_secs_f64(),
                o.cache_hit,
            );
            if w.log.enabled() {
                let timed = w.log.wants_timings();
                let r = &self.request;
                w.log.log(&LogRecord {
                    remote: self.remote,
                    method: r.method.as_str(),
                    target: r.target,
                    version: r.protocol.as_str(),
                    status: o.status,
                    bytes: o.body_bytes,
                    referer: r.referer,
                    user_agent: r.user_agent,
                    duration_us: if timed {
                        duration.as_micros() as u64
                    } else {
                        0
                    },
                    first_byte_us: if timed {
                        let head = self.head_ready.saturating_duration_since(self.started);
                        head.as_micros() as u64
                    } else {
                        0
                    },
                    vhost: o.vhost,
                    pool: o.pool,
                });
            }
        });
    }
}
