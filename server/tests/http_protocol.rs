//! The real binary over real sockets: HTTP/1.1, keep-alive, pipelining, HEAD, OPTIONS,
//! conditional requests, ranges, sidecars, traversal attempts and limits (HTTP/2 in
//! http2_protocol.rs).

mod common;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[test]
fn keep_alive_and_pipelining_answer_in_order() {
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    let req = "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n\
               HEAD /index.html HTTP/1.1\r\nHost: t\r\n\r\n\
               GET /docs/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let resp = raw_exchange(srv.addr, req);
    let starts: Vec<_> = resp
        .match_indices("HTTP/1.1 200 OK")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(starts.len(), 3, "{resp}");
    assert!(resp.contains("0123456789abcdefghijklmnopqrstuvwxyz"));
    // HEAD: length of the file, no body, so the next response follows its head directly.
    let head_part = &resp[starts[1]..starts[2]];
    assert!(head_part.contains("Content-Length: 14\r\n"), "{head_part}");
    assert!(
        head_part.ends_with("\r\n\r\n"),
        "HEAD has no body: {head_part:?}"
    );
    assert!(resp[starts[2]..].contains("<h1>docs</h1>"));
    assert!(resp[starts[2]..].contains("Connection: close"));
}

#[test]
fn keep_alive_connection_serves_many_requests_and_http10_closes() {
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for _ in 0..20 {
        s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf).unwrap();
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(
            text.starts_with("HTTP/1.1 200 OK") && text.ends_with("xyz"),
            "{text}"
        );
    }
    let resp = raw_exchange(srv.addr, "GET /a.txt HTTP/1.0\r\n\r\n");
    assert!(
        resp.starts_with("HTTP/1.1 200 OK") && resp.contains("Connection: close"),
        "{resp}"
    );
    let resp = raw_exchange(
        srv.addr,
        "GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /a.txt HTTP/1.0\r\n\r\n",
    );
    assert_eq!(resp.matches("HTTP/1.1 200 OK").count(), 2, "{resp}");
    assert!(resp.contains("Connection: keep-alive"));
}

#[test]
fn http11_requires_host() {
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    let resp = raw_exchange(srv.addr, "GET /a.txt HTTP/1.1\r\n\r\n");
    assert!(resp.starts_with("HTTP/1.1 400"), "{resp}");
}

