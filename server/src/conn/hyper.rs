//! The hyper path: every HTTP/1.1 request the fast path does not take, and HTTP/2 with
//! `--h2-engine hyper`; `handle` also answers the HTTP/2 driver's (conn/h2) requests.
//! Requests are routed by the same `exchange::front` and recorded by the same exchange
//! record as on the fast path, so every path answers and logs alike.

use super::activity::{Activity, Verdict};
use super::origin::Origin;
use super::recorded_body::{RecordedBody, RequestMeta};
use super::reply_body::ReplyBody;
use crate::app::{App, Routed};
use crate::exchange::{front, Outcome, Protocol};
use crate::http::reply::Reply;
use crate::http::request::{HeaderSource, RequestHead};
use crate::shutdown::stopping;
use crate::state::Shared;
use crate::upstream::{self, BackendRequest, ClientBody, ClientBodyError, Message};
use http::header::{CONTENT_LENGTH, DATE, SERVER};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use skiff_http::h2::request::Head as H2Head;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite};

/// How long an idle connection's GOAWAY waits for the peer's PING answer.
const GOAWAY_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// The most of an unread request body the hyper path reads and drops before answering.
const DRAIN_LIMIT: usize = 64 * 1024;
/// An HTTP/2 stream's send buffer, and its file reads.
pub(super) const H2_STREAM_SEND_BUFFER: usize = 64 * 1024;

/// Which HTTP hyper speaks on a connection: chosen by the h2c preface on plain
/// connections, by ALPN on TLS ones (hyper-util's auto builder would sniff again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wire {
    Http1,
    Http2,
}

pub(super) async fn serve<I>(io: I, wire: Wire, origin: Origin, shared: Arc<Shared>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let limits = shared.settings.limits.clone();
    let peer = origin.peer;
    let svc_shared = shared.clone();
    let origin = Arc::new(origin);
    let activity = Activity::new();
    let svc_activity = activity.clone();
    // HTTP/1.1 upgrades outlive hyper's connection: this future (and so the connection's
    // admission, held by its caller) lasts until each tunnel drops its sender.
    let (hold, mut tunnels) = match wire {
        Wire::Http1 => {
            let (tx, rx) = tokio::sync::mpsc::channel::<()>(1);
            (Some(crate::upstream::TunnelHold::new(tx)), Some(rx))
        }
        Wire::Http2 => (None, None),
    };
    let service = service_fn(move |mut req: Request<hyper::body::Incoming>| {
        let shared = svc_shared.clone();
        let origin = origin.clone();
        let busy = svc_activity.begin();
        if let Some(hold) = &hold {
            req.extensions_mut().insert(hold.clone());
        }
        async move {
            let protocol = Protocol::of(req.version());
            let mut response = handle(req, &origin, &shared).await;
            response.body_mut().hold(busy);
            // As on the fast path: once /readyz fails, HTTP/1 responses close their
            // connection so keep-alive clients move to pods that stay. A request whose
            // body was refused (408, 413) may have left bytes unread: close too.
            let refused_body = matches!(
                response.status(),
                StatusCode::REQUEST_TIMEOUT | StatusCode::PAYLOAD_TOO_LARGE
            );
            // Not on a 101: its `Connection: upgrade` must stay (RFC 6455 §4.1), and the
            // connection becomes the tunnel's anyway.
            if protocol != Protocol::Http2
                && response.status() != StatusCode::SWITCHING_PROTOCOLS
                && (refused_body || front::closes_connections(&shared.shutdown))
            {
                response
                    .headers_mut()
                    .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok::<_, Infallible>(response)
        }
    });
    let io = TokioIo::new(io);
    match wire {
        Wire::Http1 => {
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .max_buf_size(limits.max_header_bytes.max(8192))
                .max_headers(100)
                .keep_alive(true)
                .serve_connection(io, service)
                .with_upgrades();
            drive(conn, |c| c.graceful_shutdown(), &activity, peer, &shared).await;
            if let Some(tunnels) = tunnels.as_mut() {
                // `None` once every sender is gone: the service's with the connection,
                // a request's with it, a tunnel's when it closes.
                let _ = tunnels.recv().await;
            }
        }
        Wire::Http2 => {
            let conn = http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .max_header_list_size(limits.max_header_bytes as u32)
                .max_concurrent_streams(128)
                // What a stream may have queued for sending beyond the peer's window: with
                // h2's default (400 KiB), 100 streams of large files held 40 MB.
                .max_send_buf_size(H2_STREAM_SEND_BUFFER)
                // Liveness: a peer that stops answering PINGs is gone, whatever its streams.
                .keep_alive_interval(Some(limits.send_timeout))
                .keep_alive_timeout(limits.send_timeout)
                .serve_connection(io, service);
            drive(conn, |c| c.graceful_shutdown(), &activity, peer, &shared).await
        }
    }
}

/// Runs a hyper connection to its end, a drain (graceful close at shutdown), or the
/// activity watcher's verdict.
async fn drive<C>(
    conn: C,
    graceful: impl Fn(std::pin::Pin<&mut C>),
    activity: &Activity,
    peer: SocketAddr,
    shared: &Shared,
) where
    C: std::future::Future<Output = Result<(), hyper::Error>>,
{
    let limits = &shared.settings.limits;
    tokio::pin!(conn);
    let mut phase = shared.shutdown.subscribe();
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(peer = %peer, error = %e, "connection error");
            }
        }
        _ = stopping(&mut phase) => {
            graceful(conn.as_mut());
            if let Err(e) = conn.await {
                tracing::debug!(peer = %peer, error = %e, "connection error while draining");
            }
        }
        // hyper times out HTTP/1 heads but not an HTTP/2 connection that does nothing, nor
        // one whose peer holds streams open by granting no flow-control window.
        verdict = activity.closes(limits.header_timeout, limits.keepalive_timeout, limits.send_timeout) => {
            tracing::debug!(peer = %peer, ?verdict, "closing the connection");
            if verdict == Verdict::Idle {
                graceful(conn.as_mut());
                // GOAWAY and a PING whose answer shows the peer saw it, then close; a
                // live peer answers within a round trip, one that does not is dropped.
                let grace = limits.header_timeout.min(GOAWAY_GRACE);
                if tokio::time::timeout(grace, conn).await.is_err() {
                    tracing::debug!(peer = %peer, "idle connection did not close in time");
                }
            }
            // A stalled stream would hold a graceful close as long: dropped at once.
        }
    }
}

