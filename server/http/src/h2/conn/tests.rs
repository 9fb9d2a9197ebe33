//! The connection driven purely in memory: a test peer encodes frames with the same
//! codecs, feeds them, and parses what comes out.

mod h2spec;
mod late;
mod source;

use super::*;
use crate::h2::frame::{parse, Frame, FLAG_END_HEADERS, FLAG_END_STREAM};
use crate::h2::hpack::{Decoder, Encoder, Indexing};
use http::{HeaderValue, Method};

pub(super) struct Peer {
    pub conn: Connection,
    enc: Encoder,
    pub dec: Decoder,
}

/// One frame as written by the server.
#[derive(Debug)]
pub(super) struct Out {
    pub head: Head,
    pub payload: Vec<u8>,
}

impl Out {
    pub fn frame(&self) -> Frame<'_> {
        parse(&self.head, &self.payload).unwrap()
    }
}

pub(super) const GET: [(&str, &str); 4] = [
    (":method", "GET"),
    (":scheme", "https"),
    (":authority", "example.com"),
    (":path", "/index.html"),
];

impl Peer {
    /// A connection past the preface and both SETTINGS exchanges.
    pub fn new(config: Config) -> Peer {
        let mut p = Peer {
            conn: Connection::new(config),
            enc: Encoder::new(4096),
            dec: Decoder::new(4096),
        };
        let mut hello = PREFACE.to_vec();
        frame::encode_settings(&mut hello, &[]);
        p.feed(&hello).unwrap();
        let out = p.output();
        assert!(matches!(out[0].frame(), Frame::Settings { ack: false, .. }));
        assert!(matches!(
            out.last().unwrap().frame(),
            Frame::Settings { ack: true, .. }
        ));
        assert!(!p.conn.settings_acked());
        let mut ack = Vec::new();
        frame::encode_settings_ack(&mut ack);
        p.feed(&ack).unwrap();
        assert!(p.conn.settings_acked());
        assert!(matches!(p.conn.poll_event(), Some(Event::SettingsAcked)));
        p
    }

    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let n = self.conn.recv(bytes)?;
        assert_eq!(n, bytes.len(), "whole frames are consumed");
        Ok(())
    }

    /// Everything the server has to send, as frames.
    pub fn output(&mut self) -> Vec<Out> {
        let mut out = Vec::new();
        self.conn.poll_transmit(&mut out, 1 << 20);
        split(&out)
    }

    pub fn block(&mut self, fields: &[(&str, &str)]) -> Vec<u8> {
        let mut block = Vec::new();
        self.enc.begin_block(&mut block);
        for (n, v) in fields {
            self.enc.field(
                &mut block,
                n.as_bytes(),
                v.as_bytes(),
                Indexing::Incremental,
            );
        }
        block
    }

    pub fn headers(&mut self, id: StreamId, fields: &[(&str, &str)], end_stream: bool) -> Vec<u8> {
        let block = self.block(fields);
        let mut f = Vec::new();
        frame::encode_headers(&mut f, id, &block, end_stream, 16_384);
        f
    }

    pub fn get(&mut self, id: StreamId) -> Result<(), Error> {
        let f = self.headers(id, &GET, true);
        self.feed(&f)
    }

    /// The events so far.
    pub fn events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.conn.poll_event()).collect()
    }

    /// Decodes a HEADERS frame's block into (name, value) pairs.
    pub fn decode(&mut self, out: &Out) -> Vec<(String, String)> {
        let Frame::Headers { fragment, .. } = out.frame() else {
            panic!("not HEADERS: {out:?}");
        };
        let mut fields = Vec::new();
        self.dec
            .decode(fragment, usize::MAX, |n, v| {
                fields.push((
                    String::from_utf8_lossy(n).into(),
                    String::from_utf8_lossy(v).into(),
                ))
            })
            .unwrap();
        fields
    }
}

pub(super) fn split(mut b: &[u8]) -> Vec<Out> {
    let mut frames = Vec::new();
    while !b.is_empty() {
        let head = Head::parse(b[..HEADER_LEN].try_into().unwrap());
        let end = HEADER_LEN + head.len as usize;
        frames.push(Out {
            head,
            payload: b[HEADER_LEN..end].to_vec(),
        });
        b = &b[end..];
    }
    frames
}

pub(super) fn data(id: StreamId, body: &[u8], end_stream: bool) -> Vec<u8> {
    let mut f = Vec::new();
    frame::encode_data(&mut f, id, body, end_stream);
    f
}

