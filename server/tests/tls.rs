//! HTTPS against the real binary: ALPN, certificates by SNI, 421, resumption, no 0-RTT,
//! certificate files rotated under live connections, HSTS and redirects, and what
//! backends are told. Certificates are made here with rcgen, signed by a test CA the
//! clients (rustls, curl, openssl) trust.

mod common;

use common::backends::{echo_server, write_config};
use common::tls::{serve_https, write_leaf, Conn, Leaf, Pki, SecretVolume};
use common::{parse_response, Server};
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn site() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("www/.well-known")).unwrap();
    std::fs::write(dir.path().join("www/index.html"), "hello over tls\n").unwrap();
    std::fs::write(dir.path().join("www/.well-known/probe"), "plain\n").unwrap();
    dir
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `skiff serve` of `dir/www` over HTTPS with one certificate for localhost.
fn serve_localhost(pki: &Pki, dir: &Path) -> Server {
    let (cert, key) = write_leaf(&dir.join("tls"), &pki.leaf(&["localhost"]));
    serve_https(&dir.join("www"), &cert, &key, &[])
}

/// One certificate for localhost: curl picks h2 or HTTP/1.1 by ALPN.
#[test]
fn alpn_chooses_http2_or_http11() {
    let pki = Pki::new();
    let dir = site();
    std::fs::write(dir.path().join("ca.pem"), pki.ca_pem()).unwrap();
    let srv = serve_localhost(&pki, dir.path());
    let port = srv.tls_addr.unwrap().port();
    let url = format!("https://localhost:{port}/");
    let resolve = format!("localhost:{port}:127.0.0.1");
    let ca = dir.path().join("ca.pem");
    for (flag, version) in [("--http1.1", "1.1"), ("--http2", "2")] {
        let out = common::curl(&[
            flag,
            "--cacert",
            ca.to_str().unwrap(),
            "--resolve",
            &resolve,
            "-w",
            "\n%{http_version} %{http_code}",
            &url,
        ]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text, format!("hello over tls\n\n{version} 200"), "{flag}");
    }
    assert_eq!(
        srv.metric(r#"skiff_tls_handshakes_total{result="success",version="1.3"}"#),
        Some(2.0)
    );
}

/// Two virtual servers with their own certificates, a wildcard certificate on the
/// listener, and the default for clients without SNI.
fn sni_setup(pki: &Pki, dir: &Path) -> (Leaf, Leaf, Leaf, PathBuf) {
    let a = pki.leaf(&["a.test"]);
    let b = pki.leaf(&["b.test"]);
    let wild = pki.leaf(&["*.wild.test"]);
    write_leaf(&dir.join("a"), &a);
    write_leaf(&dir.join("b"), &b);
    write_leaf(&dir.join("wild"), &wild);
    let www = dir.join("www");
    let config = write_config(
        dir,
        &format!(
            "tls:\n  listen: 127.0.0.1:0\n  certificates:\n    - {{ cert: wild/tls.crt, key: wild/tls.key }}\nvirtual_servers:\n  - name: a\n    hosts: [a.test]\n    root: {www}\n    tls: {{ cert: a/tls.crt, key: a/tls.key }}\n  - name: b\n    hosts: [b.test]\n    default: true\n    root: {www}\n    tls: {{ cert: b/tls.crt, key: b/tls.key }}\n  - name: wild\n    hosts: [\"*.wild.test\"]\n    root: {www}\n",
            www = www.display()
        ),
    );
    (a, b, wild, config)
}

#[test]
fn sni_chooses_the_certificate_and_a_client_without_sni_gets_the_default() {
    let pki = Pki::new();
    let dir = site();
    let (a, b, wild, config) = sni_setup(&pki, dir.path());
    let srv = Server::run_config(&config);
    let addr = srv.tls_addr.unwrap();
    // The virtual servers' own certificates win over the listener's for their names; the
    // wildcard certificate covers its names; no SNI gets the default's.
    for (sni, expected) in [("a.test", &a), ("b.test", &b), ("x.wild.test", &wild)] {
        let mut conn = Conn::open(&pki, addr, sni);
        let (status, _, body) = conn.get(sni, "/");
        assert_eq!(status, 200, "{sni}");
        assert_eq!(body, b"hello over tls\n");
        assert!(
            conn.peer_der() == expected.der,
            "{sni} got another certificate"
        );
    }
    let mut conn = Conn::open_without_sni(&pki, addr, "b.test");
    assert_eq!(conn.get("b.test", "/").0, 200);
    assert!(
        conn.peer_der() == b.der,
        "no SNI: not the default's certificate"
    );
    // openssl s_client, as an operator would check it.
    let out = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &addr.to_string(),
            "-servername",
            "a.test",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("subject=CN = a.test"), "{text}");
}

