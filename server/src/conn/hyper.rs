//! The hyper path: HTTP/2 with prior knowledge (h2c) and every HTTP/1.1 request the fast
//! path does not take. Requests are routed by the same `exchange::front` and recorded by
//! the same exchange record as on the fast path, so both paths answer and log alike.

use super::recorded_body::{RecordedBody, RequestMeta};
use super::reply_body::ReplyBody;
use super::rewind::Rewind;
use crate::app::Routed;
use crate::exchange::{front, Outcome, Protocol};
use crate::http::reply::Reply;
use crate::http::request::{HeaderSource, RequestHead};
use crate::shutdown::stopping;
use crate::state::Shared;
use crate::upstream::{self, BackendRequest, ClientBody, Message};
use http::header::{CONTENT_LENGTH, DATE, SERVER};
use http::{HeaderValue, Method, Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::TcpStream;

pub(super) async fn serve(
    io: Rewind<TcpStream>,
    peer: SocketAddr,
    local_port: u16,
    shared: Arc<Shared>,
) {
    let limits = shared.settings.limits.clone();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192))
        .max_headers(100)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(limits.max_header_bytes as u32)
        .max_concurrent_streams(128);
    let svc_shared = shared.clone();
    let remote: Arc<str> = peer.ip().to_string().into();
    let service = service_fn(move |req| {
        let shared = svc_shared.clone();
        let remote = remote.clone();
        async move {
            let protocol = Protocol::of(req.version());
            let mut response = handle(req, peer, local_port, remote, &shared).await;
            // As on the fast path: once /readyz fails, HTTP/1 responses close their
            // connection so keep-alive clients move to pods that stay.
            if protocol != Protocol::Http2 && front::closes_connections(&shared.shutdown) {
                response
                    .headers_mut()
                    .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok::<_, Infallible>(response)
        }
    });
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    tokio::pin!(conn);
    let mut phase = shared.shutdown.subscribe();
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(peer = %peer, error = %e, "connection error");
            }
        }
        _ = stopping(&mut phase) => {
            conn.as_mut().graceful_shutdown();
            if let Err(e) = conn.await {
                tracing::debug!(peer = %peer, error = %e, "connection error while draining");
            }
        }
    }
}

async fn handle(
    req: Request<Incoming>,
    peer: SocketAddr,
    local_port: u16,
    remote: Arc<str>,
    shared: &Shared,
) -> Response<RecordedBody> {
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let meta = RequestMeta {
        remote,
        method: parts.method.clone(),
        uri: parts.uri.clone(),
        protocol: Protocol::of(parts.version),
        referer: parts.headers.get(http::header::REFERER).cloned(),
        user_agent: parts.headers.get(http::header::USER_AGENT).cloned(),
        started,
    };
    // The request view is built once; a pool request drops it before the parts move on.
    let head = request_head(&parts, peer.ip());
    let routed = {
        let app = shared.app.load_full();
        let mut routed = front::route(&app, &head, meta.protocol);
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
            let request = BackendRequest {
                route: &route,
                client: peer,
                local_port,
                message: Message::Http(Request::from_parts(parts, ClientBody::Hyper(body))),
            };
            let resp = upstream::serve(request, &shared.metrics).await;
            let head_ready = Instant::now();
            let outcome = Outcome {
                vhost,
                status: resp.status.as_u16(),
                body_bytes: 0,
                cache_hit: None,
                pool: Some(route.backend.pool.name),
            };
            let resp = resp.into_hyper();
            return resp.map(|body| RecordedBody::new(body, meta, outcome, head_ready));
        }
    };
    let head_only = head.method == Method::HEAD;
    let outcome = Outcome {
        vhost,
        status: reply.status.as_u16(),
        body_bytes: 0,
        cache_hit: front::cache_outcome(&reply),
        pool: None,
    };
    // HTTP/2 frames bodies itself; 256 KiB reads keep memory per stream modest.
    let chunk = shared.settings.read_chunk_bytes.min(256 * 1024);
    // A reply built in place has its head at once, as on the fast path.
    let head_ready = meta.started;
    into_response(reply, head_only, chunk)
        .map(|b| RecordedBody::new(b.boxed(), meta, outcome, head_ready))
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
    // HTTP/2 carries the host in :authority.
    if head.host.is_none() {
        head.host = parts.uri.authority().map(|a| a.as_str().as_bytes());
    }
    head.headers = HeaderSource::Map(&parts.headers);
    head.peer = Some(peer);
    head
}

fn into_response(reply: Reply, head_only: bool, chunk: usize) -> Response<ReplyBody> {
    let has_body = reply.has_body_semantics();
    let len = reply.body.len();
    let body = if head_only || !has_body {
        ReplyBody::empty()
    } else {
        let body = ReplyBody::new(reply.body, chunk);
        match reply.throttle {
            Some(t) => body.throttled(t),
            None => body,
        }
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = reply.status;
    let headers = resp.headers_mut();
    headers.reserve(reply.headers.len() + 3);
    headers.insert(SERVER, HeaderValue::from_static("skiff"));
    crate::http::date::with_http_date(|d| {
        if let Ok(v) = HeaderValue::from_str(d) {
            headers.insert(DATE, v);
        }
    });
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
