//! The server as a whole: listeners, cache, limits, DNS, the access log, and virtual
//! servers with their compression settings.

use super::defaults::is_false;
use super::pools::Pool;
use super::rules::{Bandwidth, Rule};
use super::tls::{CertificateFiles, Hsts, TlsConfig};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// A Skiff server configuration: listeners, global limits, virtual servers and backend pools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address for HTTP traffic (HTTP/1.1 and h2c), `IP:PORT`. Changing it needs a restart.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Address of the admin listener (/healthz, /readyz, /metrics), `IP:PORT`. Changing it needs a restart.
    #[serde(default = "default_admin_listen")]
    pub admin_listen: String,
    /// HTTPS: the TLS listener, its policy and its shared certificates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsConfig>,
    /// Serving threads, each with its own event loop. Default: the number of cores. Changing it needs a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// The in-memory I/O cache.
    #[serde(default)]
    pub cache: CacheConfig,
    /// Request limits and timeouts.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// The access log, written to stdout.
    #[serde(default)]
    pub access_log: AccessLogConfig,
    /// How pool endpoints given by host name are resolved.
    #[serde(default)]
    pub dns: DnsConfig,
    /// Proxies (CIDRs) whose `X-Forwarded-For` is believed when finding the client address.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trusted_proxies: Vec<String>,
    /// Pass on to HTTP backends the X-Forwarded-Proto and X-Forwarded-Port a trusted proxy (one of `trusted_proxies`) sends, in place of Skiff's own X-Forwarded-Proto and none: behind a balancer that ends TLS, backends see `https` and do not redirect to HTTPS for ever. Turn it on only for a balancer that sets both, replacing a client's (AWS's ALB does): one that passes a client's on lets the client claim either. X-Forwarded-Host, -Prefix, Forwarded and the like are never taken from a proxy, as balancers commonly pass a client's on. Off, only X-Forwarded-For is read from trusted proxies.
    #[serde(default, skip_serializing_if = "is_false")]
    pub use_forwarded_headers: bool,
    /// What a request for a host that no virtual server names gets, when no virtual server is the default.
    #[serde(default)]
    pub unknown_host: UnknownHost,
    /// The virtual servers this process hosts.
    pub virtual_servers: Vec<VirtualServer>,
    /// Backend pools that `proxy`, `fastcgi`, `uwsgi` and `scgi` actions send requests to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<Pool>,
}

fn default_listen() -> String {
    "0.0.0.0:8080".into()
}
fn default_admin_listen() -> String {
    "127.0.0.1:9145".into()
}

/// I/O cache sizing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// Files up to this many bytes are held in memory.
    #[serde(default = "default_max_file_size")]
    pub max_file_size: u64,
    /// Total bytes the cache may hold. Each entry is charged 512 bytes besides its
    /// content, and each descriptor it keeps open (files from 16 KiB, for sendfile) 4 KiB,
    /// so this also bounds the files held open. A file held open and not asked for in a
    /// minute is let go, so the space of one deleted or replaced since is freed.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
    /// How often a cached file is re-checked with stat, e.g. `1s` or `250ms`.
    #[serde(default = "default_revalidate", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub revalidate: Duration,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            max_file_size: default_max_file_size(),
            max_bytes: default_max_bytes(),
            revalidate: default_revalidate(),
        }
    }
}
fn default_max_file_size() -> u64 {
    256 * 1024
}
fn default_max_bytes() -> u64 {
    64 * 1024 * 1024
}
fn default_revalidate() -> Duration {
    Duration::from_secs(1)
}

/// Request limits and timeouts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest request head in bytes; 431 beyond.
    #[serde(default = "default_max_header_bytes")]
    pub max_header_bytes: usize,
    /// Longest request line in bytes; 414 beyond.
    #[serde(default = "default_max_request_line")]
    pub max_request_line: usize,
    /// Time to receive a request head once it has started (slowloris guard).
    #[serde(default = "default_header_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub header_timeout: Duration,
    /// Idle keep-alive connections are closed after this long.
    #[serde(default = "default_keepalive_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub keepalive_timeout: Duration,
    /// Connections beyond this are held, unserved, until others close.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// A request body that sends nothing for this long is abandoned with 408; the same
    /// span is the window over which `body_min_rate` is held (Apache's mod_reqtimeout `body=`).
    #[serde(default = "default_body_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub body_timeout: Duration,
    /// Each `body_timeout` window of a request body must bring at least this many bytes per
    /// second (mod_reqtimeout's `MinRate`, held per window so a fast start buys no credit), so a trickle cannot hold a connection for ever; 0: no minimum.
    #[serde(default = "default_body_min_rate")]
    pub body_min_rate: u64,
    /// A client that takes no response bytes for this long is disconnected (nginx's
    /// `send_timeout`).
    #[serde(default = "default_send_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub send_timeout: Duration,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_header_bytes: default_max_header_bytes(),
            max_request_line: default_max_request_line(),
            header_timeout: default_header_timeout(),
            keepalive_timeout: default_keepalive_timeout(),
            max_connections: default_max_connections(),
            body_timeout: default_body_timeout(),
            body_min_rate: default_body_min_rate(),
            send_timeout: default_send_timeout(),
        }
    }
}
fn default_max_header_bytes() -> usize {
    16 * 1024
}
fn default_max_request_line() -> usize {
    8 * 1024
}
fn default_header_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_keepalive_timeout() -> Duration {
    Duration::from_secs(75)
}
fn default_max_connections() -> usize {
    10_000
}
fn default_body_timeout() -> Duration {
    Duration::from_secs(20)
}
fn default_body_min_rate() -> u64 {
    500
}
fn default_send_timeout() -> Duration {
    Duration::from_secs(30)
}

