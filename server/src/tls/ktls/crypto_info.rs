//! The kernel's side of a kTLS session: the `tls12_crypto_info_*` structs built from
//! rustls's secrets, and the `setsockopt(2)` calls that hand them over.
// setsockopt(2) with a `tls12_crypto_info_*` struct (and TCP_ULP with a string) has no
// safe wrapper: rustix offers neither. The calls pass a pointer to a live, fully
// initialized value and its exact size; the key bytes are wiped with volatile writes.
#![allow(unsafe_code)]

use rustls::{CipherSuite, ConnectionTrafficSecrets, ProtocolVersion};
use std::io;
use std::os::fd::{AsRawFd, RawFd};

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

    pub(super) fn wire(self) -> u16 {
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

    pub(super) fn key_len(self) -> usize {
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
pub(super) const IV_LEN: usize = 12;
pub(super) const GCM_SALT_LEN: usize = 4;

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
    pub(super) fn raw(&self) -> (*const libc::c_void, libc::socklen_t) {
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

    pub(super) fn key_mut(&mut self) -> &mut [u8] {
        match self {
            CryptoInfo::Aes128Gcm(c) => &mut c.key,
            CryptoInfo::Aes256Gcm(c) => &mut c.key,
            CryptoInfo::Chacha20Poly1305(c) => &mut c.key,
        }
    }

    pub(super) fn wipe_key(&mut self) {
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
