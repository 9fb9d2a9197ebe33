//! Connections to backends: TCP or unix sockets, opened with the request's first bytes
//! where the kernel allows.

use super::pool::{Address, Pool};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

/// A connection to an endpoint.
pub enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// Connects to endpoint `i` at `resolved` (from [`Pool::next_addr`]), or by its name,
/// sending `first` (the start of the request) with the connection where it can. Returns
/// the connection and how many bytes of `first` went out.
pub async fn connect_sending(
    pool: &Pool,
    i: usize,
    resolved: Option<std::net::SocketAddr>,
    first: &[u8],
) -> io::Result<(Conn, usize)> {
    let addr = &pool.endpoints[i].address;
    let connect = async {
        match (addr, resolved) {
            (Address::Unix(p), _) => Ok((Conn::Unix(UnixStream::connect(p).await?), 0)),
            (Address::Tcp(_), Some(sa)) => {
                let (s, sent) = connect_tcp_sending(sa, first).await?;
                Ok((Conn::Tcp(s), sent))
            }
            // No TCP_NODELAY here: a request without a streamed body goes out in one
            // write, which Nagle never holds back. Streamed bodies set it.
            (Address::Tcp(a), None) => Ok((Conn::Tcp(TcpStream::connect(a.as_str()).await?), 0)),
        }
    };
    tokio::time::timeout(pool.connect_timeout, connect)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))?
}

/// A non-blocking connect that sends `first` at once instead of waiting for the socket
/// to report writable. On loopback and within a node the handshake has completed by the
/// time connect(2) returns EINPROGRESS, so the request leaves in the same breath: no
/// wakeup for writability and no getsockopt(SO_ERROR) per connection. (nginx waits for
/// the writable event.) Otherwise the send says EAGAIN and this waits as usual; a refused
/// connection reports ECONNREFUSED from either, as a connect error.
async fn connect_tcp_sending(
    addr: std::net::SocketAddr,
    first: &[u8],
) -> io::Result<(TcpStream, usize)> {
    use rustix::net::{AddressFamily, SendFlags, SocketFlags, SocketType};
    let family = if addr.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let fd = rustix::net::socket_with(
        family,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?;
    match rustix::net::connect(&fd, &addr) {
        Ok(()) | Err(rustix::io::Errno::INPROGRESS) => {}
        Err(e) => return Err(e.into()),
    }
    let sent = if first.is_empty() {
        Err(rustix::io::Errno::AGAIN)
    } else {
        rustix::net::send(&fd, first, SendFlags::NOSIGNAL)
    };
    let stream = TcpStream::from_std(std::net::TcpStream::from(fd))?;
    match sent {
        Ok(n) => Ok((stream, n)),
        Err(rustix::io::Errno::AGAIN) => {
            // Still connecting: wait for the handshake, then report how it ended.
            stream.writable().await?;
            match stream.take_error()? {
                Some(e) => Err(e),
                None => Ok((stream, 0)),
            }
        }
        Err(e) => Err(e.into()),
    }
}

impl Conn {
    /// Sends small writes at once: for a request body streamed in several writes, whose
    /// later ones Nagle would hold until the backend's (delayed) ACK.
    pub fn set_nodelay(&self) {
        if let Conn::Tcp(s) = self {
            let _ = s.set_nodelay(true);
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_flush(cx),
            Conn::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_request_leaves_with_the_connection() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (sent, accepted) = tokio::join!(connect_tcp_sending(addr, b"hello"), listener.accept());
        let (_conn, n) = sent.unwrap();
        // On loopback the handshake is done when connect(2) returns: sent at once.
        assert_eq!(n, 5);
        let mut got = [0u8; 5];
        accepted.unwrap().0.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"hello");
        // Nothing to send: it waits for the handshake and sends nothing.
        let (_conn, n) = connect_tcp_sending(addr, b"").await.unwrap();
        assert_eq!(n, 0);
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        for first in [&b"request"[..], b""] {
            let err = connect_tcp_sending(addr, first).await.unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused, "{err}");
        }
    }
}
