//! Semantic checks: everything a config can get wrong that the types cannot express
//! (rules and pools in `rules.rs`, HTTPS in `tls.rs`).
//! The operator runs this before rollout, as `nginx -t` would, so it needs no file access:
//! checks that need the file system (roots, htpasswd files) happen when the server loads.

use crate::hosts::HostPattern;
use crate::model::*;
use std::collections::{BTreeMap, HashMap};

mod fields;
mod request_headers;
mod rules;
mod tls;

use rules::{check_bandwidth, check_rule};
use tls::{check_tls, check_virtual_server_tls};

/// One problem, at a path such as `virtual_servers[0].rules[2].action.redirect.to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub path: String,
    pub message: String,
}

pub(super) struct Checker {
    issues: Vec<Issue>,
}

impl Checker {
    pub(super) fn fail(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.issues.push(Issue {
            path: path.into(),
            message: message.into(),
        });
    }
}

/// Every problem in `cfg`, in document order. Empty means valid.
pub fn validate(cfg: &Config) -> Vec<Issue> {
    let mut c = Checker { issues: Vec::new() };
    for (field, value) in [("listen", &cfg.listen), ("admin_listen", &cfg.admin_listen)] {
        // An empty `listen` turns plain HTTP off; check_tls requires HTTPS then.
        if field == "listen" && value.is_empty() {
            continue;
        }
        if value.parse::<std::net::SocketAddr>().is_err() {
            c.fail(
                field,
                format!("{value:?} is not an address; expected IP:PORT such as 0.0.0.0:8080"),
            );
        }
    }
    match cfg.threads {
        Some(0) => c.fail("threads", "must be at least 1"),
        Some(n) if n > MAX_THREADS => c.fail("threads", format!("must be at most {MAX_THREADS}")),
        _ => {}
    }
    if cfg.cache.max_file_size > cfg.cache.max_bytes {
        c.fail(
            "cache.max_file_size",
            "is larger than cache.max_bytes, so such files could never be cached",
        );
    }
    if cfg.limits.max_header_bytes < 1024 {
        c.fail("limits.max_header_bytes", "must be at least 1024");
    }
    if cfg.limits.max_request_line < 256 {
        c.fail("limits.max_request_line", "must be at least 256");
    }
    if cfg.limits.max_connections == 0 {
        c.fail("limits.max_connections", "must be at least 1");
    }
    if cfg.limits.max_connections > MAX_CONNECTIONS {
        c.fail(
            "limits.max_connections",
            format!("must be at most {MAX_CONNECTIONS}"),
        );
    }
    let l = &cfg.limits;
    for (field, d) in [
        ("header_timeout", l.header_timeout),
        ("keepalive_timeout", l.keepalive_timeout),
        ("body_timeout", l.body_timeout),
        ("send_timeout", l.send_timeout),
    ] {
        check_timeout(&mut c, &format!("limits.{field}"), d);
    }
    for (i, server) in cfg.dns.servers.iter().enumerate() {
        if server.parse::<std::net::SocketAddr>().is_err() {
            c.fail(
                format!("dns.servers[{i}]"),
                format!("{server:?} is not an address; expected IP:PORT such as 10.96.0.10:53"),
            );
        }
    }
    if cfg.dns.refresh < std::time::Duration::from_millis(100) {
        c.fail("dns.refresh", "must be at least 100ms");
    }
    check_tls(&mut c, cfg);
    for (i, cidr) in cfg.trusted_proxies.iter().enumerate() {
        check_cidr(&mut c, &format!("trusted_proxies[{i}]"), cidr);
    }
    if cfg.use_forwarded_headers && cfg.trusted_proxies.is_empty() {
        c.fail(
            "use_forwarded_headers",
            "names no proxy to believe; list the proxies in front in trusted_proxies",
        );
    }

    let mut pools: HashMap<&str, PoolProtocol> = HashMap::new();
    for (i, pool) in cfg.pools.iter().enumerate() {
        let p = format!("pools[{i}]");
        check_name(&mut c, &format!("{p}.name"), &pool.name);
        if pools.insert(&pool.name, pool.protocol).is_some() {
            c.fail(
                format!("{p}.name"),
                format!("pool name {:?} is used twice", pool.name),
            );
        }
        if pool.max_fails == 0 {
            c.fail(format!("{p}.max_fails"), "must be at least 1");
        }
        if pool.keepalive > 0 && pool.protocol != PoolProtocol::Fastcgi {
            c.fail(format!("{p}.keepalive"), "connection reuse is for FastCGI pools (HTTP pools always reuse; uwsgi and SCGI cannot)");
        }
        for (field, d) in [
            ("connect_timeout", pool.connect_timeout),
            ("read_timeout", pool.read_timeout),
            ("send_timeout", pool.send_timeout),
        ] {
            check_timeout(&mut c, &format!("{p}.{field}"), d);
        }
        if pool.max_active_requests == 0 {
            c.fail(format!("{p}.max_active_requests"), "must be at least 1");
        }
        if pool.endpoints.is_empty() {
            c.fail(
                format!("{p}.endpoints"),
                "a pool needs at least one endpoint",
            );
        }
        for (j, ep) in pool.endpoints.iter().enumerate() {
            if let Err(e) = check_endpoint(ep) {
                c.fail(format!("{p}.endpoints[{j}]"), e);
            }
        }
    }

    if cfg.virtual_servers.is_empty() {
        c.fail("virtual_servers", "at least one virtual server is needed");
    }
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut hosts: HashMap<String, usize> = HashMap::new();
    let mut default: Option<usize> = None;
    for (i, vs) in cfg.virtual_servers.iter().enumerate() {
        let p = format!("virtual_servers[{i}]");
        check_name(&mut c, &format!("{p}.name"), &vs.name);
        if let Some(first) = names.insert(&vs.name, i) {
            c.fail(
                format!("{p}.name"),
                format!(
                    "{:?} is already the name of virtual_servers[{first}]",
                    vs.name
                ),
            );
        }
        if vs.default {
            if let Some(d) = default {
                c.fail(
                    format!("{p}.default"),
                    format!("virtual_servers[{d}] is already the default"),
                );
            }
            default = Some(i);
        }
        if vs.hosts.is_empty() && !vs.default {
            c.fail(
                format!("{p}.hosts"),
                "name at least one host, or make this virtual server the default",
            );
        }
        for (j, h) in vs.hosts.iter().enumerate() {
            match HostPattern::parse(h) {
                Ok(_) => {
                    if let Some(other) = hosts.insert(h.to_ascii_lowercase(), i) {
                        if other != i {
                            c.fail(
                                format!("{p}.hosts[{j}]"),
                                format!("{h:?} is also a host of virtual_servers[{other}]"),
                            );
                        }
                    }
                }
                Err(e) => c.fail(format!("{p}.hosts[{j}]"), e),
            }
        }
        if vs.root.is_empty() {
            c.fail(format!("{p}.root"), "must not be empty");
        }
        for (j, idx) in vs.index.iter().enumerate() {
            if idx.is_empty() || idx.contains('/') {
                c.fail(
                    format!("{p}.index[{j}]"),
                    format!("{idx:?} must be a plain file name"),
                );
            }
        }
        check_error_pages(&mut c, &p, &vs.error_pages);
        if let Some(bw) = &vs.bandwidth {
            check_bandwidth(&mut c, &format!("{p}.bandwidth"), bw);
        }
        if let Some(comp) = &vs.compression {
            if comp.encodings.is_empty() {
                c.fail(
                    format!("{p}.compression.encodings"),
                    "name at least one coding: br, zstd or gzip",
                );
            }
            for (j, t) in comp.types.iter().enumerate() {
                let ok = t
                    .split_once('/')
                    .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty() && !a.contains('*'));
                if !ok {
                    c.fail(
                        format!("{p}.compression.types[{j}]"),
                        format!("{t:?} is not a media type such as text/* or application/json"),
                    );
                }
            }
        }
        for (j, rule) in vs.rules.iter().enumerate() {
            check_rule(&mut c, &format!("{p}.rules[{j}]"), rule, &pools);
        }
        check_virtual_server_tls(&mut c, &p, vs, cfg.tls.is_some());
    }
    c.issues
}

