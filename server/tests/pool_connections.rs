//! Pool requests on clients' connections: HTTP/1.1 keep-alive connections shared with
//! static files, and request and response bodies over HTTP/2, against php-fpm.

mod common;
use common::backends::*;
use common::*;
use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

/// One HTTP/1.x response read off a raw connection: status, lower-cased headers, and the
/// body as delimited by Content-Length, chunked coding, or (for `to_eof`) the close.
struct RawResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

fn read_response(r: &mut impl std::io::BufRead, head_only: bool) -> RawResponse {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status: u16 = line
        .split(' ')
        .nth(1)
        .expect("a status line")
        .parse()
        .unwrap();
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').unwrap();
        headers.push((n.to_ascii_lowercase(), v.trim().to_string()));
    }
    let mut resp = RawResponse {
        status,
        headers,
        body: Vec::new(),
    };
    if head_only {
        return resp;
    }
    if let Some(n) = resp.header("content-length") {
        let mut body = vec![0; n.parse().unwrap()];
        r.read_exact(&mut body).unwrap();
        resp.body = body;
    } else if resp.header("transfer-encoding") == Some("chunked") {
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            let size = usize::from_str_radix(line.trim_end(), 16).unwrap();
            let mut chunk = vec![0; size + 2];
            r.read_exact(&mut chunk).unwrap();
            assert_eq!(&chunk[size..], b"\r\n", "a chunk ends with CRLF");
            if size == 0 {
                break;
            }
            resp.body.extend_from_slice(&chunk[..size]);
        }
    } else {
        r.read_to_end(&mut resp.body).unwrap();
    }
    resp
}

