//! Clients that try to hold the server's resources: slow request bodies, idle HTTP/2
//! connections, clients that never read, silent connections, the admin port and a shared
//! bandwidth debt. Each must be cut off within its timeout while others are served (the
//! HTTP/2 flow-control ones are in hostile_h2_clients.rs).

mod common;

use common::backends::{php_fpm, php_site, write_config};
use common::*;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

fn status_of(raw: &[u8]) -> u16 {
    let text = String::from_utf8_lossy(raw);
    text.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"))
}

/// A PHP site behind a pool of one worker slot, with short body deadlines.
fn php_with_one_slot() -> (tempfile::TempDir, common::backends::Backend, Server) {
    let site = php_site();
    let port = common::backends::free_port();
    let fpm = php_fpm(site.path(), &format!("127.0.0.1:{port}"));
    let config = write_config(
        site.path(),
        &format!(
            "limits: {{ body_timeout: 1s, body_min_rate: 100 }}\n\
             virtual_servers:\n  - name: php\n    default: true\n    root: {root}\n    rules:\n      - match: {{ extensions: [php] }}\n        action: {{ fastcgi: {{ pool: php }} }}\n\
             pools:\n  - {{ name: php, protocol: fastcgi, endpoints: [\"127.0.0.1:{port}\"], max_active_requests: 1, read_timeout: 30s }}\n",
            root = site.path().display()
        ),
    );
    let srv = Server::run_config(&config);
    (site, fpm, srv)
}

