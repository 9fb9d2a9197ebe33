//! Pool requests on the fast path: a request without a body goes to its backend from
//! here, and the response is written on the connection (whole bodies with the head in
//! one writev, streamed ones chunk by chunk as the backend sends them). A client that
//! goes away while the backend works cancels it.

use super::encode::{self, Framing};
use super::logged::Logged;
use super::output::{BodySpan, Output};
use super::transport::Transport;
use crate::conn::file_send::FileSendPolicy;
use crate::exchange::{front, Exchange, Outcome, Protocol, CLIENT_CLOSED_REQUEST};
use crate::http::request::RequestHead;
use crate::state::Shared;
use crate::upstream::cgi_env::{CgiRequest, Env};
use crate::upstream::{
    self, BackendRequest, BackendRoute, ClientBody, Message, Payload, UpstreamResponse,
};
use bytes::Bytes;
use http::Method;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// A pool request taken off the buffer, owning what it needs.
pub(super) struct BackendJob {
    pub route: Box<BackendRoute>,
    pub message: JobMessage,
    pub method: Method,
    pub vhost: &'static str,
    pub close: bool,
    pub minor: u8,
    pub started: Instant,
    pub logged: Logged,
}

/// How a backend's response is framed for this request.
#[derive(Clone, Copy)]
struct Shape {
    head_only: bool,
    close: bool,
    minor: u8,
}

pub(super) enum JobMessage {
    /// For a CGI pool: the environment, built while httparse's view was at hand.
    Cgi(Env),
    /// For an HTTP pool (or an absolute-form target): the request in the `http` types.
    Http(http::request::Parts),
}

/// The message for the route's pool, from httparse's view: a CGI environment straight
/// from the parsed fields, or the `http` types for an HTTP pool. `None` when a header or
/// the target is not valid for the `http` types (hyper answers 400 there too).
pub(super) fn message(
    route: &BackendRoute,
    head: &RequestHead<'_>,
    fields: &[httparse::Header<'_>],
    minor: u8,
    peer: SocketAddr,
    local_port: u16,
) -> Option<JobMessage> {
    let version = if minor == 0 {
        http::Version::HTTP_10
    } else {
        http::Version::HTTP_11
    };
    let env = head.target.starts_with('/').then(|| {
        let view = CgiRequest {
            method: head.method.as_str(),
            target: head.target,
            version,
            authority: None,
            fields: fields.iter().map(|f| (f.name.as_bytes(), f.value)),
        };
        upstream::bodiless_cgi_env(route, view, peer, local_port)
    });
    if let Some(env) = env.flatten() {
        return Some(JobMessage::Cgi(env));
    }
    let mut headers = http::HeaderMap::with_capacity(fields.len());
    for f in fields {
        headers.append(
            http::HeaderName::from_bytes(f.name.as_bytes()).ok()?,
            http::HeaderValue::from_bytes(f.value).ok()?,
        );
    }
    let (mut parts, ()) = http::Request::builder()
        .method(head.method.clone())
        .uri(head.target)
        .version(version)
        .body(())
        .ok()?
        .into_parts();
    parts.headers = headers;
    Some(JobMessage::Http(parts))
}

/// The connection's writing side, lent to a backend exchange.
pub(super) struct Link<'c> {
    pub stream: &'c mut Transport,
    pub out: &'c mut Output,
    pub read_chunk: &'c mut Vec<u8>,
    pub shared: &'c Arc<Shared>,
}

/// Who asked, and the read buffer the logged fields point into.
pub(super) struct Client<'c> {
    pub peer: SocketAddr,
    pub local_port: u16,
    pub buf: &'c [u8],
}

/// Runs a pool request and writes its response. Returns whether the connection stays
/// open, and when the exchange ended. The exchange is recorded whatever happens to the
/// connection; a client that leaves before the backend answers cancels the request and
/// is recorded as 499, as on the hyper path.
pub(super) async fn serve(
    mut link: Link<'_>,
    client: Client<'_>,
    job: BackendJob,
) -> (io::Result<bool>, Instant) {
    let BackendJob {
        route,
        message,
        method,
        vhost,
        close,
        minor,
        started,
        logged,
    } = job;
    let (env, parts) = match message {
        JobMessage::Cgi(env) => (Some(env), None),
        JobMessage::Http(parts) => (None, Some(parts)),
    };
    let message = match (&env, parts) {
        (Some(env), _) => Message::Cgi(env),
        (None, Some(parts)) => Message::Http(http::Request::from_parts(parts, ClientBody::Empty)),
        (None, None) => unreachable!("a job has an environment or parts"),
    };
    let request = BackendRequest {
        route: &route,
        client: client.peer,
        local_port: client.local_port,
        message,
    };
    // Recorded once, however the exchange ends: written whole or in part, or dropped with
    // the connection (the grace period's end) before or while its answer is written.
    let mut record = Unrecorded {
        client: &client,
        logged: &logged,
        method: &method,
        minor,
        vhost,
        pool: route.backend.pool.name,
        started,
        head: None,
        sent: 0,
    };
    let resp = tokio::select! {
        resp = upstream::serve(request, &link.shared.metrics) => Some(resp),
        () = link.stream.client_gone() => None,
    };
    let head_ready = Instant::now();
    let Some(resp) = resp else {
        // The client left first: the backend may have run the request all the same, so
        // it is recorded (on drop), as nginx's 499 (client closed request).
        return (Ok(false), head_ready);
    };
    record.head = Some((resp.status.as_u16(), head_ready));
    let shape = Shape {
        head_only: method == Method::HEAD,
        close,
        minor,
    };
    let result = link.write_response(resp, shape, &mut record.sent).await;
    drop(record);
    (result, Instant::now())
}

