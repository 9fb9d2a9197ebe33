//! A decoded request header block checked against RFC 9113 §8.2-8.3 and turned into
//! `http::request::Parts`; trailers likewise into a `HeaderMap`.

use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri, Version};

/// Fields of one block as the decoder passes them. The first problem is kept and the
/// rest of the block ignored: the block must still be decoded to its end for HPACK.
#[derive(Default)]
pub(crate) struct Fields {
    method: Option<Method>,
    scheme: Option<Scheme>,
    authority: Option<Authority>,
    path: Option<PathAndQuery>,
    headers: HeaderMap,
    pub content_length: Option<u64>,
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

    pub fn field(&mut self, name: &[u8], value: &[u8]) {
        if self.error.is_none() {
            if let Err(why) = self.check(name, value) {
                self.error = Some(why);
            }
        }
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
        // Uppercase is malformed in HTTP/2 (§8.2): from_lowercase refuses it.
        let name =
            HeaderName::from_lowercase(name).map_err(|_| "invalid or uppercase field name")?;
        if crate::h2::hpack::is_connection_specific(&name) {
            return Err("connection-specific field");
        }
        if name == http::header::TE && value != b"trailers" {
            return Err("te other than trailers");
        }
        let value = HeaderValue::from_bytes(value).map_err(|_| "invalid field value")?;
        if name == http::header::CONTENT_LENGTH {
            let n = parse_u64(value.as_bytes()).ok_or("invalid content-length")?;
            if self.content_length.is_some_and(|c| c != n) {
                return Err("conflicting content-length");
            }
            self.content_length = Some(n);
        }
        self.headers.append(name, value);
        Ok(())
    }

    fn pseudo(&mut self, name: &[u8], value: &[u8]) -> Result<(), &'static str> {
        if self.trailers {
            return Err("pseudo-header in trailers");
        }
        if self.regular_seen {
            return Err("pseudo-header after a regular field");
        }
        fn once<T>(
            slot: &mut Option<T>,
            v: Option<T>,
            bad: &'static str,
        ) -> Result<(), &'static str> {
            if slot.is_some() {
                return Err("repeated pseudo-header");
            }
            *slot = Some(v.ok_or(bad)?);
            Ok(())
        }
        match name {
            b"method" => once(
                &mut self.method,
                Method::from_bytes(value).ok(),
                "invalid :method",
            ),
            b"scheme" => once(
                &mut self.scheme,
                Scheme::try_from(value).ok(),
                "invalid :scheme",
            ),
            b"authority" => once(
                &mut self.authority,
                Authority::try_from(value).ok(),
                "invalid :authority",
            ),
            b"path" => {
                if value.is_empty() {
                    return Err("empty :path");
                }
                once(
                    &mut self.path,
                    PathAndQuery::try_from(value).ok(),
                    "invalid :path",
                )
            }
            _ => Err("unknown or response pseudo-header"),
        }
    }

    /// The request head, or why the block is malformed (§8.3.1).
    pub fn into_request(self) -> Result<http::request::Parts, &'static str> {
        if let Some(why) = self.error {
            return Err(why);
        }
        let method = self.method.ok_or("missing :method")?;
        let mut uri = http::uri::Parts::default();
        if method == Method::CONNECT {
            // Extended CONNECT (RFC 8441) is not offered, so CONNECT is the plain form.
            if self.scheme.is_some() || self.path.is_some() {
                return Err("CONNECT with :scheme or :path");
            }
            uri.authority = Some(self.authority.ok_or("CONNECT without :authority")?);
        } else {
            let scheme = self.scheme.ok_or("missing :scheme")?;
            let path = self.path.ok_or("missing :path")?;
            // Exactly `*` with OPTIONS (asterisk-form); otherwise an origin-form path.
            let p = path.as_str();
            if !(p.starts_with('/') || p == "*" && method == Method::OPTIONS) {
                return Err("invalid :path for the method");
            }
            // http's Uri has no scheme without an authority.
            if let Some(authority) = self.authority {
                uri.scheme = Some(scheme);
                uri.authority = Some(authority);
            }
            uri.path_and_query = Some(path);
        }
        let (mut parts, ()) = http::Request::new(()).into_parts();
        parts.method = method;
        parts.uri = Uri::from_parts(uri).map_err(|_| "invalid request target")?;
        parts.version = Version::HTTP_2;
        parts.headers = self.headers;
        Ok(parts)
    }

    pub fn into_trailers(self) -> Result<HeaderMap, &'static str> {
        match self.error {
            Some(why) => Err(why),
            None => Ok(self.headers),
        }
    }
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
mod tests {
    use super::*;

