//! Request bodies fed from DATA frames, given back to the windows as their reader takes them.

use crate::upstream::ClientBodyError;
use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use skiff_http::h2::Reason;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// What the connection task and a request body share. The buffered bytes are bounded by
/// the stream's flow-control window: they are given back only once read.
#[derive(Default)]
pub(super) struct Inbound {
    state: Mutex<State>,
}

/// DATA payloads below this are appended to one buffer (up to `TAIL_MAX`) rather than
/// queued each on its own: a frame per byte would otherwise cost ~100 bytes of heap each.
const SMALL: usize = 1024;
const TAIL_MAX: usize = 4096;

#[derive(Default)]
struct State {
    chunks: VecDeque<Bytes>,
    /// Small payloads gathered after `chunks`.
    tail: BytesMut,
    trailers: Option<HeaderMap>,
    /// END_STREAM (or trailers) arrived.
    ended: bool,
    reset: Option<Reason>,
    /// The body was dropped: more DATA is given back unread.
    dropped: bool,
    /// Bytes read (or dropped) and not yet given back to the peer.
    consumed: usize,
    reader: Option<Waker>,
    /// The connection task, woken when bytes were consumed: a body read in another task
    /// would otherwise wait for a WINDOW_UPDATE nobody sends.
    driver: Option<Waker>,
}

impl Inbound {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// DATA for this stream; returns false when nobody will read it (give it back now).
    pub fn push(&self, data: Bytes, end_stream: bool, driver: &Waker) -> bool {
        let mut s = self.lock();
        if s.dropped {
            return false;
        }
        if data.len() >= SMALL || s.tail.len() + data.len() > TAIL_MAX {
            s.flush_tail();
        }
        if data.len() >= SMALL {
            s.chunks.push_back(data);
        } else if !data.is_empty() {
            if s.tail.capacity() == 0 {
                s.tail.reserve(TAIL_MAX);
            }
            s.tail.extend_from_slice(&data);
        }
        s.ended |= end_stream;
        if !s.driver.as_ref().is_some_and(|w| w.will_wake(driver)) {
            s.driver = Some(driver.clone());
        }
        if let Some(w) = s.reader.take() {
            w.wake();
        }
        true
    }

    pub fn trailers(&self, headers: HeaderMap) {
        let mut s = self.lock();
        s.trailers = Some(headers);
        s.ended = true;
        if let Some(w) = s.reader.take() {
            w.wake();
        }
    }

    /// The stream was reset: the reader gets an error; returns the unread bytes, which
    /// the connection window must get back.
    pub fn reset(&self, reason: Reason) -> usize {
        let mut s = self.lock();
        s.reset = Some(reason);
        let unread = s.drain();
        let n = unread + std::mem::take(&mut s.consumed);
        if let Some(w) = s.reader.take() {
            w.wake();
        }
        n
    }

    /// Bytes to give back now, and whether this body needs no more attention (ended or
    /// dropped, and nothing left to give back).
    pub fn take_consumed(&self) -> (usize, bool) {
        let mut s = self.lock();
        let n = std::mem::take(&mut s.consumed);
        let done = s.dropped || s.reset.is_some() || (s.ended && s.is_empty());
        (n, done)
    }
}

impl State {
    fn flush_tail(&mut self) {
        if !self.tail.is_empty() {
            let t = self.tail.split().freeze();
            self.chunks.push_back(t);
        }
    }

    fn is_empty(&self) -> bool {
        self.chunks.is_empty() && self.tail.is_empty()
    }

    /// Drops what is buffered; returns its length.
    fn drain(&mut self) -> usize {
        let n = self.chunks.drain(..).map(|c| c.len()).sum::<usize>() + self.tail.len();
        self.tail = BytesMut::new();
        n
    }
}

/// A request body as handlers and pools see it.
pub(crate) struct RequestBody {
    inbound: Option<Arc<Inbound>>,
    /// content-length, when the request gave one.
    length: Option<u64>,
    read: u64,
}

impl RequestBody {
    /// A request that ended with its HEADERS.
    pub fn empty() -> RequestBody {
        RequestBody {
            inbound: None,
            length: Some(0),
            read: 0,
        }
    }