/// Answers one request, whichever connection read it: hyper's (HTTP/1.1, h2 on hyper) or
/// the HTTP/2 driver (conn/h2), whose body type differs.
pub(super) async fn handle<B>(
    req: Request<B>,
    origin: &Origin,
    shared: &Shared,
) -> Response<RecordedBody>
where
    B: http_body::Body<Data = bytes::Bytes> + Send + Sync + 'static,
    B::Error: Into<ClientBodyError>,
{
    handle_routed(req, origin, shared, None).await
}

/// A request routed by its connection before a handler was needed: the configuration
/// generation that routed it, what it decided, and when the request arrived.
pub(super) struct Routing {
    pub app: Arc<App>,
    pub routed: Routed,
    pub started: Instant,
}

/// Routes a request head as `handle` would, without waiting: the HTTP/2 driver answers a
/// `Routed::Reply` in its own poll and hands the rest to `handle_routed`, so a rate limit
/// counts the request once.
pub(super) fn route_now(h2: &H2Head, origin: &Origin, shared: &Shared) -> Routing {
    let started = Instant::now();
    let mut head = request_head_h2(h2, origin.peer.ip());
    if let Some(session) = &origin.tls {
        session.mark(&mut head, shared);
    }
    let app = shared.app.load_full();
    // As on HTTP/1.1: a request for another scheme is refused, not served or proxied.
    let routed = match h2.scheme() {
        Some(s) if !s.eq_ignore_ascii_case("http") && !s.eq_ignore_ascii_case("https") => {
            Routed::Reply {
                reply: crate::http::reply::Reply::error(http::StatusCode::BAD_REQUEST),
                vhost: "unknown",
            }
        }
        _ => front::route(&app, &head, Protocol::Http2),
    };
    Routing {
        app,
        routed,
        started,
    }
}

