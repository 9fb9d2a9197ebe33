//! Serializing response heads for the HTTP/1.1 fast path, on bytes (no socket): replies
//! built here, backend response heads, their framing, and chunk sizes.

use crate::http::reply::Reply;
use crate::http::text::push_decimal;
use crate::upstream::ResponseHead;
use http::StatusCode;

/// `HTTP/1.1 404 Not Found`, without the line end: static and upstream heads alike.
pub(super) fn push_status_line(h: &mut Vec<u8>, status: StatusCode) {
    match common_status_line(status) {
        Some(line) => h.extend_from_slice(line),
        None => push_any_status_line(h, status),
    }
}

/// The statuses a cache serves, as one copy each instead of four pieces.
fn common_status_line(status: StatusCode) -> Option<&'static [u8]> {
    Some(match status {
        StatusCode::OK => b"HTTP/1.1 200 OK",
        StatusCode::NOT_MODIFIED => b"HTTP/1.1 304 Not Modified",
        StatusCode::PARTIAL_CONTENT => b"HTTP/1.1 206 Partial Content",
        StatusCode::NOT_FOUND => b"HTTP/1.1 404 Not Found",
        _ => return None,
    })
}

fn push_any_status_line(h: &mut Vec<u8>, status: StatusCode) {
    h.extend_from_slice(b"HTTP/1.1 ");
    h.extend_from_slice(status.as_str().as_bytes());
    h.push(b' ');
    h.extend_from_slice(status.canonical_reason().unwrap_or("Unknown").as_bytes());
}

/// Serializes a reply's head (status line, Server, Date, its fields, Content-Length when
/// it has a body, Connection as needed). Returns whether the reply has a body.
pub(super) fn reply_head(h: &mut Vec<u8>, reply: &Reply, minor: u8, close: bool) -> bool {
    push_status_line(h, reply.status);
    h.extend_from_slice(b"\r\nServer: skiff\r\nDate: ");
    crate::http::date::with_http_date(crate::coarse_clock::unix_seconds(), |d| {
        h.extend_from_slice(d.as_bytes())
    });
    h.extend_from_slice(b"\r\n");
    if let Some(shared) = &reply.shared_head {
        h.extend_from_slice(&shared.wire); // includes Content-Length
    }
    for (name, value) in &reply.headers {
        h.extend_from_slice(name.as_str().as_bytes());
        h.extend_from_slice(b": ");
        h.extend_from_slice(value.as_bytes());
        h.extend_from_slice(b"\r\n");
    }
    let with_body = reply.has_body_semantics();
    if with_body && reply.shared_head.is_none() {
        h.extend_from_slice(b"Content-Length: ");
        push_decimal(h, reply.body.len());
        h.extend_from_slice(b"\r\n");
    }
    if close {
        h.extend_from_slice(b"Connection: close\r\n");
    } else if minor == 0 {
        h.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    h.extend_from_slice(b"\r\n");
    with_body
}

/// How an upstream response body is delimited on the wire.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(super) enum Framing {
    /// No body: HEAD, 1xx, 204, 304.
    Bodiless,
    Length(u64),
    Chunked,
    /// HTTP/1.0 with a streamed body: the end of the connection ends it.
    Close,
}

impl Framing {
    pub(super) fn of(
        status: StatusCode,
        head_only: bool,
        exact: Option<u64>,
        minor: u8,
    ) -> Framing {
        let bodiless = status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED;
        match (exact, minor) {
            _ if bodiless => Framing::Bodiless,
            (Some(n), _) => Framing::Length(n),
            _ if head_only => Framing::Bodiless,
            (None, 0) => Framing::Close,
            (None, _) => Framing::Chunked,
        }
    }
}