#[test]
fn methods_options_and_405() {
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    let (st, h, _) = curl_i(&["-X", "OPTIONS", &srv.url("/a.txt")]);
    assert_eq!(st, 204);
    assert_eq!(get_header(&h, "allow"), Some("GET, HEAD, OPTIONS"));
    let resp = raw_exchange(
        srv.addr,
        "OPTIONS * HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert!(resp.starts_with("HTTP/1.1 204"), "{resp}");
    // POST with a body goes through hyper and still gets the static handler's answer.
    let (st, h, _) = curl_i(&["-X", "POST", "--data", "x=1", &srv.url("/a.txt")]);
    assert_eq!(st, 405);
    assert_eq!(get_header(&h, "allow"), Some("GET, HEAD, OPTIONS"));
    let (st, _, _) = curl_i(&["-X", "DELETE", &srv.url("/a.txt")]);
    assert_eq!(st, 405);
}

#[test]
fn standard_headers() {
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    let (st, h, body) = curl_i(&[&srv.url("/index.html")]);
    assert_eq!(st, 200);
    assert_eq!(body, b"<h1>home</h1>\n");
    assert_eq!(get_header(&h, "server"), Some("skiff"));
    assert_eq!(
        get_header(&h, "content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(get_header(&h, "content-length"), Some("14"));
    assert_eq!(get_header(&h, "accept-ranges"), Some("bytes"));
    assert!(httpdate::parse_http_date(get_header(&h, "date").unwrap()).is_ok());
    assert!(httpdate::parse_http_date(get_header(&h, "last-modified").unwrap()).is_ok());
    let (st, h, _) = curl_i(&[&srv.url("/docs")]);
    assert_eq!(st, 301);
    assert_eq!(get_header(&h, "location"), Some("/docs/"));
}

#[test]
fn conditional_requests_end_to_end() {
    let site = sample_site();
    let srv = Server::start(site.path(), &["--cache-control", "public, max-age=300"]);
    let (_, h, _) = curl_i(&[&srv.url("/a.txt")]);
    let etag = get_header(&h, "etag").unwrap().to_owned();
    let lm = get_header(&h, "last-modified").unwrap().to_owned();

    let (st, h304, body) = curl_i(&["-H", &format!("If-None-Match: {etag}"), &srv.url("/a.txt")]);
    assert_eq!(st, 304);
    assert!(body.is_empty());
    assert_eq!(get_header(&h304, "etag"), Some(etag.as_str()));
    assert_eq!(
        get_header(&h304, "cache-control"),
        Some("public, max-age=300")
    );
    assert!(get_header(&h304, "content-length").is_none());

    let (st, _, _) = curl_i(&[
        "-H",
        &format!("If-None-Match: \"nope\", W/{etag}"),
        &srv.url("/a.txt"),
    ]);
    assert_eq!(st, 304, "weak comparison over a list");
    let (st, _, _) = curl_i(&["-H", "If-None-Match: *", &srv.url("/a.txt")]);
    assert_eq!(st, 304);
    let (st, _, _) = curl_i(&[
        "-H",
        &format!("If-Modified-Since: {lm}"),
        &srv.url("/a.txt"),
    ]);
    assert_eq!(st, 304);
    let (st, _, _) = curl_i(&[
        "-H",
        "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT",
        &srv.url("/a.txt"),
    ]);
    assert_eq!(st, 200);
    let (st, _, _) = curl_i(&["-H", "If-Match: \"other\"", &srv.url("/a.txt")]);
    assert_eq!(st, 412);
    let (st, _, _) = curl_i(&["-H", &format!("If-Match: {etag}"), &srv.url("/a.txt")]);
    assert_eq!(st, 200);
    let (st, _, _) = curl_i(&[
        "-H",
        "If-Unmodified-Since: Sun, 06 Nov 1994 08:49:37 GMT",
        &srv.url("/a.txt"),
    ]);
    assert_eq!(st, 412);
}

#[test]
fn ranges_end_to_end() {
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    let (st, h, body) = curl_i(&["-H", "Range: bytes=10-15", &srv.url("/a.txt")]);
    assert_eq!((st, body.as_slice()), (206, &b"abcdef"[..]));
    assert_eq!(get_header(&h, "content-range"), Some("bytes 10-15/36"));
    assert_eq!(get_header(&h, "content-length"), Some("6"));
    let (_, _, body) = curl_i(&["-H", "Range: bytes=-4", &srv.url("/a.txt")]);
    assert_eq!(body, b"wxyz");
    let (_, _, body) = curl_i(&["-H", "Range: bytes=32-", &srv.url("/a.txt")]);
    assert_eq!(body, b"wxyz");
    let (st, h, _) = curl_i(&["-H", "Range: bytes=99-", &srv.url("/a.txt")]);
    assert_eq!(st, 416);
    assert_eq!(get_header(&h, "content-range"), Some("bytes */36"));

    let (st, h, body) = curl_i(&["-H", "Range: bytes=0-1,-2", &srv.url("/a.txt")]);
    assert_eq!(st, 206);
    let ctype = get_header(&h, "content-type").unwrap();
    let boundary = ctype
        .strip_prefix("multipart/byteranges; boundary=")
        .expect(ctype);
    let text = String::from_utf8(body.clone()).unwrap();
    assert_eq!(text.matches(&format!("--{boundary}\r\n")).count(), 2);
    assert!(text.contains("Content-Range: bytes 0-1/36\r\n\r\n01\r\n"));
    assert!(text.contains("Content-Range: bytes 34-35/36\r\n\r\nyz\r\n"));
    assert!(text.ends_with(&format!("--{boundary}--\r\n")));
    assert_eq!(
        get_header(&h, "content-length")
            .unwrap()
            .parse::<usize>()
            .unwrap(),
        body.len()
    );

    // If-Range with the strong ETag gives the range, with a date that does not match the whole file.
    let (_, h, _) = curl_i(&[&srv.url("/a.txt")]);
    let etag = get_header(&h, "etag").unwrap().to_owned();
    let (st, _, _) = curl_i(&[
        "-H",
        "Range: bytes=0-0",
        "-H",
        &format!("If-Range: {etag}"),
        &srv.url("/a.txt"),
    ]);
    assert_eq!(st, 206);
    let (st, _, body) = curl_i(&[
        "-H",
        "Range: bytes=0-0",
        "-H",
        "If-Range: Sun, 06 Nov 1994 08:49:37 GMT",
        &srv.url("/a.txt"),
    ]);
    assert_eq!((st, body.len()), (200, 36));

    // A range of a large (sendfile) file.
    let (st, _, body) = curl_i(&["-H", "Range: bytes=1000000-1000099", &srv.url("/big.bin")]);
    assert_eq!(st, 206);
    assert_eq!(body, &big_bin_bytes()[1_000_000..1_000_100]);
}

#[test]
fn precompressed_sidecars_end_to_end() {
    let site = sample_site();
    std::fs::write(site.path().join("app.css"), "body { color: red }").unwrap();
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(site.path().join("app.css.gz"), b"GZIPPED").unwrap();
    std::fs::write(site.path().join("app.css.zst"), b"ZSTD").unwrap();
    let srv = Server::start(site.path(), &[]);
    let (_, h, body) = curl_i(&["-H", "Accept-Encoding: gzip, zstd", &srv.url("/app.css")]);
    assert_eq!(body, b"ZSTD");
    assert_eq!(get_header(&h, "content-encoding"), Some("zstd"));
    assert_eq!(get_header(&h, "vary"), Some("Accept-Encoding"));
    let (_, h, body) = curl_i(&["-H", "Accept-Encoding: gzip", &srv.url("/app.css")]);
    assert_eq!(body, b"GZIPPED");
    assert_eq!(get_header(&h, "content-encoding"), Some("gzip"));
    let (_, h, body) = curl_i(&[&srv.url("/app.css")]);
    assert_eq!(body, b"body { color: red }");
    assert!(get_header(&h, "content-encoding").is_none());
    assert_eq!(get_header(&h, "vary"), Some("Accept-Encoding"));
}

#[test]
fn traversal_attempts_never_escape_the_root() {
    let site = sample_site();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "TOP-SECRET").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        site.path().join("link.txt"),
    )
    .unwrap();
    let srv = Server::start(site.path(), &[]);
    for (path, want) in [
        ("/../../../../etc/passwd", 400),
        ("/%2e%2e/%2e%2e/etc/passwd", 400),
        ("/.%2e/.%2e/etc/passwd", 400),
        ("/..%2f..%2fetc/passwd", 400),
        ("/..%5c..%5cetc/passwd", 400),
        ("/a.txt%00.html", 400),
        ("/%c0%ae%c0%ae/etc/passwd", 400),
        ("/.htpasswd", 404),
        ("/docs/../.htpasswd", 404),
        ("/link.txt", 403),
        // A Servlet container would read it as "/../a.txt".
        ("/docs/..;/a.txt", 400),
    ] {
        let resp = raw_exchange(
            srv.addr,
            &format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
        );
        assert!(
            resp.starts_with(&format!("HTTP/1.1 {want}")),
            "{path}: {resp}"
        );
        assert!(
            !resp.contains("root:") && !resp.contains("TOP-SECRET") && !resp.contains("secret"),
            "{path}"
        );
    }
    // The same over the hyper path (h2c).
    let client = reqwest::blocking::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let r = client.get(srv.url("/link.txt")).send().unwrap();
    assert_eq!(r.status(), 403);
    // With the flag, symlinks out of the root are followed.
    let srv2 = Server::start(site.path(), &["--follow-symlinks-outside-root"]);
    let (st, _, body) = curl_i(&[&srv2.url("/link.txt")]);
    assert_eq!((st, body.as_slice()), (200, &b"TOP-SECRET"[..]));
}

#[test]
fn limits_414_431_and_too_many_headers() {
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    let long_path = "/".to_owned() + &"a".repeat(9000);
    let resp = raw_exchange(
        srv.addr,
        &format!("GET {long_path} HTTP/1.1\r\nHost: t\r\n\r\n"),
    );
    assert!(
        resp.starts_with("HTTP/1.1 414"),
        "{}",
        &resp[..40.min(resp.len())]
    );
    let big_header = "x".repeat(17 * 1024);
    let resp = raw_exchange(
        srv.addr,
        &format!("GET /a.txt HTTP/1.1\r\nHost: t\r\nX-Big: {big_header}\r\n\r\n"),
    );
    assert!(
        resp.starts_with("HTTP/1.1 431"),
        "{}",
        &resp[..40.min(resp.len())]
    );
    let many: String = (0..150).map(|i| format!("X-H{i}: v\r\n")).collect();
    let resp = raw_exchange(
        srv.addr,
        &format!("GET /a.txt HTTP/1.1\r\nHost: t\r\n{many}\r\n"),
    );
    assert!(resp.starts_with("HTTP/1.1 431"), "{resp}");
    let resp = raw_exchange(srv.addr, "GARBAGE\r\n\r\n");
    assert!(resp.starts_with("HTTP/1.1 400"), "{resp}");
    // Just under the limit still works.
    let ok_header = "x".repeat(15 * 1024);
    let resp = raw_exchange(
        srv.addr,
        &format!(
            "GET /a.txt HTTP/1.1\r\nHost: t\r\nX-Big: {ok_header}\r\nConnection: close\r\n\r\n"
        ),
    );
    assert!(
        resp.starts_with("HTTP/1.1 200"),
        "{}",
        &resp[..40.min(resp.len())]
    );
}

#[test]
fn slowloris_gets_408_and_idle_keepalive_is_closed() {
    let site = sample_site();
    let srv = Server::start(
        site.path(),
        &["--header-timeout", "300ms", "--keepalive-timeout", "500ms"],
    );
    // A head that never completes.
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nX-Slow: ")
        .unwrap();
    let t0 = std::time::Instant::now();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    assert!(
        String::from_utf8_lossy(&out).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&out)
    );
    assert!(t0.elapsed() < Duration::from_secs(3));
    // An idle keep-alive connection is closed after its timeout, without a response.
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = s.read(&mut buf).unwrap();
    assert!(n > 0);
    let t0 = std::time::Instant::now();
    assert_eq!(s.read(&mut buf).unwrap(), 0, "closed by the server");
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
}

