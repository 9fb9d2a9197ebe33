//! Idle keep-alive connections parked out of their tasks (`conn::park`): served again
//! when they speak, closed at their keep-alive deadline and at shutdown, and the
//! longest-idle one closed to admit a new connection at `--max-connections`.

mod common;

use common::{read_until_closed, sample_site, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const GET: &[u8] = b"GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n";

/// Sends one GET and reads its whole response (the sample site's index.html has a
/// Content-Length); returns the status.
fn exchange(s: &mut TcpStream) -> u16 {
    s.write_all(GET).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = s.read(&mut buf).expect("a response");
        assert!(n > 0, "closed before the response ended");
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(|v| v.trim().parse().unwrap())
                })
                .expect("a Content-Length");
            if got.len() >= end + 4 + length {
                return text[9..12].parse().unwrap();
            }
        }
    }
}

/// Polls `metric` until it reads `want`; panics after 5 s.
fn wait_metric(srv: &Server, metric: &str, want: f64) {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let got = srv.metric(metric);
        if got == Some(want) {
            return;
        }
        assert!(
            Instant::now() < end,
            "{metric} stayed {got:?}, expected {want}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A server with `flags` (one worker) and a connection it has parked after one request,
/// with the time of that request.
fn parked(flags: &[&str]) -> (tempfile::TempDir, Server, TcpStream, Instant) {
    let site = sample_site();
    let mut all = vec!["--threads", "1"];
    all.extend_from_slice(flags);
    let srv = Server::start(site.path(), &all);
    let mut s = TcpStream::connect(srv.addr).unwrap();
    assert_eq!(exchange(&mut s), 200);
    let asked = Instant::now();
    wait_metric(&srv, "skiff_connections_parked", 1.0);
    (site, srv, s, asked)
}

/// A server with `threads` workers admitting `max` connections, idle ones kept 60 s.
fn at_limit(threads: u32, max: u32) -> (tempfile::TempDir, Server) {
    let site = sample_site();
    let (threads, max) = (threads.to_string(), max.to_string());
    let flags = [
        "--threads",
        &threads,
        "--max-connections",
        &max,
        "--keepalive-timeout",
        "60s",
    ];
    let srv = Server::start(site.path(), &flags);
    (site, srv)
}

/// Waits for the server to close an idle connection, which must get no bytes.
fn wait_closed(s: &mut TcpStream) {
    let got = read_until_closed(s, Duration::from_secs(5)).expect("closed within 5 s");
    assert!(got.is_empty(), "an idle connection got bytes");
}

#[test]
fn a_parked_connection_is_served_again_and_its_close_is_seen() {
    let (_site, srv, mut s, _) = parked(&["--keepalive-timeout", "60s"]);
    // Twice, so a resumed connection parks again.
    for _ in 0..2 {
        assert_eq!(exchange(&mut s), 200, "a parked connection answered");
        wait_metric(&srv, "skiff_connections_parked", 1.0);
    }
    assert_eq!(srv.metric("skiff_connections_open"), Some(1.0));
    drop(s);
    wait_metric(&srv, "skiff_connections_parked", 0.0);
    wait_metric(&srv, "skiff_connections_open", 0.0);
}

#[test]
fn a_parked_connection_is_closed_at_its_keepalive_deadline() {
    let (_site, srv, mut s, asked) = parked(&["--keepalive-timeout", "1500ms"]);
    wait_closed(&mut s);
    let after = asked.elapsed();
    assert!(
        after >= Duration::from_millis(1400) && after < Duration::from_secs(3),
        "closed {after:?} after its last request, with a 1.5 s keep-alive timeout"
    );
    wait_metric(&srv, "skiff_connections_parked", 0.0);
}

/// Waking a parked connection with no request (a bare CRLF, which RFC 9112 lets a server
/// skip) does not move its keep-alive deadline: the deadline runs from the last request.
#[test]
fn waking_a_parked_connection_without_a_request_keeps_its_deadline() {
    let (_site, _srv, mut s, asked) = parked(&["--keepalive-timeout", "1500ms"]);
    std::thread::sleep(Duration::from_millis(800).saturating_sub(asked.elapsed()));
    s.write_all(b"\r\n").unwrap();
    wait_closed(&mut s);
    let after = asked.elapsed();
    assert!(
        after < Duration::from_millis(2200),
        "closed {after:?} after its last request: the CRLF at 800 ms restarted the 1.5 s keep-alive timeout"
    );
}

#[test]
fn at_max_connections_the_longest_idle_parked_connection_makes_room() {
    let (_site, srv, mut oldest, _) =
        parked(&["--max-connections", "2", "--keepalive-timeout", "60s"]);
    let mut newer = TcpStream::connect(srv.addr).unwrap();
    assert_eq!(exchange(&mut newer), 200);
    wait_metric(&srv, "skiff_connections_parked", 2.0);
    // A third connection at the limit is served at once...
    let mut third = TcpStream::connect(srv.addr).unwrap();
    assert_eq!(exchange(&mut third), 200, "served at the limit");
    // ...in the place of the one idle longest, and the newer idle one is kept.
    wait_closed(&mut oldest);
    assert_eq!(
        exchange(&mut newer),
        200,
        "the newer idle connection was kept"
    );
    assert_eq!(srv.metric("skiff_connections_reclaimed_total"), Some(1.0));
    assert_eq!(srv.metric("skiff_connections_max"), Some(2.0));
}

/// With two workers a new connection often lands on the worker with nothing parked: that
/// worker asks the other to close its idle connection. Ten rounds miss that path with
/// probability 2^-9; every round must be served either way.
#[test]
fn a_worker_at_the_limit_takes_room_from_another_workers_idle_connection() {
    let (_site, srv) = at_limit(2, 1);
    let mut previous: Option<TcpStream> = None;
    for round in 1..=10 {
        let mut s = TcpStream::connect(srv.addr).unwrap();
        assert_eq!(exchange(&mut s), 200, "round {round} was served");
        if let Some(mut p) = previous.take() {
            wait_closed(&mut p);
        }
        wait_metric(&srv, "skiff_connections_parked", 1.0);
        previous = Some(s);
    }
    assert_eq!(srv.metric("skiff_connections_reclaimed_total"), Some(9.0));
}

/// A burst of new connections at the limit, across three workers: the first ones take the
/// idle connections' places, the rest those of the first ones once they are parked in
/// turn. Every one is served, none waits for a keep-alive deadline (60 s).
#[test]
fn a_burst_at_the_limit_is_served_from_idle_connections() {
    let (_site, srv) = at_limit(3, 4);
    let mut idle = Vec::new();
    for _ in 0..4 {
        let mut s = TcpStream::connect(srv.addr).unwrap();
        assert_eq!(exchange(&mut s), 200);
        idle.push(s);
    }
    wait_metric(&srv, "skiff_connections_parked", 4.0);
    let addr = srv.addr;
    let burst: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                (exchange(&mut s), s)
            })
        })
        .collect();
    // Held until the count is read: a connection closing would make room by itself.
    let served: Vec<_> = burst
        .into_iter()
        .map(|client| client.join().expect("served within 5 s"))
        .collect();
    for (i, (status, _)) in served.iter().enumerate() {
        assert_eq!(*status, 200, "connection {i} of the burst");
    }
    assert_eq!(srv.metric("skiff_connections_reclaimed_total"), Some(8.0));
}

