//! Unit tests of the kTLS structs, nonces, record budget and probe.
#![allow(unsafe_code)]

use super::*;
use rustls::crypto::cipher::{AeadKey, Iv};
use rustls::ConnectionTrafficSecrets;

pub(super) const KEY32: [u8; 32] = [
    0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf,
    0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xbb, 0xbc, 0xbd, 0xbe, 0xbf,
];
pub(super) const IV: [u8; 12] = [
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
        let info = CryptoInfo::new(version, Cipher::Aes128Gcm, direction, key16, &IV, SEQ).unwrap();
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
    let info = CryptoInfo::from_secrets(Version::Tls13, Direction::Receive, 7, &secrets).unwrap();
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
pub(super) async fn read_all<S: AsyncRead + Unpin>(
    io: &mut HandshakeIo<S>,
    cap: usize,
) -> Vec<usize> {
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
