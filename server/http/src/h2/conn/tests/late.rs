//! Frames a legitimate peer sent before our RST_STREAM reached it, or on streams closed long ago.

use super::*;

/// Stream 1 sends a body; its response ends first and we reset it (NO_ERROR), then
/// `RECENT` more streams complete, so stream 1 is no longer remembered.
fn reset_and_forgotten(config: Config) -> Peer {
    let mut p = Peer::new(config);
    let f = p.headers(
        1,
        &[(":method", "POST"), (":scheme", "https"), (":path", "/")],
        false,
    );
    p.feed(&f).unwrap();
    p.events();
    p.conn
        .send_response(1, StatusCode::OK, &HeaderMap::new(), true)
        .unwrap();
    assert!(p.output().iter().any(|o| matches!(
        o.frame(),
        Frame::RstStream {
            stream: 1,
            reason: Reason::NO_ERROR
        }
    )));
    for k in 0..RECENT as u32 {
        let id = 3 + 2 * k;
        p.get(id).unwrap();
        p.events();
        p.conn
            .send_response(id, StatusCode::OK, &HeaderMap::new(), true)
            .unwrap();
        p.output();
    }
    p
}

#[test]
fn late_trailers_on_a_forgotten_stream_are_decoded_and_dropped() {
    let mut p = reset_and_forgotten(Config::default());
    // Indexed into the peer's table: were the block not decoded, the next one would fail.
    let f = p.headers(1, &[("x-late", "trailer")], true);
    p.feed(&f).expect("late trailers are no connection error");
    assert!(p.output().is_empty(), "late trailers were answered");
    assert!(p.events().is_empty());
    let mut fields = GET.to_vec();
    fields.push(("x-late", "trailer"));
    let f = p.headers(101, &fields, true);
    p.feed(&f).unwrap();
    let events = p.events();
    let [Event::Request {
        stream: 101, head, ..
    }] = &events[..]
    else {
        panic!("{events:?}");
    };
    assert_eq!(head.get("x-late"), Some(&b"trailer"[..]));
}

#[test]
fn late_data_on_a_forgotten_stream_is_dropped_and_its_window_given_back() {
    // A budget of 2: a reset per late frame would end the connection.
    let mut p = reset_and_forgotten(Config {
        reset_budget: 2,
        ..Config::default()
    });
    for _ in 0..4 {
        p.feed(&data(1, &[0; 10_000], false)).unwrap();
    }
    let out = p.output();
    // 40,000 bytes passed half the connection window: they come back, and nothing else.
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(
        out[0].frame(),
        Frame::WindowUpdate {
            stream: 0,
            increment: 40_000
        }
    );
    assert!(p.events().is_empty());
}

#[test]
fn skipped_ids_still_go_backwards() {
    let mut p = Peer::new(Config::default());
    p.get(1).unwrap();
    p.get(7).unwrap();
    let f = p.headers(5, &GET, true);
    let e = p.feed(&f).expect_err("HEADERS on a skipped id");
    assert_eq!(e.reason(), Reason::PROTOCOL_ERROR);
}
