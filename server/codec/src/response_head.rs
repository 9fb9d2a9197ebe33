//! Parses the head of a backend response: a CGI head (`Status: 404 Not Found`, headers,
//! blank line: FastCGI and SCGI) or an HTTP/1.x status line and headers (uWSGI), with
//! httparse. Bodies are not touched.

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("malformed response head: {0}")]
    Malformed(String),
    #[error("the response head is larger than {0} bytes")]
    TooLarge(usize),
    #[error("invalid Status header {0:?}")]
    Status(String),
    /// A 1xx is not a response to forward as final: passing it on would pair the next
    /// response with the wrong request on a kept-alive or pipelined connection.
    #[error("interim status {0} from the backend where a final response was due")]
    Interim(u16),
}

#[derive(Debug)]
pub struct Head {
    pub status: StatusCode,
    pub fields: Fields,
    /// Bytes of the input the head took.
    pub consumed: usize,
}

/// Response header fields in wire form, `Name: value\r\n` lines in the backend's order
/// and spelling, so the HTTP/1.1 fast path copies them out as they are instead of
/// building a `HeaderMap`. Left out: the CGI `Status` field, hop-by-hop fields (RFC 9110
/// §7.6.1, and any the backend's Connection field names), and Content-Length: the
/// front end frames the body itself.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Fields {
    wire: Vec<u8>,
    has_date: bool,
    /// The backend's Content-Length: what a HEAD response declares.
    content_length: Option<u64>,
}

impl Fields {
    /// Appends a field. `name` must be a token and `value` free of CR, LF and other
    /// control bytes but tab, as httparse guarantees for what it parsed.
    pub fn push(&mut self, name: &[u8], value: &[u8]) {
        debug_assert!(name.iter().all(|&b| b.is_ascii_graphic() && b != b':'));
        debug_assert!(value
            .iter()
            .all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f)));
        self.has_date |= name.eq_ignore_ascii_case(b"date");
        self.wire.extend_from_slice(name);
        self.wire.extend_from_slice(b": ");
        self.wire.extend_from_slice(value);
        self.wire.extend_from_slice(b"\r\n");
    }

    /// Drops every field named `name` (any case).
    pub fn remove(&mut self, name: &str) {
        let mut kept = Fields {
            wire: Vec::with_capacity(self.wire.len()),
            has_date: false,
            content_length: self.content_length,
        };
        for (n, v) in self
            .iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case(name.as_bytes()))
        {
            kept.push(n, v);
        }
        *self = kept;
    }

    /// The fields as they go on the wire, each line ending in CRLF.
    pub fn wire(&self) -> &[u8] {
        &self.wire
    }

    pub fn has_date(&self) -> bool {
        self.has_date
    }

    /// The length the backend declared for the body (kept for HEAD responses, which have
    /// none to count).
    pub fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    /// (name, value) pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.wire
            .split(|&b| b == b'\n')
            .filter(|line| !line.is_empty())
            .map(|line| {
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                let colon = line.iter().position(|&b| b == b':').unwrap_or(line.len());
                let value = line.get(colon + 2..).unwrap_or_default();
                (&line[..colon], value)
            })
    }

    /// The first value of `name` (any case).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    }

    /// The same fields for hyper (HTTP/2 and requests with a body go through hyper).
    pub fn into_header_map(self) -> HeaderMap {
        let mut map = HeaderMap::with_capacity(8);
        for (n, v) in self.iter() {
            // Both always parse: push() holds only what httparse accepted, which is what
            // the http types accept.
            if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(n), HeaderValue::from_bytes(v)) {
                map.append(n, v);
            }
        }
        map
    }
}

pub const MAX_HEAD: usize = 64 * 1024;

/// Parses a complete head from `buf`; `Ok(None)` means more bytes are needed.
pub fn parse_head(buf: &[u8]) -> Result<Option<Head>, HeadError> {
    let mut raw = [httparse::EMPTY_HEADER; 100];
    let (status, consumed, count) = if buf.starts_with(b"HTTP/") {
        let mut resp = httparse::Response::new(&mut raw);
        match resp.parse(buf) {
            Ok(httparse::Status::Complete(n)) => {
                let code = resp.code.unwrap_or(200);
                let status =
                    StatusCode::from_u16(code).map_err(|_| HeadError::Status(code.to_string()))?;
                (Some(status), n, resp.headers.len())
            }
            Ok(httparse::Status::Partial) => return partial(buf),
            Err(e) => return Err(HeadError::Malformed(e.to_string())),
        }
    } else {
        match httparse::parse_headers(buf, &mut raw) {
            Ok(httparse::Status::Complete((n, hs))) => (None, n, hs.len()),
            Ok(httparse::Status::Partial) => return partial(buf),
            Err(e) => return Err(HeadError::Malformed(e.to_string())),
        }
    };
    let headers = &raw[..count];
    let mut status = status;
    let mut location = false;
    // Fields the backend's Connection field names are hop-by-hop too (rare: look only
    // when there is one).
    let connection_named = headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("connection"));
    let mut fields = Fields {
        wire: Vec::with_capacity(buf.len().min(consumed)),
        has_date: false,
        content_length: None,
    };
    for h in headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"status") {
            let text = String::from_utf8_lossy(h.value).into_owned();
            let code = text
                .split_whitespace()
                .next()
                .and_then(|c| c.parse::<u16>().ok())
                .and_then(|c| StatusCode::from_u16(c).ok())
                .ok_or(HeadError::Status(text))?;
            status = Some(code);
            continue;
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            fields.content_length = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse().ok());
            continue;
        }
        if is_hop_by_hop(name) {
            continue;
        }
        if connection_named && named_by_connection(headers, name) {
            continue;
        }
        location |= name.eq_ignore_ascii_case(b"location");
        fields.push(name, h.value);
    }
    // CGI: a Location without a Status is a redirect.
    let status = status.unwrap_or(if location {
        StatusCode::FOUND
    } else {
        StatusCode::OK
    });
    if status.is_informational() {
        return Err(HeadError::Interim(status.as_u16()));
    }
    Ok(Some(Head {
        status,
        fields,
        consumed,
    }))
}

