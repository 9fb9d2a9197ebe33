//! HTTP pools: headers forwarded and round robin over Python echo backends, WebSocket
//! upgrades passed through, names re-resolved without a reload, and the ip_hash and
//! least_conn balancers.

mod common;
use common::backends::*;
use common::*;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn http_proxy_forwards_headers_and_balances_round_robin() {
    let dir = tempfile::tempdir().unwrap();
    let (_backends, endpoints) = echo_pool(dir.path(), "b");
    let config = write_config(
        dir.path(),
        &format!(
            "virtual_servers:\n  - name: api\n    default: true\n    root: .\n    rules:\n      - action: {{ proxy: {{ pool: api }} }}\npools:\n  - {{ name: api, protocol: http, endpoints: [{}] }}\n",
            endpoints.join(", ")
        ),
    );
    let srv = Server::run_config(&config);
    let out = curl(&[
        "-H",
        "Host: app.example.com",
        "-H",
        "Connection: keep-alive, X-Secret",
        "-H",
        "X-Secret: hop",
        "--data",
        "abc",
        &srv.url("/v1/items?q=1"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.starts_with("POST /v1/items?q=1\n"), "{text}");
    assert!(text.contains("\nhost: app.example.com\n"), "{text}");
    assert!(text.contains("\nx-forwarded-for: 127.0.0.1\n"), "{text}");
    assert!(text.contains("\nx-forwarded-proto: http\n"), "{text}");
    assert!(
        text.contains("\nx-forwarded-host: app.example.com\n"),
        "{text}"
    );
    assert!(
        !text.contains("x-secret"),
        "hop-by-hop headers named in Connection are dropped: {text}"
    );
    assert!(text.contains("body-len=3"), "{text}");
    let mut counts = std::collections::HashMap::new();
    for _ in 0..30 {
        let out = curl(&[&srv.url("/")]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let name = text
            .lines()
            .find_map(|l| l.strip_prefix("name="))
            .unwrap()
            .to_owned();
        *counts.entry(name).or_insert(0) += 1;
    }
    assert_eq!(counts.len(), 3, "{counts:?}");
    assert!(
        counts.values().all(|&n| n == 10),
        "round robin spreads evenly: {counts:?}"
    );
}

const WS_ECHO: &str = r#"
import socket, threading, hashlib, base64, sys
GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'
def recvn(c, n):
    b = b''
    while len(b) < n:
        part = c.recv(n - len(b))
        if not part:
            return None
        b += part
    return b
def handle(c):
    data = b''
    while b'\r\n\r\n' not in data:
        data += c.recv(4096)
    lines = data.decode('latin1').split('\r\n')
    key = [l.split(':', 1)[1].strip() for l in lines if l.lower().startswith('sec-websocket-key:')][0]
    accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    c.sendall(('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n' % accept).encode())
    while True:
        hdr = recvn(c, 2)
        if not hdr:
            return
        op, n, masked = hdr[0] & 0x0f, hdr[1] & 0x7f, hdr[1] & 0x80
        mask = recvn(c, 4) if masked else b'\0\0\0\0'
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(recvn(c, n)))
        if op == 8:
            c.sendall(b'\x88\x00')
            return
        reply = b'echo:' + payload
        c.sendall(bytes([0x81, len(reply)]) + reply)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(16)
while True:
    conn, _ = s.accept()
    threading.Thread(target=handle, args=(conn,), daemon=True).start()
"#;

/// Sends a WebSocket handshake to `addr`; returns the connection and the answer's head,
/// lowercased.
fn websocket_handshake(addr: std::net::SocketAddr) -> (std::net::TcpStream, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /chat HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    (s, String::from_utf8_lossy(&head).to_ascii_lowercase())
}

/// The WebSocket echo backend, and a config proxying everything to it (the pool's fields
/// plus `pool_extra`).
fn websocket_site(dir: &Path, pool_extra: &str) -> (Backend, PathBuf) {
    let (ws, port) = python_backend(dir, "ws_echo.py", WS_ECHO);
    let config = write_config(
        dir,
        &format!("virtual_servers:\n  - name: ws\n    default: true\n    root: .\n    rules:\n      - action: {{ proxy: {{ pool: ws }} }}\npools:\n  - {{ name: ws, protocol: http, endpoints: [\"127.0.0.1:{port}\"]{pool_extra} }}\n"),
    );
    (ws, config)
}

#[test]
fn websocket_upgrades_pass_through_the_http_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let (_ws, config) = websocket_site(dir.path(), ", read_timeout: 2s");
    let srv = Server::run_config(&config);
    let (mut s, head) = websocket_handshake(srv.addr);
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(
        head.contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
        "{head}"
    );
    // The tunnel keeps its connection's place under max_connections and in the drain
    // (hyper's connection ended at the 101).
    assert_eq!(srv.metric("skiff_connections_open"), Some(1.0));
    // Frames 1.5 s apart, past the 2 s read timeout in all: bytes moving keep the tunnel.
    for (i, word) in ["hello", "again", "third"].into_iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(1500));
        }
        let mask = [1u8, 2, 3, 4];
        let mut frame = vec![0x81, 0x80 | word.len() as u8];
        frame.extend_from_slice(&mask);
        frame.extend(word.bytes().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        s.write_all(&frame).unwrap();
        let mut reply = vec![0u8; 2 + 5 + word.len()];
        s.read_exact(&mut reply).unwrap();
        assert_eq!(&reply[..2], &[0x81, (5 + word.len()) as u8]);
        assert_eq!(&reply[2..], format!("echo:{word}").as_bytes());
    }
    // Silent both ways for the read timeout: closed.
    let t = Instant::now();
    assert!(
        read_until_closed(&mut s, Duration::from_secs(10)).is_some(),
        "a silent tunnel was still open after 10 s"
    );
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let end = Instant::now() + Duration::from_secs(5);
    while srv.metric("skiff_connections_open") != Some(0.0) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(srv.metric("skiff_connections_open"), Some(0.0));
}

