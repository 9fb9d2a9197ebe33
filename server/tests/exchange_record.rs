//! One exchange record for every connection path: the same static, whole backend and
//! streamed backend requests over the HTTP/1.1 fast path, HTTP/1.1 through hyper and h2c
//! give the same access-log fields and the same metric deltas (status and body bytes),
//! against a real php-fpm.

mod common;
use common::backends::*;
use common::*;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// How a request reaches the server.
#[derive(Debug, Clone, Copy)]
enum Transport {
    /// GET with no body: the fast path.
    FastPath,
    /// GET with an empty chunked body: the fast path hands it to hyper.
    Hyper,
    /// HTTP/2 with prior knowledge: hyper.
    H2c,
}

impl Transport {
    fn curl_args(self) -> Vec<&'static str> {
        match self {
            Transport::FastPath => vec!["--http1.1"],
            Transport::Hyper => vec![
                "--http1.1",
                "-X",
                "GET",
                "-H",
                "Transfer-Encoding: chunked",
                "--data-binary",
                "",
            ],
            Transport::H2c => vec!["--http2-prior-knowledge"],
        }
    }

    fn protocol(self) -> &'static str {
        match self {
            Transport::H2c => "HTTP/2.0",
            _ => "HTTP/1.1",
        }
    }
}

/// A php-fpm for the site and a config that serves it with JSON access lines: the
/// backend (stopped on drop), the config file and the log's path.
fn php_logging_json(site: &Path) -> (Backend, std::path::PathBuf, std::path::PathBuf) {
    let port = free_port();
    let fpm = php_fpm(site, &format!("127.0.0.1:{port}"));
    let log = site.join("access.json");
    let config = write_config(
        site,
        &format!(
            "access_log: {{ format: json, path: {} }}\n{}",
            log.display(),
            php_config(site, &format!("127.0.0.1:{port}"))
        ),
    );
    (fpm, config, log)
}

/// Sends one request with curl; returns the status and the body's length.
fn fetch(srv: &Server, via: Transport, target: &str) -> (u16, usize) {
    let body = tempfile::NamedTempFile::new().unwrap();
    let out = Command::new("curl")
        .args(["-sS", "-o"])
        .arg(body.path())
        .args([
            "-w",
            "%{http_code}",
            "-A",
            "cross-path/1",
            "-e",
            "http://ref/",
        ])
        .args(via.curl_args())
        .arg(srv.url(target))
        .output()
        .unwrap();
    assert!(out.status.success(), "curl {via:?} {target}: {out:?}");
    let status = String::from_utf8_lossy(&out.stdout).parse().unwrap();
    (status, std::fs::read(body.path()).unwrap().len())
}

/// The JSON access-log lines written so far.
fn log_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn metric_or_zero(srv: &Server, sample: &str) -> f64 {
    srv.metric(sample).unwrap_or(0.0)
}

#[test]
fn every_path_records_the_same_exchange() {
    let site = php_site();
    std::fs::write(
        site.path().join("hello.php"),
        "<?php echo str_repeat('hello ', 100);",
    )
    .unwrap();
    // Past the I/O cache: HTTP/2 reads it into its write batches as frames are cut.
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(site.path().join("big.bin"), &big).unwrap();
    let (_fpm, config, log) = php_logging_json(site.path());
    let srv = Server::run_config(&config);
    let bytes_sample = "skiff_http_response_bytes_total{vhost=\"php\"}";
    let count_sample = "skiff_http_requests_total{vhost=\"php\",method=\"GET\",code=\"200\"}";
    let pool_sample = "skiff_upstream_requests_total{pool=\"php\",code=\"200\"}";
    // (target, answered by the pool, streamed by the backend)
    let targets = [
        ("/static.txt", false),
        ("/big.bin", false),
        ("/hello.php", true),
        ("/stream.php", true),
    ];
    let mut expected_lines = 0;
    for (target, pooled) in targets {
        let mut seen = Vec::new();
        for via in [Transport::FastPath, Transport::Hyper, Transport::H2c] {
            let (bytes0, count0, pool0) = (
                metric_or_zero(&srv, bytes_sample),
                metric_or_zero(&srv, count_sample),
                metric_or_zero(&srv, pool_sample),
            );
            let (status, len) = fetch(&srv, via, target);
            assert_eq!(status, 200, "{via:?} {target}");
            assert!(len > 0, "{via:?} {target}: empty body");
            expected_lines += 1;
            // The log is flushed once a second; the record of a streamed body is written
            // when its last byte has gone.
            let end = Instant::now() + Duration::from_secs(10);
            let mut lines = log_lines(&log);
            while lines.len() < expected_lines && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(100));
                lines = log_lines(&log);
            }
            assert_eq!(lines.len(), expected_lines, "{via:?} {target}: {lines:?}");
            let line = lines.last().unwrap().clone();
            assert_eq!(line["protocol"], via.protocol(), "{line:?}");
            assert_eq!(line["bytes"], len, "{via:?} {target}: {line:?}");
            assert_eq!(
                metric_or_zero(&srv, bytes_sample) - bytes0,
                len as f64,
                "{via:?} {target}: response bytes"
            );
            assert_eq!(
                metric_or_zero(&srv, count_sample) - count0,
                1.0,
                "{via:?} {target}"
            );
            let pool_delta = metric_or_zero(&srv, pool_sample) - pool0;
            assert_eq!(
                pool_delta,
                if pooled { 1.0 } else { 0.0 },
                "{via:?} {target}"
            );
            seen.push((via, line));
        }
        // Every field but the protocol and the timings is the same on every path.
        let fields = [
            "method",
            "target",
            "status",
            "bytes",
            "vhost",
            "pool",
            "referer",
            "user_agent",
            "remote",
        ];
        let (first_via, first) = &seen[0];
        for (via, line) in &seen[1..] {
            for f in fields {
                assert_eq!(
                    line[f], first[f],
                    "{target}: field {f} differs between {first_via:?} and {via:?}"
                );
            }
        }
        assert_eq!(first["target"], target);
        assert_eq!(first["user_agent"], "cross-path/1");
        assert_eq!(first["referer"], "http://ref/");
        let pool = if pooled {
            "php".into()
        } else {
            serde_json::Value::Null
        };
        assert_eq!(first["pool"], pool);
        assert_eq!(first["vhost"], "php");
    }
    // A streamed body is timed to its last byte on every path (stream.php writes for
    // about 800 ms), and its first byte comes before.
    for line in log_lines(&log)
        .into_iter()
        .filter(|l| l["target"] == "/stream.php")
    {
        let total = line["duration_us"].as_u64().unwrap();
        let first = line["first_byte_us"].as_u64().unwrap();
        assert!(total >= 700_000, "not timed to the end: {line:?}");
        assert!(first < total, "{line:?}");
    }
}