/// Pool requests without a body are served on the HTTP/1.1 fast path, so one keep-alive
/// connection carries static files and PHP pages in any order, pipelined or not: whole
/// backend responses get a Content-Length, streamed ones chunked coding (HTTP/1.1) or the
/// connection's close (HTTP/1.0), and HEAD gets no body.
#[test]
fn pool_requests_share_keep_alive_connections_with_static_files() {
    let (_site, _fpm, srv) = php_over_tcp();
    let stream = std::net::TcpStream::connect(srv.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut w = stream.try_clone().unwrap();
    let mut r = std::io::BufReader::new(stream);
    // Pipelined: static, PHP, static.
    w.write_all(
        b"GET /static.txt HTTP/1.1\r\nHost: a\r\n\r\nGET /echo.php?q=1 HTTP/1.1\r\nHost: a\r\nX-Test: pipelined\r\n\r\nGET /static.txt HTTP/1.1\r\nHost: a\r\n\r\n",
    )
    .unwrap();
    let first = read_response(&mut r, false);
    assert_eq!(
        (first.status, first.body.as_slice()),
        (200, &b"served by skiff"[..])
    );
    let php = read_response(&mut r, false);
    assert_eq!(php.status, 200);
    let text = String::from_utf8(php.body.clone()).unwrap();
    assert!(text.contains("QUERY_STRING=q=1\n"), "{text}");
    assert!(text.contains("HTTP_X_TEST=pipelined\n"), "{text}");
    assert_eq!(php.header("x-powered"), Some("fpm"));
    assert!(php.header("date").is_some());
    let third = read_response(&mut r, false);
    assert_eq!(
        (third.status, third.body.as_slice()),
        (200, &b"served by skiff"[..])
    );
    // A streamed PHP response on the same connection: chunked, every chunk there.
    w.write_all(b"GET /stream.php HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    let streamed = read_response(&mut r, false);
    assert_eq!(streamed.header("transfer-encoding"), Some("chunked"));
    assert_eq!(streamed.header("content-length"), None);
    let text = String::from_utf8(streamed.body).unwrap();
    for i in 0..5 {
        assert!(text.contains(&format!("chunk{i} ")), "chunk {i} missing");
    }
    // HEAD: the head only; the connection stays usable.
    w.write_all(
        b"HEAD /echo.php HTTP/1.1\r\nHost: a\r\n\r\nGET /static.txt HTTP/1.1\r\nHost: a\r\n\r\n",
    )
    .unwrap();
    let head = read_response(&mut r, true);
    assert_eq!(head.status, 200);
    // PHP declared no length, and the empty body of a HEAD response is not one.
    assert_eq!(head.header("content-length"), None);
    let after = read_response(&mut r, false);
    assert_eq!(after.body, b"served by skiff");

    // HTTP/1.0 and a streamed body: delimited by the close.
    let mut s10 = std::net::TcpStream::connect(srv.addr).unwrap();
    s10.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s10.write_all(b"GET /stream.php HTTP/1.0\r\n\r\n").unwrap();
    let mut r10 = std::io::BufReader::new(s10);
    let old = read_response(&mut r10, false);
    assert_eq!(old.header("connection"), Some("close"));
    assert_eq!(old.header("transfer-encoding"), None);
    assert!(String::from_utf8(old.body).unwrap().contains("chunk4 "));
    assert!(
        srv.metric("skiff_upstream_requests_total{pool=\"php\",code=\"200\"}")
            .unwrap()
            >= 4.0
    );
}

#[test]
fn request_bodies_reach_a_pool_over_http2() {
    let (site, _fpm, srv) = php_over_tcp();
    // Several MiB, more than any window: the body flows as the pool reads it.
    let upload: Vec<u8> = (0..5 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    let file = site.path().join("upload.bin");
    std::fs::write(&file, &upload).unwrap();
    let data = format!("@{}", file.display());
    let url = srv.url("/upload.php");
    // Over h2c, one request per connection (curl 7.88 fails a second transfer on a
    // prior-knowledge connection, whatever the server: h2load runs several below).
    let post = |body: &str| {
        let out = curl(&[
            "--http2-prior-knowledge",
            "-H",
            "Content-Type: application/octet-stream",
            "--data-binary",
            body,
            &url,
        ]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(
        post(&data),
        format!("{} {}", upload.len(), sha256_hex(&upload))
    );
    assert_eq!(post("hello"), format!("5 {}", sha256_hex(b"hello")));
    // Four at once on one connection: each stream's body waits for its window in turn.
    let h2load = Command::new("h2load")
        .args([
            "-n",
            "4",
            "-c",
            "1",
            "-m",
            "4",
            "-H",
            "content-type: text/plain",
            "-d",
        ])
        .arg(&file)
        .arg(&url)
        .output()
        .expect("h2load is installed");
    let report = String::from_utf8_lossy(&h2load.stdout).into_owned();
    assert!(
        report.contains("4 succeeded") && report.contains("4 2xx"),
        "{report}"
    );
    // Recorded as HTTP/2 exchanges.
    let end = Instant::now() + Duration::from_secs(5);
    while srv
        .access_log()
        .matches("POST /upload.php HTTP/2.0")
        .count()
        < 6
        && Instant::now() < end
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        srv.access_log()
            .matches("POST /upload.php HTTP/2.0")
            .count(),
        6,
        "{}",
        srv.access_log()
    );
}

/// Over HTTP/2, a pool's answer to HEAD, and its 204, go out without DATA (which would make
/// the response malformed, RFC 9113 §8.1.1), and HEAD carries no length the backend did
/// not declare; a cookie sent as several fields reaches PHP as one (RFC 9113 §8.2.3).
#[test]
fn pool_answers_over_http2_are_framed_as_http_says_and_split_cookies_are_joined() {
    let (site, _fpm, srv) = php_over_tcp();
    std::fs::write(
        site.path().join("nocontent.php"),
        "<?php http_response_code(204); echo 'not for the client';",
    )
    .unwrap();
    std::fs::write(
        site.path().join("cookie.php"),
        "<?php echo $_SERVER['HTTP_COOKIE'] ?? 'none';",
    )
    .unwrap();
    std::fs::write(
        site.path().join("unchanged.php"),
        "<?php http_response_code(304); header('Content-Length: 40'); echo 'not for the client';",
    )
    .unwrap();
    let h2 = "--http2-prior-knowledge";
    let (status, headers, body) = curl_i(&[h2, "-I", &srv.url("/echo.php")]);
    assert_eq!(status, 200);
    assert!(body.is_empty());
    assert!(
        !headers.iter().any(|(n, _)| n == "content-length"),
        "PHP declared no length: {headers:?}"
    );
    let (status, _, body) = curl_i(&[h2, &srv.url("/nocontent.php")]);
    assert_eq!((status, body.as_slice()), (204, &b""[..]));
    // A 204, or a 304, carries no length even for HEAD (RFC 9110 §8.6), as on HTTP/1.1.
    for path in ["/nocontent.php", "/unchanged.php"] {
        for head in [true, false] {
            let mut args = vec![h2];
            if head {
                args.push("-I");
            }
            let url = srv.url(path);
            args.push(&url);
            let (status, headers, body) = curl_i(&args);
            assert!(matches!(status, 204 | 304), "{path}: {status}");
            assert!(body.is_empty(), "{path}");
            assert!(
                !headers.iter().any(|(n, _)| n == "content-length"),
                "{path} (HEAD {head}): {headers:?}"
            );
        }
    }
    let out = curl(&[
        h2,
        "-H",
        "cookie: session=abc",
        "-H",
        "cookie: theme=dark",
        &srv.url("/cookie.php"),
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "session=abc; theme=dark"
    );

    // hyper's HTTP/2 engine, kept for comparison, joins them too.
    let config = site.path().join("skiff.yaml");
    let hyper_engine = Server::run_config_with(&config, &["--h2-engine", "hyper"]);
    let out = curl(&[
        h2,
        "-H",
        "cookie: session=abc",
        "-H",
        "cookie: theme=dark",
        &hyper_engine.url("/cookie.php"),
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "session=abc; theme=dark"
    );
}

/// Over HTTP/2, a request the configuration cannot answer at once (a pool) is routed once
/// in the connection's poll and handed to its handler with that routing: a rate limit
/// counts it once, as over HTTP/1.1.
#[test]
fn an_http2_request_to_a_rate_limited_pool_is_counted_once() {
    let site = php_site();
    let port = free_port();
    let _fpm = php_fpm(site.path(), &format!("127.0.0.1:{port}"));
    let config = php_config(site.path(), &format!("127.0.0.1:{port}")).replace(
        "action: { fastcgi: { pool: php } }",
        "action: { fastcgi: { pool: php } }\n        rate_limit: { requests_per_second: 0.05, burst: 3 }",
    );
    assert!(config.contains("rate_limit"), "{config}");
    let srv = Server::run_config(&write_config(site.path(), &config));
    // Three requests one after another on one connection: the burst's three tokens.
    let h2load = Command::new("h2load")
        .args(["-n", "3", "-c", "1", "-m", "1"])
        .arg(srv.url("/echo.php"))
        .output()
        .expect("h2load is installed");
    let report = String::from_utf8_lossy(&h2load.stdout).into_owned();
    assert!(report.contains("3 2xx"), "{report}");
    // The fourth finds the bucket empty.
    let h2load = Command::new("h2load")
        .args(["-n", "1", "-c", "1"])
        .arg(srv.url("/echo.php"))
        .output()
        .expect("h2load is installed");
    let report = String::from_utf8_lossy(&h2load.stdout).into_owned();
    assert!(report.contains("1 4xx"), "{report}");
}
