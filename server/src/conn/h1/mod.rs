//! The HTTP/1.1 fast path. hyper cannot hand a body to sendfile(2) (hyper #140, #3026), so
//! plaintext HTTP/1.1 requests for GET, HEAD and OPTIONS without a body are parsed here
//! with httparse (hyper's own parser) and answered by writing the head and memory bodies
//! with one gathered write, and file bodies with sendfile or pread. Pipelined requests are
//! answered in one batch. Anything else (h2c prior knowledge, request bodies, Expect,
//! Upgrade, other methods) is handed to hyper together with the bytes already read.
//! The same loop serves HTTPS connections whose session the kernel took over (kTLS):
//! the socket then carries plain bytes, requests are marked secure (and 421 for another
//! certificate's Host, as on hyper), and the records sent count against the key's limit.
//!
//! This file is the connection loop (reads, timers, batching); `skiff_http::h1_head`
//! and `encode` work on bytes, `output` writes, `backend` serves pool requests on the
//! connection.

mod backend;
mod encode;
mod idle;
mod logged;
mod output;
mod paced;
mod pending;
mod socket;
pub(super) mod transport;
mod wait;

use super::stop_wait::{stopping_now, StopWait};
use crate::app::{Routed, Verdict, Verification};
use crate::conn::file_send::FileSendPolicy;
use crate::conn::origin::TlsSession;
use crate::exchange::{front, Protocol};
use crate::http::request::RequestHead;
use crate::state::Shared;
use crate::tls::ktls::RecordBudget;
use backend::{BackendJob, Link};
use bytes::Bytes;
use http::{Method, StatusCode};
use logged::Logged;
use output::{Output, Seg, MAX_QUEUED_BYTES};
use pending::Pending;
use skiff_http::h1_head::{self as parse, HeadLimits, Parsed};
use socket::ReadResult;
use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::TcpStream;
use transport::Transport;
use wait::{wait, Deadline, Woke};

/// How a connection left the fast path.
pub(super) enum Ended {
    Closed,
    /// Idle past `park::PARK_AFTER` with nothing buffered: the stream and its last
    /// request's time, for `park`.
    Parked(TcpStream, Instant),
    /// For hyper, with the bytes read but not consumed (and, on kTLS, the records sent).
    Handoff(Transport, Bytes, Option<RecordBudget>),
}

/// A TLS connection: its session, and on kTLS the records sent under the kernel's key so
/// far (rustls counts its own).
pub(super) struct OnTls {
    pub session: TlsSession,
    pub records: Option<RecordBudget>,
}

/// What the parser made of the buffered bytes.
enum Step {
    /// A request was answered (queued); the flag says whether the connection stays open.
    Complete(bool),
    /// A request (without a body) for a backend pool, already consumed from the buffer.
    Backend(Box<BackendJob>),
    Incomplete,
    Handoff,
    Reject(StatusCode),
    /// Not HTTP/1.x: close without an answer.
    Drop,
    /// Basic auth needs a bcrypt first. The request stays buffered, to be routed again
    /// with the verdict; the instant is when it was first routed, for its record. Boxed,
    /// as is the verdict, so every idle connection's future grows by 40 bytes, not 152.
    Verify(Box<(Verification, Instant)>),
}

thread_local! {
    static KEPT: RefCell<Vec<idle::Buffers<Seg, Pending>>> = const { RefCell::new(Vec::new()) };
}

/// Takes this worker's buffer pool into use (see `conn::start_worker`).
pub(super) fn claim_worker_buffers() {
    KEPT.with(|_| {});
}

/// This worker's buffers for connections that are reading or writing.
static BUFFERS: idle::Pool<Seg, Pending> = idle::Pool::new(&KEPT);

