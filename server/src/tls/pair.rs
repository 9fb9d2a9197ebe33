//! A certificate chain and its key from PEM files, checked before it may serve: it
//! parses, the key matches the leaf, and the leaf is within its validity period.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

/// Where a pair comes from; also its identity across reloads of its files.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PairFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ocsp: Option<PathBuf>,
}

/// A pair that parsed and whose key matches its certificate.
#[derive(Clone)]
pub struct LoadedPair {
    pub key: Arc<CertifiedKey>,
    /// The leaf's DNS names (subject alternative names, else its common name), lower case.
    pub names: Vec<String>,
    /// The leaf's validity period, in Unix seconds.
    pub not_before: i64,
    pub not_after: i64,
    /// The leaf's serial number in hex, for logs.
    pub serial: String,
    /// The files' bytes as read, to tell a real change from a touched file.
    pub fingerprint: u64,
}

impl std::fmt::Debug for LoadedPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPair")
            .field("names", &self.names)
            .field("not_after", &self.not_after)
            .field("serial", &self.serial)
            .finish_non_exhaustive()
    }
}

impl LoadedPair {
    /// Whether the certificate names `host` (a virtual server's host: an exact name, or a
    /// `*.` wildcard, which only the same wildcard covers), as a client would check it.
    pub fn covers(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.names.iter().any(|n| {
            *n == host
                || n.strip_prefix("*.").is_some_and(|parent| {
                    !host.starts_with("*.")
                        && host.split_once('.').is_some_and(|(_, p)| p == parent)
                })
        })
    }

    /// Whether `now` (Unix seconds) lies within the validity period.
    pub fn valid_at(&self, now: i64) -> bool {
        self.not_before <= now && now <= self.not_after
    }
}

/// Unix seconds now.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Reads and checks a pair. The message names the file and what is wrong with it.
pub fn load(files: &PairFiles, provider: &CryptoProvider) -> Result<LoadedPair, String> {
    let cert_pem = read(&files.cert)?;
    let key_pem = read(&files.key)?;
    let ocsp = files.ocsp.as_deref().map(read).transpose()?;
    let mut pair = from_pem(&cert_pem, &key_pem, provider).map_err(|e| {
        format!(
            "certificate {} with key {}: {e}",
            files.cert.display(),
            files.key.display()
        )
    })?;
    if let Some(ocsp) = ocsp {
        if ocsp.is_empty() {
            return Err(format!(
                "OCSP response {} is empty",
                files.ocsp.as_deref().unwrap_or(Path::new("")).display()
            ));
        }
        pair.fingerprint = fingerprint(&[&cert_pem, &key_pem, &ocsp]);
        let mut key = (*pair.key).clone();
        key.ocsp = Some(ocsp);
        pair.key = Arc::new(key);
    }
    Ok(pair)
}

/// Whether the certificate or the key file does not exist (a Secret not there yet, or a
/// dangling volume link), as opposed to files that exist and do not load.
pub fn missing(files: &PairFiles) -> bool {
    !files.cert.exists() || !files.key.exists()
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// Checks a pair given as PEM text.
pub fn from_pem(
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<LoadedPair, String> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the certificate file is not PEM: {e}"))?;
    let Some(leaf) = chain.first() else {
        return Err("the certificate file holds no CERTIFICATE block".into());
    };
    let (_, parsed) = X509Certificate::from_der(leaf.as_ref())
        .map_err(|e| format!("the leaf certificate does not parse: {e}"))?;
    let names = dns_names(&parsed);
    let not_before = parsed.validity().not_before.timestamp();
    let not_after = parsed.validity().not_after.timestamp();
    let serial = parsed.tbs_certificate.raw_serial_as_string();
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| format!("the key file holds no usable private key: {e}"))?;
    let key = CertifiedKey::from_der(chain, key, provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => {
            "the private key does not belong to the certificate".to_owned()
        }
        e => format!("the private key is not usable: {e}"),
    })?;
    Ok(LoadedPair {
        key: Arc::new(key),
        names,
        not_before,
        not_after,
        serial,
        fingerprint: fingerprint(&[cert_pem, key_pem]),
    })
}

fn dns_names(cert: &X509Certificate<'_>) -> Vec<String> {
    let mut names: Vec<String> = match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::DNSName(d) => Some(d.to_ascii_lowercase()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    if names.is_empty() {
        // Clients ignore the common name once SANs exist; without them it is the name.
        names.extend(
            cert.subject()
                .iter_common_name()
                .filter_map(|cn| cn.as_str().ok())
                .map(str::to_ascii_lowercase),
        );
    }
    names
}

fn fingerprint(parts: &[&[u8]]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for p in parts {
        p.hash(&mut h);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::test_certs::{issue, Issued};

    fn provider() -> CryptoProvider {
        crate::tls::policy::provider()
    }

    #[test]
    fn a_pair_covers_its_names_and_one_label_below_its_wildcards() {
        let Issued { cert, key } = issue(&["www.example.com", "*.example.org"], false);
        let pair = from_pem(cert.as_bytes(), key.as_bytes(), &provider()).unwrap();
        for host in [
            "www.example.com",
            "WWW.example.com.",
            "a.example.org",
            "*.example.org",
        ] {
            assert!(pair.covers(host), "{host}");
        }
        for host in [
            "example.com",
            "example.org",
            "a.b.example.org",
            "*.example.com",
            "x.test",
        ] {
            assert!(!pair.covers(host), "{host}");
        }
    }

    #[test]
    fn a_matching_pair_loads_with_its_names_and_validity() {
        let Issued { cert, key } = issue(&["www.example.com", "*.example.org"], false);
        let pair = from_pem(cert.as_bytes(), key.as_bytes(), &provider()).unwrap();
        assert_eq!(pair.names, ["www.example.com", "*.example.org"]);
        assert!(pair.valid_at(unix_now()));
        let old = issue(&["old.example"], true);
        let pair = from_pem(old.cert.as_bytes(), old.key.as_bytes(), &provider()).unwrap();
        assert!(!pair.valid_at(unix_now()));
    }

    #[test]
    fn a_key_from_another_certificate_is_refused() {
        let a = issue(&["a.example"], false);
        let b = issue(&["b.example"], false);
        let err = from_pem(a.cert.as_bytes(), b.key.as_bytes(), &provider()).unwrap_err();
        assert_eq!(err, "the private key does not belong to the certificate");
    }

    #[test]
    fn garbage_gets_a_precise_message() {
        let a = issue(&["a.example"], false);
        let err = from_pem(b"hello", a.key.as_bytes(), &provider()).unwrap_err();
        assert_eq!(err, "the certificate file holds no CERTIFICATE block");
        let err = from_pem(a.cert.as_bytes(), b"hello", &provider()).unwrap_err();
        assert!(
            err.starts_with("the key file holds no usable private key"),
            "{err}"
        );
        let broken = a.cert.replace("MII", "MIX");
        let err = from_pem(broken.as_bytes(), a.key.as_bytes(), &provider()).unwrap_err();
        assert!(
            err.starts_with("the leaf certificate does not parse"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_file_is_named() {
        let files = PairFiles {
            cert: "/nonexistent/tls.crt".into(),
            key: "/nonexistent/tls.key".into(),
            ocsp: None,
        };
        let err = load(&files, &provider()).unwrap_err();
        assert!(err.starts_with("cannot read /nonexistent/tls.crt"), "{err}");
    }
}
