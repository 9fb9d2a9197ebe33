//! The client's request body on its way to a backend: read under a deadline (silence and
//! a minimum rate, as Apache's mod_reqtimeout), held to the pool's size limit on the bytes
//! as they stream (chunked bodies too), and gathered up to a bound before a pool slot is
//! taken, so a slow client holds no backend worker while its body trickles in.

use super::body_spill::{self, BufferBudget, Spill};
use bytes::{Buf, Bytes, BytesMut};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use std::future::{poll_fn, Future};
use std::path::Path;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// Bodies up to this size are read whole before a slot is taken; larger ones start
/// streaming once this much has arrived (nginx buffers 16 KiB in memory, then to disk).
pub const GATHER_BEFORE_ADMISSION: usize = 64 * 1024;

/// How long a request body may take (`limits.body_timeout`, `limits.body_min_rate`).
#[derive(Debug, Clone, Copy)]
pub struct BodyDeadline {
    /// The longest silence; also the window `min_rate` is held over.
    pub idle: Duration,
    /// Bytes per second each window of `idle` must bring (0: no minimum).
    pub min_rate: u64,
}

/// Why reading the client's body failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientBodyError {
    #[error("the client's body stalled (request body timeout)")]
    Timeout,
    #[error("the client's body is over {0} bytes")]
    TooLarge(u64),
    #[error("reading the client's body: {0}")]
    Io(String),
    /// Writing the body to its file, or reading it back, failed (a full disk).
    #[error("buffering the client's body: {0}")]
    Buffer(String),
    /// Bodies gathered in memory hold all they may (`body_spill::MEMORY`).
    #[error("no room to gather the client's body in memory")]
    BufferFull,
}

impl From<hyper::Error> for ClientBodyError {
    fn from(e: hyper::Error) -> Self {
        ClientBodyError::Io(e.to_string())
    }
}

/// The client's request body: none (the HTTP/1.1 fast path hands over only requests
/// without one), or a connection's stream (hyper's, or the HTTP/2 driver's) under a
/// deadline and a limit.
pub enum ClientBody {
    Empty,
    Stream(Box<ClientStream>),
}

/// A connection's request body stream, whichever connection reads it.
type Incoming = Pin<Box<dyn Body<Data = Bytes, Error = ClientBodyError> + Send + Sync>>;

pub struct ClientStream {
    /// Bytes gathered before admission, handed out first.
    early: Bytes,
    early_trailers: Option<HeaderMap>,
    /// `None` once the stream has ended.
    incoming: Option<Incoming>,
    /// The rest of the body, buffered in a file before admission (`spill_rest`).
    spilled: Option<Spill>,
    /// What arrived after the file met its budget, handed out after it.
    tail: Bytes,
    /// Bytes held in memory past the first [`GATHER_BEFORE_ADMISSION`], counted against
    /// `memory`, given back once handed on (or with the stream).
    memory: &'static BufferBudget,
    memory_held: u64,
    deadline: BodyDeadline,
    /// The current rate window: when it began, and the bytes received by then.
    window_start: Instant,
    window_bytes: u64,
    last_progress: Instant,
    received: u64,
    limit: u64,
    timer: Pin<Box<Sleep>>,
}

impl ClientBody {
    pub fn stream<B>(incoming: B, deadline: BodyDeadline) -> ClientBody
    where
        B: Body<Data = Bytes> + Send + Sync + 'static,
        B::Error: Into<ClientBodyError>,
    {
        if incoming.is_end_stream() {
            return ClientBody::Empty;
        }
        let incoming: Incoming = Box::pin(http_body_util::BodyExt::map_err(incoming, Into::into));
        let now = Instant::now();
        ClientBody::Stream(Box::new(ClientStream {
            early: Bytes::new(),
            early_trailers: None,
            incoming: Some(incoming),
            spilled: None,
            tail: Bytes::new(),
            memory: &body_spill::MEMORY,
            memory_held: 0,
            deadline,
            window_start: now,
            window_bytes: 0,
            last_progress: now,
            received: 0,
            limit: u64::MAX,
            timer: Box::pin(tokio::time::sleep_until(now + deadline.idle)),
        }))
    }

    /// Refuses the body once more than `max` bytes have arrived.
    pub fn limit(&mut self, max: u64) {
        if let ClientBody::Stream(s) = self {
            s.limit = max;
        }
    }

