//! One generation of configuration, compiled for serving: virtual servers chosen by host,
//! rules in order, actions and modifiers. Built from a validated `skiff_config::Config`;
//! building also does what validation cannot (opening roots, reading htpasswd files),
//! so a reload that fails here leaves the running generation in place.

mod backend_route;
mod basic_auth;
mod compile;
mod error_pages;
mod htpasswd_sources;
mod load_warnings;
mod modifiers;
mod rules;
mod split;

pub use basic_auth::{Verdict, Verification};

use crate::cache::{FileCache, RootRegistry};
use crate::http::reply::{Body, Reply};
use crate::http::request::RequestHead;
use crate::static_files::{clean_path_or_reply, StaticFiles, StaticOptions};
use basic_auth::BasicAuth;
pub use htpasswd_sources::htpasswd_files;
use http::{HeaderValue, StatusCode};
use ipnet::IpNet;
use rules::{Action, BandwidthLimits, Rule};
use skiff_config::{Config, HostPattern, UnknownHost};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct App {
    /// A short hash of the configuration text, exported as `skiff_config_info{hash}`.
    pub hash: String,
    /// The backend pools of this generation, for the endpoint-state gauge.
    pub pools: Vec<Arc<crate::upstream::pool::Pool>>,
    vhosts: Vec<VirtualHost>,
    exact: HashMap<String, usize>,
    /// (suffix such as ".example.com", index), longest suffix first.
    wildcards: Vec<(String, usize)>,
    default: Option<usize>,
    unknown_host: UnknownHost,
    trusted_proxies: Vec<IpNet>,
    /// HTTP backends get what trusted proxies say of the request (`use_forwarded_headers`).
    use_forwarded_headers: bool,
    /// The port HTTPS redirects point at (443 is left out of the URL).
    https_port: u16,
    /// The htpasswd files the rules read, which the reload loop watches.
    pub htpasswd_files: Vec<PathBuf>,
    /// What the build saw on disk that will not serve as configured, as (place,
    /// message): logged once this generation is live, printed by `skiff check`.
    pub warnings: Vec<(String, String)>,
}

impl App {
    /// htpasswd lines this generation left out, for `skiff_basic_auth_entries_left_out`.
    pub fn htpasswd_entries_left_out(&self) -> usize {
        htpasswd_sources::left_out(self.vhosts.iter().flat_map(|v| &v.rules))
    }

    /// The users of this generation's rule with basic auth and this match in virtual
    /// server `vhost`, and the file they came from.
    fn basic_auth_of(
        &self,
        vhost: &str,
        matches: &skiff_config::Match,
    ) -> Option<(&BasicAuth, &Path)> {
        let rules = self
            .vhosts
            .iter()
            .filter(|v| v.name == vhost)
            .flat_map(|v| &v.rules);
        htpasswd_sources::users_for(rules, matches)
    }
}

struct VirtualHost {
    name: &'static str,
    /// The root as configured (after joining with the config folder), the default
    /// DOCUMENT_ROOT for CGI backends.
    root_text: String,
    bandwidth: BandwidthLimits,
    statics: StaticFiles,
    rules: Vec<Rule>,
    error_pages: HashMap<u16, String>,
    /// Strict-Transport-Security, for HTTPS responses.
    hsts: Option<HeaderValue>,
    /// Plain-HTTP requests are redirected to HTTPS (unless a rule says otherwise).
    https_redirect: bool,
}

