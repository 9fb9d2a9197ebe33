//! Sending file bodies on the HTTP/1.1 fast path: a file region goes out with sendfile(2)
//! (page cache to socket, no copy through user space) or, below `sendfile_min_bytes` and
//! on rustls, with pread(2) and write (`h1::transport::send_file_pread`). A file
//! truncated mid-send ends the connection with an error: the client sees a short body,
//! never someone else's bytes.

use crate::http::reply::FileSlice;
use std::io;
use std::time::Duration;
use tokio::io::Interest;
use tokio::net::TcpStream;

pub(super) fn truncated() -> io::Error {
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
    /// A client that takes no bytes for this long is given up on.
    pub send_timeout: Duration,
}

impl FileSendPolicy {
    pub fn of(settings: &crate::settings::Settings) -> FileSendPolicy {
        FileSendPolicy {
            sendfile_min_bytes: settings.sendfile_min_bytes,
            sendfile_max_bytes: settings.sendfile_max_bytes,
            sendfile_chunk_bytes: settings.sendfile_chunk_bytes,
            read_chunk_bytes: settings.read_chunk_bytes,
            cork: settings.tcp_cork,
            send_timeout: settings.limits.send_timeout,
        }
    }
}

/// Whether a body of `len` bytes goes out with sendfile on a plain socket (else pread and
/// write, `h1::transport::send_file_pread`).
pub fn uses_sendfile(len: u64, policy: &FileSendPolicy) -> bool {
    len >= policy.sendfile_min_bytes
        && (policy.sendfile_max_bytes == 0 || len < policy.sendfile_max_bytes)
}

/// Full segments only while a body streams (nginx's tcp_nopush), if the policy says so.
pub fn cork(stream: &TcpStream, policy: &FileSendPolicy, on: bool) {
    if policy.cork {
        let _ = rustix::net::sockopt::set_tcp_cork(stream, on);
    }
}

/// Sends a file region with sendfile(2); `sent` counts what went out, also when this
/// fails part way.
pub async fn sendfile_slice(
    stream: &TcpStream,
    f: &FileSlice,
    policy: FileSendPolicy,
    sent: &mut u64,
) -> io::Result<()> {
    let end = f.offset + f.len;
    let mut off = f.offset;
    while off < end {
        // One call per turn: the connection then lets the worker's other connections go
        // (lighttpd's 256 KiB per turn), so this socket's last segments have left and its
        // reader is busy by the time it sends again; back-to-back calls on one socket wait
        // on the pacing timer and wake an idle reader for every segment (BENCHMARKS.md).
        let count = (end - off).min(policy.sendfile_chunk_bytes as u64) as usize;
        // A short sendfile can mean a full socket or the end of a file truncated under
        // us, so it is retried: the next call answers EAGAIN or 0 (truncated).
        let r = stream.try_io(Interest::WRITABLE, || {
            rustix::fs::sendfile(stream, &*f.file, Some(&mut off), count).map_err(io::Error::from)
        });
        match r {
            Ok(0) => return Err(truncated()),
            Ok(n) => {
                *sent += n as u64;
                // `try_io` spends no coop budget, so the turn is given up by hand.
                if off < end {
                    tokio::task::yield_now().await;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                writable(stream, policy.send_timeout).await?
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Waits until the socket takes bytes again. Each wait follows progress, so a client that
/// takes nothing for `send_timeout` is given up on: a non-reading client cannot hold its
/// connection (and its permit) for ever.
pub async fn writable(stream: &TcpStream, send_timeout: Duration) -> io::Result<()> {
    match tokio::time::timeout(send_timeout, stream.writable()).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "send timeout: the client took no bytes",
        )),
    }
}
