//! FastCGI (responder role) wire codec, with no I/O: records, the name-value pair encoding
//! of PARAMS, STDIN streaming, and decoding of STDOUT, STDERR and END_REQUEST.

use bytes::{Buf, BufMut, Bytes, BytesMut};

const VERSION: u8 = 1;
const BEGIN_REQUEST: u8 = 1;
pub const ABORT_REQUEST: u8 = 2;
const END_REQUEST: u8 = 3;
const PARAMS: u8 = 4;
const STDIN: u8 = 5;
const STDOUT: u8 = 6;
const STDERR: u8 = 7;
const RESPONDER: u16 = 1;
const KEEP_CONN: u8 = 1;
const MAX_CONTENT: usize = 65535;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FastcgiError {
    #[error("unsupported FastCGI version {0} (expected 1)")]
    Version(u8),
    #[error("record for request {got}, expected {want}")]
    RequestId { got: u16, want: u16 },
    #[error("unexpected record type {0}")]
    RecordType(u8),
    #[error("END_REQUEST body is {0} bytes, expected 8")]
    EndLength(usize),
    #[error("the application refused the request (protocol status {0}: {1})")]
    Refused(u8, &'static str),
    #[error("a parameter of {0} bytes does not fit a record")]
    ParamTooLarge(usize),
}

fn header(out: &mut BytesMut, kind: u8, id: u16, len: usize) {
    let padding = (8 - len % 8) % 8;
    out.put_u8(VERSION);
    out.put_u8(kind);
    out.put_u16(id);
    out.put_u16(len as u16);
    out.put_u8(padding as u8);
    out.put_u8(0);
}

fn record(out: &mut BytesMut, kind: u8, id: u16, content: &[u8]) {
    header(out, kind, id, content.len());
    out.put_slice(content);
    let padding = (8 - content.len() % 8) % 8;
    out.put_bytes(0, padding);
}

/// BEGIN_REQUEST for the responder role; `keep_conn` asks the application to keep the
/// connection open after the response.
pub fn encode_begin(out: &mut BytesMut, id: u16, keep_conn: bool) {
    let mut body = [0u8; 8];
    body[..2].copy_from_slice(&RESPONDER.to_be_bytes());
    body[2] = if keep_conn { KEEP_CONN } else { 0 };
    record(out, BEGIN_REQUEST, id, &body);
}

fn put_len(buf: &mut Vec<u8>, len: usize) {
    if len < 128 {
        buf.push(len as u8);
    } else {
        buf.extend_from_slice(&((len as u32) | 0x8000_0000).to_be_bytes());
    }
}

/// The PARAMS stream, including its empty terminating record. Pairs are written straight
/// into the record being built: no allocation per parameter.
pub fn encode_params<'a>(
    out: &mut BytesMut,
    id: u16,
    params: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> Result<(), FastcgiError> {
    let len_of = |n: usize| if n < 128 { 1 } else { 4 };
    let mut chunk: Vec<u8> = Vec::with_capacity(2048);
    for (name, value) in params {
        let pair_len = len_of(name.len()) + len_of(value.len()) + name.len() + value.len();
        if pair_len > MAX_CONTENT {
            return Err(FastcgiError::ParamTooLarge(pair_len));
        }
        if chunk.len() + pair_len > MAX_CONTENT {
            record(out, PARAMS, id, &chunk);
            chunk.clear();
        }
        put_len(&mut chunk, name.len());
        put_len(&mut chunk, value.len());
        chunk.extend_from_slice(name);
        chunk.extend_from_slice(value);
    }
    if !chunk.is_empty() {
        record(out, PARAMS, id, &chunk);
    }
    record(out, PARAMS, id, &[]);
    Ok(())
}

/// STDIN records carrying `data` (split as needed). An empty `data` ends the stream.
pub fn encode_stdin(out: &mut BytesMut, id: u16, data: &[u8]) {
    if data.is_empty() {
        record(out, STDIN, id, &[]);
        return;
    }
    for part in data.chunks(MAX_CONTENT) {
        record(out, STDIN, id, part);
    }
}

pub fn encode_abort(out: &mut BytesMut, id: u16) {
    record(out, ABORT_REQUEST, id, &[]);
}

/// What the application sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Stdout(Bytes),
    Stderr(Bytes),
    End { app_status: u32 },
}

/// Decodes records for one request id from a growing buffer.
pub struct Decoder {
    id: u16,
}

impl Decoder {
    pub fn new(id: u16) -> Decoder {
        Decoder { id }
    }