/// What the configuration made of a request, and the virtual server that decided (for
/// the exchange record).
pub enum Routed {
    /// Answered in place: a file, a redirect, an error...
    Reply { reply: Reply, vhost: &'static str },
    /// A rule sends it to a backend pool.
    Upstream {
        route: Box<crate::upstream::BackendRoute>,
        vhost: &'static str,
    },
    /// Basic auth needs a bcrypt before the matched rule answers: the connection awaits
    /// `Verification::run` (off the serving thread), then routes the request again with
    /// the verdict (`respond_verified`).
    Verify(Verification),
}

/// What a matched rule decided.
enum Applied {
    Reply(Reply),
    /// Every check passed and the rule's pool answers.
    Upstream(Arc<crate::upstream::Backend>),
    Verify(Verification),
}

/// Virtual server names become metric label values; each distinct name is interned once,
/// so reloads do not leak.
fn intern(name: &str) -> &'static str {
    static NAMES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.iter().find(|n| **n == name) {
        return n;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.push(leaked);
    leaked
}

/// Options a `skiff serve` command line adds on top of the config model.
#[derive(Debug, Clone, Default)]
pub struct ServeOverrides {
    pub cache_control: Option<HeaderValue>,
}

impl App {
    /// Compiles a validated config. `base` is the folder relative roots are taken from;
    /// `previous` is the generation serving now, if any (a reload).
    pub fn build(
        cfg: &Config,
        base: &Path,
        hash: String,
        cache: &Arc<FileCache>,
        roots: &RootRegistry,
        overrides: &ServeOverrides,
        previous: Option<&App>,
    ) -> Result<App, String> {
        let issues = skiff_config::validate(cfg);
        if let Some(first) = issues.first() {
            return Err(format!("{}: {}", first.path, first.message));
        }
        let parse_nets = |list: &[String]| -> Result<Vec<IpNet>, String> {
            list.iter().map(|c| skiff_config::parse_cidr(c)).collect()
        };
        let pools: HashMap<&str, Arc<crate::upstream::pool::Pool>> = cfg
            .pools
            .iter()
            .map(|p| {
                (
                    p.name.as_str(),
                    Arc::new(crate::upstream::pool::Pool::from_config(p, intern(&p.name))),
                )
            })
            .collect();
        if !pools.is_empty() {
            let resolver = Arc::new(crate::upstream::dns::resolver(&cfg.dns)?);
            for pool in pools.values() {
                crate::upstream::dns::watch(pool, resolver.clone(), cfg.dns.refresh);
            }
        }
        let mut vhosts = Vec::with_capacity(cfg.virtual_servers.len());
        let mut exact = HashMap::new();
        let mut wildcards = Vec::new();
        let mut default = None;
        let mut warnings = Vec::new();
        for (i, vs) in cfg.virtual_servers.iter().enumerate() {
            let root_path = base.join(&vs.root);
            let root = roots
                .open(&root_path, vs.follow_symlinks_outside_root, &vs.index)
                .map_err(|e| {
                    format!(
                        "virtual_servers[{i}].root: cannot open {}: {e}",
                        root_path.display()
                    )
                })?;
            let statics = StaticFiles::new(
                cache.clone(),
                root,
                StaticOptions {
                    allow_hidden: vs.hidden_files,
                    listing: vs.listing,
                    cache_control: overrides.cache_control.clone(),
                    compression: vs
                        .compression
                        .as_ref()
                        .map(|c| Arc::new(crate::static_files::CompressionPolicy::from_config(c))),
                },
            );
            let mut rules = Vec::with_capacity(vs.rules.len());
            for (j, r) in vs.rules.iter().enumerate() {
                let at = format!("virtual_servers[{i}].rules[{j}]");
                let previous_auth = previous
                    .filter(|_| r.basic_auth.is_some())
                    .and_then(|p| p.basic_auth_of(&vs.name, &r.matches));
                rules.push(compile::compile_rule(
                    r,
                    &at,
                    base,
                    &pools,
                    previous_auth,
                    previous.is_some(),
                    statics.path_policy(),
                )?);
            }
            warnings.extend(load_warnings::fallbacks_serving_no_file(
                &statics, &rules, i,
            ));
            for h in &vs.hosts {
                match HostPattern::parse(h)
                    .map_err(|e| format!("virtual_servers[{i}].hosts: {e}"))?
                {
                    HostPattern::Exact(name) => {
                        exact.insert(name, i);
                    }
                    HostPattern::Wildcard(suffix) => wildcards.push((suffix, i)),
                }
            }
            if vs.default {
                default = Some(i);
            }
            vhosts.push(VirtualHost {
                name: intern(&vs.name),
                root_text: root_path.to_string_lossy().into_owned(),
                bandwidth: BandwidthLimits::from_config(vs.bandwidth.as_ref()),
                statics,
                rules,
                error_pages: vs
                    .error_pages
                    .iter()
                    .map(|(k, v)| (*k, v.clone()))
                    .collect(),
                hsts: vs.hsts.as_ref().map(hsts_value),
                https_redirect: vs.https_redirect,
            });
        }
        wildcards.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
        let mut pool_list: Vec<_> = pools.values().cloned().collect();
        pool_list.sort_by_key(|p| p.name);
        Ok(App {
            hash,
            pools: pool_list,
            vhosts,
            exact,
            wildcards,
            default,
            unknown_host: cfg.unknown_host,
            trusted_proxies: parse_nets(&cfg.trusted_proxies)?,
            use_forwarded_headers: cfg.use_forwarded_headers,
            htpasswd_files: htpasswd_files(cfg, base),
            warnings,
            https_port: cfg.tls.as_ref().map_or(443, |t| {
                t.public_port.unwrap_or_else(|| {
                    t.listen
                        .parse::<std::net::SocketAddr>()
                        .map_or(443, |a| a.port())
                })
            }),
        })
    }

