//! Running a request against a pool: choose an endpoint, connect (failing over on connect
//! errors, when nothing was sent yet), send the request with its body, parse the response
//! head, and stream the body back through a channel, so a client that goes away cancels
//! the backend request. Errors become 502 (down, malformed) or 504 (timeout), with a log
//! line naming the pool and endpoint.

use super::cgi_env::{environment, CgiContext, CgiRequest, Env};
use super::pool::{Conn, Pool};
use super::response::{parse_head, Fields};
use super::{fastcgi, scgi, uwsgi};
use crate::metrics::Metrics;
use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body::Body as _;
use http_body_util::combinators::BoxBody;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use skiff_config::PoolProtocol;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

pub type UpstreamBody = BoxBody<Bytes, io::Error>;

/// What a rule sends to a pool, compiled.
pub enum Target {
    Cgi {
        document_root: Option<String>,
        index: Option<String>,
        split_path_info: bool,
        params: Vec<(String, String)>,
    },
    Proxy {
        host: Option<HeaderValue>,
    },
}

pub struct Upstream {
    pub pool: Arc<Pool>,
    pub target: Target,
}

/// One routed request for a pool.
pub struct Call {
    pub upstream: Arc<Upstream>,
    /// The decoded, normalized path.
    pub path: String,
    /// The virtual server's root, the default DOCUMENT_ROOT.
    pub root: String,
}

#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error("connect: {0}")]
    Connect(io::Error),
    #[error("timed out")]
    Timeout,
    #[error("{0}")]
    Protocol(String),
    #[error("i/o: {0}")]
    Io(io::Error),
    #[error("request body over {0} bytes")]
    TooLarge(u64),
    /// A kept connection turned out closed before answering.
    #[error("kept connection was closed")]
    Stale,
}

impl Failure {
    fn reason(&self) -> &'static str {
        match self {
            Failure::Connect(_) => "connect",
            Failure::Timeout => "timeout",
            Failure::Protocol(_) => "protocol",
            Failure::Io(_) => "io",
            Failure::TooLarge(_) => "body_too_large",
            Failure::Stale => "stale",
        }
    }
}

fn io_failure(e: io::Error) -> Failure {
    if e.kind() == io::ErrorKind::TimedOut {
        Failure::Timeout
    } else {
        Failure::Io(e)
    }
}

async fn within<T>(
    d: std::time::Duration,
    f: impl std::future::Future<Output = io::Result<T>>,
) -> Result<T, Failure> {
    match tokio::time::timeout(d, f).await {
        Ok(r) => r.map_err(io_failure),
        Err(_) => Err(Failure::Timeout),
    }
}

pub fn error_response(status: StatusCode) -> UpstreamResponse {
    let reply = crate::http::reply::Reply::error(status);
    let body = match reply.body {
        crate::http::reply::Body::Bytes(b) => b,
        _ => Bytes::new(),
    };
    let mut fields = Fields::default();
    fields.push(b"Content-Type", b"text/html; charset=utf-8");
    UpstreamResponse {
        status,
        head: ResponseHead::Fields(fields),
        payload: Payload::Whole(body),
    }
}

/// What a pool answered, for either connection layer: the HTTP/1.1 fast path writes a
/// CGI backend's fields as they came; hyper takes [`UpstreamResponse::into_hyper`].
pub struct UpstreamResponse {
    pub status: StatusCode,
    pub head: ResponseHead,
    pub payload: Payload,
}

/// The response header fields, hop-by-hop ones already removed.
pub enum ResponseHead {
    /// From a FastCGI, uwsgi or SCGI backend, in wire form.
    Fields(Fields),
    /// From an HTTP backend (hyper's client).
    Map(HeaderMap),
}

pub enum Payload {
    /// The whole body, in hand: sent with a Content-Length.
    Whole(Bytes),
    /// A body still arriving from the backend.
    Stream(UpstreamBody),
}

impl UpstreamResponse {
    /// The length of a body that is all in hand.
    pub fn whole_len(&self) -> Option<u64> {
        match &self.payload {
            Payload::Whole(b) => Some(b.len() as u64),
            Payload::Stream(_) => None,
        }
    }

