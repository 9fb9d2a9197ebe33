//! Randomized robustness tests for the wire decoders: random bytes and mutated valid
//! frames must give a clean `Ok` or `Err`, never a panic or an endless loop. A fixed-seed
//! xorshift generator keeps every run the same (and any failure reproducible).

use crate::{fastcgi, response_head as response};
use bytes::BytesMut;

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn valid_fastcgi_response() -> Vec<u8> {
    let mut v = Vec::new();
    for (kind, body) in [
        (
            6u8,
            &b"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nhello"[..],
        ),
        (7, b"warn"),
        (6, b""),
        (3, &[0u8; 8][..]),
    ] {
        let pad = (8 - body.len() % 8) % 8;
        v.extend_from_slice(&[1, kind, 0, 1]);
        v.extend_from_slice(&(body.len() as u16).to_be_bytes());
        v.extend_from_slice(&[pad as u8, 0]);
        v.extend_from_slice(body);
        v.extend(std::iter::repeat_n(0, pad));
    }
    v
}

/// Feeds `input` to a FastCGI decoder in random slices; returns how many events came out.
fn drive_fastcgi(input: &[u8], rng: &mut XorShift) -> usize {
    let mut dec = fastcgi::Decoder::new(1);
    let mut buf = BytesMut::new();
    let mut events = 0;
    let mut rest = input;
    while !rest.is_empty() {
        let take = (rng.next() as usize % 64 + 1).min(rest.len());
        buf.extend_from_slice(&rest[..take]);
        rest = &rest[take..];
        loop {
            match dec.decode(&mut buf) {
                Ok(Some(_)) => events += 1,
                Ok(None) => break,
                Err(_) => return events,
            }
        }
    }
    events
}

#[test]
fn fastcgi_decoder_survives_random_and_mutated_input() {
    let mut rng = XorShift(0x5eed_1234_abcd_9876);
    let valid = valid_fastcgi_response();
    assert_eq!(
        drive_fastcgi(&valid, &mut rng),
        3,
        "the unmutated frames decode"
    );
    for _ in 0..20_000 {
        let n = rng.next() as usize % 512;
        let junk = rng.bytes(n);
        drive_fastcgi(&junk, &mut rng);
        let mut mutated = valid.clone();
        for _ in 0..(rng.next() % 4 + 1) {
            let i = rng.next() as usize % mutated.len();
            mutated[i] = rng.next() as u8;
        }
        drive_fastcgi(&mutated, &mut rng);
    }
}

#[test]
fn response_head_parser_survives_random_and_mutated_input() {
    let mut rng = XorShift(0x0123_4567_89ab_cdef);
    let valid = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-A: b\r\n\r\nbody".to_vec();
    let cgi = b"Status: 404 Not Found\r\nContent-Type: text/html\r\n\r\n".to_vec();
    for _ in 0..20_000 {
        let n = rng.next() as usize % 300;
        let _ = response::parse_head(&rng.bytes(n));
        for base in [&valid, &cgi] {
            let mut m = base.clone();
            let i = rng.next() as usize % m.len();
            m[i] = rng.next() as u8;
            let cut = rng.next() as usize % (m.len() + 1);
            let _ = response::parse_head(&m[..cut]);
        }
    }
}
