//! HTTP/2 (h2c, ALPN h2) on skiff-http's state machine: one task per connection, none per stream.

mod ctx;
mod file_source;
mod reply;
mod request_body;
mod streams;

use super::activity::{Activity, Busy, Verdict};
use super::origin::Origin;
use crate::shutdown::stopping;
use crate::state::Shared;
use ctx::Ctx;
use skiff_http::h2::conn::{Config, Connection};
use skiff_http::h2::Reason;
use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use streams::Streams;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

/// Bytes read per read call; a frame cut by the end of a read waits in the connection's
/// own (rare) partial buffer.
const READ_BUF: usize = 32 * 1024;
/// Bytes of frames `poll_transmit` gathers for one write over rustls. Each write costs
/// the kernel a pacing-timer re-arm and a wake-up of the peer, which in a VM are exits
/// to the hypervisor: written back to back, 768 KiB cut 100k.jpg's CPU by a third
/// against 256 KiB, which had halved it against 64 KiB (BENCHMARKS.md).
const WRITE_BATCH: usize = 768 * 1024;
/// The batch on a plain socket, where each is followed by a turn of the worker's event
/// loop (`Driver::pause`), as h2o writes 80 KiB per turn: 64m.bin at 185–199 µs of CPU
/// per MiB against 239–282 in 768 KiB batches written back to back (h2o 194–203;
/// BENCHMARKS.md, session 18). Over rustls the 768 KiB batches stay: not measured there.
const PLAIN_BATCH: usize = 80 * 1024;
/// The batch after a write that had to wait for the socket. Each batch written without
/// a wait doubles the next, up to the connection's limit: a slow reader gets batches
/// about the size its socket takes, so its streams' queues (their stall clocks) move at
/// its own pace.
const FIRST_BATCH: usize = 64 * 1024;
/// Nothing is read while this much output is backed up (as hyper's h2 waits for the
/// socket before reading): what the peer asks for must leave first.
const READ_BACKLOG: usize = 256 * 1024;
/// Rounds of read, respond, write in one poll before the task yields to its neighbours
/// (on a plain socket, a pause after a whole batch ends the poll sooner).
const ROUNDS: usize = 16;
/// How long a closing connection waits for the peer to close after our GOAWAY, so the
/// GOAWAY is read before a reset (closing with unread input resets the connection).
const LINGER: Duration = Duration::from_secs(2);

thread_local! {
    /// Each worker's read buffer: a connection borrows it only within one poll.
    static READ: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Takes this worker's read and batch buffers into use (see `conn::start_worker`).
pub(super) fn claim_worker_buffers() {
    READ.with(|_| {});
    BATCHES.with(|_| {});
}

/// How the connection ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// GOAWAY written: close after letting the peer read it.
    Close,
    /// The peer went away, or must be dropped (stalled, I/O error).
    Drop,
}

/// What the connection's watcher reports.
enum Watch {
    Stopping,
    Verdict(Verdict),
    /// A connection closed for idleness is still open `LINGER` after its GOAWAY.
    Lingered,
}

type Watcher = Pin<Box<dyn Future<Output = Watch> + Send>>;

/// The connection's settings: those of hyper's path, so the engines compare alike.
fn config(shared: &Shared) -> Config {
    Config {
        max_concurrent_streams: 128,
        max_header_list_size: shared.settings.limits.max_header_bytes as u32,
        // Request bodies: a stream may have 128 KiB in flight, the connection 4 MiB. Bytes
        // buffered here are bounded by these windows (given back only once read), and the
        // connection's must outlast streams that hold theirs unread while they wait for a
        // pool slot, or the one being served starves (hyper's 1 MiB did, at 4 uploads).
        initial_window_size: 128 * 1024,
        connection_window_size: 4 << 20,
        ..Config::default()
    }
}

