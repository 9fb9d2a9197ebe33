//! The error cases h2spec's http2 suite sends (section numbers in the names), and the
//! hostile-peer limits.

use super::*;

/// The connection error the input causes, and its GOAWAY.
fn conn_error(p: &mut Peer, bytes: &[u8]) -> Reason {
    let e = p.feed(bytes).expect_err("a connection error");
    assert!(e.is_connection());
    let out = p.output();
    let Frame::GoAway { reason, .. } = out.last().expect("GOAWAY").frame() else {
        panic!("no GOAWAY: {out:?}");
    };
    assert_eq!(reason, e.reason());
    assert!(p.conn.is_closed());
    reason
}

/// The stream error the input causes: its RST_STREAM.
fn stream_error(p: &mut Peer, bytes: &[u8]) -> (StreamId, Reason) {
    p.feed(bytes).expect("only a stream error");
    let out = p.output();
    let Frame::RstStream { stream, reason } = out.last().expect("RST_STREAM").frame() else {
        panic!("no RST_STREAM: {out:?}");
    };
    (stream, reason)
}

fn peer() -> Peer {
    Peer::new(Config::default())
}

fn raw(kind: u8, flags: u8, stream: StreamId, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    Head {
        len: payload.len() as u32,
        kind,
        flags,
        stream,
    }
    .encode(&mut f);
    f.extend_from_slice(payload);
    f
}

#[test]
fn s4_2_frame_larger_than_max_frame_size() {
    let mut p = peer();
    let mut f = p.headers(1, &GET, false);
    p.feed(&f).unwrap();
    f = data(1, &[0; 16_385], false);
    // Refused on its header alone.
    assert_eq!(
        conn_error(&mut p, &f[..HEADER_LEN]),
        Reason::FRAME_SIZE_ERROR
    );
}

#[test]
fn s4_3_invalid_header_block_is_a_compression_error() {
    let mut p = peer();
    assert_eq!(
        conn_error(&mut p, &raw(frame::HEADERS, 5, 1, &[0x80])),
        Reason::COMPRESSION_ERROR
    );
}

#[test]
fn s5_1_idle_stream_frames() {
    for f in [
        data(1, b"x", false),
        raw(frame::RST_STREAM, 0, 1, &[0, 0, 0, 8]),
        window_update(1, 1),
        raw(frame::CONTINUATION, 4, 1, &[0x82]),
    ] {
        assert_eq!(conn_error(&mut peer(), &f), Reason::PROTOCOL_ERROR);
    }
}

#[test]
fn s5_1_half_closed_remote() {
    let mut p = peer();
    p.get(1).unwrap();
    assert_eq!(
        stream_error(&mut p, &data(1, b"x", false)),
        (1, Reason::STREAM_CLOSED)
    );
    let mut p = peer();
    p.get(1).unwrap();
    let f = p.headers(1, &[("x", "y")], true);
    assert_eq!(stream_error(&mut p, &f), (1, Reason::STREAM_CLOSED));
}

#[test]
fn s5_1_closed() {
    // After the peer's RST_STREAM: DATA is a stream error, HEADERS a connection error.
    let mut p = peer();
    let f = p.headers(1, &GET, false);
    p.feed(&f).unwrap();
    p.feed(&raw(frame::RST_STREAM, 0, 1, &[0, 0, 0, 8]))
        .unwrap();
    assert_eq!(
        stream_error(&mut p, &data(1, b"x", false)),
        (1, Reason::STREAM_CLOSED)
    );
    let f = p.headers(1, &GET, true);
    assert_eq!(conn_error(&mut p, &f), Reason::STREAM_CLOSED);
    // After both END_STREAMs.
    let mut p = peer();
    p.get(1).unwrap();
    p.conn
        .send_response(1, StatusCode::OK, &HeaderMap::new(), true)
        .unwrap();
    p.output();
    let f = p.headers(1, &GET, true);
    assert_eq!(conn_error(&mut p, &f), Reason::STREAM_CLOSED);
}

