//! A decoded request header block checked against RFC 9113 §8.2-8.3 and kept as the
//! bytes it decoded to (`Head`): a server answering from a file reads it in place, and
//! only a request handed on (a body, a pool) becomes `http::request::Parts`. Trailers
//! become a `HeaderMap`.

use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri, Version};

/// A range of `Head::buf`.
type Span = (u32, u32);

/// Fields one block may carry, whatever the header list size allows: a `HeaderMap`
/// holds at most 24,576 (more panics), and no real request comes near.
const MAX_FIELDS: usize = 4096;

/// A request head as decoded: pseudo-headers are spans of one string, fields spans of
/// one buffer, every one checked at least as strictly as `http`'s types check it (names
/// are RFC 9110 tokens, where `http` also takes `"`), so `into_parts` cannot refuse it.
#[derive(Debug, Clone, Default)]
pub struct Head {
    pub method: Method,
    /// `:scheme`, `:authority` and `:path`.
    pseudo: String,
    /// Field names and values.
    buf: Vec<u8>,
    scheme: Option<Span>,
    authority: Option<Span>,
    path: Option<Span>,
    /// Regular fields, names and values, in the order received.
    fields: Vec<(Span, Span)>,
    /// The content-length field, parsed.
    pub content_length: Option<u64>,
    /// Where the fields every request is asked for are in `fields`: priority, referer,
    /// user-agent (the first of each).
    known: [Option<u16>; 3],
}

const PRIORITY: usize = 0;
const REFERER: usize = 1;
const USER_AGENT: usize = 2;

impl Head {
    fn span(&self, (start, end): Span) -> &[u8] {
        &self.buf[start as usize..end as usize]
    }

    fn text(&self, (start, end): Span) -> &str {
        &self.pseudo[start as usize..end as usize]
    }

    /// `:path` (path and query), or `/` for CONNECT, which has none.
    pub fn target(&self) -> &str {
        self.path.map_or("/", |p| self.text(p))
    }

    /// `:authority`, which takes the place of Host (RFC 9113 §8.3.1).
    pub fn authority(&self) -> Option<&str> {
        self.authority.map(|a| self.text(a))
    }

    pub fn scheme(&self) -> Option<&str> {
        self.scheme.map(|s| self.text(s))
    }

    /// The regular fields, names lowercase, in the order received.
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields
            .iter()
            .map(|&(n, v)| (self.span(n), self.span(v)))
    }

    fn known(&self, which: usize) -> Option<&[u8]> {
        let (_, value) = self.fields[usize::from(self.known[which]?)];
        Some(self.span(value))
    }

    /// RFC 9218's priority field.
    pub fn priority(&self) -> Option<&[u8]> {
        self.known(PRIORITY)
    }

    pub fn referer(&self) -> Option<&[u8]> {
        self.known(REFERER)
    }

    pub fn user_agent(&self) -> Option<&[u8]> {
        self.known(USER_AGENT)
    }

    /// The first value of a field, by name (any case).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.fields()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    }

    /// The head as `http` types, for a request handed to a handler.
    pub fn into_parts(self) -> Result<http::request::Parts, &'static str> {
        let mut uri = http::uri::Parts::default();
        if let Some(a) = self.authority {
            uri.authority =
                Some(Authority::try_from(self.text(a)).map_err(|_| "invalid :authority")?);
        }
        if let Some(p) = self.path {
            uri.path_and_query =
                Some(PathAndQuery::try_from(self.text(p)).map_err(|_| "invalid :path")?);
            // http's Uri has no scheme without an authority.
            if let (Some(s), true) = (self.scheme, uri.authority.is_some()) {
                uri.scheme = Some(Scheme::try_from(self.text(s)).map_err(|_| "invalid :scheme")?);
            }
        }
        let mut headers = HeaderMap::with_capacity(self.fields.len());
        for (name, value) in self.fields() {
            let name = HeaderName::from_lowercase(name).map_err(|_| "invalid field name")?;
            let value = HeaderValue::from_bytes(value).map_err(|_| "invalid field value")?;
            headers.append(name, value);
        }
        join_cookies(&mut headers);
        let (mut parts, ()) = http::Request::new(()).into_parts();
        parts.uri = Uri::from_parts(uri).map_err(|_| "invalid request target")?;
        parts.method = self.method;
        parts.version = Version::HTTP_2;
        parts.headers = headers;
        Ok(parts)
    }
}

/// Fields of one block as the decoder passes them. The first problem is kept and the
/// rest of the block ignored: the block must still be decoded to its end for HPACK.
#[derive(Default)]
pub(crate) struct Fields {
    head: Head,
    /// `Head::pseudo` until the block ends.
    pseudo: Vec<u8>,
    method: Option<Method>,
    regular_seen: bool,
    trailers: bool,
    pub error: Option<&'static str>,
}

impl Fields {
    pub fn request() -> Fields {
        Fields::default()
    }

    pub fn trailers() -> Fields {
        Fields {
            trailers: true,
            ..Fields::default()
        }
    }

