//! The real binary over real sockets, HTTP/2: h2c by prior knowledge on the HTTP/1.1
//! port, file responses with HTTP/1.1's fields, resets mid-response and in the request's
//! own read, other schemes refused, and GOAWAY at shutdown and after the keep-alive.

mod common;
use common::*;
use std::time::{Duration, Instant};

/// HTTP/2 answers a file with the fields HTTP/1.1 sends (the validators and length are
/// HPACK-coded once per file version, the rest through the connection's table), the same
/// on the tenth response as on the first, and HEAD and 304 carry no body.
#[test]
fn h2_file_responses_carry_the_fields_http11_sends() {
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    let h1 = reqwest::blocking::Client::builder()
        .http1_only()
        .build()
        .unwrap();
    let h2 = reqwest::blocking::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let want = h1.get(srv.url("/a.txt")).send().unwrap();
    let fields = [
        "etag",
        "last-modified",
        "content-length",
        "content-type",
        "accept-ranges",
    ];
    for round in 0..10 {
        let got = h2.get(srv.url("/a.txt")).send().unwrap();
        assert_eq!(got.version(), reqwest::Version::HTTP_2);
        for f in fields {
            assert_eq!(
                got.headers().get(f),
                want.headers().get(f),
                "{f}, round {round}"
            );
        }
        assert!(got.headers().contains_key("date"));
        assert_eq!(got.headers()["server"], "skiff");
        assert_eq!(got.text().unwrap(), "0123456789abcdefghijklmnopqrstuvwxyz");
    }
    let head = h2.head(srv.url("/a.txt")).send().unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()["content-length"], "36");
    assert_eq!(head.bytes().unwrap().len(), 0);
    let etag = want.headers()["etag"].clone();
    let not_modified = h2
        .get(srv.url("/a.txt"))
        .header("if-none-match", etag.clone())
        .send()
        .unwrap();
    assert_eq!(not_modified.status(), 304);
    assert_eq!(not_modified.headers()["etag"], etag);
    assert!(!not_modified.headers().contains_key("content-length"));
    assert_eq!(not_modified.bytes().unwrap().len(), 0);
    let missing = h2.get(srv.url("/nope.txt")).send().unwrap();
    assert_eq!(missing.status(), 404);
    assert!(missing.text().unwrap().contains("404 Not Found"));
}

#[test]
fn h2c_prior_knowledge_on_the_same_port() {
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    let client = reqwest::blocking::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let resp = client.get(srv.url("/a.txt")).send().unwrap();
    assert_eq!(resp.version(), reqwest::Version::HTTP_2);
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["server"], "skiff");
    assert_eq!(resp.text().unwrap(), "0123456789abcdefghijklmnopqrstuvwxyz");
    // A large body over h2 (pread path) arrives intact.
    let big = client
        .get(srv.url("/big.bin"))
        .send()
        .unwrap()
        .bytes()
        .unwrap();
    assert_eq!(big.as_ref(), big_bin_bytes().as_slice());
    // And a range over h2.
    let r = client
        .get(srv.url("/a.txt"))
        .header("range", "bytes=1-3")
        .send()
        .unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(r.text().unwrap(), "123");
    // A range of the large file across 256 KiB read chunks, ending mid-chunk: exactly
    // its bytes, none read past it.
    let r = client
        .get(srv.url("/big.bin"))
        .header("range", "bytes=300001-1400000")
        .send()
        .unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(
        r.bytes().unwrap().as_ref(),
        &big_bin_bytes()[300_001..=1_400_000]
    );
    let out = curl(&[
        "--http2-prior-knowledge",
        "-o",
        "/dev/null",
        "-w",
        "%{http_version} %{http_code}",
        &srv.url("/index.html"),
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2 200");
}

/// A file of `len` bytes in a fresh site, for HTTP/2 tests that need a long response.
fn site_with_big_file(len: usize) -> tempfile::TempDir {
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("big.bin"), vec![7u8; len]).unwrap();
    std::fs::write(site.path().join("index.html"), b"hello").unwrap();
    site
}

#[test]
fn an_h2_stream_reset_mid_response_leaves_the_connection_serving() {
    let site = site_with_big_file(4 << 20);
    let srv = Server::start(site.path(), &[]);
    let mut c = RawH2::connect(srv.addr);
    c.get(1, "/big.bin");
    // The first DATA of the big file, then the client gives up on it.
    loop {
        let f = c.read().expect("closed before the first DATA");
        if f.kind == RawH2::DATA && f.stream == 1 {
            break;
        }
    }
    c.reset(1, 0x8);
    c.window_update(0, 1 << 30);
    c.get(3, "/index.html");
    let mut body = Vec::new();
    loop {
        let f = c
            .read()
            .expect("the connection closed after a reset stream");
        assert_ne!(f.kind, RawH2::GOAWAY, "GOAWAY after a client reset: {f:?}");
        if f.stream == 3 && f.kind == RawH2::DATA {
            body.extend_from_slice(&f.payload);
            if f.flags & RawH2::END_STREAM != 0 {
                break;
            }
        }
    }
    assert_eq!(body, b"hello");
}

