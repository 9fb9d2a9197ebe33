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
// setsockopt(2) with a `tls12_crypto_info_*` struct (and TCP_ULP with a string) has no
// safe wrapper: rustix offers neither. The calls pass a pointer to a live, fully
// initialized value and its exact size; the key bytes are wiped with volatile writes.
#![allow(unsafe_code)]

use rustls::{CipherSuite, ConnectionTrafficSecrets, ProtocolVersion};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// The TLS versions the kernel takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Tls12,
    Tls13,
}

impl Version {
    pub fn of(v: ProtocolVersion) -> Option<Version> {
        match v {
            ProtocolVersion::TLSv1_2 => Some(Version::Tls12),
            ProtocolVersion::TLSv1_3 => Some(Version::Tls13),
            _ => None,
        }
    }

    fn wire(self) -> u16 {
        match self {
            Version::Tls12 => libc::TLS_1_2_VERSION,
            Version::Tls13 => libc::TLS_1_3_VERSION,
        }
    }
}

/// The record ciphers rustls negotiates, all of which the kernel has (ChaCha20-Poly1305
/// since Linux 5.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cipher {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20Poly1305,
}

impl Cipher {
    pub fn of_suite(suite: CipherSuite) -> Option<Cipher> {
        match suite {
            CipherSuite::TLS13_AES_128_GCM_SHA256
            | CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
            | CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => Some(Cipher::Aes128Gcm),
            CipherSuite::TLS13_AES_256_GCM_SHA384
            | CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
            | CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => Some(Cipher::Aes256Gcm),
            CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
            | CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
            | CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => {
                Some(Cipher::Chacha20Poly1305)
            }
            _ => None,
        }
    }

    fn key_len(self) -> usize {
        match self {
            Cipher::Aes128Gcm => libc::TLS_CIPHER_AES_GCM_128_KEY_SIZE,
            Cipher::Aes256Gcm => libc::TLS_CIPHER_AES_GCM_256_KEY_SIZE,
            Cipher::Chacha20Poly1305 => libc::TLS_CIPHER_CHACHA20_POLY1305_KEY_SIZE,
        }
    }
}

/// Which way a `CryptoInfo` protects records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// What the server sends (`TLS_TX`).
    Send,
    /// What the server receives (`TLS_RX`).
    Receive,
}

/// One direction's keys as the kernel takes them: `struct tls12_crypto_info_*` (the
/// same structs serve TLS 1.3). The key bytes are wiped when it drops.
pub enum CryptoInfo {
    Aes128Gcm(libc::tls12_crypto_info_aes_gcm_128),
    Aes256Gcm(libc::tls12_crypto_info_aes_gcm_256),
    Chacha20Poly1305(libc::tls12_crypto_info_chacha20_poly1305),
}

/// rustls' 12-byte IV: for AES-GCM the kernel takes its first 4 bytes as the `salt` and
/// the other 8 as `iv`; ChaCha20-Poly1305 takes all 12 as `iv` (no salt).
const IV_LEN: usize = 12;
const GCM_SALT_LEN: usize = 4;

impl CryptoInfo {
    /// The keys of one direction from what rustls extracted: the record sequence number
    /// the kernel continues from, and the traffic key and IV. `None` for a cipher the
    /// kernel path does not handle.
    pub fn from_secrets(
        version: Version,
        direction: Direction,
        seq: u64,
        secrets: &ConnectionTrafficSecrets,
    ) -> Option<CryptoInfo> {
        let (cipher, key, iv) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (Cipher::Aes128Gcm, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (Cipher::Aes256Gcm, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (Cipher::Chacha20Poly1305, key, iv)
            }
            _ => return None,
        };
        let iv: &[u8; IV_LEN] = iv.as_ref().try_into().ok()?;
        CryptoInfo::new(version, cipher, direction, key.as_ref(), iv, seq)
    }

    /// The kernel's struct from raw parts; `None` when the key's length is not the
    /// cipher's.
    ///
    /// One case differs from a plain split of rustls' IV: what the server *sends* under
    /// TLS 1.2 AES-GCM. There the nonce is the salt and an 8-byte explicit part that the
    /// record carries; rustls makes that part `iv XOR seq` (RFC 8446's construction),
    /// while the kernel sends its `iv` field as is and adds one per record. Started at
    /// rustls' `iv`, the kernel's first record would reuse the nonce of the server's
    /// Finished (seq 0) under the same key, which breaks GCM. So the kernel starts just
    /// above every value `iv XOR s` (s < seq) could take (see `tls12_gcm_explicit_start`);
    /// the peer reads the explicit nonce from each record, so any unused value works.
    pub fn new(
        version: Version,
        cipher: Cipher,
        direction: Direction,
        key: &[u8],
        iv: &[u8; IV_LEN],
        seq: u64,
    ) -> Option<CryptoInfo> {
        if key.len() != cipher.key_len() {
            return None;
        }
        let info = |cipher_type: u16| libc::tls_crypto_info {
            version: version.wire(),
            cipher_type,
        };
        let rec_seq = seq.to_be_bytes();
        let (salt, explicit) = iv.split_at(GCM_SALT_LEN);
        let mut explicit: [u8; 8] = explicit.try_into().ok()?;
        if version == Version::Tls12 && direction == Direction::Send {
            explicit = tls12_gcm_explicit_start(explicit, seq);
        }
        let salt: [u8; GCM_SALT_LEN] = salt.try_into().ok()?;
        Some(match cipher {
            Cipher::Aes128Gcm => CryptoInfo::Aes128Gcm(libc::tls12_crypto_info_aes_gcm_128 {
                info: info(libc::TLS_CIPHER_AES_GCM_128),
                iv: explicit,
                key: key.try_into().ok()?,
                salt,
                rec_seq,
            }),
            Cipher::Aes256Gcm => CryptoInfo::Aes256Gcm(libc::tls12_crypto_info_aes_gcm_256 {
                info: info(libc::TLS_CIPHER_AES_GCM_256),
                iv: explicit,
                key: key.try_into().ok()?,
                salt,
                rec_seq,
            }),
            Cipher::Chacha20Poly1305 => {
                CryptoInfo::Chacha20Poly1305(libc::tls12_crypto_info_chacha20_poly1305 {
                    info: info(libc::TLS_CIPHER_CHACHA20_POLY1305),
                    iv: *iv,
                    key: key.try_into().ok()?,
                    salt: [],
                    rec_seq,
                })
            }
        })
    }