#[test]
fn max_connections_queues_the_excess() {
    let site = sample_site();
    let srv = Server::start(
        site.path(),
        &["--max-connections", "1", "--keepalive-timeout", "60s"],
    );
    // Busy in the middle of a request head: an idle one would be closed to make room.
    let mut first = TcpStream::connect(srv.addr).unwrap();
    first.write_all(b"GET /a.txt HTTP/1.1\r\n").unwrap();
    let admitted = Instant::now() + Duration::from_secs(5);
    while srv.metric("skiff_connections_open") != Some(1.0) {
        assert!(
            Instant::now() < admitted,
            "the first connection was not admitted"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut buf = [0u8; 4096];
    // The second connection is not served while the first is open...
    let mut second = TcpStream::connect(srv.addr).unwrap();
    second
        .set_read_timeout(Some(Duration::from_millis(400)))
        .unwrap();
    second
        .write_all(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert!(
        second.read(&mut buf).is_err(),
        "served beyond the connection limit"
    );
    // ...and is served once it closes.
    drop(first);
    second
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut out = Vec::new();
    second.read_to_end(&mut out).unwrap();
    assert!(String::from_utf8_lossy(&out).starts_with("HTTP/1.1 200"));
}

#[test]
fn on_the_fly_compression_decodes_to_the_original() {
    let site = sample_site();
    let css = "main { display: grid; gap: 1rem; }\n".repeat(300);
    std::fs::write(site.path().join("site.css"), &css).unwrap();
    let srv = Server::start(site.path(), &["--compress"]);
    for (accept, coding) in [("br", "br"), ("gzip", "gzip"), ("zstd", "zstd")] {
        let out = curl(&[
            "-D",
            "-",
            "-o",
            "/dev/null",
            "-H",
            &format!("Accept-Encoding: {accept}"),
            &srv.url("/site.css"),
        ]);
        let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
        assert!(
            head.contains(&format!("content-encoding: {coding}")),
            "{head}"
        );
    }
    // curl decodes what it negotiated: the bytes must be the file's.
    assert_eq!(
        curl(&["--compressed", &srv.url("/site.css")]).stdout,
        css.as_bytes()
    );
    assert_eq!(
        curl(&[
            "--compressed",
            "--http2-prior-knowledge",
            &srv.url("/site.css")
        ])
        .stdout,
        css.as_bytes()
    );
    // No Accept-Encoding: identity.
    let (_, h, body) = curl_i(&[&srv.url("/site.css")]);
    assert_eq!(body, css.as_bytes());
    assert_eq!(get_header(&h, "content-encoding"), None);
    assert_eq!(get_header(&h, "vary"), Some("Accept-Encoding"));
}

#[test]
fn a_request_awaiting_100_continue_for_a_static_answer_gets_the_answer_not_a_100() {
    // The answer is decided without the body (405: POST to files): reading it would have
    // sent 100 Continue and started a 10 MB upload only to reset it.
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(
        b"POST /missing HTTP/1.1\r\nHost: a\r\nContent-Length: 10000000\r\nExpect: 100-continue\r\n\r\n",
    )
    .unwrap();
    let mut got = [0u8; 12];
    s.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"HTTP/1.1 405", "{}", String::from_utf8_lossy(&got));
}

#[test]
fn a_target_of_another_scheme_is_refused_on_the_hyper_path_too() {
    // A POST with a body hands the connection to hyper; the GET after it has a target
    // with an ftp scheme: refused as on the fast path, not routed on its authority.
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.write_all(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nxGET ftp://evil.example/ HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let got = read_until_closed(&mut s, Duration::from_secs(5)).expect("closed");
    let text = String::from_utf8_lossy(&got);
    let statuses: Vec<&str> = text
        .match_indices("HTTP/1.1 ")
        .map(|(i, _)| &text[i + 9..i + 12])
        .collect();
    assert_eq!(statuses, ["405", "400"], "{text}");
}
