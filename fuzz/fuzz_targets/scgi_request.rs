//! SCGI request encoding: a well-formed netstring whose NUL-separated headers start with
//! CONTENT_LENGTH, then SCGI=1, then the given variables in order. HTTP cannot carry a
//! NUL into a CGI variable (the parsers refuse it), so such inputs are skipped.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skiff_codec::scgi::encode_request;

/// CGI variables as name/value byte strings.
type Vars = Vec<(Vec<u8>, Vec<u8>)>;

fuzz_target!(|input: (u64, Vars)| {
    let (content_length, pairs) = input;
    if pairs.iter().any(|(k, v)| k.contains(&0) || v.contains(&0)) {
        return;
    }
    let packet = encode_request(
        content_length,
        pairs.iter().map(|(k, v)| (k.as_slice(), v.as_slice())),
    );
    let colon = packet
        .iter()
        .position(|&b| b == b':')
        .expect("netstring length");
    let len: usize = std::str::from_utf8(&packet[..colon])
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(packet.len(), colon + 1 + len + 1);
    assert_eq!(*packet.last().unwrap(), b',');
    let headers = &packet[colon + 1..colon + 1 + len];
    assert_eq!(*headers.last().unwrap(), 0);
    let fields: Vec<&[u8]> = headers[..headers.len() - 1].split(|&b| b == 0).collect();
    assert_eq!(fields.len() % 2, 0);
    assert_eq!(fields[0], b"CONTENT_LENGTH");
    assert_eq!(fields[1], content_length.to_string().as_bytes());
    assert_eq!((fields[2], fields[3]), (&b"SCGI"[..], &b"1"[..]));
    let expected: Vec<(&[u8], &[u8])> = pairs
        .iter()
        .filter(|(k, _)| k != b"CONTENT_LENGTH" && k != b"SCGI")
        .map(|(k, v)| (k.as_slice(), v.as_slice()))
        .collect();
    let got: Vec<(&[u8], &[u8])> = fields[4..].chunks(2).map(|c| (c[0], c[1])).collect();
    assert_eq!(got, expected);
});
