//! The hyper path: HTTP/2 with prior knowledge (h2c) and every HTTP/1.1 request the fast
//! path does not take. Requests go through the same handler as the fast path, so both
//! paths answer identically.

use super::body::ReplyBody;
use super::rewind::Rewind;
use super::shutdown::{stopping, Phase};
use super::worker::{with_worker, Shared};
use crate::access_log::LogRecord;
use crate::http::reply::Reply;
use crate::http::request::{HeaderSource, RequestHead};
use crate::upstream::handler::{ClientBody, PoolRequest, UpstreamBody};
use http::header::{CONTENT_LENGTH, DATE, SERVER};
use http::{HeaderValue, Method, Request, Response, StatusCode, Version};
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

pub async fn serve(io: Rewind<TcpStream>, peer: SocketAddr, local_port: u16, shared: Arc<Shared>) {
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
            let http1 = req.version() < Version::HTTP_2;
            let mut response = handle(req, peer, local_port, &remote, &shared).await;
            // As on the fast path: once /readyz fails, HTTP/1 responses close their
            // connection so keep-alive clients move to pods that stay.
            if http1 && shared.shutdown.phase() >= Phase::Draining {
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
    remote: &str,
    shared: &Shared,
) -> Response<UpstreamBody> {
    let start = Instant::now();
    let (parts, body) = req.into_parts();
    let version = match parts.version {
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_10 => "HTTP/1.0",
        _ => "HTTP/1.1",
    };
    // The request view is built once; a pool request drops it before the parts move on.
    let head = request_head(&parts, peer.ip());
    let (reply, vhost, upstream) = {
        if parts.version == Version::HTTP_11 && head.host.is_none() {
            (Reply::error(StatusCode::BAD_REQUEST), "unknown", None)
        } else if head.path == "*" {
            (
                super::fast_h1::asterisk_reply(&head.method),
                "unknown",
                None,
            )
        } else {
            let routed = shared.app.load().respond(&head);
            (routed.reply, routed.vhost, routed.upstream)
        }
    };
    if let Some(call) = upstream {
        drop(head);
        let method = parts.method.clone();
        let target = parts
            .uri
            .path_and_query()
            .map_or("/", |pq| pq.as_str())
            .to_owned();
        let (referer, agent) = (
            parts.headers.get(http::header::REFERER).cloned(),
            parts.headers.get(http::header::USER_AGENT).cloned(),
        );
        let resp = crate::upstream::handler::run(
            &call,
            PoolRequest::Hyper(Request::from_parts(parts, ClientBody::Hyper(body))),
            peer,
            local_port,
            &shared.metrics,
        )
        .await;
        let status = resp.status.as_u16();
        let sent = resp.whole_len().unwrap_or(0);
        with_worker(|w| {
            w.metrics.record(
                vhost,
                &method,
                status,
                sent,
                start.elapsed().as_secs_f64(),
                None,
            );
            if w.log.enabled() {
                w.log.log(&LogRecord {
                    remote,
                    method: method.as_str(),
                    target: &target,
                    version,
                    status,
                    bytes: sent,
                    referer: referer.as_ref().map(|v| v.as_bytes()),
                    user_agent: agent.as_ref().map(|v| v.as_bytes()),
                    duration_us: start.elapsed().as_micros() as u64,
                });
            }
        });
        return resp.into_hyper();
    }
    let status = reply.status;
    let head_only = head.method == Method::HEAD;
    let body_len = reply.body.len();
    let cache_hit = matches!(
        status,
        StatusCode::OK | StatusCode::NOT_MODIFIED | StatusCode::PARTIAL_CONTENT
    )
    .then_some(reply.cache_hit);
    let sent = if head_only { 0 } else { body_len };
    with_worker(|w| {
        w.metrics.record(
            vhost,
            &head.method,
            status.as_u16(),
            sent,
            start.elapsed().as_secs_f64(),
            cache_hit,
        );
        if w.log.enabled() {
            w.log.log(&LogRecord {
                remote,
                method: head.method.as_str(),
                target: head.target,
                version,
                status: status.as_u16(),
                bytes: sent,
                referer: head.referer,
                user_agent: head.user_agent,
                duration_us: if w.log.wants_duration() {
                    start.elapsed().as_micros() as u64
                } else {
                    0
                },
            });
        }
    });
    // HTTP/2 frames bodies itself; 256 KiB reads keep memory per stream modest.
    into_response(
        reply,
        head_only,
        shared.settings.read_chunk_bytes.min(256 * 1024),
    )
    .map(|b| b.boxed())
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