pub(super) fn window_update(id: StreamId, inc: u32) -> Vec<u8> {
    let mut f = Vec::new();
    frame::encode_window_update(&mut f, id, inc);
    f
}

pub(super) fn settings(params: &[(u16, u32)]) -> Vec<u8> {
    let mut f = Vec::new();
    frame::encode_settings(&mut f, params);
    f
}

fn ok_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("server", HeaderValue::from_static("skiff"));
    h.insert("content-type", HeaderValue::from_static("text/plain"));
    h.insert("connection", HeaderValue::from_static("close"));
    h
}

#[test]
fn our_settings_are_byte_exact_and_come_first() {
    let mut conn = Connection::new(Config::default());
    let mut out = Vec::new();
    conn.poll_transmit(&mut out, 1 << 16);
    assert_eq!(
        out,
        [
            0, 0, 18, 4, 0, 0, 0, 0, 0, // SETTINGS, 3 parameters
            0, 3, 0, 0, 0, 100, // MAX_CONCURRENT_STREAMS 100
            0, 6, 0, 0, 0x40, 0, // MAX_HEADER_LIST_SIZE 16384
            0, 2, 0, 0, 0, 0, // ENABLE_PUSH 0
        ]
    );
    // A bigger connection window is opened at once.
    let mut conn = Connection::new(Config {
        connection_window_size: 1 << 20,
        ..Config::default()
    });
    out.clear();
    conn.poll_transmit(&mut out, 1 << 16);
    assert_eq!(out[27..], [0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0x0f, 0, 1]);
}

#[test]
fn a_request_and_its_response() {
    let mut p = Peer::new(Config::default());
    p.get(1).unwrap();
    let mut events = p.events();
    assert_eq!(events.len(), 1);
    let Event::Request {
        stream: 1,
        head,
        end_stream: true,
    } = events.remove(0)
    else {
        panic!("{events:?}");
    };
    assert_eq!(head.method, Method::GET);
    assert_eq!(head.target(), "/index.html");
    assert_eq!(head.authority(), Some("example.com"));
    assert_eq!(
        head.into_parts().unwrap().uri,
        "https://example.com/index.html"
    );
    p.conn
        .send_response(1, StatusCode::OK, &ok_headers(), false)
        .unwrap();
    p.conn
        .send_data(1, Bytes::from_static(b"hello"), true)
        .unwrap();
    assert_eq!(p.conn.active_streams(), 1);
    let out = p.output();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].head.flags, FLAG_END_HEADERS);
    assert_eq!(
        p.decode(&out[0]),
        [
            (":status", "200"),
            ("server", "skiff"),
            ("content-type", "text/plain")
        ]
        .map(|(n, v)| (n.to_string(), v.to_string()))
    );
    assert_eq!(
        out[1].frame(),
        Frame::Data {
            stream: 1,
            data: b"hello",
            end_stream: true,
            flow_len: 5
        }
    );
    // Both sides ended: the stream is gone and nothing is kept.
    assert_eq!(p.conn.active_streams(), 0);
    assert!(!p.conn.wants_write());
    assert_eq!(
        p.conn.send_data(1, Bytes::new(), true),
        Err(SendError::Closed)
    );
    // Idle, the connection holds no event queue (it held a few requests' worth).
    assert!(p.conn.poll_event().is_none());
    assert_eq!(p.conn.events.capacity(), 0);
    // The second response's block is a few bytes: the table did its work.
    p.get(3).unwrap();
    p.events();
    p.conn
        .send_response(3, StatusCode::OK, &ok_headers(), true)
        .unwrap();
    let out = p.output();
    assert_eq!(out[0].payload.len(), 3);
    assert_eq!(out[0].head.flags, FLAG_END_HEADERS | FLAG_END_STREAM);
}

#[test]
fn input_in_pieces_gives_the_same_events() {
    let mut p = Peer::new(Config::default());
    let mut bytes = p.headers(1, &GET, false);
    bytes.extend(data(1, b"body", true));
    let mut buf = Vec::new();
    for &b in &bytes {
        buf.push(b);
        let n = p.conn.recv(&buf).unwrap();
        buf.drain(..n);
    }
    assert!(buf.is_empty());
    let events = p.events();
    assert!(matches!(
        events[0],
        Event::Request {
            stream: 1,
            end_stream: false,
            ..
        }
    ));
    assert!(
        matches!(&events[1], Event::Data { stream: 1, data, end_stream: true } if data == "body")
    );
}

