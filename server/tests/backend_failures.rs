//! Backend failures through the real binary: 502, 504 and failover, bounded connects, an
//! endpoint that closes without answering, uploads slower than the read timeout, a backend
//! killed under load, and a client that leaves before its answer.

mod common;
use common::backends::*;
use common::*;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A TCP listener that accepts and then does `what` with each connection.
fn fake_endpoint(what: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                let _ = s.read(&mut buf);
                match what {
                    "hang" => std::thread::sleep(Duration::from_secs(30)),
                    "close" => {}
                    "stall" => {
                        let _ = s.write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nthe first bytes",
                        );
                        std::thread::sleep(Duration::from_secs(30));
                    }
                    _ => {
                        let _ = s.write_all(b"\x00\x01 this is not FastCGI at all\r\n\r\n");
                    }
                }
            });
        }
    });
    port
}

#[test]
fn failures_give_502_504_and_failover() {
    let dir = tempfile::tempdir().unwrap();
    let (_good, good) = echo_server(dir.path(), "good");
    let down = free_port(); // nothing listens there
    let hang = fake_endpoint("hang");
    let garbage = fake_endpoint("garbage");
    let config = write_config(
        dir.path(),
        &format!(
            "virtual_servers:\n  - name: f\n    default: true\n    root: .\n    rules:\n      - match: {{ prefix: /down }}\n        action: {{ proxy: {{ pool: down }} }}\n      - match: {{ prefix: /hang }}\n        action: {{ fastcgi: {{ pool: hang }} }}\n      - match: {{ prefix: /garbage }}\n        action: {{ fastcgi: {{ pool: garbage }} }}\n      - match: {{ prefix: /failover }}\n        action: {{ proxy: {{ pool: mixed }} }}\npools:\n  - {{ name: down, protocol: http, endpoints: [\"127.0.0.1:{down}\"] }}\n  - {{ name: hang, protocol: fastcgi, endpoints: [\"127.0.0.1:{hang}\"], read_timeout: 500ms }}\n  - {{ name: garbage, protocol: fastcgi, endpoints: [\"127.0.0.1:{garbage}\"] }}\n  - {{ name: mixed, protocol: http, endpoints: [\"127.0.0.1:{down}\", \"127.0.0.1:{good}\"], max_fails: 1 }}\n"
        ),
    );
    let srv = Server::run_config(&config);
    assert_eq!(curl_i(&[&srv.url("/down")]).0, 502);
    let t = Instant::now();
    assert_eq!(curl_i(&[&srv.url("/hang")]).0, 504);
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(curl_i(&[&srv.url("/garbage")]).0, 502);
    let end = Instant::now() + Duration::from_secs(5);
    while !srv.stderr_text().contains("pool=\"garbage\"") && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        srv.stderr_text().contains("pool=\"garbage\""),
        "the log names the pool: {}",
        srv.stderr_text()
    );
    // One endpoint down: every request still succeeds, on the other.
    for _ in 0..6 {
        let (st, _, body) = curl_i(&[&srv.url("/failover")]);
        assert_eq!(st, 200, "{}", String::from_utf8_lossy(&body));
    }
    assert!(
        srv.metric("skiff_upstream_failures_total{pool=\"hang\",reason=\"timeout\"}")
            .unwrap()
            >= 1.0
    );
}

/// A listener whose accept queue is full and never drained: a connect to it waits for
/// ever (its SYN is dropped), as to a node that went away. Returns the port and what
/// must stay alive.
fn unanswered_endpoint() -> (u16, Vec<std::os::fd::OwnedFd>) {
    use rustix::net::{AddressFamily, SocketType};
    let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    rustix::net::bind(&fd, &addr).unwrap();
    rustix::net::listen(&fd, 0).unwrap();
    let mut held = vec![fd];
    // Fill the queue: these complete the handshake and are never accepted.
    for _ in 0..4 {
        let c = rustix::net::socket_with(
            AddressFamily::INET,
            SocketType::STREAM,
            rustix::net::SocketFlags::NONBLOCK,
            None,
        )
        .unwrap();
        let _ = rustix::net::connect(&c, &addr);
        held.push(c);
    }
    std::thread::sleep(Duration::from_millis(200));
    (addr.port(), held)
}

