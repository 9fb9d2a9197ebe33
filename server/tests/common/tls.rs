//! HTTPS test kit: a test CA signing leaf certificates (rcgen), and a kept-alive
//! HTTP/1.1 client over rustls that trusts it.

use super::{get_header, parse_response};
use rustls::pki_types::{CertificateDer, ServerName};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A test CA and the leaf certificates it signs.
pub struct Pki {
    ca: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

/// A leaf certificate and key as PEM, and its DER to compare with what a client saw.
pub struct Leaf {
    pub cert: String,
    pub key: String,
    pub der: Vec<u8>,
}

impl Pki {
    pub fn new() -> Pki {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "skiff test CA");
        let ca = rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap())
            .unwrap();
        Pki { ca }
    }

    pub fn leaf(&self, names: &[&str]) -> Leaf {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut params = rcgen::CertificateParams::new(names.clone()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, names[0].as_str());
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }

    /// A leaf for `names` whose validity ended in 2001.
    pub fn expired_leaf(&self, names: &[&str]) -> Leaf {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut params = rcgen::CertificateParams::new(names).unwrap();
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }

    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    pub fn client(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(self.ca.der().to_vec()))
            .unwrap();
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }
}

pub fn write_leaf(dir: &Path, leaf: &Leaf) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, &leaf.cert).unwrap();
    std::fs::write(&key, &leaf.key).unwrap();
    (cert, key)
}

/// A kept-alive HTTPS connection from a rustls client.
/// `skiff serve SITE` with an HTTPS listener too, serving the pair at `cert` and `key`.
pub fn serve_https(site: &Path, cert: &Path, key: &Path, extra: &[&str]) -> super::Server {
    let mut args = vec![
        "--tls-listen",
        "127.0.0.1:0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let server = super::Server::start(site, &args);
    assert!(server.tls_addr.is_some(), "the HTTPS listener's address");
    server
}

pub struct Conn {
    pub tls: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
}

impl Conn {
    /// Connects with `sni` as the server name (an IP literal sends no SNI).
    pub fn open(pki: &Pki, addr: SocketAddr, sni: &str) -> Conn {
        Conn::connect(pki.client(&[b"http/1.1"]), addr, sni)
    }

    /// Connects without SNI, verifying the certificate for `name`.
    pub fn open_without_sni(pki: &Pki, addr: SocketAddr, name: &str) -> Conn {
        let mut config = (*pki.client(&[b"http/1.1"])).clone();
        config.enable_sni = false;
        Conn::connect(Arc::new(config), addr, name)
    }

    pub fn connect(config: Arc<rustls::ClientConfig>, addr: SocketAddr, sni: &str) -> Conn {
        let name = ServerName::try_from(sni.to_owned()).unwrap();
        let conn = rustls::ClientConnection::new(config, name).unwrap();
        let sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Conn {
            tls: rustls::StreamOwned::new(conn, sock),
        }
    }

    /// The certificate the server presented (after the first exchange).
    pub fn peer_der(&self) -> Vec<u8> {
        self.tls.conn.peer_certificates().unwrap()[0].to_vec()
    }

    /// One GET on the connection: (status, headers, body).
    pub fn get(&mut self, host: &str, path: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
        write!(self.tls, "GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").unwrap();
        self.tls.flush().unwrap();
        let mut raw = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            let n = self.tls.read(&mut buf).unwrap();
            assert!(n > 0, "connection closed mid-response: {raw:?}");
            raw.extend_from_slice(&buf[..n]);
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                let (status, headers, _) = parse_response(&raw);
                if get_header(&headers, "transfer-encoding") == Some("chunked") {
                    if let Some(body) = dechunk(&raw[end + 4..]) {
                        return (status, headers, body);
                    }
                    continue;
                }
                let len: usize =
                    get_header(&headers, "content-length").map_or(0, |v| v.parse().unwrap());
                if raw.len() >= end + 4 + len {
                    return parse_response(&raw[..end + 4 + len]);
                }
            }
        }
    }
}

/// A whole chunked body, decoded; `None` while its last chunk has not arrived.
pub fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n")?;
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..line_end]).ok()?, 16).ok()?;
        let data = raw.get(line_end + 2..line_end + 2 + size + 2)?;
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(&data[..size]);
        raw = &raw[line_end + 2 + size + 2..];
    }
}

/// A Kubernetes Secret volume: `tls.crt -> ..data/tls.crt`, `..data -> ..<timestamp>`;
/// an update writes a new timestamped folder and renames a new `..data` link over the old.
pub struct SecretVolume {
    dir: PathBuf,
    generation: usize,
}

impl SecretVolume {
    pub fn new(dir: PathBuf, leaf: &Leaf) -> SecretVolume {
        std::fs::create_dir_all(&dir).unwrap();
        let mut v = SecretVolume { dir, generation: 0 };
        v.update(&leaf.cert, &leaf.key);
        for name in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(format!("..data/{name}"), v.dir.join(name)).unwrap();
        }
        v
    }

    pub fn update(&mut self, cert: &str, key: &str) {
        self.generation += 1;
        let data = format!("..2026_11_23_00_00_0{}", self.generation);
        let (cert_path, key_path) = write_leaf(
            &self.dir.join(&data),
            &Leaf {
                cert: cert.into(),
                key: key.into(),
                der: vec![],
            },
        );
        assert!(cert_path.exists() && key_path.exists());
        let tmp = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&data, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.join("..data")).unwrap();
    }
}