/// During the shutdown delay (readiness failing, HTTP/1 answers closing their
/// connections), a WebSocket handshake still gets `Connection: upgrade` on its 101: a
/// client must fail the socket without it (RFC 6455 §4.1).
#[test]
fn a_websocket_handshake_during_the_shutdown_delay_keeps_its_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let (_ws, config) = websocket_site(dir.path(), "");
    let srv = Server::run_config_with(&config, &["--shutdown-delay", "5s"]);
    srv.signal("TERM");
    std::thread::sleep(Duration::from_millis(300));
    let (_tunnel, head) = websocket_handshake(srv.addr);
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("connection: upgrade"), "{head}");
    assert!(!head.contains("connection: close"), "{head}");
}

const DNS_SERVER: &str = r#"
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('127.0.0.1', int(sys.argv[1])))
while True:
    data, addr = s.recvfrom(512)
    i = 12
    while data[i] != 0:
        i += data[i] + 1
    qtype = struct.unpack('>H', data[i + 1:i + 3])[0]
    question = data[12:i + 5]
    answers, count = b'', 0
    if qtype == 1:
        for ip in open(sys.argv[2]).read().split():
            answers += b'\xc0\x0c' + struct.pack('>HHIH', 1, 1, 0, 4) + socket.inet_aton(ip)
            count += 1
    s.sendto(data[:2] + b'\x81\x80' + struct.pack('>HHHH', 1, count, 0, 0) + question + answers, addr)
"#;

#[test]
fn dns_names_are_re_resolved_without_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("echo_server.py"), ECHO_SERVER).unwrap();
    let port = free_port();
    let spawn_echo = |host: &str, name: &str| {
        let child = Command::new("python3")
            .arg(dir.path().join("echo_server.py"))
            .args([&port.to_string(), name, host])
            .spawn()
            .unwrap();
        wait_connect(&format!("{host}:{port}"));
        Backend(child)
    };
    let a = spawn_echo("127.0.0.1", "first");
    let _b = spawn_echo("127.0.0.2", "second");
    let answers = dir.path().join("answers");
    std::fs::write(&answers, "127.0.0.1").unwrap();
    std::fs::write(dir.path().join("dns.py"), DNS_SERVER).unwrap();
    let dns_port = free_port();
    let _dns = Backend(
        Command::new("python3")
            .arg(dir.path().join("dns.py"))
            .arg(dns_port.to_string())
            .arg(&answers)
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let config = write_config(
        dir.path(),
        &format!(
            "dns: {{ servers: [\"127.0.0.1:{dns_port}\"], refresh: 200ms }}\nvirtual_servers:\n  - name: api\n    default: true\n    root: .\n    rules:\n      - action: {{ proxy: {{ pool: api }} }}\npools:\n  - {{ name: api, protocol: http, endpoints: [\"api.skiff.test:{port}\"] }}\n"
        ),
    );
    let srv = Server::run_config(&config);
    let who = || {
        let out = curl(&[&srv.url("/")]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("name="))
            .unwrap_or("")
            .to_owned()
    };
    let wait_for = |want: &dyn Fn(&std::collections::HashSet<String>) -> bool| {
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            let seen: std::collections::HashSet<String> = (0..6).map(|_| who()).collect();
            if want(&seen) {
                return seen;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("DNS change not picked up");
    };
    wait_for(&|s| s.len() == 1 && s.contains("first"));
    // The name now points at the other backend: followed with no reload.
    std::fs::write(&answers, "127.0.0.2").unwrap();
    wait_for(&|s| s.len() == 1 && s.contains("second"));
    // Two addresses: requests rotate over both.
    std::fs::write(&answers, "127.0.0.1 127.0.0.2").unwrap();
    wait_for(&|s| s.len() == 2);
    // One of them stops: a request whose turn is the dead address is retried at the
    // other within the same request, so none fails, even the first ones.
    drop(a);
    for n in 0..8 {
        assert_eq!(
            who(),
            "second",
            "request {n} after the first backend stopped"
        );
    }
    assert_eq!(
        srv.metric("skiff_config_reloads_total{result=\"success\"}"),
        Some(0.0),
        "no reload happened (the counter starts at 0)"
    );
}

#[test]
fn ip_hash_and_least_conn_balancing_through_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let (_backends, endpoints) = echo_pool(dir.path(), "h");
    let config = write_config(
        dir.path(),
        &format!(
            "virtual_servers:\n  - name: api\n    default: true\n    root: .\n    rules:\n      - match: {{ prefix: /sticky }}\n        action: {{ proxy: {{ pool: sticky }} }}\n      - action: {{ proxy: {{ pool: least }} }}\npools:\n  - {{ name: sticky, protocol: http, balance: ip_hash, endpoints: [{e}] }}\n  - {{ name: least, protocol: http, balance: least_conn, endpoints: [{e}] }}\n",
            e = endpoints.join(", ")
        ),
    );
    let srv = Server::run_config(&config);
    let name = |path: &str, iface: &str| {
        let out = curl(&["--interface", iface, &srv.url(path)]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("name="))
            .unwrap()
            .to_owned()
    };
    // ip_hash: one client address always reaches the same backend.
    let first = name("/sticky", "127.0.0.1");
    assert!((0..12).all(|_| name("/sticky", "127.0.0.1") == first));
    // Different client addresses spread out.
    let spread: std::collections::HashSet<String> = (2..40)
        .map(|i| name("/sticky", &format!("127.0.0.{i}")))
        .collect();
    assert!(spread.len() >= 2, "{spread:?}");
    // least_conn with sequential requests (none in flight): ties go to the first endpoint.
    assert!((0..6).all(|_| name("/", "127.0.0.1") == "h0"));
}

