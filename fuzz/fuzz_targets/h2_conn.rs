//! The HTTP/2 server connection on arbitrary bytes after the client preface, fed in
//! pieces of arbitrary size and answered like a driver would: never a panic; `recv`
//! never claims bytes it was not given; once it fails it keeps failing; what
//! `poll_transmit` writes is whole frames, each within the frame size limits, and no
//! batch outgrows the bound it was given by more than a frame; events name streams the
//! client could open (odd ids).
//!
//! Input: the first byte picks the piece size (1 + byte), the rest is the client's bytes.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use skiff_http::h2::conn::{Config, Connection, Event, PREFACE};
use skiff_http::h2::frame::{Head, HEADER_LEN, MAX_MAX_FRAME_SIZE};

const BATCH: usize = 32 * 1024;

fn check_output(out: &[u8]) {
    assert!(out.len() <= BATCH + HEADER_LEN + MAX_MAX_FRAME_SIZE as usize);
    let mut rest = out;
    while !rest.is_empty() {
        assert!(rest.len() >= HEADER_LEN, "a partial frame header");
        let head = Head::parse(rest[..HEADER_LEN].try_into().unwrap());
        assert!(head.len <= MAX_MAX_FRAME_SIZE);
        let end = HEADER_LEN + head.len as usize;
        assert!(end <= rest.len(), "a partial frame");
        rest = &rest[end..];
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&piece, input)) = data.split_first() else {
        return;
    };
    let piece = piece as usize + 1;
    let mut conn = Connection::new(Config {
        max_concurrent_streams: 8,
        reset_budget: 20,
        ..Config::default()
    });
    let mut buf = PREFACE.to_vec();
    let mut failed = None;
    let mut out = Vec::new();
    for chunk in input.chunks(piece) {
        buf.extend_from_slice(chunk);
        match conn.recv(&buf) {
            Ok(n) => {
                assert!(failed.is_none(), "recv succeeded after failing");
                assert!(n <= buf.len());
                buf.drain(..n);
            }
            Err(e) => {
                assert!(e.is_connection());
                if let Some(first) = failed {
                    assert_eq!(first, e, "a different error after failing");
                }
                failed = Some(e);
            }
        }
        while let Some(event) = conn.poll_event() {
            match event {
                Event::Request {
                    stream,
                    end_stream,
                    head,
                } => {
                    assert_eq!(stream % 2, 1);
                    // A head the connection passed is one `http` accepts too.
                    if let Err(why) = head.clone().into_parts() {
                        panic!("a checked head did not convert: {why}: {head:?}");
                    }
                    let headers = http::HeaderMap::new();
                    if conn
                        .send_response(stream, http::StatusCode::OK, &headers, false)
                        .is_ok()
                    {
                        let body = Bytes::from(vec![b'x'; 100 + stream as usize % 70_000]);
                        conn.send_data(stream, body, end_stream).unwrap();
                    }
                }
                Event::Data {
                    stream,
                    data,
                    end_stream,
                } => {
                    assert_eq!(stream % 2, 1);
                    conn.release_capacity(stream, data.len());
                    if end_stream {
                        let _ = conn.send_data(stream, Bytes::new(), true);
                    }
                }
                Event::Trailers { stream, .. } => {
                    let _ = conn.send_data(stream, Bytes::new(), true);
                }
                Event::Reset { stream, .. } => assert!(conn.buffered(stream).is_none()),
                _ => {}
            }
        }
        out.clear();
        conn.poll_transmit(&mut out, BATCH);
        check_output(&out);
        let _ = conn.send_blocked();
    }
});
