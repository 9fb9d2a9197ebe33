//! HTTPS: the TLS listener with its policy and certificates, and what a virtual server
//! adds (its own certificate, HSTS, the redirect from plain HTTP).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The TLS listener: HTTPS with HTTP/1.1 and HTTP/2 chosen by ALPN.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// Address for HTTPS, `IP:PORT`. Changing it needs a restart.
    pub listen: String,
    /// Certificates offered for the names they cover (their subject alternative names),
    /// besides each virtual server's own `tls`. With no SNI, a client gets the default
    /// virtual server's certificate, else the first one here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub certificates: Vec<CertificateFiles>,
    /// The lowest protocol version accepted: `"1.2"` (default) or `"1.3"`.
    #[serde(default)]
    pub min_version: TlsVersion,
    /// Hand the session keys to the kernel after the handshake (kTLS), so files keep going
    /// out with sendfile: `auto` where the kernel offers it (a per-connection probe, falling
    /// back to userspace TLS quietly), or `off`.
    #[serde(default)]
    pub ktls: KtlsMode,
    /// A handshake not finished in this long is dropped.
    #[serde(default = "default_handshake_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub handshake_timeout: Duration,
    /// The port clients reach HTTPS on, for redirects from plain HTTP (a Service's 443 in
    /// front of a container's 8443). Default: the listener's port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_port: Option<u16>,
}

impl TlsConfig {
    /// A listener on `listen` with every optional field at its default.
    pub fn new(listen: impl Into<String>) -> TlsConfig {
        TlsConfig {
            listen: listen.into(),
            certificates: Vec::new(),
            min_version: TlsVersion::default(),
            ktls: KtlsMode::default(),
            handshake_timeout: default_handshake_timeout(),
            public_port: None,
        }
    }
}

fn default_handshake_timeout() -> Duration {
    Duration::from_secs(10)
}

/// A certificate chain and its private key, as PEM files. Both are watched (through their
/// folder, so a Kubernetes Secret volume's atomic update is seen) and a new pair replaces
/// the old one only once it parses, the key matches and it has not expired.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CertificateFiles {
    /// The PEM certificate chain, leaf first (`tls.crt`).
    pub cert: String,
    /// The PEM private key: PKCS#8, PKCS#1 (RSA) or SEC1 (EC) (`tls.key`).
    pub key: String,
    /// A DER OCSP response to staple, if one is kept beside the certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocsp: Option<String>,
    /// Files that do not load are not an error: the certificate waits, and serves once its
    /// files load. Meanwhile its virtual server keeps the certificate it had, if that names
    /// all its hosts (a pod that cannot mount a Kubernetes Secret renamed since it started),
    /// else its names get no certificate of their own. Otherwise they fail the start or the
    /// reload.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// A TLS protocol version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TlsVersion {
    #[default]
    #[serde(rename = "1.2")]
    Tls12,
    #[serde(rename = "1.3")]
    Tls13,
}

/// Whether established TLS sessions move into the kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KtlsMode {
    /// Where the kernel's `tls` module is available; userspace TLS otherwise.
    #[default]
    Auto,
    /// Always userspace TLS.
    Off,
}

/// HTTP Strict Transport Security, sent on HTTPS responses only (RFC 6797 §7.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Hsts {
    /// How long browsers keep to HTTPS, e.g. `365d` (`max-age`).
    #[serde(default = "default_hsts_max_age", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub max_age: Duration,
    /// Also for every subdomain (`includeSubDomains`).
    #[serde(default, skip_serializing_if = "super::defaults::is_false")]
    pub include_subdomains: bool,
    /// Ask to be preloaded into browsers (`preload`; needs a year and subdomains).
    #[serde(default, skip_serializing_if = "super::defaults::is_false")]
    pub preload: bool,
}

impl Default for Hsts {
    fn default() -> Self {
        Hsts {
            max_age: default_hsts_max_age(),
            include_subdomains: false,
            preload: false,
        }
    }
}

fn default_hsts_max_age() -> Duration {
    Duration::from_secs(365 * 24 * 3600)
}