#[test]
fn the_preface_is_checked() {
    let mut conn = Connection::new(Config::default());
    assert_eq!(conn.recv(&PREFACE[..10]), Ok(0));
    let e = conn.recv(b"GET / HTTP/1.1\r\n\r\n").unwrap_err();
    assert_eq!(e.reason(), Reason::PROTOCOL_ERROR);
    let mut out = Vec::new();
    conn.poll_transmit(&mut out, 1 << 16);
    let frames = split(&out);
    assert!(matches!(
        frames.last().unwrap().frame(),
        Frame::GoAway {
            reason: Reason::PROTOCOL_ERROR,
            ..
        }
    ));
    assert!(conn.is_closed());
    // And the first frame must be SETTINGS.
    let mut conn = Connection::new(Config::default());
    let mut bytes = PREFACE.to_vec();
    frame::encode_ping(&mut bytes, false, [0; 8]);
    assert_eq!(
        conn.recv(&bytes).unwrap_err().reason(),
        Reason::PROTOCOL_ERROR
    );
}

#[test]
fn send_flow_control_waits_for_window_updates() {
    let mut p = Peer::new(Config::default());
    p.get(1).unwrap();
    p.events();
    p.conn
        .send_response(1, StatusCode::OK, &HeaderMap::new(), false)
        .unwrap();
    p.conn
        .send_data(1, Bytes::from(vec![7u8; 100_000]), true)
        .unwrap();
    let out = p.output();
    // HEADERS, then 65,535 bytes in frames of at most 16,384.
    let sizes: Vec<u32> = out[1..].iter().map(|f| f.head.len).collect();
    assert_eq!(sizes, [16_384, 16_384, 16_384, 16_383]);
    assert!(p.conn.send_blocked());
    assert_eq!(p.conn.buffered(1), Some(100_000 - 65_535));
    // The stream window alone is not enough: the connection's is empty too.
    p.feed(&window_update(1, 40_000)).unwrap();
    assert!(p.output().is_empty());
    assert!(p.conn.send_blocked());
    p.feed(&window_update(0, 10_000)).unwrap();
    let out = p.output();
    assert_eq!(out.iter().map(|f| f.head.len).sum::<u32>(), 10_000);
    p.feed(&window_update(0, 1 << 20)).unwrap();
    let out = p.output();
    assert_eq!(
        out.iter().map(|f| f.head.len).sum::<u32>(),
        100_000 - 75_535
    );
    assert_eq!(out.last().unwrap().head.flags, FLAG_END_STREAM);
    assert!(!p.conn.send_blocked());
    assert_eq!(p.conn.buffered(1), None);
}

#[test]
fn peer_initial_window_changes_move_open_streams() {
    // h2spec 6.9.2: a window of 1 lets one byte out; raising it lets the rest out.
    let mut p = Peer::new(Config::default());
    p.feed(&settings(&[(frame::setting::INITIAL_WINDOW_SIZE, 1)]))
        .unwrap();
    p.get(1).unwrap();
    p.events();
    p.conn
        .send_response(1, StatusCode::OK, &HeaderMap::new(), false)
        .unwrap();
    p.conn
        .send_data(1, Bytes::from_static(b"abc"), true)
        .unwrap();
    let out = p.output();
    assert!(matches!(out[0].frame(), Frame::Settings { ack: true, .. }));
    assert_eq!(
        out[2].frame(),
        Frame::Data {
            stream: 1,
            data: b"a",
            end_stream: false,
            flow_len: 1
        }
    );
    // Lowered to 0 the window goes negative by nothing; raised to 3 it holds 2 more.
    p.feed(&settings(&[(frame::setting::INITIAL_WINDOW_SIZE, 0)]))
        .unwrap();
    assert_eq!(p.output().len(), 1);
    // Of several in one frame the last counts (applied once: each walks every stream).
    use frame::setting::INITIAL_WINDOW_SIZE as IWS;
    p.feed(&settings(&[(IWS, 3), (IWS, 1 << 20), (IWS, 0)]))
        .unwrap();
    assert_eq!(p.output().len(), 1);
    p.feed(&settings(&[(IWS, 1 << 20), (IWS, 3)])).unwrap();
    let out = p.output();
    assert_eq!(
        out[1].frame(),
        Frame::Data {
            stream: 1,
            data: b"bc",
            end_stream: true,
            flow_len: 2
        }
    );
}