    /// The body length the backend declared (what a HEAD response says).
    pub fn declared_len(&self) -> Option<u64> {
        match &self.head {
            ResponseHead::Fields(f) => f.content_length(),
            ResponseHead::Map(m) => m
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok()),
        }
    }

    pub fn into_hyper(self) -> Response<UpstreamBody> {
        let mut headers = match self.head {
            ResponseHead::Fields(f) => f.into_header_map(),
            ResponseHead::Map(m) => m,
        };
        let body = match self.payload {
            Payload::Whole(b) => {
                headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(b.len()));
                http_body_util::Full::new(b)
                    .map_err(|never| match never {})
                    .boxed()
            }
            Payload::Stream(b) => b,
        };
        let mut resp = Response::new(body);
        *resp.status_mut() = self.status;
        *resp.headers_mut() = headers;
        resp
    }

    fn from_hyper(resp: Response<UpstreamBody>) -> UpstreamResponse {
        let (parts, body) = resp.into_parts();
        UpstreamResponse {
            status: parts.status,
            head: ResponseHead::Map(parts.headers),
            payload: Payload::Stream(body),
        }
    }
}

/// The client's request body: hyper's stream, or none at all (the HTTP/1.1 fast path
/// hands over only requests without a body).
pub enum ClientBody {
    Empty,
    Hyper(Incoming),
}

impl ClientBody {
    fn is_end_stream(&self) -> bool {
        match self {
            ClientBody::Empty => true,
            ClientBody::Hyper(b) => b.is_end_stream(),
        }
    }
}

/// A request for a pool.
// Passed by value once per request and never stored: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub enum PoolRequest<'a> {
    /// From hyper (or needing the `http` types): the parts and the body.
    Hyper(Request<ClientBody>),
    /// A request without a body to a FastCGI, uwsgi or SCGI pool, whose environment the
    /// HTTP/1.1 fast path built from its parser's view ([`bodiless_cgi_env`]).
    CgiBodiless(&'a Env),
}

/// The CGI environment of a request without a body, when the call goes to a FastCGI,
/// uwsgi or SCGI pool (`None` for an HTTP pool).
pub fn bodiless_cgi_env<'a>(
    call: &Call,
    req: CgiRequest<'a, impl Iterator<Item = (&'a [u8], &'a [u8])>>,
    peer: SocketAddr,
    local_port: u16,
) -> Option<Env> {
    let cx = cgi_context(call, peer, local_port, 0)?;
    Some(environment(req, &cx))
}

fn cgi_context(
    call: &Call,
    peer: SocketAddr,
    local_port: u16,
    length: u64,
) -> Option<CgiContext<'_>> {
    let Target::Cgi {
        document_root,
        index,
        split_path_info,
        params,
    } = &call.upstream.target
    else {
        return None;
    };
    Some(CgiContext {
        path: &call.path,
        document_root: document_root.as_deref().unwrap_or(&call.root),
        php_split: call.upstream.pool.protocol == PoolProtocol::Fastcgi && *split_path_info,
        index: index.as_deref(),
        remote_addr: peer,
        server_port: local_port,
        content_length: Some(length),
        extra: params,
    })
}

/// Runs `req` against the call's pool.
pub async fn run(
    call: &Call,
    req: PoolRequest<'_>,
    peer: SocketAddr,
    local_port: u16,
    metrics: &Arc<Metrics>,
) -> UpstreamResponse {
    let pool = &call.upstream.pool;
    let Some(mut slot) = pool.admit() else {
        metrics.upstream_failure(pool.name, "queue_full");
        return error_response(StatusCode::SERVICE_UNAVAILABLE);
    };
    let declared = match &req {
        PoolRequest::Hyper(req) => req
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok()),
        PoolRequest::CgiBodiless(_) => Some(0),
    };
    if declared.is_some_and(|n| n > pool.max_body_size) {
        metrics.upstream_failure(pool.name, "body_too_large");
        return error_response(StatusCode::PAYLOAD_TOO_LARGE);
    }
    let handles = pool.metrics.get_or_init(|| metrics.pool(pool.name));
    handles.active.inc();
    let start = Instant::now();
    let result = match (&call.upstream.target, req) {
        (Target::Proxy { host }, PoolRequest::Hyper(req)) => {
            let (parts, body) = req.into_parts();
            proxy(pool, &mut slot, parts, body, peer, host.as_ref())
                .await
                .map(UpstreamResponse::from_hyper)
        }
        (Target::Cgi { .. }, PoolRequest::Hyper(req)) => {
            let (parts, body) = req.into_parts();
            let input = CgiInput::Parts(parts, body, declared);
            cgi(call, &mut slot, input, peer, local_port).await
        }
        (Target::Cgi { .. }, PoolRequest::CgiBodiless(env)) => {
            cgi(call, &mut slot, CgiInput::Env(env), peer, local_port).await
        }
        (Target::Proxy { .. }, PoolRequest::CgiBodiless(_)) => Err((
            Failure::Protocol("a CGI request for an HTTP pool".into()),
            String::new(),
        )),
    };
    handles.active.dec();
    let resp = match result {
        Ok(resp) => resp,
        Err((failure, endpoint)) => {
            tracing::warn!(pool = pool.name, endpoint = endpoint.as_str(), error = %failure, "upstream request failed");
            metrics.upstream_failure(pool.name, failure.reason());
            error_response(match failure {
                Failure::Timeout => StatusCode::GATEWAY_TIMEOUT,
                Failure::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
                _ => StatusCode::BAD_GATEWAY,
            })
        }
    };
    handles.count(metrics, resp.status.as_u16());
    let first_byte = start.elapsed().as_secs_f64();
    handles.first_byte.observe(first_byte);
    // The total is taken when the body's last frame is sent (at once for whole bodies).
    match resp.payload {
        Payload::Whole(_) => {
            handles.total.observe(first_byte);
            resp
        }
        Payload::Stream(inner) => UpstreamResponse {
            payload: Payload::Stream(
                TimedBody {
                    inner,
                    start,
                    total: handles.total.clone(),
                    done: false,
                }
                .boxed(),
            ),
            ..resp
        },
    }
}