    /// The struct's address and size, for setsockopt.
    fn raw(&self) -> (*const libc::c_void, libc::socklen_t) {
        fn of<T>(v: &T) -> (*const libc::c_void, libc::socklen_t) {
            (
                (v as *const T).cast(),
                std::mem::size_of::<T>() as libc::socklen_t,
            )
        }
        match self {
            CryptoInfo::Aes128Gcm(c) => of(c),
            CryptoInfo::Aes256Gcm(c) => of(c),
            CryptoInfo::Chacha20Poly1305(c) => of(c),
        }
    }

    fn key_mut(&mut self) -> &mut [u8] {
        match self {
            CryptoInfo::Aes128Gcm(c) => &mut c.key,
            CryptoInfo::Aes256Gcm(c) => &mut c.key,
            CryptoInfo::Chacha20Poly1305(c) => &mut c.key,
        }
    }

    fn wipe_key(&mut self) {
        for b in self.key_mut() {
            // SAFETY: `b` is a valid, aligned, exclusive reference to a byte; a volatile
            // write keeps the compiler from eliding the wipe of a value about to die.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
    }
}

impl Drop for CryptoInfo {
    fn drop(&mut self) {
        self.wipe_key();
    }
}

/// The first explicit nonce the kernel may use for TLS 1.2 AES-GCM records it sends,
/// given rustls' explicit IV part and the number of records rustls sent under the key.
/// rustls used `iv XOR s` for every `s < seq`: values that differ from `iv` only in the
/// bits below `seq - 1`'s highest bit. The kernel counts up from the first value above
/// that block; it would need 2^64 records minus the block to come back into it, and
/// `RecordBudget` stops a connection at 2^24.
pub fn tls12_gcm_explicit_start(iv: [u8; 8], seq: u64) -> [u8; 8] {
    if seq == 0 {
        return iv;
    }
    let used_bits = if seq == 1 {
        0
    } else {
        u64::MAX >> (seq - 1).leading_zeros()
    };
    (u64::from_be_bytes(iv) | used_bits)
        .wrapping_add(1)
        .to_be_bytes()
}

fn setsockopt_raw(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: *const libc::c_void,
    len: libc::socklen_t,
) -> io::Result<()> {
    // SAFETY: `value` points to `len` initialized bytes that outlive the call (callers
    // pass a live reference's address and its size), and `fd` is an open socket.
    let rc = unsafe { libc::setsockopt(fd, level, name, value, len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Attaches the kernel's TLS ULP. Until keys are set the socket behaves as plain TCP, so
/// a failure here (or anything before keys) leaves the connection to rustls.
pub fn set_tls_ulp(socket: &impl AsRawFd) -> io::Result<()> {
    const NAME: &[u8] = b"tls";
    setsockopt_raw(
        socket.as_raw_fd(),
        libc::SOL_TCP,
        libc::TCP_ULP,
        NAME.as_ptr().cast(),
        NAME.len() as libc::socklen_t,
    )
}

/// Hands one direction's keys to the kernel (after `set_tls_ulp`).
pub fn set_crypto(
    socket: &impl AsRawFd,
    direction: Direction,
    info: &CryptoInfo,
) -> io::Result<()> {
    let name = match direction {
        Direction::Send => libc::TLS_TX,
        Direction::Receive => libc::TLS_RX,
    };
    let (ptr, len) = info.raw();
    setsockopt_raw(socket.as_raw_fd(), libc::SOL_TLS, name, ptr, len)
}

/// Whether a read error on a kTLS socket is the peer's control record (an alert such as
/// close_notify, a TLS 1.3 KeyUpdate): the kernel hands those only to a reader that asks
/// for the record type, and fails a plain read with EIO (EKEYEXPIRED after a KeyUpdate
/// on kernels that follow them). Either way the connection ends as if the peer closed.
pub fn is_control_record(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EIO) | Some(libc::EKEYEXPIRED))
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::crypto::cipher::{
        AeadKey, InboundOpaqueMessage, Iv, OutboundChunks, OutboundPlainMessage,
    };
    use rustls::crypto::CryptoProvider;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
    use rustls::{
        ClientConfig, ClientConnection, ContentType, DigitallySignedStruct, ServerConfig,
        ServerConnection, SignatureScheme, SupportedCipherSuite, SupportedProtocolVersion,
    };
    use std::io::{Read, Write};
    use std::sync::Arc;

    const KEY32: [u8; 32] = [
        0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae,
        0xaf, 0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xbb, 0xbc, 0xbd,
        0xbe, 0xbf,
    ];
    const IV: [u8; 12] = [
        0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b,
    ];
    const SEQ: u64 = 0x0102_0304_0506_0708;

    /// The struct's bytes exactly as setsockopt hands them to the kernel.
    fn wire_bytes(info: &CryptoInfo) -> Vec<u8> {
        let (ptr, len) = info.raw();
        // SAFETY: `raw` gives the address and size of the live struct inside `info`, a
        // repr(C) struct of byte arrays and u16s with no padding.
        unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len as usize) }.to_vec()
    }

