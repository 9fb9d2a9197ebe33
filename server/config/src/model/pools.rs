//! Backend pools: endpoints, protocol, balancing, timeouts and limits.

use super::defaults::is_zero;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

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
    /// Time to wait for the response head once the request (and its body) has been sent, and between body reads; a WebSocket tunnel silent both ways this long is closed.
    #[serde(default = "default_read_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub read_timeout: Duration,
    /// Time a backend may go without taking any of the request (each write; on HTTP pools, each pause in taking an upload). A slow client's upload is bounded by `limits.body_timeout`, not by this.
    #[serde(default = "default_read_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub send_timeout: Duration,
    /// Largest request body in bytes; 413 beyond.
    #[serde(default = "default_max_body_size")]
    pub max_body_size: u64,
    /// Requests in flight to this pool at most; beyond, 503 at once.
    #[serde(default = "default_max_active")]
    pub max_active_requests: usize,
    /// FastCGI connections kept open for reuse (the keep-conn flag), per serving thread and endpoint; 0 turns reuse off. Each kept connection holds one backend worker (php-fpm serves one connection per child), so keep this below the backend's worker count divided by skiff's threads. A kept connection is checked before reuse, closed after 60 s idle, and closed when a reload replaces the pool.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub keepalive: usize,
    /// Worker processes behind each endpoint address (php-fpm's `pm.max_children`, uWSGI's `--processes`). Only reported: `skiff_upstream_workers` is this times the endpoints up, the capacity the busy ratio (`skiff_upstream_active_requests` over it) of a pool's autoscaling divides by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
    /// Forward request headers whose names contain `_` (nginx's `underscores_in_headers`). Off by default: CGI turns `-` and `_` alike into `_`, so `X_Forwarded_For` could pose as `X-Forwarded-For` (or a header an auth proxy in front sets), and many WSGI servers do the same.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub underscores_in_headers: bool,
}

impl Pool {
    /// A pool with every optional field at the default the parser gives it.
    pub fn new(name: impl Into<String>, protocol: PoolProtocol, endpoints: Vec<String>) -> Pool {
        Pool {
            name: name.into(),
            protocol,
            endpoints,
            balance: Balance::default(),
            max_fails: default_max_fails(),
            fail_timeout: default_fail_timeout(),
            connect_timeout: default_connect_timeout(),
            read_timeout: default_read_timeout(),
            send_timeout: default_read_timeout(),
            max_body_size: default_max_body_size(),
            max_active_requests: default_max_active(),
            keepalive: 0,
            workers: None,
            underscores_in_headers: false,
        }
    }
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