/// Fields that describe one connection, never forwarded (RFC 9110 §7.6.1).
pub fn is_hop_by_hop(name: &[u8]) -> bool {
    const HOP_BY_HOP: [&[u8]; 7] = [
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    ];
    HOP_BY_HOP.iter().any(|h| name.eq_ignore_ascii_case(h))
}

fn named_by_connection(headers: &[httparse::Header<'_>], name: &[u8]) -> bool {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .flat_map(|h| h.value.split(|&b| b == b','))
        .any(|token| token.trim_ascii().eq_ignore_ascii_case(name))
}

fn partial(buf: &[u8]) -> Result<Option<Head>, HeadError> {
    if buf.len() > MAX_HEAD {
        Err(HeadError::TooLarge(MAX_HEAD))
    } else {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removing_a_field_drops_every_line_of_it_in_any_case() {
        let mut h = parse_head(b"Status: 200\r\nX-A: 1\r\nDate: d\r\nx-a: 2\r\nX-B: 3\r\n\r\n")
            .unwrap()
            .unwrap()
            .fields;
        assert!(h.has_date());
        h.remove("x-a");
        assert_eq!(h.wire(), b"Date: d\r\nX-B: 3\r\n");
        h.remove("date");
        assert_eq!(h.wire(), b"X-B: 3\r\n");
        assert!(!h.has_date(), "the server adds its own Date again");
        h.remove("x-none");
        assert_eq!(h.wire(), b"X-B: 3\r\n");
    }

    #[test]
    fn cgi_heads() {
        let h = parse_head(
            b"Status: 404 Not Found\r\nContent-Type: text/html\r\nX-A: 1\r\nX-A: 2\r\n\r\nbody",
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.status, StatusCode::NOT_FOUND);
        assert_eq!(h.fields.get("content-type"), Some(&b"text/html"[..]));
        assert_eq!(h.fields.iter().filter(|(n, _)| *n == b"X-A").count(), 2);
        assert_eq!(h.consumed, 66);
        let h = parse_head(b"Content-Type: text/plain\n\nok")
            .unwrap()
            .unwrap();
        assert_eq!(h.status, StatusCode::OK);
        let h = parse_head(b"Location: /elsewhere\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.status, StatusCode::FOUND);
    }

    #[test]
    fn http_status_lines() {
        let h = parse_head(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.status, StatusCode::CREATED);
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Ty")
            .unwrap()
            .is_none());
    }

    #[test]
    fn interim_statuses_are_refused() {
        assert_eq!(
            parse_head(b"Status: 103 Early Hints\r\nLink: </a.css>\r\n\r\n").unwrap_err(),
            HeadError::Interim(103)
        );
        assert_eq!(
            parse_head(b"HTTP/1.1 100 Continue\r\n\r\n").unwrap_err(),
            HeadError::Interim(100)
        );
    }

    #[test]
    fn garbage_is_rejected_precisely() {
        assert_eq!(
            parse_head(b"Status: nope\r\n\r\n").unwrap_err(),
            HeadError::Status("nope".into())
        );
        assert!(matches!(
            parse_head(b"\x00\x01binary\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            parse_head(b"HTTP/1.1 abc OK\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        let huge = vec![b'a'; MAX_HEAD + 1];
        assert_eq!(
            parse_head(&huge).unwrap_err(),
            HeadError::TooLarge(MAX_HEAD)
        );
    }

    #[test]
    fn fields_keep_wire_form_without_hop_by_hop_or_length() {
        let h = parse_head(
            b"Status: 200 OK\r\nContent-Type: text/html\r\nConnection: close, X-Secret\r\n\
              X-Secret: 1\r\nKeep-Alive: timeout=5\r\nTransfer-Encoding: chunked\r\n\
              Content-Length: 12\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nDate: x\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            std::str::from_utf8(h.fields.wire()).unwrap(),
            "Content-Type: text/html\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nDate: x\r\n"
        );
        assert!(h.fields.has_date());
        assert_eq!(h.fields.content_length(), Some(12));
        let map = h.fields.clone().into_header_map();
        assert_eq!(map.get_all("set-cookie").iter().count(), 2);
        assert_eq!(map["content-type"], "text/html");
        assert_eq!(map.len(), 4);
        let pairs: Vec<_> = h.fields.iter().collect();
        assert_eq!(pairs[0], (&b"Content-Type"[..], &b"text/html"[..]));
        assert_eq!(pairs[3], (&b"Date"[..], &b"x"[..]));
    }

    #[test]
    fn empty_values_and_no_date() {
        let h = parse_head(b"X-Empty:\r\nLocation: /a\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.status, StatusCode::FOUND);
        assert!(!h.fields.has_date());
        assert_eq!(h.fields.content_length(), None);
        assert_eq!(h.fields.get("x-empty"), Some(&b""[..]));
        assert_eq!(h.fields.get("location"), Some(&b"/a"[..]));
    }
}
