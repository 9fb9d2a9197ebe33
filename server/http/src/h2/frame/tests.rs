use super::*;

fn parse_bytes(b: &[u8]) -> Result<Frame<'_>, Error> {
    let head = Head::parse(b[..HEADER_LEN].try_into().unwrap());
    assert_eq!(head.len as usize, b.len() - HEADER_LEN, "test frame length");
    parse(&head, &b[HEADER_LEN..])
}

fn conn(reason: Reason) -> impl Fn(Error) -> bool {
    move |e| e.is_connection() && e.reason() == reason
}

#[test]
fn head_round_trip_and_reserved_bit() {
    let b = [0x00, 0x40, 0x01, 0x01, 0x25, 0x80, 0x00, 0x00, 0x03];
    let h = Head::parse(&b);
    assert_eq!(
        h,
        Head {
            len: 0x4001,
            kind: HEADERS,
            flags: 0x25,
            stream: 3
        }
    );
    let mut out = Vec::new();
    h.encode(&mut out);
    // The reserved bit is cleared on the way out.
    assert_eq!(out, [0x00, 0x40, 0x01, 0x01, 0x25, 0x00, 0x00, 0x00, 0x03]);
}

#[test]
fn data_encodings_are_byte_exact() {
    let mut out = Vec::new();
    encode_data(&mut out, 1, b"hi", true);
    assert_eq!(out, [0, 0, 2, 0, 1, 0, 0, 0, 1, b'h', b'i']);
    assert_eq!(
        parse_bytes(&out).unwrap(),
        Frame::Data {
            stream: 1,
            data: b"hi",
            end_stream: true,
            flow_len: 2
        }
    );
}

#[test]
fn padded_data_counts_padding_for_flow_control() {
    let b = [0, 0, 5, 0, 0x8, 0, 0, 0, 1, 2, b'o', b'k', 0, 0];
    assert_eq!(
        parse_bytes(&b).unwrap(),
        Frame::Data {
            stream: 1,
            data: b"ok",
            end_stream: false,
            flow_len: 5
        }
    );
    // Pad length equal to the rest of the payload leaves an empty body: allowed.
    let b = [0, 0, 3, 0, 0x8, 0, 0, 0, 1, 2, 0, 0];
    assert!(matches!(parse_bytes(&b), Ok(Frame::Data { data: [], .. })));
    // Pad length past it: PROTOCOL_ERROR on the connection (h2spec 6.1.3).
    let b = [0, 0, 3, 0, 0x8, 0, 0, 0, 1, 3, 0, 0];
    assert!(parse_bytes(&b).is_err_and(conn(Reason::PROTOCOL_ERROR)));
}

#[test]
fn stream_zero_rules() {
    // DATA, HEADERS, PRIORITY, RST_STREAM, CONTINUATION need a stream (h2spec 6.1.2,
    // 6.2.2, 6.3.1, 6.4.1, 6.10.5).
    for kind in [DATA, HEADERS, PRIORITY, RST_STREAM, CONTINUATION] {
        let len = if kind == PRIORITY {
            5
        } else if kind == RST_STREAM {
            4
        } else {
            0
        };
        let mut b = vec![0, 0, len as u8, kind, 0, 0, 0, 0, 0];
        b.resize(HEADER_LEN + len, 0);
        assert!(
            parse_bytes(&b).is_err_and(conn(Reason::PROTOCOL_ERROR)),
            "kind {kind}"
        );
    }
    // SETTINGS, PING, GOAWAY must not have one (h2spec 6.5.2, 6.7.3, 6.8.1).
    for (kind, len) in [(SETTINGS, 0), (PING, 8), (GOAWAY, 8)] {
        let mut b = vec![0, 0, len as u8, kind, 0, 0, 0, 0, 1];
        b.resize(HEADER_LEN + len, 0);
        assert!(
            parse_bytes(&b).is_err_and(conn(Reason::PROTOCOL_ERROR)),
            "kind {kind}"
        );
    }
}

