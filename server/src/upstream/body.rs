//! Backend response bodies: one fed by the task that reads a streaming backend, and one
//! that observes the total duration when the last frame has gone.

use crate::http::BoxedBody;
use bytes::Bytes;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::sync::mpsc;

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