/// More serving threads than any machine has cores for: a typo, not a plan.
const MAX_THREADS: usize = 1024;

/// Far past what one process's descriptors allow, and small enough for a semaphore.
const MAX_CONNECTIONS: usize = 10_000_000;

/// A timeout of zero (or a few microseconds) would cut every wait at once: a head split
/// across two reads, a body larger than the socket buffer.
fn check_timeout(c: &mut Checker, path: &str, d: std::time::Duration) {
    if d < std::time::Duration::from_millis(100) {
        c.fail(path, "must be at least 100ms");
    }
}

fn check_name(c: &mut Checker, path: &str, name: &str) {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if !ok {
        c.fail(
            path,
            format!("{name:?} is not a valid name (1-63 letters, digits, '-', '_' or '.')"),
        );
    }
}

pub(super) fn check_cidr(c: &mut Checker, path: &str, cidr: &str) {
    if let Err(e) = crate::parse_cidr(cidr) {
        c.fail(path, e);
    }
}

fn check_endpoint(ep: &str) -> Result<(), String> {
    if let Some(path) = ep.strip_prefix("unix:") {
        if path.starts_with('/') {
            return Ok(());
        }
        return Err(format!("{ep:?}: a unix socket path must be absolute"));
    }
    let (host, port) = ep
        .rsplit_once(':')
        .ok_or_else(|| format!("{ep:?}: expected host:port or unix:/path"))?;
    if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
        return Err(format!(
            "{ep:?}: expected host:port with a port from 1 to 65535"
        ));
    }
    Ok(())
}

fn check_error_pages(c: &mut Checker, p: &str, pages: &BTreeMap<u16, String>) {
    for (code, page) in pages {
        if !(400..=599).contains(code) {
            c.fail(
                format!("{p}.error_pages.{code}"),
                "error pages are for status codes 400 to 599",
            );
        }
        if !page.starts_with('/') {
            c.fail(
                format!("{p}.error_pages.{code}"),
                format!("{page:?} must be a path starting with '/'"),
            );
        }
    }
}
