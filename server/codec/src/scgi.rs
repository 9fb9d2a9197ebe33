//! SCGI request encoding (a netstring of NUL-separated headers), with no I/O. The body
//! follows the netstring; CONTENT_LENGTH must come first and SCGI=1 must be present.

use bytes::{BufMut, Bytes, BytesMut};

pub fn encode_request<'a>(
    content_length: u64,
    vars: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> Bytes {
    let mut headers = BytesMut::with_capacity(1024);
    let mut put = |k: &[u8], v: &[u8]| {
        headers.put_slice(k);
        headers.put_u8(0);
        headers.put_slice(v);
        headers.put_u8(0);
    };
    put(b"CONTENT_LENGTH", content_length.to_string().as_bytes());
    put(b"SCGI", b"1");
    for (k, v) in vars {
        if k != b"CONTENT_LENGTH" && k != b"SCGI" {
            put(k, v);
        }
    }
    let mut out = BytesMut::with_capacity(headers.len() + 16);
    out.put_slice(headers.len().to_string().as_bytes());
    out.put_u8(b':');
    out.put_slice(&headers);
    out.put_u8(b',');
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netstring_with_content_length_first() {
        let pkt = encode_request(
            5,
            [
                (&b"REQUEST_METHOD"[..], &b"POST"[..]),
                (&b"SCGI"[..], &b"ignored"[..]),
            ],
        );
        let text = String::from_utf8(pkt.to_vec()).unwrap();
        assert_eq!(
            text,
            "44:CONTENT_LENGTH\x005\x00SCGI\x001\x00REQUEST_METHOD\x00POST\x00,"
        );
    }
}
