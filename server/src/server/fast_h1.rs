//! The HTTP/1.1 fast path. hyper cannot hand a body to sendfile(2) (hyper #140, #3026), so
//! plaintext HTTP/1.1 requests for GET, HEAD and OPTIONS without a body are parsed here
//! with httparse (hyper's own parser) and answered by writing the head and memory bodies
//! with one writev, and file bodies with sendfile or pread. Pipelined requests are
//! answered in one batch. Anything else (h2c prior knowledge, request bodies, Expect,
//! Upgrade, other methods) is handed to hyper together with the bytes already read.

use super::body::{send_file_slice, FileSendPolicy};
use super::hyper_conn;
use super::rewind::Rewind;
use super::shutdown::Phase;
use super::worker::{with_worker, Shared};
use crate::access_log::LogRecord;
use crate::http::reply::{Body, Part, Reply};
use crate::http::request::{HeaderSource, RequestHead};
use crate::http::text::push_decimal;
use crate::upstream::cgi_env::{CgiRequest, Env};
use crate::upstream::handler::{self, ClientBody, Payload, PoolRequest, ResponseHead};
use bytes::Bytes;
use http::{Method, StatusCode};
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::time::Sleep;

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const MAX_HEADERS: usize = 100;
const MAX_IOVECS: usize = 64;
/// Stop parsing more pipelined requests once this much output is queued.
const MAX_QUEUED_BYTES: usize = 256 * 1024;

enum Next {
    Close,
    Handoff,
}

/// One queued piece of output: head bytes (a range of the head buffer), a shared body
/// slice, or a file region.
enum Seg {
    Head(usize, usize),
    Mem(Bytes),
    File(crate::http::reply::FileSlice),
    /// A body under bandwidth limits, written in timed chunks (never with sendfile).
    Paced(Box<(Vec<Part>, Arc<crate::shaping::Throttle>)>),
}

/// Metrics for a response, recorded once its bytes are with the kernel.
struct Pending {
    vhost: &'static str,
    method: Method,
    status: u16,
    bytes: u64,
    start: Instant,
    cache_hit: Option<bool>,
}

struct Conn<'s> {
    stream: TcpStream,
    peer: SocketAddr,
    /// The listener's port: SERVER_PORT for pool requests.
    local_port: u16,
    /// The peer's address as text, for the access log.
    remote: String,
    shared: &'s Arc<Shared>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    out: Output,
    read_chunk: Vec<u8>,
    /// When the current partially received request began, for the header timeout.
    partial_since: Option<Instant>,
    last_active: Instant,
}

pub async fn serve(stream: TcpStream, peer: SocketAddr, local_port: u16, shared: &Arc<Shared>) {
    let limits = &shared.settings.limits;
    let mut conn = Conn {
        stream,
        peer,
        local_port,
        remote: peer.ip().to_string(),
        shared,
        // One byte more than the limit, to tell "exactly at the limit" from "over it".
        buf: vec![0u8; limits.max_header_bytes + 1],
        start: 0,
        end: 0,
        out: Output {
            head: Vec::with_capacity(512),
            segs: Vec::with_capacity(4),
            queued_bytes: 0,
            pending: Vec::with_capacity(4),
        },
        read_chunk: Vec::new(),
        partial_since: None,
        last_active: Instant::now(),
    };
    match conn.run().await {
        Ok(Next::Close) => {}
        Ok(Next::Handoff) => {
            let prefix = Bytes::copy_from_slice(&conn.buf[conn.start..conn.end]);
            let io = Rewind::new(conn.stream, prefix);
            hyper_conn::serve(io, conn.peer, conn.local_port, shared.clone()).await;
        }
        Err(e) => {
            tracing::debug!(peer = %conn.peer, error = %e, "connection ended with an error");
        }
    }
}