    pub fn content_length(&self) -> Option<u64> {
        self.head.content_length
    }

    pub fn field(&mut self, name: &[u8], value: &[u8]) {
        if self.error.is_none() {
            if let Err(why) = self.check(name, value) {
                self.error = Some(why);
            }
        }
    }

    /// Keeps a field: its name and value go to the head's buffer.
    fn keep(&mut self, name: &[u8], value: &[u8]) {
        let head = &mut self.head;
        if head.fields.capacity() == 0 {
            // One allocation each for a typical head.
            head.fields.reserve(16);
            head.buf.reserve(512);
        }
        let which = match name {
            b"priority" => Some(PRIORITY),
            b"referer" => Some(REFERER),
            b"user-agent" => Some(USER_AGENT),
            _ => None,
        };
        if let Some(k) = which {
            if head.known[k].is_none() {
                head.known[k] = u16::try_from(head.fields.len()).ok();
            }
        }
        let start = head.buf.len() as u32;
        head.buf.extend_from_slice(name);
        let middle = head.buf.len() as u32;
        head.buf.extend_from_slice(value);
        head.fields
            .push(((start, middle), (middle, head.buf.len() as u32)));
    }

    /// Keeps a pseudo-header's value, checked to be text (the block's text is checked
    /// as UTF-8 once, at its end).
    fn keep_pseudo(&mut self, value: &[u8]) -> Span {
        let pseudo = &mut self.pseudo;
        if pseudo.capacity() == 0 {
            pseudo.reserve(128);
        }
        let start = pseudo.len() as u32;
        pseudo.extend_from_slice(value);
        (start, pseudo.len() as u32)
    }

    fn check(&mut self, name: &[u8], value: &[u8]) -> Result<(), &'static str> {
        // §8.2.1: no NUL, CR or LF, and no leading or trailing whitespace.
        if matches!(value.first(), Some(b' ' | b'\t')) || matches!(value.last(), Some(b' ' | b'\t'))
        {
            return Err("field value with surrounding whitespace");
        }
        if let Some(pseudo) = name.strip_prefix(b":") {
            return self.pseudo(pseudo, value);
        }
        self.regular_seen = true;
        if self.head.fields.len() >= MAX_FIELDS {
            return Err("too many header fields");
        }
        // Uppercase is malformed in HTTP/2 (§8.2).
        if name.is_empty() || !name.iter().all(|&b| is_lowercase_token(b)) {
            return Err("invalid or uppercase field name");
        }
        if crate::h2::hpack::is_connection_specific(name) {
            return Err("connection-specific field");
        }
        if name == b"te" && value != b"trailers" {
            return Err("te other than trailers");
        }
        if !value.iter().all(|&b| is_field_value_byte(b)) {
            return Err("invalid field value");
        }
        if name == b"content-length" {
            let n = parse_u64(value).ok_or("invalid content-length")?;
            if self.head.content_length.is_some_and(|c| c != n) {
                return Err("conflicting content-length");
            }
            self.head.content_length = Some(n);
        }
        self.keep(name, value);
        Ok(())
    }

    fn pseudo(&mut self, name: &[u8], value: &[u8]) -> Result<(), &'static str> {
        if self.trailers {
            return Err("pseudo-header in trailers");
        }
        if self.regular_seen {
            return Err("pseudo-header after a regular field");
        }
        let repeated = match name {
            b"method" => self.method.is_some(),
            b"scheme" => self.head.scheme.is_some(),
            b"authority" => self.head.authority.is_some(),
            b"path" => self.head.path.is_some(),
            _ => return Err("unknown or response pseudo-header"),
        };
        if repeated {
            return Err("repeated pseudo-header");
        }
        match name {
            b"method" => {
                self.method = Some(Method::from_bytes(value).map_err(|_| "invalid :method")?);
            }
            b"scheme" => {
                let span = match value {
                    b"http" | b"https" => self.keep_pseudo(value),
                    _ => {
                        let scheme = Scheme::try_from(value).map_err(|_| "invalid :scheme")?;
                        self.keep_pseudo(scheme.as_str().as_bytes())
                    }
                };
                self.head.scheme = Some(span);
            }
            b"authority" => {
                // A name or IPv4 address with a port or none reads the same to `http`;
                // anything else (IPv6, userinfo: refused later with 400) is asked of it.
                let span = match plain_authority(value) {
                    true => self.keep_pseudo(value),
                    false => {
                        let a = Authority::try_from(value).map_err(|_| "invalid :authority")?;
                        self.keep_pseudo(a.as_str().as_bytes())
                    }
                };
                self.head.authority = Some(span);
            }
            _ => {
                if value.is_empty() {
                    return Err("empty :path");
                }
                // RFC 3986's path and query characters read the same to `http`; anything
                // else (a fragment, bytes past ASCII) is kept as `http` reads it.
                let span = match plain_target(value) {
                    true => self.keep_pseudo(value),
                    false => {
                        let p = PathAndQuery::try_from(value).map_err(|_| "invalid :path")?;
                        self.keep_pseudo(p.as_str().as_bytes())
                    }
                };
                self.head.path = Some(span);
            }
        }
        Ok(())
    }

    /// The request head, or why the block is malformed (§8.3.1).
    pub fn into_request(self) -> Result<Head, &'static str> {
        if let Some(why) = self.error {
            return Err(why);
        }
        let mut head = self.head;
        head.method = self.method.ok_or("missing :method")?;
        // Every pseudo-header value kept is ASCII or came from `http`'s types as text.
        head.pseudo = String::from_utf8(self.pseudo).map_err(|_| "pseudo-header not text")?;
        if head.method == Method::CONNECT {
            // Extended CONNECT (RFC 8441) is not offered, so CONNECT is the plain form.
            if head.scheme.is_some() || head.path.is_some() {
                return Err("CONNECT with :scheme or :path");
            }
            if head.authority.is_none() {
                return Err("CONNECT without :authority");
            }
            return Ok(head);
        }
        if head.scheme.is_none() {
            return Err("missing :scheme");
        }
        let Some(path) = head.path else {
            return Err("missing :path");
        };
        // Exactly `*` with OPTIONS (asterisk-form); otherwise an origin-form path.
        let p = head.text(path);
        if !(p.starts_with('/') || p == "*" && head.method == Method::OPTIONS) {
            return Err("invalid :path for the method");
        }
        Ok(head)
    }

    pub fn into_trailers(self) -> Result<HeaderMap, &'static str> {
        if let Some(why) = self.error {
            return Err(why);
        }
        let mut map = HeaderMap::with_capacity(self.head.fields.len());
        for (name, value) in self.head.fields() {
            let name = HeaderName::from_lowercase(name).map_err(|_| "invalid field name")?;
            let value = HeaderValue::from_bytes(value).map_err(|_| "invalid field value")?;
            map.append(name, value);
        }
        Ok(map)
    }
}