    /// What the kernel reads: version and cipher (native endian u16s), then the iv, key,
    /// salt and rec_seq arrays in that order.
    fn expect_layout(
        bytes: &[u8],
        version: u16,
        cipher: u16,
        iv: &[u8],
        key: &[u8],
        salt: &[u8],
        seq: u64,
    ) {
        let mut want = Vec::new();
        want.extend_from_slice(&version.to_ne_bytes());
        want.extend_from_slice(&cipher.to_ne_bytes());
        want.extend_from_slice(iv);
        want.extend_from_slice(key);
        want.extend_from_slice(salt);
        want.extend_from_slice(&seq.to_be_bytes());
        assert_eq!(bytes, &want[..]);
    }

    #[test]
    fn the_structs_have_the_kernels_sizes() {
        // include/uapi/linux/tls.h: 4 + iv + key + salt + 8.
        assert_eq!(
            std::mem::size_of::<libc::tls12_crypto_info_aes_gcm_128>(),
            4 + 8 + 16 + 4 + 8
        );
        assert_eq!(
            std::mem::size_of::<libc::tls12_crypto_info_aes_gcm_256>(),
            4 + 8 + 32 + 4 + 8
        );
        assert_eq!(
            std::mem::size_of::<libc::tls12_crypto_info_chacha20_poly1305>(),
            4 + 12 + 32 + 8
        );
        assert_eq!(libc::TLS_1_2_VERSION, 0x0303);
        assert_eq!(libc::TLS_1_3_VERSION, 0x0304);
        assert_eq!(libc::SOL_TLS, 282);
        assert_eq!(libc::TCP_ULP, 31);
    }

    #[test]
    fn aes_gcm_splits_the_iv_into_salt_and_iv_and_puts_the_sequence_big_endian() {
        let key16 = &KEY32[..16];
        for (version, direction) in [
            (Version::Tls13, Direction::Send),
            (Version::Tls13, Direction::Receive),
            (Version::Tls12, Direction::Receive),
        ] {
            let info =
                CryptoInfo::new(version, Cipher::Aes128Gcm, direction, key16, &IV, SEQ).unwrap();
            assert!(matches!(info, CryptoInfo::Aes128Gcm(_)));
            expect_layout(
                &wire_bytes(&info),
                version.wire(),
                51,
                &IV[4..],
                key16,
                &IV[..4],
                SEQ,
            );
            let info =
                CryptoInfo::new(version, Cipher::Aes256Gcm, direction, &KEY32, &IV, SEQ).unwrap();
            assert!(matches!(info, CryptoInfo::Aes256Gcm(_)));
            expect_layout(
                &wire_bytes(&info),
                version.wire(),
                52,
                &IV[4..],
                &KEY32,
                &IV[..4],
                SEQ,
            );
        }
    }

    #[test]
    fn tls12_aes_gcm_sending_starts_past_the_nonces_rustls_used() {
        // seq 1: rustls sent the Finished with explicit part IV[4..] itself.
        let info = CryptoInfo::new(
            Version::Tls12,
            Cipher::Aes128Gcm,
            Direction::Send,
            &KEY32[..16],
            &IV,
            1,
        )
        .unwrap();
        let mut next = IV[4..].to_vec();
        *next.last_mut().unwrap() += 1;
        expect_layout(
            &wire_bytes(&info),
            0x0303,
            51,
            &next,
            &KEY32[..16],
            &IV[..4],
            1,
        );
    }

    #[test]
    fn chacha_takes_the_whole_iv_and_no_salt() {
        for version in [Version::Tls12, Version::Tls13] {
            for direction in [Direction::Send, Direction::Receive] {
                let info = CryptoInfo::new(
                    version,
                    Cipher::Chacha20Poly1305,
                    direction,
                    &KEY32,
                    &IV,
                    SEQ,
                )
                .unwrap();
                expect_layout(
                    &wire_bytes(&info),
                    version.wire(),
                    54,
                    &IV,
                    &KEY32,
                    &[],
                    SEQ,
                );
            }
        }
    }

    #[test]
    fn a_key_of_the_wrong_length_is_refused() {
        let v = Version::Tls13;
        let d = Direction::Send;
        assert!(CryptoInfo::new(v, Cipher::Aes128Gcm, d, &KEY32, &IV, 0).is_none());
        assert!(CryptoInfo::new(v, Cipher::Aes256Gcm, d, &KEY32[..16], &IV, 0).is_none());
        assert!(CryptoInfo::new(v, Cipher::Chacha20Poly1305, d, &KEY32[..16], &IV, 0).is_none());
    }

