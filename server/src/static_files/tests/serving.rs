//! Answers to requests: files, directories, refusals, methods, conditionals, ranges.

use super::*;

#[test]
fn serves_a_file_with_representation_headers() {
    let s = site(basic);
    let r = s.files.respond(&get("/a.txt"));
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(body(&r), TEXT.as_bytes());
    assert_eq!(
        header(&r, "content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(header(&r, "accept-ranges"), Some("bytes"));
    assert_eq!(header(&r, "cache-control"), Some("public, max-age=60"));
    let etag = header(&r, "etag").unwrap();
    assert!(
        etag.starts_with('"') && etag.ends_with('"') && !etag.starts_with("W/"),
        "strong etag: {etag}"
    );
    assert!(header(&r, "last-modified").unwrap().ends_with(" GMT"));
    assert!(header(&r, "vary").is_none(), "no sidecars, no Vary");
}

#[test]
fn directories_redirect_index_and_listing() {
    let s = site(basic);
    let r = s.files.respond(&RequestHead {
        query: Some("x=1"),
        ..get("/docs")
    });
    assert_eq!(r.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(header(&r, "location"), Some("/docs/?x=1"));
    // The redirect is built from the cleaned path: never a scheme-relative URL.
    let r = s.files.respond(&get("//evil.example/../docs"));
    assert_eq!(r.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(header(&r, "location"), Some("/docs/"));
    let r = s.files.respond(&get("/docs/"));
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(body(&r), b"<h1>docs</h1>");
    assert_eq!(header(&r, "content-type"), Some("text/html; charset=utf-8"));
    // Listing is off by default.
    assert_eq!(
        s.files.respond(&get("/empty/")).status,
        StatusCode::FORBIDDEN
    );
    let listing = site_with(
        StaticOptions {
            listing: true,
            ..default_options()
        },
        CacheSettings::default(),
        basic,
    );
    let r = listing.files.respond(&get("/"));
    assert_eq!(r.status, StatusCode::OK);
    let html = String::from_utf8(body(&r)).unwrap();
    assert!(
        html.contains("a.txt") && html.contains("docs/") && !html.contains(".env"),
        "{html}"
    );
}

#[test]
fn missing_hidden_and_bad_paths() {
    let s = site(basic);
    assert_eq!(
        s.files.respond(&get("/nope.txt")).status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        s.files.respond(&get("/a.txt/")).status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(s.files.respond(&get("/.env")).status, StatusCode::NOT_FOUND);
    assert_eq!(
        s.files.respond(&get("/../etc/passwd")).status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        s.files.respond(&get("/a.txt%00.html")).status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        s.files.respond(&get("/docs%2findex.html")).status,
        StatusCode::BAD_REQUEST
    );
}

#[test]
fn symlinks_out_of_root_are_refused_inside_ones_served() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "top secret").unwrap();
    let target = outside.path().join("secret");
    let s = site(|p| {
        basic(p);
        std::os::unix::fs::symlink(&target, p.join("escape")).unwrap();
        std::os::unix::fs::symlink("/etc", p.join("etc")).unwrap();
        std::os::unix::fs::symlink("a.txt", p.join("alias.txt")).unwrap();
    });
    assert_eq!(
        s.files.respond(&get("/escape")).status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        s.files.respond(&get("/etc/passwd")).status,
        StatusCode::FORBIDDEN
    );
    let r = s.files.respond(&get("/alias.txt"));
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(body(&r), TEXT.as_bytes());
}

#[test]
fn methods() {
    let s = site(basic);
    let r = s.files.respond(&RequestHead {
        method: Method::OPTIONS,
        ..get("/a.txt")
    });
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(header(&r, "allow"), Some("GET, HEAD, OPTIONS"));
    let r = s.files.respond(&RequestHead {
        method: Method::DELETE,
        ..get("/a.txt")
    });
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(header(&r, "allow"), Some("GET, HEAD, OPTIONS"));
    let r = s.files.respond(&RequestHead {
        method: Method::HEAD,
        ..get("/a.txt")
    });
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.body.len(),
        TEXT.len() as u64,
        "HEAD keeps the length for Content-Length"
    );
}

#[test]
fn conditional_requests() {
    let s = site(basic);
    let first = s.files.respond(&get("/a.txt"));
    let etag = header(&first, "etag").unwrap().to_owned();
    let lm = header(&first, "last-modified").unwrap().to_owned();

    let mut req = get("/a.txt");
    req.preconditions.if_none_match = Some(etag.as_bytes());
    let r = s.files.respond(&req);
    assert_eq!(r.status, StatusCode::NOT_MODIFIED);
    assert_eq!(header(&r, "etag"), Some(etag.as_str()));
    assert_eq!(header(&r, "cache-control"), Some("public, max-age=60"));
    assert!(r.body.is_empty());

    let mut req = get("/a.txt");
    req.preconditions.if_modified_since = Some(lm.as_bytes());
    assert_eq!(s.files.respond(&req).status, StatusCode::NOT_MODIFIED);

    let mut req = get("/a.txt");
    req.preconditions.if_match = Some(b"\"something-else\"");
    assert_eq!(
        s.files.respond(&req).status,
        StatusCode::PRECONDITION_FAILED
    );

    let mut req = get("/a.txt");
    req.preconditions.if_unmodified_since = Some(b"Sun, 06 Nov 1994 08:49:37 GMT");
    assert_eq!(
        s.files.respond(&req).status,
        StatusCode::PRECONDITION_FAILED
    );

    let mut req = get("/a.txt");
    req.preconditions.if_match = Some(etag.as_bytes());
    assert_eq!(s.files.respond(&req).status, StatusCode::OK);
}

#[test]
fn ranges_single_multi_suffix_and_unsatisfiable() {
    let s = site(basic);
    let mut req = get("/a.txt");
    req.range = Some(b"bytes=2-5");
    let r = s.files.respond(&req);
    assert_eq!(r.status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(body(&r), b"2345");
    assert_eq!(header(&r, "content-range"), Some("bytes 2-5/36"));

    req.range = Some(b"bytes=-3");
    assert_eq!(body(&s.files.respond(&req)), b"xyz");
    req.range = Some(b"bytes=33-");
    assert_eq!(body(&s.files.respond(&req)), b"xyz");

    req.range = Some(b"bytes=0-1,10-11");
    let r = s.files.respond(&req);
    assert_eq!(r.status, StatusCode::PARTIAL_CONTENT);
    let ctype = header(&r, "content-type").unwrap().to_owned();
    let boundary = ctype
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap();
    let text = String::from_utf8(body(&r)).unwrap();
    assert_eq!(
        text,
        format!(
            "\r\n--{boundary}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Range: bytes 0-1/36\r\n\r\n01\
             \r\n--{boundary}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Range: bytes 10-11/36\r\n\r\nab\
             \r\n--{boundary}--\r\n"
        )
    );

    req.range = Some(b"bytes=100-");
    let r = s.files.respond(&req);
    assert_eq!(r.status, StatusCode::RANGE_NOT_SATISFIABLE);
    assert_eq!(header(&r, "content-range"), Some("bytes */36"));

    // HEAD ignores Range, as does a failed If-Range.
    req.range = Some(b"bytes=0-1");
    req.method = Method::HEAD;
    assert_eq!(s.files.respond(&req).status, StatusCode::OK);
    req.method = Method::GET;
    req.if_range = Some(b"\"stale\"");
    assert_eq!(s.files.respond(&req).status, StatusCode::OK);
    let etag = header(&s.files.respond(&get("/a.txt")), "etag")
        .unwrap()
        .to_owned();
    req.if_range = Some(etag.as_bytes());
    assert_eq!(s.files.respond(&req).status, StatusCode::PARTIAL_CONTENT);
}

#[test]
fn large_files_are_served_from_an_open_descriptor() {
    let big = vec![7u8; 300 * 1024];
    let s = site(|p| std::fs::write(p.join("big.bin"), &big).unwrap());
    let r = s.files.respond(&get("/big.bin"));
    assert!(
        matches!(r.body, Body::File(_)),
        "over the threshold: a file body for sendfile"
    );
    assert_eq!(body(&r).len(), big.len());
    let mut req = get("/big.bin");
    req.range = Some(b"bytes=1000-1009");
    let r = s.files.respond(&req);
    assert!(matches!(&r.body, Body::File(f) if f.offset == 1000 && f.len == 10));
}

/// A Unix socket in the root (whose open fails with ENXIO) is refused as a FIFO is, not
/// answered 500 with a warning per request.
#[test]
fn a_socket_in_the_root_is_forbidden() {
    let s = site(|p| {
        basic(p);
        // The socket file stays when the listener closes, and still refuses an open.
        drop(std::os::unix::net::UnixListener::bind(p.join("app.sock")).unwrap());
    });
    assert_eq!(
        s.files.respond(&get("/app.sock")).status,
        StatusCode::FORBIDDEN
    );
}
