//! The configuration model. Every field is documented here; the documentation flows into
//! the JSON Schema (`config.schema.json`) and from there into editors and the operator.

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
    /// Total bytes the cache may hold.
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
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_header_bytes: default_max_header_bytes(),
            max_request_line: default_max_request_line(),
            header_timeout: default_header_timeout(),
            keepalive_timeout: default_keepalive_timeout(),
            max_connections: default_max_connections(),
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
    /// Index files tried, in order, for a directory.
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
    /// Rules, evaluated in order; the first that matches handles the request. With no match, files are served from `root`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
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
fn is_false(b: &bool) -> bool {
    !*b
}

/// A rule: what requests it matches, what handles them, and what it changes on the way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// An optional name, for logs and error messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Conditions, all of which must hold. An empty match matches every request.
    #[serde(default, rename = "match")]
    pub matches: Match,
    /// What answers the request.
    pub action: Action,
    /// Response headers to add, set or remove.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<HeaderOps>,
    /// Browser caching: sets Cache-Control and Expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CachePolicy>,
    /// Cross-origin resource sharing, including preflight answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cors: Option<Cors>,
    /// HTTP basic authentication against an htpasswd file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic_auth: Option<BasicAuth>,
    /// Client address allow and deny lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<AccessList>,
    /// Per-client-address request rate limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// Bandwidth limits for responses of this rule (`total` is shared by all of them; `per_connection` overrides the virtual server's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<Bandwidth>,
}

/// Traffic shaping, in bytes per second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Bandwidth {
    /// Each response body is sent at most this fast.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_connection: Option<u64>,
    /// All responses together are sent at most this fast (with a one-second burst).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
}

/// Request conditions. All given conditions must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Match {
    /// The path starts with this (after decoding and normalization), e.g. `/static/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The path equals this exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The path matches this regular expression (Rust `regex` syntax); its captures are `$1`..`$9` in redirects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// The file extension is one of these (without the dot), e.g. `[css, js]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    /// The method is one of these, e.g. `[GET, HEAD]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
    /// Request headers that must be present, or equal a value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HeaderMatch>,
}

/// A request header condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HeaderMatch {
    /// The header name (case-insensitive).
    pub name: String,
    /// When given, the header must equal this value exactly; otherwise it must only be present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// What answers a matched request. Exactly one kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// Serve files from the virtual server's root.
    Static {},
    /// Redirect. `to` may use `$1`..`$9` (regex captures), `$host`, `$scheme`, `$request_uri` (path and query), `$uri` (path) and `$args` (query).
    Redirect {
        /// The Location template.
        to: String,
        /// 301, 302, 303, 307 or 308.
        #[serde(default = "default_redirect_status")]
        status: u16,
    },
    /// Answer with a fixed response.
    Return {
        /// The status code (200-599).
        status: u16,
        /// The body.
        #[serde(default)]
        body: String,
        /// The Content-Type of the body.
        #[serde(default = "default_return_type")]
        content_type: String,
    },
    /// Refuse the request.
    Deny {
        /// The status code (400-599), 403 by default.
        #[serde(default = "default_deny_status")]
        status: u16,
    },
    /// Send to an HTTP backend pool.
    Proxy(ProxyTarget),
    /// Send to a FastCGI backend pool (PHP-FPM).
    Fastcgi(CgiTarget),
    /// Send to a uWSGI backend pool.
    Uwsgi(CgiTarget),
    /// Send to an SCGI backend pool.
    Scgi(CgiTarget),
}

fn default_redirect_status() -> u16 {
    302
}
fn default_deny_status() -> u16 {
    403
}
fn default_return_type() -> String {
    "text/plain; charset=utf-8".into()
}

/// An HTTP backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProxyTarget {
    /// The name of an `http` pool in `pools`.
    pub pool: String,
    /// The Host header sent to the backend; by default the client's is passed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// A FastCGI, uwsgi or SCGI backend, and how the CGI environment is built for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CgiTarget {
    /// The name of a pool in `pools`, of the matching protocol.
    pub pool: String,
    /// DOCUMENT_ROOT as the backend sees it (its container may mount the code elsewhere). Default: the virtual server's root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document_root: Option<String>,
    /// Script for paths ending in `/` (FastCGI), e.g. `index.php`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    /// Split `/app.php/extra` into SCRIPT_NAME `/app.php` and PATH_INFO `/extra` at the first `.php` (FastCGI; PHP-style).
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub split_path_info: bool,
    /// Extra parameters, added to or overriding the CGI ones.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
}

fn default_true() -> bool {
    true
}
fn is_true(b: &bool) -> bool {
    *b
}