    #[test]
    fn from_secrets_maps_rustls_variants() {
        let secrets = ConnectionTrafficSecrets::Aes256Gcm {
            key: AeadKey::from(KEY32),
            iv: Iv::from(IV),
        };
        let info =
            CryptoInfo::from_secrets(Version::Tls13, Direction::Receive, 7, &secrets).unwrap();
        expect_layout(
            &wire_bytes(&info),
            0x0304,
            52,
            &IV[4..],
            &KEY32,
            &IV[..4],
            7,
        );
        let secrets = ConnectionTrafficSecrets::Chacha20Poly1305 {
            key: AeadKey::from(KEY32),
            iv: Iv::from(IV),
        };
        let info = CryptoInfo::from_secrets(Version::Tls12, Direction::Send, 9, &secrets).unwrap();
        expect_layout(&wire_bytes(&info), 0x0303, 54, &IV, &KEY32, &[], 9);
        // A 32-byte key labelled AES-128 (rustls never does this) is refused.
        let secrets = ConnectionTrafficSecrets::Aes128Gcm {
            key: AeadKey::from(KEY32),
            iv: Iv::from(IV),
        };
        assert!(CryptoInfo::from_secrets(Version::Tls13, Direction::Send, 0, &secrets).is_none());
    }

    #[test]
    fn explicit_nonce_start_avoids_every_value_rustls_used() {
        let bases = [
            0u64,
            1,
            5,
            0x8000_0000_0000_0000,
            0x1234_5678_9abc_def0,
            u64::MAX - 3,
        ];
        for base in bases {
            for seq in [0u64, 1, 2, 3, 4, 5, 7, 8, 9, 100, 1 << 20] {
                let start = u64::from_be_bytes(tls12_gcm_explicit_start(base.to_be_bytes(), seq));
                if seq == 0 {
                    assert_eq!(start, base, "nothing used yet");
                    continue;
                }
                // Every nonce rustls used (base ^ s, s < seq) lies in lo..=hi...
                let mask = if seq == 1 {
                    0
                } else {
                    u64::MAX >> (seq - 1).leading_zeros()
                };
                let (lo, hi) = (base & !mask, base | mask);
                for s in (0..seq).take(4096) {
                    assert!((lo..=hi).contains(&(base ^ s)));
                }
                // ...and the kernel counts up from just past it: its first 2^24 nonces
                // (a contiguous run, modulo 2^64) end before coming round to lo.
                assert_eq!(start, hi.wrapping_add(1));
                for k in [0, 1, 4095, RecordBudget::HARD_LIMIT] {
                    let n = start.wrapping_add(k);
                    assert!(
                        !(lo..=hi).contains(&n),
                        "base {base:#x} seq {seq}: kernel nonce {n:#x} reused"
                    );
                }
            }
        }
        assert_eq!(
            tls12_gcm_explicit_start(5u64.to_be_bytes(), 1),
            6u64.to_be_bytes()
        );
        assert_eq!(
            tls12_gcm_explicit_start(4u64.to_be_bytes(), 2),
            6u64.to_be_bytes()
        );
        assert_eq!(
            tls12_gcm_explicit_start(4u64.to_be_bytes(), 5),
            8u64.to_be_bytes()
        );
    }

    #[test]
    fn record_budget_bounds_calls_and_stops_at_its_limits() {
        assert_eq!(RecordBudget::bound(0, 1), 2);
        assert_eq!(RecordBudget::bound(16384, 1), 3);
        assert_eq!(RecordBudget::bound(16385, 1), 4);
        // 1 MiB in 512 KiB sendfile calls: 64 full records, plus two per call.
        assert_eq!(RecordBudget::calls(1 << 20, 512 << 10), 2);
        assert_eq!(RecordBudget::calls(0, 512 << 10), 1);
        assert_eq!(RecordBudget::calls(1, 0), 1);
        assert_eq!(RecordBudget::bound(1 << 20, 2), 64 + 4);
        // One call's records: ceil(n / 16384) + 1.
        let mut b = RecordBudget::new(3);
        b.wrote(100);
        assert_eq!(b.used, 5);
        b.wrote(3 * 16384);
        assert_eq!(b.used, 9);
        assert!(!b.spent());
        // Close at a keep-alive boundary from 2^23 on...
        let mut b = RecordBudget::new(RecordBudget::CLOSE_AFTER - 1);
        assert!(!b.spent());
        assert!(b.take(1));
        assert!(b.spent());
        // ...and refuse a write that could pass 2^24, taking nothing.
        let mut b = RecordBudget::new(RecordBudget::HARD_LIMIT - 10);
        assert!(b.allows(10));
        assert!(!b.allows(11));
        assert!(!b.take(11));
        assert_eq!(b.used, RecordBudget::HARD_LIMIT - 10);
        assert!(b.take(10));
        assert!(!b.take(1));
        assert!(!b.allows(u64::MAX));
        // The limits sit below AES-GCM's 2^24.5 records per key.
        assert!((RecordBudget::HARD_LIMIT as f64) < 2f64.powf(24.5));
        let mut b = RecordBudget::new(u64::MAX - 1);
        b.wrote(1 << 30);
        assert_eq!(b.used, u64::MAX);
    }