/// Serves one HTTP/2 connection until it closes, then drops `hold` (the connection's
/// admission). The driver is built here, before the future: spawned as it is, the future
/// holds the driver alone, not also the arguments it was built from (an idle
/// connection's task is this future).
pub(super) fn serve<I, H>(
    io: I,
    origin: Origin,
    shared: Arc<Shared>,
    hold: H,
) -> impl Future<Output = ()> + Send
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Send + 'static,
{
    let activity = Activity::new();
    let watcher = watcher(&shared, &activity, true);
    let ctx = Arc::new(Ctx {
        origin,
        activity,
        shared,
    });
    let mut d = Driver {
        io,
        conn: Connection::new(config(&ctx.shared)),
        streams: Streams::default(),
        out: Vec::new(),
        written: 0,
        flush: false,
        batch_max: FIRST_BATCH,
        batch_waited: false,
        partial: Vec::new(),
        watcher: Some(watcher),
        failed: false,
        blocked: None,
        data_sent: 0,
        batch_limit: if ctx.origin.tls.is_some() {
            WRITE_BATCH
        } else {
            PLAIN_BATCH
        },
        ctx,
        pause: None,
    };
    async move {
        let end = poll_fn(|cx| d.poll(cx)).await;
        tracing::trace!(peer = %d.ctx.origin.peer, ?end, "HTTP/2 connection ended");
        // Handlers and bodies are dropped (and recorded) before the linger, and the batch
        // buffer goes back: the GOAWAY has been written.
        d.streams = Streams::default();
        trim(&mut d.out);
        if end == End::Close {
            let grace = d.ctx.shared.settings.limits.header_timeout.min(LINGER);
            // Boxed: its timer and read buffer would otherwise be reserved in every
            // connection's future for its whole life.
            let _ = Box::pin(tokio::time::timeout(grace, linger(&mut d.io))).await;
        }
        drop(hold);
    }
}

/// The deadlines of a connection (activity.rs: before the first request, between
/// requests, a stream whose data the peer does not take), and the shutdown phase.
fn watcher(shared: &Arc<Shared>, activity: &Arc<Activity>, with_shutdown: bool) -> Watcher {
    let limits = shared.settings.limits.clone();
    let activity = activity.clone();
    let mut phase = with_shutdown.then(|| shared.shutdown.subscribe());
    Box::pin(async move {
        let closes = activity.closes(
            limits.header_timeout,
            limits.keepalive_timeout,
            limits.send_timeout,
        );
        match &mut phase {
            Some(phase) => tokio::select! {
                v = closes => Watch::Verdict(v),
                () = stopping(phase) => Watch::Stopping,
            },
            None => Watch::Verdict(closes.await),
        }
    })
}

/// Bounds a connection closed for idleness: the idle deadline has passed (it would fire
/// on every poll), and a peer that reads a byte now and then defeats the send deadline.
fn closing() -> Watcher {
    Box::pin(async {
        tokio::time::sleep(LINGER).await;
        Watch::Lingered
    })
}

/// Batch buffers a worker keeps for its connections' writes: a connection takes one to
/// gather a batch and gives it back once written, so no batch regrows from nothing.
const BATCHES_KEPT: usize = 3;