/// `rewrite_path` replaces what the rule's prefix or exact path matched, in plain rules
/// and split targets, over HTTP/1.1 and h2c; the query is kept.
#[test]
fn a_rewrite_sends_the_backend_its_own_paths() {
    let dir = tempfile::tempdir().unwrap();
    let (_backend, port) = echo_server(dir.path(), "api");
    let config = write_config(
        dir.path(),
        &format!(
            r#"virtual_servers:
  - name: site
    default: true
    root: .
    rules:
      - match: {{ prefix: /api/ }}
        action: {{ proxy: {{ pool: api, rewrite_path: / }} }}
      - match: {{ path: /old }}
        action: {{ proxy: {{ pool: api, rewrite_path: /new/home }} }}
      - match: {{ prefix: /raw }}
        action: {{ proxy: {{ pool: api, rewrite_path: / }} }}
      - match: {{ prefix: /v1 }}
        action:
          split:
            - {{ weight: 100, action: {{ proxy: {{ pool: api, rewrite_path: /v2 }} }} }}
            - {{ weight: 0, action: {{ proxy: {{ pool: api }} }} }}
pools:
  - {{ name: api, protocol: http, endpoints: ["127.0.0.1:{port}"] }}
"#
        ),
    );
    let srv = Server::run_config(&config);
    let first_line = |args: &[&str]| {
        let out = curl(args);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    for proto in ["--http1.1", "--http2-prior-knowledge"] {
        assert_eq!(
            first_line(&[proto, &srv.url("/api/items?page=2")]),
            "GET /items?page=2",
            "{proto}"
        );
    }
    assert_eq!(first_line(&[&srv.url("/api/")]), "GET /");
    // The cleaned path, encoded again: dot segments resolved before the rule matched.
    assert_eq!(
        first_line(&["--path-as-is", &srv.url("/api/a/../b%20c")]),
        "GET /b%20c"
    );
    assert_eq!(first_line(&[&srv.url("/old?x")]), "GET /new/home?x");
    // A prefix without its slash cannot be used to climb out of the rewritten path.
    assert_eq!(first_line(&[&srv.url("/rawx/y")]), "GET /x/y");
    let (status, _, _) = curl_i(&["--path-as-is", &srv.url("/raw../admin")]);
    assert_eq!(status, 400);
    assert_eq!(
        srv.metric("skiff_upstream_failures_total{pool=\"api\",reason=\"rewrite\"}"),
        Some(1.0),
        "a refused rewrite is counted in the pool's failures"
    );
    assert_eq!(first_line(&[&srv.url("/v1/users/7")]), "GET /v2/users/7");
    assert_eq!(
        first_line(&["--data", "x", &srv.url("/v1")]),
        "POST /v2",
        "a body goes along"
    );
}