/// A connection that waited for a permit and got it when a busy connection closed
/// withdraws its ask: nothing idle is closed for it afterwards.
#[test]
fn an_ask_met_by_a_closing_connection_closes_no_idle_one_later() {
    let (_site, srv) = at_limit(1, 1);
    // Busy, not idle: half a request head.
    let mut busy = TcpStream::connect(srv.addr).unwrap();
    busy.write_all(b"GET /index.html HTTP/1.1\r\n").unwrap();
    wait_metric(&srv, "skiff_connections_open", 1.0);
    let mut waiting = TcpStream::connect(srv.addr).unwrap();
    waiting.write_all(GET).unwrap();
    waiting
        .set_read_timeout(Some(Duration::from_millis(600)))
        .unwrap();
    let mut buf = [0u8; 64];
    assert!(
        waiting.read(&mut buf).is_err(),
        "a connection in the middle of a request was closed to make room"
    );
    drop(busy);
    waiting
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut head = Vec::new();
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = waiting
            .read(&mut buf)
            .expect("served once the busy one closed");
        assert!(n > 0, "closed instead of served");
        head.extend_from_slice(&buf[..n]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200"));
    // Now parked, it stays open: its own ask was withdrawn.
    wait_metric(&srv, "skiff_connections_parked", 1.0);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(srv.metric("skiff_connections_parked"), Some(1.0));
    assert_eq!(srv.metric("skiff_connections_reclaimed_total"), Some(0.0));
}

#[test]
fn shutdown_closes_parked_connections_at_once() {
    let (_site, mut srv, mut s, _) = parked(&[
        "--keepalive-timeout",
        "60s",
        "--shutdown-delay",
        "0s",
        "--shutdown-grace",
        "30s",
    ]);
    srv.signal("TERM");
    wait_closed(&mut s);
    assert_eq!(
        srv.wait_exit(Duration::from_secs(5)),
        Some(0),
        "the drain waited on a parked connection"
    );
}