/// Records `skiff_upstream_duration_seconds{phase="total"}` when a streamed body ends.
struct TimedBody {
    inner: UpstreamBody,
    start: Instant,
    total: prometheus_client::metrics::histogram::Histogram,
    done: bool,
}

impl http_body::Body for TimedBody {
    type Data = Bytes;
    type Error = io::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, io::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) && !self.done {
            self.done = true;
            self.total.observe(self.start.elapsed().as_secs_f64());
        }
        polled
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Connects to an endpoint, trying on connect errors first the other addresses of the
/// same name (a headless Service's other pods), then other endpoints. Nothing has been
/// sent then, so this is safe for every method.
async fn connect(
    pool: &Pool,
    slot: &mut super::pool::Slot<'_>,
    client: std::net::IpAddr,
    first: &[u8],
) -> Result<(usize, Conn, usize), (Failure, String)> {
    // Filled only on failures: the usual request allocates nothing here.
    let mut tried = Vec::new();
    let mut last = None;
    while let Some(i) = pool.pick(Some(client), &tried) {
        pool.assign(slot, i);
        let mut addr = pool.next_addr(i);
        let mut dialed = Vec::new();
        loop {
            match pool.connect_sending(i, addr, first).await {
                Ok((c, sent)) => return Ok((i, c, sent)),
                Err(e) => {
                    pool.report_failure_at(i, addr);
                    tracing::warn!(pool = pool.name, endpoint = %pool.endpoints[i].address, address = ?addr, error = %e, "connect failed");
                    last = Some((Failure::Connect(e), pool.endpoints[i].address.to_string()));
                }
            }
            dialed.extend(addr);
            match addr.and_then(|_| pool.another_addr(i, &dialed)) {
                Some(next) => addr = Some(next),
                None => break,
            }
        }
        tried.push(i);
    }
    Err(last.unwrap_or((Failure::Protocol("no endpoints".into()), String::new())))
}

/// Request bodies: streamed when their length is known, otherwise read (up to the limit)
/// first, since every CGI protocol needs CONTENT_LENGTH up front.
enum RequestBody {
    Stream(Incoming),
    Buffered(Bytes),
}

async fn prepare_body(
    body: ClientBody,
    declared: Option<u64>,
    max: u64,
) -> Result<(RequestBody, u64), Failure> {
    let body = match body {
        ClientBody::Empty => return Ok((RequestBody::Buffered(Bytes::new()), 0)),
        ClientBody::Hyper(b) => b,
    };
    if let Some(n) = declared {
        return Ok((RequestBody::Stream(body), n));
    }
    if body.is_end_stream() {
        return Ok((RequestBody::Buffered(Bytes::new()), 0));
    }
    let limited = http_body_util::Limited::new(body, max as usize);
    match limited.collect().await {
        Ok(c) => {
            let b = c.to_bytes();
            let n = b.len() as u64;
            Ok((RequestBody::Buffered(b), n))
        }
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(Failure::TooLarge(max)),
        Err(e) => Err(Failure::Protocol(format!("client body: {e}"))),
    }
}

/// A CGI request as it reaches [`cgi`].
#[allow(clippy::large_enum_variant)] // as PoolRequest
enum CgiInput<'a> {
    /// From hyper: the environment is built once the body's length is known.
    Parts(http::request::Parts, ClientBody, Option<u64>),
    /// Without a body, its environment built already.
    Env(&'a Env),
}