    #[test]
    fn a_missing_ulp_is_believed_for_a_while_then_tried_again() {
        let p = Probe::new();
        assert!(p.ulp_worth_trying(0));
        let enoent = Err(io::Error::from_raw_os_error(libc::ENOENT));
        assert!(p.note_ulp(&enoent, 1_000));
        assert!(!p.ulp_worth_trying(1_000));
        assert!(!p.ulp_worth_trying(1_000 + ULP_RETRY.as_millis() as u64 - 1));
        assert!(p.ulp_worth_trying(1_000 + ULP_RETRY.as_millis() as u64));
        // The module was loaded meanwhile.
        assert!(!p.note_ulp(&Ok(()), 40_000));
        assert!(p.ulp_worth_trying(40_000));
        // A pod that may not load it.
        assert!(p.note_ulp(&Err(io::Error::from_raw_os_error(libc::EPERM)), 50_000));
        assert!(!p.ulp_worth_trying(50_001));
        // This socket could not (the peer left): nothing learned about the kernel.
        let p = Probe::new();
        assert!(!p.note_ulp(&Err(io::Error::from_raw_os_error(libc::ENOTCONN)), 5));
        assert!(p.ulp_worth_trying(6));
        assert!(p.first_missing());
        assert!(!p.first_missing());
    }

    #[test]
    fn refused_pairs_are_remembered_passing_failures_are_not() {
        let p = Probe::new();
        let all = [
            Cipher::Aes128Gcm,
            Cipher::Aes256Gcm,
            Cipher::Chacha20Poly1305,
        ];
        let mut bits = 0u8;
        for v in [Version::Tls12, Version::Tls13] {
            for c in all {
                assert!(p.pair_usable(v, c));
                assert_eq!(bits & pair_bit(v, c), 0, "distinct bits");
                bits |= pair_bit(v, c);
            }
        }
        let enomem = io::Error::from_raw_os_error(libc::ENOMEM);
        assert!(!p.note_refused(Version::Tls12, Cipher::Chacha20Poly1305, &enomem));
        assert!(p.pair_usable(Version::Tls12, Cipher::Chacha20Poly1305));
        let einval = io::Error::from_raw_os_error(libc::EINVAL);
        assert!(p.note_refused(Version::Tls12, Cipher::Chacha20Poly1305, &einval));
        assert!(!p.pair_usable(Version::Tls12, Cipher::Chacha20Poly1305));
        assert!(p.pair_usable(Version::Tls13, Cipher::Chacha20Poly1305));
        assert!(p.pair_usable(Version::Tls12, Cipher::Aes128Gcm));
    }

    #[test]
    fn control_records_read_as_a_close() {
        assert!(is_control_record(&io::Error::from_raw_os_error(libc::EIO)));
        assert!(is_control_record(&io::Error::from_raw_os_error(
            libc::EKEYEXPIRED
        )));
        assert!(!is_control_record(&io::Error::from_raw_os_error(
            libc::EBADMSG
        )));
        assert!(!is_control_record(&io::ErrorKind::WouldBlock.into()));
    }

    /// Reads everything `io` gives with `cap`-byte reads, noting each read's size.
    async fn read_all<S: AsyncRead + Unpin>(io: &mut HandshakeIo<S>, cap: usize) -> Vec<usize> {
        use tokio::io::AsyncReadExt;
        let mut sizes = Vec::new();
        let mut buf = vec![0u8; cap];
        loop {
            let n = io.read(&mut buf).await.unwrap();
            if n == 0 {
                return sizes;
            }
            sizes.push(n);
        }
    }

    fn record(typ: u8, len: usize) -> Vec<u8> {
        let mut r = vec![typ, 3, 3];
        r.extend_from_slice(&(len as u16).to_be_bytes());
        r.extend(std::iter::repeat_n(0x5a, len));
        r
    }

    #[tokio::test]
    async fn handshake_reads_stop_at_each_record_end() {
        let mut wire = record(22, 300);
        wire.extend(record(20, 1));
        wire.extend(record(23, 0));
        wire.extend(record(23, 40));
        let mut io = HandshakeIo::new(&wire[..], true);
        assert!(io.at_record_boundary());
        assert_eq!(read_all(&mut io, 4096).await, [5, 300, 5, 1, 5, 5, 40]);
        assert!(io.at_record_boundary());
        // Small reads split headers and bodies, never across a record's end.
        let mut io = HandshakeIo::new(&wire[..12], true);
        assert_eq!(read_all(&mut io, 3).await, [3, 2, 3, 3, 1]);
        assert!(!io.at_record_boundary(), "in the middle of a body");
        let mut io = HandshakeIo::new(&wire[..308], true);
        assert_eq!(read_all(&mut io, 4096).await, [5, 300, 3]);
        assert!(!io.at_record_boundary(), "in the middle of a header");
        // After each record's end, one read answers Pending (and wakes the task).
        let mut io = HandshakeIo::new(&wire[..], true);
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut space = [0u8; 4096];
        let mut poll = |io: &mut HandshakeIo<&[u8]>| {
            let mut buf = ReadBuf::new(&mut space);
            match Pin::new(io).poll_read(&mut cx, &mut buf) {
                Poll::Ready(r) => {
                    r.unwrap();
                    Some(buf.filled().len())
                }
                Poll::Pending => None,
            }
        };
        assert_eq!(poll(&mut io), Some(5));
        assert_eq!(poll(&mut io), Some(300));
        assert_eq!(poll(&mut io), None);
        assert_eq!(poll(&mut io), Some(5));
        assert_eq!(poll(&mut io), Some(1));
        assert_eq!(poll(&mut io), None);
        assert_eq!(
            poll(&mut io),
            Some(5),
            "an empty record ends with its header"
        );
        assert_eq!(poll(&mut io), None);
        assert_eq!(poll(&mut io), Some(5));
        // Freed, it reads what the caller asks.
        let mut io = HandshakeIo::new(&wire[..], true);
        io.read_freely();
        assert_eq!(read_all(&mut io, 4096).await, [wire.len()]);
        assert!(!io.at_record_boundary());
    }

