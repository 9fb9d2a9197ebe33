//! FastCGI PARAMS encoding round-trips: whatever name/value pairs go in (any bytes, any
//! lengths up to the record limit), decoding the records gives the same pairs back, in
//! order, followed by the empty record that ends the stream.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use skiff_codec::fastcgi::encode_params;

fn read_len(b: &[u8], at: &mut usize) -> usize {
    if b[*at] < 128 {
        *at += 1;
        b[*at - 1] as usize
    } else {
        let n = u32::from_be_bytes([b[*at] & 0x7f, b[*at + 1], b[*at + 2], b[*at + 3]]);
        *at += 4;
        n as usize
    }
}

/// CGI variables as name/value byte strings.
type Vars = Vec<(Vec<u8>, Vec<u8>)>;

fuzz_target!(|input: (u16, Vars)| {
    let (id, pairs) = input;
    let mut out = BytesMut::new();
    let encoded = encode_params(
        &mut out,
        id,
        pairs.iter().map(|(k, v)| (k.as_slice(), v.as_slice())),
    );
    if encoded.is_err() {
        // Only a pair that cannot fit one record may be refused.
        assert!(pairs.iter().any(|(k, v)| k.len() + v.len() > 65535 - 8));
        return;
    }
    // Reassemble the PARAMS stream from its records.
    let mut stream = Vec::new();
    let mut at = 0;
    let mut ended = false;
    while at < out.len() {
        let h = &out[at..at + 8];
        assert_eq!(h[0], 1, "version");
        assert_eq!(h[1], 4, "PARAMS");
        assert_eq!(u16::from_be_bytes([h[2], h[3]]), id);
        let len = u16::from_be_bytes([h[4], h[5]]) as usize;
        let pad = h[6] as usize;
        assert_eq!((len + pad) % 8, 0, "records are padded to 8 bytes");
        assert!(!ended, "a record after the end of the stream");
        ended = len == 0;
        stream.extend_from_slice(&out[at + 8..at + 8 + len]);
        at += 8 + len + pad;
    }
    assert!(ended, "the stream ends with an empty record");
    let mut decoded = Vec::new();
    let mut at = 0;
    while at < stream.len() {
        let (kl, vl) = (read_len(&stream, &mut at), read_len(&stream, &mut at));
        decoded.push((
            stream[at..at + kl].to_vec(),
            stream[at + kl..at + kl + vl].to_vec(),
        ));
        at += kl + vl;
    }
    assert_eq!(decoded, pairs);
});