#[test]
fn http_pools_bound_connects_and_a_body_the_backend_stops_sending() {
    let dir = tempfile::tempdir().unwrap();
    let (_good, good) = echo_server(dir.path(), "good");
    let stall = fake_endpoint("stall");
    let (unanswered, _held) = unanswered_endpoint();
    let config = write_config(
        dir.path(),
        &format!(
            "virtual_servers:\n  - name: f\n    default: true\n    root: .\n    rules:\n      - match: {{ prefix: /stall }}\n        action: {{ proxy: {{ pool: stall }} }}\n      - match: {{ prefix: /failover }}\n        action: {{ proxy: {{ pool: mixed }} }}\npools:\n  - {{ name: stall, protocol: http, endpoints: [\"127.0.0.1:{stall}\"], read_timeout: 1s }}\n  - {{ name: mixed, protocol: http, balance: round_robin, endpoints: [\"127.0.0.1:{unanswered}\", \"127.0.0.1:{good}\"], connect_timeout: 500ms, read_timeout: 10s }}\n"
        ),
    );
    let srv = Server::run_config(&config);
    // The first bytes, then silence: the connection ends (no whole body) after about the
    // read timeout, not when the backend gives up 30 s later.
    let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
    s.write_all(b"GET /stall HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let t = Instant::now();
    let got = read_until_closed(&mut s, Duration::from_secs(10))
        .expect("the connection was still open 10 s after the backend went silent");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let text = String::from_utf8_lossy(&got);
    // Reframed as chunks; cut off without the last chunk, so not taken for whole.
    assert!(
        text.starts_with("HTTP/1.1 200")
            && text.contains("the first bytes")
            && !text.ends_with("0\r\n\r\n"),
        "{text}"
    );
    // A connect that is never answered gives way to the other endpoint after the
    // connect timeout, not the read timeout.
    for _ in 0..4 {
        let t = Instant::now();
        let (st, _, body) = curl_i(&[&srv.url("/failover")]);
        assert_eq!(st, 200, "{}", String::from_utf8_lossy(&body));
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    }
}

#[test]
fn a_cgi_endpoint_that_closes_without_answering_is_taken_out_of_rotation() {
    // A worker that dies on every request: after max_fails, the pool sends no more
    // requests there, instead of failing every other one. FastCGI and uwsgi alike.
    let site = php_site();
    std::fs::write(site.path().join("app.py"), WSGI_APP).unwrap();
    let (fpm_port, wsgi_port) = (free_port(), free_port());
    let _fpm = php_fpm(site.path(), &format!("127.0.0.1:{fpm_port}"));
    let app = site.path().join("app.py");
    let _wsgi = uwsgi(
        &[
            "--socket",
            &format!("127.0.0.1:{wsgi_port}"),
            "--wsgi-file",
            app.to_str().unwrap(),
        ],
        &format!("127.0.0.1:{wsgi_port}"),
    );
    let broken = fake_endpoint("close");
    let pool = |port: u16| {
        format!("endpoints: [\"127.0.0.1:{broken}\", \"127.0.0.1:{port}\"], balance: round_robin, max_fails: 1, fail_timeout: 60s")
    };
    let config = write_config(
        site.path(),
        &format!(
            "virtual_servers:\n  - name: php\n    default: true\n    root: {}\n    rules:\n      - match: {{ prefix: /py/ }}\n        action: {{ uwsgi: {{ pool: wsgi }} }}\n      - match: {{ regex: \"\\\\.php$\" }}\n        action: {{ fastcgi: {{ pool: php }} }}\npools:\n  - {{ name: php, protocol: fastcgi, {} }}\n  - {{ name: wsgi, protocol: uwsgi, {} }}\n",
            site.path().display(),
            pool(fpm_port),
            pool(wsgi_port)
        ),
    );
    let srv = Server::run_config(&config);
    for (target, ok) in [("/echo.php", 200), ("/py/x", 201)] {
        let statuses: Vec<u16> = (0..8).map(|_| curl_i(&[&srv.url(target)]).0).collect();
        let failed = statuses.iter().filter(|&&s| s == 502).count();
        assert!(failed <= 1, "{target}: {statuses:?}");
        assert_eq!(
            statuses.iter().filter(|&&s| s == ok).count(),
            8 - failed,
            "{target}: {statuses:?}"
        );
    }
}

#[test]
fn an_upload_slower_than_the_read_timeout_reaches_the_backend() {
    // 300 kB over about 5 s to a pool whose read timeout is 3 s, and an answer 2 s after
    // the body: the read timeout runs from the upload's end (not the request's start),
    // and the 1 s send timeout only from a pause of the backend's while it is sent.
    let dir = tempfile::tempdir().unwrap();
    let (_echo, port) = echo_server(dir.path(), "echo");
    let config = write_config(
        dir.path(),
        &format!(
            "virtual_servers:\n  - name: f\n    default: true\n    root: .\n    rules:\n      - action: {{ proxy: {{ pool: api }} }}\npools:\n  - {{ name: api, protocol: http, endpoints: [\"127.0.0.1:{port}\"], read_timeout: 3s, send_timeout: 1s }}\n"
        ),
    );
    let srv = Server::run_config(&config);
    let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
    s.write_all(
        b"POST /up?sleep=2 HTTP/1.1\r\nHost: x\r\nContent-Length: 300000\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    for _ in 0..10 {
        s.write_all(&[b'u'; 30000]).unwrap();
        std::thread::sleep(Duration::from_millis(500));
    }
    let got = read_until_closed(&mut s, Duration::from_secs(10)).expect("an answer");
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("body-len=300000"), "{text}");
    // A body gathered whole before it is sent (under 64 KiB) ends with its one frame:
    // the read timeout runs from there, not the send timeout.
    let (st, _, body) = curl_i(&["--data-binary", "ten bytes!", &srv.url("/small?sleep=2")]);
    assert_eq!(st, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        srv.metric("skiff_upstream_failures_total{pool=\"api\",reason=\"timeout\"}"),
        Some(0.0)
    );
}

