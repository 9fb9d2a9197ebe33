//! The hyper path's body for a `Reply`: memory parts as they are, file parts read with
//! pread in chunks (hyper cannot hand a body to sendfile), paced under bandwidth limits.

use super::file_send::truncated;
use crate::fs::chunk;
use crate::http::reply::{Body, Part};
use crate::shaping::{Pacer, Throttle};
use bytes::Bytes;
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A `Reply` body for hyper: memory parts as-is, file parts read in chunks.
pub struct ReplyBody {
    parts: VecDeque<Part>,
    remaining: u64,
    chunk_size: usize,
    /// Bandwidth limits: the pacer, and a chunk already charged that waits for `sleep`.
    pacer: Option<Pacer>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    ready: Option<Bytes>,
}

impl ReplyBody {
    pub fn new(body: Body, chunk_size: usize) -> ReplyBody {
        let remaining = body.len();
        let parts = match body {
            Body::Empty => VecDeque::new(),
            Body::Bytes(b) => VecDeque::from([Part::Bytes(b)]),
            Body::File(f) => VecDeque::from([Part::File(f)]),
            Body::Parts(p) => p.into(),
            Body::Mirrored(b, _) => VecDeque::from([Part::Bytes(b)]),
        };
        ReplyBody {
            parts,
            remaining,
            chunk_size: chunk_size.max(4096),
            pacer: None,
            sleep: None,
            ready: None,
        }
    }

    /// Paces this body under `throttle`.
    pub fn throttled(mut self, throttle: std::sync::Arc<Throttle>) -> ReplyBody {
        let pacer = Pacer::new(throttle);
        self.chunk_size = pacer.chunk_size();
        // Memory parts are cut to the pacing chunk too.
        let parts: Vec<Part> = self.parts.drain(..).collect();
        for p in parts {
            match p {
                Part::Bytes(b) if b.len() > self.chunk_size => {
                    let mut off = 0;
                    while off < b.len() {
                        let end = (off + self.chunk_size).min(b.len());
                        self.parts.push_back(Part::Bytes(b.slice(off..end)));
                        off = end;
                    }
                }
                other => self.parts.push_back(other),
            }
        }
        self.pacer = Some(pacer);
        self
    }
    pub fn empty() -> ReplyBody {
        ReplyBody::new(Body::Empty, 4096)
    }
}

impl http_body::Body for ReplyBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, io::Error>>> {
        if let Some(sleep) = self.sleep.as_mut() {
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.sleep = None;
        }
        if let Some(data) = self.ready.take() {
            self.remaining -= data.len() as u64;
            return Poll::Ready(Some(Ok(http_body::Frame::data(data))));
        }
        // Reads are from the page cache in the common case and run inline, as nginx and
        // lighttpd do without aio; a body never blocks on the network here.
        let chunk_size = self.chunk_size;
        let Some(part) = self.parts.pop_front() else {
            return Poll::Ready(None);
        };
        let data = match part {
            Part::Bytes(b) => b,
            Part::File(mut f) => {
                let want = (f.len as usize).min(chunk_size);
                let data = match chunk::read_mid_page(&f.file, f.offset, want) {
                    Ok(Some(data)) => data,
                    Ok(None) => return Poll::Ready(Some(Err(truncated()))),
                    Err(e) => return Poll::Ready(Some(Err(e))),
                };
                f.offset += want as u64;
                f.len -= want as u64;
                if f.len > 0 {
                    self.parts.push_front(Part::File(f));
                }
                data
            }
        };
        if let Some(pacer) = self.pacer.as_mut() {
            let wait = pacer.before_chunk(data.len() as u64);
            if !wait.is_zero() {
                let mut sleep = Box::pin(tokio::time::sleep(wait));
                if sleep.as_mut().poll(cx).is_pending() {
                    self.sleep = Some(sleep);
                    self.ready = Some(data);
                    return Poll::Pending;
                }
            }
        }
        self.remaining -= data.len() as u64;
        Poll::Ready(Some(Ok(http_body::Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.remaining)
    }
}