#[test]
fn fixed_lengths_are_frame_size_errors() {
    let rst = [0, 0, 3, RST_STREAM, 0, 0, 0, 0, 1, 0, 0, 0];
    assert!(parse_bytes(&rst).is_err_and(conn(Reason::FRAME_SIZE_ERROR)));
    let ping = [0, 0, 7, PING, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7];
    assert!(parse_bytes(&ping).is_err_and(conn(Reason::FRAME_SIZE_ERROR)));
    let wu = [0, 0, 3, WINDOW_UPDATE, 0, 0, 0, 0, 0, 0, 0, 1];
    assert!(parse_bytes(&wu).is_err_and(conn(Reason::FRAME_SIZE_ERROR)));
    let settings = [0, 0, 3, SETTINGS, 0, 0, 0, 0, 0, 0, 1, 0];
    assert!(parse_bytes(&settings).is_err_and(conn(Reason::FRAME_SIZE_ERROR)));
    let ack = [0, 0, 6, SETTINGS, FLAG_ACK, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
    assert!(parse_bytes(&ack).is_err_and(conn(Reason::FRAME_SIZE_ERROR)));
    let goaway = [0, 0, 4, GOAWAY, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    assert!(parse_bytes(&goaway).is_err_and(conn(Reason::FRAME_SIZE_ERROR)));
    // PRIORITY's wrong length is a stream error only (h2spec 6.3.2).
    let prio = [0, 0, 4, PRIORITY, 0, 0, 0, 0, 3, 0, 0, 0, 1];
    assert_eq!(
        parse_bytes(&prio).unwrap_err(),
        Error::stream(3, Reason::FRAME_SIZE_ERROR, "PRIORITY length is not 5")
    );
}

#[test]
fn headers_with_padding_and_priority() {
    // PADDED|PRIORITY|END_HEADERS, pad 2, exclusive dependency on 1, weight 16, block "ab".
    let b = [
        0, 0, 10, HEADERS, 0x2c, 0, 0, 0, 3, 2, 0x80, 0, 0, 1, 15, b'a', b'b', 0, 0,
    ];
    assert_eq!(
        parse_bytes(&b).unwrap(),
        Frame::Headers {
            stream: 3,
            fragment: b"ab",
            end_stream: false,
            end_headers: true,
            priority: Some(Priority {
                exclusive: true,
                depends_on: 1,
                weight: 15
            })
        }
    );
    let short = [0, 0, 3, HEADERS, 0x24, 0, 0, 0, 3, 0, 0, 0];
    assert!(parse_bytes(&short).is_err_and(conn(Reason::FRAME_SIZE_ERROR)));
}

#[test]
fn priority_on_itself_is_a_stream_error() {
    let mut out = Vec::new();
    let p = Priority {
        exclusive: false,
        depends_on: 5,
        weight: 0,
    };
    encode_priority(&mut out, 5, p);
    assert_eq!(out, [0, 0, 5, PRIORITY, 0, 0, 0, 0, 5, 0, 0, 0, 5, 0]);
    assert_eq!(
        parse_bytes(&out).unwrap_err().reason(),
        Reason::PROTOCOL_ERROR
    );
    assert!(!parse_bytes(&out).unwrap_err().is_connection());
    out.clear();
    encode_priority(&mut out, 7, p);
    assert_eq!(
        parse_bytes(&out).unwrap(),
        Frame::Priority {
            stream: 7,
            priority: p
        }
    );
}

#[test]
fn control_frame_encodings_are_byte_exact() {
    let mut out = Vec::new();
    encode_settings(&mut out, &[(setting::MAX_CONCURRENT_STREAMS, 100)]);
    assert_eq!(out, [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100]);
    match parse_bytes(&out).unwrap() {
        Frame::Settings { ack: false, params } => {
            assert_eq!(settings_params(params).collect::<Vec<_>>(), [(3, 100)]);
        }
        f => panic!("{f:?}"),
    }
    out.clear();
    encode_settings_ack(&mut out);
    assert_eq!(out, [0, 0, 0, 4, 1, 0, 0, 0, 0]);
    out.clear();
    encode_ping(&mut out, true, *b"12345678");
    assert_eq!(&out[..9], [0, 0, 8, 6, 1, 0, 0, 0, 0]);
    assert_eq!(
        parse_bytes(&out).unwrap(),
        Frame::Ping {
            ack: true,
            payload: *b"12345678"
        }
    );
    out.clear();
    encode_goaway(&mut out, 7, Reason::ENHANCE_YOUR_CALM, b"x");
    assert_eq!(
        out,
        [0, 0, 9, 7, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0xb, b'x']
    );
    assert_eq!(
        parse_bytes(&out).unwrap(),
        Frame::GoAway {
            last_stream: 7,
            reason: Reason::ENHANCE_YOUR_CALM,
            debug: b"x"
        }
    );
    out.clear();
    encode_window_update(&mut out, 0, 0x7fff_ffff);
    assert_eq!(out, [0, 0, 4, 8, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff]);
    out.clear();
    encode_rst_stream(&mut out, 3, Reason::CANCEL);
    assert_eq!(out, [0, 0, 4, 3, 0, 0, 0, 0, 3, 0, 0, 0, 8]);
    assert_eq!(
        parse_bytes(&out).unwrap(),
        Frame::RstStream {
            stream: 3,
            reason: Reason::CANCEL
        }
    );
}

#[test]
fn window_update_of_zero() {
    let on_conn = [0, 0, 4, WINDOW_UPDATE, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert!(parse_bytes(&on_conn).is_err_and(conn(Reason::PROTOCOL_ERROR)));
    let on_stream = [0, 0, 4, WINDOW_UPDATE, 0, 0, 0, 0, 1, 0x80, 0, 0, 0];
    let e = parse_bytes(&on_stream).unwrap_err();
    assert_eq!(
        (e.is_connection(), e.reason()),
        (false, Reason::PROTOCOL_ERROR)
    );
}

#[test]
fn headers_split_into_continuations() {
    let block: Vec<u8> = (0..10).collect();
    let mut out = Vec::new();
    encode_headers(&mut out, 1, &block, true, 4);
    assert_eq!(
        out,
        [
            0,
            0,
            4,
            HEADERS,
            1,
            0,
            0,
            0,
            1,
            0,
            1,
            2,
            3, //
            0,
            0,
            4,
            CONTINUATION,
            0,
            0,
            0,
            0,
            1,
            4,
            5,
            6,
            7, //
            0,
            0,
            2,
            CONTINUATION,
            4,
            0,
            0,
            0,
            1,
            8,
            9,
        ]
    );
    out.clear();
    encode_headers(&mut out, 1, &block[..4], false, 4);
    assert_eq!(out, [0, 0, 4, HEADERS, 4, 0, 0, 0, 1, 0, 1, 2, 3]);
}

#[test]
fn push_promise_and_unknown_frames_parse() {
    let mut out = Vec::new();
    encode_push_promise(&mut out, 1, 2, b"z");
    assert_eq!(
        parse_bytes(&out).unwrap(),
        Frame::PushPromise {
            stream: 1,
            promised: 2,
            fragment: b"z",
            end_headers: true
        }
    );
    let unknown = [0, 0, 1, 0xfa, 0xff, 0, 0, 0, 0, 9];
    assert_eq!(
        parse_bytes(&unknown).unwrap(),
        Frame::Unknown {
            kind: 0xfa,
            stream: 0
        }
    );
}