/// A head refused before it is a request (here a header line without a colon) is still an
/// exchange: its 400 reaches the access log and the request counter, as nginx logs it,
/// so a log watcher such as fail2ban sees the client that sent it.
#[test]
fn a_refused_head_is_logged_and_counted() {
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    let sample = "skiff_http_requests_total{vhost=\"unknown\",method=\"OTHER\",code=\"400\"}";
    let before = metric_or_zero(&srv, sample);
    let answer = raw_exchange(srv.addr, "GET /x HTTP/1.1\r\nbad header\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let log = srv.access_log();
        if log
            .lines()
            .any(|l| l.starts_with("127.0.0.1 ") && l.contains("\"- - HTTP/1.1\" 400 "))
        {
            break;
        }
        assert!(Instant::now() < end, "no 400 in the access log: {log}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(metric_or_zero(&srv, sample), before + 1.0);
}

/// Body bytes in a response read to the connection's end: after the head, and for a
/// chunked body only the chunks' data (the last chunk may be cut short).
fn body_bytes_received(raw: &[u8]) -> u64 {
    let at = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a whole head")
        + 4;
    let head = String::from_utf8_lossy(&raw[..at]).to_ascii_lowercase();
    let mut body = &raw[at..];
    if !head.contains("transfer-encoding: chunked") {
        return body.len() as u64;
    }
    let mut data = 0u64;
    loop {
        let Some(eol) = body.windows(2).position(|w| w == b"\r\n") else {
            return data;
        };
        let size = usize::from_str_radix(std::str::from_utf8(&body[..eol]).unwrap(), 16).unwrap();
        body = &body[eol + 2..];
        if size == 0 {
            return data;
        }
        let got = size.min(body.len());
        data += got as u64;
        if got < size {
            return data;
        }
        body = &body[(size + 2).min(body.len())..];
    }
}

/// A client that stops reading gets its connection cut after the send timeout, part way
/// through a chunk of a paced download or of a pool's streamed body: the access log still
/// counts every body byte the socket took, not only whole chunks, so it matches what the
/// client can read once it drains its socket.
#[test]
fn a_body_cut_part_way_through_a_chunk_counts_the_bytes_that_left() {
    let site = php_site();
    std::fs::create_dir_all(site.path().join("slow")).unwrap();
    std::fs::write(site.path().join("slow/big.bin"), vec![7u8; 16 << 20]).unwrap();
    // 64 KiB records, each a chunk on the wire, far more than the sockets hold.
    std::fs::write(
        site.path().join("big.php"),
        "<?php for ($i = 0; $i < 256; $i++) { echo str_repeat('x', 65536); flush(); }",
    )
    .unwrap();
    let port = free_port();
    let _fpm = php_fpm(site.path(), &format!("127.0.0.1:{port}"));
    let log = site.path().join("access.json");
    // 1.28 MB/s: chunks of 64 KiB; the first second's worth leaves at once.
    let config = write_config(
        site.path(),
        &format!(
            r#"access_log: {{ format: json, path: {log} }}
limits: {{ send_timeout: 1s }}
virtual_servers:
  - name: php
    default: true
    root: {root}
    rules:
      - match: {{ regex: "\\.php$" }}
        action: {{ fastcgi: {{ pool: php }} }}
      - match: {{ prefix: /slow/ }}
        action: {{ static: {{}} }}
        bandwidth: {{ per_connection: 1280000 }}
pools:
  - {{ name: php, protocol: fastcgi, endpoints: ["127.0.0.1:{port}"], read_timeout: 5s }}
"#,
            log = log.display(),
            root = site.path().display(),
        ),
    );
    let srv = Server::run_config(&config);
    for (n, target) in ["/slow/big.bin", "/big.php"].into_iter().enumerate() {
        let mut s = small_buffer_socket(srv.addr, 4096);
        s.write_all(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .unwrap();
        // Past the send timeout without reading: the server gives up on the connection.
        std::thread::sleep(Duration::from_secs(3));
        let raw = read_until_closed(&mut s, Duration::from_secs(10))
            .unwrap_or_else(|| panic!("{target}: the connection was not closed"));
        let received = body_bytes_received(&raw);
        assert!(received > 0, "{target}: no body");
        let end = Instant::now() + Duration::from_secs(10);
        let mut lines = log_lines(&log);
        while lines.len() <= n && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(100));
            lines = log_lines(&log);
        }
        let line = &lines[n];
        assert_eq!(line["target"], target, "{line:?}");
        assert_eq!(
            line["bytes"], received,
            "{target}: the log's body bytes against those the client read"
        );
    }
}

/// A client that leaves before its pool answers is still an exchange: the backend may run
/// the request all the same, so the access log and the counters show it, as nginx's 499.
#[test]
fn a_client_gone_before_the_pool_answers_is_recorded_as_499() {
    let site = php_site();
    std::fs::write(
        site.path().join("slow.php"),
        "<?php usleep(500000); file_put_contents(__DIR__ . '/ran', '1'); echo 'done';",
    )
    .unwrap();
    let (_fpm, config, log) = php_logging_json(site.path());
    let srv = Server::run_config(&config);
    // The fast path (a GET), then hyper (a POST with a body).
    let requests = [
        &b"GET /slow.php HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"POST /slow.php HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
    ];
    for (n, request) in requests.into_iter().enumerate() {
        let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
        s.write_all(request).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        drop(s);
        let end = Instant::now() + Duration::from_secs(10);
        let mut lines = log_lines(&log);
        while lines.len() <= n && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(100));
            lines = log_lines(&log);
        }
        assert_eq!(lines.len(), n + 1, "{lines:?}");
        let line = &lines[n];
        assert_eq!(line["target"], "/slow.php");
        assert_eq!(line["status"], 499, "{line:?}");
        assert_eq!(line["pool"], "php");
    }
    for method in ["GET", "POST"] {
        let sample =
            format!("skiff_http_requests_total{{vhost=\"php\",method=\"{method}\",code=\"499\"}}");
        assert_eq!(metric_or_zero(&srv, &sample), 1.0, "{method}");
    }
}