#[test]
fn s5_1_1_stream_identifiers() {
    let mut p = peer();
    let f = p.headers(2, &GET, true);
    assert_eq!(conn_error(&mut p, &f), Reason::PROTOCOL_ERROR);
    let mut p = peer();
    p.get(5).unwrap();
    let f = p.headers(3, &GET, true);
    assert_eq!(conn_error(&mut p, &f), Reason::PROTOCOL_ERROR);
}

#[test]
fn s5_1_2_concurrent_streams_are_refused() {
    let mut p = Peer::new(Config {
        max_concurrent_streams: 1,
        ..Config::default()
    });
    p.get(1).unwrap();
    p.output();
    let f = p.headers(3, &GET, true);
    assert_eq!(stream_error(&mut p, &f), (3, Reason::REFUSED_STREAM));
    assert_eq!(p.events().len(), 1);
    // Stream 1 finishing makes room.
    p.conn
        .send_response(1, StatusCode::OK, &HeaderMap::new(), true)
        .unwrap();
    p.get(5).unwrap();
    assert!(matches!(p.events()[..], [Event::Request { stream: 5, .. }]));
}

#[test]
fn s5_3_1_self_dependency() {
    let mut p = peer();
    let block = p.block(&GET);
    let mut payload = vec![0, 0, 0, 1, 16];
    payload.extend(block);
    let f = raw(frame::HEADERS, frame::FLAG_PRIORITY | 5, 1, &payload);
    assert_eq!(stream_error(&mut p, &f), (1, Reason::PROTOCOL_ERROR));
    assert!(p.events().is_empty());
    let f = raw(frame::PRIORITY, 0, 1, &[0, 0, 0, 1, 16]);
    assert_eq!(stream_error(&mut p, &f), (1, Reason::PROTOCOL_ERROR));
}

#[test]
fn s5_5_unknown_frames() {
    let mut p = peer();
    p.feed(&raw(0xff, 0xff, 0, b"whatever")).unwrap();
    assert!(p.output().is_empty());
    // Not inside a header block.
    let block = p.block(&GET);
    let mut f = raw(frame::HEADERS, 1, 1, &block);
    f.extend(raw(0xff, 0, 1, b""));
    assert_eq!(conn_error(&mut p, &f), Reason::PROTOCOL_ERROR);
}

#[test]
fn s6_1_and_6_2_padding_and_stream_zero() {
    let mut p = peer();
    let f = p.headers(1, &GET, false);
    p.feed(&f).unwrap();
    assert_eq!(
        conn_error(&mut p, &raw(frame::DATA, 8, 1, &[5, 0, 0])),
        Reason::PROTOCOL_ERROR
    );
    assert_eq!(
        conn_error(&mut peer(), &data(0, b"x", false)),
        Reason::PROTOCOL_ERROR
    );
    assert_eq!(
        conn_error(&mut peer(), &raw(frame::HEADERS, 4, 0, &[0x82])),
        Reason::PROTOCOL_ERROR
    );
    assert_eq!(
        conn_error(&mut peer(), &raw(frame::HEADERS, 0xc, 1, &[9, 0x82])),
        Reason::PROTOCOL_ERROR
    );
}