async fn cgi(
    call: &Call,
    slot: &mut super::pool::Slot<'_>,
    input: CgiInput<'_>,
    peer: SocketAddr,
    local_port: u16,
) -> Result<UpstreamResponse, (Failure, String)> {
    let pool = &call.upstream.pool;
    let built;
    let (env, body, length) = match input {
        CgiInput::Env(env) => (env, RequestBody::Buffered(Bytes::new()), 0),
        CgiInput::Parts(parts, body, declared) => {
            let (body, length) = prepare_body(body, declared, pool.max_body_size)
                .await
                .map_err(|f| (f, String::new()))?;
            let cx = cgi_context(call, peer, local_port, length)
                .expect("cgi is only called for CGI targets");
            built = environment(CgiRequest::of_parts(&parts), &cx);
            (&built, body, length)
        }
    };
    let (opening, rest) = opening(pool, env, body, length)?;
    // FastCGI keep-conn: an idle connection first. It may have been closed by the backend
    // meanwhile; a request that went whole in its opening then goes again on a fresh one
    // (nothing was answered).
    if pool.protocol == PoolProtocol::Fastcgi && rest.is_none() {
        if let Some(i) = pool.pick(Some(peer.ip()), &[]) {
            if let Some(idle) = pool.take_idle(i) {
                pool.assign(slot, i);
                match fastcgi_exchange(pool, i, idle, &opening[..], None, length).await {
                    Err(Failure::Stale) => {}
                    other => return finish(pool, i, other),
                }
            }
        }
    }
    let (idx, conn, sent) = connect(pool, slot, peer.ip(), &opening).await?;
    let unsent = &opening[sent..];
    let result = match pool.protocol {
        PoolProtocol::Fastcgi => fastcgi_exchange(pool, idx, conn, unsent, rest, length).await,
        PoolProtocol::Uwsgi | PoolProtocol::Scgi => {
            stream_exchange(pool, conn, unsent, rest, length).await
        }
        PoolProtocol::Http => unreachable!("validated: cgi actions use cgi pools"),
    };
    finish(pool, idx, result)
}

/// The bytes a CGI request opens with, built before connecting so that they can leave
/// with the connection ([`Pool::connect_sending`]): FastCGI's BEGIN_REQUEST and PARAMS
/// records (and a buffered body's STDIN records), or the uwsgi or SCGI vars packet (and a
/// buffered body). A body still to be streamed is returned as the rest.
fn opening(
    pool: &Pool,
    env: &Env,
    body: RequestBody,
    length: u64,
) -> Result<(Bytes, Option<RequestBody>), (Failure, String)> {
    let protocol_error = |e: String| (Failure::Protocol(e), String::new());
    match pool.protocol {
        PoolProtocol::Fastcgi => {
            let mut out = BytesMut::with_capacity(4096);
            fastcgi::encode_begin(&mut out, 1, pool.keepalive > 0);
            fastcgi::encode_params(&mut out, 1, env.iter())
                .map_err(|e| protocol_error(e.to_string()))?;
            match body {
                RequestBody::Buffered(b) => {
                    if !b.is_empty() {
                        fastcgi::encode_stdin(&mut out, 1, &b);
                    }
                    fastcgi::encode_stdin(&mut out, 1, &[]);
                    Ok((out.freeze(), None))
                }
                stream => Ok((out.freeze(), Some(stream))),
            }
        }
        _ => {
            let packet = match pool.protocol {
                PoolProtocol::Uwsgi => {
                    uwsgi::encode_request(env.iter()).map_err(|e| protocol_error(e.to_string()))?
                }
                _ => scgi::encode_request(length, env.iter()),
            };
            match body {
                RequestBody::Buffered(b) if b.is_empty() => Ok((packet, None)),
                RequestBody::Buffered(b) => {
                    let mut both = BytesMut::with_capacity(packet.len() + b.len());
                    both.extend_from_slice(&packet);
                    both.extend_from_slice(&b);
                    Ok((both.freeze(), None))
                }
                stream => Ok((packet, Some(stream))),
            }
        }
    }
}

/// Reports the exchange to the endpoint's passive health; a failure names the endpoint.
fn finish(
    pool: &Pool,
    idx: usize,
    result: Result<UpstreamResponse, Failure>,
) -> Result<UpstreamResponse, (Failure, String)> {
    match result {
        Ok(r) => {
            pool.report_success(idx);
            Ok(r)
        }
        Err(f) => {
            if matches!(f, Failure::Timeout | Failure::Io(_)) {
                pool.report_failure(idx);
            }
            Err((f, pool.endpoints[idx].address.to_string()))
        }
    }
}