thread_local! {
    static BATCHES: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A batch buffer of `WRITE_BATCH` bytes' capacity (its pages are touched only as used).
fn batch_buffer() -> Vec<u8> {
    BATCHES
        .with(|b| b.borrow_mut().pop())
        .unwrap_or_else(|| Vec::with_capacity(WRITE_BATCH))
}

/// Gives a written batch buffer back: the connection keeps none while it waits (a
/// stream waiting on its window would keep a batch for nothing). One of the batch size
/// goes to the worker's batch buffers; one that grew past it (a batch of many queued
/// frames) goes back to the allocator, so the worker never keeps more than its usual size.
fn trim(out: &mut Vec<u8>) {
    let given = std::mem::take(out);
    if (WRITE_BATCH..=2 * WRITE_BATCH).contains(&given.capacity()) {
        BATCHES.with(|b| {
            let mut b = b.borrow_mut();
            if b.len() < BATCHES_KEPT {
                let mut given = given;
                given.clear();
                b.push(given);
            }
        });
    }
}

/// Half-closes and reads until the peer closes too.
async fn linger<I: AsyncRead + AsyncWrite + Unpin>(io: &mut I) {
    if io.shutdown().await.is_err() {
        return;
    }
    let mut sink = [0u8; 256];
    while let Ok(1..) = io.read(&mut sink).await {}
}

/// One poll does all that is ready: read what the socket has (into a per-worker buffer,
/// so an idle connection holds none) and feed it to the connection, act on its events,
/// poll the handlers and response bodies, give read request body bytes back to the
/// windows, and write what `poll_transmit` gives, one buffer per write.
struct Driver<I> {
    io: I,
    conn: Connection,
    streams: Streams,
    /// The batch being written, and how much of it went.
    out: Vec<u8>,
    written: usize,
    /// Bytes were written since the last flush (TLS buffers records).
    flush: bool,
    /// The next batch's size (`FIRST_BATCH` doubling to `batch_limit`), and whether the
    /// one being written had to wait for the socket.
    batch_max: usize,
    batch_waited: bool,
    /// A frame cut by the end of a read.
    partial: Vec<u8>,
    watcher: Option<Watcher>,
    /// A connection error: GOAWAY is queued, nothing more is read.
    failed: bool,
    /// Held while response data waits for a window the peer does not open, so the
    /// watcher's send timeout runs (activity.rs) after the bodies themselves are done.
    blocked: Option<Busy>,
    /// `Connection::data_sent` when the stall clock last restarted: `PROGRESS` bytes of
    /// DATA leaving restart it (`streams::connection_progressed`).
    data_sent: u64,
    ctx: Arc<Ctx>,
    /// The largest batch: `PLAIN_BATCH` with a pause after each, or `WRITE_BATCH`.
    batch_limit: usize,
    /// Between plain batches: the worker's event loop turns (its other tasks and
    /// epoll) before the next is gathered.
    pause: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl<I: AsyncRead + AsyncWrite + Unpin> Driver<I> {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<End> {
        if let Some(pause) = self.pause.as_mut() {
            ready!(pause.as_mut().poll(cx));
            self.pause = None;
        }
        for _ in 0..ROUNDS {
            if let Some(end) = self.poll_watcher(cx) {
                return Poll::Ready(end);
            }
            let mut progress = false;
            if !self.failed && self.backlog() < READ_BACKLOG {
                match self.read(cx) {
                    Poll::Ready(Ok(0)) => return Poll::Ready(End::Drop),
                    Poll::Ready(Ok(_)) => progress = true,
                    Poll::Ready(Err(e)) => {
                        tracing::debug!(peer = %self.ctx.origin.peer, error = %e, "HTTP/2 read failed");
                        return Poll::Ready(End::Drop);
                    }
                    Poll::Pending => {}
                }
            }
            while let Some(ev) = self.conn.poll_event() {
                self.streams.event(ev, &mut self.conn, &self.ctx, cx);
            }
            progress |= self.streams.poll_responses(&mut self.conn, cx);
            progress |= self.streams.poll_bodies(&mut self.conn, cx);
            self.streams.release(&mut self.conn);
            match self.write(cx) {
                Ok(wrote) => progress |= wrote,
                Err(e) => {
                    tracing::debug!(peer = %self.ctx.origin.peer, error = %e, "HTTP/2 write failed");
                    return Poll::Ready(End::Drop);
                }
            }
            self.note_blocked();
            if self.pause.is_some() {
                return Poll::Pending;
            }
            let drained = self.written == self.out.len() && !self.flush;
            if drained && (self.failed || self.conn.is_closed()) {
                return Poll::Ready(End::Close);
            }
            if !progress {
                if drained {
                    trim(&mut self.out);
                    self.written = 0;
                    self.streams.shrink_if_idle();
                }
                return Poll::Pending;
            }
        }
        // More may be ready: yield to the worker's other connections first.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Output not yet written: the batch's rest and the connection's queued frames.
    fn backlog(&self) -> usize {
        self.out.len() - self.written + self.conn.pending_output()
    }

    /// Starts, restarts or ends the flow-control stall clock. It measures a lack of
    /// progress: a peer that opens its window in steps we use up within the round is
    /// blocked at every round's end, yet data moves.
    fn note_blocked(&mut self) {
        let moved = streams::connection_progressed(self.conn.data_sent(), &mut self.data_sent);
        match (self.conn.send_blocked(), &mut self.blocked) {
            (true, None) => {
                let mut busy = self.ctx.activity.begin();
                busy.handed();
                self.blocked = Some(busy);
            }
            (true, Some(busy)) if moved => busy.progressed(),
            (false, Some(_)) => self.blocked = None,
            _ => {}
        }
    }

    /// The deadlines and the shutdown phase.
    fn poll_watcher(&mut self, cx: &mut Context<'_>) -> Option<End> {
        // A watcher armed here is polled at once, so its timer is registered.
        loop {
            let w = self.watcher.as_mut()?;
            let Poll::Ready(watch) = w.as_mut().poll(cx) else {
                return None;
            };
            self.watcher = None;
            match watch {
                // GOAWAY, and the streams in flight finish (the process bounds them with
                // its shutdown grace); the deadlines still hold meanwhile.
                Watch::Stopping => {
                    self.conn.go_away(Reason::NO_ERROR);
                    self.watcher = Some(watcher(&self.ctx.shared, &self.ctx.activity, false));
                }
                // No stream open: GOAWAY and close once it is written.
                Watch::Verdict(Verdict::Idle) => {
                    tracing::debug!(peer = %self.ctx.origin.peer, "closing an idle HTTP/2 connection");
                    self.conn.go_away(Reason::NO_ERROR);
                    self.watcher = Some(closing());
                }
                Watch::Lingered => {
                    tracing::debug!(peer = %self.ctx.origin.peer, "idle HTTP/2 connection outlived its GOAWAY; dropped");
                    return Some(End::Drop);
                }
                // A stream's data waited the whole send timeout: a graceful close would
                // wait as long again.
                Watch::Verdict(Verdict::Stalled) => {
                    tracing::debug!(peer = %self.ctx.origin.peer, "HTTP/2 peer takes no data; dropped");
                    return Some(End::Drop);
                }
            }
        }
    }

    /// One read, fed to the connection. `Ok(0)`: the peer closed.
    fn read(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        READ.with(|buf| {
            let mut buf = buf.borrow_mut();
            if buf.len() != READ_BUF {
                buf.resize(READ_BUF, 0);
            }
            let mut rb = ReadBuf::new(&mut buf[..]);
            ready!(Pin::new(&mut self.io).poll_read(cx, &mut rb))?;
            let n = rb.filled().len();
            if n == 0 {
                return Poll::Ready(Ok(0));
            }
            let result = if self.partial.is_empty() {
                self.conn.recv(&buf[..n]).map(|used| {
                    if used < n {
                        self.partial.extend_from_slice(&buf[used..n]);
                    }
                })
            } else {
                self.partial.extend_from_slice(&buf[..n]);
                self.conn.recv(&self.partial).map(|used| {
                    self.partial.drain(..used);
                    if self.partial.is_empty() {
                        self.partial = Vec::new();
                    }
                })
            };
            if let Err(e) = result {
                // Its GOAWAY is queued: written next, then the connection closes.
                tracing::debug!(peer = %self.ctx.origin.peer, error = %e, "HTTP/2 connection error");
                self.failed = true;
                self.partial = Vec::new();
            }
            Poll::Ready(Ok(n))
        })
    }

    /// Writes batches while the socket takes them. Returns whether any bytes went.
    fn write(&mut self, cx: &mut Context<'_>) -> io::Result<bool> {
        let mut wrote = false;
        loop {
            if self.written == self.out.len() {
                if !self.out.is_empty() {
                    self.batch_max = if self.batch_waited {
                        FIRST_BATCH
                    } else {
                        (2 * self.batch_max).min(self.batch_limit)
                    };
                    self.batch_waited = false;
                }
                self.out.clear();
                self.written = 0;
                if !self.conn.wants_write() {
                    break;
                }
                if self.out.capacity() < WRITE_BATCH {
                    self.out = batch_buffer();
                }
                self.conn.poll_transmit(&mut self.out, self.batch_max);
                if self.out.is_empty() {
                    break;
                }
            }
            match Pin::new(&mut self.io).poll_write(cx, &self.out[self.written..]) {
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => {
                    self.written += n;
                    self.flush = true;
                    wrote = true;
                    let whole = self.written == self.out.len();
                    if whole && self.batch_limit == PLAIN_BATCH && self.conn.wants_write() {
                        // yield_now wakes the task only after the worker's I/O driver
                        // has run, not straight away as a self-wake would.
                        let mut pause: Pin<Box<dyn Future<Output = ()> + Send>> =
                            Box::pin(tokio::task::yield_now());
                        if pause.as_mut().poll(cx).is_pending() {
                            self.pause = Some(pause);
                            return Ok(wrote);
                        }
                    }
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => {
                    self.batch_waited = true;
                    return Ok(wrote);
                }
            }
        }
        if self.flush {
            match Pin::new(&mut self.io).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.flush = false,
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => {}
            }
        }
        Ok(wrote)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection's task holds its driver (boxed by the caller) for as long as it lives,
    /// idle or not: the state machine and the few handles it needs, no buffers (about
    /// 6.7 KB per idle h2c connection in all, measured, where hyper's took 26 KB).
    #[test]
    fn a_written_batch_buffer_goes_to_the_worker_and_is_reused() {
        let mut out = batch_buffer();
        out.extend_from_slice(&[1; 100]);
        let ptr = out.as_ptr();
        trim(&mut out);
        assert_eq!(out.capacity(), 0, "the connection keeps none");
        let again = batch_buffer();
        assert_eq!(
            again.as_ptr(),
            ptr,
            "the worker's kept buffer is taken again"
        );
        assert!(again.is_empty() && again.capacity() >= WRITE_BATCH);
        // A buffer grown far past the batch size is not kept.
        let kept = || BATCHES.with(|b| b.borrow().len());
        let before = kept();
        let mut big = Vec::with_capacity(4 * WRITE_BATCH);
        big.push(0u8);
        trim(&mut big);
        assert_eq!(kept(), before);
    }

    /// The task of an HTTP/2 connection is this future: the driver, the connection's
    /// admission and little else (the arguments the driver is built from are not kept
    /// beside it, nor the linger's timer).
    #[test]
    fn a_connections_task_is_its_driver_and_little_else() {
        fn future_size<A, B, C, D, F>(_f: impl Fn(A, B, C, D) -> F) -> usize {
            std::mem::size_of::<F>()
        }
        type Io = crate::conn::send_deadline::SendDeadline<
            crate::conn::rewind::Rewind<tokio::net::TcpStream>,
        >;
        let task = future_size(
            |io: Io, origin: Origin, shared: Arc<Shared>, hold: crate::conn::Admission| {
                serve(io, origin, shared, hold)
            },
        );
        let driver = std::mem::size_of::<Driver<Io>>();
        assert!(
            task <= driver + 128,
            "an HTTP/2 connection's future is {task} bytes, its driver {driver}"
        );
    }

    #[test]
    fn the_driver_stays_small() {
        let size = std::mem::size_of::<Driver<tokio::net::TcpStream>>();
        assert!(size <= 1024, "the HTTP/2 driver is {size} bytes");
    }
}