#[test]
fn a_trickling_body_holds_no_pool_slot_and_gets_408() {
    let (_site, _fpm, srv) = php_with_one_slot();
    let started = Instant::now();
    let mut slow = TcpStream::connect(srv.addr).unwrap();
    slow.write_all(
        b"POST /upload.php HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n0123456789",
    )
    .unwrap();
    // One byte every 300 ms: never silent for the 1 s body timeout, far below 100 B/s.
    let trickle = {
        let mut s = slow.try_clone().unwrap();
        std::thread::spawn(move || {
            for _ in 0..30 {
                std::thread::sleep(Duration::from_millis(300));
                if s.write_all(b"x").is_err() {
                    return;
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    // The one slot is free while the slow body arrives.
    let (status, _, body) = curl_i(&[
        "--data-binary",
        "hello",
        "-H",
        "Content-Type: application/octet-stream",
        &srv.url("/upload.php"),
    ]);
    assert_eq!(
        status, 200,
        "a whole request was refused while a slow body trickled"
    );
    assert!(String::from_utf8_lossy(&body).starts_with("5 "));
    let answer = read_until_closed(&mut slow, Duration::from_secs(10))
        .expect("the slow body's connection was still open after 10 s");
    assert_eq!(status_of(&answer), 408);
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "cut off only by the trickle's end"
    );
    trickle.join().unwrap();
    assert_eq!(
        srv.metric("skiff_upstream_failures_total{pool=\"php\",reason=\"client_timeout\"}"),
        Some(1.0)
    );
}

#[test]
fn a_chunked_body_that_stops_gets_408_without_reaching_the_backend() {
    let (_site, _fpm, srv) = php_with_one_slot();
    let mut stalled = TcpStream::connect(srv.addr).unwrap();
    stalled
        .write_all(
            b"POST /upload.php HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let (status, _, _) = curl_i(&["--data-binary", "x", &srv.url("/upload.php")]);
    assert_eq!(status, 200, "the stalled chunked body took the pool's slot");
    let answer = read_until_closed(&mut stalled, Duration::from_secs(10))
        .expect("the stalled body's connection was still open after 10 s");
    assert_eq!(status_of(&answer), 408);
}

#[test]
fn idle_h2c_connections_are_closed_and_give_their_permits_back() {
    let site = sample_site();
    let srv = Server::start(
        site.path(),
        &[
            "--threads",
            "1",
            "--max-connections",
            "2",
            "--header-timeout",
            "1s",
            "--keepalive-timeout",
            "2s",
        ],
    );
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
    let mut idle: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = TcpStream::connect(srv.addr).unwrap();
            s.write_all(preface).unwrap();
            s
        })
        .collect();
    for s in &mut idle {
        read_until_closed(s, Duration::from_secs(10))
            .expect("an idle h2c connection was still open after 10 s");
    }
    let (status, _, _) = curl_i(&["--max-time", "5", &srv.url("/index.html")]);
    assert_eq!(status, 200);
}

#[test]
fn a_connection_that_sends_nothing_is_closed_after_the_header_timeout() {
    let site = sample_site();
    let srv = Server::start(
        site.path(),
        &["--header-timeout", "1s", "--keepalive-timeout", "60s"],
    );
    let mut silent = TcpStream::connect(srv.addr).unwrap();
    let answer = read_until_closed(&mut silent, Duration::from_secs(20))
        .expect("a silent connection lived past 20 s");
    assert!(answer.is_empty(), "a silent connection got an answer");
}

/// A client socket with a 4 KiB receive buffer, connected.
fn small_window_client(addr: SocketAddr) -> TcpStream {
    use rustix::net::{sockopt, AddressFamily, SocketType};
    let fd: OwnedFd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    sockopt::set_socket_recv_buffer_size(&fd, 4096).unwrap();
    rustix::net::connect(&fd, &addr).unwrap();
    TcpStream::from(fd)
}

fn non_reading_client_is_cut_off(request: &[u8]) {
    let site = tempfile::tempdir().unwrap();
    let size = 64 * 1024 * 1024;
    std::fs::write(site.path().join("big.bin"), vec![7u8; size]).unwrap();
    let srv = Server::start(site.path(), &["--send-timeout", "1s"]);
    let mut client = small_window_client(srv.addr);
    client.write_all(request).unwrap();
    // Not reading: the server's writes stall once the socket buffers are full.
    std::thread::sleep(Duration::from_secs(4));
    let got = read_until_closed(&mut client, Duration::from_secs(20))
        .expect("the connection of a client that did not read was still open");
    assert!(
        got.len() < size,
        "the whole body arrived: the stalled connection was kept"
    );
}

#[test]
fn a_client_that_does_not_read_is_disconnected_on_the_fast_path() {
    non_reading_client_is_cut_off(b"GET /big.bin HTTP/1.1\r\nHost: a\r\n\r\n");
}

#[test]
fn a_client_that_does_not_read_is_disconnected_on_the_hyper_path() {
    // A (empty) chunked body sends the request through hyper.
    non_reading_client_is_cut_off(
        b"GET /big.bin HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    );
}

/// A client that keeps its pipeline full holds its connection, not the worker: another
/// client of the same (only) worker is answered while the pipeline is still being served.
#[test]
fn a_client_keeping_its_pipeline_full_does_not_hold_the_worker() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let site = sample_site();
    let srv = Server::start(site.path(), &["--threads", "1", "--access-log", "off"]);
    let mut flood = TcpStream::connect(srv.addr).unwrap();
    assert_eq!(
        status_of(
            raw_exchange(
                srv.addr,
                "GET /a.txt HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
            )
            .as_bytes()
        ),
        200
    );
    // With the worker stopped, the flood's requests and the other client's wait queued in
    // the kernel; when it resumes, every read of the flood finds a full buffer. Replies
    // are heads only (HEAD), drained by a thread, so the server's writes do not wait.
    srv.signal("STOP");
    let head = "HEAD /a.txt HTTP/1.1\r\nHost: a\r\n\r\n";
    let requests = 6000;
    flood.set_nonblocking(true).unwrap();
    let mut queued = 0;
    let batch = head.repeat(requests);
    while queued < batch.len() {
        match flood.write(&batch.as_bytes()[queued..]) {
            Ok(n) => queued += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) => panic!("write: {e}"),
        }
    }
    let queued_requests = queued / head.len();
    assert!(
        queued_requests > 1000,
        "only {queued_requests} requests queued"
    );
    flood.set_nonblocking(false).unwrap();
    let replies = Arc::new(AtomicUsize::new(0));
    let counted = replies.clone();
    let mut drain = flood.try_clone().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut tail = Vec::new();
        while let Ok(n) = drain.read(&mut buf) {
            if n == 0 {
                break;
            }
            tail.extend_from_slice(&buf[..n]);
            let whole = tail.windows(4).filter(|w| w == b"\r\n\r\n").count();
            counted.fetch_add(whole, Ordering::Relaxed);
            let last = tail
                .windows(4)
                .rposition(|w| w == b"\r\n\r\n")
                .map_or(0, |i| i + 4);
            tail.drain(..last);
        }
    });
    let mut other = TcpStream::connect(srv.addr).unwrap();
    other
        .write_all(b"GET /a.txt HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    srv.signal("CONT");
    let answer = read_until_closed(&mut other, Duration::from_secs(10));
    let before = replies.load(Ordering::Relaxed);
    let _ = flood.shutdown(std::net::Shutdown::Both);
    reader.join().unwrap();
    let answer = answer.expect("the other client was not answered within 10 s");
    assert_eq!(status_of(&answer), 200);
    assert!(
        before < queued_requests / 2,
        "the other client was answered only after {before} of {queued_requests} pipelined replies"
    );
}

/// The header timeout runs from the head still incomplete, not from an earlier head a
/// pipelining client has since completed.
#[test]
fn a_pipelining_client_gets_the_header_timeout_from_its_latest_head() {
    let site = sample_site();
    let srv = Server::start(
        site.path(),
        &["--header-timeout", "3s", "--keepalive-timeout", "60s"],
    );
    let mut c = TcpStream::connect(srv.addr).unwrap();
    let get = "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n";
    c.write_all(format!("{get}GET /a.txt HTTP/1.1\r\nHo").as_bytes())
        .unwrap();
    std::thread::sleep(Duration::from_millis(2000));
    // Completes the second head and starts a third: 2 s into the first partial one.
    let _ = c.write_all(b"st: t\r\n\r\nGET /a.txt HTTP/1.1\r\nHo");
    std::thread::sleep(Duration::from_millis(2000));
    // 4 s after the first partial head, 2 s after the third began: 1 s of margin on
    // either side of the 3 s timeout.
    let _ = c.write_all(b"st: t\r\nConnection: close\r\n\r\n");
    let got = read_until_closed(&mut c, Duration::from_secs(10)).expect("not closed");
    let text = String::from_utf8_lossy(&got);
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 3, "{text}");
    assert!(!text.contains("408"), "{text}");
}