#[test]
fn s6_4_to_6_9_fixed_sizes_and_stream_zero() {
    let cases = [
        (
            raw(frame::RST_STREAM, 0, 0, &[0, 0, 0, 8]),
            Reason::PROTOCOL_ERROR,
        ),
        (
            raw(frame::SETTINGS, 1, 0, &[0, 1, 0, 0, 0, 0]),
            Reason::FRAME_SIZE_ERROR,
        ),
        (raw(frame::SETTINGS, 0, 1, &[]), Reason::PROTOCOL_ERROR),
        (
            raw(frame::SETTINGS, 0, 0, &[0, 1, 0]),
            Reason::FRAME_SIZE_ERROR,
        ),
        (raw(frame::PING, 0, 1, &[0; 8]), Reason::PROTOCOL_ERROR),
        (raw(frame::PING, 0, 0, &[0; 6]), Reason::FRAME_SIZE_ERROR),
        (raw(frame::GOAWAY, 0, 1, &[0; 8]), Reason::PROTOCOL_ERROR),
        (
            raw(frame::WINDOW_UPDATE, 0, 0, &[0; 4]),
            Reason::PROTOCOL_ERROR,
        ),
        (
            raw(frame::WINDOW_UPDATE, 0, 0, &[0; 3]),
            Reason::FRAME_SIZE_ERROR,
        ),
        (
            raw(frame::PUSH_PROMISE, 4, 1, &[0, 0, 0, 2, 0x82]),
            Reason::PROTOCOL_ERROR,
        ),
    ];
    for (f, reason) in cases {
        assert_eq!(conn_error(&mut peer(), &f), reason, "{f:?}");
    }
    // On an open stream: PRIORITY's length and WINDOW_UPDATE 0 are stream errors.
    let mut p = peer();
    let f = p.headers(1, &GET, false);
    p.feed(&f).unwrap();
    assert_eq!(
        stream_error(&mut p, &raw(frame::PRIORITY, 0, 1, &[0; 4])),
        (1, Reason::FRAME_SIZE_ERROR)
    );
    let mut p = peer();
    let f = p.headers(1, &GET, false);
    p.feed(&f).unwrap();
    assert_eq!(
        stream_error(&mut p, &raw(frame::WINDOW_UPDATE, 0, 1, &[0; 4])),
        (1, Reason::PROTOCOL_ERROR)
    );
}

#[test]
fn s6_5_settings_values() {
    use frame::setting::*;
    let mut p = peer();
    p.feed(&settings(&[(0xff, 7), (MAX_FRAME_SIZE, 1 << 20)]))
        .unwrap();
    assert!(matches!(
        p.output()[0].frame(),
        Frame::Settings { ack: true, .. }
    ));
    for (param, reason) in [
        ((ENABLE_PUSH, 2), Reason::PROTOCOL_ERROR),
        ((INITIAL_WINDOW_SIZE, 1 << 31), Reason::FLOW_CONTROL_ERROR),
        ((MAX_FRAME_SIZE, 16_383), Reason::PROTOCOL_ERROR),
        ((MAX_FRAME_SIZE, 1 << 24), Reason::PROTOCOL_ERROR),
    ] {
        assert_eq!(
            conn_error(&mut peer(), &settings(&[param])),
            reason,
            "{param:?}"
        );
    }
}

#[test]
fn s6_7_ping() {
    let mut p = peer();
    let mut f = Vec::new();
    frame::encode_ping(&mut f, false, *b"h2spec!!");
    p.feed(&f).unwrap();
    assert_eq!(
        p.output()[0].frame(),
        Frame::Ping {
            ack: true,
            payload: *b"h2spec!!"
        }
    );
    f.clear();
    frame::encode_ping(&mut f, true, *b"unasked!");
    p.feed(&f).unwrap();
    assert!(p.output().is_empty() && p.events().is_empty());
}

#[test]
fn s6_9_window_overflow() {
    let mut p = peer();
    p.feed(&window_update(0, frame::MAX_WINDOW - 65_535))
        .unwrap();
    assert_eq!(
        conn_error(&mut p, &window_update(0, 1)),
        Reason::FLOW_CONTROL_ERROR
    );
    let mut p = peer();
    let f = p.headers(1, &GET, false);
    p.feed(&f).unwrap();
    p.events();
    assert_eq!(
        stream_error(&mut p, &window_update(1, frame::MAX_WINDOW)),
        (1, Reason::FLOW_CONTROL_ERROR)
    );
    assert!(matches!(
        p.events()[..],
        [Event::Reset {
            stream: 1,
            by_peer: false,
            ..
        }]
    ));
    // A SETTINGS change that overflows an open stream's window: connection error.
    let mut p = peer();
    let f = p.headers(1, &GET, false);
    p.feed(&f).unwrap();
    p.feed(&window_update(1, frame::MAX_WINDOW - 65_535))
        .unwrap();
    let f = settings(&[(frame::setting::INITIAL_WINDOW_SIZE, 65_536)]);
    assert_eq!(conn_error(&mut p, &f), Reason::FLOW_CONTROL_ERROR);
}

