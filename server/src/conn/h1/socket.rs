//! Reading the client's socket on the fast path: what has arrived, and whether the
//! client has gone while a backend works. (Writing is `output`'s.)

use crate::tls::ktls;
use std::io;
use tokio::io::Interest;
use tokio::net::TcpStream;

pub(super) enum ReadResult {
    Data,
    Eof,
    WouldBlock,
}

/// Reads what the socket has into `space`; returns the bytes read and what that means. A
/// short read means the kernel buffer was drained, so readiness is cleared right away
/// instead of by a second read that would return EAGAIN. recv, not read: read goes
/// through the file layer before the same socket call.
pub(super) fn read_available(
    stream: &TcpStream,
    space: &mut [u8],
) -> (usize, io::Result<ReadResult>) {
    let cap = space.len();
    let mut got = 0usize;
    let r = stream.try_io(Interest::READABLE, || {
        let (n, _) = rustix::net::recv(stream, &mut *space, rustix::net::RecvFlags::empty())
            .map_err(io::Error::from)?;
        got = n;
        if n > 0 && n < cap {
            Err(io::ErrorKind::WouldBlock.into())
        } else {
            Ok(n)
        }
    });
    match r {
        Ok(0) => (0, Ok(ReadResult::Eof)),
        Ok(n) => (n, Ok(ReadResult::Data)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            if got > 0 {
                (got, Ok(ReadResult::Data))
            } else {
                (0, Ok(ReadResult::WouldBlock))
            }
        }
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => (0, Ok(ReadResult::Eof)),
        // On kTLS, the peer's alert (close_notify) or KeyUpdate: the connection ends as
        // if it had closed (plain TCP never fails a read this way).
        Err(e) if ktls::is_control_record(&e) => (0, Ok(ReadResult::Eof)),
        Err(e) => (0, Err(e)),
    }
}

/// Resolves when the client has closed its side (EOF or reset) while a backend works.
/// Bytes it sends meanwhile (a pipelined request) are left for later, and then there is
/// nothing more to learn here, so it stops watching.
pub(super) async fn client_gone(stream: &TcpStream) {
    let mut probe = [0u8; 1];
    loop {
        if stream.readable().await.is_err() {
            return;
        }
        match stream.try_io(Interest::READABLE, || {
            rustix::net::recv(stream, &mut probe, rustix::net::RecvFlags::PEEK)
                .map(|(n, _)| n)
                .map_err(io::Error::from)
        }) {
            Ok(0) => return,
            Ok(_) => return std::future::pending().await,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(_) => return,
        }
    }
}

/// A connected pair of sockets, (server side, client side), for tests of the fast path's
/// parts on real sockets.
#[cfg(test)]
pub(super) async fn tcp_pair() -> (TcpStream, TcpStream) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    (server, client)
}