    fn select(&self, host: Option<&[u8]>) -> Option<&VirtualHost> {
        if self.exact.is_empty() && self.wildcards.is_empty() {
            return self.default.map(|d| &self.vhosts[d]);
        }
        let host = host
            .and_then(|h| std::str::from_utf8(h).ok())
            .map(normalize_host);
        if let Some(h) = host.as_deref() {
            if let Some(&i) = self.exact.get(h) {
                return Some(&self.vhosts[i]);
            }
            if let Some((_, i)) = self
                .wildcards
                .iter()
                .find(|(s, _)| h.len() > s.len() && h.ends_with(s.as_str()))
            {
                return Some(&self.vhosts[*i]);
            }
        }
        self.default.map(|d| &self.vhosts[d])
    }

    pub fn respond(&self, req: &RequestHead<'_>) -> Routed {
        self.respond_with(req, None)
    }

    /// Routes a request again once its basic-auth verification is done. The rule that
    /// asked for it answers from the verdict, and its rate limit, already charged the
    /// first time, is not charged again.
    pub fn respond_verified(&self, req: &RequestHead<'_>, verdict: &Verdict) -> Routed {
        self.respond_with(req, Some(verdict))
    }

    fn respond_with(&self, req: &RequestHead<'_>, verdict: Option<&Verdict>) -> Routed {
        let Some(vh) = self.select(req.host) else {
            let status = match self.unknown_host {
                UnknownHost::Misdirected => StatusCode::MISDIRECTED_REQUEST,
                UnknownHost::NotFound => StatusCode::NOT_FOUND,
            };
            return Routed::Reply {
                reply: Reply::error(status),
                vhost: "unknown",
            };
        };
        let path = match clean_path_or_reply(req.path, vh.statics.path_policy()) {
            Ok(p) => p,
            Err(reply) => {
                return Routed::Reply {
                    reply: self.error_page(vh, req, reply),
                    vhost: vh.name,
                }
            }
        };
        for rule in &vh.rules {
            if let Some(caps) = rule.conditions.matches(req, path.as_str()) {
                if !req.secure && rule.https_redirect.unwrap_or(vh.https_redirect) {
                    return Routed::Reply {
                        reply: self.https_redirect(req),
                        vhost: vh.name,
                    };
                }
                let reply = match self.apply(vh, rule, req, &path, caps.as_ref(), verdict) {
                    Applied::Reply(r) => r,
                    Applied::Verify(v) => return Routed::Verify(v),
                    Applied::Upstream(backend) => {
                        let site = backend_route::Site {
                            root: &vh.root_text,
                            hsts: vh.hsts.as_ref(),
                            trusted_proxies: &self.trusted_proxies,
                            use_forwarded_headers: self.use_forwarded_headers,
                        };
                        let route = backend_route::backend_route(
                            backend,
                            &site,
                            rule,
                            req,
                            path.as_str(),
                            caps.as_ref(),
                        );
                        match route {
                            Ok(route) => {
                                return Routed::Upstream {
                                    route: Box::new(route),
                                    vhost: vh.name,
                                }
                            }
                            Err(()) => Reply::error(StatusCode::BAD_REQUEST),
                        }
                    }
                };
                let reply = self.error_page(vh, req, reply);
                return Routed::Reply {
                    reply: throttled(
                        with_hsts(reply, vh, req),
                        &vh.bandwidth,
                        Some(&rule.bandwidth),
                    ),
                    vhost: vh.name,
                };
            }
        }
        if !req.secure && vh.https_redirect {
            return Routed::Reply {
                reply: self.https_redirect(req),
                vhost: vh.name,
            };
        }
        let reply = self.error_page(vh, req, vh.statics.respond_clean(req, &path));
        Routed::Reply {
            reply: throttled(with_hsts(reply, vh, req), &vh.bandwidth, None),
            vhost: vh.name,
        }
    }