#[test]
fn the_admin_port_cuts_half_sent_heads_and_bounds_one_peers_connections() {
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    let mut half = TcpStream::connect(srv.admin).unwrap();
    half.write_all(b"GET /metrics HTTP/1.1\r\nHost: a\r\n")
        .unwrap();
    read_until_closed(&mut half, Duration::from_secs(15))
        .expect("a half-sent admin head was still open after 15 s");

    // 64 idle connections from one peer: past its share of 8, each new one takes the
    // place of its oldest, so the port holds 8 of them, and the next is served.
    let mut held: Vec<TcpStream> = (0..64)
        .map(|_| TcpStream::connect(srv.admin).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut extra = TcpStream::connect(srv.admin).unwrap();
    let _ = extra.write_all(b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    let got = read_until_closed(&mut extra, Duration::from_secs(3))
        .expect("the newest admin connection was not answered");
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    let open = held
        .iter_mut()
        .map(|s| read_until_closed(s, Duration::from_millis(200)).is_none())
        .filter(|&still_open| still_open)
        .count();
    assert!(open <= 8, "{open} of one peer's idle connections were kept");
}

/// Clients that ask for a file under a shared bandwidth limit and leave at once put the
/// bucket in debt, which makes later chunks wait long; their connections must not hold
/// their places under max_connections through those waits.
#[test]
fn connections_whose_clients_left_do_not_sleep_out_a_shared_bandwidth_debt() {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("big.bin"), vec![5u8; 256 * 1024]).unwrap();
    let config = write_config(
        dir.path(),
        "virtual_servers:\n  - name: site\n    default: true\n    root: www\n    rules:\n      - match: { prefix: / }\n        action: { static: {} }\n        bandwidth: { total: 4096 }\n",
    );
    let srv = Server::run_config(&config);
    // The limit applies: 12 KiB at 4 KiB a second, the first second's worth at once.
    let started = Instant::now();
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.write_all(
        b"GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=0-12287\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    assert!(all.starts_with(b"HTTP/1.1 206") && all.ends_with(&[5u8; 64]));
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    // 20 clients ask and leave at once. The head goes out with the first chunk, and the
    // bucket charges each a chunk of 1 KiB beyond its 4 KiB a second: waits of up to 5 s.
    for _ in 0..20 {
        let mut s = TcpStream::connect(srv.addr).unwrap();
        s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
    }

    let end = Instant::now() + Duration::from_secs(2);
    while srv.metric("skiff_connections_open") != Some(0.0) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        srv.metric("skiff_connections_open"),
        Some(0.0),
        "connections of clients gone still sleeping in the pacer"
    );
}
