//! The backend response-head parser (CGI `Status:` heads and HTTP/1.x status lines) on
//! arbitrary bytes: a head, "need more", or a clean error; a parsed head never claims
//! more bytes than it was given, and a prefix of a complete head is never an error
//! unless the whole input is one. The fields kept for the fast path convert to a
//! HeaderMap without loss.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skiff_codec::response_head::{parse_head, MAX_HEAD};

fuzz_target!(|data: &[u8]| {
    match parse_head(data) {
        Ok(Some(head)) => {
            assert!(head.consumed <= data.len());
            assert!(head.consumed <= MAX_HEAD + 4);
            assert!((100..=999).contains(&head.status.as_u16()));
            // Every field kept in wire form is one the http types accept (hyper gets them
            // as a HeaderMap), and the wire form is whole lines.
            let kept = head.fields.iter().count();
            assert_eq!(head.fields.clone().into_header_map().len(), kept);
            assert!(head.fields.wire().is_empty() || head.fields.wire().ends_with(b"\r\n"));
        }
        Ok(None) => assert!(data.len() <= MAX_HEAD, "waiting for more past the limit"),
        Err(_) => {}
    }
});