async fn send_body(
    pool: &Pool,
    w: &mut (impl AsyncWriteExt + Unpin),
    body: RequestBody,
    length: u64,
    mut frame: impl FnMut(&[u8]) -> Bytes,
) -> Result<(), Failure> {
    match body {
        RequestBody::Buffered(b) => {
            if !b.is_empty() {
                within(pool.send_timeout, w.write_all(&frame(&b))).await?;
            }
        }
        RequestBody::Stream(mut incoming) => {
            let mut sent = 0u64;
            while let Some(f) = incoming.frame().await {
                let f = f.map_err(|e| Failure::Protocol(format!("client body: {e}")))?;
                if let Ok(data) = f.into_data() {
                    sent += data.len() as u64;
                    if sent > length {
                        return Err(Failure::Protocol(
                            "client sent more than its Content-Length".into(),
                        ));
                    }
                    within(pool.send_timeout, w.write_all(&frame(&data))).await?;
                }
            }
        }
    }
    Ok(())
}

/// A FastCGI exchange on `conn`: the rest of the opening, a streamed body with the empty
/// STDIN record after it, then the response.
async fn fastcgi_exchange(
    pool: &Arc<Pool>,
    idx: usize,
    mut conn: Conn,
    unsent: &[u8],
    rest: Option<RequestBody>,
    length: u64,
) -> Result<UpstreamResponse, Failure> {
    let keep_conn = pool.keepalive > 0;
    let stale = |f: Failure| match f {
        Failure::Io(e)
            if matches!(
                e.kind(),
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
            ) =>
        {
            Failure::Stale
        }
        other => other,
    };
    within(pool.send_timeout, conn.write_all(unsent))
        .await
        .map_err(stale)?;
    if let Some(body) = rest {
        conn.set_nodelay();
        send_body(pool, &mut conn, body, length, |chunk| {
            let mut b = BytesMut::with_capacity(chunk.len() + 16);
            fastcgi::encode_stdin(&mut b, 1, chunk);
            b.freeze()
        })
        .await?;
        let mut end = BytesMut::with_capacity(8);
        fastcgi::encode_stdin(&mut end, 1, &[]);
        within(pool.send_timeout, conn.write_all(&end)).await?;
    }

    let mut dec = fastcgi::Decoder::new(1);
    let mut rbuf = BytesMut::with_capacity(16 * 1024);
    let mut stdout = BytesMut::new();
    let mut ended = false;
    let mut received = false;
    let head = loop {
        ended |= drain_events(pool, &mut dec, &mut rbuf, &mut stdout)?;
        if let Some(head) = parse_head(&stdout).map_err(|e| Failure::Protocol(e.to_string()))? {
            break head;
        }
        if ended {
            return Err(Failure::Protocol(
                "the application ended without a response head".into(),
            ));
        }
        match within(pool.read_timeout, conn.read_buf(&mut rbuf)).await {
            Ok(0) if !received => return Err(Failure::Stale),
            Ok(0) => {
                return Err(Failure::Protocol(
                    "the connection closed before a response head".into(),
                ))
            }
            Ok(_) => received = true,
            Err(f) if !received => return Err(stale(f)),
            Err(f) => return Err(f),
        }
    };
    let mut body_so_far = stdout.split_off(head.consumed);
    // The rest of a small response is usually here or on its way: gather it.
    let mut deadline = None;
    while !ended {
        let held = body_so_far.len() + rbuf.len();
        match read_more(&mut conn, &mut rbuf, held, &mut deadline).await {
            Some(Ok(n)) if n > 0 => {
                ended |= drain_events(pool, &mut dec, &mut rbuf, &mut body_so_far)?;
            }
            _ => break,
        }
    }
    let first = body_so_far.freeze();
    if ended && rbuf.is_empty() {
        // The whole response is in hand (the usual case for small pages): one write with a
        // Content-Length, no reader task and no chunked encoding.
        if keep_conn {
            pool.put_idle(idx, conn);
        }
        return Ok(whole(head.status, head.fields, first));
    }
    let (tx, rx) = mpsc::channel::<io::Result<Bytes>>(8);
    let read_timeout = pool.read_timeout;
    let name = pool.name;
    let keeper = pool.clone();
    tokio::spawn(async move {
        if !first.is_empty() && tx.send(Ok(first)).await.is_err() {
            return;
        }
        let mut ended = ended;
        loop {
            loop {
                match dec.decode(&mut rbuf) {
                    Ok(Some(fastcgi::Event::Stdout(b))) => {
                        if tx.send(Ok(b)).await.is_err() {
                            return; // the client went away: dropping the connection aborts
                        }
                    }
                    Ok(Some(fastcgi::Event::Stderr(b))) => {
                        tracing::warn!(
                            pool = name,
                            "backend stderr: {}",
                            String::from_utf8_lossy(&b).trim_end()
                        )
                    }
                    Ok(Some(fastcgi::Event::End { .. })) => ended = true,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(pool = name, error = %e, "malformed FastCGI response");
                        let _ = tx.send(Err(io::Error::other(e.to_string()))).await;
                        return;
                    }
                }
            }
            if ended {
                // The request is complete and nothing is left over: keep the connection.
                if keep_conn && rbuf.is_empty() {
                    keeper.put_idle(idx, conn);
                }
                return;
            }
            match read_within(&mut conn, &mut rbuf, read_timeout).await {
                Ok(0) => {
                    let _ = tx
                        .send(Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "FastCGI response truncated",
                        )))
                        .await;
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            }
        }
    });
    Ok(respond(head.status, head.fields, rx))
}

