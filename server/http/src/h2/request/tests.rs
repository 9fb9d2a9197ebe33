use super::*;

fn request(fields: &[(&str, &str)]) -> Result<http::request::Parts, &'static str> {
    let mut f = Fields::request();
    for (n, v) in fields {
        f.field(n.as_bytes(), v.as_bytes());
    }
    f.into_request().and_then(Head::into_parts)
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

fn head(fields: &[(&str, &[u8])]) -> Result<Head, &'static str> {
    let mut f = Fields::request();
    for (n, v) in fields {
        f.field(n.as_bytes(), v);
    }
    f.into_request()
}

/// The head is read in place exactly as `http` would read it: a target outside RFC
/// 3986's plain characters goes through `PathAndQuery` (a fragment is cut, UTF-8 kept),
/// an authority beyond host[:port] through `Authority`.
#[test]
fn the_head_reads_as_http_reads_it() {
    let get = |path: &'static [u8], authority: &'static [u8]| {
        head(&[
            (":method", b"GET"),
            (":scheme", b"https"),
            (":authority", authority),
            (":path", path),
            ("user-agent", b"t/1"),
            ("accept", b"*/*"),
        ])
    };
    let h = get(b"/a/b?x=1&y=%20", b"example.com:8443").unwrap();
    assert_eq!(h.user_agent(), Some(&b"t/1"[..]));
    assert_eq!((h.referer(), h.priority()), (None, None));
    assert_eq!(h.target(), "/a/b?x=1&y=%20");
    assert_eq!(h.authority(), Some("example.com:8443"));
    assert_eq!(h.scheme(), Some("https"));
    assert_eq!(h.get("User-Agent"), Some(&b"t/1"[..]));
    let p = h.clone().into_parts().unwrap();
    assert_eq!(p.uri, "https://example.com:8443/a/b?x=1&y=%20");
    assert_eq!(p.headers["user-agent"], "t/1");
    let get = |path: &'static [u8], authority: &'static [u8]| {
        head(&[
            (":method", b"GET"),
            (":scheme", b"http"),
            (":authority", authority),
            (":path", path),
        ])
    };
    assert_eq!(get(b"/a#frag", b"h").unwrap().target(), "/a");
    assert_eq!(
        get("/caf\u{e9}".as_bytes(), b"h").unwrap().target(),
        "/caf\u{e9}"
    );
    assert_eq!(get(b"/a b", b"h").unwrap_err(), "invalid :path");
    assert_eq!(get(b"/\xff", b"h").unwrap_err(), "invalid :path");
    // Userinfo is an authority to `http`: kept here, refused by the front (400).
    assert_eq!(get(b"/", b"u@h").unwrap().authority(), Some("u@h"));
    assert_eq!(
        get(b"/", b"[::1]:80").unwrap().authority(),
        Some("[::1]:80")
    );
    assert_eq!(get(b"/", b"a b").unwrap_err(), "invalid :authority");
    for h in [
        get(b"/a#frag", b"h:"),
        get(b"/", b"u@h"),
        get(b"/%7e?q=/?", b"[::1]"),
    ] {
        h.unwrap().into_parts().unwrap();
    }
    let mut f = Fields::request();
    for (n, v) in GET {
        f.field(n.as_bytes(), v.as_bytes());
    }
    f.field(b"x", b"a\x7fb");
    assert_eq!(f.into_request().unwrap_err(), "invalid field value");
}

/// However large the header list allowed, a block carries at most `MAX_FIELDS`
/// fields (a `HeaderMap` past 24,576 panics).
#[test]
fn too_many_fields_are_refused() {
    let mut f = Fields::request();
    for (n, v) in GET {
        f.field(n.as_bytes(), v.as_bytes());
    }
    for _ in 0..MAX_FIELDS {
        f.field(b"a", b"");
    }
    assert!(f.error.is_none());
    f.field(b"a", b"");
    assert_eq!(f.into_request().unwrap_err(), "too many header fields");
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
    assert_eq!(fields.content_length(), Some(10));
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
