//! The uwsgi wire protocol (written by hand: no maintained crate implements it), with no
//! I/O. A request is a 4-byte header (modifier1, little-endian data size, modifier2) and
//! the vars block (little-endian u16 length-prefixed keys and values); the body follows.

use bytes::Bytes;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UwsgiError {
    #[error("the request variables take {0} bytes; uwsgi allows at most 65535")]
    TooLarge(usize),
    #[error("a variable of {0} bytes does not fit a uwsgi length field")]
    VarTooLarge(usize),
}

/// Encodes the packet header and vars for modifier1 = 0 (WSGI). The sizes are summed
/// first, so the packet is written once into a buffer of its exact size.
pub fn encode_request<'a, I>(vars: I) -> Result<Bytes, UwsgiError>
where
    I: IntoIterator<Item = (&'a [u8], &'a [u8])>,
    I::IntoIter: Clone,
{
    let vars = vars.into_iter();
    let mut size = 0usize;
    for (k, v) in vars.clone() {
        for part in [k, v] {
            if part.len() > u16::MAX as usize {
                return Err(UwsgiError::VarTooLarge(part.len()));
            }
            size += 2 + part.len();
        }
    }
    if size > u16::MAX as usize {
        return Err(UwsgiError::TooLarge(size));
    }
    // A zeroed buffer of the exact size, filled by position: no capacity checks per
    // part, which a BytesMut makes for every one of the ~80 names and values.
    let mut out = vec![0u8; 4 + size];
    out[0] = 0; // modifier1: WSGI
    out[1..3].copy_from_slice(&(size as u16).to_le_bytes());
    out[3] = 0; // modifier2
    let mut at = 4;
    for (k, v) in vars {
        for part in [k, v] {
            out[at..at + 2].copy_from_slice(&(part.len() as u16).to_le_bytes());
            out[at + 2..at + 2 + part.len()].copy_from_slice(part);
            at += 2 + part.len();
        }
    }
    Ok(Bytes::from(out))
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
