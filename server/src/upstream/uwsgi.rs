//! The uwsgi wire protocol (written by hand: no maintained crate implements it), with no
//! I/O. A request is a 4-byte header (modifier1, little-endian data size, modifier2) and
//! the vars block (little-endian u16 length-prefixed keys and values); the body follows.

use bytes::{BufMut, Bytes, BytesMut};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UwsgiError {
    #[error("the request variables take {0} bytes; uwsgi allows at most 65535")]
    TooLarge(usize),
    #[error("a variable of {0} bytes does not fit a uwsgi length field")]
    VarTooLarge(usize),
}

/// Encodes the packet header and vars for modifier1 = 0 (WSGI).
pub fn encode_request<'a>(
    vars: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> Result<Bytes, UwsgiError> {
    let mut body = BytesMut::with_capacity(1024);
    for (k, v) in vars {
        for part in [k, v] {
            if part.len() > u16::MAX as usize {
                return Err(UwsgiError::VarTooLarge(part.len()));
            }
            body.put_u16_le(part.len() as u16);
            body.put_slice(part);
        }
    }
    if body.len() > u16::MAX as usize {
        return Err(UwsgiError::TooLarge(body.len()));
    }
    let mut out = BytesMut::with_capacity(4 + body.len());
    out.put_u8(0); // modifier1: WSGI
    out.put_u16_le(body.len() as u16);
    out.put_u8(0); // modifier2
    out.put_slice(&body);
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_vars_are_little_endian() {
        let pkt = encode_request([
            (&b"REQUEST_METHOD"[..], &b"GET"[..]),
            (&b"PATH_INFO"[..], &b"/"[..]),
        ])
        .unwrap();
        let size = 2 + 14 + 2 + 3 + 2 + 9 + 2 + 1;
        assert_eq!(&pkt[..4], &[0, size as u8, 0, 0]);
        assert_eq!(&pkt[4..6], &[14, 0]);
        assert_eq!(&pkt[6..20], b"REQUEST_METHOD");
        assert_eq!(&pkt[20..22], &[3, 0]);
        assert_eq!(pkt.len(), 4 + size);
    }

    #[test]
    fn oversized_requests_are_refused() {
        let big = vec![b'x'; 70_000];
        assert_eq!(
            encode_request([(&b"K"[..], &big[..])]),
            Err(UwsgiError::VarTooLarge(70_000))
        );
        let v = vec![b'y'; 40_000];
        assert_eq!(
            encode_request([(&b"A"[..], &v[..]), (&b"B"[..], &v[..])]),
            Err(UwsgiError::TooLarge(80_010))
        );
    }
}