/// RFC 9110 §5.6.2's tchar, lowercase letters only (as `HeaderName::from_lowercase`).
fn is_lowercase_token(b: u8) -> bool {
    matches!(b,
        b'a'..=b'z' | b'0'..=b'9' | b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+'
        | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~')
}

/// What `HeaderValue::from_bytes` accepts: visible bytes, spaces and tabs, and bytes past
/// ASCII; no other control byte.
fn is_field_value_byte(b: u8) -> bool {
    b == b'\t' || (b >= 0x20 && b != 0x7f)
}

/// An origin-form target of RFC 3986's pchar, `/` and `?` only, which `http`'s
/// `PathAndQuery` reads as it is (no fragment to cut, nothing to decode as UTF-8).
fn plain_target(value: &[u8]) -> bool {
    let plain = |b: u8| {
        matches!(b,
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'!' | b'$'
            | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=' | b':' | b'@'
            | b'%' | b'/' | b'?')
    };
    value.first() == Some(&b'/') && value.len() <= MAX_TARGET && value.iter().all(|&b| plain(b))
}

/// `http`'s longest `PathAndQuery`.
const MAX_TARGET: usize = u16::MAX as usize - 1;

/// A `name[:port]` authority of letters, digits, `-`, `.` and `_`, with a port of one to
/// five digits: `http`'s `Authority` reads it as it is.
fn plain_authority(value: &[u8]) -> bool {
    let (name, port) = match value.iter().position(|&b| b == b':') {
        Some(i) => (&value[..i], Some(&value[i + 1..])),
        None => (value, None),
    };
    let name_ok = !name.is_empty()
        && name.len() <= MAX_TARGET
        && name
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    let port_ok = port.is_none_or(|p| {
        (1..=5).contains(&p.len())
            && p.iter().all(u8::is_ascii_digit)
            && p.iter().fold(0u32, |n, &d| n * 10 + u32::from(d - b'0')) <= 65535
    });
    name_ok && port_ok
}

/// A content-length: digits only (RFC 9110 §8.6), no overflow.
fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |n, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add((b - b'0') as u64)
    })
}

#[cfg(test)]
mod tests;

/// A cookie a client split into one field per pair, for compression, made one field again
/// before it leaves (RFC 9113 §8.2.3): a CGI backend keeps one HTTP_COOKIE, an HTTP/1.1
/// one may join repeated fields with commas. Valid values joined with "; " stay valid.
pub fn join_cookies(headers: &mut HeaderMap) {
    if headers
        .get_all(http::header::COOKIE)
        .iter()
        .nth(1)
        .is_none()
    {
        return;
    }
    let mut joined = Vec::new();
    for (i, v) in headers.get_all(http::header::COOKIE).iter().enumerate() {
        if i > 0 {
            joined.extend_from_slice(b"; ");
        }
        joined.extend_from_slice(v.as_bytes());
    }
    if let Ok(joined) = HeaderValue::from_bytes(&joined) {
        headers.insert(http::header::COOKIE, joined);
    }
}