    /// 308 to the same target over HTTPS: the method and body are kept (RFC 9110 §15.4.9).
    fn https_redirect(&self, req: &RequestHead<'_>) -> Reply {
        let host = req
            .host
            .and_then(|h| skiff_http::host::parse_authority(h).ok())
            .map(|a| a.name.into_owned());
        let Some(host) = host else {
            // HTTP/1.0 without Host: no name to send the client to.
            return Reply::error(StatusCode::BAD_REQUEST);
        };
        let host = if host.contains(':') {
            format!("[{host}]") // an IPv6 literal
        } else {
            host
        };
        let port = match self.https_port {
            443 => String::new(),
            p => format!(":{p}"),
        };
        // An absolute-form target keeps only its path and query.
        let target = match (req.target.starts_with('/'), req.query) {
            (true, _) => req.target.to_owned(),
            (false, Some(q)) => format!("{}?{q}", req.path),
            (false, None) => req.path.to_owned(),
        };
        match HeaderValue::from_str(&format!("https://{host}{port}{target}")) {
            Ok(v) => Reply::error(StatusCode::PERMANENT_REDIRECT).header(http::header::LOCATION, v),
            Err(_) => Reply::error(StatusCode::BAD_REQUEST),
        }
    }

    fn apply(
        &self,
        vh: &VirtualHost,
        rule: &Rule,
        req: &RequestHead<'_>,
        path: &crate::fs::path::CleanPath<'_>,
        caps: Option<&regex::Captures<'_>>,
        verdict: Option<&Verdict>,
    ) -> Applied {
        if rule.access.is_some() || rule.rate_limit.is_some() {
            let ip = modifiers::client_ip(req, &self.trusted_proxies);
            if let Some(acl) = &rule.access {
                if !acl.permits(ip) {
                    return Applied::Reply(Reply::error(acl.status));
                }
            }
            // A request routed again after its verification was charged the first time.
            if let (Some(rl), Some(ip), None) = (&rule.rate_limit, ip, verdict) {
                if let Err(retry) = rl.check(ip) {
                    return Applied::Reply(
                        Reply::error(StatusCode::TOO_MANY_REQUESTS)
                            .header(http::header::RETRY_AFTER, HeaderValue::from(retry)),
                    );
                }
            }
        }
        if let Some(cors) = &rule.cors {
            if let Some(pre) = cors.preflight(req) {
                return Applied::Reply(pre);
            }
        }
        if let Some(auth) = &rule.basic_auth {
            match auth.decide(req, verdict) {
                basic_auth::Decision::Permit => {}
                basic_auth::Decision::Deny => {
                    return Applied::Reply(
                        Reply::error(StatusCode::UNAUTHORIZED)
                            .header(http::header::WWW_AUTHENTICATE, auth.challenge.clone()),
                    )
                }
                basic_auth::Decision::Verify(v) => return Applied::Verify(v),
                basic_auth::Decision::Busy => {
                    return Applied::Reply(
                        Reply::error(StatusCode::SERVICE_UNAVAILABLE)
                            .header(http::header::RETRY_AFTER, HeaderValue::from_static("1")),
                    )
                }
            }
        }
        let action = match &rule.action {
            Action::Split(split) => split.choose(),
            one => one,
        };
        let mut reply = match action {
            Action::Static { misses: None } => vh.statics.respond_clean(req, path),
            Action::Static {
                misses: Some(misses),
            } => vh.statics.respond_or_try(req, path, misses),
            Action::Redirect { to, status } => {
                let location = rules::render_location(to, req, path.as_str(), caps);
                match HeaderValue::from_str(&location) {
                    Ok(v) => Reply::error(*status).header(http::header::LOCATION, v),
                    Err(_) => Reply::error(StatusCode::INTERNAL_SERVER_ERROR),
                }
            }
            Action::Return {
                status,
                body,
                content_type,
            } => {
                let mut r = Reply::new(*status);
                r.headers
                    .push((http::header::CONTENT_TYPE, content_type.clone()));
                r.body = Body::Bytes(body.clone());
                r
            }
            Action::Deny { status } => Reply::error(*status),
            Action::Upstream(up) => return Applied::Upstream(up.clone()),
            // `compile_action` refuses a split inside a split.
            Action::Split(_) => Reply::error(StatusCode::INTERNAL_SERVER_ERROR),
        };
        if reply.status.as_u16() < 400 {
            if let Some(c) = &rule.cache {
                c.apply(&mut reply);
            }
            if let Some(h) = &rule.headers {
                h.apply(&mut reply);
            }
        }
        if let Some(cors) = &rule.cors {
            cors.decorate(req, &mut reply);
        }
        Applied::Reply(reply)
    }
}

impl App {
    /// Logs `warnings`, once this generation serves.
    pub fn log_warnings(&self) {
        for (at, message) in &self.warnings {
            tracing::warn!(at = at.as_str(), "{message}");
        }
    }
}

/// HSTS goes on HTTPS responses only: over plain HTTP it could be injected or stripped
/// by anyone on the path, so browsers ignore it there (RFC 6797 §7.2).
#[inline]
fn with_hsts(reply: Reply, vh: &VirtualHost, req: &RequestHead<'_>) -> Reply {
    match (&vh.hsts, req.secure) {
        (Some(v), true) => reply.header(http::header::STRICT_TRANSPORT_SECURITY, v.clone()),
        _ => reply,
    }
}

fn hsts_value(h: &skiff_config::Hsts) -> HeaderValue {
    let mut v = format!("max-age={}", h.max_age.as_secs());
    if h.include_subdomains {
        v.push_str("; includeSubDomains");
    }
    if h.preload {
        v.push_str("; preload");
    }
    HeaderValue::from_str(&v).expect("ASCII")
}

/// Attaches the bandwidth limits that apply: the rule's per-connection rate overrides the
/// virtual server's, and both levels' shared buckets count.
#[inline]
fn throttled(reply: Reply, vhost: &BandwidthLimits, rule: Option<&BandwidthLimits>) -> Reply {
    let rule_empty = rule.is_none_or(BandwidthLimits::is_empty);
    if (vhost.is_empty() && rule_empty) || reply.body.is_empty() {
        return reply;
    }
    with_throttle(reply, vhost, rule)
}

/// `throttled` for a reply with a body under some limit.
#[inline(never)]
fn with_throttle(
    mut reply: Reply,
    vhost: &BandwidthLimits,
    rule: Option<&BandwidthLimits>,
) -> Reply {
    let per_connection = rule.and_then(|r| r.per_connection).or(vhost.per_connection);
    let buckets = [vhost.total.clone(), rule.and_then(|r| r.total.clone())]
        .into_iter()
        .flatten()
        .collect();
    reply.throttle = Some(Arc::new(crate::shaping::Throttle {
        per_connection,
        buckets,
    }));
    reply
}

/// Lower-cases and strips the port and a trailing dot: `Example.COM.:8080` -> `example.com`.
fn normalize_host(h: &str) -> std::borrow::Cow<'_, str> {
    let h = if h.starts_with('[') {
        h.split_once(']').map_or(h, |(a, _)| &h[..a.len() + 1])
    } else {
        h.split(':').next().unwrap_or(h)
    };
    let h = h.strip_suffix('.').unwrap_or(h);
    if h.bytes().any(|b| b.is_ascii_uppercase()) {
        std::borrow::Cow::Owned(h.to_ascii_lowercase())
    } else {
        std::borrow::Cow::Borrowed(h)
    }
}

#[cfg(test)]
mod tests {
    use super::normalize_host;

    #[test]
    fn hosts_are_normalized() {
        assert_eq!(normalize_host("Example.COM:8080"), "example.com");
        assert_eq!(normalize_host("example.com."), "example.com");
        assert_eq!(normalize_host("[::1]:80"), "[::1]");
        assert_eq!(normalize_host("plain"), "plain");
    }
}
