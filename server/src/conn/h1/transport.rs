//! The fast path's byte stream: a socket carrying plain bytes (TCP, or kTLS, whose records
//! the kernel makes), or a rustls session over TCP, whose records are made here. Reads
//! give plaintext without waiting; writes take plaintext as far as the socket (or
//! rustls's bounded record queue) allows; waits follow the socket's readiness.

use super::socket::{self, ReadResult};
use crate::conn::file_send::{truncated, writable, FileSendPolicy};
use crate::tls::ktls::HandshakeIo;
use std::io::{self, IoSlice, Read, Write};
use std::time::Duration;
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

pub(crate) type RustlsStream = TlsStream<HandshakeIo<TcpStream>>;

pub(crate) enum Transport {
    Plain(TcpStream),
    /// Boxed: the session is kilobytes, and plain connections should not reserve it.
    Rustls(Box<RustlsStream>),
}

impl Transport {
    /// The socket under the stream (readiness, socket options, the client-gone probe).
    pub(super) fn tcp(&self) -> &TcpStream {
        match self {
            Transport::Plain(s) => s,
            Transport::Rustls(t) => t.get_ref().0.get_ref(),
        }
    }

    /// Whether records are made here (so sendfile cannot be used).
    pub(super) fn is_rustls(&self) -> bool {
        matches!(self, Transport::Rustls(_))
    }

    /// Reads what has arrived into `space`, as plaintext; see `socket::read_available`.
    /// `WouldBlock` means the socket is drained and no plaintext is left in rustls, so
    /// waiting on the socket's readiness is right.
    pub(super) fn read_available(&mut self, space: &mut [u8]) -> (usize, io::Result<ReadResult>) {
        match self {
            Transport::Plain(s) => socket::read_available(s, space),
            Transport::Rustls(t) => read_rustls(t, space),
        }
    }

    /// Writes from `iov` without waiting: the bytes taken, or `WouldBlock` if none were.
    /// On rustls, taken means sealed into records, which are written as far as the socket
    /// takes them now (`flush` writes the rest). `more` asks a plain socket to hold the
    /// bytes for what follows (MSG_MORE).
    pub(super) fn try_writev(&mut self, iov: &[IoSlice<'_>], more: bool) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.try_io(Interest::WRITABLE, || {
                let flags = if more {
                    rustix::net::SendFlags::MORE
                } else {
                    rustix::net::SendFlags::empty()
                };
                send_vectored(s, iov, flags)
            }),
            Transport::Rustls(t) => {
                let (io, conn) = t.get_mut();
                // Sealed as far as rustls's bounded queue allows (nothing when it is full:
                // `writable` drains it first), then written with what was queued before,
                // in one writev; with `more`, kept for the records that follow (a head
                // with its file body's first chunk).
                let n = conn.writer().write_vectored(iov)?;
                if !more {
                    write_records(io.get_ref(), conn)?;
                }
                if n == 0 && iov.iter().any(|s| !s.is_empty()) {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                Ok(n)
            }
        }
    }

    /// Waits until a write can make progress: the socket is writable (plain), or
    /// rustls's queue of sealed records was written out (rustls). A client that takes
    /// nothing for `send_timeout` is given up on.
    pub(super) async fn writable(&mut self, send_timeout: Duration) -> io::Result<()> {
        match self {
            Transport::Plain(s) => writable(s, send_timeout).await,
            Transport::Rustls(_) => self.flush(send_timeout).await,
        }
    }

    /// Writes every sealed record still queued in rustls (nothing to do on a plain
    /// socket, which queues nothing of its own).
    pub(super) async fn flush(&mut self, send_timeout: Duration) -> io::Result<()> {
        let Transport::Rustls(t) = self else {
            return Ok(());
        };
        let (io, conn) = t.get_mut();
        let tcp = io.get_ref();
        loop {
            write_records(tcp, conn)?;
            if !conn.wants_write() {
                return Ok(());
            }
            writable(tcp, send_timeout).await?;
        }
    }

    /// Resolves when the client has gone while a backend works (`socket::client_gone` on
    /// a plain socket). Over rustls, records are decrypted as they come: a close_notify, an
    /// error or EOF means gone; plaintext (a pipelined request) stops the watch and waits
    /// in rustls for the next read.
    pub(super) async fn client_gone(&mut self) {
        let t = match self {
            Transport::Plain(s) => return socket::client_gone(s).await,
            Transport::Rustls(t) => t,
        };
        let (io, conn) = t.get_mut();
        let tcp = io.get_ref();
        loop {
            match conn.process_new_packets() {
                Err(_) => return,
                Ok(state) if state.peer_has_closed() => return,
                Ok(state) if state.plaintext_bytes_to_read() > 0 => {
                    return std::future::pending().await
                }
                Ok(_) => {}
            }
            if tcp.readable().await.is_err() {
                return;
            }
            let r = tcp.try_io(Interest::READABLE, || {
                conn.read_tls(&mut ShortRead { tcp, short: false })
            });
            match r {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
    }

    /// Whether sealed records wait to be written.
    pub(super) fn has_queued_records(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Rustls(t) => t.get_ref().1.wants_write(),
        }
    }

    /// Tells a rustls peer the connection ends (close_notify), if the socket takes it
    /// now: a closing connection does not wait for a client that reads nothing. Only
    /// after complete responses: a body cut short by an error must not look whole.
    pub(super) fn close_notify(&mut self) {
        if let Transport::Rustls(t) = self {
            let (io, conn) = t.get_mut();
            conn.send_close_notify();
            let _ = write_records(io.get_ref(), conn);
        }
    }

    /// Writes all of `data`, waiting as needed (paced bodies, pread chunks); `written`
    /// grows as bytes go out, so a write that fails part way still counts what left.
    pub(super) async fn write_all(
        &mut self,
        mut data: &[u8],
        send_timeout: Duration,
        written: &mut u64,
    ) -> io::Result<()> {
        while !data.is_empty() {
            match self.try_writev(&[IoSlice::new(data)], false) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    *written += n as u64;
                    data = &data[n..];
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.writable(send_timeout).await?
                }
                Err(e) => return Err(e),
            }
        }
        self.flush(send_timeout).await
    }
}