/// A connection for a.test's certificate asked for b.test (another certificate): 421,
/// so a browser that coalesced the connections retries on a new one.
#[test]
fn a_host_served_by_another_certificate_is_misdirected() {
    let pki = Pki::new();
    let dir = site();
    let (_, _, _, config) = sni_setup(&pki, dir.path());
    let srv = Server::run_config(&config);
    let mut conn = Conn::open(&pki, srv.tls_addr.unwrap(), "a.test");
    assert_eq!(conn.get("a.test", "/").0, 200);
    assert_eq!(conn.get("b.test", "/").0, 421);
    // y.wild.test is the listener's wildcard certificate, not a.test's.
    assert_eq!(conn.get("y.wild.test", "/").0, 421);
    assert_eq!(conn.get("A.TEST.", "/").0, 200);
}

fn s_client(addr: SocketAddr, extra: &[&str]) -> String {
    let out = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &addr.to_string(),
            "-servername",
            "localhost",
        ])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// TLS 1.3 tickets resume sessions (also TLS 1.2's); 0-RTT is never accepted (RFC 8470).
#[test]
fn sessions_resume_and_early_data_is_refused() {
    let pki = Pki::new();
    let dir = site();
    let srv = serve_localhost(&pki, dir.path());
    let addr = srv.tls_addr.unwrap();
    for version in ["-tls1_3", "-tls1_2"] {
        let sess = dir.path().join(format!("session{version}.pem"));
        let sess = sess.to_str().unwrap();
        // A TLS 1.3 ticket arrives after the handshake: ask for something so it is read.
        let first = s_client(addr, &[version, "-sess_out", sess, "-ign_eof"]);
        assert!(first.contains("New,"), "{version}: {first}");
        let again = s_client(addr, &[version, "-sess_in", sess]);
        assert!(
            again.contains("Reused,"),
            "{version} did not resume: {again}"
        );
    }
    let early = dir.path().join("early.txt");
    std::fs::write(&early, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let sess = dir.path().join("session-tls1_3.pem");
    let text = s_client(
        addr,
        &[
            "-tls1_3",
            "-sess_in",
            sess.to_str().unwrap(),
            "-early_data",
            early.to_str().unwrap(),
        ],
    );
    assert!(!text.contains("Early data was accepted"), "{text}");
    assert!(
        text.contains("Early data was not sent") || text.contains("Early data was rejected"),
        "{text}"
    );
}

fn secret_setup(dir: &Path, first: &Leaf) -> (SecretVolume, Server) {
    let volume = SecretVolume::new(dir.join("secret"), first);
    let config = write_config(
        dir,
        &format!(
            "tls:\n  listen: 127.0.0.1:0\nvirtual_servers:\n  - name: site\n    hosts: [site.test]\n    default: true\n    root: {}\n    tls: {{ cert: secret/tls.crt, key: secret/tls.key }}\n",
            dir.join("www").display()
        ),
    );
    (volume, Server::run_config(&config))
}

#[test]
fn a_rotated_certificate_reaches_new_connections_and_live_ones_keep_going() {
    let pki = Pki::new();
    let dir = site();
    let (old, new) = (pki.leaf(&["site.test"]), pki.leaf(&["site.test"]));
    let (mut volume, srv) = secret_setup(dir.path(), &old);
    let addr = srv.tls_addr.unwrap();
    let mut live = Conn::open(&pki, addr, "site.test");
    assert_eq!(live.get("site.test", "/").0, 200);
    assert!(live.peer_der() == old.der);

    volume.update(&new.cert, &new.key);
    let reloaded = r#"skiff_tls_certificate_reloads_total{result="success"}"#;
    wait_for("the certificate reload", || {
        srv.metric(reloaded) == Some(1.0)
    });

    // The kept-alive connection goes on with the session it has.
    assert_eq!(live.get("site.test", "/").0, 200);
    let mut fresh = Conn::open(&pki, addr, "site.test");
    assert_eq!(fresh.get("site.test", "/").0, 200);
    assert!(
        fresh.peer_der() == new.der,
        "a new connection got the old certificate"
    );
    // What the pods serve, as the operator reads it.
    let (_, served) = srv.admin_get("/certificates");
    assert!(served.contains(r#""vhost":"site""#), "{served}");
    // The validity period the expiry alert reads (a sixth of it, at most 14 days, left).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let expiry = srv
        .metric(r#"skiff_tls_certificate_expiry_timestamp_seconds{vhost="site"}"#)
        .unwrap();
    let issued = srv
        .metric(r#"skiff_tls_certificate_not_before_timestamp_seconds{vhost="site"}"#)
        .unwrap();
    assert!(issued < now && now < expiry, "{issued} < {now} < {expiry}");
}

#[test]
fn a_mismatched_pair_keeps_the_working_certificate() {
    let pki = Pki::new();
    let dir = site();
    let good = pki.leaf(&["site.test"]);
    let (c, d) = (pki.leaf(&["site.test"]), pki.leaf(&["site.test"]));
    let (mut volume, srv) = secret_setup(dir.path(), &good);
    let addr = srv.tls_addr.unwrap();
    let (_, before) = srv.admin_get("/certificates");

    volume.update(&c.cert, &d.key); // c's certificate with d's key
    let failed = r#"skiff_tls_certificate_reloads_total{result="failure"}"#;
    wait_for("the refused reload", || {
        srv.metric(failed).is_some_and(|n| n >= 1.0)
    });
    let mut conn = Conn::open(&pki, addr, "site.test");
    assert_eq!(conn.get("site.test", "/").0, 200);
    assert!(
        conn.peer_der() == good.der,
        "the bad pair replaced the good one"
    );
    assert_eq!(srv.admin_get("/certificates").1, before);
    assert!(
        srv.stderr_text()
            .contains("the private key does not belong to the certificate"),
        "{}",
        srv.stderr_text()
    );

    // Fixed: the next update is taken.
    volume.update(&d.cert, &d.key);
    let reloaded = r#"skiff_tls_certificate_reloads_total{result="success"}"#;
    wait_for("the reload", || srv.metric(reloaded) == Some(1.0));
    let mut conn = Conn::open(&pki, addr, "site.test");
    assert_eq!(conn.get("site.test", "/").0, 200);
    assert!(conn.peer_der() == d.der);
}

#[test]
fn a_config_reload_keeps_the_working_certificate_over_a_bad_one_on_disk() {
    // The certificate watcher refuses an expired certificate and a mismatched pair; a
    // config reload for an unrelated change reads the pairs again, and must neither
    // install them nor fail because of them.
    let pki = Pki::new();
    let dir = site();
    let good = pki.leaf(&["site.test"]);
    let (mut volume, srv) = secret_setup(dir.path(), &good);
    let addr = srv.tls_addr.unwrap();
    let config = dir.path().join("skiff.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    let expired = pki.expired_leaf(&["site.test"]);
    let (c, d) = (pki.leaf(&["site.test"]), pki.leaf(&["site.test"]));
    let reloads = r#"skiff_config_reloads_total{result="success"}"#;
    for (n, (cert, key)) in [(&expired.cert, &expired.key), (&c.cert, &d.key)]
        .into_iter()
        .enumerate()
    {
        volume.update(cert, key);
        std::fs::write(&config, format!("{text}# change {n}\n")).unwrap();
        wait_for("the config reload", || {
            srv.metric(reloads) == Some(n as f64 + 1.0)
        });
        let mut conn = Conn::open(&pki, addr, "site.test");
        assert_eq!(conn.get("site.test", "/").0, 200);
        assert!(
            conn.peer_der() == good.der,
            "change {n}: the config reload installed the bad pair"
        );
    }
}

/// An optional certificate whose Secret does not exist yet (an empty optional volume)
/// leaves its name to the default certificate, then serves once the kubelet fills the
/// folder. On a pod that cannot mount a renamed Secret (its folder absent) the virtual
/// server keeps the certificate it had; files that exist and do not load are counted.
#[test]
fn an_optional_certificate_waits_for_its_files_and_a_renamed_one_keeps_the_old() {
    let pki = Pki::new();
    let dir = site();
    let (a, b) = (pki.leaf(&["a.test"]), pki.leaf(&["b.test"]));
    write_leaf(&dir.path().join("b"), &b);
    std::fs::create_dir_all(dir.path().join("secret")).unwrap();
    let config = |a_dir: &str| {
        format!("tls:\n  listen: 127.0.0.1:0\nvirtual_servers:\n  - name: a\n    hosts: [a.test]\n    root: www\n    tls: {{ cert: {a_dir}/tls.crt, key: {a_dir}/tls.key, optional: true }}\n  - name: b\n    hosts: [b.test]\n    default: true\n    root: www\n    tls: {{ cert: b/tls.crt, key: b/tls.key }}\n")
    };
    let path = write_config(dir.path(), &config("secret"));
    let srv = Server::run_config(&path);
    let addr = srv.tls_addr.unwrap();
    let subject = |sni: &str| {
        let text = s_client(addr, &["-servername", sni]);
        let line = text.lines().find(|l| l.starts_with("subject="));
        line.unwrap_or("").to_owned()
    };
    assert_eq!(
        subject("a.test"),
        "subject=CN = b.test",
        "the default answers"
    );
    let served = || srv.admin_get("/certificates").1;
    assert!(!served().contains(r#""vhost":"a""#), "{}", served());

    SecretVolume::new(dir.path().join("secret"), &a);
    wait_for("the optional certificate to load", || {
        subject("a.test") == "subject=CN = a.test"
    });
    assert_eq!(Conn::open(&pki, addr, "a.test").get("a.test", "/").0, 200);
    assert!(served().contains(r#""vhost":"a""#), "{}", served());

    // The Secret renamed, and what this pod finds under the new name does not load
    // (files that exist are counted as a failure): the reload applies, and a.test keeps
    // the certificate it had.
    std::fs::create_dir_all(dir.path().join("renamed")).unwrap();
    std::fs::write(dir.path().join("renamed/tls.key"), "not a key").unwrap();
    std::fs::write(dir.path().join("renamed/tls.crt"), "not a certificate").unwrap();
    write_config(dir.path(), &config("renamed"));
    let reloads = r#"skiff_config_reloads_total{result="success"}"#;
    wait_for("the reload", || srv.metric(reloads) == Some(1.0));
    let failures = r#"skiff_tls_certificate_reloads_total{result="failure"}"#;
    assert!(srv.metric(failures).unwrap_or(0.0) >= 1.0);
    assert_eq!(subject("a.test"), "subject=CN = a.test");
    // Said to be the pair it had, not the renamed Secret's.
    let lent = served();
    assert!(lent.contains(r#""fallback":true"#), "{lent}");
}

/// HSTS on HTTPS only; plain HTTP redirected (308, the URL kept) except where a rule
/// keeps it plain; backends told the scheme.
#[test]
fn hsts_redirects_and_backends_see_https() {
    let pki = Pki::new();
    let dir = site();
    write_leaf(&dir.path().join("tls"), &pki.leaf(&["site.test"]));
    let (_echo, port) = echo_server(dir.path(), "e");
    let config = write_config(
        dir.path(),
        &format!(
            "tls:\n  listen: 127.0.0.1:0\n  public_port: 8443\nvirtual_servers:\n  - name: site\n    hosts: [site.test]\n    default: true\n    root: {}\n    tls: {{ cert: tls/tls.crt, key: tls/tls.key }}\n    hsts: {{ max_age: 1y, include_subdomains: true }}\n    https_redirect: true\n    rules:\n      - match: {{ prefix: /.well-known/ }}\n        action: {{ static: {{}} }}\n        https_redirect: false\n      - match: {{ prefix: /api/ }}\n        action: {{ proxy: {{ pool: api }} }}\npools:\n  - {{ name: api, protocol: http, endpoints: [\"127.0.0.1:{port}\"] }}\n",
            dir.path().join("www").display()
        ),
    );
    let srv = Server::run_config(&config);
    let plain = common::raw_exchange(
        srv.addr,
        "GET /index.html?a=1 HTTP/1.1\r\nHost: site.test:8080\r\nConnection: close\r\n\r\n",
    );
    let (status, headers, _) = parse_response(plain.as_bytes());
    assert_eq!(status, 308);
    assert_eq!(
        common::get_header(&headers, "location"),
        Some("https://site.test:8443/index.html?a=1")
    );
    assert_eq!(
        common::get_header(&headers, "strict-transport-security"),
        None
    );
    let kept = common::raw_exchange(
        srv.addr,
        "GET /.well-known/probe HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
    );
    assert!(kept.starts_with("HTTP/1.1 200"), "{kept}");
    assert!(!kept
        .to_ascii_lowercase()
        .contains("strict-transport-security"));

    let mut conn = Conn::open(&pki, srv.tls_addr.unwrap(), "site.test");
    let (status, headers, _) = conn.get("site.test", "/index.html");
    assert_eq!(status, 200);
    assert_eq!(
        common::get_header(&headers, "strict-transport-security"),
        Some("max-age=31557600; includeSubDomains")
    );
    let (status, headers, body) = conn.get("site.test", "/api/x");
    assert_eq!(status, 200);
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("x-forwarded-proto: https"), "{body}");
    assert!(common::get_header(&headers, "strict-transport-security").is_some());
}

/// A client that opens a connection and never says hello is dropped at the handshake
/// timeout, counted, and the accept loop keeps serving others meanwhile.
#[test]
fn a_silent_client_is_dropped_at_the_handshake_timeout() {
    let pki = Pki::new();
    let dir = site();
    write_leaf(&dir.path().join("tls"), &pki.leaf(&["site.test"]));
    let config = write_config(
        dir.path(),
        &format!(
            "tls:\n  listen: 127.0.0.1:0\n  handshake_timeout: 500ms\nvirtual_servers:\n  - name: site\n    default: true\n    root: {}\n    tls: {{ cert: tls/tls.crt, key: tls/tls.key }}\n",
            dir.path().join("www").display()
        ),
    );
    let srv = Server::run_config(&config);
    let addr = srv.tls_addr.unwrap();
    let silent: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let mut conn = Conn::open(&pki, addr, "site.test");
    assert_eq!(conn.get("site.test", "/").0, 200);
    let started = Instant::now();
    let mut first = &silent[0];
    first
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(
        first.read(&mut buf).unwrap_or(0),
        0,
        "expected the server to close"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    wait_for("the timeout count", || {
        srv.metric(r#"skiff_tls_handshakes_total{result="timeout",version="none"}"#) == Some(4.0)
    });
}

/// h2 over TLS: a body many windows long arrives whole, and many streams at once on a
/// few connections are all answered.
#[test]
fn h2_over_tls_carries_large_bodies_and_many_streams() {
    let pki = Pki::new();
    let dir = site();
    std::fs::write(dir.path().join("ca.pem"), pki.ca_pem()).unwrap();
    let big: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("www/big.bin"), &big).unwrap();
    let srv = serve_localhost(&pki, dir.path());
    let port = srv.tls_addr.unwrap().port();
    let resolve = format!("localhost:{port}:127.0.0.1");
    let ca = dir.path().join("ca.pem");
    let out = common::curl(&[
        "--http2",
        "--cacert",
        ca.to_str().unwrap(),
        "--resolve",
        &resolve,
        &format!("https://localhost:{port}/big.bin"),
    ]);
    assert!(out.stdout == big, "got {} bytes", out.stdout.len());
    let h2load = Command::new("h2load")
        .args(["-n", "400", "-c", "2", "-m", "20"])
        .arg(format!("https://127.0.0.1:{port}/index.html"))
        .output()
        .expect("h2load is installed");
    let report = String::from_utf8_lossy(&h2load.stdout).into_owned();
    assert!(
        report.contains("400 succeeded") && report.contains("400 2xx"),
        "{report}"
    );
}

#[test]
fn skiff_check_loads_the_certificates_as_run_would() {
    let pki = Pki::new();
    let dir = site();
    let (c, d) = (pki.leaf(&["site.test"]), pki.leaf(&["site.test"]));
    let (cert, _) = write_leaf(&dir.path().join("c"), &c);
    let (_, key) = write_leaf(&dir.path().join("d"), &d);
    let check = |cert: &Path, key: &Path| {
        let config = write_config(
            dir.path(),
            &format!(
                "tls:\n  listen: 127.0.0.1:0\nvirtual_servers:\n  - name: site\n    hosts: [site.test]\n    default: true\n    root: {}\n    tls: {{ cert: {}, key: {} }}\n",
                dir.path().join("www").display(),
                cert.display(),
                key.display()
            ),
        );
        Command::new(env!("CARGO_BIN_EXE_skiff"))
            .args(["check", "--config"])
            .arg(config)
            .output()
            .unwrap()
    };
    let mismatched = check(&cert, &key);
    assert_eq!(mismatched.status.code(), Some(1));
    let err = String::from_utf8_lossy(&mismatched.stderr);
    assert!(
        err.contains("the private key does not belong to the certificate"),
        "{err}"
    );
    let (_, own_key) = write_leaf(&dir.path().join("c"), &c);
    let ok = check(&cert, &own_key);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
}

const CUT_BACKEND: &str = r#"
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', int(sys.argv[1])))
s.listen(8)
while True:
    c, _ = s.accept()
    d = b''
    while b'\r\n\r\n' not in d:
        part = c.recv(4096)
        if not part:
            break
        d += part
    if d:
        c.sendall(b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n')
    c.close()
"#;

/// A backend's body that fails part way, sent to an HTTP/1.0 client delimited by the
/// close: the TLS session then ends without close_notify, so the client can tell the body
/// was cut (with close_notify, a truncated body would look whole).
#[test]
fn a_body_cut_short_over_tls_ends_without_close_notify() {
    use common::backends::python_backend;
    let pki = Pki::new();
    let dir = site();
    write_leaf(&dir.path().join("tls"), &pki.leaf(&["site.test"]));
    // Chunked, one chunk, then the connection closes without the last chunk.
    let (_backend, port) = python_backend(dir.path(), "cut.py", CUT_BACKEND);
    let config = write_config(
        dir.path(),
        &format!(
            "tls:\n  listen: 127.0.0.1:0\nvirtual_servers:\n  - name: site\n    default: true\n    root: {}\n    tls: {{ cert: tls/tls.crt, key: tls/tls.key }}\n    rules:\n      - action: {{ proxy: {{ pool: cut }} }}\npools:\n  - {{ name: cut, protocol: http, endpoints: [\"127.0.0.1:{port}\"] }}\n",
            dir.path().join("www").display()
        ),
    );
    let srv = Server::run_config(&config);
    let mut conn = Conn::open(&pki, srv.tls_addr.unwrap(), "site.test");
    use std::io::Write;
    conn.tls
        .write_all(b"GET /x HTTP/1.0\r\nHost: site.test\r\n\r\n")
        .unwrap();
    conn.tls.flush().unwrap();
    let mut raw = Vec::new();
    let end = conn.tls.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    assert!(
        text.starts_with("HTTP/1.1 200") && text.ends_with("\r\n\r\nhello"),
        "{text}"
    );
    let err = end.expect_err("the cut body ended with close_notify, as if whole");
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof, "{err}");
}
