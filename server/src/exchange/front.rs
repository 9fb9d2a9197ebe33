//! What every connection path decides the same way before and after the configuration
//! answers: a missing Host, the `*` target, the cache outcome of a reply, and "draining
//! means close".

use super::record::Protocol;
use crate::app::{App, Routed, Verdict};
use crate::http::reply::Reply;
use crate::http::request::RequestHead;
use crate::shutdown::{Phase, ShutdownControl};
use http::{Method, StatusCode};

/// RFC 9112 §3.2: an HTTP/1.1 request without Host is rejected (and its connection
/// closed). HTTP/2 carries the host in `:authority`, which the request view reads.
pub fn lacks_required_host(head: &RequestHead<'_>, protocol: Protocol) -> bool {
    protocol == Protocol::Http11 && head.host.is_none()
}

/// Routes a request: the checks every protocol shares, then the configuration.
#[inline]
pub fn route(app: &App, head: &RequestHead<'_>, protocol: Protocol) -> Routed {
    route_with_verdict(app, head, protocol, None)
}

/// `route`, for a request routed again once its `Routed::Verify` ran (`verdict`), with
/// the same `App` generation.
#[inline]
pub fn route_with_verdict(
    app: &App,
    head: &RequestHead<'_>,
    protocol: Protocol,
    verdict: Option<&Verdict>,
) -> Routed {
    if lacks_required_host(head, protocol) {
        return Routed::Reply {
            reply: Reply::error(StatusCode::BAD_REQUEST),
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