/// Serializes an upstream response head (the backend's headers, already stripped of
/// hop-by-hop fields by the handler) as hyper would: a Date when the backend sent none,
/// and the framing headers the body needs.
pub(super) fn upstream_head(
    h: &mut Vec<u8>,
    status: StatusCode,
    head: &ResponseHead,
    framing: Framing,
    close: bool,
    minor: u8,
) {
    push_status_line(h, status);
    h.extend_from_slice(b"\r\n");
    let has_date = match head {
        // Already without Content-Length and hop-by-hop fields.
        ResponseHead::Fields(fields) => {
            h.extend_from_slice(fields.wire());
            fields.has_date()
        }
        ResponseHead::Map(headers) => {
            for (name, value) in headers {
                if name == http::header::CONTENT_LENGTH || name == http::header::TRANSFER_ENCODING {
                    continue;
                }
                h.extend_from_slice(name.as_str().as_bytes());
                h.extend_from_slice(b": ");
                h.extend_from_slice(value.as_bytes());
                h.extend_from_slice(b"\r\n");
            }
            headers.contains_key(http::header::DATE)
        }
    };
    if !has_date {
        h.extend_from_slice(b"date: ");
        crate::http::date::with_http_date(crate::coarse_clock::unix_seconds(), |d| {
            h.extend_from_slice(d.as_bytes())
        });
        h.extend_from_slice(b"\r\n");
    }
    match framing {
        Framing::Length(n) => {
            h.extend_from_slice(b"content-length: ");
            push_decimal(h, n);
            h.extend_from_slice(b"\r\n");
        }
        Framing::Chunked => h.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        Framing::Bodiless | Framing::Close => {}
    }
    if close || framing == Framing::Close {
        h.extend_from_slice(b"connection: close\r\n");
    } else if minor == 0 {
        h.extend_from_slice(b"connection: keep-alive\r\n");
    }
    h.extend_from_slice(b"\r\n");
}