struct Conn<'s> {
    stream: Transport,
    peer: SocketAddr,
    /// The listener's port: SERVER_PORT for pool requests.
    local_port: u16,
    shared: &'s Arc<Shared>,
    /// Set on a TLS connection (kTLS or rustls).
    tls: Option<TlsSession>,
    /// The request buffer (`max_header_bytes + 1`); empty while the connection waits
    /// with nothing buffered, when it and the output buffers are back in `BUFFERS`.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    out: Output,
    pending: Vec<Pending>,
    read_chunk: Vec<u8>,
    /// When the current partially received request began, for the header timeout.
    partial_since: Option<Instant>,
    /// When the last request was read, or the last response that was not all from
    /// memory ended: the keep-alive deadline and the park's run from it.
    last_active: Instant,
    /// Whether a request has begun: until then, silence is bounded by the header timeout,
    /// not the keep-alive one.
    asked: bool,
    /// Whether the connection may be parked when idle: plain (not TLS), on a worker
    /// that parks.
    parkable: bool,
    /// When this task began serving it: a resumed connection is not idle before it has
    /// read what woke it, whatever its last request's time.
    began: Instant,
    /// The clock as last read: when the bytes being served arrived, or when a backend
    /// exchange, a verification or a batch that was not all memory ended. The start of
    /// every request parsed from those bytes, and the end of a batch of cache hits
    /// written at once: read once per turn, as nginx caches its time per event-loop turn.
    turn: Instant,
}

/// How `run` ended.
enum Exit {
    Closed,
    Handoff,
    Park,
}

pub(super) async fn serve(
    stream: Transport,
    peer: SocketAddr,
    local_port: u16,
    shared: &Arc<Shared>,
    tls: Option<OnTls>,
    resumed: Option<Instant>,
) -> Ended {
    let (tls, records) = match tls {
        Some(t) => (Some(t.session), t.records),
        None => (None, None),
    };
    let parkable = tls.is_none() && !stream.is_rustls() && super::park::available();
    let began = Instant::now();
    let mut out = Output::default();
    out.records = records;
    let mut conn = RecordCutOnDrop(Some(Conn {
        stream,
        peer,
        local_port,
        shared,
        tls,
        // Taken from the pool at the first read.
        buf: Vec::new(),
        start: 0,
        end: 0,
        out,
        pending: Vec::new(),
        read_chunk: Vec::new(),
        partial_since: None,
        // A resumed connection's keep-alive deadline still runs from its last request.
        last_active: resumed.unwrap_or(began),
        asked: resumed.is_some(),
        parkable,
        began,
        turn: began,
    }));
    let exit = conn.0.as_mut().expect("taken only below").run().await;
    let mut conn = conn.0.take().expect("taken only here");
    // close_notify says the last response was whole: not after an error, which may have
    // cut a body short (a backend failing mid-body, a file that shrank).
    let whole = matches!(exit, Ok(Exit::Closed));
    let ended = match exit {
        Ok(Exit::Handoff) => Some(Bytes::copy_from_slice(&conn.buf[conn.start..conn.end])),
        Ok(Exit::Park) => {
            // `run` parks only plain connections, with nothing buffered or queued.
            conn.rest();
            if let Transport::Plain(stream) = conn.stream {
                return Ended::Parked(stream, conn.last_active);
            }
            return Ended::Closed;
        }
        Ok(Exit::Closed) => None,
        Err(e) => {
            tracing::debug!(peer = %conn.peer, error = %e, "connection ended with an error");
            None
        }
    };
    // Every way out of `run` flushed (and recorded) first: this only hands the pool
    // empty buffers.
    conn.pending.clear();
    conn.out.clear();
    conn.start = conn.end;
    conn.rest();
    match ended {
        Some(prefix) => Ended::Handoff(conn.stream, prefix, conn.out.records),
        None => {
            if whole {
                conn.stream.close_notify();
            }
            Ended::Closed
        }
    }
}