    // ---- A real handshake, and the kernel's record arithmetic modelled in userspace ----

    #[derive(Debug)]
    struct AnyCert(Arc<CryptoProvider>);

    impl ServerCertVerifier for AnyCert {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }

    fn server_config() -> Arc<ServerConfig> {
        let issued = crate::tls::test_certs::issue(&["localhost"], false);
        let chain = CertificateDer::pem_slice_iter(issued.cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(issued.key.as_bytes()).unwrap();
        let mut config =
            ServerConfig::builder_with_provider(Arc::new(super::super::policy::provider()))
                .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .unwrap();
        config.enable_secret_extraction = true;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }

    fn client_config(
        suite: CipherSuite,
        version: &'static SupportedProtocolVersion,
    ) -> ClientConfig {
        let mut provider = super::super::policy::provider();
        provider.cipher_suites.retain(|s| s.suite() == suite);
        assert_eq!(provider.cipher_suites.len(), 1, "{suite:?} offered");
        let provider = Arc::new(provider);
        let mut config = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[version])
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        config
    }

    /// The suites under test: every (version, cipher) pair rustls offers.
    fn pairs() -> Vec<(
        CipherSuite,
        &'static SupportedProtocolVersion,
        Version,
        Cipher,
    )> {
        use rustls::version::{TLS12, TLS13};
        vec![
            (
                CipherSuite::TLS13_AES_128_GCM_SHA256,
                &TLS13,
                Version::Tls13,
                Cipher::Aes128Gcm,
            ),
            (
                CipherSuite::TLS13_AES_256_GCM_SHA384,
                &TLS13,
                Version::Tls13,
                Cipher::Aes256Gcm,
            ),
            (
                CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
                &TLS13,
                Version::Tls13,
                Cipher::Chacha20Poly1305,
            ),
            (
                CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                &TLS12,
                Version::Tls12,
                Cipher::Aes128Gcm,
            ),
            (
                CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
                &TLS12,
                Version::Tls12,
                Cipher::Aes256Gcm,
            ),
            (
                CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
                &TLS12,
                Version::Tls12,
                Cipher::Chacha20Poly1305,
            ),
        ]
    }

    /// Runs a handshake in memory to its end (tickets included).
    fn handshake(client: &mut ClientConnection, server: &mut ServerConnection) {
        for _ in 0..20 {
            let mut wire = Vec::new();
            client.write_tls(&mut wire).unwrap();
            server.read_tls(&mut &wire[..]).unwrap();
            server.process_new_packets().unwrap();
            let mut back = Vec::new();
            server.write_tls(&mut back).unwrap();
            client.read_tls(&mut &back[..]).unwrap();
            client.process_new_packets().unwrap();
            if !client.is_handshaking()
                && !server.is_handshaking()
                && !client.wants_write()
                && !server.wants_write()
            {
                return;
            }
        }
        panic!("the handshake did not finish");
    }

    /// The kernel's nonce for the `k`-th record it protects with `info`: the salt and
    /// iv XORed with the sequence number (TLS 1.3, ChaCha20-Poly1305), or the salt and
    /// the iv counted up once per record (TLS 1.2 AES-GCM, whose record carries it).
    fn kernel_nonce(info: &CryptoInfo, version: Version, k: u64) -> ([u8; 12], u64) {
        let (salt_iv, rec_seq): ([u8; 12], [u8; 8]) = match info {
            CryptoInfo::Aes128Gcm(c) => (
                [&c.salt[..], &c.iv[..]].concat().try_into().unwrap(),
                c.rec_seq,
            ),
            CryptoInfo::Aes256Gcm(c) => (
                [&c.salt[..], &c.iv[..]].concat().try_into().unwrap(),
                c.rec_seq,
            ),
            CryptoInfo::Chacha20Poly1305(c) => (c.iv, c.rec_seq),
        };
        let seq = u64::from_be_bytes(rec_seq) + k;
        let mut nonce = salt_iv;
        let xor = version == Version::Tls13 || matches!(info, CryptoInfo::Chacha20Poly1305(_));
        if xor {
            for (n, s) in nonce[4..].iter_mut().zip(seq.to_be_bytes()) {
                *n ^= s;
            }
        } else {
            let explicit = u64::from_be_bytes(nonce[4..].try_into().unwrap()) + k;
            nonce[4..].copy_from_slice(&explicit.to_be_bytes());
        }
        (nonce, seq)
    }

    fn key_of(info: &CryptoInfo) -> [u8; 32] {
        match info {
            CryptoInfo::Aes256Gcm(c) => c.key,
            CryptoInfo::Chacha20Poly1305(c) => c.key,
            CryptoInfo::Aes128Gcm(_) => unreachable!("rustls builds no 16-byte AeadKey outside"),
        }
    }

