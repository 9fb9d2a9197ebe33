//! HTTP/1.1 over userspace rustls on the fast path, against the real binary: pipelined
//! requests answered in order with exact bodies (cached, read from the file in chunks,
//! HEAD), a request with a body handed to hyper mid-connection, a peer's KeyUpdate, and
//! close_notify at the end.

mod common;

use common::tls::{serve_https, write_leaf, Conn, Pki};
use common::{big_bin_bytes, get_header, parse_response, sample_site, Server};
use std::io::{Read, Write};

/// `skiff serve SITE` over HTTPS too, with a certificate for localhost kept out of the site.
fn serve(pki: &Pki, site: &std::path::Path, extra: &[&str]) -> (Server, tempfile::TempDir) {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = write_leaf(certs.path(), &pki.leaf(&["localhost"]));
    (serve_https(site, &cert, &key, extra), certs)
}

/// One response: status, headers, body.
type Response = (u16, Vec<(String, String)>, Vec<u8>);

/// Splits pipelined responses: one per request, a body only where `with_body` says.
fn split_responses(mut raw: &[u8], with_body: &[bool]) -> Vec<Response> {
    let mut out = Vec::new();
    for &body in with_body {
        let end = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("response {} has no whole head", out.len()))
            + 4;
        let (status, headers, _) = parse_response(&raw[..end]);
        let len: usize = get_header(&headers, "content-length").map_or(0, |v| v.parse().unwrap());
        let len = if body { len } else { 0 };
        assert!(raw.len() >= end + len, "response {} cut short", out.len());
        out.push((status, headers, raw[end..end + len].to_vec()));
        raw = &raw[end + len..];
    }
    assert!(
        raw.is_empty(),
        "bytes after the last response: {}",
        raw.len()
    );
    out
}

/// Reads until the server ends the TLS session; fails unless it sent close_notify.
fn read_to_close_notify(conn: &mut Conn) -> Vec<u8> {
    let mut raw = Vec::new();
    match conn.tls.read_to_end(&mut raw) {
        Ok(_) => raw,
        Err(e) => panic!("no close_notify after {} bytes: {e}", raw.len()),
    }
}

/// One write of seven requests: a cached file, a cached 200 KiB file twice (more than
/// rustls queues at once), a 2 MiB file (beyond the cache, read in chunks and sealed),
/// its HEAD, a POST (which the fast path hands to hyper with the bytes after it), and a
/// last GET that closes. The client reads only after a pause, so the socket fills. Every
/// answer comes back in order, exact.
#[test]
fn pipelined_requests_are_answered_in_order_and_a_body_goes_to_hyper() {
    let pki = Pki::new();
    let dir = sample_site();
    let mid: Vec<u8> = (0..200 * 1024u32).map(|i| (i % 241) as u8).collect();
    std::fs::write(dir.path().join("mid.bin"), &mid).unwrap();
    let (srv, _certs) = serve(&pki, dir.path(), &["--read-chunk-bytes", "65536"]);
    let mut conn = Conn::open(&pki, srv.tls_addr.unwrap(), "localhost");
    let requests = "GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n\
                    GET /mid.bin HTTP/1.1\r\nHost: localhost\r\n\r\n\
                    GET /mid.bin HTTP/1.1\r\nHost: localhost\r\n\r\n\
                    GET /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n\
                    HEAD /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n\
                    POST /a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc\
                    GET /a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    conn.tls.write_all(requests.as_bytes()).unwrap();
    conn.tls.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let raw = read_to_close_notify(&mut conn);
    let mut answers = split_responses(&raw, &[true, true, true, true, false, true, true]);
    assert_eq!(answers[0].0, 200);
    assert_eq!(answers[0].2, b"<h1>home</h1>\n");
    for (status, _, body) in answers.drain(1..3) {
        assert_eq!(status, 200);
        assert!(body == mid, "the 200 KiB body differs");
    }
    assert_eq!(answers[1].0, 200);
    assert!(answers[1].2 == big_bin_bytes(), "the 2 MiB body differs");
    assert_eq!(answers[2].0, 200);
    assert_eq!(get_header(&answers[2].1, "content-length"), Some("2097152"));
    assert_eq!(answers[3].0, 405, "a POST to a static file");
    assert_eq!(answers[4].0, 200);
    assert_eq!(answers[4].2, b"0123456789abcdefghijklmnopqrstuvwxyz");
    let userspace = srv
        .metric("skiff_tls_connections_total{mode=\"userspace\"}")
        .unwrap_or(0.0);
    assert!(
        userspace >= 1.0,
        "connections counted in userspace: {userspace}"
    );
}

/// A client renews its keys (TLS 1.3 KeyUpdate, asking for ours in return) between
/// requests: the fast path answers it and the connection goes on, in both directions.
#[test]
fn a_peer_key_update_keeps_the_connection_serving() {
    let pki = Pki::new();
    let dir = sample_site();
    let (srv, _certs) = serve(&pki, dir.path(), &[]);
    let mut conn = Conn::open(&pki, srv.tls_addr.unwrap(), "localhost");
    for round in 0..3 {
        let (status, _, body) = conn.get("localhost", "/a.txt");
        assert_eq!(status, 200, "round {round}");
        assert_eq!(body, b"0123456789abcdefghijklmnopqrstuvwxyz");
        conn.tls.conn.refresh_traffic_keys().unwrap();
    }
    let (status, _, body) = conn.get("localhost", "/big.bin");
    assert_eq!(status, 200);
    assert!(
        body == big_bin_bytes(),
        "the body after three key updates differs"
    );
}

