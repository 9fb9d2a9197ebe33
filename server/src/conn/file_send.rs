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

/// The next sendfile(2) call's length, `done` bytes into a region with `remaining` left:
/// whole chunks for the region's first two, half chunks after. A body of up to two chunks
/// then takes the fewest turns, while a long stream's smaller calls cost the kernel less
/// CPU per byte (lighttpd sends 256 KiB per turn; BENCHMARKS.md, "64m.bin").
pub fn sendfile_call_len(done: u64, remaining: u64, policy: &FileSendPolicy) -> usize {
    let chunk = policy.sendfile_chunk_bytes.max(2) as u64;
    let lead = 2 * chunk;
    let piece = if done < lead {
        (lead - done).min(chunk)
    } else {
        chunk / 2
    };
    remaining.min(piece) as usize
}

/// The most sendfile(2) calls `sendfile_slice` makes for `len` bytes, if every call but
/// the last moves what `sendfile_call_len` asks for.
pub fn sendfile_calls(len: u64, policy: &FileSendPolicy) -> u64 {
    let chunk = policy.sendfile_chunk_bytes.max(2) as u64;
    let lead = len.min(2 * chunk);
    let rest = len - lead;
    lead.div_ceil(chunk).max(1) + rest.div_ceil(chunk / 2)
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
        let count = sendfile_call_len(off - f.offset, end - off, &policy);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::Arc;
    use tokio::io::AsyncReadExt;

    fn policy(chunk: usize) -> FileSendPolicy {
        FileSendPolicy {
            sendfile_min_bytes: 0,
            sendfile_max_bytes: 0,
            sendfile_chunk_bytes: chunk,
            read_chunk_bytes: 64 << 10,
            cork: false,
            send_timeout: Duration::from_secs(10),
        }
    }

    /// The call lengths `sendfile_slice` asks for when each call moves all it asks.
    fn calls(len: u64, policy: &FileSendPolicy) -> Vec<usize> {
        let (mut done, mut out) = (0, Vec::new());
        while done < len {
            let n = sendfile_call_len(done, len - done, policy);
            out.push(n);
            done += n as u64;
        }
        out
    }

    #[test]
    fn a_long_body_goes_in_two_whole_chunks_then_half_chunks() {
        let p = policy(512 << 10);
        let c = calls(64 << 20, &p);
        assert_eq!(c[..2], [512 << 10, 512 << 10]);
        assert!(c[2..].iter().all(|&n| n == 256 << 10), "{:?}", &c[..4]);
        assert_eq!(c.len(), 2 + 252);
        // A body of up to two chunks takes the fewest calls: 1 MiB in two.
        assert_eq!(calls(1 << 20, &p), [512 << 10, 512 << 10]);
        assert_eq!(calls(1000, &p), [1000]);
        assert_eq!(calls((1 << 20) + 1, &p), [512 << 10, 512 << 10, 1]);
    }

    /// The kTLS record budget (`file_records`) counts calls with `sendfile_calls`: it must
    /// be exactly what the loop makes, for lengths around every boundary.
    #[test]
    fn sendfile_calls_counts_what_the_loop_makes() {
        for chunk in [2, 3, 64 << 10, 512 << 10, (512 << 10) + 1] {
            let p = policy(chunk);
            let c = chunk as u64;
            for base in [0, 1, c / 2, c, 2 * c, 3 * c, 5 * c] {
                for len in base.saturating_sub(2)..base + 3 {
                    let made = calls(len, &p);
                    assert!(made.iter().all(|&n| n >= 1 && n <= chunk));
                    assert_eq!(made.iter().map(|&n| n as u64).sum::<u64>(), len);
                    assert_eq!(
                        sendfile_calls(len, &p),
                        (made.len() as u64).max(1),
                        "chunk {chunk}, len {len}"
                    );
                }
            }
        }
    }

    /// A call the socket takes in part moves the phase by what it took: the first
    /// phase never runs past two chunks, and no call asks for more than a chunk.
    #[test]
    fn a_partial_call_keeps_the_phase_boundary() {
        let p = policy(512 << 10);
        assert_eq!(sendfile_call_len(300 << 10, 10 << 20, &p), 512 << 10);
        assert_eq!(sendfile_call_len(812 << 10, 10 << 20, &p), 212 << 10);
        assert_eq!(sendfile_call_len(1 << 20, 10 << 20, &p), 256 << 10);
        assert_eq!(sendfile_call_len(1 << 20, 5, &p), 5);
    }

    /// A region in the middle of a file, larger than two chunks, arrives byte-exact over
    /// a real socket whose buffer makes calls partial.
    #[tokio::test]
    async fn a_region_crossing_the_phase_boundary_arrives_byte_exact() {
        let data: Vec<u8> = (0..(3 << 20) + 4099u32).map(|i| (i % 253) as u8).collect();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&data).unwrap();
        let (offset, len) = (1001u64, data.len() as u64 - 2000);
        let slice = FileSlice {
            file: Arc::new(file),
            offset,
            len,
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(&server, 64 << 10);
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            client.read_to_end(&mut got).await.unwrap();
            got
        });
        let mut sent = 0;
        sendfile_slice(&server, &slice, policy(96 << 10), &mut sent)
            .await
            .unwrap();
        assert_eq!(sent, len);
        drop(server);
        let got = reader.await.unwrap();
        assert_eq!(got.len() as u64, len);
        assert!(got[..] == data[offset as usize..(offset + len) as usize]);
    }
}
