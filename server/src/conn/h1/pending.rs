//! Responses queued in the current batch, each recorded (access log, metrics) once the
//! batch is written, with the body bytes that really went out.

use super::logged::Logged;
use super::output::BodySpan;
use crate::exchange::{Exchange, Outcome, Protocol};
use http::{Method, StatusCode};
use std::net::IpAddr;
use std::time::Instant;

/// A response queued in the current batch, recorded once the batch is written.
pub(super) struct Pending {
    pub vhost: &'static str,
    pub method: Method,
    pub protocol: Protocol,
    pub status: u16,
    pub cache_hit: Option<bool>,
    pub started: Instant,
    pub logged: Logged,
    pub body: BodySpan,
}

impl Pending {
    /// The error answering a head refused before it was a request (400, 408, 414, 431):
    /// "-" for the method and target it did not get to send (nginx logs these too).
    pub fn rejection(status: StatusCode, body: BodySpan, started: Instant) -> Pending {
        Pending {
            vhost: "unknown",
            method: Method::from_bytes(b"-").expect("a token"),
            protocol: Protocol::Http11,
            status: status.as_u16(),
            cache_hit: None,
            started,
            logged: Logged::unparsed(),
            body,
        }
    }

    /// Records the exchange: `buf` holds its logged fields, `written` is how many bytes
    /// of the batch went out, `ended` when.
    pub fn record(self, buf: &[u8], remote: IpAddr, written: u64, ended: Instant) {
        Exchange {
            remote,
            request: self.logged.fields(buf, &self.method, self.protocol),
            outcome: Outcome {
                vhost: self.vhost,
                status: self.status,
                body_bytes: self.body.sent(written),
                cache_hit: self.cache_hit,
                pool: None,
            },
            started: self.started,
            head_ready: self.started,
            ended,
        }
        .record();
    }
}