impl Conn<'_> {
    /// Serves requests until the connection closes, goes to hyper, or is to be parked.
    async fn run(&mut self) -> io::Result<Exit> {
        let mut stop = StopWait::default();
        let header_timeout = self.shared.settings.limits.header_timeout;
        // One timer per connection, re-armed lazily: requests only move `last_active`,
        // and the timer re-checks the real deadline when it fires.
        let mut timer_at = self.idle_deadline();
        let mut timer = Deadline::new(timer_at);
        let mut timer_for_partial = false;
        let mut verified = None;
        loop {
            // Answer every complete request already buffered.
            loop {
                match self.next_request(verified.take()) {
                    Step::Complete(keep_alive) => {
                        if !keep_alive {
                            self.flush().await?;
                            return Ok(Exit::Closed);
                        }
                        if self.out.queued_bytes >= MAX_QUEUED_BYTES {
                            self.flush().await?;
                        }
                        // Reads and writes here spend no coop budget (`try_io`): without
                        // this, a client that keeps a pipeline full would hold the worker,
                        // its accept loop and every other connection's timers.
                        tokio::task::consume_budget().await;
                    }
                    Step::Incomplete => break,
                    Step::Backend(job) => {
                        // Earlier pipelined responses go first.
                        self.flush().await?;
                        let link = Link {
                            stream: &mut self.stream,
                            out: &mut self.out,
                            read_chunk: &mut self.read_chunk,
                            shared: self.shared,
                        };
                        let client = backend::Client {
                            peer: self.peer,
                            local_port: self.local_port,
                            buf: &self.buf,
                        };
                        // Boxed: the pool exchange's future would otherwise make every
                        // connection's task kilobytes larger, idle ones included.
                        let (keep, ended) = Box::pin(backend::serve(link, client, *job)).await;
                        self.last_active = ended;
                        self.turn = ended;
                        if !keep? {
                            return Ok(Exit::Closed);
                        }
                    }
                    Step::Handoff => {
                        self.flush().await?;
                        return Ok(Exit::Handoff);
                    }
                    Step::Verify(job) => {
                        let (verification, started) = *job;
                        // Earlier pipelined responses go first; bcrypt runs on the
                        // verification pool while this connection (not the thread) waits.
                        self.flush().await?;
                        let verdict = Box::pin(verification.run(&self.shared.metrics)).await;
                        self.turn = Instant::now();
                        verified = Some(Box::new((verdict, started)));
                    }
                    Step::Reject(status) => {
                        self.queue_rejection(status);
                        self.flush().await?;
                        return Ok(Exit::Closed);
                    }
                    Step::Drop => {
                        self.flush().await?;
                        return Ok(Exit::Closed);
                    }
                }
            }
            self.flush().await?;
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
                self.partial_since = None;
                if stopping_now() {
                    return Ok(Exit::Closed);
                }
            } else if self.partial_since.is_none() {
                self.partial_since = Some(Instant::now());
            }
            if let (Some(since), false) = (self.partial_since, timer_for_partial) {
                timer_for_partial = true;
                timer_at = since + header_timeout;
                timer.reset(timer_at);
            } else if self.partial_since.is_none() && self.parkable && self.asked {
                // Brought forward once; later requests only move `last_active`, and the
                // timer re-checks when it fires, as for the keep-alive deadline.
                let park_at = self.park_at();
                if park_at < timer_at {
                    timer_at = park_at;
                    timer.reset(timer_at);
                }
            }
            // Wait for bytes, the deadline, or shutdown (which only closes idle connections).
            loop {
                match self.read_some()? {
                    ReadResult::Data => {
                        self.turn = Instant::now();
                        break;
                    }
                    ReadResult::Eof => return Ok(Exit::Closed),
                    ReadResult::WouldBlock => {}
                }
                if self.start == self.end {
                    self.rest();
                }
                let idle = self.start == self.end;
                match wait(self.stream.tcp(), &mut timer, &mut stop, idle).await? {
                    Woke::Readable => {}
                    Woke::Deadline => {
                        let deadline = match self.partial_since {
                            Some(t) => t + header_timeout,
                            None => self.idle_deadline(),
                        };
                        let now = Instant::now();
                        if now >= deadline {
                            if self.partial_since.is_some() {
                                self.queue_rejection(StatusCode::REQUEST_TIMEOUT);
                                let _ = self.flush().await;
                            }
                            return Ok(Exit::Closed);
                        }
                        timer_at = deadline;
                        if self.partial_since.is_none() && self.parkable && self.asked {
                            let park_at = self.park_at();
                            if now < park_at {
                                timer_at = timer_at.min(park_at);
                            } else if super::park::available() {
                                return Ok(Exit::Park);
                            } else {
                                // The worker stopped parking (the server stops): wait
                                // here, until the keep-alive deadline or shutdown.
                                self.parkable = false;
                            }
                        }
                        timer.reset(timer_at);
                    }
                    Woke::Stop => return Ok(Exit::Closed),
                }
            }
            if self.partial_since.is_none() && timer_for_partial {
                timer_for_partial = false;
                timer_at = self.idle_deadline();
                timer.reset(timer_at);
            }
        }
    }

    /// When an idle connection is parked.
    fn park_at(&self) -> Instant {
        self.last_active.max(self.began) + super::park::PARK_AFTER
    }

    /// When an idle connection is closed: the header timeout after it opened if it has not
    /// asked anything yet, the keep-alive timeout after `last_active` otherwise.
    fn idle_deadline(&self) -> Instant {
        let limits = &self.shared.settings.limits;
        if self.asked {
            self.last_active + limits.keepalive_timeout
        } else {
            self.last_active + limits.header_timeout
        }
    }

    /// Lends the buffers back to the worker while nothing is buffered: an idle
    /// keep-alive connection then holds no buffer (BENCHMARKS.md, idle connections).
    fn rest(&mut self) {
        debug_assert!(self.start == self.end && self.pending.is_empty());
        self.start = 0;
        self.end = 0;
        let (head, segs) = self.out.lend();
        BUFFERS.give(idle::Buffers {
            read: std::mem::take(&mut self.buf),
            head,
            segs,
            pending: std::mem::take(&mut self.pending),
        });
        // The pread path's chunk is large and seldom used: freed, not pooled.
        self.read_chunk = Vec::new();
    }

    /// Takes buffers from the worker's pool if the connection rests.
    fn wake(&mut self) {
        if self.buf.is_empty() {
            // One byte more than the limit, to tell "exactly at the limit" from "over it".
            let b = BUFFERS.take(self.shared.settings.limits.max_header_bytes + 1);
            self.buf = b.read;
            self.out.restore(b.head, b.segs);
            self.pending = b.pending;
        }
    }

    /// Reads what the socket has into the buffer, compacting it first when full.
    fn read_some(&mut self) -> io::Result<ReadResult> {
        // Queued responses' logged fields point into the buffer: it moves only after they
        // are recorded. Checked in release builds too: it is one comparison per read.
        assert!(self.pending.is_empty(), "reading with responses unrecorded");
        self.wake();
        if self.end == self.buf.len() {
            if self.start == 0 {
                // Full buffer with no complete request: the parser reports 431/414.
                return Ok(ReadResult::Data);
            }
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let (got, result) = self.stream.read_available(&mut self.buf[self.end..]);
        self.end += got;
        result
    }

    /// Parses the next buffered request and answers it: a reply is queued, a backend
    /// request is returned to be served. `verified` is the verdict (and first routing) of
    /// this same request when basic auth sent it to verification.
    fn next_request(&mut self, verified: Option<Box<(Verdict, Instant)>>) -> Step {
        self.start += parse::leading_empty_lines(&self.buf[self.start..self.end]);
        if self.start == self.end {
            // The batch's last request was answered: nothing to set up a parse for.
            return Step::Incomplete;
        }
        let mut headers = parse::header_slots();
        let data = &self.buf[self.start..self.end];
        let mut head = RequestHead::default();
        let limits = &self.shared.settings.limits;
        let limits = HeadLimits {
            max_header_bytes: limits.max_header_bytes,
            max_request_line: limits.max_request_line,
        };
        let req = match parse::parse(data, &mut headers, &limits, &mut head) {
            Parsed::Request(req) => req,
            Parsed::Incomplete => return Step::Incomplete,
            Parsed::Handoff => return Step::Handoff,
            Parsed::Reject(status) => return Step::Reject(status),
            Parsed::Drop => return Step::Drop,
        };
        let parse::Request {
            fields,
            minor,
            close,
            consumed,
        } = req;
        head.peer = Some(self.peer.ip());
        if let Some(session) = &self.tls {
            session.mark(&mut head, self.shared);
        }
        self.last_active = self.turn;
        self.asked = true;
        let started = verified.as_ref().map_or(self.last_active, |v| v.1);
        let protocol = Protocol::of_minor(minor);
        let host_refused = front::host_refused(&head, protocol);
        // On kTLS, the key's record budget ends the connection at this boundary.
        let close = close || host_refused || self.out.records.is_some_and(|r| r.spent());
        let logged = Logged::of(&self.buf, &head);
        let verdict = verified.as_ref().map(|v| &v.0);
        let routed = crate::state::with_live_app(self.shared, |app| {
            front::route_checked(app, &head, host_refused, verdict)
        });
        let (reply, vhost) = match routed {
            Routed::Reply { reply, vhost } => (reply, vhost),
            Routed::Verify(verification) => return Step::Verify(Box::new((verification, started))),
            Routed::Upstream { route, vhost } => {
                // A pool answers. The request has no body (those went to hyper), so it is
                // served here too, without hyper's per-request machinery.
                let Some(message) =
                    backend::message(&route, &head, fields, minor, self.peer, self.local_port)
                else {
                    return Step::Reject(StatusCode::BAD_REQUEST);
                };
                self.start += consumed;
                self.partial_since = None;
                return Step::Backend(Box::new(BackendJob {
                    route,
                    message,
                    method: head.method,
                    vhost,
                    close,
                    minor,
                    started,
                    logged,
                }));
            }
        };
        let close = close || front::closes_connections(&self.shared.shutdown);
        let is_head = head.method == Method::HEAD;
        let status = reply.status.as_u16();
        let cache_hit = front::cache_outcome(&reply);
        // Over rustls, a cached body is sealed from memory: no file path to gain.
        let sendfile_min = if self.stream.is_rustls() {
            u64::MAX
        } else {
            self.shared.settings.sendfile_min_bytes
        };
        let body = self
            .out
            .queue_reply(reply, minor, close, is_head, sendfile_min);
        self.pending.push(Pending {
            vhost,
            method: head.method,
            protocol,
            status,
            cache_hit,
            started,
            logged,
            body,
        });
        self.start += consumed;
        // The header timeout runs from the start of the head still buffered, not from an
        // earlier one a pipelining client has since completed.
        self.partial_since = None;
        Step::Complete(!close)
    }

    /// Queues the error that answers a head refused before it was a request (400, 408,
    /// 414, 431), recorded like any exchange so the log shows the client that sent it.
    fn queue_rejection(&mut self, status: StatusCode) {
        let body = self.out.queue_error(status);
        let started = self.partial_since.unwrap_or(self.turn);
        self.pending.push(Pending::rejection(status, body, started));
    }

    /// Writes everything queued, then records the exchanges of the responses just sent
    /// (with the body bytes that really went out, also when writing failed part way).
    async fn flush(&mut self) -> io::Result<()> {
        let policy = FileSendPolicy::of(&self.shared.settings);
        let sent = self
            .out
            .write_and_clear(&mut self.stream, policy, &mut self.read_chunk)
            .await;
        if sent.via_sendfile > 0 {
            self.shared.metrics.sendfile_bytes.inc_by(sent.via_sendfile);
        }
        // A batch of replies made from the cache's memory and written at once ends in the
        // turn its requests were read in (well under the histogram's first bucket); any
        // other batch (a file read, a compression, a listing, a write that waited) reads
        // the clock.
        let from_memory =
            !sent.took_writer && self.pending.iter().all(|p| p.cache_hit == Some(true));
        if !from_memory {
            self.turn = Instant::now();
            if !self.pending.is_empty() {
                // The keep-alive deadline runs from the end of a long response.
                self.last_active = self.turn;
            }
        }
        self.record_batch(sent.written, self.turn);
        sent.result
    }

    /// Records the batch's responses, `written` bytes of it having gone out by `ended`.
    fn record_batch(&mut self, written: u64, ended: Instant) {
        let remote = self.peer.ip();
        for p in self.pending.drain(..) {
            p.record(&self.buf, remote, written, ended);
        }
    }
}

/// Records the responses of a batch still being written when the connection's task is
/// dropped (the grace period's end drops what a worker has left), with the bytes that
/// left, as a failed write records them. Every way out of `run` has recorded already.
struct RecordCutOnDrop<'s>(Option<Conn<'s>>);

impl Drop for RecordCutOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(conn) = &mut self.0 {
            conn.record_batch(conn.out.written, Instant::now());
        }
    }
}