#[test]
fn killing_a_backend_under_load_fails_only_requests_in_flight_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut backends, endpoints) = echo_pool(dir.path(), "k");
    let config = write_config(
        dir.path(),
        &format!(
            "access_log: {{ format: off }}\nvirtual_servers:\n  - name: api\n    default: true\n    root: .\n    rules:\n      - action: {{ proxy: {{ pool: api }} }}\npools:\n  - {{ name: api, protocol: http, endpoints: [{}], max_fails: 1, fail_timeout: 30s, workers: 4 }}\n",
            endpoints.join(", ")
        ),
    );
    let srv = Server::run_config(&config);
    // The capacity the busy ratio divides by: 4 workers behind each of 3 endpoints up.
    assert_eq!(
        srv.metric("skiff_upstream_workers{pool=\"api\"}"),
        Some(12.0)
    );
    let wrk = Command::new("wrk")
        .args(["-t1", "-c8", "-d4s", &srv.url("/")])
        .stdout(Stdio::piped())
        .spawn()
        .expect("wrk is installed by scripts/install-deps.sh");
    std::thread::sleep(Duration::from_millis(1500));
    drop(backends.remove(1)); // kill one backend mid-run
    let out = wrk.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let total: u64 = text
        .split(" requests in")
        .next()
        .and_then(|t| t.split_whitespace().last())
        .and_then(|n| n.parse().ok())
        .expect(&text);
    let non2xx: u64 = text
        .split("Non-2xx or 3xx responses: ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let socket_errors = text.contains("Socket errors");
    assert!(total > 100, "{text}"); // the Python backends manage a few hundred per second
                                    // At most one request per connection can have been in flight to the killed backend.
    assert!(non2xx <= 8, "{non2xx} failures of {total}:\n{text}");
    assert!(!socket_errors, "{text}");
    // After the kill, traffic keeps flowing to the other two.
    for _ in 0..10 {
        assert_eq!(curl_i(&[&srv.url("/")]).0, 200);
    }
    assert_eq!(
        srv.metric("skiff_upstream_endpoints{pool=\"api\",state=\"down\"}"),
        Some(1.0)
    );
    // The endpoint down no longer counts: 4 workers behind each of the 2 left.
    assert_eq!(
        srv.metric("skiff_upstream_workers{pool=\"api\"}"),
        Some(8.0)
    );
}

#[test]
fn a_client_that_leaves_cancels_the_backend_request() {
    let site = php_site();
    std::fs::write(
        site.path().join("long.php"),
        "<?php for ($i = 0; $i < 50; $i++) { echo str_repeat('x', 4000), \"\\n\"; flush(); file_put_contents(__DIR__ . '/progress.txt', \"$i\\n\", FILE_APPEND); usleep(100000); }",
    )
    .unwrap();
    let port = free_port();
    let _fpm = php_fpm(site.path(), &format!("127.0.0.1:{port}"));
    let config = write_config(
        site.path(),
        &php_config(site.path(), &format!("127.0.0.1:{port}")),
    );
    let srv = Server::run_config(&config);
    // Read a little, then hang up.
    let _ = Command::new("curl")
        .args([
            "-s",
            "--max-time",
            "0.5",
            "-o",
            "/dev/null",
            &srv.url("/long.php"),
        ])
        .status();
    let progress = || {
        std::fs::read_to_string(site.path().join("progress.txt"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    std::thread::sleep(Duration::from_millis(1500));
    let after = progress();
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        progress(),
        after,
        "the script kept running after the client left"
    );
    assert!(
        after < 25,
        "{after} steps: it should have stopped soon after 0.5 s"
    );
}
