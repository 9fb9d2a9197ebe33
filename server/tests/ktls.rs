//! HTTPS with kTLS on `auto` (the default): HTTP/1.1 in every TLS version and cipher,
//! and h2, must be served alike whether the kernel takes the session (sendfile on the
//! socket) or the server falls back to rustls on the same connection, and the metric
//! says which. On a kernel without the `tls` module (this project's CI machine), every
//! connection is the fallback's.

mod common;

use common::*;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CipherSuite, ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme,
    StreamOwned, SupportedProtocolVersion,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug)]
struct AnyCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A self-signed ECDSA certificate for localhost, written beside the site.
fn write_certificate(dir: &Path) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (
        cert_path.to_string_lossy().into_owned(),
        key_path.to_string_lossy().into_owned(),
    )
}

fn start_https(extra: &[&str]) -> (Server, tempfile::TempDir, tempfile::TempDir) {
    let site = sample_site();
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = write_certificate(certs.path());
    let server = common::tls::serve_https(site.path(), Path::new(&cert), Path::new(&key), extra);
    (server, site, certs)
}

/// A client offering one suite (or all) and one version (or both), with `alpn`.
fn client(
    suite: Option<CipherSuite>,
    version: Option<&'static SupportedProtocolVersion>,
    alpn: &[&[u8]],
) -> Arc<ClientConfig> {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    if let Some(suite) = suite {
        provider.cipher_suites.retain(|s| s.suite() == suite);
        assert_eq!(provider.cipher_suites.len(), 1);
    }
    let provider = Arc::new(provider);
    let versions = match version {
        Some(v) => vec![v],
        None => vec![&rustls::version::TLS13, &rustls::version::TLS12],
    };
    let mut config = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// Sends `requests` in one write over TLS and reads until the server closes; a close
/// without close_notify (a kernel socket being closed) ends the read as well.
fn https_exchange(addr: SocketAddr, config: Arc<ClientConfig>, requests: &[u8]) -> Vec<u8> {
    let conn = ClientConnection::new(config, ServerName::try_from("localhost").unwrap()).unwrap();
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut tls = StreamOwned::new(conn, sock);
    tls.write_all(requests).unwrap();
    tls.flush().unwrap();
    let mut out = Vec::new();
    match tls.read_to_end(&mut out) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
        Err(e) => panic!("reading the responses: {e} (after {} bytes)", out.len()),
    }
    out
}

/// A parsed response: status, lower-cased headers, body.
type Response = (u16, Vec<(String, String)>, Vec<u8>);

/// Splits pipelined responses framed by Content-Length.
fn split_responses(mut raw: &[u8]) -> Vec<Response> {
    let mut out = Vec::new();
    while !raw.is_empty() {
        let end = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a response head")
            + 4;
        let (status, headers, _) = parse_response(&raw[..end]);
        let len: usize = get_header(&headers, "content-length").map_or(0, |l| l.parse().unwrap());
        out.push((status, headers, raw[end..end + len].to_vec()));
        raw = &raw[end + len..];
    }
    out
}

/// Whether the kernel here has the tls ULP registered (loaded or built in); without it,
/// every connection must be the userspace fallback.
fn kernel_has_tls() -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp")
        .is_ok_and(|l| l.split_whitespace().any(|u| u == "tls"))
}

fn mode_count(server: &Server, mode: &str) -> u64 {
    server
        .metric(&format!("skiff_tls_connections_total{{mode=\"{mode}\"}}"))
        .unwrap_or(0.0) as u64
}

const PIPELINE: &[u8] = b"GET /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n\
GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n\
POST /a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello\
GET /docs/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

/// The four answers to `PIPELINE`: a 2 MiB file (sendfile on a kernel socket), a small
/// one, a request with a body (handed to hyper), and one after the hand-over.
fn check_pipeline(raw: &[u8], what: &str) {
    let responses = split_responses(raw);
    assert_eq!(responses.len(), 4, "{what}: {responses:?}");
    assert_eq!(responses[0].0, 200, "{what}");
    assert!(responses[0].2 == big_bin_bytes(), "{what}: big.bin intact");
    assert_eq!(responses[1].0, 200, "{what}");
    assert_eq!(
        responses[1].2, b"0123456789abcdefghijklmnopqrstuvwxyz",
        "{what}"
    );
    assert_eq!(
        responses[2].0, 405,
        "{what}: a body goes to hyper, which answers"
    );
    assert_eq!(responses[3].0, 200, "{what}");
    assert_eq!(responses[3].2, b"<h1>docs</h1>\n", "{what}");
}