#[test]
fn s6_10_continuation_sequencing() {
    let mut p = peer();
    let block = p.block(&GET);
    let (a, b) = block.split_at(3);
    let mut f = raw(frame::HEADERS, 1, 1, a);
    f.extend(raw(frame::CONTINUATION, 0, 1, &b[..1]));
    f.extend(raw(frame::CONTINUATION, 0, 1, &[]));
    f.extend(raw(frame::CONTINUATION, 4, 1, &b[1..]));
    p.feed(&f).unwrap();
    assert!(matches!(
        p.events()[..],
        [Event::Request {
            stream: 1,
            end_stream: true,
            ..
        }]
    ));
    for second in [
        raw(frame::PRIORITY, 0, 1, &[0, 0, 0, 0, 1]),
        raw(frame::CONTINUATION, 4, 3, b),
        data(1, b"x", false),
        raw(frame::HEADERS, 5, 3, b),
    ] {
        let mut p = peer();
        let block = p.block(&GET);
        let mut f = raw(frame::HEADERS, 1, 1, &block[..3]);
        f.extend(second);
        assert_eq!(conn_error(&mut p, &f), Reason::PROTOCOL_ERROR);
    }
    // CONTINUATION after END_HEADERS.
    let mut p = peer();
    let mut f = p.headers(1, &GET, false);
    f.extend(raw(frame::CONTINUATION, 4, 1, &[0x82]));
    assert_eq!(conn_error(&mut p, &f), Reason::PROTOCOL_ERROR);
}

