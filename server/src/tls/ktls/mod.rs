//! kTLS: after the handshake, the session's keys go to the kernel (`TCP_ULP` "tls", then
//! `TLS_TX`/`TLS_RX`), so the HTTP/1.1 fast path keeps `sendfile(2)` on a TLS socket.
//! Where the kernel has no `tls` module (or a pod may not load it) the first
//! `setsockopt` fails and the connection stays on userspace rustls, with no error.
//!
//! The order is what makes the fallback safe. rustls cannot go on once its secrets are
//! out, so everything that can refuse comes first: the protocol version and cipher, data
//! rustls holds (TLS not yet written, records read ahead), then `TCP_ULP`, which only
//! attaches the (still pass-through) ULP to the socket; if that fails, rustls carries on
//! on the same connection. Only then are the secrets extracted and `TLS_TX`/`TLS_RX`
//! set; a refusal there leaves a socket whose session is gone: it is closed and counted
//! (`skiff_tls_kernel_failures_total`), and the (version, cipher) pair is not tried again.
//!
//! Nothing may be read ahead of the handshake's last record: a TLS 1.3 client sends its
//! first request right behind its Finished, and tokio-rustls goes on reading once the
//! handshake is done (rustls would decrypt the request, or hold half a record, which it
//! cannot say). `HandshakeIo` therefore reads the socket one record at a time while the
//! handshake runs, and after each record answers the next read "not yet" once (waking
//! the task at once): mid-handshake tokio-rustls simply reads again, and after the
//! record that completes it, tokio-rustls returns without another read, so the kernel's
//! socket buffer still holds everything that follows.
//!
//! Secrets: `ServerConnection::dangerous_extract_secrets`. rustls 0.23.46 deprecates the
//! *unbuffered* connection's `dangerous_extract_secrets` for its
//! `dangerous_into_kernel_connection`, whose `KernelConnection` can follow TLS 1.3 key
//! updates and (for clients) new session tickets. That API exists only on the unbuffered
//! connection; tokio-rustls runs the buffered one, which offers
//! `dangerous_extract_secrets` alone (not deprecated). A server has no tickets to
//! receive, and only the newest kernels can take a new key at all, so a peer's
//! KeyUpdate closes the connection (`read(2)` fails with EIO, or EKEYEXPIRED on kernels
//! that follow key updates; both read as the peer closing, see `is_control_record`).
//!
//! Limits: AES-GCM keys protect at most 2^24.5 records each (RFC 8446 §5.5; TLS 1.2 has
//! the same analysis), and the kernel cannot rekey its sending side for us. `RecordBudget`
//! counts an upper bound of the records sent and closes the connection at a keep-alive
//! boundary once it passes 2^23 (8.4 M records, 128 GiB in full 16 KiB records), and
//! fails a write that could pass 2^24, so a single response of more than about 250 GiB
//! on one kTLS connection is cut.

mod crypto_info;
#[cfg(test)]
mod peer_tests;
#[cfg(test)]
mod tests;

pub use crypto_info::*;

use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// Upper bound of the TLS records sent, against the AES-GCM limit of 2^24.5 records per
/// key. A write or sendfile call of n bytes makes at most ceil(n / 16384) records plus
/// one (the kernel closes a record when it is full or when a call completes without
/// MSG_MORE; a call cut short by a full socket leaves its record open for the next).
#[derive(Debug, Clone, Copy)]
pub struct RecordBudget {
    used: u64,
}

impl RecordBudget {
    /// The most plaintext one TLS record carries.
    pub const RECORD_BYTES: u64 = 16 * 1024;
    /// Past this, the connection closes at its next keep-alive boundary.
    pub const CLOSE_AFTER: u64 = 1 << 23;
    /// A write that could pass this fails (the connection ends): 2^24, against the
    /// AES-GCM limit of 2^24.5 (about 23.7 M).
    pub const HARD_LIMIT: u64 = 1 << 24;

    /// A budget with `sent` records already sent under the key (rustls' handshake
    /// records and tickets).
    pub fn new(sent: u64) -> RecordBudget {
        RecordBudget { used: sent }
    }