/// The grace period's end cuts what is still going on the fast path: a download whose
/// client stopped reading, and a pool request the backend has not answered. Both are
/// recorded before the process exits: the download with the bytes that left, the pool
/// request as 499.
#[test]
fn exchanges_cut_at_the_grace_periods_end_are_recorded() {
    let site = php_site();
    std::fs::write(
        site.path().join("slow.php"),
        "<?php sleep(30); echo 'late';",
    )
    .unwrap();
    std::fs::write(site.path().join("huge.bin"), vec![b'q'; 32 << 20]).unwrap();
    let (_fpm, config, log) = php_logging_json(site.path());
    let grace = ["--shutdown-delay", "0s", "--shutdown-grace", "1s"];
    let mut srv = Server::run_config_with(&config, &grace);
    let mut download = std::net::TcpStream::connect(srv.addr).unwrap();
    download
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    download
        .write_all(b"GET /huge.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    assert!(std::io::Read::read(&mut download, &mut buf).unwrap() > 0);
    let mut pooled = std::net::TcpStream::connect(srv.addr).unwrap();
    pooled
        .write_all(b"GET /slow.php HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    srv.signal("TERM");
    assert_eq!(srv.wait_exit(Duration::from_secs(10)), Some(0));
    assert!(srv.stderr_text().contains("grace period over"));
    let lines = log_lines(&log);
    let line = |target: &str| {
        lines
            .iter()
            .find(|l| l["target"] == target)
            .unwrap_or_else(|| panic!("{target} is not in the log: {lines:?}"))
    };
    let cut = line("/huge.bin");
    assert_eq!(cut["status"], 200);
    let bytes = cut["bytes"].as_u64().unwrap();
    assert!(bytes > 0 && bytes < 32 << 20, "the bytes that left: {cut}");
    let waiting = line("/slow.php");
    assert_eq!(waiting["status"], 499, "{waiting}");
    assert_eq!(waiting["pool"], "php");
}