#[test]
fn s8_1_malformed_requests_are_stream_errors() {
    let cases: [&[(&str, &str)]; 6] = [
        &[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/"),
            ("UPPER", "x"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/"),
            (":status", "200"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "https"),
            ("x", "y"),
            (":path", "/"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/"),
            ("connection", "close"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/"),
            ("te", "gzip"),
        ],
        &[(":method", "GET"), (":scheme", "https")],
    ];
    for fields in cases {
        let mut p = peer();
        let f = p.headers(1, fields, true);
        assert_eq!(
            stream_error(&mut p, &f),
            (1, Reason::PROTOCOL_ERROR),
            "{fields:?}"
        );
        assert!(p.events().is_empty());
        // The connection carries on, HPACK in step.
        p.get(3).unwrap();
        assert_eq!(p.events().len(), 1);
    }
}

#[test]
fn s8_1_trailers_and_content_length() {
    // Trailers without END_STREAM.
    let mut p = peer();
    let f = p.headers(1, &GET, false);
    p.feed(&f).unwrap();
    let f = p.headers(1, &[("x-trailer", "1")], false);
    assert_eq!(stream_error(&mut p, &f), (1, Reason::PROTOCOL_ERROR));
    // content-length against DATA, in one frame or several.
    let mut fields = GET.to_vec();
    fields.push(("content-length", "4"));
    for frames in [&[&b"abc"[..]][..], &[b"ab", b"cde"]] {
        let mut p = peer();
        let f = p.headers(1, &fields, false);
        p.feed(&f).unwrap();
        let mut bytes = Vec::new();
        for (i, body) in frames.iter().enumerate() {
            bytes.extend(data(1, body, i + 1 == frames.len()));
        }
        assert_eq!(stream_error(&mut p, &bytes), (1, Reason::PROTOCOL_ERROR));
    }
    // A correct body with trailers.
    let mut p = peer();
    let f = p.headers(1, &fields, false);
    p.feed(&f).unwrap();
    p.feed(&data(1, b"abcd", false)).unwrap();
    let f = p.headers(1, &[("x-sum", "1")], true);
    p.feed(&f).unwrap();
    assert!(matches!(
        p.events()[..],
        [
            Event::Request { .. },
            Event::Data { .. },
            Event::Trailers { .. }
        ]
    ));
}

#[test]
fn a_content_length_violation_gives_the_connection_window_back() {
    // The refused DATA is never consumed: charged to the connection for good, five such
    // frames would close a 64 KiB connection window on a peer that did nothing else.
    let mut fields = GET.to_vec();
    fields.push(("content-length", "1"));
    let mut p = peer();
    for k in 0..5 {
        let id = 1 + 2 * k;
        let f = p.headers(id, &fields, false);
        p.feed(&f).unwrap();
        assert_eq!(
            stream_error(&mut p, &data(id, &[0; 16_000], false)),
            (id, Reason::PROTOCOL_ERROR)
        );
    }
}

#[test]
fn s5_1_frames_on_an_even_stream_we_never_opened_are_protocol_errors() {
    // The server pushes nothing, so stream 2 is idle even below the last stream opened.
    for frame in [window_update(2, 1), raw(0x3, 0, 2, &8u32.to_be_bytes())] {
        let mut p = peer();
        p.get(3).unwrap();
        assert_eq!(conn_error(&mut p, &frame), Reason::PROTOCOL_ERROR);
    }
}

#[test]
fn a_header_block_within_a_large_header_list_limit_is_taken() {
    // With a 64 KiB header list allowed, a 40 KiB field that does not compress fits it:
    // the block cap (32 KiB by default) grows with the limit instead of ending the
    // connection with ENHANCE_YOUR_CALM.
    let mut p = Peer::new(Config {
        max_header_list_size: 64 << 10,
        ..Config::default()
    });
    let big = "^".repeat(40 << 10);
    let mut fields = GET.to_vec();
    fields.push(("x-big", &big));
    let f = p.headers(1, &fields, true);
    assert!(f.len() > 40 << 10, "the block compressed to {}", f.len());
    p.feed(&f).unwrap();
    assert!(matches!(p.events()[..], [Event::Request { .. }]));
}

#[test]
fn oversized_request_head_gets_431() {
    let mut p = Peer::new(Config {
        max_header_list_size: 200,
        ..Config::default()
    });
    let big = "v".repeat(300);
    let mut fields = GET.to_vec();
    fields.push(("x-big", &big));
    let f = p.headers(1, &fields, true);
    p.feed(&f).unwrap();
    assert!(p.events().is_empty());
    let out = p.output();
    assert_eq!(
        p.decode(&out[0]),
        [(":status".to_string(), "431".to_string())]
    );
    assert_eq!(out[0].head.flags, FLAG_END_HEADERS | FLAG_END_STREAM);
    // The table kept up: the next small request is decoded.
    p.get(3).unwrap();
    assert_eq!(p.events().len(), 1);
}

#[test]
fn continuation_flood_is_cut_off() {
    let mut p = peer();
    let mut f = raw(frame::HEADERS, 0, 1, &[0x82]);
    for _ in 0..100 {
        f.extend(raw(frame::CONTINUATION, 0, 1, &[]));
    }
    assert_eq!(conn_error(&mut p, &f), Reason::ENHANCE_YOUR_CALM);
    // And a block past `max_header_block` without END_HEADERS.
    let mut p = peer();
    let mut f = raw(frame::HEADERS, 0, 1, &[0x82]);
    for _ in 0..3 {
        f.extend(raw(frame::CONTINUATION, 0, 1, &[0x82; 16_000]));
    }
    assert_eq!(conn_error(&mut p, &f), Reason::ENHANCE_YOUR_CALM);
}

#[test]
fn rapid_reset_is_cut_off_but_completed_streams_earn_credit() {
    let mut p = Peer::new(Config {
        reset_budget: 10,
        ..Config::default()
    });
    let rst = |id| raw(frame::RST_STREAM, 0, id, &[0, 0, 0, 8]);
    let mut id = 1;
    for _ in 0..10 {
        let f = p.headers(id, &GET, false);
        p.feed(&f).unwrap();
        p.feed(&rst(id)).unwrap();
        id += 2;
    }
    // Completing streams gives credit back.
    for _ in 0..5 {
        p.get(id).unwrap();
        p.conn
            .send_response(id, StatusCode::OK, &HeaderMap::new(), true)
            .unwrap();
        id += 2;
    }
    for _ in 0..5 {
        let f = p.headers(id, &GET, false);
        p.feed(&f).unwrap();
        p.feed(&rst(id)).unwrap();
        id += 2;
    }
    let f = p.headers(id, &GET, false);
    p.feed(&f).unwrap();
    assert_eq!(conn_error(&mut p, &rst(id)), Reason::ENHANCE_YOUR_CALM);
}

/// A peer's own cancels, each paid for by a completed stream, never end the connection
/// (a browser or a proxy in front may cancel thousands over its life); streams reset for
/// the peer's errors have a lifetime cap that completions do not refill (MadeYouReset).
#[test]
fn cancels_paid_for_by_completions_go_on_but_error_resets_hit_the_lifetime_cap() {
    let config = Config {
        reset_budget: 10,
        error_reset_lifetime: 100,
        ..Config::default()
    };
    let rst = |id| raw(frame::RST_STREAM, 0, id, &[0, 0, 0, 8]);
    let complete = |p: &mut Peer, id| {
        p.get(id).unwrap();
        p.conn
            .send_response(id, StatusCode::OK, &HeaderMap::new(), true)
            .unwrap();
        p.output();
    };
    let mut p = Peer::new(config.clone());
    let mut id = 1;
    for _ in 0..300 {
        let f = p.headers(id, &GET, false);
        p.feed(&f).unwrap();
        p.feed(&rst(id)).unwrap();
        complete(&mut p, id + 2);
        id += 4;
    }

    // A malformed request (an uppercase field name) is a stream error each time.
    let mut p = Peer::new(config);
    let mut bad = GET.to_vec();
    bad.push(("X-Upper", "1"));
    let mut id = 1;
    for round in 0.. {
        let f = p.headers(id, &bad, true);
        if round == 100 {
            assert_eq!(conn_error(&mut p, &f), Reason::ENHANCE_YOUR_CALM);
            break;
        }
        p.feed(&f).unwrap();
        complete(&mut p, id + 2);
        id += 4;
    }
}

#[test]
fn ping_flood_without_reading_is_cut_off() {
    let mut p = peer();
    let mut f = Vec::new();
    frame::encode_ping(&mut f, false, [0; 8]);
    // Read between batches: fine however many.
    for _ in 0..2000 {
        p.feed(&f).unwrap();
        p.output();
    }
    // Never read: 16 KiB of acks is the limit.
    let flood: Vec<u8> = f.iter().copied().cycle().take(f.len() * 1000).collect();
    assert_eq!(conn_error(&mut p, &flood), Reason::ENHANCE_YOUR_CALM);
}

#[test]
fn a_burst_of_requests_leaves_no_large_event_queue() {
    let mut p = peer();
    let mut burst = Vec::new();
    for k in 0..90 {
        burst.extend_from_slice(&p.headers(1 + 2 * k, &GET, true));
    }
    p.feed(&burst).unwrap();
    assert_eq!(p.events().len(), 90);
    let held = p.conn.events.capacity() * std::mem::size_of::<Event>();
    assert!(held <= KEEP_EVENTS, "{held} bytes of event queue kept");
}