impl Conn<'_> {
    async fn run(&mut self) -> io::Result<Next> {
        let mut phase = self.shared.shutdown.subscribe();
        let keepalive = self.shared.settings.limits.keepalive_timeout;
        let header_timeout = self.shared.settings.limits.header_timeout;
        // One timer per connection, re-armed lazily: requests only move `last_active`,
        // and the timer re-checks the real deadline when it fires.
        let mut timer: std::pin::Pin<Box<Sleep>> = Box::pin(tokio::time::sleep_until(
            (self.last_active + keepalive).into(),
        ));
        let mut timer_for_partial = false;
        loop {
            // Answer every complete request already buffered.
            loop {
                match self.next_request()? {
                    Parsed::Complete(keep_alive) => {
                        if !keep_alive {
                            self.flush().await?;
                            return Ok(Next::Close);
                        }
                        if self.out.queued_bytes >= MAX_QUEUED_BYTES {
                            self.flush().await?;
                        }
                    }
                    Parsed::Incomplete => break,
                    Parsed::Upstream(job) => {
                        // Earlier pipelined responses go first.
                        self.flush().await?;
                        if !self.serve_upstream(*job).await? {
                            return Ok(Next::Close);
                        }
                    }
                    Parsed::Handoff => {
                        self.flush().await?;
                        return Ok(Next::Handoff);
                    }
                    Parsed::Reject(status) => {
                        self.out.queue_error(status);
                        self.flush().await?;
                        return Ok(Next::Close);
                    }
                }
            }
            self.flush().await?;
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
                self.partial_since = None;
                if *phase.borrow() >= Phase::Stopping {
                    return Ok(Next::Close);
                }
            } else if self.partial_since.is_none() {
                self.partial_since = Some(Instant::now());
            }
            if let (Some(since), false) = (self.partial_since, timer_for_partial) {
                timer_for_partial = true;
                timer.as_mut().reset((since + header_timeout).into());
            }
            // Wait for bytes, the deadline, or shutdown (which only closes idle connections).
            loop {
                match self.read_some()? {
                    ReadResult::Data => break,
                    ReadResult::Eof => return Ok(Next::Close),
                    ReadResult::WouldBlock => {}
                }
                tokio::select! {
                    biased;
                    r = self.stream.readable() => r?,
                    _ = timer.as_mut() => {
                        let deadline = match self.partial_since {
                            Some(t) => t + header_timeout,
                            None => self.last_active + keepalive,
                        };
                        if Instant::now() >= deadline {
                            if self.partial_since.is_some() {
                                self.out.queue_error(StatusCode::REQUEST_TIMEOUT);
                                let _ = self.flush().await;
                            }
                            return Ok(Next::Close);
                        }
                        timer.as_mut().reset(deadline.into());
                    }
                    _ = phase.changed(), if self.start == self.end => {
                        if *phase.borrow() >= Phase::Stopping {
                            return Ok(Next::Close);
                        }
                    }
                }
            }
            if self.partial_since.is_none() && timer_for_partial {
                timer_for_partial = false;
                timer.as_mut().reset((self.last_active + keepalive).into());
            }
        }
    }

    /// Reads what the socket has. A short read means the kernel buffer was drained, so
    /// readiness is cleared right away instead of by a second read that would return EAGAIN.
    fn read_some(&mut self) -> io::Result<ReadResult> {
        if self.end == self.buf.len() {
            if self.start == 0 {
                // Full buffer with no complete request: next_request reports 431/414.
                return Ok(ReadResult::Data);
            }
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let stream = &self.stream;
        let space = &mut self.buf[self.end..];
        let cap = space.len();
        let mut got = 0usize;
        let r = stream.try_io(Interest::READABLE, || {
            let n = rustix::io::read(stream, &mut *space).map_err(io::Error::from)?;
            got = n;
            if n > 0 && n < cap {
                Err(io::ErrorKind::WouldBlock.into())
            } else {
                Ok(n)
            }
        });
        match r {
            Ok(0) => Ok(ReadResult::Eof),
            Ok(n) => {
                self.end += n;
                Ok(ReadResult::Data)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if got > 0 {
                    self.end += got;
                    Ok(ReadResult::Data)
                } else {
                    Ok(ReadResult::WouldBlock)
                }
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Ok(ReadResult::Eof),
            Err(e) => Err(e),
        }
    }

    fn next_request(&mut self) -> io::Result<Parsed> {
        // RFC 9112 §2.2: ignore empty lines before a request-line.
        while self.start < self.end && matches!(self.buf[self.start], b'\r' | b'\n') {
            self.start += 1;
        }
        if self.start == self.end {
            return Ok(Parsed::Incomplete);
        }
        let data = &self.buf[self.start..self.end];
        if data.len() < H2_PREFACE.len() && H2_PREFACE.starts_with(data) {
            return Ok(Parsed::Incomplete);
        }
        if data.starts_with(H2_PREFACE) {
            return Ok(Parsed::Handoff);
        }
        let limits = &self.shared.settings.limits;
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let consumed = match req.parse(data) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => {
                let line_end = data.iter().position(|&b| b == b'\n');
                if line_end.is_none_or(|e| e > limits.max_request_line)
                    && data.len() > limits.max_request_line
                {
                    return Ok(Parsed::Reject(StatusCode::URI_TOO_LONG));
                }
                if data.len() > limits.max_header_bytes {
                    return Ok(Parsed::Reject(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE));
                }
                return Ok(Parsed::Incomplete);
            }
            Err(httparse::Error::TooManyHeaders) => {
                return Ok(Parsed::Reject(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE))
            }
            Err(httparse::Error::Version) if data.starts_with(b"PRI ") => {
                return Ok(Parsed::Handoff)
            }
            Err(_) => return Ok(Parsed::Reject(StatusCode::BAD_REQUEST)),
        };
        let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
            return Ok(Parsed::Reject(StatusCode::BAD_REQUEST));
        };
        let line_len = method.len() + target.len() + 10;
        if line_len > limits.max_request_line {
            return Ok(Parsed::Reject(StatusCode::URI_TOO_LONG));
        }
        let method = match method {
            "GET" => Method::GET,
            "HEAD" => Method::HEAD,
            "OPTIONS" => Method::OPTIONS,
            // Other methods may carry bodies and will be routed to backends: hyper's job.
            _ => return Ok(Parsed::Handoff),
        };
        let mut head = RequestHead {
            method,
            target,
            ..Default::default()
        };
        let (path, query) = RequestHead::split_target(target);
        head.path = path;
        head.query = query;
        let mut close = minor == 0;
        for h in req.headers.iter() {
            let name = h.name.as_bytes();
            match name.len() {
                10 if name.eq_ignore_ascii_case(b"connection") => {
                    for token in h.value.split(|&b| b == b',') {
                        let token = token.trim_ascii();
                        if token.eq_ignore_ascii_case(b"close") {
                            close = true;
                        } else if token.eq_ignore_ascii_case(b"keep-alive") && minor == 0 {
                            close = false;
                        } else if token.eq_ignore_ascii_case(b"upgrade") {
                            return Ok(Parsed::Handoff);
                        }
                    }
                }
                14 if name.eq_ignore_ascii_case(b"content-length") => {
                    if h.value.trim_ascii() != b"0" {
                        return Ok(Parsed::Handoff);
                    }
                }
                17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                    return Ok(Parsed::Handoff)
                }
                6 if name.eq_ignore_ascii_case(b"expect") => return Ok(Parsed::Handoff),
                _ => head.note_header(name, h.value),
            }
        }
        head.peer = Some(self.peer.ip());
        head.headers = HeaderSource::H1(req.headers);
        let start = Instant::now();
        self.last_active = start;
        let (reply, vhost) = if minor == 1 && head.host.is_none() {
            // RFC 9112 §3.2: a 1.1 request without Host is rejected.
            close = true;
            (Reply::error(StatusCode::BAD_REQUEST), "unknown")
        } else if head.path == "*" {
            (asterisk_reply(&head.method), "unknown")
        } else {
            let routed = self.shared.app.load().respond(&head);
            if let Some(call) = routed.upstream {
                // A pool answers. The request has no body (those went to hyper above), so
                // it is served here too, without hyper's per-request machinery.
                let HeaderSource::H1(fields) = head.headers else {
                    unreachable!("the fast path parses with httparse")
                };
                // A CGI pool gets its environment straight from httparse's view; an HTTP
                // pool (and an absolute-form target) needs the `http` types.
                let env = target.starts_with('/').then(|| {
                    let view = CgiRequest {
                        method: head.method.as_str(),
                        target,
                        version: if minor == 0 {
                            http::Version::HTTP_10
                        } else {
                            http::Version::HTTP_11
                        },
                        authority: None,
                        fields: fields.iter().map(|f| (f.name.as_bytes(), f.value)),
                    };
                    handler::bodiless_cgi_env(&call, view, self.peer, self.local_port)
                });
                let request = match env.flatten() {
                    Some(env) => JobRequest::Cgi(env),
                    None => match upstream_parts(&head.method, target, minor, fields) {
                        Some(parts) => JobRequest::Parts(parts),
                        None => return Ok(Parsed::Reject(StatusCode::BAD_REQUEST)),
                    },
                };
                self.start += consumed;
                return Ok(Parsed::Upstream(Box::new(UpstreamJob {
                    call,
                    request,
                    method: head.method,
                    vhost: routed.vhost,
                    close,
                    minor,
                    start,
                })));
            }
            (routed.reply, routed.vhost)
        };
        // From the moment /readyz fails, each response closes its connection: keep-alive
        // clients (kube-proxy pins them to this pod) reconnect and reach a pod that stays,
        // while this one still listens for the shutdown delay.
        let draining = self.shared.shutdown.phase() >= Phase::Draining;
        let close = close || draining;
        let is_head = head.method == Method::HEAD;
        let sent = reply.body.len();
        let status = reply.status.as_u16();
        let cache_hit = matches!(
            reply.status,
            StatusCode::OK | StatusCode::NOT_MODIFIED | StatusCode::PARTIAL_CONTENT
        )
        .then_some(reply.cache_hit);
        self.out.queue_reply(
            reply,
            minor,
            close,
            is_head,
            self.shared.settings.sendfile_min_bytes,
        );
        let body_bytes = if is_head { 0 } else { sent };
        with_worker(|w| {
            if w.log.enabled() {
                w.log.log(&LogRecord {
                    remote: &self.remote,
                    method: head.method.as_str(),
                    target: head.target,
                    version: if minor == 1 { "HTTP/1.1" } else { "HTTP/1.0" },
                    status,
                    bytes: body_bytes,
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
        self.out.pending.push(Pending {
            vhost,
            method: head.method.clone(),
            status,
            bytes: body_bytes,
            start,
            cache_hit,
        });
        self.start += consumed;
        Ok(Parsed::Complete(!close))
    }

    /// Runs a pool request and writes its response: whole bodies with the head in one
    /// writev, streamed ones chunk by chunk as the backend sends them. Returns whether the
    /// connection stays open. A client that goes away while the backend works cancels it.
    async fn serve_upstream(&mut self, job: UpstreamJob) -> io::Result<bool> {
        use http_body_util::BodyExt;
        let UpstreamJob {
            call,
            request,
            method,
            vhost,
            close,
            minor,
            start,
        } = job;
        // For the access log after the exchange: the environment keeps what it needs;
        // from parts, shared clones (no copies).
        let (env, parts) = match request {
            JobRequest::Cgi(env) => (Some(env), None),
            JobRequest::Parts(parts) => (None, Some(parts)),
        };
        let logged_parts = parts.as_ref().map(|p| {
            (
                p.uri.clone(),
                p.headers.get(http::header::REFERER).cloned(),
                p.headers.get(http::header::USER_AGENT).cloned(),
            )
        });
        let request = match (&env, parts) {
            (Some(env), _) => PoolRequest::CgiBodiless(env),
            (None, Some(parts)) => {
                PoolRequest::Hyper(http::Request::from_parts(parts, ClientBody::Empty))
            }
            (None, None) => unreachable!("a job has an environment or parts"),
        };
        let run = handler::run(
            &call,
            request,
            self.peer,
            self.local_port,
            &self.shared.metrics,
        );
        let resp = tokio::select! {
            resp = run => resp,
            () = client_gone(&self.stream) => return Ok(false),
        };
        let head_only = method == Method::HEAD;
        // HEAD: the length the backend declared for GET, if it did; not the empty body's.
        let exact = if head_only {
            resp.declared_len()
        } else {
            resp.whole_len()
        };
        let framing = Framing::of(resp.status, head_only, exact, minor);
        let close =
            close || framing == Framing::Close || self.shared.shutdown.phase() >= Phase::Draining;
        write_upstream_head(
            &mut self.out.head,
            resp.status,
            &resp.head,
            framing,
            close,
            minor,
        );
        let head_len = self.out.head.len();
        self.out.segs.push(Seg::Head(0, head_len));
        let mut sent = 0u64;
        let mut complete = true;
        match resp.payload {
            _ if head_only || framing == Framing::Bodiless => self.write_queued().await?,
            Payload::Whole(body) => {
                // A whole body: one writev with the head.
                sent = body.len() as u64;
                self.out.segs.push(Seg::Mem(body));
                self.write_queued().await?;
            }
            Payload::Stream(mut body) => {
                self.write_queued().await?;
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
                            sent += data.len() as u64;
                            if framing == Framing::Chunked {
                                let h = &mut self.out.head;
                                push_hex(h, data.len());
                                h.extend_from_slice(b"\r\n");
                                self.out.segs.push(Seg::Head(0, h.len()));
                                self.out.segs.push(Seg::Mem(data));
                                self.out.segs.push(Seg::Mem(Bytes::from_static(b"\r\n")));
                            } else {
                                self.out.segs.push(Seg::Mem(data));
                            }
                            self.write_queued().await?;
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
                    self.out
                        .segs
                        .push(Seg::Mem(Bytes::from_static(b"0\r\n\r\n")));
                    self.write_queued().await?;
                }
            }
        }
        let status = resp.status.as_u16();
        let now = Instant::now();
        let secs = now.duration_since(start);
        with_worker(|w| {
            w.metrics
                .record(vhost, &method, status, sent, secs.as_secs_f64(), None);
            if w.log.enabled() {
                let (target, referer, user_agent) = match (&env, &logged_parts) {
                    (Some(env), _) => (
                        std::str::from_utf8(env.logged_target()).unwrap_or("-"),
                        env.logged_referer(),
                        env.logged_user_agent(),
                    ),
                    (None, Some((uri, referer, agent))) => (
                        uri.path_and_query().map_or("/", |pq| pq.as_str()),
                        referer.as_ref().map(|v| v.as_bytes()),
                        agent.as_ref().map(|v| v.as_bytes()),
                    ),
                    (None, None) => ("-", None, None),
                };
                w.log.log(&LogRecord {
                    remote: &self.remote,
                    method: method.as_str(),
                    target,
                    version: if minor == 1 { "HTTP/1.1" } else { "HTTP/1.0" },
                    status,
                    bytes: sent,
                    referer,
                    user_agent,
                    duration_us: secs.as_micros() as u64,
                });
            }
        });
        self.last_active = now;
        Ok(complete && !close)
    }

    /// Writes the queued segments and clears the output (metrics are not involved).
    async fn write_queued(&mut self) -> io::Result<()> {
        let result = self.write_segments().await;
        self.out.segs.clear();
        self.out.head.clear();
        self.out.queued_bytes = 0;
        result
    }

    /// Writes everything queued: runs of memory segments with writev, files with sendfile
    /// or pread. Then records the metrics of the responses just sent.
    async fn flush(&mut self) -> io::Result<()> {
        let result = self.write_segments().await;
        let out = &mut self.out;
        out.segs.clear();
        out.head.clear();
        out.queued_bytes = 0;
        if !out.pending.is_empty() {
            let now = Instant::now();
            with_worker(|w| {
                for p in out.pending.drain(..) {
                    let secs = now.duration_since(p.start).as_secs_f64();
                    w.metrics
                        .record(p.vhost, &p.method, p.status, p.bytes, secs, p.cache_hit);
                }
            });
            out.pending.clear();
        }
        result
    }

    async fn write_segments(&mut self) -> io::Result<()> {
        let Output { head, segs, .. } = &self.out;
        let mut i = 0;
        let mut skip = 0usize; // bytes of segs[i] already written
        while i < segs.len() {
            if let Seg::Paced(paced) = &segs[i] {
                let (parts, throttle) = &**paced;
                super::body::send_paced(&self.stream, parts, throttle.clone()).await?;
                i += 1;
                continue;
            }
            if let Seg::File(f) = &segs[i] {
                let settings = &self.shared.settings;
                let policy = FileSendPolicy {
                    sendfile_min_bytes: settings.sendfile_min_bytes,
                    sendfile_max_bytes: settings.sendfile_max_bytes,
                    sendfile_chunk_bytes: settings.sendfile_chunk_bytes,
                    read_chunk_bytes: settings.read_chunk_bytes,
                    cork: settings.tcp_cork,
                };
                let sent = send_file_slice(&self.stream, f, policy, &mut self.read_chunk).await?;
                if sent.via_sendfile > 0 {
                    self.shared.metrics.sendfile_bytes.inc_by(sent.via_sendfile);
                }
                i += 1;
                continue;
            }
            // Gather a run of memory segments.
            let mut iov: [IoSlice<'_>; MAX_IOVECS] = [IoSlice::new(&[]); MAX_IOVECS];
            let mut n_iov = 0;
            let mut j = i;
            let mut more_follows = false;
            while j < segs.len() && n_iov < MAX_IOVECS {
                let slice: &[u8] = match &segs[j] {
                    Seg::Head(a, b) => &head[*a..*b],
                    Seg::Mem(b) => b,
                    Seg::File(_) | Seg::Paced(_) => {
                        more_follows = true;
                        break;
                    }
                };
                let slice = if j == i { &slice[skip..] } else { slice };
                iov[n_iov] = IoSlice::new(slice);
                n_iov += 1;
                j += 1;
            }
            let written = write_vectored(&self.stream, &iov[..n_iov], more_follows).await?;
            // Advance over what was written.
            let mut left = written;
            while left > 0 {
                let len = seg_len(&segs[i]) - skip;
                if left >= len {
                    left -= len;
                    i += 1;
                    skip = 0;
                } else {
                    skip += left;
                    left = 0;
                }
            }
            // Skip empty memory segments (e.g. an empty body).
            while i < segs.len()
                && !matches!(segs[i], Seg::File(_) | Seg::Paced(_))
                && seg_len(&segs[i]) == skip
            {
                i += 1;
                skip = 0;
            }
        }
        Ok(())
    }
}

/// `OPTIONS *` asks about the server as a whole; nothing else may use `*`.
pub(crate) fn asterisk_reply(method: &Method) -> Reply {
    if *method == Method::OPTIONS {
        Reply::new(StatusCode::NO_CONTENT).header(
            http::header::ALLOW,
            http::HeaderValue::from_static("GET, HEAD, OPTIONS"),
        )
    } else {
        Reply::error(StatusCode::BAD_REQUEST)
    }
}

/// Responses queued but not yet written.
struct Output {
    head: Vec<u8>,
    segs: Vec<Seg>,
    queued_bytes: usize,
    pending: Vec<Pending>,
}

impl Output {
    fn queue_error(&mut self, status: StatusCode) {
        let reply = Reply::error(status);
        self.queue_reply(reply, 1, true, false, u64::MAX);
    }

    /// Serializes the head into the head buffer and queues the body segments.
    fn queue_reply(
        &mut self,
        reply: Reply,
        minor: u8,
        close: bool,
        head_only: bool,
        sendfile_min: u64,
    ) {
        let h = &mut self.head;
        let from = h.len();
        push_status_line(h, reply.status);
        h.extend_from_slice(b"\r\nServer: skiff\r\nDate: ");
        crate::http::date::with_http_date(|d| h.extend_from_slice(d.as_bytes()));
        h.extend_from_slice(b"\r\n");
        if let Some(shared) = &reply.shared_head {
            h.extend_from_slice(&shared.wire); // includes Content-Length
        }
        for (name, value) in &reply.headers {
            h.extend_from_slice(name.as_str().as_bytes());
            h.extend_from_slice(b": ");
            h.extend_from_slice(value.as_bytes());
            h.extend_from_slice(b"\r\n");
        }
        let with_body = reply.has_body_semantics();
        if with_body && reply.shared_head.is_none() {
            h.extend_from_slice(b"Content-Length: ");
            push_decimal(h, reply.body.len());
            h.extend_from_slice(b"\r\n");
        }
        if close {
            h.extend_from_slice(b"Connection: close\r\n");
        } else if minor == 0 {
            h.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        h.extend_from_slice(b"\r\n");
        let to = h.len();
        // Merge with a directly preceding head range (pipelined bodiless replies).
        match self.segs.last_mut() {
            Some(Seg::Head(_, end)) if *end == from => *end = to,
            _ => self.segs.push(Seg::Head(from, to)),
        }
        self.queued_bytes += to - from;
        if !with_body || head_only {
            return;
        }
        if let Some(throttle) = reply.throttle {
            let parts = match reply.body {
                Body::Empty => vec![],
                Body::Bytes(b) | Body::Mirrored(b, _) => vec![Part::Bytes(b)],
                Body::File(f) => vec![Part::File(f)],
                Body::Parts(p) => p,
            };
            self.queued_bytes += MAX_QUEUED_BYTES; // flush right after: it takes a while
            self.segs.push(Seg::Paced(Box::new((parts, throttle))));
            return;
        }
        let mut push = |seg: Seg, n: u64| {
            self.queued_bytes += n as usize;
            self.segs.push(seg);
        };
        match reply.body {
            Body::Empty => {}
            Body::Bytes(b) => {
                let n = b.len() as u64;
                push(Seg::Mem(b), n)
            }
            Body::Mirrored(_, f) if f.len >= sendfile_min => {
                let n = f.len;
                push(Seg::File(f), n.min(MAX_QUEUED_BYTES as u64))
            }
            Body::Mirrored(b, _) => {
                let n = b.len() as u64;
                push(Seg::Mem(b), n)
            }
            Body::File(f) => {
                let n = f.len;
                push(Seg::File(f), n.min(MAX_QUEUED_BYTES as u64))
            }
            Body::Parts(parts) => {
                for p in parts {
                    match p {
                        Part::Bytes(b) => {
                            let n = b.len() as u64;
                            push(Seg::Mem(b), n)
                        }
                        Part::File(f) => {
                            let n = f.len;
                            push(Seg::File(f), n.min(MAX_QUEUED_BYTES as u64))
                        }
                    }
                }
            }
        }
    }
}

fn seg_len(seg: &Seg) -> usize {
    match seg {
        Seg::Head(a, b) => b - a,
        Seg::Mem(b) => b.len(),
        Seg::File(f) => f.len as usize,
        Seg::Paced(_) => 0,
    }
}

/// One writev (or sendmsg with MSG_MORE when a file body follows, so the head and the
/// first file bytes share a packet), waiting for writability as needed.
async fn write_vectored(
    stream: &TcpStream,
    iov: &[IoSlice<'_>],
    more_follows: bool,
) -> io::Result<usize> {
    if iov.iter().all(|s| s.is_empty()) {
        return Ok(0);
    }
    loop {
        let r = stream.try_io(Interest::WRITABLE, || {
            if more_follows {
                rustix::net::sendmsg(
                    stream,
                    iov,
                    &mut rustix::net::SendAncillaryBuffer::default(),
                    rustix::net::SendFlags::MORE | rustix::net::SendFlags::NOSIGNAL,
                )
                .map_err(io::Error::from)
            } else {
                rustix::io::writev(stream, iov).map_err(io::Error::from)
            }
        });
        match r {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => stream.writable().await?,
            Err(e) => return Err(e),
        }
    }
}

enum Parsed {
    /// A request was answered (queued); the flag says whether the connection stays open.
    Complete(bool),
    /// A request (without a body) for a backend pool, already consumed from the buffer.
    Upstream(Box<UpstreamJob>),
    Incomplete,
    Handoff,
    Reject(StatusCode),
}

/// A pool request taken off the fast path's buffer, owning what it needs.
struct UpstreamJob {
    call: Box<crate::upstream::handler::Call>,
    request: JobRequest,
    method: Method,
    vhost: &'static str,
    close: bool,
    minor: u8,
    start: Instant,
}

enum JobRequest {
    /// For a CGI pool: the environment, built while httparse's view was at hand.
    Cgi(Env),
    /// For an HTTP pool: the request in the `http` types.
    Parts(http::request::Parts),
}

/// The request as the pool handler takes it, built from httparse's view. `None` when a
/// header or the target is not valid for the `http` types (hyper answers 400 there too).
fn upstream_parts(
    method: &Method,
    target: &str,
    minor: u8,
    fields: &[httparse::Header<'_>],
) -> Option<http::request::Parts> {
    let mut headers = http::HeaderMap::with_capacity(fields.len());
    for f in fields {
        headers.append(
            http::HeaderName::from_bytes(f.name.as_bytes()).ok()?,
            http::HeaderValue::from_bytes(f.value).ok()?,
        );
    }
    let (mut parts, ()) = http::Request::builder()
        .method(method.clone())
        .uri(target)
        .version(if minor == 0 {
            http::Version::HTTP_10
        } else {
            http::Version::HTTP_11
        })
        .body(())
        .ok()?
        .into_parts();
    parts.headers = headers;
    Some(parts)
}

/// How an upstream response body is delimited on the wire.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Framing {
    /// No body: HEAD, 1xx, 204, 304.
    Bodiless,
    Length(u64),
    Chunked,
    /// HTTP/1.0 with a streamed body: the end of the connection ends it.
    Close,
}

impl Framing {
    fn of(status: StatusCode, head_only: bool, exact: Option<u64>, minor: u8) -> Framing {
        let bodiless = status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED;
        match (exact, minor) {
            _ if bodiless => Framing::Bodiless,
            (Some(n), _) => Framing::Length(n),
            _ if head_only => Framing::Bodiless,
            (None, 0) => Framing::Close,
            (None, _) => Framing::Chunked,
        }
    }
}

/// Serializes an upstream response head (the backend's headers, already stripped of
/// hop-by-hop fields by the handler) as hyper would: a Date when the backend sent none,
/// and the framing headers the body needs.
fn write_upstream_head(
    h: &mut Vec<u8>,
    status: StatusCode,
    head: &ResponseHead,
    framing: Framing,
    close: bool,
    minor: u8,
) {
    push_status_line(h, status);
    h.extend_from_slice(b"\r\n");
    let has_date = match head {
        // Already without Content-Length and hop-by-hop fields.
        ResponseHead::Fields(fields) => {
            h.extend_from_slice(fields.wire());
            fields.has_date()
        }
        ResponseHead::Map(headers) => {
            for (name, value) in headers {
                if name == http::header::CONTENT_LENGTH || name == http::header::TRANSFER_ENCODING {
                    continue;
                }
                h.extend_from_slice(name.as_str().as_bytes());
                h.extend_from_slice(b": ");
                h.extend_from_slice(value.as_bytes());
                h.extend_from_slice(b"\r\n");
            }
            headers.contains_key(http::header::DATE)
        }
    };
    if !has_date {
        h.extend_from_slice(b"date: ");
        crate::http::date::with_http_date(|d| h.extend_from_slice(d.as_bytes()));
        h.extend_from_slice(b"\r\n");
    }
    match framing {
        Framing::Length(n) => {
            h.extend_from_slice(b"content-length: ");
            push_decimal(h, n);
            h.extend_from_slice(b"\r\n");
        }
        Framing::Chunked => h.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        Framing::Bodiless | Framing::Close => {}
    }
    if close || framing == Framing::Close {
        h.extend_from_slice(b"connection: close\r\n");
    } else if minor == 0 {
        h.extend_from_slice(b"connection: keep-alive\r\n");
    }
    h.extend_from_slice(b"\r\n");
}

enum ReadResult {
    Data,
    Eof,
    WouldBlock,
}

/// Resolves when the client has closed its side (EOF or reset) while a backend works.
/// Bytes it sends meanwhile (a pipelined request) are left for later, and then there is
/// nothing more to learn here, so it stops watching.
async fn client_gone(stream: &TcpStream) {
    let mut probe = [0u8; 1];
    loop {
        if stream.readable().await.is_err() {
            return;
        }
        match stream.try_io(Interest::READABLE, || {
            rustix::net::recv(stream, &mut probe, rustix::net::RecvFlags::PEEK)
                .map(|(n, _)| n)
                .map_err(io::Error::from)
        }) {
            Ok(0) => return,
            Ok(_) => return std::future::pending().await,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(_) => return,
        }
    }
}

/// `HTTP/1.1 404 Not Found`, without the line end: static and upstream heads alike.
fn push_status_line(h: &mut Vec<u8>, status: StatusCode) {
    h.extend_from_slice(b"HTTP/1.1 ");
    h.extend_from_slice(status.as_str().as_bytes());
    h.push(b' ');
    h.extend_from_slice(status.canonical_reason().unwrap_or("Unknown").as_bytes());
}

/// Appends `n` in lowercase hex (a chunk size).
fn push_hex(out: &mut Vec<u8>, n: usize) {
    let digits = if n == 0 {
        1
    } else {
        (usize::BITS - n.leading_zeros()).div_ceil(4) as usize
    };
    for i in (0..digits).rev() {
        out.push(b"0123456789abcdef"[(n >> (i * 4)) & 0xf]);
    }
}

#[cfg(test)]
mod upstream_tests {
    use super::*;

    #[test]
    fn chunk_sizes_are_lowercase_hex() {
        for (n, want) in [
            (0, "0"),
            (9, "9"),
            (255, "ff"),
            (4096, "1000"),
            (0xabcde, "abcde"),
        ] {
            let mut out = Vec::new();
            push_hex(&mut out, n);
            assert_eq!(out, want.as_bytes(), "{n}");
        }
    }

    #[test]
    fn framing_follows_status_method_length_and_version() {
        use Framing::*;
        assert_eq!(Framing::of(StatusCode::OK, false, Some(5), 1), Length(5));
        assert_eq!(Framing::of(StatusCode::OK, false, None, 1), Chunked);
        assert_eq!(Framing::of(StatusCode::OK, false, None, 0), Close);
        assert_eq!(Framing::of(StatusCode::OK, true, None, 0), Bodiless);
        assert_eq!(Framing::of(StatusCode::OK, true, Some(7), 1), Length(7));
        assert_eq!(
            Framing::of(StatusCode::NO_CONTENT, false, None, 1),
            Bodiless
        );
        assert_eq!(
            Framing::of(StatusCode::NOT_MODIFIED, false, Some(0), 1),
            Bodiless
        );
    }

    #[test]
    fn the_upstream_head_replaces_framing_fields_and_adds_a_date() {
        let (mut parts, ()) = http::Response::builder()
            .status(404)
            .header("content-type", "text/plain")
            .header("content-length", "999")
            .header("transfer-encoding", "chunked")
            .header("set-cookie", "a=1")
            .header("set-cookie", "b=2")
            .body(())
            .unwrap()
            .into_parts();
        let status = parts.status;
        let map = |parts: &http::response::Parts| ResponseHead::Map(parts.headers.clone());
        let mut h = Vec::new();
        write_upstream_head(&mut h, status, &map(&parts), Framing::Length(3), false, 1);
        let text = String::from_utf8(h).unwrap();
        assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"), "{text}");
        assert!(
            text.contains("set-cookie: a=1\r\nset-cookie: b=2\r\n"),
            "{text}"
        );
        assert!(text.contains("content-length: 3\r\n"), "{text}");
        assert!(
            !text.contains("999") && !text.contains("transfer-encoding"),
            "{text}"
        );
        assert!(text.contains("date: "), "{text}");
        assert!(
            text.ends_with("\r\n\r\n") && !text.contains("connection"),
            "{text}"
        );
        parts
            .headers
            .insert(http::header::DATE, "backend".parse().unwrap());
        let mut h = Vec::new();
        write_upstream_head(&mut h, status, &map(&parts), Framing::Close, false, 0);
        let text = String::from_utf8(h).unwrap();
        assert!(text.contains("date: backend\r\n") && text.matches("date:").count() == 1);
        assert!(text.contains("connection: close\r\n"), "{text}");
        let mut h = Vec::new();
        write_upstream_head(&mut h, status, &map(&parts), Framing::Chunked, false, 0);
        let text = String::from_utf8(h).unwrap();
        assert!(text.contains("transfer-encoding: chunked\r\nconnection: keep-alive\r\n"));
    }

    #[test]
    fn cgi_fields_go_out_as_the_backend_spelled_them() {
        let head = crate::upstream::response::parse_head(
            b"Status: 201 Created\r\nContent-Type: text/plain\r\nContent-Length: 999\r\n\
              X-Powered-By: PHP\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        let mut h = Vec::new();
        let fields = ResponseHead::Fields(head.fields);
        write_upstream_head(&mut h, head.status, &fields, Framing::Length(3), false, 1);
        let text = String::from_utf8(h).unwrap();
        let date = text.find("date: ").expect("a date is added");
        assert_eq!(
            text[..date].to_string() + &text[text[date..].find("\r\n").unwrap() + date + 2..],
            "HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\nX-Powered-By: PHP\r\n\
             content-length: 3\r\n\r\n"
        );
        let backend_dated = crate::upstream::response::parse_head(b"Date: then\r\n\r\n")
            .unwrap()
            .unwrap();
        let mut h = Vec::new();
        let fields = ResponseHead::Fields(backend_dated.fields);
        write_upstream_head(&mut h, StatusCode::OK, &fields, Framing::Chunked, true, 1);
        let text = String::from_utf8(h).unwrap();
        assert_eq!(
            text,
            "HTTP/1.1 200 OK\r\nDate: then\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        );
    }
}