/// Appends `n` in lowercase hex (a chunk size).
pub(super) fn push_hex(out: &mut Vec<u8>, n: usize) {
    let digits = if n == 0 {
        1
    } else {
        (usize::BITS - n.leading_zeros()).div_ceil(4) as usize
    };
    for i in (0..digits).rev() {
        out.push(b"0123456789abcdef"[(n >> (i * 4)) & 0xf]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::ResponseHead;
    use http::StatusCode;

    #[test]
    fn the_common_status_lines_are_the_ones_any_status_gets() {
        for code in [200, 206, 304, 404] {
            let status = StatusCode::from_u16(code).unwrap();
            let mut any = Vec::new();
            push_any_status_line(&mut any, status);
            assert_eq!(common_status_line(status), Some(&any[..]), "{code}");
        }
        let mut line = Vec::new();
        push_status_line(&mut line, StatusCode::IM_A_TEAPOT);
        assert_eq!(line, b"HTTP/1.1 418 I'm a teapot");
    }

    /// The head a reply gets, with the Date masked (it changes every second).
    fn head_of(reply: &Reply, minor: u8, close: bool) -> (String, bool) {
        let mut h = Vec::new();
        let with_body = reply_head(&mut h, reply, minor, close);
        let text = String::from_utf8(h).unwrap();
        let date = text.find("Date: ").unwrap();
        let end = date + text[date..].find("\r\n").unwrap();
        (
            format!("{}Date: *{}", &text[..date], &text[end..]),
            with_body,
        )
    }

    #[test]
    fn reply_heads_carry_length_and_the_connection_decision() {
        let reply = Reply::error(StatusCode::NOT_FOUND)
            .header(http::header::CACHE_CONTROL, "no-store".parse().unwrap());
        let len = reply.body.len();
        let (keep, with_body) = head_of(&reply, 1, false);
        assert!(with_body);
        assert_eq!(
            keep,
            format!(
                "HTTP/1.1 404 Not Found\r\nServer: skiff\r\nDate: *\r\n\
                 content-type: text/html; charset=utf-8\r\ncache-control: no-store\r\n\
                 Content-Length: {len}\r\n\r\n"
            )
        );
        let (close, _) = head_of(&reply, 1, true);
        assert!(close.ends_with("\r\nConnection: close\r\n\r\n"), "{close}");
        let (http10, _) = head_of(&reply, 0, false);
        assert!(
            http10.ends_with("\r\nConnection: keep-alive\r\n\r\n"),
            "{http10}"
        );
        // A 304 has no body, so no Content-Length.
        let (not_modified, with_body) = head_of(&Reply::new(StatusCode::NOT_MODIFIED), 1, false);
        assert!(!with_body);
        assert!(!not_modified.contains("Content-Length"), "{not_modified}");
    }

    #[test]
    fn chunk_sizes_are_lowercase_hex() {
        for (n, want) in [
            (0, "0"),
            (9, "9"),
            (255, "ff"),
            (4096, "1000"),
            (0xabcde, "abcde"),
        ] {
            let mut out = Vec::new();
            push_hex(&mut out, n);
            assert_eq!(out, want.as_bytes(), "{n}");
        }
    }

    #[test]
    fn framing_follows_status_method_length_and_version() {
        use Framing::*;
        assert_eq!(Framing::of(StatusCode::OK, false, Some(5), 1), Length(5));
        assert_eq!(Framing::of(StatusCode::OK, false, None, 1), Chunked);
        assert_eq!(Framing::of(StatusCode::OK, false, None, 0), Close);
        assert_eq!(Framing::of(StatusCode::OK, true, None, 0), Bodiless);
        assert_eq!(Framing::of(StatusCode::OK, true, Some(7), 1), Length(7));
        assert_eq!(
            Framing::of(StatusCode::NO_CONTENT, false, None, 1),
            Bodiless
        );
        assert_eq!(
            Framing::of(StatusCode::NOT_MODIFIED, false, Some(0), 1),
            Bodiless
        );
    }

    #[test]
    fn the_upstream_head_replaces_framing_fields_and_adds_a_date() {
        let (mut parts, ()) = http::Response::builder()
            .status(404)
            .header("content-type", "text/plain")
            .header("content-length", "999")
            .header("transfer-encoding", "chunked")
            .header("set-cookie", "a=1")
            .header("set-cookie", "b=2")
            .body(())
            .unwrap()
            .into_parts();
        let status = parts.status;
        let map = |parts: &http::response::Parts| ResponseHead::Map(parts.headers.clone());
        let mut h = Vec::new();
        upstream_head(&mut h, status, &map(&parts), Framing::Length(3), false, 1);
        let text = String::from_utf8(h).unwrap();
        assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"), "{text}");
        assert!(
            text.contains("set-cookie: a=1\r\nset-cookie: b=2\r\n"),
            "{text}"
        );
        assert!(text.contains("content-length: 3\r\n"), "{text}");
        assert!(
            !text.contains("999") && !text.contains("transfer-encoding"),
            "{text}"
        );
        assert!(text.contains("date: "), "{text}");
        assert!(
            text.ends_with("\r\n\r\n") && !text.contains("connection"),
            "{text}"
        );
        parts
            .headers
            .insert(http::header::DATE, "backend".parse().unwrap());
        let mut h = Vec::new();
        upstream_head(&mut h, status, &map(&parts), Framing::Close, false, 0);
        let text = String::from_utf8(h).unwrap();
        assert!(text.contains("date: backend\r\n") && text.matches("date:").count() == 1);
        assert!(text.contains("connection: close\r\n"), "{text}");
        let mut h = Vec::new();
        upstream_head(&mut h, status, &map(&parts), Framing::Chunked, false, 0);
        let text = String::from_utf8(h).unwrap();
        assert!(text.contains("transfer-encoding: chunked\r\nconnection: keep-alive\r\n"));
    }

    #[test]
    fn cgi_fields_go_out_as_the_backend_spelled_them() {
        let head = skiff_codec::response_head::parse_head(
            b"Status: 201 Created\r\nContent-Type: text/plain\r\nContent-Length: 999\r\n\
              X-Powered-By: PHP\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        let mut h = Vec::new();
        let fields = ResponseHead::Fields(head.fields);
        upstream_head(&mut h, head.status, &fields, Framing::Length(3), false, 1);
        let text = String::from_utf8(h).unwrap();
        let date = text.find("date: ").expect("a date is added");
        assert_eq!(
            text[..date].to_string() + &text[text[date..].find("\r\n").unwrap() + date + 2..],
            "HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\nX-Powered-By: PHP\r\n\
             content-length: 3\r\n\r\n"
        );
        let backend_dated = skiff_codec::response_head::parse_head(b"Date: then\r\n\r\n")
            .unwrap()
            .unwrap();
        let mut h = Vec::new();
        let fields = ResponseHead::Fields(backend_dated.fields);
        upstream_head(&mut h, StatusCode::OK, &fields, Framing::Chunked, true, 1);
        let text = String::from_utf8(h).unwrap();
        assert_eq!(
            text,
            "HTTP/1.1 200 OK\r\nDate: then\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        );
    }
}