/// A pool exchange not recorded yet: recorded when dropped, as 499 before the backend's
/// answer (the client left, or the connection was dropped), else with the answer's status
/// and the body bytes that went out.
struct Unrecorded<'a> {
    client: &'a Client<'a>,
    logged: &'a Logged,
    method: &'a Method,
    minor: u8,
    vhost: &'static str,
    pool: &'static str,
    started: Instant,
    /// The answer's status, and when its head was ready.
    head: Option<(u16, Instant)>,
    sent: u64,
}

impl Drop for Unrecorded<'_> {
    fn drop(&mut self) {
        let ended = Instant::now();
        let (status, head_ready) = self.head.unwrap_or((CLIENT_CLOSED_REQUEST, ended));
        Exchange {
            remote: self.client.peer.ip(),
            request: self.logged.fields(
                self.client.buf,
                self.method,
                Protocol::of_minor(self.minor),
            ),
            outcome: Outcome {
                vhost: self.vhost,
                status,
                body_bytes: self.sent,
                cache_hit: None,
                pool: Some(self.pool),
            },
            started: self.started,
            head_ready,
            ended,
        }
        .record();
    }
}

impl Link<'_> {
    /// Writes the queued output; returns the bytes written, also when writing failed
    /// part way.
    async fn write_queued(&mut self) -> (u64, io::Result<()>) {
        let policy = FileSendPolicy::of(&self.shared.settings);
        let sent = self
            .out
            .write_and_clear(self.stream, policy, self.read_chunk)
            .await;
        if sent.via_sendfile > 0 {
            self.shared.metrics.sendfile_bytes.inc_by(sent.via_sendfile);
        }
        (sent.written, sent.result)
    }

    /// Writes a backend's response; `sent` counts the body bytes that went out. Returns
    /// whether the connection may stay open.
    async fn write_response(
        &mut self,
        resp: UpstreamResponse,
        shape: Shape,
        sent: &mut u64,
    ) -> io::Result<bool> {
        let Shape {
            head_only,
            close,
            minor,
        } = shape;
        // HEAD: the length the backend declared for GET, if it did; not the empty body's.
        let exact = if head_only {
            resp.declared_len()
        } else {
            resp.whole_len()
        };
        let framing = Framing::of(resp.status, head_only, exact, minor);
        let close =
            close || framing == Framing::Close || front::closes_connections(&self.shared.shutdown);
        let from = self.out.head.len();
        encode::upstream_head(
            &mut self.out.head,
            resp.status,
            &resp.head,
            framing,
            close,
            minor,
        );
        self.out.push_head_appended(from);
        let mut complete = true;
        match resp.payload {
            _ if head_only || framing == Framing::Bodiless => {
                self.write_queued().await.1?;
            }
            Payload::Whole(body) => {
                // A whole body: one writev with the head.
                let span = BodySpan {
                    at: self.out.head.len() as u64,
                    len: body.len() as u64,
                };
                self.out.push_bytes(body);
                let (written, result) = self.write_queued().await;
                *sent = span.sent(written);
                result?;
            }
            Payload::Stream(mut body) => {
                use http_body_util::BodyExt;
                self.write_queued().await.1?;
                loop {
                    match body.frame().await {
                        None => break,
                        Some(Ok(frame)) => {
                            let Ok(data) = frame.into_data() else {
                                continue;
                            };
                            if data.is_empty() {
                                continue;
                            }
                            // The batch holds just this chunk: its data follows the
                            // size line, and counts as far as writing got into it.
                            let mut span = BodySpan {
                                at: 0,
                                len: data.len() as u64,
                            };
                            if framing == Framing::Chunked {
                                let h = &mut self.out.head;
                                let from = h.len();
                                encode::push_hex(h, data.len());
                                h.extend_from_slice(b"\r\n");
                                span.at = (h.len() - from) as u64;
                                self.out.push_head_appended(from);
                                self.out.push_bytes(data);
                                self.out.push_bytes(Bytes::from_static(b"\r\n"));
                            } else {
                                self.out.push_bytes(data);
                            }
                            let (written, result) = self.write_queued().await;
                            *sent += span.sent(written);
                            result?;
                        }
                        Some(Err(e)) => {
                            // The backend failed mid-body: the client must not take the
                            // truncated body for a whole one, so no terminating chunk.
                            tracing::debug!(error = %e, "upstream body ended with an error");
                            complete = false;
                            break;
                        }
                    }
                }
                if complete && framing == Framing::Chunked {
                    self.out.push_bytes(Bytes::from_static(b"0\r\n\r\n"));
                    self.write_queued().await.1?;
                }
            }
        }
        if !complete {
            // An error, not a close: a TLS connection then ends without close_notify, so
            // a client reading to the close does not take the short body for a whole one.
            return Err(io::Error::other("the backend's body ended with an error"));
        }
        Ok(!close)
    }
}