/// Response header changes, applied in the order remove, set, add.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HeaderOps {
    /// Header names to remove.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
    /// Headers to set, replacing any value present.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, String>,
    /// Headers to add, keeping values present.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub add: BTreeMap<String, String>,
}

/// Browser caching policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CachePolicy {
    /// Seconds a response may be reused: `Cache-Control: max-age=N` and a matching `Expires`.
    pub max_age: u64,
    /// Adds `public` (shared caches may store it) or `private`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility: Option<CacheVisibility>,
    /// Adds `immutable`, for fingerprinted assets.
    #[serde(default, skip_serializing_if = "is_false")]
    pub immutable: bool,
}

/// Who may store a cached response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CacheVisibility {
    Public,
    Private,
}

/// CORS policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cors {
    /// Allowed origins (`https://app.example.com`), or `*` for any.
    pub allow_origins: Vec<String>,
    /// Methods allowed in preflight answers.
    #[serde(default = "default_cors_methods")]
    pub allow_methods: Vec<String>,
    /// Request headers allowed in preflight answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_headers: Vec<String>,
    /// Response headers exposed to scripts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expose_headers: Vec<String>,
    /// Send `Access-Control-Allow-Credentials: true` (not allowed with `*`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_credentials: bool,
    /// Seconds a preflight answer may be cached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<u64>,
}

fn default_cors_methods() -> Vec<String> {
    vec!["GET".into(), "HEAD".into(), "POST".into()]
}

/// Basic authentication.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BasicAuth {
    /// The realm shown by browsers.
    #[serde(default = "default_realm")]
    pub realm: String,
    /// Path of an htpasswd file with bcrypt (`$2y$`) entries.
    pub htpasswd: String,
}

fn default_realm() -> String {
    "Restricted".into()
}

/// Address lists. A client in `deny` is refused; if `allow` is not empty, a client must be in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AccessList {
    /// CIDRs allowed, e.g. `10.0.0.0/8`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// CIDRs denied; checked first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// The status for refused clients (403 by default).
    #[serde(default = "default_deny_status")]
    pub status: u16,
}

/// A token bucket per client address: `burst` requests at once, refilled at `requests_per_second`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Sustained rate.
    pub requests_per_second: f64,
    /// Bucket size: requests allowed at once.
    pub burst: u32,
}

/// A backend pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pool {
    /// A unique name, referred to by actions.
    pub name: String,
    /// The wire protocol: `http`, `fastcgi`, `uwsgi` or `scgi`.
    pub protocol: PoolProtocol,
    /// Endpoints: `host:port` (a host name is resolved again every `dns.refresh` and requests rotate over its addresses, so a headless Service's pods are followed without a reload), or `unix:/path/to.sock`.
    pub endpoints: Vec<String>,
    /// How an endpoint is chosen.
    #[serde(default)]
    pub balance: Balance,
    /// Failures within `fail_timeout` that take an endpoint out of rotation for `fail_timeout`.
    #[serde(default = "default_max_fails")]
    pub max_fails: u32,
    /// See `max_fails`.
    #[serde(default = "default_fail_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub fail_timeout: Duration,
    /// Time to establish a connection.
    #[serde(default = "default_connect_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub connect_timeout: Duration,
    /// Time to wait for the response head, and between body reads.
    #[serde(default = "default_read_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub read_timeout: Duration,
    /// Time allowed to send the request to the backend.
    #[serde(default = "default_read_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub send_timeout: Duration,
    /// Largest request body in bytes; 413 beyond.
    #[serde(default = "default_max_body_size")]
    pub max_body_size: u64,
    /// Requests in flight to this pool at most; beyond, 503 at once.
    #[serde(default = "default_max_active")]
    pub max_active_requests: usize,
    /// FastCGI connections kept open for reuse (the keep-conn flag), per serving thread and endpoint; 0 turns reuse off. Each kept connection holds one backend worker (php-fpm serves one connection per child), so keep this below the backend's worker count divided by skiff's threads.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub keepalive: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Endpoint choice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// Each endpoint in turn.
    #[default]
    RoundRobin,
    /// The endpoint with the fewest requests in flight.
    LeastConn,
    /// The same client address to the same endpoint.
    IpHash,
}

fn default_max_fails() -> u32 {
    1
}
fn default_fail_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_read_timeout() -> Duration {
    Duration::from_secs(60)
}
fn default_max_body_size() -> u64 {
    16 * 1024 * 1024
}
fn default_max_active() -> usize {
    1024
}

/// Backend wire protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PoolProtocol {
    Http,
    Fastcgi,
    Uwsgi,
    Scgi,
}

impl PoolProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            PoolProtocol::Http => "http",
            PoolProtocol::Fastcgi => "fastcgi",
            PoolProtocol::Uwsgi => "uwsgi",
            PoolProtocol::Scgi => "scgi",
        }
    }
}