    /// Counts what is gathered in memory against `budget` instead of the process's.
    #[cfg(test)]
    fn memory_budget(&mut self, budget: &'static BufferBudget) {
        if let ClientBody::Stream(s) = self {
            s.memory = budget;
        }
    }

    /// Reads the body until it ends or `bound` bytes are held (those gathered before
    /// included); returns whether it is complete (then `collected_len` is its length).
    pub async fn gather(&mut self, bound: usize) -> Result<bool, ClientBodyError> {
        let ClientBody::Stream(s) = self else {
            return Ok(true);
        };
        // What is gathered goes before a file and its tail, so it may only come first (its
        // memory count, too, assumes no tail).
        if s.spilled.is_some() || !s.tail.is_empty() {
            debug_assert!(false, "gather after spill_rest");
            return Err(ClientBodyError::Buffer("gathered after buffering".into()));
        }
        let mut held = BytesMut::from(&s.early[..]);
        let complete = loop {
            if held.len() >= bound {
                break false;
            }
            if s.incoming.is_none() {
                break true;
            }
            match poll_fn(|cx| s.poll_incoming(cx)).await {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        // Only a gather past the first 64 KiB counts (a whole CGI body): the
                        // first one's overshoot is one frame, as for every body.
                        if bound > GATHER_BEFORE_ADMISSION {
                            let past = (held.len() + data.len())
                                .saturating_sub(GATHER_BEFORE_ADMISSION)
                                as u64;
                            s.hold_in_memory(past - s.memory_held.min(past))?;
                        }
                        held.extend_from_slice(&data);
                    }
                    Err(frame) => s.early_trailers = frame.into_trailers().ok(),
                },
                Some(Err(e)) => return Err(e),
                None => break true,
            }
        };
        s.early = held.freeze();
        Ok(complete)
    }

    /// After `gather`, reads the rest of the body into an unnamed file in `dir`, so that a
    /// backend worker is taken only once all of it is here. When the file meets `budget`,
    /// the rest is gathered in memory if `whole` (a CGI body without a length needs one),
    /// else left to stream after what the file holds. `Ok(false)`: the rest streams; no
    /// file at all (no writable `dir`) is `Ok(false)` too, with nothing read.
    pub async fn spill_rest(
        &mut self,
        dir: &Path,
        budget: &'static BufferBudget,
        whole: bool,
    ) -> Result<bool, ClientBodyError> {
        let ClientBody::Stream(s) = self else {
            return Ok(true);
        };
        if s.incoming.is_none() {
            return Ok(true);
        }
        let Some(mut spill) = Spill::create(dir, budget) else {
            return Ok(false);
        };
        let mut tail = BytesMut::new();
        let complete = loop {
            match poll_fn(|cx| s.poll_incoming(cx)).await {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(mut data) => {
                        if tail.is_empty() {
                            let written = spill
                                .write(&data)
                                .await
                                .map_err(|e| ClientBodyError::Buffer(e.to_string()))?;
                            data.advance(written);
                        }
                        if !data.is_empty() {
                            // Only a body that must be whole gathers more than this frame.
                            if whole {
                                s.hold_in_memory(data.len() as u64)?;
                            }
                            tail.extend_from_slice(&data);
                            if !whole {
                                break false;
                            }
                        }
                    }
                    Err(frame) => s.early_trailers = frame.into_trailers().ok(),
                },
                Some(Err(e)) => return Err(e),
                None => break true,
            }
        };
        s.spilled = Some(spill);
        s.tail = tail.freeze();
        Ok(complete)
    }

    /// The whole body's length, when it has been gathered to its end.
    pub fn collected_len(&self) -> Option<u64> {
        match self {
            ClientBody::Empty => Some(0),
            ClientBody::Stream(s) => s.incoming.is_none().then(|| s.held()),
        }
    }
}

impl ClientStream {
    /// Counts `more` bytes held in memory, or refuses them when the budget has no room.
    fn hold_in_memory(&mut self, more: u64) -> Result<(), ClientBodyError> {
        if more == 0 {
            return Ok(());
        }
        if !self.memory.try_take(more) {
            return Err(ClientBodyError::BufferFull);
        }
        self.memory_held += more;
        Ok(())
    }

    /// Gives back what memory holds, once the bytes gathered have been handed on.
    fn release_memory(&mut self) {
        if self.early.is_empty() && self.tail.is_empty() && self.memory_held > 0 {
            self.memory.give_back(std::mem::take(&mut self.memory_held));
        }
    }

