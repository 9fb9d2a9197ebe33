//! Sending file bodies. On plaintext HTTP/1.1 a file region goes out with sendfile(2)
//! (page cache to socket, no copy through user space) or, below `sendfile_min_bytes`, with
//! pread(2) into a buffer and write(2). For hyper (HTTP/2, handed-off HTTP/1.1) files are
//! read with pread into `Bytes` frames. A file truncated mid-send ends the connection with
//! an error: the client sees a short body, never someone else's bytes.

use crate::http::reply::{Body, FileSlice, Part};
use crate::shaping::{Pacer, Throttle};
use bytes::Bytes;
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::Interest;
use tokio::net::TcpStream;

#[derive(Debug, Default)]
pub struct Sent {
    pub via_sendfile: u64,
    pub via_pread: u64,
}

fn truncated() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "file truncated while being sent",
    )
}

/// How file bodies are sent; see `Settings`.
#[derive(Debug, Clone, Copy)]
pub struct FileSendPolicy {
    pub sendfile_min_bytes: u64,
    /// Bodies at least this large use pread+write again (0: no upper bound).
    pub sendfile_max_bytes: u64,
    pub sendfile_chunk_bytes: usize,
    pub read_chunk_bytes: usize,
    pub cork: bool,
}

pub async fn send_file_slice(
    stream: &TcpStream,
    f: &FileSlice,
    policy: FileSendPolicy,
    chunk: &mut Vec<u8>,
) -> io::Result<Sent> {
    if policy.cork {
        // Full segments only while the body streams (nginx's tcp_nopush); uncorked after.
        let _ = rustix::net::sockopt::set_tcp_cork(stream, true);
    }
    let r = send_file_slice_inner(stream, f, policy, chunk).await;
    if policy.cork {
        let _ = rustix::net::sockopt::set_tcp_cork(stream, false);
    }
    r
}

async fn send_file_slice_inner(
    stream: &TcpStream,
    f: &FileSlice,
    policy: FileSendPolicy,
    chunk: &mut Vec<u8>,
) -> io::Result<Sent> {
    let sendfile_min_bytes = policy.sendfile_min_bytes;
    let chunk_size = policy.read_chunk_bytes;
    let mut sent = Sent::default();
    let end = f.offset + f.len;
    let mut off = f.offset;
    let below_max = policy.sendfile_max_bytes == 0 || f.len < policy.sendfile_max_bytes;
    if f.len >= sendfile_min_bytes && below_max {
        while off < end {
            // The kernel caps one call at ~2 GiB; smaller calls keep the loop fair to
            // other connections on this worker.
            let count = (end - off).min(policy.sendfile_chunk_bytes as u64) as usize;
            // A short sendfile can mean a full socket or the end of a file truncated
            // under us, so it is retried: the next call answers EAGAIN or 0 (truncated).
            let r = stream.try_io(Interest::WRITABLE, || {
                rustix::fs::sendfile(stream, &*f.file, Some(&mut off), count)
                    .map_err(io::Error::from)
            });
            match r {
                Ok(0) => return Err(truncated()),
                Ok(n) => sent.via_sendfile += n as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => stream.writable().await?,
                Err(e) => return Err(e),
            }
        }
        return Ok(sent);
    }
    // The buffer lives for this transfer only, so idle connections hold no big buffers.
    let want_buf = chunk_size.min(f.len as usize).max(1);
    if chunk.len() < want_buf {
        chunk.resize(want_buf, 0);
    }
    while off < end {
        let want = ((end - off) as usize).min(chunk.len());
        let n = f.file.read_at(&mut chunk[..want], off)?;
        if n == 0 {
            return Err(truncated());
        }
        let mut written = 0;
        while written < n {
            let r = stream.try_io(Interest::WRITABLE, || {
                rustix::io::write(stream, &chunk[written..n]).map_err(io::Error::from)
            });
            match r {
                Ok(w) => written += w,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => stream.writable().await?,
                Err(e) => return Err(e),
            }
        }
        off += n as u64;
        sent.via_pread += n as u64;
    }
    if chunk.len() > 64 * 1024 {
        *chunk = Vec::new();
    }
    Ok(sent)
}

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
                let mut buf = vec![0u8; want];
                let mut got = 0;
                while got < want {
                    match f.file.read_at(&mut buf[got..], f.offset + got as u64) {
                        Ok(0) => return Poll::Ready(Some(Err(truncated()))),
                        Ok(n) => got += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Poll::Ready(Some(Err(e))),
                    }
                }
                f.offset += want as u64;
                f.len -= want as u64;
                if f.len > 0 {
                    self.parts.push_front(Part::File(f));
                }
                Bytes::from(buf)
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

/// Writes a body under bandwidth limits: chunks of about 1/20 s, each after the wait the
/// pacer asks for. File parts are read with pread (sendfile cannot be paced).
pub async fn send_paced(
    stream: &TcpStream,
    parts: &[Part],
    throttle: std::sync::Arc<Throttle>,
) -> io::Result<()> {
    let mut pacer = Pacer::new(throttle);
    let chunk = pacer.chunk_size();
    let mut buf = Vec::new();
    for part in parts {
        match part {
            Part::Bytes(b) => {
                for piece in b.chunks(chunk) {
                    pace(&mut pacer, piece.len()).await;
                    write_all(stream, piece).await?;
                }
            }
            Part::File(f) => {
                buf.resize(chunk, 0);
                let mut off = f.offset;
                let end = f.offset + f.len;
                while off < end {
                    let want = ((end - off) as usize).min(chunk);
                    let n = f.file.read_at(&mut buf[..want], off)?;
                    if n == 0 {
                        return Err(truncated());
                    }
                    pace(&mut pacer, n).await;
                    write_all(stream, &buf[..n]).await?;
                    off += n as u64;
                }
            }
        }
    }
    Ok(())
}

async fn pace(pacer: &mut Pacer, n: usize) {
    let wait = pacer.before_chunk(n as u64);
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
}

async fn write_all(stream: &TcpStream, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        match stream.try_io(Interest::WRITABLE, || {
            rustix::io::write(stream, data).map_err(io::Error::from)
        }) {
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => stream.writable().await?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
