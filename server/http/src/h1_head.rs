//! Parsing one HTTP/1.x request head for the server's fast path, on bytes (no socket): a
//! request it answers itself, "need more bytes", a hand-off to hyper, or a rejection
//! with its status. Here rather than in the server so that it is fuzzed.

use crate::request::{HeaderSource, RequestHead};
use http::{Method, StatusCode};
use std::mem::MaybeUninit;

pub const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const MAX_HEADERS: usize = 100;

/// Room for a head's header fields, left uninitialised: httparse writes only the slots a
/// head uses, where an initialised array cost 3.2 KB of stores per request (callgrind).
pub type HeaderSlots<'a> = [MaybeUninit<httparse::Header<'a>>; MAX_HEADERS];

/// Empty header slots for `parse`.
pub const fn header_slots<'a>() -> HeaderSlots<'a> {
    [const { MaybeUninit::uninit() }; MAX_HEADERS]
}

/// The size limits a head is held to.
#[derive(Debug, Clone, Copy)]
pub struct HeadLimits {
    /// Request head (request line plus headers) bytes; past this: 431.
    pub max_header_bytes: usize,
    /// Request-line bytes; past this: 414.
    pub max_request_line: usize,
}

/// A request head the fast path serves: GET, HEAD or OPTIONS, without a body. The
/// handler's view of it is filled into the caller's `RequestHead`.
pub struct Request<'a> {
    /// The header fields as httparse saw them (for a backend's CGI environment).
    pub fields: &'a [httparse::Header<'a>],
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor: u8,
    /// Whether the client asked to close after this response (or HTTP/1.0 without
    /// keep-alive).
    pub close: bool,
    /// Bytes of the buffer the head took.
    pub consumed: usize,
}

pub enum Parsed<'a> {
    Request(Request<'a>),
    /// More bytes are needed.
    Incomplete,
    /// Not for the fast path (HTTP/2 preface, a body, Expect, Upgrade, other methods):
    /// hyper takes the connection with the bytes read so far.
    Handoff,
    /// Malformed or over a limit: answered with this status, then the connection closes.
    Reject(StatusCode),
    /// Not an HTTP/1.x request line: closed without an answer.
    Drop,
}

/// Whether the request line's third word starts like an HTTP version (`HTTP/`).
fn names_http_version(data: &[u8]) -> bool {
    let line = &data[..data.iter().position(|&b| b == b'\n').unwrap_or(data.len())];
    line.split(|&b| b == b' ')
        .filter(|w| !w.is_empty())
        .nth(2)
        .is_some_and(|w| w.starts_with(b"HTTP/"))
}

/// RFC 9112 §2.2: empty lines before a request-line are ignored. How many bytes to skip.
pub fn leading_empty_lines(data: &[u8]) -> usize {
    data.iter()
        .position(|b| !matches!(b, b'\r' | b'\n'))
        .unwrap_or(data.len())
}

