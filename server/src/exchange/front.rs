//! What every connection path decides the same way before and after the configuration
//! answers: a missing, repeated or invalid Host, a Host another certificate serves
//! (421), the `*` target, the cache
//! outcome of a reply, and "draining means close".

use super::record::Protocol;
use crate::app::{App, Routed, Verdict};
use crate::http::reply::Reply;
use crate::http::request::RequestHead;
use crate::shutdown::{Phase, ShutdownControl};
use http::{Method, StatusCode};

/// A head whose host cannot be trusted, answered 400 (and its connection closed): an
/// HTTP/1.1 request without Host, or with two (RFC 9112 §3.2), or a Host (or target
/// authority, or `:authority`) that is not a valid `host[:port]`, which would otherwise
/// be routed on its prefix and echoed into redirects and backends.
pub fn host_refused(head: &RequestHead<'_>, protocol: Protocol) -> bool {
    match head.host {
        None => protocol == Protocol::Http11,
        Some(h) => head.host_repeated || !host_is_valid(h),
    }
}

/// Longest Host remembered as valid: names and ports as sites use them.
const REMEMBERED_HOST: usize = 64;

thread_local! {
    /// The last valid Host this thread checked: clients repeat theirs on every request,
    /// and a byte comparison is cheaper than the check.
    static LAST_VALID_HOST: std::cell::RefCell<([u8; REMEMBERED_HOST], usize)> =
        const { std::cell::RefCell::new(([0; REMEMBERED_HOST], 0)) };
}

/// `skiff_http::host::is_valid`, answered from the thread's last valid Host when equal.
fn host_is_valid(host: &[u8]) -> bool {
    LAST_VALID_HOST.with(|last| {
        let mut last = last.borrow_mut();
        let (bytes, len) = &mut *last;
        if !host.is_empty() && host == &bytes[..*len] {
            return true;
        }
        let valid = skiff_http::host::is_valid(host);
        if valid && host.len() <= REMEMBERED_HOST {
            bytes[..host.len()].copy_from_slice(host);
            *len = host.len();
        }
        valid
    })
}

/// Routes a request: the checks every protocol shares, then the configuration.
#[inline]
pub fn route(app: &App, head: &RequestHead<'_>, protocol: Protocol) -> Routed {
    route_checked(app, head, host_refused(head, protocol), None)
}

/// `route`, for a request routed again once its `Routed::Verify` ran (`verdict`). A
/// generation a reload put in meanwhile does not know the verdict and asks again.
#[inline]
pub fn route_with_verdict(
    app: &App,
    head: &RequestHead<'_>,
    protocol: Protocol,
    verdict: Option<&Verdict>,
) -> Routed {
    route_checked(app, head, host_refused(head, protocol), verdict)
}

/// `route` for a caller that has already asked `host_refused` (to close the connection).
#[inline]
pub fn route_checked(
    app: &App,
    head: &RequestHead<'_>,
    host_refused: bool,
    verdict: Option<&Verdict>,
) -> Routed {
    if host_refused {
        return Routed::Reply {
            reply: Reply::error(StatusCode::BAD_REQUEST),
            vhost: "unknown",
        };
    }
    if head.misdirected {
        return Routed::Reply {
            reply: Reply::error(StatusCode::MISDIRECTED_REQUEST),
            vhost: "unknown",
        };
    }
    if head.path == "*" {
        return Routed::Reply {
            reply: asterisk_reply(&head.method),
            vhost: "unknown",
        };
    }
    match verdict {
        Some(v) => app.respond_verified(head, v),
        None => app.respond(head),
    }
}

/// `OPTIONS *` asks about the server as a whole; nothing else may use `*`.
pub fn asterisk_reply(method: &Method) -> Reply {
    if *method == Method::OPTIONS {
        Reply::new(StatusCode::NO_CONTENT).header(
            http::header::ALLOW,
            http::HeaderValue::from_static("GET, HEAD, OPTIONS"),
        )
    } else {
        Reply::error(StatusCode::BAD_REQUEST)
    }
}

/// Whether a reply counts as an I/O cache hit or miss (`None`: the cache had no say).
pub fn cache_outcome(reply: &Reply) -> Option<bool> {
    matches!(
        reply.status,
        StatusCode::OK | StatusCode::NOT_MODIFIED | StatusCode::PARTIAL_CONTENT
    )
    .then_some(reply.cache_hit)
}

/// From the moment /readyz fails, each HTTP/1 response closes its connection: keep-alive
/// clients (kube-proxy pins them to this pod) reconnect and reach a pod that stays,
/// while this one still listens for the shutdown delay.
pub fn closes_connections(shutdown: &ShutdownControl) -> bool {
    shutdown.phase() >= Phase::Draining
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The remembered Host answers only for the same bytes: each answer in a sequence of
    /// valid, invalid, longer, shorter and over-long hosts is the full check's.
    #[test]
    fn the_remembered_host_answers_as_the_full_check_does() {
        let long = format!("{}.test", "a".repeat(REMEMBERED_HOST));
        let sequence: [&[u8]; 12] = [
            b"a.test",
            b"a.test",
            b"a.test:80@evil.example",
            b"a.tes",
            b"a.test.",
            b"a.test..",
            b"",
            b"a.test",
            long.as_bytes(),
            long.as_bytes(),
            b"a.test:99999",
            b"[::1]:8080",
        ];
        for host in sequence {
            assert_eq!(
                host_is_valid(host),
                skiff_http::host::is_valid(host),
                "{}",
                String::from_utf8_lossy(host)
            );
        }
    }
}