    /// The next event, `Ok(None)` if `buf` does not hold a whole record yet. Consumed
    /// bytes are removed from `buf`.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Event>, FastcgiError> {
        loop {
            if buf.len() < 8 {
                return Ok(None);
            }
            let version = buf[0];
            let kind = buf[1];
            let id = u16::from_be_bytes([buf[2], buf[3]]);
            let len = u16::from_be_bytes([buf[4], buf[5]]) as usize;
            let padding = buf[6] as usize;
            if version != VERSION {
                return Err(FastcgiError::Version(version));
            }
            if buf.len() < 8 + len + padding {
                return Ok(None);
            }
            if id != self.id {
                return Err(FastcgiError::RequestId {
                    got: id,
                    want: self.id,
                });
            }
            buf.advance(8);
            let content = buf.split_to(len).freeze();
            buf.advance(padding);
            match kind {
                STDOUT if content.is_empty() => continue, // end of the stdout stream
                STDOUT => return Ok(Some(Event::Stdout(content))),
                STDERR if content.is_empty() => continue,
                STDERR => return Ok(Some(Event::Stderr(content))),
                END_REQUEST => {
                    if content.len() != 8 {
                        return Err(FastcgiError::EndLength(content.len()));
                    }
                    let app_status =
                        u32::from_be_bytes([content[0], content[1], content[2], content[3]]);
                    return match content[4] {
                        0 => Ok(Some(Event::End { app_status })),
                        1 => Err(FastcgiError::Refused(1, "cannot multiplex connections")),
                        2 => Err(FastcgiError::Refused(2, "overloaded")),
                        3 => Err(FastcgiError::Refused(3, "unknown role")),
                        _ => Err(FastcgiError::Refused(content[4], "unknown status")),
                    };
                }
                other => return Err(FastcgiError::RecordType(other)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw_record(kind: u8, id: u16, content: &[u8], padding: u8) -> Vec<u8> {
        let mut v = vec![1, kind];
        v.extend_from_slice(&id.to_be_bytes());
        v.extend_from_slice(&(content.len() as u16).to_be_bytes());
        v.push(padding);
        v.push(0);
        v.extend_from_slice(content);
        v.extend(std::iter::repeat_n(0, padding as usize));
        v
    }

    #[test]
    fn begin_request_is_the_responder_role() {
        let mut out = BytesMut::new();
        encode_begin(&mut out, 1, true);
        assert_eq!(&out[..], &[1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn params_use_short_and_long_lengths_and_end_with_an_empty_record() {
        let mut out = BytesMut::new();
        let long = [b'v'; 200];
        encode_params(
            &mut out,
            7,
            [(&b"A"[..], &b"bc"[..]), (&b"LONG"[..], &long[..])],
        )
        .unwrap();
        // First record: header, then 1,2,"A","bc" and 4,(200|0x80000000),"LONG",v*200.
        assert_eq!(&out[..8], &[1, 4, 0, 7, 0, 214, 2, 0]);
        assert_eq!(&out[8..13], &[1, 2, b'A', b'b', b'c']);
        assert_eq!(&out[13..18], &[4, 0x80, 0, 0, 200]);
        let first_len = 8 + 214 + 2;
        assert_eq!(
            &out[first_len..],
            &[1, 4, 0, 7, 0, 0, 0, 0],
            "empty terminator"
        );
    }

    #[test]
    fn stdin_is_split_into_records_of_at_most_65535_bytes() {
        let mut out = BytesMut::new();
        encode_stdin(&mut out, 1, &vec![b'x'; 70_000]);
        assert_eq!(u16::from_be_bytes([out[4], out[5]]), 65535);
        let second = 8 + 65535 + 1; // one byte of padding
        assert_eq!(
            u16::from_be_bytes([out[second + 4], out[second + 5]]) as usize,
            70_000 - 65535
        );
    }

    #[test]
    fn decodes_stdout_stderr_and_end_across_partial_reads() {
        let mut wire = raw_record(STDOUT, 1, b"Status: 200 OK\r\n\r\nhi", 6);
        wire.extend(raw_record(STDERR, 1, b"PHP Notice", 6));
        wire.extend(raw_record(STDOUT, 1, b"", 0));
        wire.extend(raw_record(END_REQUEST, 1, &[0, 0, 0, 0, 0, 0, 0, 0], 0));
        let mut dec = Decoder::new(1);
        let mut buf = BytesMut::new();
        let mut events = Vec::new();
        for byte in wire {
            buf.put_u8(byte); // one byte at a time: every boundary is partial once
            while let Some(ev) = dec.decode(&mut buf).unwrap() {
                events.push(ev);
            }
        }
        assert_eq!(
            events,
            vec![
                Event::Stdout(Bytes::from_static(b"Status: 200 OK\r\n\r\nhi")),
                Event::Stderr(Bytes::from_static(b"PHP Notice")),
                Event::End { app_status: 0 },
            ]
        );
    }

    #[test]
    fn garbage_is_rejected_precisely() {
        let mut dec = Decoder::new(1);
        let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\n"[..]);
        assert_eq!(dec.decode(&mut buf), Err(FastcgiError::Version(b'H')));
        let mut buf = BytesMut::from(&raw_record(STDOUT, 2, b"x", 7)[..]);
        assert_eq!(
            dec.decode(&mut buf),
            Err(FastcgiError::RequestId { got: 2, want: 1 })
        );
        let mut buf = BytesMut::from(&raw_record(END_REQUEST, 1, &[0, 0, 0, 0, 2, 0, 0, 0], 0)[..]);
        assert_eq!(
            dec.decode(&mut buf),
            Err(FastcgiError::Refused(2, "overloaded"))
        );
        let mut buf = BytesMut::from(&raw_record(END_REQUEST, 1, &[0, 0, 0], 5)[..]);
        assert_eq!(dec.decode(&mut buf), Err(FastcgiError::EndLength(3)));
        let mut buf = BytesMut::from(&raw_record(9, 1, b"", 0)[..]);
        assert_eq!(dec.decode(&mut buf), Err(FastcgiError::RecordType(9)));
    }
}