/// Writes sealed records as far as the socket takes them now; a full socket is not an
/// error (the records stay queued).
fn write_records(tcp: &TcpStream, conn: &mut rustls::ServerConnection) -> io::Result<()> {
    while conn.wants_write() {
        let r = tcp.try_io(Interest::WRITABLE, || conn.write_tls(&mut SocketIo(tcp)));
        match r {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Plaintext from rustls, decrypting what the socket has when none is buffered.
fn read_rustls(t: &mut RustlsStream, space: &mut [u8]) -> (usize, io::Result<ReadResult>) {
    let (io, conn) = t.get_mut();
    let tcp = io.get_ref();
    loop {
        match conn.reader().read(space) {
            // The peer's close_notify.
            Ok(0) => return (0, Ok(ReadResult::Eof)),
            Ok(n) => return (n, Ok(ReadResult::Data)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return (0, Ok(ReadResult::Eof)),
            Err(e) => return (0, Err(e)),
        }
        // No plaintext left: take what the socket has. A short read drained it, so its
        // readiness is cleared at once (as on plain sockets) instead of by an EAGAIN.
        let mut got = None;
        let r = tcp.try_io(Interest::READABLE, || {
            let mut sock = ShortRead { tcp, short: false };
            let n = conn.read_tls(&mut sock)?;
            got = Some(n);
            if n > 0 && sock.short {
                Err(io::ErrorKind::WouldBlock.into())
            } else {
                Ok(n)
            }
        });
        match (r, got) {
            (Ok(0), _) => return (0, Ok(ReadResult::Eof)),
            (Ok(_), _) => {}
            (Err(e), Some(n)) if e.kind() == io::ErrorKind::WouldBlock && n > 0 => {}
            (Err(e), _) if e.kind() == io::ErrorKind::WouldBlock => {
                return (0, Ok(ReadResult::WouldBlock))
            }
            (Err(e), _) if e.kind() == io::ErrorKind::ConnectionReset => {
                return (0, Ok(ReadResult::Eof))
            }
            (Err(e), _) => return (0, Err(e)),
        }
        match conn.process_new_packets() {
            Ok(_) => {
                // Records rustls owes the peer now (alerts; a TLS 1.2 renegotiation
                // refusal): sent if the socket takes them, otherwise with the next
                // response. (A KeyUpdate's answer waits in rustls for the next response.)
                if conn.wants_write() {
                    if let Err(e) = write_records(tcp, conn) {
                        return (0, Err(e));
                    }
                }
            }
            Err(e) => {
                // The alert explaining the failure, if the socket takes it.
                let _ = write_records(tcp, conn);
                return (0, Err(io::Error::new(io::ErrorKind::InvalidData, e)));
            }
        }
    }
}

/// One sendmsg of `iov` (without SIGPIPE), or one send when it is a single buffer (no
/// message header or vector for the kernel to copy in). Socket calls, not read/writev:
/// those go through the file layer first, which costs more per call than the socket does.
fn send_vectored(
    socket: &TcpStream,
    iov: &[IoSlice<'_>],
    flags: rustix::net::SendFlags,
) -> io::Result<usize> {
    if let [one] = iov {
        return rustix::net::send(socket, one, flags | rustix::net::SendFlags::NOSIGNAL)
            .map_err(io::Error::from);
    }
    rustix::net::sendmsg(
        socket,
        iov,
        &mut rustix::net::SendAncillaryBuffer::default(),
        flags | rustix::net::SendFlags::NOSIGNAL,
    )
    .map_err(io::Error::from)
}

/// The socket as rustls's `Read`/`Write`, without waiting (EAGAIN is `WouldBlock`).
struct SocketIo<'a>(&'a TcpStream);

impl Write for SocketIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        rustix::net::send(self.0, buf, rustix::net::SendFlags::NOSIGNAL).map_err(io::Error::from)
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        send_vectored(self.0, bufs, rustix::net::SendFlags::empty())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The socket as rustls's `Read`, noting a read shorter than asked (the socket drained).
struct ShortRead<'a> {
    tcp: &'a TcpStream,
    short: bool,
}

impl Read for ShortRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len();
        let (n, _) = rustix::net::recv(self.tcp, buf, rustix::net::RecvFlags::empty())
            .map_err(io::Error::from)?;
        self.short = n < want;
        Ok(n)
    }
}

/// Sends a file region by pread(2) and write: on rustls (sealed into records, no
/// sendfile in userspace TLS), and on a plain socket below `sendfile_min_bytes`. Chunks
/// are read into the spare capacity of `chunk` (never zeroed) and start mid-page, away
/// from where rustls's records start (`fs::chunk`). `sent` counts the bytes taken, also
/// when this fails part way.
pub(super) async fn send_file_pread(
    stream: &mut Transport,
    f: &crate::http::reply::FileSlice,
    policy: FileSendPolicy,
    chunk: &mut Vec<u8>,
    sent: &mut u64,
) -> io::Result<()> {
    use crate::fs::chunk::{pad_to_mid_page, PAGE};
    // The buffer lives for this transfer only, so idle connections hold no big buffers.
    let want_buf = policy.read_chunk_bytes.min(f.len as usize).max(1);
    chunk.clear();
    chunk.reserve(want_buf + PAGE);
    let pad = pad_to_mid_page(chunk.as_ptr() as usize);
    let end = f.offset + f.len;
    let mut off = f.offset;
    while off < end {
        let want = ((end - off) as usize).min(want_buf);
        let space = &mut chunk.spare_capacity_mut()[pad..pad + want];
        let filled = match rustix::io::pread(&*f.file, space, off) {
            Ok((filled, _)) => filled,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        let n = filled.len();
        if n == 0 {
            return Err(truncated());
        }
        let mut taken = 0;
        while taken < n {
            match stream.try_writev(&[IoSlice::new(&filled[taken..])], false) {
                Ok(w) => {
                    taken += w;
                    *sent += w as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    stream.writable(policy.send_timeout).await?
                }
                Err(e) => return Err(e),
            }
        }
        off += n as u64;
    }
    if chunk.capacity() > 64 * 1024 {
        *chunk = Vec::new();
    }
    Ok(())
}