    /// Records `calls` write calls of `bytes` bytes in all may make at most.
    pub fn bound(bytes: u64, calls: u64) -> u64 {
        // Σ ceil(n_i / R) <= ceil(Σ n_i / R) + calls - 1, plus one open record per call.
        bytes.div_ceil(Self::RECORD_BYTES) + 2 * calls
    }

    /// Write calls a loop makes to send `bytes` in pieces of at most `piece` each (every
    /// complete call but the last moves a whole piece).
    pub fn calls(bytes: u64, piece: u64) -> u64 {
        bytes.div_ceil(piece.max(1)).max(1)
    }

    /// Accounts for one write call that took `bytes`.
    pub fn wrote(&mut self, bytes: u64) {
        self.used = self
            .used
            .saturating_add(bytes.div_ceil(Self::RECORD_BYTES) + 1);
    }

    /// Whether `records` more fit under the hard limit.
    pub fn allows(&self, records: u64) -> bool {
        self.used
            .checked_add(records)
            .is_some_and(|total| total <= Self::HARD_LIMIT)
    }

    /// Takes `records` from the budget, or refuses (taking nothing) when that could pass
    /// the hard limit.
    pub fn take(&mut self, records: u64) -> bool {
        match self.used.checked_add(records) {
            Some(total) if total <= Self::HARD_LIMIT => {
                self.used = total;
                true
            }
            _ => false,
        }
    }

    /// Whether the connection should close at its next keep-alive boundary.
    pub fn spent(&self) -> bool {
        self.used >= Self::CLOSE_AFTER
    }

    /// The error a write refused by the hard limit fails with.
    pub fn exhausted() -> io::Error {
        io::Error::other("TLS record limit of the kernel's key reached")
    }
}

/// How long a kernel found without the tls ULP is believed before one connection tries
/// again (a module may be loaded meanwhile): one failing setsockopt per worker thread per
/// period, instead of one per connection.
const ULP_RETRY: Duration = Duration::from_secs(30);

/// What the process learned of the kernel: whether the tls ULP was missing lately, and
/// which (version, cipher) pairs the kernel refused keys for. Those refusals cost a
/// connection each and mean an old kernel (ChaCha20-Poly1305 before 5.11, TLS 1.3
/// before 5.1), which no module load changes, so they are never retried.
pub struct Probe {
    /// Milliseconds since `epoch()` before which the ULP is not tried again; 0: try.
    ulp_retry_at: AtomicU64,
    /// Bit `pair_bit(version, cipher)` set: the kernel refused that pair's keys.
    refused: AtomicU8,
    ulp_missing_logged: AtomicBool,
}

impl Probe {
    pub const fn new() -> Probe {
        Probe {
            ulp_retry_at: AtomicU64::new(0),
            refused: AtomicU8::new(0),
            ulp_missing_logged: AtomicBool::new(false),
        }
    }

    /// Whether a connection should try kTLS at `now_ms`.
    pub fn ulp_worth_trying(&self, now_ms: u64) -> bool {
        now_ms >= self.ulp_retry_at.load(Ordering::Relaxed)
    }

    /// Notes what `TCP_ULP` answered at `now_ms`. Returns whether the error says the
    /// kernel cannot (rather than this socket could not, as when the peer already left).
    pub fn note_ulp(&self, result: &io::Result<()>, now_ms: u64) -> bool {
        match result {
            Ok(()) => {
                self.ulp_retry_at.store(0, Ordering::Relaxed);
                false
            }
            Err(e) if kernel_cannot(e) => {
                let retry = now_ms.saturating_add(ULP_RETRY.as_millis() as u64).max(1);
                self.ulp_retry_at.store(retry, Ordering::Relaxed);
                true
            }
            Err(_) => false,
        }
    }

    /// The first time only: whether to say at info level that kTLS is unavailable.
    fn first_missing(&self) -> bool {
        !self.ulp_missing_logged.swap(true, Ordering::Relaxed)
    }