/// uwsgi and SCGI: a request packet, the raw body, and a response read until EOF.
async fn stream_exchange(
    pool: &Pool,
    mut conn: Conn,
    unsent: &[u8],
    rest: Option<RequestBody>,
    length: u64,
) -> Result<UpstreamResponse, Failure> {
    within(pool.send_timeout, conn.write_all(unsent)).await?;
    if let Some(body) = rest {
        conn.set_nodelay();
        send_body(pool, &mut conn, body, length, Bytes::copy_from_slice).await?;
    }
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let head = loop {
        if let Some(head) = parse_head(&buf).map_err(|e| Failure::Protocol(e.to_string()))? {
            break head;
        }
        if within(pool.read_timeout, conn.read_buf(&mut buf)).await? == 0 {
            return Err(Failure::Protocol(
                "the connection closed before a response head".into(),
            ));
        }
    };
    let mut body = buf.split_off(head.consumed);
    // uwsgi and SCGI end a response by closing: if the close comes soon, the response is
    // complete and goes out whole.
    let mut deadline = None;
    loop {
        let held = body.len();
        match read_more(&mut conn, &mut body, held, &mut deadline).await {
            Some(Ok(0)) => return Ok(whole(head.status, head.fields, body.freeze())),
            Some(Ok(_)) => continue,
            _ => break,
        }
    }
    let first = body.freeze();
    let (tx, rx) = mpsc::channel::<io::Result<Bytes>>(8);
    let read_timeout = pool.read_timeout;
    tokio::spawn(async move {
        if !first.is_empty() && tx.send(Ok(first)).await.is_err() {
            return;
        }
        loop {
            let mut chunk = BytesMut::with_capacity(32 * 1024);
            match read_within(&mut conn, &mut chunk, read_timeout).await {
                Ok(0) => return,
                Ok(_) => {
                    if tx.send(Ok(chunk.freeze())).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            }
        }
    });
    Ok(respond(head.status, head.fields, rx))
}

/// One read from the backend within `timeout`; running out of time is a TimedOut error.
async fn read_within<R: tokio::io::AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    timeout: std::time::Duration,
) -> io::Result<usize> {
    match tokio::time::timeout(timeout, rd.read_buf(buf)).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "backend read timed out",
        )),
    }
}

/// How long a response whose head is in but whose body is not complete may wait for
/// the rest, and how much of it is held at most, before it is streamed instead. uWSGI
/// writes a head and its body separately and php-fpm may split records, microseconds
/// apart: gathered, the page goes out in one write with a Content-Length instead of in
/// chunks through a reader task. A backend that streams (flushes, then works on) is
/// held back by this window once, at the start.
const GATHER_WINDOW: std::time::Duration = std::time::Duration::from_millis(5);
const GATHER_BYTES: usize = 64 * 1024;

/// Reads more of a response being gathered: what has arrived, else a wait within the
/// gathering window. `None` once the window is over or `held` bytes are enough.
async fn read_more(
    conn: &mut Conn,
    buf: &mut BytesMut,
    held: usize,
    deadline: &mut Option<tokio::time::Instant>,
) -> Option<io::Result<usize>> {
    if let Some(r) = read_ready(conn, buf) {
        return Some(r);
    }
    if held >= GATHER_BYTES {
        return None;
    }
    let until = *deadline.get_or_insert_with(|| tokio::time::Instant::now() + GATHER_WINDOW);
    tokio::time::timeout_at(until, conn.read_buf(buf))
        .await
        .ok()
}

/// Reads what the socket already holds, without waiting: `Some(Ok(0))` is EOF, `None`
/// means nothing more is there yet. Lets a response that arrived whole go out whole.
fn read_ready<R: tokio::io::AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut BytesMut,
) -> Option<io::Result<usize>> {
    // One poll of read_buf with a no-op waker: it reads into spare capacity without
    // zero-filling, and a pending read simply means nothing more has arrived yet.
    use std::future::Future;
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(16 * 1024);
    }
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut read = std::pin::pin!(r.read_buf(buf));
    match read.as_mut().poll(&mut cx) {
        Poll::Ready(r) => Some(r),
        Poll::Pending => None,
    }
}