/// DNS for pool endpoints. A name (a Kubernetes headless Service, say) is resolved again
/// every `refresh`, and requests rotate over all its addresses, so pods come and go with
/// no reload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DnsConfig {
    /// Name servers (`IP:PORT`); empty means the system's (/etc/resolv.conf).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<String>,
    /// How often names are resolved again.
    #[serde(default = "default_dns_refresh", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub refresh: Duration,
}

impl Default for DnsConfig {
    fn default() -> Self {
        DnsConfig {
            servers: Vec::new(),
            refresh: default_dns_refresh(),
        }
    }
}

fn default_dns_refresh() -> Duration {
    Duration::from_secs(5)
}

/// Access log settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AccessLogConfig {
    /// `combined` (Apache combined, the default), `json`, or `off`.
    #[serde(default)]
    pub format: AccessLogFormat,
    /// A file to append to instead of stdout (opened at start; rotate with copytruncate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Access log line format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AccessLogFormat {
    #[default]
    Combined,
    Json,
    Off,
}

/// The answer for a host no virtual server names, when none is the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UnknownHost {
    /// 421 Misdirected Request.
    #[default]
    Misdirected,
    /// 404 Not Found.
    NotFound,
}

/// A virtual server: a set of host names with a document root and ordered rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VirtualServer {
    /// A unique name, used in metrics labels and logs.
    pub name: String,
    /// Host names served: exact (`www.example.com`) or a leading wildcard (`*.example.com`). Matched case-insensitively, without the port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Serve requests for hosts no virtual server names. At most one virtual server may be the default.
    #[serde(default, skip_serializing_if = "is_false")]
    pub default: bool,
    /// Document root for `static` actions; relative paths are taken from the config file's folder.
    pub root: String,
    /// Index files tried, in order, for a directory. One added later ahead of the file
    /// served is served from the next cache revalidation (`cache.revalidate`).
    #[serde(default = "default_index")]
    pub index: Vec<String>,
    /// Generate an HTML listing for directories without an index file.
    #[serde(default, skip_serializing_if = "is_false")]
    pub listing: bool,
    /// Serve files whose names start with a dot (`.well-known` is always served).
    #[serde(default, skip_serializing_if = "is_false")]
    pub hidden_files: bool,
    /// Let symlinks point outside the document root.
    #[serde(default, skip_serializing_if = "is_false")]
    pub follow_symlinks_outside_root: bool,
    /// Custom error pages: a status code (400-599) mapped to a path under the root, e.g. `404: /404.html`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub error_pages: BTreeMap<u16, String>,
    /// Bandwidth limits for every response of this virtual server (`total` is shared by all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<Bandwidth>,
    /// On-the-fly compression of cacheable files (precompressed `.br`/`.zst`/`.gz` sidecars are always preferred).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<Compression>,
    /// This virtual server's certificate, offered on the TLS listener for its `hosts` (and
    /// to clients without SNI when it is the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<CertificateFiles>,
    /// Strict-Transport-Security on this virtual server's HTTPS responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hsts: Option<Hsts>,
    /// Answer plain-HTTP requests with a 308 redirect to the same URL over HTTPS (a rule's
    /// own `https_redirect` overrides this, e.g. to keep `/.well-known/` on HTTP).
    #[serde(default, skip_serializing_if = "is_false")]
    pub https_redirect: bool,
    /// Rules, evaluated in order; the first that matches handles the request. With no match, files are served from `root`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
}

impl VirtualServer {
    /// A virtual server with every optional field at the default the parser gives it.
    pub fn new(name: impl Into<String>, root: impl Into<String>) -> VirtualServer {
        VirtualServer {
            name: name.into(),
            hosts: vec![],
            default: false,
            root: root.into(),
            index: default_index(),
            listing: false,
            hidden_files: false,
            follow_symlinks_outside_root: false,
            error_pages: BTreeMap::new(),
            bandwidth: None,
            compression: None,
            tls: None,
            hsts: None,
            https_redirect: false,
            rules: vec![],
        }
    }
}

/// On-the-fly compression. Each file version is compressed once per coding and kept in the
/// I/O cache; files above the cache's `max_file_size` are sent as they are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Compression {
    /// Codings offered. When the client rates several equally, br is preferred, then zstd, then gzip.
    #[serde(default = "default_codings")]
    pub encodings: Vec<Coding>,
    /// Bodies smaller than this many bytes are sent uncompressed.
    #[serde(default = "default_min_size")]
    pub min_size: u64,
    /// Media types compressed: exact (`application/json`) or by type (`text/*`).
    #[serde(default = "default_compressible")]
    pub types: Vec<String>,
}

impl Default for Compression {
    fn default() -> Self {
        Compression {
            encodings: default_codings(),
            min_size: default_min_size(),
            types: default_compressible(),
        }
    }
}

/// A content coding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Coding {
    #[serde(rename = "br")]
    Brotli,
    #[serde(rename = "zstd")]
    Zstd,
    #[serde(rename = "gzip")]
    Gzip,
}

fn default_codings() -> Vec<Coding> {
    vec![Coding::Brotli, Coding::Zstd, Coding::Gzip]
}
fn default_min_size() -> u64 {
    1024
}
fn default_compressible() -> Vec<String> {
    [
        "text/*",
        "application/javascript",
        "application/json",
        "application/manifest+json",
        "application/ld+json",
        "application/xml",
        "application/xhtml+xml",
        "application/wasm",
        "image/svg+xml",
        "font/ttf",
        "font/otf",
    ]
    .map(String::from)
    .to_vec()
}

fn default_index() -> Vec<String> {
    vec!["index.html".into(), "index.htm".into()]
}