    pub fn pair_usable(&self, version: Version, cipher: Cipher) -> bool {
        self.refused.load(Ordering::Relaxed) & pair_bit(version, cipher) == 0
    }

    /// Notes a refusal of keys; returns whether it was the kernel lacking the pair (then
    /// remembered) rather than a passing failure.
    pub fn note_refused(&self, version: Version, cipher: Cipher, e: &io::Error) -> bool {
        let lacking =
            kernel_cannot(e) || matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOSYS));
        if lacking {
            self.refused
                .fetch_or(pair_bit(version, cipher), Ordering::Relaxed);
        }
        lacking
    }
}

impl Default for Probe {
    fn default() -> Probe {
        Probe::new()
    }
}

fn pair_bit(version: Version, cipher: Cipher) -> u8 {
    let v = match version {
        Version::Tls12 => 0,
        Version::Tls13 => 3,
    };
    let c = match cipher {
        Cipher::Aes128Gcm => 0,
        Cipher::Aes256Gcm => 1,
        Cipher::Chacha20Poly1305 => 2,
    };
    1 << (v + c)
}

/// Errors that say the kernel (or the sandbox) cannot do this at all: no `tls` module
/// (ENOENT), not allowed to load or use it (EPERM, EACCES: a pod, seccomp), no ULP
/// support (ENOPROTOOPT, EOPNOTSUPP).
fn kernel_cannot(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT)
            | Some(libc::EPERM)
            | Some(libc::EACCES)
            | Some(libc::ENOPROTOOPT)
            | Some(libc::EOPNOTSUPP)
    )
}

static PROBE: Probe = Probe::new();

fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Whether a new connection should be prepared for kTLS (read by record in the
/// handshake, then offered to the kernel): not while the kernel was lately found without
/// the tls ULP.
pub fn worth_trying() -> bool {
    PROBE.ulp_worth_trying(now_ms())
}

/// The socket under a TLS handshake that may move to the kernel. While `by_record` is
/// set, reads stop at each TLS record's end (a 5-byte header, then its body), and the
/// read after a record's end is answered `Pending` once, with the task woken at once, so
/// rustls never holds bytes past the handshake's last record: what the peer sent after
/// it stays in the socket for the kernel. Off, it reads freely (after the handshake, on
/// a connection staying in userspace).
pub struct HandshakeIo<S = TcpStream> {
    inner: S,
    by_record: bool,
    /// A record just ended: the next read yields once.
    paused: bool,
    header: [u8; 5],
    /// Header bytes of the current record read so far.
    header_got: usize,
    /// Body bytes of the current record not read yet.
    body_left: usize,
}

impl<S> HandshakeIo<S> {
    pub fn new(inner: S, by_record: bool) -> HandshakeIo<S> {
        HandshakeIo {
            inner,
            by_record,
            paused: false,
            header: [0; 5],
            header_got: 0,
            body_left: 0,
        }
    }

    /// Reads as much as the caller asks from now on.
    pub fn read_freely(&mut self) {
        self.by_record = false;
    }

    /// Whether every byte read so far belongs to whole records.
    pub fn at_record_boundary(&self) -> bool {
        self.by_record && self.header_got == 0 && self.body_left == 0
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for HandshakeIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.by_record {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        if this.paused {
            // Whoever reads next gets the next record after one turn: tokio-rustls, once
            // the handshake is done, stops here instead.
            this.paused = false;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let in_body = this.body_left > 0;
        let want = if in_body {
            this.body_left
        } else {
            this.header.len() - this.header_got
        };
        let want = want.min(buf.remaining());
        if want == 0 {
            return Poll::Ready(Ok(()));
        }
        let mut part = ReadBuf::new(buf.initialize_unfilled_to(want));
        ready!(Pin::new(&mut this.inner).poll_read(cx, &mut part))?;
        let got = part.filled();
        let n = got.len();
        if in_body {
            this.body_left -= n;
            this.paused = this.body_left == 0;
        } else {
            this.header[this.header_got..this.header_got + n].copy_from_slice(got);
            this.header_got += n;
            if this.header_got == this.header.len() {
                this.header_got = 0;
                this.body_left = u16::from_be_bytes([this.header[3], this.header[4]]) as usize;
                this.paused = this.body_left == 0;
            }
        }
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for HandshakeIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A session the kernel now encrypts and decrypts.
#[derive(Debug, Clone, Copy)]
pub struct KernelSession {
    pub version: Version,
    pub cipher: Cipher,
    /// Records rustls sent under the sending key before the kernel took it over.
    pub records_sent: u64,
}

/// What became of a handshaken connection offered to the kernel.
// The userspace stream is large, but it moves by value once per connection either way
// (into hyper's connection future); boxing it would cost the fallback an allocation.
#[allow(clippy::large_enum_variant)]
pub enum Handover<S> {
    /// The kernel has the session: plain bytes on the socket are TLS records.
    Kernel(S, KernelSession),
    /// The kernel did not take it (no tls module, a refused cipher, data rustls holds):
    /// rustls goes on, on the same connection.
    Userspace(TlsStream<HandshakeIo<S>>),
    /// The secrets left rustls but the kernel refused them: the connection cannot go on.
    Failed(io::Error),
}

/// Moves a handshaken session into the kernel if everything allows it; see the module
/// documentation for the order of the steps.
pub fn into_kernel<S: AsRawFd>(mut stream: TlsStream<HandshakeIo<S>>) -> Handover<S> {
    let (io, conn) = stream.get_mut();
    let version = conn.protocol_version().and_then(Version::of);
    let cipher = conn
        .negotiated_cipher_suite()
        .and_then(|s| Cipher::of_suite(s.suite()));
    let (Some(version), Some(cipher)) = (version, cipher) else {
        return Handover::Userspace(stream);
    };
    if !PROBE.pair_usable(version, cipher) || !io.at_record_boundary() || conn.wants_write() {
        return Handover::Userspace(stream);
    }
    // Everything read has been processed (reads stop at records' ends); nothing may be
    // left decrypted and unread, nor a close_notify seen.
    match conn.process_new_packets() {
        Ok(state)
            if state.plaintext_bytes_to_read() == 0
                && state.tls_bytes_to_write() == 0
                && !state.peer_has_closed() => {}
        _ => return Handover::Userspace(stream),
    }
    let ulp = set_tls_ulp(io.get_ref());
    let kernel_cannot = PROBE.note_ulp(&ulp, now_ms());
    if let Err(e) = ulp {
        if kernel_cannot && PROBE.first_missing() {
            tracing::info!(error = %e, "kTLS is not available (the kernel has no tls ULP, or it may not be loaded here): TLS stays in userspace, retried every {}s", ULP_RETRY.as_secs());
        } else {
            tracing::debug!(error = %e, "TCP_ULP tls refused: this connection stays in userspace");
        }
        return Handover::Userspace(stream);
    }
    let (io, conn) = stream.into_inner();
    let socket = io.into_inner();
    let secrets = match conn.dangerous_extract_secrets() {
        Ok(s) => s,
        Err(e) => return Handover::Failed(io::Error::other(e)),
    };
    let (tx_seq, tx) = &secrets.tx;
    let (rx_seq, rx) = &secrets.rx;
    let infos = (
        CryptoInfo::from_secrets(version, Direction::Send, *tx_seq, tx),
        CryptoInfo::from_secrets(version, Direction::Receive, *rx_seq, rx),
    );
    let (Some(tx_info), Some(rx_info)) = infos else {
        return Handover::Failed(io::Error::other("secrets of an unexpected cipher"));
    };
    for (direction, info) in [(Direction::Send, &tx_info), (Direction::Receive, &rx_info)] {
        if let Err(e) = set_crypto(&socket, direction, info) {
            if PROBE.note_refused(version, cipher, &e) {
                tracing::warn!(?version, ?cipher, ?direction, error = %e,
                    "the kernel refused kTLS keys for this version and cipher; such connections stay in userspace from now on");
            }
            return Handover::Failed(e);
        }
    }
    Handover::Kernel(
        socket,
        KernelSession {
            version,
            cipher,
            records_sent: *tx_seq,
        },
    )
}