/// A response whose body is complete in memory: sent with a Content-Length in one write.
fn whole(status: StatusCode, fields: Fields, body: Bytes) -> UpstreamResponse {
    UpstreamResponse {
        status,
        head: ResponseHead::Fields(fields),
        payload: Payload::Whole(body),
    }
}

/// Decodes every whole record in `rbuf`: stdout into `into`, stderr to the log. Returns
/// whether END_REQUEST was among them.
fn drain_events(
    pool: &Pool,
    dec: &mut fastcgi::Decoder,
    rbuf: &mut BytesMut,
    into: &mut BytesMut,
) -> Result<bool, Failure> {
    let mut ended = false;
    while let Some(ev) = dec
        .decode(rbuf)
        .map_err(|e| Failure::Protocol(e.to_string()))?
    {
        match ev {
            fastcgi::Event::Stdout(b) => into.extend_from_slice(&b),
            fastcgi::Event::Stderr(b) => log_stderr(pool, &b),
            fastcgi::Event::End { .. } => ended = true,
        }
    }
    Ok(ended)
}

fn log_stderr(pool: &Pool, b: &[u8]) {
    tracing::warn!(
        pool = pool.name,
        "backend stderr: {}",
        String::from_utf8_lossy(b).trim_end()
    );
}

/// Headers a proxy must not forward (RFC 9110 §7.6.1), plus those the connection layer
/// sets itself. Most messages have none, and then nothing is looked up.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    if !headers
        .keys()
        .any(|k| super::response::is_hop_by_hop(k.as_str().as_bytes()))
    {
        return;
    }
    let named: Vec<String> = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|t| t.trim().to_ascii_lowercase()))
        .collect();
    for n in named {
        headers.remove(n.as_str());
    }
    for h in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    ] {
        headers.remove(h);
    }
}

fn respond(
    status: StatusCode,
    fields: Fields,
    rx: mpsc::Receiver<io::Result<Bytes>>,
) -> UpstreamResponse {
    UpstreamResponse {
        status,
        head: ResponseHead::Fields(fields),
        payload: Payload::Stream(ChannelBody { rx }.boxed()),
    }
}

/// A response body fed by the task that reads the backend.
struct ChannelBody {
    rx: mpsc::Receiver<io::Result<Bytes>>,
}

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = io::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, io::Error>>> {
        self.rx
            .poll_recv(cx)
            .map(|o| o.map(|r| r.map(http_body::Frame::data)))
    }
}

/// The Upgrade token of a request that asks for one (`Connection: upgrade`).
fn upgrade_token(headers: &HeaderMap) -> Option<HeaderValue> {
    let asks = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
        });
    asks.then(|| headers.get(http::header::UPGRADE).cloned())
        .flatten()
}

/// Copies bytes both ways between the upgraded client and backend connections.
async fn splice(
    client: hyper::upgrade::OnUpgrade,
    backend: hyper::upgrade::OnUpgrade,
    pool: &'static str,
) {
    let (client, backend) = match tokio::try_join!(client, backend) {
        Ok(pair) => pair,
        Err(e) => {
            tracing::warn!(pool, error = %e, "upgrade failed");
            return;
        }
    };
    let mut client = hyper_util::rt::TokioIo::new(client);
    let mut backend = hyper_util::rt::TokioIo::new(backend);
    if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut backend).await {
        tracing::debug!(pool, error = %e, "upgraded connection ended");
    }
}

type HttpClient = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    UpstreamBody,
>;

fn client() -> &'static HttpClient {
    static CLIENT: std::sync::OnceLock<HttpClient> = std::sync::OnceLock::new();
    CLIENT.get_or_init(|| {
        let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
        connector.set_nodelay(true);
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .pool_max_idle_per_host(64)
            .build(connector)
    })
}