    /// rustls' AEADs make their nonce as `iv XOR seq`: the `iv` that yields `nonce`.
    fn unxor_seq(nonce: [u8; 12], seq: u64) -> [u8; 12] {
        let mut base = nonce;
        for (b, s) in base[4..].iter_mut().zip(seq.to_be_bytes()) {
            *b ^= s;
        }
        base
    }

    /// Encrypts `data` as the kernel would for its `k`-th record under `info`, with
    /// rustls' own AEAD (whose nonce is `iv XOR seq`: it is given `nonce XOR seq`).
    fn kernel_seal(
        suite: SupportedCipherSuite,
        version: Version,
        info: &CryptoInfo,
        k: u64,
        data: &[u8],
    ) -> Vec<u8> {
        let (nonce, seq) = kernel_nonce(info, version, k);
        let base = unxor_seq(nonce, seq);
        let key = AeadKey::from(key_of(info));
        let mut enc = match suite {
            SupportedCipherSuite::Tls13(s) => s.aead_alg.encrypter(key, Iv::from(base)),
            SupportedCipherSuite::Tls12(s) => match info {
                CryptoInfo::Chacha20Poly1305(_) => s.aead_alg.encrypter(key, &base, &[]),
                _ => s.aead_alg.encrypter(key, &base[..4], &base[4..]),
            },
        };
        let msg = OutboundPlainMessage {
            typ: ContentType::ApplicationData,
            version: rustls::ProtocolVersion::TLSv1_2,
            payload: OutboundChunks::Single(data),
        };
        enc.encrypt(msg, seq).unwrap().encode()
    }

    /// Decrypts one record the peer sent as the kernel would with `info`, `k` records in.
    fn kernel_open(
        suite: SupportedCipherSuite,
        version: Version,
        info: &CryptoInfo,
        k: u64,
        record: &mut [u8],
    ) -> Vec<u8> {
        let (nonce, seq) = kernel_nonce(info, version, k);
        let base = unxor_seq(nonce, seq);
        let key = AeadKey::from(key_of(info));
        let mut dec = match suite {
            SupportedCipherSuite::Tls13(s) => s.aead_alg.decrypter(key, Iv::from(base)),
            SupportedCipherSuite::Tls12(s) => match info {
                CryptoInfo::Chacha20Poly1305(_) => s.aead_alg.decrypter(key, &base),
                // The explicit part comes from the record; only the salt is the key's.
                _ => s.aead_alg.decrypter(key, &base[..4]),
            },
        };
        let msg = InboundOpaqueMessage::new(
            ContentType::ApplicationData,
            rustls::ProtocolVersion::TLSv1_2,
            &mut record[5..],
        );
        let plain = dec.decrypt(msg, seq).unwrap();
        assert_eq!(plain.typ, ContentType::ApplicationData);
        plain.payload.to_vec()
    }

    #[test]
    fn extracted_secrets_drive_the_kernels_record_arithmetic_against_a_real_peer() {
        let config = server_config();
        for (suite, version, v, c) in pairs() {
            let mut server = ServerConnection::new(config.clone()).unwrap();
            let mut client = ClientConnection::new(
                Arc::new(client_config(suite, version)),
                ServerName::try_from("localhost").unwrap(),
            )
            .unwrap();
            handshake(&mut client, &mut server);
            assert_eq!(server.protocol_version().and_then(Version::of), Some(v));
            let negotiated = server.negotiated_cipher_suite().unwrap();
            assert_eq!(Cipher::of_suite(negotiated.suite()), Some(c), "{suite:?}");
            let secrets = server.dangerous_extract_secrets().unwrap();
            let tx =
                CryptoInfo::from_secrets(v, Direction::Send, secrets.tx.0, &secrets.tx.1).unwrap();
            let rx = CryptoInfo::from_secrets(v, Direction::Receive, secrets.rx.0, &secrets.rx.1)
                .unwrap();
            assert!(
                secrets.tx.0 >= 1,
                "{suite:?}: the server sent its Finished or tickets"
            );
            if c == Cipher::Aes128Gcm {
                // rustls gives no way to build a 16-byte key outside itself: the layout
                // test covers this cipher; here, only what the handshake produced.
                assert!(matches!(tx, CryptoInfo::Aes128Gcm(_)));
                assert!(matches!(rx, CryptoInfo::Aes128Gcm(_)));
                continue;
            }
            // No nonce rustls used under the sending key (iv XOR s, s < seq) comes back
            // in the kernel's first records.
            let (ConnectionTrafficSecrets::Aes256Gcm { iv, .. }
            | ConnectionTrafficSecrets::Chacha20Poly1305 { iv, .. }) = &secrets.tx.1
            else {
                unreachable!()
            };
            let used: Vec<[u8; 12]> = (0..secrets.tx.0)
                .map(|s| {
                    let mut n: [u8; 12] = iv.as_ref().try_into().unwrap();
                    for (b, x) in n[4..].iter_mut().zip(s.to_be_bytes()) {
                        *b ^= x;
                    }
                    n
                })
                .collect();
            for k in 0..1000 {
                assert!(
                    !used.contains(&kernel_nonce(&tx, v, k).0),
                    "{suite:?}: nonce reused"
                );
            }
            // The kernel sends two records; the rustls client reads them.
            for (k, text) in [&b"hello from the kernel"[..], b"and again"]
                .iter()
                .enumerate()
            {
                let record = kernel_seal(negotiated, v, &tx, k as u64, text);
                client.read_tls(&mut &record[..]).unwrap();
                client.process_new_packets().unwrap();
                let mut got = vec![0u8; text.len()];
                client.reader().read_exact(&mut got).unwrap();
                assert_eq!(&got[..], *text, "{suite:?}");
            }
            // The client sends two; the kernel's receive side opens them.
            for (k, text) in [&b"GET / HTTP/1.1\r\n"[..], b"Host: x\r\n\r\n"]
                .iter()
                .enumerate()
            {
                client.writer().write_all(text).unwrap();
                let mut wire = Vec::new();
                client.write_tls(&mut wire).unwrap();
                assert_eq!(&kernel_open(negotiated, v, &rx, k as u64, &mut wire), text);
            }
        }
    }

