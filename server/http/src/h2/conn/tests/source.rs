//! Bodies read from a source as their frames are cut: flow control, failures, and when
//! the source is let go.

use super::*;
use crate::h2::source::DataSource;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Bytes `(offset % 251)` from `offset`, failing once `fail_at` is reached; says when it
/// is dropped.
struct Counting {
    offset: usize,
    fail_at: usize,
    dropped: Arc<AtomicBool>,
}

impl DataSource for Counting {
    fn read_into(&mut self, out: &mut Vec<u8>, n: usize) -> io::Result<()> {
        if self.offset + n > self.fail_at {
            // Part of the frame was written before the failure: the caller cuts it.
            out.extend_from_slice(b"garbage");
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        out.extend((self.offset..self.offset + n).map(|i| (i % 251) as u8));
        self.offset += n;
        Ok(())
    }
}

impl Drop for Counting {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

fn responding(p: &mut Peer, id: StreamId) {
    p.get(id).unwrap();
    p.events();
    p.conn
        .send_response(id, StatusCode::OK, &HeaderMap::new(), false)
        .unwrap();
}

fn source(fail_at: usize) -> (Box<Counting>, Arc<AtomicBool>) {
    let dropped = Arc::new(AtomicBool::new(false));
    let s = Box::new(Counting {
        offset: 0,
        fail_at,
        dropped: dropped.clone(),
    });
    (s, dropped)
}

fn payload(out: &[Out]) -> Vec<u8> {
    out.iter()
        .filter(|f| f.head.kind == frame::DATA)
        .flat_map(|f| f.payload.clone())
        .collect()
}

#[test]
fn a_source_follows_the_queue_within_the_windows() {
    let mut p = Peer::new(Config::default());
    responding(&mut p, 1);
    p.conn
        .send_data(1, Bytes::from_static(b"queued first"), false)
        .unwrap();
    let (src, dropped) = source(usize::MAX);
    p.conn.send_source(1, src, 100_000).unwrap();
    assert_eq!(p.conn.buffered(1), Some(100_012));
    assert_eq!(p.conn.queued_data(), 12, "a source holds no memory");
    assert_eq!(
        p.conn.send_data(1, Bytes::from_static(b"x"), true),
        Err(SendError::Ended)
    );
    // The initial windows let 65,535 bytes out, in frames of at most 16,384.
    let out = p.output();
    let sizes: Vec<u32> = out[1..].iter().map(|f| f.head.len).collect();
    assert_eq!(sizes, [16_384, 16_384, 16_384, 16_383]);
    let mut body = payload(&out);
    assert!(p.conn.send_blocked());
    assert_eq!(p.conn.buffered(1), Some(100_012 - 65_535));
    assert!(!dropped.load(Ordering::SeqCst));
    p.feed(&window_update(1, 1 << 20)).unwrap();
    p.feed(&window_update(0, 1 << 20)).unwrap();
    let out = p.output();
    assert_eq!(out.last().unwrap().head.flags, FLAG_END_STREAM);
    body.extend(payload(&out));
    let expected: Vec<u8> = b"queued first"
        .iter()
        .copied()
        .chain((0..100_000).map(|i| (i % 251) as u8))
        .collect();
    assert!(body == expected, "the body arrives whole and in order");
    assert!(
        dropped.load(Ordering::SeqCst),
        "let go once read to its end"
    );
    assert_eq!(p.conn.buffered(1), None);
}

#[test]
fn a_failing_source_resets_its_stream_and_nothing_of_the_failed_frame_leaves() {
    let mut p = Peer::new(Config::default());
    responding(&mut p, 1);
    responding(&mut p, 3);
    let (bad, bad_dropped) = source(20_000);
    p.conn.send_source(1, bad, 50_000).unwrap();
    p.conn
        .send_data(3, Bytes::from_static(b"the other stream"), true)
        .unwrap();
    let out = p.output();
    let frames: Vec<Frame<'_>> = out.iter().map(|f| f.frame()).collect();
    let headers = frames
        .iter()
        .filter(|f| matches!(f, Frame::Headers { .. }))
        .count();
    assert_eq!(headers, 2);
    // Stream 1's first frame (16,384 bytes) went; the second failed and was cut out.
    let ones: Vec<(usize, bool)> = frames
        .iter()
        .filter_map(|f| match f {
            Frame::Data {
                stream: 1,
                data,
                end_stream,
                ..
            } => Some((data.len(), *end_stream)),
            _ => None,
        })
        .collect();
    assert_eq!(ones, [(16_384, false)]);
    // The stream that did not fail is served whole.
    assert!(frames.iter().any(|f| matches!(
        f,
        Frame::Data {
            stream: 3,
            data: b"the other stream",
            end_stream: true,
            ..
        }
    )));
    // Stream 1 is reset, last.
    assert_eq!(
        frames.last(),
        Some(&Frame::RstStream {
            stream: 1,
            reason: Reason::INTERNAL_ERROR
        })
    );
    assert_eq!(frames.len(), 5, "{frames:?}");
    assert!(bad_dropped.load(Ordering::SeqCst));
    assert_eq!(p.conn.buffered(1), None);
    assert!(!p.conn.wants_write());
}

#[test]
fn a_peer_reset_lets_the_source_go() {
    let mut p = Peer::new(Config::default());
    responding(&mut p, 1);
    let (src, dropped) = source(usize::MAX);
    p.conn.send_source(1, src, 1 << 30).unwrap();
    p.output();
    let mut rst = Vec::new();
    frame::encode_rst_stream(&mut rst, 1, Reason::CANCEL);
    p.feed(&rst).unwrap();
    assert!(dropped.load(Ordering::SeqCst));
    assert_eq!(p.conn.buffered(1), None);
}

#[test]
fn an_empty_source_just_ends_the_stream() {
    let mut p = Peer::new(Config::default());
    responding(&mut p, 1);
    let (src, _) = source(0);
    p.conn.send_source(1, src, 0).unwrap();
    let out = p.output();
    assert_eq!(out.len(), 2);
    assert_eq!((out[1].head.len, out[1].head.flags), (0, FLAG_END_STREAM));
}

/// Appends one byte fewer than asked and says it succeeded.
struct Short;

impl DataSource for Short {
    fn read_into(&mut self, out: &mut Vec<u8>, n: usize) -> io::Result<()> {
        out.extend(std::iter::repeat_n(b'x', n - 1));
        Ok(())
    }
}

#[test]
fn a_source_that_appends_the_wrong_length_is_reset_not_framed() {
    let mut p = Peer::new(Config::default());
    responding(&mut p, 1);
    p.conn.send_source(1, Box::new(Short), 1000).unwrap();
    // The output still parses frame by frame: the short frame was cut out.
    let out = p.output();
    let frames: Vec<Frame<'_>> = out.iter().map(|f| f.frame()).collect();
    assert!(matches!(frames[0], Frame::Headers { .. }));
    assert_eq!(
        frames[1..],
        [Frame::RstStream {
            stream: 1,
            reason: Reason::INTERNAL_ERROR
        }]
    );
}