/// Parses the request head at the start of `data` (no leading empty lines) into `head`,
/// which the caller owns so that its few hundred bytes are written in place, not copied
/// out (measured with callgrind).
pub fn parse<'a>(
    data: &'a [u8],
    headers: &'a mut HeaderSlots<'a>,
    limits: &HeadLimits,
    head: &mut RequestHead<'a>,
) -> Parsed<'a> {
    if data.is_empty() || (data.len() < H2_PREFACE.len() && H2_PREFACE.starts_with(data)) {
        return Parsed::Incomplete;
    }
    if data.starts_with(H2_PREFACE) {
        return Parsed::Handoff;
    }
    let mut req = httparse::Request::new(&mut []);
    let consumed = match req.parse_with_uninit_headers(data, headers) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            // The request line so far, without its terminator (as a complete head's is
            // measured below): a CR waiting for its LF does not count.
            let line = match data.iter().position(|&b| b == b'\n') {
                Some(end) => &data[..end],
                None => data,
            };
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.len() > limits.max_request_line {
                return Parsed::Reject(StatusCode::URI_TOO_LONG);
            }
            if data.len() > limits.max_header_bytes {
                return Parsed::Reject(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
            }
            return Parsed::Incomplete;
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Parsed::Reject(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        }
        Err(httparse::Error::Version) if data.starts_with(b"PRI ") => return Parsed::Handoff,
        // Not HTTP/1.x at all (an invalid HTTP/2 preface, another protocol): an HTTP/1.1
        // 400 would only be garbage to such a peer, so the connection just closes.
        Err(httparse::Error::Version) if !names_http_version(data) => return Parsed::Drop,
        Err(_) => return Parsed::Reject(StatusCode::BAD_REQUEST),
    };
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Parsed::Reject(StatusCode::BAD_REQUEST);
    };
    let line_len = method.len() + target.len() + 10;
    if line_len > limits.max_request_line {
        return Parsed::Reject(StatusCode::URI_TOO_LONG);
    }
    // Origin-form, `*` or an http(s) absolute-form target: any other (`ftp://h/x`, an
    // authority) would be routed on Host while a backend was told its own authority.
    if !target.starts_with('/') && target != "*" && RequestHead::target_authority(target).is_none()
    {
        return Parsed::Reject(StatusCode::BAD_REQUEST);
    }
    let method = match method {
        "GET" => Some(Method::GET),
        "HEAD" => Some(Method::HEAD),
        "OPTIONS" => Some(Method::OPTIONS),
        // Other methods may carry bodies and will be routed to backends: hyper's job,
        // once the framing has been checked below.
        _ => None,
    };
    head.target = target;
    let (path, query) = RequestHead::split_target(target);
    head.path = path;
    head.query = query;
    // `close` wins over `keep-alive` whatever their order; HTTP/1.0 closes unless asked.
    let (mut close_token, mut keep_alive_token) = (false, false);
    let (mut content_length, mut transfer_encoding, mut handoff) = (false, false, false);
    let fields: &'a [httparse::Header<'a>] = req.headers;
    for h in fields {
        let name = h.name.as_bytes();
        match name.len() {
            10 if name.eq_ignore_ascii_case(b"connection") => {
                for token in h.value.split(|&b| b == b',') {
                    let token = token.trim_ascii();
                    if token.eq_ignore_ascii_case(b"close") {
                        close_token = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        keep_alive_token = true;
                    } else if token.eq_ignore_ascii_case(b"upgrade") {
                        handoff = true;
                    }
                }
            }
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                content_length = true;
                handoff |= h.value.trim_ascii() != b"0";
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => transfer_encoding = true,
            6 if name.eq_ignore_ascii_case(b"expect") => handoff = true,
            _ => head.note_header(name, h.value),
        }
    }
    // Both framings at once is a smuggling attempt: a backend that reads the other one
    // would see a different request (RFC 9112 §6.1; nginx refuses it too).
    if content_length && transfer_encoding {
        return Parsed::Reject(StatusCode::BAD_REQUEST);
    }
    let Some(method) = method.filter(|_| !handoff && !transfer_encoding) else {
        return Parsed::Handoff;
    };
    head.method = method;
    let close = close_token || (minor == 0 && !keep_alive_token);
    // RFC 9112 §3.2.2: an absolute-form target's authority replaces Host.
    if let Some(authority) = RequestHead::target_authority(target) {
        head.host = Some(authority.as_bytes());
    }
    head.headers = HeaderSource::H1(fields);
    Parsed::Request(Request {
        fields,
        minor,
        close,
        consumed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> HeadLimits {
        HeadLimits {
            max_header_bytes: 1024,
            max_request_line: 64,
        }
    }

    fn outcome(data: &[u8]) -> String {
        let mut headers = header_slots();
        let mut head = RequestHead::default();
        match parse(data, &mut headers, &limits(), &mut head) {
            Parsed::Request(r) => format!(
                "{} {} 1.{} close={} host={:?} consumed={}",
                head.method,
                head.target,
                r.minor,
                r.close,
                head.host.map(|h| String::from_utf8_lossy(h).into_owned()),
                r.consumed
            ),
            Parsed::Incomplete => "incomplete".into(),
            Parsed::Handoff => "handoff".into(),
            Parsed::Reject(s) => format!("reject {}", s.as_u16()),
            Parsed::Drop => "drop".into(),
        }
    }

    #[test]
    fn a_plain_get_is_served_here_and_keeps_the_connection() {
        let req = b"GET /a?b HTTP/1.1\r\nHost: x\r\n\r\nGET /next";
        assert_eq!(
            outcome(req),
            "GET /a?b 1.1 close=false host=Some(\"x\") consumed=30"
        );
    }

    #[test]
    fn connection_tokens_and_http_1_0_decide_closing() {
        assert!(outcome(b"GET / HTTP/1.0\r\n\r\n").contains("close=true"));
        assert!(
            outcome(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").contains("close=false")
        );
        assert!(outcome(b"GET / HTTP/1.1\r\nConnection: x, Close\r\n\r\n").contains("close=true"));
        // `close` wins over `keep-alive`, in either order.
        for tokens in ["close, keep-alive", "keep-alive, close"] {
            let req = format!("GET / HTTP/1.0\r\nConnection: {tokens}\r\n\r\n");
            assert!(outcome(req.as_bytes()).contains("close=true"), "{tokens}");
        }
    }

    #[test]
    fn content_length_with_transfer_encoding_is_refused() {
        for req in [
            &b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
        ] {
            assert_eq!(outcome(req), "reject 400", "{}", String::from_utf8_lossy(req));
        }
    }

    #[test]
    fn an_absolute_form_target_is_routed_on_its_own_authority() {
        assert_eq!(
            outcome(b"GET http://b.test:8080/p HTTP/1.1\r\nHost: a.test\r\n\r\n"),
            "GET http://b.test:8080/p 1.1 close=false host=Some(\"b.test:8080\") consumed=51"
        );
    }

    #[test]
    fn a_target_of_another_scheme_or_form_is_refused() {
        for req in [
            &b"GET ftp://evil.example/index.php HTTP/1.1\r\nHost: a.test\r\n\r\n"[..],
            b"GET ftp://a.test:80@evil.example/x HTTP/1.1\r\nHost: a.test\r\n\r\n",
            b"POST ftp://evil.example/x HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\n\r\nx",
            b"GET evil.example:80 HTTP/1.1\r\nHost: a.test\r\n\r\n",
        ] {
            assert_eq!(
                outcome(req),
                "reject 400",
                "{}",
                String::from_utf8_lossy(req)
            );
        }
        assert!(outcome(b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n").starts_with("OPTIONS *"));
        assert!(outcome(b"GET HTTPS://a.test/x HTTP/1.1\r\nHost: a\r\n\r\n").starts_with("GET"));
    }

    #[test]
    fn bodies_upgrades_other_methods_and_the_h2_preface_go_to_hyper() {
        for req in [
            &b"POST / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
            b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            b"GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
            b"GET / HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
            H2_PREFACE,
        ] {
            assert_eq!(outcome(req), "handoff", "{}", String::from_utf8_lossy(req));
        }
        assert!(outcome(b"GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").starts_with("GET"));
    }

    #[test]
    fn partial_heads_wait_and_oversized_ones_are_rejected() {
        assert_eq!(outcome(b"GET / HTTP/1.1\r\nHost"), "incomplete");
        assert_eq!(outcome(&H2_PREFACE[..5]), "incomplete");
        let long_line = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(100));
        assert_eq!(outcome(long_line.as_bytes()), "reject 414");
        let unfinished_line = "a".repeat(100);
        assert_eq!(outcome(unfinished_line.as_bytes()), "reject 414");
        let big_head = format!("GET / HTTP/1.1\r\nX: {}", "v".repeat(1100));
        assert_eq!(outcome(big_head.as_bytes()), "reject 431");
        assert_eq!(
            outcome(b"GET / HTTP/1.1\r\nbad header\r\n\r\n"),
            "reject 400"
        );
        assert_eq!(outcome(b"GET / HTTP/9.9\r\n\r\n"), "reject 400");
        // An invalid HTTP/2 preface (h2spec 3.5/2) is no HTTP/1.x request: no answer.
        assert_eq!(outcome(b"INVALID CONNECTION PREFACE\r\n\r\n"), "drop");
    }

    /// A request line exactly at the limit parses whole, and every prefix of it waits
    /// (the fuzzer's find: a prefix ending in its CR was measured with the CR, so 414).
    #[test]
    fn a_request_line_at_the_limit_is_measured_alike_whole_and_in_pieces() {
        let line = format!("GET /{} HTTP/1.1", "a".repeat(64 - 14));
        assert_eq!(line.len(), limits().max_request_line);
        let req = format!("{line}\r\nHost: x\r\n\r\n");
        assert!(
            outcome(req.as_bytes()).starts_with("GET"),
            "{}",
            outcome(req.as_bytes())
        );
        for cut in 1..req.len() {
            assert_eq!(outcome(&req.as_bytes()[..cut]), "incomplete", "{cut} bytes");
        }
        let over = format!("GET /a{} HTTP/1.1\r", "a".repeat(64 - 14));
        assert_eq!(outcome(over.as_bytes()), "reject 414");
    }

    #[test]
    fn leading_empty_lines_are_skipped() {
        assert_eq!(leading_empty_lines(b"\r\n\r\nGET"), 4);
        assert_eq!(leading_empty_lines(b"\r\n"), 2);
        assert_eq!(leading_empty_lines(b"GET"), 0);
    }
}
