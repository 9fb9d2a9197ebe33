//! Semantic checks: everything a config can get wrong that the types cannot express.
//! The operator runs this before rollout, as `nginx -t` would, so it needs no file access:
//! checks that need the file system (roots, htpasswd files) happen when the server loads.

use crate::hosts::HostPattern;
use crate::model::*;
use crate::template::Template;
use std::collections::{BTreeMap, HashMap};

/// One problem, at a path such as `virtual_servers[0].rules[2].action.redirect.to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub path: String,
    pub message: String,
}

struct Checker {
    issues: Vec<Issue>,
}

impl Checker {
    fn fail(&mut self, path: impl Into<String>, message: impl Into<String>) {
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
    if cfg.threads == Some(0) {
        c.fail("threads", "must be at least 1");
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

/// The TLS listener: its address, and a certificate somewhere for it to offer.
fn check_tls(c: &mut Checker, cfg: &Config) {
    let Some(tls) = &cfg.tls else {
        if cfg.listen.is_empty() {
            c.fail(
                "listen",
                "is empty (no plain HTTP), so tls.listen is needed or nothing is served",
            );
        }
        return;
    };
    match tls.listen.parse::<std::net::SocketAddr>() {
        Err(_) => c.fail(
            "tls.listen",
            format!(
                "{:?} is not an address; expected IP:PORT such as 0.0.0.0:8443",
                tls.listen
            ),
        ),
        Ok(addr) => {
            for (field, other) in [("listen", &cfg.listen), ("admin_listen", &cfg.admin_listen)] {
                // Port 0 (any free port) never collides.
                if addr.port() != 0 && other.parse::<std::net::SocketAddr>().ok() == Some(addr) {
                    c.fail("tls.listen", format!("is the same address as {field}"));
                }
            }
        }
    }
    for (i, files) in tls.certificates.iter().enumerate() {
        check_certificate_files(c, &format!("tls.certificates[{i}]"), files);
    }
    if tls.certificates.is_empty() && cfg.virtual_servers.iter().all(|v| v.tls.is_none()) {
        c.fail(
            "tls.certificates",
            "the TLS listener has no certificate: list one here or give a virtual server `tls`",
        );
    }
    if tls.handshake_timeout < std::time::Duration::from_millis(100) {
        c.fail("tls.handshake_timeout", "must be at least 100ms");
    }
    if tls.public_port == Some(0) {
        c.fail("tls.public_port", "must be a port from 1 to 65535");
    }
}

fn check_certificate_files(c: &mut Checker, p: &str, files: &CertificateFiles) {
    for (field, value) in [
        ("cert", Some(&files.cert)),
        ("key", Some(&files.key)),
        ("ocsp", files.ocsp.as_ref()),
    ] {
        if value.is_some_and(|v| v.is_empty()) {
            c.fail(format!("{p}.{field}"), "must name a file");
        }
    }
}

/// A virtual server's certificate, HSTS and redirect all need the TLS listener.
fn check_virtual_server_tls(c: &mut Checker, p: &str, vs: &VirtualServer, listener: bool) {
    if let Some(files) = &vs.tls {
        check_certificate_files(c, &format!("{p}.tls"), files);
    }
    let needs_listener = [
        ("tls", vs.tls.is_some()),
        ("hsts", vs.hsts.is_some()),
        ("https_redirect", vs.https_redirect),
    ];
    for (field, used) in needs_listener {
        if used && !listener {
            c.fail(
                format!("{p}.{field}"),
                "needs the TLS listener: set tls.listen at the top level",
            );
        }
    }
    for (j, rule) in vs.rules.iter().enumerate() {
        if rule.https_redirect == Some(true) && !listener {
            c.fail(
                format!("{p}.rules[{j}].https_redirect"),
                "needs the TLS listener: set tls.listen at the top level",
            );
        }
    }
    if let Some(hsts) = &vs.hsts {
        // hstspreload.org's submission requirements (RFC 6797 leaves preload out).
        let year = std::time::Duration::from_secs(365 * 24 * 3600);
        if hsts.preload && (!hsts.include_subdomains || hsts.max_age < year) {
            c.fail(
                format!("{p}.hsts.preload"),
                "preload needs include_subdomains and a max_age of at least 365d",
            );
        }
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

fn check_cidr(c: &mut Checker, path: &str, cidr: &str) {
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

fn check_rule(c: &mut Checker, p: &str, rule: &Rule, pools: &HashMap<&str, PoolProtocol>) {
    let m = &rule.matches;
    for (field, value) in [("prefix", &m.prefix), ("path", &m.path)] {
        if let Some(v) = value {
            if !v.starts_with('/') {
                c.fail(
                    format!("{p}.match.{field}"),
                    format!("{v:?} must start with '/'"),
                );
            }
        }
    }
    let mut captures = 0;
    if let Some(re) = &m.regex {
        match regex::Regex::new(re) {
            Ok(r) => captures = r.captures_len() - 1,
            Err(e) => c.fail(
                format!("{p}.match.regex"),
                format!("invalid regular expression: {e}"),
            ),
        }
    }
    for (i, ext) in m.extensions.iter().enumerate() {
        if ext.is_empty() || ext.contains(['.', '/']) {
            c.fail(
                format!("{p}.match.extensions[{i}]"),
                format!("{ext:?}: give the extension without a dot, e.g. css"),
            );
        }
    }
    for (i, method) in m.methods.iter().enumerate() {
        if http_method_invalid(method) {
            c.fail(
                format!("{p}.match.methods[{i}]"),
                format!("{method:?} is not an HTTP method token"),
            );
        }
    }
    for (i, h) in m.headers.iter().enumerate() {
        if header_name_invalid(&h.name) {
            c.fail(
                format!("{p}.match.headers[{i}].name"),
                format!("{:?} is not a header name", h.name),
            );
        }
    }

    match &rule.action {
        Action::Static {} => {}
        Action::Redirect { to, status } => {
            if ![301, 302, 303, 307, 308].contains(status) {
                c.fail(
                    format!("{p}.action.redirect.status"),
                    format!("{status} is not a redirect; expected 301, 302, 303, 307 or 308"),
                );
            }
            if let Err(e) = Template::parse(to, captures) {
                c.fail(format!("{p}.action.redirect.to"), e);
            }
        }
        Action::Return {
            status,
            content_type,
            ..
        } => {
            if !(200..=599).contains(status) {
                c.fail(
                    format!("{p}.action.return.status"),
                    format!("{status} is out of range; expected 200 to 599"),
                );
            }
            if header_value_invalid(content_type) {
                c.fail(
                    format!("{p}.action.return.content_type"),
                    "not a valid header value",
                );
            }
        }
        Action::Deny { status } => {
            if !(400..=599).contains(status) {
                c.fail(
                    format!("{p}.action.deny.status"),
                    format!("{status} is out of range; expected 400 to 599"),
                );
            }
        }
        Action::Proxy(r) => check_pool(
            c,
            &format!("{p}.action.proxy.pool"),
            &r.pool,
            PoolProtocol::Http,
            pools,
        ),
        Action::Fastcgi(r) => check_pool(
            c,
            &format!("{p}.action.fastcgi.pool"),
            &r.pool,
            PoolProtocol::Fastcgi,
            pools,
        ),
        Action::Uwsgi(r) => check_pool(
            c,
            &format!("{p}.action.uwsgi.pool"),
            &r.pool,
            PoolProtocol::Uwsgi,
            pools,
        ),
        Action::Scgi(r) => check_pool(
            c,
            &format!("{p}.action.scgi.pool"),
            &r.pool,
            PoolProtocol::Scgi,
            pools,
        ),
    }

    match &rule.action {
        Action::Fastcgi(t) | Action::Uwsgi(t) | Action::Scgi(t) => {
            if t.index
                .as_ref()
                .is_some_and(|i| i.is_empty() || i.contains('/'))
            {
                c.fail(
                    format!("{p}.action.index"),
                    "must be a plain file name such as index.php",
                );
            }
            for name in t.params.keys() {
                if name.is_empty() || name.bytes().any(|b| b == 0 || b == b'=') {
                    c.fail(
                        format!("{p}.action.params"),
                        format!("{name:?} is not a parameter name"),
                    );
                }
            }
        }
        Action::Proxy(t)
            if t.host
                .as_ref()
                .is_some_and(|h| header_value_invalid(h) || h.is_empty()) =>
        {
            c.fail(format!("{p}.action.proxy.host"), "not a valid Host value");
        }
        _ => {}
    }
    if let Some(h) = &rule.headers {
        for (i, name) in h.remove.iter().enumerate() {
            if header_name_invalid(name) {
                c.fail(
                    format!("{p}.headers.remove[{i}]"),
                    format!("{name:?} is not a header name"),
                );
            }
        }
        for (kind, map) in [("set", &h.set), ("add", &h.add)] {
            for (name, value) in map {
                if header_name_invalid(name) {
                    c.fail(
                        format!("{p}.headers.{kind}.{name}"),
                        format!("{name:?} is not a header name"),
                    );
                } else if header_value_invalid(value) {
                    c.fail(
                        format!("{p}.headers.{kind}.{name}"),
                        "not a valid header value",
                    );
                }
            }
        }
    }
    if let Some(cors) = &rule.cors {
        if cors.allow_origins.is_empty() {
            c.fail(
                format!("{p}.cors.allow_origins"),
                "name at least one origin, or `*`",
            );
        }
        if cors.allow_credentials && cors.allow_origins.iter().any(|o| o == "*") {
            c.fail(
                format!("{p}.cors.allow_credentials"),
                "browsers refuse credentials with the origin `*`; list the origins",
            );
        }
        for (i, o) in cors.allow_origins.iter().enumerate() {
            if o != "*" && !(o.starts_with("http://") || o.starts_with("https://")) {
                c.fail(
                    format!("{p}.cors.allow_origins[{i}]"),
                    format!("{o:?}: an origin is scheme://host[:port], or `*`"),
                );
            }
        }
        for (i, method) in cors.allow_methods.iter().enumerate() {
            if http_method_invalid(method) {
                c.fail(
                    format!("{p}.cors.allow_methods[{i}]"),
                    format!("{method:?} is not an HTTP method token"),
                );
            }
        }
    }
    if let Some(auth) = &rule.basic_auth {
        if auth.htpasswd.is_empty() {
            c.fail(
                format!("{p}.basic_auth.htpasswd"),
                "must name an htpasswd file",
            );
        }
        if auth.realm.contains('"') || header_value_invalid(&auth.realm) {
            c.fail(
                format!("{p}.basic_auth.realm"),
                "must be printable text without '\"'",
            );
        }
    }
    if let Some(access) = &rule.access {
        for (kind, list) in [("allow", &access.allow), ("deny", &access.deny)] {
            for (i, cidr) in list.iter().enumerate() {
                check_cidr(c, &format!("{p}.access.{kind}[{i}]"), cidr);
            }
        }
        if !(400..=599).contains(&access.status) {
            c.fail(
                format!("{p}.access.status"),
                format!("{} is out of range; expected 400 to 599", access.status),
            );
        }
    }
    if let Some(bw) = &rule.bandwidth {
        check_bandwidth(c, &format!("{p}.bandwidth"), bw);
    }
    if let Some(rl) = &rule.rate_limit {
        if !(rl.requests_per_second.is_finite() && rl.requests_per_second > 0.0) {
            c.fail(
                format!("{p}.rate_limit.requests_per_second"),
                "must be a positive number",
            );
        }
        if rl.burst == 0 {
            c.fail(format!("{p}.rate_limit.burst"), "must be at least 1");
        }
    }
}

fn check_bandwidth(c: &mut Checker, p: &str, bw: &Bandwidth) {
    if bw.per_connection.is_none() && bw.total.is_none() {
        c.fail(p, "set per_connection, total, or both (bytes per second)");
    }
    for (field, v) in [("per_connection", bw.per_connection), ("total", bw.total)] {
        if v.is_some_and(|v| v < 1024) {
            c.fail(
                format!("{p}.{field}"),
                "must be at least 1024 bytes per second",
            );
        }
    }
}

fn check_pool(
    c: &mut Checker,
    path: &str,
    name: &str,
    want: PoolProtocol,
    pools: &HashMap<&str, PoolProtocol>,
) {
    match pools.get(name) {
        None => {
            let mut known: Vec<&str> = pools.keys().copied().collect();
            known.sort();
            let known = if known.is_empty() {
                "none are defined".to_owned()
            } else {
                format!("defined: {}", known.join(", "))
            };
            c.fail(path, format!("no pool named {name:?} ({known})"));
        }
        Some(&got) if got != want => {
            c.fail(
                path,
                format!(
                    "pool {name:?} speaks {}, but this action needs a {} pool",
                    got.as_str(),
                    want.as_str()
                ),
            );
        }
        Some(_) => {}
    }
}

fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn http_method_invalid(m: &str) -> bool {
    m.is_empty() || !m.bytes().all(is_token_char)
}

fn header_name_invalid(n: &str) -> bool {
    n.is_empty() || !n.bytes().all(is_token_char)
}

fn header_value_invalid(v: &str) -> bool {
    v.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f)
}
