//! Gathering a response whose head is in but whose body is still arriving: reads what
//! has arrived, within a short window, so small pages go out whole with a Content-Length.

use super::connection::Conn;
use bytes::BytesMut;
use std::io;
use std::task::{Context, Poll};
use tokio::io::AsyncReadExt;

/// One read from the backend within `timeout`; running out of time is a TimedOut error.
pub(super) async fn read_within<R: tokio::io::AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    timeout: std::time::Duration,
) -> io::Result<usize> {
    match tokio::time::timeout(timeout, rd.read_buf(buf)).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "backend read timed out",
        )),
    }
}

/// How long a response whose head is in but whose body is not complete may wait for
/// the rest, and how much of it is held at most, before it is streamed instead. uWSGI
/// writes a head and its body separately and php-fpm may split records, microseconds
/// apart: gathered, the page goes out in one write with a Content-Length instead of in
/// chunks through a reader task. A backend that streams (flushes, then works on) is
/// held back by this window once, at the start.
pub(super) const GATHER_WINDOW: std::time::Duration = std::time::Duration::from_millis(5);

pub(super) const GATHER_BYTES: usize = 64 * 1024;

/// What has already arrived is taken up to this much (a response that came whole goes out
/// whole): a fast backend streaming a large body must not be read into memory before
/// streaming starts.
pub(super) const GATHER_ARRIVED_BYTES: usize = 1024 * 1024;

/// Reads more of a response being gathered: what has arrived, else a wait within the
/// gathering window. `None` once the window is over or `held` bytes are enough.
pub(super) async fn read_more(
    conn: &mut Conn,
    buf: &mut BytesMut,
    held: usize,
    deadline: &mut Option<tokio::time::Instant>,
) -> Option<io::Result<usize>> {
    if held >= GATHER_ARRIVED_BYTES {
        return None;
    }
    if let Some(r) = read_ready(conn, buf) {
        return Some(r);
    }
    if held >= GATHER_BYTES {
        return None;
    }
    let until = *deadline.get_or_insert_with(|| tokio::time::Instant::now() + GATHER_WINDOW);
    tokio::time::timeout_at(until, conn.read_buf(buf))
        .await
        .ok()
}

/// Reads what the socket already holds, without waiting: `Some(Ok(0))` is EOF, `None`
/// means nothing more is there yet. Lets a response that arrived whole go out whole.
pub(super) fn read_ready<R: tokio::io::AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut BytesMut,
) -> Option<io::Result<usize>> {
    // One poll of read_buf with a no-op waker: it reads into spare capacity without
    // zero-filling, and a pending read simply means nothing more has arrived yet.
    use std::future::Future;
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(16 * 1024);
    }
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut read = std::pin::pin!(r.read_buf(buf));
    match read.as_mut().poll(&mut cx) {
        Poll::Ready(r) => Some(r),
        Poll::Pending => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn what_has_arrived_is_taken_only_up_to_the_bound() {
        let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
        let mut conn = Conn::Unix(a);
        b.write_all(&[1u8; 8192]).await.unwrap();
        let mut buf = BytesMut::new();
        let mut deadline = None;
        let n = read_more(&mut conn, &mut buf, 0, &mut deadline).await;
        assert!(matches!(n, Some(Ok(n)) if n > 0), "what arrived is read");
        b.write_all(&[1u8; 8192]).await.unwrap();
        let n = read_more(&mut conn, &mut buf, GATHER_ARRIVED_BYTES, &mut deadline).await;
        assert!(n.is_none(), "read past the bound: {n:?}");
    }
}
