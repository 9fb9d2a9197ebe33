//! A response body for hyper that records its exchange when it ends: when its last frame
//! has been taken, when it fails, or when hyper drops it (a client that went away, a HEAD
//! or bodiless reply), with the body bytes hyper took (hyper writes them to the socket
//! right after; the fast path counts the bytes its own writes returned).

use super::activity::Busy;
use crate::exchange::{Exchange, Outcome, Protocol, RequestFields, CLIENT_CLOSED_REQUEST};
use crate::http::BoxedBody;
use bytes::Bytes;
use http::{HeaderValue, Method, Uri};
use http_body_util::BodyExt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

/// What the exchange record needs of a request that hyper parsed, owned (the clones
/// share hyper's buffers: no copies).
pub(super) struct RequestMeta {
    pub remote: std::net::IpAddr,
    pub method: Method,
    pub uri: Uri,
    pub protocol: Protocol,
    pub referer: Option<HeaderValue>,
    pub user_agent: Option<HeaderValue>,
    pub started: Instant,
}

/// The parts of the record known when the response head is ready.
struct Pending {
    request: RequestMeta,
    outcome: Outcome,
    head_ready: Instant,
}

pub(super) struct RecordedBody {
    inner: BoxedBody,
    pending: Option<Box<Pending>>,
    sent: u64,
    /// The request counts as in flight on its connection until hyper drops its body.
    busy: Option<Busy>,
}

impl RecordedBody {
    /// `outcome.body_bytes` is filled in as hyper takes the body.
    pub fn new(
        inner: BoxedBody,
        request: RequestMeta,
        outcome: Outcome,
        head_ready: Instant,
    ) -> RecordedBody {
        RecordedBody {
            inner,
            pending: Some(Box::new(Pending {
                request,
                outcome,
                head_ready,
            })),
            sent: 0,
            busy: None,
        }
    }

    /// The record of a body the HTTP/2 connection reads itself (`h2::file_source`): it
    /// counts what it hands over with `count_sent` and records when dropped.
    pub fn for_source(request: RequestMeta, outcome: Outcome, head_ready: Instant) -> RecordedBody {
        let empty = http_body_util::Empty::<Bytes>::new().map_err(|never| match never {});
        RecordedBody::new(empty.boxed(), request, outcome, head_ready)
    }

    /// The record of a request a pool is answering: dropped before the answer (hyper
    /// drops the request's future when the client leaves), it records a 499 (client
    /// closed request), as the fast path does, since the backend may have run it.
    pub fn awaiting_pool(
        request: RequestMeta,
        vhost: &'static str,
        pool: &'static str,
    ) -> RecordedBody {
        let outcome = Outcome {
            vhost,
            status: CLIENT_CLOSED_REQUEST,
            body_bytes: 0,
            cache_hit: None,
            pool: Some(pool),
        };
        let started = request.started;
        RecordedBody::for_source(request, outcome, started)
    }

    /// The pool answered: the record moves to the answer's body.
    pub fn answered(
        mut self,
        body: BoxedBody,
        outcome: Outcome,
        head_ready: Instant,
    ) -> RecordedBody {
        let pending = self.pending.take().expect("a record awaiting its answer");
        RecordedBody::new(body, pending.request, outcome, head_ready)
    }

    /// Body bytes handed to the connection outside `poll_frame`.
    pub fn count_sent(&mut self, n: u64) {
        self.sent += n;
    }

    /// Keeps the connection counted busy for as long as this body lives.
    /// The response is ready: until hyper asks for its body, the peer has it to take (an
    /// HTTP/2 peer that grants no window keeps hyper from ever asking).
    pub fn hold(&mut self, mut busy: Busy) {
        busy.handed();
        self.busy = Some(busy);
    }

    /// The request's hold on the connection, kept by a driver past the body's end while
    /// its last bytes still wait for the peer (HTTP/2).
    pub fn take_busy(&mut self) -> Option<Busy> {
        self.busy.take()
    }

    /// The peer took what was handed, though the next frame is not asked for yet: the
    /// HTTP/2 driver waits for room on the connection, not for this stream's peer.
    pub fn taken(&mut self) {
        if let Some(busy) = &mut self.busy {
            busy.taken();
        }
    }

    /// The peer took a good part of what was handed: the wait starts over.
    pub fn progressed(&mut self) {
        if let Some(busy) = &mut self.busy {
            busy.progressed();
        }
    }

    fn record(&mut self) {
        let Some(p) = self.pending.take() else {
            return;
        };
        let r = &p.request;
        Exchange {
            remote: r.remote,
            request: RequestFields {
                method: &r.method,
                target: r
                    .uri
                    .path_and_query()
                    .map_or("/", |pq| pq.as_str())
                    .as_bytes(),
                protocol: r.protocol,
                referer: r.referer.as_ref().map(|v| v.as_bytes()),
                user_agent: r.user_agent.as_ref().map(|v| v.as_bytes()),
            },
            outcome: Outcome {
                body_bytes: self.sent,
                ..p.outcome
            },
            started: r.started,
            head_ready: p.head_ready,
            ended: Instant::now(),
        }
        .record();
    }
}

impl http_body::Body for RecordedBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, io::Error>>> {
        // hyper is back for more: the frame handed last has been taken.
        if let Some(busy) = &mut self.busy {
            busy.taken();
        }
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.sent += data.len() as u64;
                    if let Some(busy) = &mut self.busy {
                        busy.handed();
                    }
                }
                if self.inner.is_end_stream() {
                    self.record();
                }
            }
            Poll::Ready(Some(Err(_)) | None) => self.record(),
            Poll::Pending => {}
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

impl Drop for RecordedBody {
    fn drop(&mut self) {
        self.record();
    }
}