/// `handle`, for a request `route_now` has already routed (`routing`) or not (`None`).
pub(super) async fn handle_routed<B>(
    req: Request<B>,
    origin: &Origin,
    shared: &Shared,
    routing: Option<Routing>,
) -> Response<RecordedBody>
where
    B: http_body::Body<Data = bytes::Bytes> + Send + Sync + 'static,
    B::Error: Into<ClientBodyError>,
{
    let (peer, local_port) = (origin.peer, origin.local_port);
    let started = routing.as_ref().map_or_else(Instant::now, |r| r.started);
    let (mut parts, body) = req.into_parts();
    let h2 = parts.version == http::Version::HTTP_2;
    if h2 {
        // Done already by Skiff's HTTP/2 engine, not by hyper's (`--h2-engine hyper`).
        skiff_http::h2::request::join_cookies(&mut parts.headers);
    }
    let meta = RequestMeta {
        remote: peer.ip(),
        method: parts.method.clone(),
        uri: parts.uri.clone(),
        protocol: Protocol::of(parts.version),
        referer: parts.headers.get(http::header::REFERER).cloned(),
        user_agent: parts.headers.get(http::header::USER_AGENT).cloned(),
        started,
    };
    // The request view is built once; a pool request drops it before the parts move on.
    let mut head = request_head(&parts, peer.ip());
    if let Some(session) = &origin.tls {
        session.mark(&mut head, shared);
    }
    // As on the fast path: a target of another scheme (`ftp://h/x`) is refused, not
    // routed on its authority.
    let other_scheme = parts
        .uri
        .scheme_str()
        .is_some_and(|s| !s.eq_ignore_ascii_case("http") && !s.eq_ignore_ascii_case("https"));
    let routed = {
        let (app, mut routed) = match routing {
            Some(r) => (r.app, r.routed),
            None if other_scheme => (
                shared.app.load_full(),
                Routed::Reply {
                    reply: crate::http::reply::Reply::error(http::StatusCode::BAD_REQUEST),
                    vhost: "unknown",
                },
            ),
            None => {
                let app = shared.app.load_full();
                let routed = front::route(&app, &head, meta.protocol);
                (app, routed)
            }
        };
        // Basic auth's bcrypt runs on the verification pool: this request waits, the
        // thread does not. Routed again with the verdict, the same generation answers.
        while let Routed::Verify(v) = routed {
            let verdict = v.run(&shared.metrics).await;
            routed = front::route_with_verdict(&app, &head, meta.protocol, Some(&verdict));
        }
        routed
    };
    let (reply, vhost) = match routed {
        Routed::Reply { reply, vhost } => (reply, vhost),
        Routed::Verify(_) => unreachable!("the loop above ends on another answer"),
        Routed::Upstream { route, vhost } => {
            drop(head);
            let head_only = meta.method == http::Method::HEAD;
            let request = BackendRequest {
                route: &route,
                client: peer,
                local_port,
                message: Message::Http(Request::from_parts(
                    parts,
                    ClientBody::stream(body, body_deadline(shared)),
                )),
            };
            let record = RecordedBody::awaiting_pool(meta, vhost, route.backend.pool.name);
            let resp = upstream::serve(request, &shared.metrics).await;
            let head_ready = Instant::now();
            let outcome = Outcome {
                vhost,
                status: resp.status.as_u16(),
                body_bytes: 0,
                cache_hit: None,
                pool: Some(route.backend.pool.name),
            };
            let resp = resp.into_hyper(head_only);
            return resp.map(|body| record.answered(body, outcome, head_ready));
        }
    };
    // A body still arriving for a reply that does not read it (a static file, a
    // redirect) is read and dropped first, within bounds, so the stream ends as HTTP/2
    // expects and its frames are still checked (h2spec 8.1, 8.1.2.6); past the bound,
    // hyper resets the stream (HTTP/2) or closes (HTTP/1.1) as before.
    // A client waiting for `100 Continue` is not asked for its body (reading would send
    // the 100): it gets the final answer at once, as RFC 9110 §10.1.1 intends.
    let awaits_continue = !h2 && head.headers.get("expect").is_some();
    if !body.is_end_stream() && !awaits_continue {
        let mut rest = ClientBody::stream(body, body_deadline(shared));
        rest.limit(DRAIN_LIMIT as u64);
        let _ = rest.gather(DRAIN_LIMIT).await;
    }
    let head_only = head.method == Method::HEAD;
    let outcome = Outcome {
        vhost,
        status: reply.status.as_u16(),
        body_bytes: 0,
        cache_hit: front::cache_outcome(&reply),
        pool: None,
    };
    // HTTP/2 frames bodies itself; a read per send buffer keeps memory per stream
    // bounded (HTTP/1.1 over TLS reads 256 KiB at a time).
    let chunk = shared.settings.read_chunk_bytes.min(if h2 {
        H2_STREAM_SEND_BUFFER
    } else {
        256 * 1024
    });
    // A reply built in place has its head at once, as on the fast path.
    let head_ready = meta.started;
    into_response(reply, head_only, chunk)
        .map(|b| RecordedBody::new(b.boxed(), meta, outcome, head_ready))
}

