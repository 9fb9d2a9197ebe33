//! The fast path's HTTP/1.1 head parser on arbitrary bytes, whole and in pieces: a
//! request, "need more", a hand-off, a rejection or a drop, never a panic. A parsed head
//! never claims more bytes than it was given; a prefix of input never parses as a
//! request the whole input would reject (pipelined heads arrive in arbitrary slices);
//! what is routed on (the Host) passed the Host check or is refused by it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skiff_http::h1_head::{header_slots, parse, HeadLimits, Parsed};
use skiff_http::request::RequestHead;

const LIMITS: HeadLimits = HeadLimits {
    max_header_bytes: 4096,
    max_request_line: 1024,
};

/// The parse of `data`, as a comparable summary.
fn outcome(data: &[u8]) -> (u8, usize) {
    let mut headers = header_slots();
    let mut head = RequestHead::default();
    match parse(data, &mut headers, &LIMITS, &mut head) {
        Parsed::Request(r) => {
            assert!(r.consumed <= data.len() && r.consumed > 0);
            assert!(r.minor <= 1);
            // The target the head reports lies within the bytes consumed.
            assert!(head.target.len() < r.consumed);
            if let Some(host) = head.host {
                // Either valid, or the connection layer refuses it: never both ways.
                assert_eq!(
                    skiff_http::host::is_valid(host),
                    skiff_http::host::parse_authority(host).is_ok()
                );
            }
            (0, r.consumed)
        }
        Parsed::Incomplete => (1, 0),
        Parsed::Handoff => (2, 0),
        Parsed::Reject(status) => {
            assert!(status.is_client_error());
            (3, 0)
        }
        Parsed::Drop => (4, 0),
    }
}

fuzz_target!(|data: &[u8]| {
    let whole = outcome(data);
    // A complete request parsed from a prefix is the same request in the whole input.
    if let (0, consumed) = whole {
        for cut in [consumed, consumed.saturating_sub(1), 1] {
            if cut == 0 || cut > data.len() {
                continue;
            }
            match outcome(&data[..cut]) {
                (0, n) => assert_eq!(n, consumed, "a prefix parsed differently"),
                (1, _) => {}
                // A prefix may look over a limit or not HTTP/1.x yet only if the whole does too.
                other => panic!("prefix of {cut} bytes gave {other:?}, the whole a request"),
            }
        }
        // And the bytes after it parse on their own (pipelining).
        let _ = outcome(&data[consumed..]);
    }
});
