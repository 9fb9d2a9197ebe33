//! The FastCGI record decoder on arbitrary backend bytes, fed in arbitrary slices: it
//! returns events or a clean error, never panics, never loops, and never yields more
//! payload than it was given.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use skiff_codec::fastcgi::{Decoder, Event};

fuzz_target!(|input: (u16, Vec<u8>, Vec<u8>)| {
    let (id, slicing, data) = input;
    let mut decoder = Decoder::new(id);
    let mut buf = BytesMut::new();
    let mut rest = &data[..];
    let mut slices = slicing.iter().cycle();
    let mut payload = 0usize;
    let mut ended = false;
    while !rest.is_empty() && !ended {
        let take = (*slices.next().unwrap_or(&255) as usize + 1).min(rest.len());
        buf.extend_from_slice(&rest[..take]);
        rest = &rest[take..];
        loop {
            let before = buf.len();
            match decoder.decode(&mut buf) {
                Ok(Some(Event::Stdout(b))) | Ok(Some(Event::Stderr(b))) => payload += b.len(),
                Ok(Some(Event::End { .. })) => {
                    ended = true;
                    break;
                }
                Ok(None) => {
                    assert!(buf.len() <= before, "decoding grew the buffer");
                    break;
                }
                Err(_) => return,
            }
        }
    }
    assert!(payload <= data.len(), "more payload out than bytes in");
});
