//! What a header name, a header value, a method and a cookie may hold, and the fields
//! the server writes itself: shared by the checks of rules and of request headers.

fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

pub(super) fn http_method_invalid(m: &str) -> bool {
    m.is_empty() || !m.bytes().all(is_token_char)
}

/// Fields the server writes itself to frame a response and manage the connection: a
/// rule's copy beside them would give two framings (a response a proxy in front may split
/// differently from the client) or a connection header HTTP/2 forbids.
const FRAMING_HEADERS: [&str; 8] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
];

pub(super) fn framing_header(name: &str) -> Option<String> {
    FRAMING_HEADERS
        .iter()
        .any(|f| f.eq_ignore_ascii_case(name))
        .then(|| format!("{name:?} frames the response or the connection, which the server manages itself; a rule cannot change it"))
}

pub(super) fn header_name_invalid(n: &str) -> bool {
    n.is_empty() || !n.bytes().all(is_token_char)
}

/// RFC 6265 §4.1.1: a cookie name is a token.
pub(super) fn cookie_name_invalid(n: &str) -> bool {
    header_name_invalid(n)
}

/// RFC 6265 §4.1.1's cookie-octet: visible ASCII but `"`, `,`, `;` and `\`.
pub(super) fn cookie_value_byte(b: u8) -> bool {
    matches!(b, 0x21 | 0x23..=0x2b | 0x2d..=0x3a | 0x3c..=0x5b | 0x5d..=0x7e)
}

pub(super) fn header_value_invalid(v: &str) -> bool {
    v.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f)
}
