//! How long a proxied request may wait for its response head: the upload lasts as long as
//! the client sends and the backend keeps taking it (a backend that stops taking it is
//! given the send timeout), and the read timeout runs from the upload's end.

use crate::http::BoxedBody;
use bytes::Bytes;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// Not ended yet.
const PENDING: u64 = u64::MAX;

/// Where a request's upload stands, in milliseconds from its start.
pub(super) struct Upload {
    start: Instant,
    /// When the backend last took a frame (its connection asked for the next).
    taken_ms: AtomicU64,
    /// The body waits on the client, whose own deadlines (silence, minimum rate) apply.
    on_client: AtomicBool,
    ended_ms: AtomicU64,
    /// Wakes the clock when the upload moves, so a deadline that comes nearer (the body
    /// ended, and the read timeout is shorter than the send timeout) is kept.
    moved: tokio::sync::Notify,
}

impl Upload {
    /// `connect` is how long connecting may take before the backend takes anything.
    pub(super) fn new(connect: Duration, ended: bool) -> Arc<Upload> {
        let connect_ms = connect.as_millis() as u64;
        Arc::new(Upload {
            start: Instant::now(),
            taken_ms: AtomicU64::new(connect_ms),
            on_client: AtomicBool::new(false),
            ended_ms: AtomicU64::new(if ended { connect_ms } else { PENDING }),
            moved: tokio::sync::Notify::new(),
        })
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// When the wait times out unless something moves; `None` while the client is
    /// being waited on.
    fn deadline(&self, send: Duration, read: Duration) -> Option<Instant> {
        let at = |ms: u64| self.start + Duration::from_millis(ms);
        match self.ended_ms.load(Ordering::Relaxed) {
            PENDING if self.on_client.load(Ordering::Relaxed) => None,
            PENDING => Some(at(self.taken_ms.load(Ordering::Relaxed)) + send),
            ended => Some(at(ended) + read),
        }
    }

    /// Completes once the wait has timed out: the backend took none of the upload for
    /// `send`, or sent no response head within `read` of the upload's end.
    pub(super) async fn timed_out(&self, send: Duration, read: Duration) {
        loop {
            let at = match self.deadline(send, read) {
                Some(at) if at <= Instant::now() => return,
                Some(at) => at,
                // Checked again when it moves; the client's deadlines end a stalled upload.
                None => Instant::now() + send.max(read),
            };
            tokio::select! {
                () = tokio::time::sleep_until(at) => {}
                () = self.moved.notified() => {}
            }
        }
    }

    /// Whether the whole upload was handed to the backend's connection.
    pub(super) fn ended(&self) -> bool {
        self.ended_ms.load(Ordering::Relaxed) != PENDING
    }
}

/// A request body that tells its [`Upload`] how the upload moves.
pub(super) struct Watched {
    pub(super) inner: BoxedBody,
    pub(super) upload: Arc<Upload>,
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = io::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, io::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        // hyper's client stops polling once the body says it has ended (a known length
        // read in full): the last frame, not a final `None`, may be the end.
        let ended = match &polled {
            Poll::Ready(Some(Ok(frame))) => frame.is_trailers() || self.inner.is_end_stream(),
            Poll::Ready(None) => true,
            _ => false,
        };
        let u = &self.upload;
        let was_on_client = u.on_client.swap(polled.is_pending(), Ordering::Relaxed);
        let now = u.now_ms();
        if matches!(polled, Poll::Ready(Some(Ok(_)))) {
            u.taken_ms.store(now, Ordering::Relaxed);
        }
        if ended {
            u.ended_ms.store(now, Ordering::Relaxed);
        }
        if polled.is_ready() || !was_on_client {
            u.moved.notify_one();
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

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    const SEND: Duration = Duration::from_secs(10);
    const READ: Duration = Duration::from_secs(30);

    #[tokio::test(start_paused = true)]
    async fn a_bodiless_request_waits_the_connect_and_the_read_timeout() {
        let u = Upload::new(Duration::from_secs(1), true);
        let t = Instant::now();
        u.timed_out(SEND, READ).await;
        assert_eq!(t.elapsed(), Duration::from_secs(31));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_client_upload_is_not_timed_and_the_read_timeout_runs_from_its_end() {
        let u = Upload::new(Duration::from_secs(1), false);
        let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<Bytes>>(1);
        let mut watched = Watched {
            inner: super::super::body::ChannelBody { rx }.boxed(),
            upload: u.clone(),
        };
        let clock = tokio::spawn({
            let u = u.clone();
            async move {
                let t = Instant::now();
                u.timed_out(SEND, READ).await;
                t.elapsed()
            }
        });
        // The backend keeps asking; the client sends a frame every 25 s (longer than the
        // send timeout) three times, then ends.
        let client = tokio::spawn(async move {
            for _ in 0..3 {
                tokio::time::sleep(Duration::from_secs(25)).await;
                tx.send(Ok(Bytes::from_static(b"x"))).await.unwrap();
            }
        });
        for _ in 0..3 {
            assert!(watched.frame().await.is_some());
        }
        client.await.unwrap();
        assert!(watched.frame().await.is_none());
        assert!(u.ended());
        // Ended at 75 s: the read timeout runs from there.
        assert_eq!(clock.await.unwrap(), Duration::from_secs(105));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_knows_it_has_ended_ends_the_upload_with_its_last_frame() {
        // As hyper's client does: the last frame is taken, and no poll for `None` follows.
        let u = Upload::new(Duration::from_secs(1), false);
        let mut watched = Watched {
            inner: http_body_util::Full::new(Bytes::from_static(b"all of it"))
                .map_err(|never| match never {})
                .boxed(),
            upload: u.clone(),
        };
        assert!(watched.frame().await.is_some());
        assert!(u.ended(), "ended with its last frame");
        let t = Instant::now();
        u.timed_out(SEND, READ).await;
        assert_eq!(t.elapsed(), READ);
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_that_comes_nearer_is_kept() {
        // A long send timeout, a short read timeout: once the body has ended, the clock
        // waits 2 s from there, not the send timeout it was waiting on.
        let (send, read) = (Duration::from_secs(60), Duration::from_secs(2));
        let u = Upload::new(Duration::from_secs(1), false);
        let clock = tokio::spawn({
            let u = u.clone();
            async move {
                let t = Instant::now();
                u.timed_out(send, read).await;
                t.elapsed()
            }
        });
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mut watched = Watched {
            inner: http_body_util::Full::new(Bytes::from_static(b"all"))
                .map_err(|never| match never {})
                .boxed(),
            upload: u.clone(),
        };
        assert!(watched.frame().await.is_some());
        assert_eq!(clock.await.unwrap(), Duration::from_secs(4));
    }

    #[tokio::test(start_paused = true)]
    async fn a_backend_that_stops_taking_the_upload_times_out_after_the_send_timeout() {
        let u = Upload::new(Duration::from_secs(1), false);
        let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<Bytes>>(2);
        tx.send(Ok(Bytes::from_static(b"part"))).await.unwrap();
        let mut watched = Watched {
            inner: super::super::body::ChannelBody { rx }.boxed(),
            upload: u.clone(),
        };
        tokio::time::sleep(Duration::from_secs(2)).await;
        // One frame taken at 2 s (more is to come), then the backend asks for nothing.
        assert!(watched.frame().await.is_some());
        let t = Instant::now();
        u.timed_out(SEND, READ).await;
        assert_eq!(t.elapsed(), SEND);
        assert!(!u.ended());
        drop(tx);
    }
}
