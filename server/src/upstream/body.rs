//! Backend response bodies: one fed by the task that reads a streaming backend, one that
//! observes the total duration when the last frame has gone, and one that gives up on a
//! backend silent mid-body.

use crate::http::BoxedBody;
use bytes::Bytes;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// A proxied backend's body that fails once the backend has sent nothing for `idle` (the
/// pool's `read_timeout`) while it was waited on, as each CGI read does: a backend stalled
/// mid-body must not hold the client's connection for ever. Time the client spends not
/// reading (the body not polled) does not count.
pub(super) struct IdleBody {
    inner: BoxedBody,
    idle: Duration,
    /// Armed when a poll finds nothing, until a frame comes.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl IdleBody {
    pub(super) fn new(inner: BoxedBody, idle: Duration) -> IdleBody {
        IdleBody {
            inner,
            idle,
            timer: None,
        }
    }
}

impl http_body::Body for IdleBody {
    type Data = Bytes;
    type Error = io::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, io::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.timer = None;
                Poll::Ready(frame)
            }
            Poll::Pending => {
                let idle = this.idle;
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        this.timer = None;
                        Poll::Ready(Some(Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!("the backend sent nothing for {idle:?} mid-body"),
                        ))))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Records `skiff_upstream_duration_seconds{phase="total"}` when a streamed body ends.
pub(super) struct TimedBody {
    pub(super) inner: BoxedBody,
    pub(super) start: Instant,
    pub(super) total: prometheus_client::metrics::histogram::Histogram,
    pub(super) done: bool,
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

/// A response body fed by the task that reads the backend.
pub(super) struct ChannelBody {
    pub(super) rx: mpsc::Receiver<io::Result<Bytes>>,
}