    fn request(fields: &[(&str, &str)]) -> Result<http::request::Parts, &'static str> {
        let mut f = Fields::request();
        for (n, v) in fields {
            f.field(n.as_bytes(), v.as_bytes());
        }
        f.into_request()
    }

    const GET: [(&str, &str); 4] = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/a?b"),
    ];

    #[test]
    fn a_valid_request() {
        let mut fields = GET.to_vec();
        fields.push(("accept", "*/*"));
        fields.push(("te", "trailers"));
        let p = request(&fields).unwrap();
        assert_eq!(p.method, Method::GET);
        assert_eq!(p.uri, "https://example.com/a?b");
        assert_eq!(p.version, Version::HTTP_2);
        assert_eq!(p.headers["accept"], "*/*");
        // Without :authority: the path alone.
        let p = request(&[(":method", "GET"), (":scheme", "http"), (":path", "/")]).unwrap();
        assert_eq!(p.uri, "/");
    }

    /// Each malformed case h2spec 8.1.2.x sends, with the reason it gives.
    #[test]
    fn malformed_requests() {
        let with = |extra: (&'static str, &'static str)| {
            let mut f = GET.to_vec();
            f.push(extra);
            request(&f).unwrap_err()
        };
        assert_eq!(with(("X-Upper", "1")), "invalid or uppercase field name");
        assert_eq!(with((":unknown", "1")), "unknown or response pseudo-header");
        assert_eq!(
            with(("connection", "keep-alive")),
            "connection-specific field"
        );
        assert_eq!(with(("te", "gzip")), "te other than trailers");
        assert_eq!(
            with(("x", " padded")),
            "field value with surrounding whitespace"
        );
        assert_eq!(with(("x", "a\r\nb")), "invalid field value");
        let mut f = vec![("x", "1")];
        f.extend(GET);
        assert_eq!(
            request(&f).unwrap_err(),
            "pseudo-header after a regular field"
        );
        let mut f = GET.to_vec();
        f.insert(0, (":status", "200"));
        assert_eq!(
            request(&f).unwrap_err(),
            "unknown or response pseudo-header"
        );
        let mut f = GET.to_vec();
        f.insert(1, (":method", "GET"));
        assert_eq!(request(&f).unwrap_err(), "repeated pseudo-header");
        for (i, why) in [
            (0, "missing :method"),
            (1, "missing :scheme"),
            (3, "missing :path"),
        ] {
            let mut f = GET.to_vec();
            f.remove(i);
            assert_eq!(request(&f).unwrap_err(), why);
        }
        let mut f = GET.to_vec();
        f[3] = (":path", "");
        assert_eq!(request(&f).unwrap_err(), "empty :path");
        // `*` is for OPTIONS alone (http's parser already refuses any other path
        // starting with `*`: "invalid :path").
        let mut f = GET.to_vec();
        f[3] = (":path", "*");
        assert_eq!(request(&f).unwrap_err(), "invalid :path for the method");
        f[3] = (":path", "*/a");
        assert!(request(&f).is_err());
        let mut f = GET.to_vec();
        f[0] = (":method", "OPTIONS");
        f[3] = (":path", "*");
        assert_eq!(request(&f).unwrap().uri.path(), "*");
    }

    #[test]
    fn content_length_and_connect() {
        let mut f = GET.to_vec();
        f.push(("content-length", "10"));
        f.push(("content-length", "10"));
        let mut fields = Fields::request();
        for (n, v) in &f {
            fields.field(n.as_bytes(), v.as_bytes());
        }
        assert_eq!(fields.content_length, Some(10));
        f.push(("content-length", "11"));
        assert_eq!(request(&f).unwrap_err(), "conflicting content-length");
        let p = request(&[(":method", "CONNECT"), (":authority", "h:443")]).unwrap();
        assert_eq!(p.uri, "h:443");
        assert!(request(&[
            (":method", "CONNECT"),
            (":authority", "h:443"),
            (":path", "/")
        ])
        .is_err());
    }

    #[test]
    fn trailers_refuse_pseudo_headers() {
        let mut t = Fields::trailers();
        t.field(b"x-sum", b"1");
        assert_eq!(t.into_trailers().unwrap()["x-sum"], "1");
        let mut t = Fields::trailers();
        t.field(b":path", b"/");
        assert_eq!(t.into_trailers().unwrap_err(), "pseudo-header in trailers");
    }
}