/// The client ends its side with close_notify: the server closes the connection at once,
/// with its own close_notify, rather than waiting for the keep-alive timeout.
#[test]
fn close_notify_from_the_client_ends_the_connection() {
    let pki = Pki::new();
    let dir = sample_site();
    let (srv, _certs) = serve(&pki, dir.path(), &["--keepalive-timeout", "60s"]);
    let mut conn = Conn::open(&pki, srv.tls_addr.unwrap(), "localhost");
    let (status, _, _) = conn.get("localhost", "/index.html");
    assert_eq!(status, 200);
    conn.tls.conn.send_close_notify();
    conn.tls.flush().unwrap();
    let started = std::time::Instant::now();
    let rest = read_to_close_notify(&mut conn);
    assert!(rest.is_empty(), "unexpected bytes: {rest:?}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "closed only after {:?}",
        started.elapsed()
    );
}

/// A TLS connection (never parked) waiting between requests is closed as soon as the
/// server stops, not after its keep-alive timeout or the shutdown grace.
#[test]
fn shutdown_closes_a_tls_connection_waiting_between_requests() {
    let pki = Pki::new();
    let dir = sample_site();
    let (mut srv, _certs) = serve(
        &pki,
        dir.path(),
        &[
            "--keepalive-timeout",
            "60s",
            "--shutdown-delay",
            "0s",
            "--shutdown-grace",
            "30s",
        ],
    );
    let mut conn = Conn::open(&pki, srv.tls_addr.unwrap(), "localhost");
    let (status, _, _) = conn.get("localhost", "/index.html");
    assert_eq!(status, 200);
    // Past the time a plain connection would be parked: this one waits in its task.
    std::thread::sleep(std::time::Duration::from_millis(400));
    let signalled = std::time::Instant::now();
    srv.signal("TERM");
    let mut rest = Vec::new();
    // With or without close_notify: what matters is that the server closed it.
    let _ = conn.tls.read_to_end(&mut rest);
    assert!(rest.is_empty(), "unexpected bytes: {rest:?}");
    let took = signalled.elapsed();
    assert!(
        took < std::time::Duration::from_secs(5),
        "closed only after {took:?}"
    );
    assert_eq!(
        srv.wait_exit(std::time::Duration::from_secs(10)),
        Some(0),
        "the drain waited on the idle connection"
    );
}

/// A backend that takes a request, never answers, and writes `closed` to a file once the
/// server drops the connection to it.
const SILENT_BACKEND: &str = r#"
import socket, sys
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(('127.0.0.1', int(sys.argv[1])))
srv.listen(8)
while True:
    conn, _ = srv.accept()
    conn.settimeout(30)
    data = b''
    while b'\r\n\r\n' not in data:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    if not data:
        conn.close()
        continue
    open(sys.argv[2], 'a').write('asked\n')
    try:
        while conn.recv(4096):
            pass
    except OSError:
        pass
    open(sys.argv[2], 'a').write('closed\n')
    conn.close()
"#;

/// A client that ends its TLS session (close_notify, then FIN) while a pool request waits
/// for its backend: the request is cancelled and the backend's connection dropped, as on
/// plain HTTP, instead of the close being taken for a pipelined request.
#[test]
fn a_client_that_leaves_over_tls_cancels_its_backend_request() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("www")).unwrap();
    write_leaf(&dir.path().join("tls"), &pki.leaf(&["localhost"]));
    let script = dir.path().join("silent.py");
    std::fs::write(&script, SILENT_BACKEND).unwrap();
    let events = dir.path().join("events.txt");
    let port = common::backends::free_port();
    let _backend = common::backends::Backend(
        std::process::Command::new("python3")
            .arg(&script)
            .arg(port.to_string())
            .arg(&events)
            .spawn()
            .unwrap(),
    );
    common::backends::wait_connect(&format!("127.0.0.1:{port}"));
    let config = common::backends::write_config(
        dir.path(),
        &format!(
            "tls:\n  listen: 127.0.0.1:0\nvirtual_servers:\n  - name: site\n    hosts: [localhost]\n    default: true\n    root: {}\n    tls: {{ cert: tls/tls.crt, key: tls/tls.key }}\n    rules:\n      - match: {{ prefix: /api/ }}\n        action: {{ proxy: {{ pool: api }} }}\npools:\n  - {{ name: api, protocol: http, endpoints: [\"127.0.0.1:{port}\"] }}\n",
            dir.path().join("www").display()
        ),
    );
    let srv = Server::run_config(&config);
    let read_events = || std::fs::read_to_string(&events).unwrap_or_default();
    let wait_for = |what: &str| {
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !read_events().contains(what) {
            assert!(
                std::time::Instant::now() < end,
                "the backend never saw '{what}': {:?}",
                read_events()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    let mut conn = Conn::open(&pki, srv.tls_addr.unwrap(), "localhost");
    conn.tls
        .write_all(b"GET /api/wait HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    conn.tls.flush().unwrap();
    wait_for("asked");
    conn.tls.conn.send_close_notify();
    conn.tls.flush().unwrap();
    conn.tls.sock.shutdown(std::net::Shutdown::Write).unwrap();
    wait_for("closed");
}