#[test]
fn receive_flow_control_returns_what_the_driver_consumed() {
    // A large connection window, so the stream's is the one that runs out.
    let mut p = Peer::new(Config {
        connection_window_size: 1 << 20,
        ..Config::default()
    });
    p.output();
    let f = p.headers(1, &GET[..], false);
    p.feed(&f).unwrap();
    p.feed(&data(1, &[0; 16_384], false)).unwrap();
    p.feed(&data(1, &[0; 16_384], false)).unwrap();
    p.events();
    // Not yet half a window: no WINDOW_UPDATE.
    p.conn.release_capacity(1, 16_384);
    assert!(p.output().is_empty());
    p.conn.release_capacity(1, 16_384);
    let out = p.output();
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0].frame(),
        Frame::WindowUpdate {
            stream: 1,
            increment: 32_768
        }
    );
    // Releasing more than was received does not inflate the window.
    p.conn.release_capacity(1, 1 << 30);
    assert!(p.output().is_empty());
    // 65,535 may be in flight; one byte more is the stream's FLOW_CONTROL_ERROR.
    for _ in 0..3 {
        p.feed(&data(1, &[0; 16_384], false)).unwrap();
    }
    p.feed(&data(1, &[0; 16_383], false)).unwrap();
    assert!(p.output().is_empty());
    p.feed(&data(1, &[0], false)).unwrap();
    let out = p.output();
    assert_eq!(
        out[0].frame(),
        Frame::RstStream {
            stream: 1,
            reason: Reason::FLOW_CONTROL_ERROR
        }
    );
}

#[test]
fn the_connection_window_is_enforced() {
    let mut p = Peer::new(Config::default());
    for id in [1, 3, 5, 7, 9] {
        let f = p.headers(id, &GET[..], false);
        p.feed(&f).unwrap();
    }
    for id in [1, 3, 5] {
        p.feed(&data(id, &[0; 16_384], false)).unwrap();
    }
    p.feed(&data(7, &[0; 16_383], false)).unwrap();
    let e = p.feed(&data(9, &[0], false)).unwrap_err();
    assert_eq!(
        e,
        Error::conn(
            Reason::FLOW_CONTROL_ERROR,
            "DATA beyond the connection window"
        )
    );
}

#[test]
fn padding_is_returned_at_once() {
    let mut p = Peer::new(Config::default());
    let f = p.headers(1, &GET[..], false);
    p.feed(&f).unwrap();
    // 1 + 200 pad bytes + 10 data, 170 times: 34,170 of padding, past half the window.
    let mut padded = vec![0, 0, 211, 0, 0x8, 0, 0, 0, 1, 200];
    padded.extend([1; 10]);
    padded.extend([0; 200]);
    for _ in 0..170 {
        p.feed(&padded).unwrap();
    }
    let out = p.output();
    assert!(!out.is_empty(), "padding released without the driver");
    assert!(matches!(
        out[0].frame(),
        Frame::WindowUpdate { stream: 0, .. }
    ));
}

#[test]
fn finished_response_stops_an_unfinished_request() {
    let mut p = Peer::new(Config::default());
    let f = p.headers(
        1,
        &[(":method", "POST"), (":scheme", "https"), (":path", "/")],
        false,
    );
    p.feed(&f).unwrap();
    p.events();
    p.conn
        .send_response(1, StatusCode::METHOD_NOT_ALLOWED, &HeaderMap::new(), true)
        .unwrap();
    let out = p.output();
    assert_eq!(
        out[1].frame(),
        Frame::RstStream {
            stream: 1,
            reason: Reason::NO_ERROR
        }
    );
    // Its DATA still in flight is ignored, not an error.
    p.feed(&data(1, b"late", true)).unwrap();
    assert!(p.output().is_empty());
}

#[test]
fn large_response_headers_use_continuation() {
    let mut p = Peer::new(Config::default());
    p.get(1).unwrap();
    p.events();
    let mut h = HeaderMap::new();
    let big: String = (0..60_000)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    h.insert("x-big", HeaderValue::from_str(&big).unwrap());
    p.conn.send_response(1, StatusCode::OK, &h, true).unwrap();
    let out = p.output();
    assert_eq!(
        out.iter().map(|f| f.head.kind).collect::<Vec<_>>(),
        [frame::HEADERS, frame::CONTINUATION, frame::CONTINUATION]
    );
    assert_eq!(out[0].head.flags, FLAG_END_STREAM);
    assert_eq!(out[2].head.flags, FLAG_END_HEADERS);
    let block: Vec<u8> = out.iter().flat_map(|f| f.payload.clone()).collect();
    let mut fields = Vec::new();
    p.dec
        .decode(&block, usize::MAX, |n, v| {
            fields.push((n.to_vec(), v.len()))
        })
        .unwrap();
    assert_eq!(fields[1], (b"x-big".to_vec(), 60_000));
}