    /// Bytes gathered or buffered and not handed on yet.
    fn held(&self) -> u64 {
        self.early.len() as u64
            + self.spilled.as_ref().map_or(0, Spill::remaining)
            + self.tail.len() as u64
    }

    /// The next frame from hyper, under the deadline and the limit.
    fn poll_incoming(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ClientBodyError>>> {
        let Some(incoming) = self.incoming.as_mut() else {
            return Poll::Ready(None);
        };
        match incoming.as_mut().poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.received += data.len() as u64;
                    if self.received > self.limit {
                        self.incoming = None;
                        return Poll::Ready(Some(Err(ClientBodyError::TooLarge(self.limit))));
                    }
                    if !data.is_empty() {
                        self.last_progress = Instant::now();
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                self.incoming = None;
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                self.incoming = None;
                Poll::Ready(None)
            }
            Poll::Pending => loop {
                if self.late(Instant::now()) {
                    self.incoming = None;
                    return Poll::Ready(Some(Err(ClientBodyError::Timeout)));
                }
                let due = self.due();
                // The timer is moved only when it fires early: one reset per wait, not per
                // frame.
                if self.timer.deadline() != due {
                    self.timer.as_mut().reset(due);
                }
                ready!(self.timer.as_mut().poll(cx));
            },
        }
    }

    /// Whether the body is late at `now`: silent for `idle`, or below `min_rate` over the
    /// last window of `idle`. A window that brought its bytes starts the next one, so a
    /// fast start earns no credit for a trickle after it (an average since the start
    /// would let 16 MiB sent at once buy hours of one byte at a time).
    fn late(&mut self, now: Instant) -> bool {
        let idle = self.deadline.idle;
        if now >= self.last_progress + idle {
            return true;
        }
        if self.deadline.min_rate > 0 && now >= self.window_start + idle {
            let needed = (self.deadline.min_rate as f64 * idle.as_secs_f64()) as u64;
            if self.received - self.window_bytes < needed {
                return true;
            }
            self.window_start = now;
            self.window_bytes = self.received;
        }
        false
    }

    /// When `late` must be asked next.
    fn due(&self) -> Instant {
        let silent = self.last_progress + self.deadline.idle;
        if self.deadline.min_rate == 0 {
            return silent;
        }
        silent.min(self.window_start + self.deadline.idle)
    }
}

impl Drop for ClientStream {
    fn drop(&mut self) {
        self.memory.give_back(self.memory_held);
    }
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = ClientBodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ClientBodyError>>> {
        let ClientBody::Stream(s) = self.get_mut() else {
            return Poll::Ready(None);
        };
        if !s.early.is_empty() {
            let early = std::mem::take(&mut s.early);
            s.release_memory();
            return Poll::Ready(Some(Ok(Frame::data(early))));
        }
        if let Some(spill) = s.spilled.as_mut() {
            // Just written, so from the page cache: a copy, not a wait on a disk.
            let read = (spill.remaining() > 0).then(|| spill.read_next());
            if spill.remaining() == 0 {
                // Handed on whole: the file and its share of the budget go now, not when
                // the rest of a body that met the budget has trickled in.
                s.spilled = None;
            }
            if let Some(read) = read {
                return Poll::Ready(Some(
                    read.map(Frame::data)
                        .map_err(|e| ClientBodyError::Buffer(format!("reading it back: {e}"))),
                ));
            }
        }
        if !s.tail.is_empty() {
            let tail = std::mem::take(&mut s.tail);
            s.release_memory();
            return Poll::Ready(Some(Ok(Frame::data(tail))));
        }
        if s.incoming.is_none() {
            return Poll::Ready(s.early_trailers.take().map(|t| Ok(Frame::trailers(t))));
        }
        s.poll_incoming(cx)
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ClientBody::Empty => true,
            ClientBody::Stream(s) => {
                s.held() == 0
                    && s.early_trailers.is_none()
                    && s.incoming.as_ref().is_none_or(|i| i.is_end_stream())
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ClientBody::Empty => SizeHint::with_exact(0),
            ClientBody::Stream(s) => {
                let early = s.held();
                match &s.incoming {
                    None => SizeHint::with_exact(early),
                    Some(i) => {
                        let h = i.size_hint();
                        let mut hint = SizeHint::new();
                        hint.set_lower(h.lower() + early);
                        if let Some(u) = h.upper() {
                            hint.set_upper(u + early);
                        }
                        hint
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