/// A request reset in the same read as its HEADERS is not served, nor logged as answered
/// with bytes that were never sent.
#[test]
fn an_h2_request_reset_in_the_same_read_is_not_served() {
    let site = site_with_big_file(16);
    let srv = Server::start(site.path(), &[]);
    let mut c = RawH2::connect(srv.addr);
    let mut both = RawH2::encode_get(1, "/big.bin");
    both.extend(RawH2::encode(RawH2::RST_STREAM, 0, 1, &8u32.to_be_bytes()));
    c.write(&both);
    c.get(3, "/index.html");
    loop {
        let f = c.read().expect("the connection closed");
        assert!(
            !(f.stream == 1 && f.kind == RawH2::HEADERS),
            "the reset stream was answered"
        );
        if f.stream == 3 && f.flags & RawH2::END_STREAM != 0 {
            break;
        }
    }
    let end = Instant::now() + Duration::from_secs(5);
    while !srv.access_log().contains("/index.html") && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = srv.access_log();
    assert!(log.contains("GET /index.html HTTP/2.0"), "{log}");
    assert!(!log.contains("/big.bin"), "{log}");
}

/// `:scheme: ftp` is refused as an `ftp://` target is over HTTP/1.1 (400), not served
/// from the authority's virtual server.
#[test]
fn an_h2_request_of_another_scheme_is_refused() {
    let site = site_with_big_file(16);
    let srv = Server::start(site.path(), &[]);
    let mut c = RawH2::connect(srv.addr);
    // :method GET (static 2), then :scheme (static name 6), :path and :authority as
    // literals without indexing.
    let mut block = vec![0x82, 0x06, 3];
    block.extend_from_slice(b"ftp");
    block.extend_from_slice(&[0x04, 11]);
    block.extend_from_slice(b"/index.html");
    block.extend_from_slice(&[0x01, 1, b'a']);
    c.frame(RawH2::HEADERS, 0x4 | RawH2::END_STREAM, 1, &block);
    // With a body to come, and Host in place of :authority (stream 3).
    let mut block = vec![0x82, 0x06, 3];
    block.extend_from_slice(b"ftp");
    block.extend_from_slice(&[0x04, 11]);
    block.extend_from_slice(b"/index.html");
    block.extend_from_slice(&[0x00, 4]);
    block.extend_from_slice(b"host");
    block.extend_from_slice(&[1, b'a']);
    c.frame(RawH2::HEADERS, 0x4, 3, &block);
    let mut statuses = std::collections::BTreeMap::new();
    while statuses.len() < 2 {
        let f = c.read().expect("the connection closed before an answer");
        if f.kind == RawH2::HEADERS {
            statuses.insert(f.stream, f.payload[0]);
        }
    }
    // HPACK's static table: 0x8c is `:status 400`, 0x88 `:status 200`.
    assert_eq!(statuses, [(1, 0x8c), (3, 0x8c)].into(), "not 400s");
}

#[test]
fn h2_streams_in_flight_finish_after_the_goaway_of_a_shutdown() {
    let size = 2 << 20;
    let site = site_with_big_file(size);
    let mut srv = Server::start(site.path(), &["--shutdown-grace", "20s"]);
    let mut c = RawH2::connect(srv.addr);
    c.get(1, "/big.bin");
    let (mut got, mut goaway, mut ended) = (0, false, false);
    let mut signalled = false;
    while let Some(f) = c.read() {
        match f.kind {
            RawH2::DATA if f.stream == 1 => {
                got += f.payload.len();
                ended = f.flags & RawH2::END_STREAM != 0;
                if !signalled {
                    // Shutdown begins with the response under way; the window granted
                    // frame by frame keeps it going only as fast as this loop reads.
                    srv.signal("TERM");
                    signalled = true;
                    std::thread::sleep(Duration::from_millis(300));
                }
                if f.payload.is_empty() {
                    continue;
                }
                c.window_update(0, f.payload.len() as u32);
                c.window_update(1, f.payload.len() as u32);
            }
            RawH2::GOAWAY => {
                goaway = true;
                // The last stream the server takes is 1: the one in flight.
                assert_eq!(u32::from_be_bytes(f.payload[..4].try_into().unwrap()), 1);
            }
            _ => {}
        }
    }
    assert!(goaway, "no GOAWAY at shutdown");
    assert!(
        ended && got == size,
        "the stream in flight got {got} of {size} bytes"
    );
    assert!(srv.wait_exit(Duration::from_secs(10)).is_some());
}

#[test]
fn an_idle_h2_connection_gets_goaway_after_the_keepalive_timeout() {
    let site = site_with_big_file(1);
    let srv = Server::start(
        site.path(),
        &["--keepalive-timeout", "1s", "--header-timeout", "5s"],
    );
    let mut c = RawH2::connect(srv.addr);
    c.get(1, "/index.html");
    let started = std::time::Instant::now();
    let mut goaway = None;
    while let Some(f) = c.read() {
        if f.kind == RawH2::GOAWAY {
            goaway = Some(started.elapsed());
            // NO_ERROR: a graceful close.
            assert_eq!(&f.payload[4..8], &[0, 0, 0, 0]);
        }
    }
    let closed = started.elapsed();
    let goaway = goaway.expect("closed without GOAWAY");
    assert!(
        goaway >= Duration::from_millis(900) && closed < Duration::from_secs(5),
        "GOAWAY after {goaway:?}, closed after {closed:?}"
    );
}