#[test]
fn graceful_goaway_finishes_open_streams() {
    let mut p = Peer::new(Config::default());
    p.get(1).unwrap();
    p.events();
    p.conn.go_away(Reason::NO_ERROR);
    let out = p.output();
    assert_eq!(
        out[0].frame(),
        Frame::GoAway {
            last_stream: 1,
            reason: Reason::NO_ERROR,
            debug: b""
        }
    );
    // A stream started after it is ignored.
    p.get(3).unwrap();
    assert!(p.events().is_empty());
    assert!(!p.conn.is_closed());
    p.conn
        .send_response(1, StatusCode::OK, &HeaderMap::new(), true)
        .unwrap();
    assert!(p.conn.is_closed());
}

/// A connection error after a graceful GOAWAY names no stream above it (RFC 9113 §6.8),
/// though streams opened after it moved the highest id seen.
#[test]
fn a_goaway_for_an_error_after_a_graceful_one_does_not_raise_the_last_stream() {
    let mut p = Peer::new(Config::default());
    p.get(1).unwrap();
    p.events();
    p.conn.go_away(Reason::NO_ERROR);
    p.output();
    p.get(3).unwrap();
    // DATA on stream 0 is a connection error.
    assert!(p.feed(&[0, 0, 1, 0x0, 0, 0, 0, 0, 0, b'x']).is_err());
    let out = p.output();
    let Frame::GoAway {
        last_stream,
        reason,
        ..
    } = out.last().unwrap().frame()
    else {
        panic!("no GOAWAY: {out:?}");
    };
    assert_eq!((last_stream, reason), (1, Reason::PROTOCOL_ERROR));
}

/// The DATA frames' stream ids when streams 1 and 3 each answer 40,000 bytes, their
/// requests carrying these `priority` fields (none for "").
fn data_order(priorities: [&str; 2]) -> Vec<StreamId> {
    let mut p = Peer::new(Config::default());
    p.feed(&window_update(0, 1 << 20)).unwrap();
    for (id, priority) in [1, 3].into_iter().zip(priorities) {
        let mut fields = GET.to_vec();
        if !priority.is_empty() {
            fields.push(("priority", priority));
        }
        let f = p.headers(id, &fields, true);
        p.feed(&f).unwrap();
        p.conn
            .send_response(id, StatusCode::OK, &HeaderMap::new(), false)
            .unwrap();
        p.conn
            .send_data(id, Bytes::from(vec![0u8; 40_000]), true)
            .unwrap();
    }
    p.events();
    p.output()
        .iter()
        .filter(|f| f.head.kind == frame::DATA)
        .map(|f| f.head.stream)
        .collect()
}

#[test]
fn data_follows_rfc9218_priorities() {
    // Not incremental (the default, here explicit): one response after the other, in
    // stream order.
    assert_eq!(data_order(["u=3", "u=3"]), [1, 1, 1, 3, 3, 3]);
    assert_eq!(data_order(["i=?0", "u=3"]), [1, 1, 1, 3, 3, 3]);
    // No `priority` field: the responses take turns, frame by frame.
    let order = data_order(["", ""]);
    assert!(
        order.len() == 6 && order.windows(2).all(|w| w[0] != w[1]),
        "{order:?}"
    );
    // ... after the non-incremental ones of their urgency.
    assert_eq!(data_order(["", "u=3"]), [3, 3, 3, 1, 1, 1]);
    // Incremental responses share the connection frame by frame.
    let order = data_order(["i", "u=3, i"]);
    assert!(
        order.len() == 6 && order[..4].windows(2).all(|w| w[0] != w[1]),
        "{order:?}"
    );
    // A lower urgency goes first, whatever the stream order.
    assert_eq!(data_order(["u=5", "u=1"]), [3, 3, 3, 1, 1, 1]);
    // Non-incremental before incremental within one urgency.
    assert_eq!(data_order(["i", "u=3"]), [3, 3, 3, 1, 1, 1]);
}

#[test]
fn a_batch_is_bounded_by_max() {
    // A small `max` bounds one batch.
    let mut p = Peer::new(Config::default());
    p.get(1).unwrap();
    p.conn
        .send_response(1, StatusCode::OK, &HeaderMap::new(), false)
        .unwrap();
    p.conn
        .send_data(1, Bytes::from(vec![0u8; 40_000]), true)
        .unwrap();
    let mut out = Vec::new();
    p.conn.poll_transmit(&mut out, 8192);
    assert!(out.len() <= 8192 && out.len() > 4096, "{}", out.len());
}