#[test]
fn http11_over_every_version_and_cipher_is_served_and_counted_by_mode() {
    use rustls::version::{TLS12, TLS13};
    let (server, _site, _certs) = start_https(&[]);
    let addr = server.tls_addr.unwrap();
    let cases: &[(
        Option<CipherSuite>,
        Option<&'static SupportedProtocolVersion>,
    )] = &[
        (Some(CipherSuite::TLS13_AES_128_GCM_SHA256), Some(&TLS13)),
        (Some(CipherSuite::TLS13_AES_256_GCM_SHA384), Some(&TLS13)),
        (
            Some(CipherSuite::TLS13_CHACHA20_POLY1305_SHA256),
            Some(&TLS13),
        ),
        (
            Some(CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
            Some(&TLS12),
        ),
        (
            Some(CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
            Some(&TLS12),
        ),
        (
            Some(CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
            Some(&TLS12),
        ),
    ];
    let mut connections = 0;
    for &(suite, version) in cases {
        for alpn in [&[&b"http/1.1"[..]][..], &[]] {
            let what = format!("{suite:?} alpn {alpn:?}");
            let raw = https_exchange(addr, client(suite, version, alpn), PIPELINE);
            check_pipeline(&raw, &what);
            connections += 1;
        }
    }
    let (kernel, userspace) = (
        mode_count(&server, "kernel"),
        mode_count(&server, "userspace"),
    );
    assert_eq!(
        kernel + userspace,
        connections,
        "each connection counted once"
    );
    if kernel_has_tls() {
        assert_eq!(
            kernel, connections,
            "the kernel has tls: every HTTP/1.1 session moves"
        );
    } else {
        assert_eq!(userspace, connections, "no tls module here: all fall back");
    }
    assert_eq!(
        server
            .metric("skiff_tls_kernel_failures_total")
            .unwrap_or(0.0),
        0.0
    );
    assert_eq!(
        server
            .metric("skiff_tls_handshakes_total{result=\"success\",version=\"1.2\"}")
            .unwrap_or(0.0) as u64,
        6
    );
}

#[test]
fn h2_stays_on_rustls() {
    let (server, _site, _certs) = start_https(&[]);
    let addr = server.tls_addr.unwrap();
    let before = mode_count(&server, "userspace");
    let url = format!("https://localhost:{}/a.txt", addr.port());
    let resolve = format!("localhost:{}:127.0.0.1", addr.port());
    let out = curl(&[
        "-k",
        "--http2",
        "--resolve",
        &resolve,
        "-o",
        "-",
        "-w",
        "\n%{http_version} %{http_code}",
        &url,
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.ends_with("0123456789abcdefghijklmnopqrstuvwxyz\n2 200"),
        "{text}"
    );
    assert_eq!(mode_count(&server, "userspace"), before + 1);
    assert_eq!(
        mode_count(&server, "kernel"),
        0,
        "h2 never moves to the kernel"
    );
    // curl's HTTP/1.1 over TLS, keep-alive across two URLs on one connection.
    let out = curl(&[
        "-k",
        "--http1.1",
        "--resolve",
        &resolve,
        "-o",
        "/dev/null",
        "-o",
        "/dev/null",
        "-w",
        "%{http_version} %{http_code} %{num_connects}\n",
        &url,
        &format!("https://localhost:{}/big.bin", addr.port()),
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "1.1 200 1\n1.1 200 0\n"
    );
}

#[test]
fn https_requests_are_secure_on_either_path() {
    // --https-redirect sends plain-HTTP requests to HTTPS; an HTTPS request that were
    // not marked secure (as the fast path on a kernel socket must do itself) would be
    // redirected in a loop.
    let (server, _site, _certs) = start_https(&["--https-redirect"]);
    let addr = server.tls_addr.unwrap();
    let raw = https_exchange(
        addr,
        client(None, None, &[&b"http/1.1"[..]]),
        b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\nGET /docs/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    let responses = split_responses(&raw);
    assert_eq!(responses.len(), 2);
    assert!(responses.iter().all(|r| r.0 == 200), "{responses:?}");
    let plain = raw_exchange(
        server.addr,
        "GET /a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert!(plain.starts_with("HTTP/1.1 308"), "{plain}");
}

#[test]
fn ktls_off_serves_the_same_in_userspace() {
    let (server, _site, _certs) = start_https(&["--ktls", "off"]);
    let addr = server.tls_addr.unwrap();
    let raw = https_exchange(addr, client(None, None, &[&b"http/1.1"[..]]), PIPELINE);
    check_pipeline(&raw, "ktls off");
    assert_eq!(mode_count(&server, "userspace"), 1);
    assert_eq!(mode_count(&server, "kernel"), 0);
}