fn body_deadline(shared: &Shared) -> upstream::BodyDeadline {
    let limits = &shared.settings.limits;
    upstream::BodyDeadline {
        idle: limits.body_timeout,
        min_rate: limits.body_min_rate,
    }
}

/// The handler's view of a hyper request.
fn request_head(parts: &http::request::Parts, peer: std::net::IpAddr) -> RequestHead<'_> {
    let target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let mut head = RequestHead {
        method: parts.method.clone(),
        target,
        ..Default::default()
    };
    let (path, query) = RequestHead::split_target(target);
    head.path = path;
    head.query = query;
    for (name, value) in parts.headers.iter() {
        head.note_header(name.as_str().as_bytes(), value.as_bytes());
    }
    // An absolute-form target's authority replaces Host (RFC 9112 §3.2.2); HTTP/2
    // carries the host in :authority, which takes precedence the same way.
    if let Some(authority) = parts.uri.authority() {
        head.host = Some(authority.as_str().as_bytes());
    }
    head.headers = HeaderSource::Map(&parts.headers);
    head.peer = Some(peer);
    head
}

/// `request_head` for the HTTP/2 driver's head, read in place.
fn request_head_h2(h2: &H2Head, peer: std::net::IpAddr) -> RequestHead<'_> {
    let target = h2.target();
    let (path, query) = RequestHead::split_target(target);
    let mut head = RequestHead {
        method: h2.method.clone(),
        target,
        path,
        query,
        ..Default::default()
    };
    for (name, value) in h2.fields() {
        head.note_header(name, value);
    }
    // `:authority` takes Host's place (RFC 9113 §8.3.1).
    if let Some(authority) = h2.authority() {
        head.host = Some(authority.as_bytes());
    }
    head.headers = HeaderSource::H2(h2);
    head.peer = Some(peer);
    head
}

thread_local! {
    /// This second's Date as a header value: built once a second, then shared.
    static DATE_VALUE: std::cell::RefCell<Option<HeaderValue>> = const { std::cell::RefCell::new(None) };
}

/// The Date header's value for now.
fn date_value() -> Option<HeaderValue> {
    crate::http::date::with_http_date(crate::coarse_clock::unix_seconds(), |d| {
        DATE_VALUE.with(|cached| {
            let mut cached = cached.borrow_mut();
            if cached.as_ref().is_none_or(|v| v.as_bytes() != d.as_bytes()) {
                *cached = HeaderValue::from_str(d).ok();
            }
            cached.clone()
        })
    })
}

/// A reply's body as it is sent, `chunk` bytes of a file at a time under its bandwidth
/// limit; none for HEAD (`head_only`) or a status without one.
pub(super) fn reply_body(
    body: crate::http::reply::Body,
    throttle: Option<Arc<crate::shaping::Throttle>>,
    sends_body: bool,
    chunk: usize,
) -> ReplyBody {
    if !sends_body {
        return ReplyBody::empty();
    }
    let body = ReplyBody::new(body, chunk);
    match throttle {
        Some(t) => body.throttled(t),
        None => body,
    }
}

fn into_response(reply: Reply, head_only: bool, chunk: usize) -> Response<ReplyBody> {
    let has_body = reply.has_body_semantics();
    let len = reply.body.len();
    let body = reply_body(reply.body, reply.throttle, has_body && !head_only, chunk);
    let mut resp = Response::new(body);
    *resp.status_mut() = reply.status;
    let headers = resp.headers_mut();
    let shared_fields = reply.shared_head.as_ref().map_or(0, |s| s.fields.len());
    headers.reserve(reply.headers.len() + shared_fields + 3);
    headers.insert(SERVER, HeaderValue::from_static("skiff"));
    if let Some(date) = date_value() {
        headers.insert(DATE, date);
    }
    if let Some(shared) = &reply.shared_head {
        for (name, value) in &shared.fields {
            headers.append(name.clone(), value.clone());
        }
    }
    for (name, value) in reply.headers {
        headers.append(name, value);
    }
    if has_body {
        headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    }
    resp
}