    #[test]
    fn the_crypto_info_wipes_its_key() {
        let mut info = CryptoInfo::new(
            Version::Tls13,
            Cipher::Chacha20Poly1305,
            Direction::Send,
            &KEY32,
            &IV,
            0,
        )
        .unwrap();
        assert_eq!(info.key_mut(), &KEY32);
        // What Drop does, observed before the value is gone.
        info.wipe_key();
        assert_eq!(info.key_mut(), &[0u8; 32]);
    }

    /// Whether this kernel has the tls ULP registered (loaded or built in).
    fn kernel_has_tls() -> bool {
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp")
            .is_ok_and(|l| l.split_whitespace().any(|u| u == "tls"))
    }

    /// A TLS 1.3 client whose first request leaves in the same write as its Finished,
    /// against a server that hands the session over: the request must come out whole
    /// on whichever side took it (the kernel's socket, or rustls on the same connection).
    #[tokio::test]
    async fn a_request_right_behind_the_finished_survives_the_handover() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        const REQUEST: &[u8] = b"GET /k HTTP/1.1\r\nHost: localhost\r\n\r\n";
        const RESPONSE: &[u8] = b"HTTP/1.1 204 No Content\r\n\r\n";
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = std::thread::spawn(move || {
            let config = client_config(
                CipherSuite::TLS13_AES_128_GCM_SHA256,
                &rustls::version::TLS13,
            );
            let mut conn =
                ClientConnection::new(Arc::new(config), ServerName::try_from("localhost").unwrap())
                    .unwrap();
            let mut sock = std::net::TcpStream::connect(addr).unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            while conn.is_handshaking() {
                while conn.wants_write() {
                    conn.write_tls(&mut sock).unwrap();
                }
                conn.read_tls(&mut sock).unwrap();
                conn.process_new_packets().unwrap();
            }
            // The Finished is queued, not written: the request joins it in one write.
            conn.writer().write_all(REQUEST).unwrap();
            let mut wire = Vec::new();
            while conn.wants_write() {
                conn.write_tls(&mut wire).unwrap();
            }
            sock.write_all(&wire).unwrap();
            let mut got = Vec::new();
            while got.len() < RESPONSE.len() {
                if conn.read_tls(&mut sock).unwrap() == 0 {
                    break;
                }
                conn.process_new_packets().unwrap();
                let mut chunk = [0u8; 256];
                match conn.reader().read(&mut chunk) {
                    Ok(n) => got.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            }
            got
        });
        let (tcp, _) = listener.accept().await.unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(server_config());
        let mut stream = acceptor.accept(HandshakeIo::new(tcp, true)).await.unwrap();
        // The request was in the socket with the Finished, yet neither rustls nor the
        // reader took any of it: what `into_kernel` needs to go on to the kernel.
        let (io, conn) = stream.get_mut();
        assert!(io.at_record_boundary());
        assert!(!conn.wants_write(), "tickets flushed");
        let state = conn.process_new_packets().unwrap();
        assert_eq!(
            state.plaintext_bytes_to_read(),
            0,
            "nothing read past the handshake"
        );
        let mut request = vec![0u8; REQUEST.len()];
        let mode = match into_kernel(stream) {
            Handover::Kernel(mut socket, session) => {
                assert_eq!(session.version, Version::Tls13);
                assert_eq!(session.cipher, Cipher::Aes128Gcm);
                assert!(
                    session.records_sent >= 1,
                    "the ticket went out under the key"
                );
                socket.read_exact(&mut request).await.unwrap();
                socket.write_all(RESPONSE).await.unwrap();
                "kernel"
            }
            Handover::Userspace(mut stream) => {
                stream.get_mut().0.read_freely();
                stream.read_exact(&mut request).await.unwrap();
                stream.write_all(RESPONSE).await.unwrap();
                stream.flush().await.unwrap();
                "userspace"
            }
            Handover::Failed(e) => panic!("kTLS set-up failed half way: {e}"),
        };
        assert_eq!(request, REQUEST, "{mode}");
        assert_eq!(client.join().unwrap(), RESPONSE, "{mode}");
        if !kernel_has_tls() {
            // No tls module here: the fallback ran, and the kernel is not asked again
            // for a while.
            assert_eq!(mode, "userspace");
            assert!(!worth_trying());
        }
    }
}