async fn proxy(
    pool: &Pool,
    slot: &mut super::pool::Slot<'_>,
    mut parts: http::request::Parts,
    body: ClientBody,
    peer: SocketAddr,
    host: Option<&HeaderValue>,
) -> Result<Response<UpstreamBody>, (Failure, String)> {
    let idempotent_without_body =
        matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS)
            && body.is_end_stream();
    let mut body = Some(match body {
        ClientBody::Empty => http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed(),
        ClientBody::Hyper(b) => b.map_err(io::Error::other).boxed(),
    });
    // A protocol upgrade (WebSocket): the Upgrade and Connection headers go through, and
    // on a 101 both sides' connections are spliced together.
    let upgrade = upgrade_token(&parts.headers);
    let client_upgrade = upgrade
        .is_some()
        .then(|| parts.extensions.remove::<hyper::upgrade::OnUpgrade>())
        .flatten();
    let mut tried = Vec::new();
    // After a connect failure: the same name again, at one of its other addresses.
    let mut again: Option<(usize, std::net::SocketAddr)> = None;
    let mut dialed_addrs = Vec::new();
    loop {
        let (i, dialed) = match again.take() {
            Some((i, addr)) => (i, Some(addr)),
            None => {
                let Some(i) = pool.pick(Some(peer.ip()), &tried) else {
                    return Err((
                        Failure::Protocol("no endpoint answered".into()),
                        String::new(),
                    ));
                };
                tried.push(i);
                pool.assign(slot, i);
                dialed_addrs.clear();
                // Dial the resolved address in rotation (a headless Service's pods), not
                // the name.
                (i, pool.next_addr(i))
            }
        };
        dialed_addrs.extend(dialed);
        let endpoint = pool.endpoints[i].address.to_string();
        let target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
        let authority = dialed.map_or_else(|| endpoint.clone(), |a| a.to_string());
        let uri: http::Uri = format!("http://{authority}{target}").parse().map_err(|e| {
            (
                Failure::Protocol(format!("endpoint {endpoint}: {e}")),
                endpoint.clone(),
            )
        })?;
        let mut req = Request::builder()
            .method(parts.method.clone())
            .uri(uri)
            .body(match body.take() {
                Some(b) => b,
                None => http_body_util::Empty::new()
                    .map_err(|never| match never {})
                    .boxed(),
            })
            .expect("a valid request");
        let headers = req.headers_mut();
        *headers = parts.headers.clone();
        strip_hop_by_hop(headers);
        if let Some(proto) = &upgrade {
            headers.insert(
                http::header::CONNECTION,
                HeaderValue::from_static("upgrade"),
            );
            headers.insert(http::header::UPGRADE, proto.clone());
        }
        let client_host = parts.headers.get(http::header::HOST).cloned();
        if let Some(h) = host {
            headers.insert(http::header::HOST, h.clone());
        }
        let forwarded = match parts
            .headers
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok())
        {
            Some(prior) => format!("{prior}, {}", peer.ip()),
            None => peer.ip().to_string(),
        };
        if let Ok(v) = HeaderValue::from_str(&forwarded) {
            headers.insert("x-forwarded-for", v);
        }
        headers.insert("x-forwarded-proto", HeaderValue::from_static("http"));
        if let Some(h) = client_host {
            headers.insert("x-forwarded-host", h);
        }
        match tokio::time::timeout(pool.read_timeout, client().request(req)).await {
            Err(_) => {
                pool.report_failure_at(i, dialed);
                return Err((Failure::Timeout, endpoint));
            }
            Ok(Err(e)) if e.is_connect() => {
                pool.report_failure_at(i, dialed);
                tracing::warn!(pool = pool.name, endpoint = endpoint.as_str(), error = %e, "connect failed");
                if idempotent_without_body {
                    if let Some(next) = dialed.and_then(|_| pool.another_addr(i, &dialed_addrs)) {
                        again = Some((i, next));
                        continue;
                    }
                    if pool.pick(Some(peer.ip()), &tried).is_some() {
                        continue;
                    }
                }
                return Err((Failure::Connect(io::Error::other(e.to_string())), endpoint));
            }
            Ok(Err(e)) => return Err((Failure::Protocol(e.to_string()), endpoint)),
            Ok(Ok(mut resp)) => {
                pool.report_success(i);
                if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
                    if let (Some(client), Some(proto)) = (client_upgrade, upgrade) {
                        let backend = hyper::upgrade::on(&mut resp);
                        tokio::spawn(splice(client, backend, pool.name));
                        let mut out = Response::new(
                            http_body_util::Empty::new()
                                .map_err(|never| match never {})
                                .boxed(),
                        );
                        *out.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
                        *out.headers_mut() = resp.headers().clone();
                        out.headers_mut().insert(
                            http::header::CONNECTION,
                            HeaderValue::from_static("upgrade"),
                        );
                        out.headers_mut().insert(http::header::UPGRADE, proto);
                        return Ok(out);
                    }
                    return Err((
                        Failure::Protocol("backend switched protocols unasked".into()),
                        endpoint,
                    ));
                }
                let (mut head, incoming) = resp.into_parts();
                strip_hop_by_hop(&mut head.headers);
                return Ok(Response::from_parts(
                    head,
                    incoming.map_err(io::Error::other).boxed(),
                ));
            }
        }
    }
}