    pub(super) fn new(inbound: Arc<Inbound>, length: Option<u64>) -> RequestBody {
        RequestBody {
            inbound: Some(inbound),
            length,
            read: 0,
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = ClientBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ClientBodyError>>> {
        let Some(inbound) = &self.inbound else {
            return Poll::Ready(None);
        };
        let mut s = inbound.lock();
        if let Some(reason) = s.reset {
            return Poll::Ready(Some(Err(ClientBodyError::Io(format!(
                "the client reset the stream ({reason})"
            )))));
        }
        if s.chunks.is_empty() {
            s.flush_tail();
        }
        if let Some(data) = s.chunks.pop_front() {
            s.consumed += data.len();
            if let Some(w) = &s.driver {
                w.wake_by_ref();
            }
            drop(s);
            self.read += data.len() as u64;
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        if let Some(t) = s.trailers.take() {
            return Poll::Ready(Some(Ok(Frame::trailers(t))));
        }
        if s.ended {
            return Poll::Ready(None);
        }
        if !s.reader.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            s.reader = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        match &self.inbound {
            None => true,
            Some(i) => {
                let s = i.lock();
                s.ended && s.is_empty() && s.trailers.is_none() && s.reset.is_none()
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self.length {
            Some(n) => SizeHint::with_exact(n.saturating_sub(self.read)),
            None => SizeHint::default(),
        }
    }
}

impl Drop for RequestBody {
    fn drop(&mut self) {
        let Some(inbound) = &self.inbound else {
            return;
        };
        // What was never read goes back to the windows: the connection's, at least.
        let mut s = inbound.lock();
        s.dropped = true;
        let unread = s.drain();
        s.consumed += unread;
        s.trailers = None;
        if let Some(w) = &s.driver {
            w.wake_by_ref();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn bytes_read_are_counted_for_release_and_the_end_is_seen() {
        let inbound = Arc::new(Inbound::default());
        let mut body = RequestBody::new(inbound.clone(), Some(5));
        let waker = futures_waker();
        assert!(inbound.push(Bytes::from_static(b"abc"), false, &waker));
        assert!(!body.is_end_stream());
        let f = body.frame().await.unwrap().unwrap();
        assert_eq!(f.into_data().unwrap(), "abc");
        assert_eq!(inbound.take_consumed(), (3, false));
        assert!(inbound.push(Bytes::from_static(b"de"), true, &waker));
        assert_eq!(body.size_hint().exact(), Some(2));
        body.frame().await.unwrap().unwrap();
        assert!(body.is_end_stream());
        assert!(body.frame().await.is_none());
        assert_eq!(inbound.take_consumed(), (2, true));
    }

    #[tokio::test]
    async fn a_reset_fails_the_reader_and_a_dropped_body_gives_back_its_bytes() {
        let inbound = Arc::new(Inbound::default());
        let mut body = RequestBody::new(inbound.clone(), None);
        let waker = futures_waker();
        inbound.push(Bytes::from_static(b"abcd"), false, &waker);
        assert_eq!(inbound.reset(Reason::CANCEL), 4);
        assert!(body.frame().await.unwrap().is_err());

        let inbound = Arc::new(Inbound::default());
        let body = RequestBody::new(inbound.clone(), None);
        inbound.push(Bytes::from_static(b"abcd"), false, &waker);
        drop(body);
        assert_eq!(inbound.take_consumed(), (4, true));
        assert!(!inbound.push(Bytes::from_static(b"x"), false, &waker));
    }

    #[tokio::test]
    async fn tiny_frames_are_gathered_not_queued_one_by_one() {
        let inbound = Arc::new(Inbound::default());
        let mut body = RequestBody::new(inbound.clone(), None);
        let waker = futures_waker();
        for k in 0..10_000u32 {
            inbound.push(Bytes::from(vec![k as u8]), false, &waker);
        }
        inbound.push(Bytes::from(vec![1u8; 5000]), true, &waker);
        // 10,000 bytes in three buffers of at most 4 KiB, then the large frame as it came.
        assert_eq!(inbound.lock().chunks.len(), 4);
        let mut got = Vec::new();
        while let Some(f) = body.frame().await {
            got.extend_from_slice(&f.unwrap().into_data().unwrap());
        }
        let want: Vec<u8> = (0..10_000u32).map(|k| k as u8).chain([1; 5000]).collect();
        assert_eq!(got, want);
        assert_eq!(inbound.take_consumed(), (15_000, true));
    }

    fn futures_waker() -> Waker {
        std::task::Waker::noop().clone()
    }
}
