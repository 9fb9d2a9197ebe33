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
}

#[derive(Debug)]
pub struct Head {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// Bytes of the input the head took.
    pub consumed: usize,
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
    let mut map = HeaderMap::with_capacity(headers.len());
    for h in headers.iter() {
        if h.name.eq_ignore_ascii_case("status") {
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
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|_| HeadError::Malformed(format!("header name {:?}", h.name)))?;
        let value = HeaderValue::from_bytes(h.value)
            .map_err(|_| HeadError::Malformed(format!("value of {}", h.name)))?;
        map.append(name, value);
    }
    // CGI: a Location without a Status is a redirect.
    let status = status.unwrap_or(if map.contains_key(http::header::LOCATION) {
        StatusCode::FOUND
    } else {
        StatusCode::OK
    });
    Ok(Some(Head {
        status,
        headers: map,
        consumed,
    }))
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
    fn cgi_heads() {
        let h = parse_head(
            b"Status: 404 Not Found\r\nContent-Type: text/html\r\nX-A: 1\r\nX-A: 2\r\n\r\nbody",
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.status, StatusCode::NOT_FOUND);
        assert_eq!(h.headers["content-type"], "text/html");
        assert_eq!(h.headers.get_all("x-a").iter().count(), 2);
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
}
