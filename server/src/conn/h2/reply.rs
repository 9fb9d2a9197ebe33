//! Replies the configuration gives at once (a file, a redirect, an error page), sent from
//! the connection's own poll: no handler future, HEADERS written from the `Reply` with no
//! `HeaderMap`, and a body in memory queued whole or a file given as a source.

use super::ctx::Ctx;
use super::file_source::FileSource;
use crate::conn::activity::Busy;
use crate::conn::hyper::{reply_body, H2_STREAM_SEND_BUFFER};
use crate::conn::recorded_body::{RecordedBody, RequestMeta};
use crate::exchange::{front, Exchange, Outcome, Protocol, RequestFields};
use crate::http::reply::{Body, Reply};
use http::header::{CONTENT_LENGTH, DATE, SERVER};
use http::{HeaderValue, Method, Uri};
use http_body_util::BodyExt;
use skiff_http::h2::conn::{Connection, ResponseBlock};
use skiff_http::h2::hpack::varies_per_response;
use skiff_http::h2::request::Head;
use skiff_http::h2::StreamId;
use std::time::Instant;

/// What is left of a reply once its HEADERS are queued.
pub(super) enum Queued {
    /// Nothing: the exchange is recorded.
    Finished,
    /// The whole body is with the connection: queued (and recorded), or a file source
    /// (recorded when its last byte is read or its stream goes). The request holds its
    /// connection until the peer has taken it.
    Draining(Busy),
    /// A body still to read (a file over TLS, several ranges, a bandwidth limit).
    Sending(RecordedBody),
}

/// Queues `reply` as the answer to `stream`'s request (`head`), which arrived at
/// `started`. A body may be queued whole only within `room`, what the connection may
/// still queue (`streams::MAX_QUEUED`).
#[allow(clippy::too_many_arguments)]
pub(super) fn send(
    conn: &mut Connection,
    stream: StreamId,
    head: Head,
    reply: Reply,
    vhost: &'static str,
    started: Instant,
    ctx: &Ctx,
    mut busy: Busy,
    room: usize,
) -> Queued {
    let has_body = reply.has_body_semantics();
    let sends_body = has_body && head.method != Method::HEAD && !reply.body.is_empty();
    let outcome = Outcome {
        vhost,
        status: reply.status.as_u16(),
        body_bytes: 0,
        cache_hit: front::cache_outcome(&reply),
        pool: None,
    };
    let queued = conn.send_response_with(stream, reply.status, !sends_body, |block| {
        write_fields(block, &reply, has_body)
    });
    if queued.is_err() || !sends_body {
        record(&head, ctx, outcome, started, 0);
        return Queued::Finished;
    }
    // A body in memory up to a stream's send buffer is queued whole, with no body to
    // poll (a cached one is a shared slice of the cache); past the connection's bound it
    // waits its turn as a `RecordedBody` (a listing is memory of its own).
    let whole = match (&reply.body, &reply.throttle) {
        (Body::Bytes(b) | Body::Mirrored(b, _), None)
            if b.len() <= H2_STREAM_SEND_BUFFER.min(room) =>
        {
            Some(b.clone())
        }
        _ => None,
    };
    if let Some(bytes) = whole {
        let n = bytes.len() as u64;
        let sent = conn.send_data(stream, bytes, true).is_ok();
        record(&head, ctx, outcome, started, if sent { n } else { 0 });
        if !sent {
            return Queued::Finished;
        }
        busy.handed();
        return Queued::Draining(busy);
    }
    let body = reply.body;
    let value = |v: Option<&[u8]>| v.and_then(|v| HeaderValue::from_bytes(v).ok());
    let (referer, user_agent) = (value(head.referer()), value(head.user_agent()));
    let meta = RequestMeta {
        remote: ctx.origin.peer.ip(),
        // The head's target was checked as `http` checks it.
        uri: Uri::try_from(head.target()).unwrap_or_default(),
        method: head.method,
        protocol: Protocol::Http2,
        referer,
        user_agent,
        started,
    };
    // On plaintext HTTP/2 a file is read into the write batch as its frames are cut
    // (`file_source.rs`). Over TLS, chunks measured faster (1m.jpg 366 against 408 µs
    // per request, BENCHMARKS.md), for a reason not yet found.
    if let (Body::File(slice), None, None) = (&body, &reply.throttle, &ctx.origin.tls) {
        let len = slice.len;
        let record = RecordedBody::for_source(meta, outcome, started);
        let source = FileSource::new(slice.clone(), record);
        if conn.send_source(stream, Box::new(source), len).is_err() {
            return Queued::Finished;
        }
        busy.handed();
        return Queued::Draining(busy);
    }
    let chunk = ctx
        .shared
        .settings
        .read_chunk_bytes
        .min(H2_STREAM_SEND_BUFFER);
    let body = reply_body(body, reply.throttle, true, chunk);
    let mut body = RecordedBody::new(body.boxed(), meta, outcome, started);
    body.hold(busy);
    Queued::Sending(body)
}

/// The fields hyper's path would send for `reply` (`into_response`), in the same order:
/// Server, Date, the shared head's, the reply's own, Content-Length.
fn write_fields(block: &mut ResponseBlock<'_>, reply: &Reply, has_body: bool) {
    block.field(&SERVER, b"skiff");
    skiff_http::date::with_http_date(crate::coarse_clock::unix_seconds(), |d| {
        block.field(&DATE, d.as_bytes())
    });
    let mut length_sent = false;
    if let Some(shared) = &reply.shared_head {
        // Its validators and length were HPACK-coded once for its file version.
        let coded = has_body && shared.content_length == reply.body.len();
        for (name, value) in &shared.fields {
            if !(coded && varies_per_response(name)) {
                block.field(name, value.as_bytes());
            }
        }
        if coded {
            block.precoded(&shared.h2_precoded);
            length_sent = true;
        }
    }
    for (name, value) in &reply.headers {
        // The length is the body's, whatever a configured field says (as hyper's path
        // replaces it): two would make the response malformed (RFC 9113 §8.1.1).
        if !(has_body && name == CONTENT_LENGTH) {
            block.field(name, value.as_bytes());
        }
    }
    if has_body && !length_sent {
        let mut digits = Vec::with_capacity(20);
        crate::http::text::push_decimal(&mut digits, reply.body.len());
        block.field(&CONTENT_LENGTH, &digits);
    }
}

/// Records an exchange whose body was handed to the connection whole (`body_bytes`).
fn record(head: &Head, ctx: &Ctx, outcome: Outcome, started: Instant, body_bytes: u64) {
    Exchange {
        remote: ctx.origin.peer.ip(),
        request: RequestFields {
            method: &head.method,
            target: head.target().as_bytes(),
            protocol: Protocol::Http2,
            referer: head.referer(),
            user_agent: head.user_agent(),
        },
        outcome: Outcome {
            body_bytes,
            ..outcome
        },
        started,
        head_ready: started,
        ended: Instant::now(),
    }
    .record();
}
