//! The CRD's types turned into the server config's, field by field: a field renamed or
//! retyped on either side is a compile error here, not a key the server silently ignores.
//! Settings the CRD does not expose keep the config crate's own defaults (its
//! constructors and `default_*` functions, the ones its parser uses).

use super::AUTH_DIR;
use crate::crd;
use skiff_config as config;

impl From<crd::LogFormat> for config::AccessLogFormat {
    fn from(f: crd::LogFormat) -> Self {
        match f {
            crd::LogFormat::Combined => config::AccessLogFormat::Combined,
            crd::LogFormat::Json => config::AccessLogFormat::Json,
            crd::LogFormat::Off => config::AccessLogFormat::Off,
        }
    }
}

impl From<crd::Coding> for config::Coding {
    fn from(c: crd::Coding) -> Self {
        match c {
            crd::Coding::Br => config::Coding::Brotli,
            crd::Coding::Zstd => config::Coding::Zstd,
            crd::Coding::Gzip => config::Coding::Gzip,
        }
    }
}

impl From<crd::Visibility> for config::CacheVisibility {
    fn from(v: crd::Visibility) -> Self {
        match v {
            crd::Visibility::Public => config::CacheVisibility::Public,
            crd::Visibility::Private => config::CacheVisibility::Private,
        }
    }
}

impl From<crd::PoolProtocol> for config::PoolProtocol {
    fn from(p: crd::PoolProtocol) -> Self {
        match p {
            crd::PoolProtocol::Fastcgi => config::PoolProtocol::Fastcgi,
            crd::PoolProtocol::Uwsgi => config::PoolProtocol::Uwsgi,
            crd::PoolProtocol::Scgi => config::PoolProtocol::Scgi,
            crd::PoolProtocol::Http => config::PoolProtocol::Http,
        }
    }
}

impl From<&crd::Cache> for config::CacheConfig {
    fn from(c: &crd::Cache) -> Self {
        let defaults = config::CacheConfig::default();
        config::CacheConfig {
            max_bytes: c.max_bytes.unwrap_or(defaults.max_bytes),
            max_file_size: c.max_file_size.unwrap_or(defaults.max_file_size),
            ..defaults
        }
    }
}

impl From<&crd::Compression> for config::Compression {
    fn from(c: &crd::Compression) -> Self {
        let defaults = config::Compression::default();
        config::Compression {
            encodings: if c.encodings.is_empty() {
                defaults.encodings
            } else {
                c.encodings.iter().copied().map(Into::into).collect()
            },
            min_size: c.min_size.unwrap_or(defaults.min_size),
            types: if c.types.is_empty() {
                defaults.types
            } else {
                c.types.clone()
            },
        }
    }
}

impl From<&crd::RuleMatch> for config::Match {
    fn from(m: &crd::RuleMatch) -> Self {
        config::Match {
            prefix: m.prefix.clone(),
            path: m.path.clone(),
            regex: m.regex.clone(),
            extensions: m.extensions.clone(),
            methods: m.methods.clone(),
            headers: m
                .headers
                .iter()
                .map(|h| config::HeaderMatch {
                    name: h.name.clone(),
                    value: h.value.clone(),
                })
                .collect(),
            cookies: m
                .cookies
                .iter()
                .map(|c| config::CookieMatch {
                    name: c.name.clone(),
                    value: c.value.clone(),
                })
                .collect(),
        }
    }
}

impl From<&crd::PoolRef> for config::ProxyTarget {
    fn from(p: &crd::PoolRef) -> Self {
        config::ProxyTarget {
            host: p.host.clone(),
            rewrite_path: p.rewrite_path.clone(),
            request_headers: p.request_headers.as_ref().map(|h| config::RequestHeaders {
                remove: h.remove.clone(),
                set: h.set.clone(),
                add: h.add.clone(),
            }),
            ..config::ProxyTarget::new(p.pool.clone())
        }
    }
}

impl From<&crd::CgiRef> for config::CgiTarget {
    fn from(c: &crd::CgiRef) -> Self {
        config::CgiTarget {
            pool: c.pool.clone(),
            document_root: c.document_root.clone(),
            index: c.index.clone(),
            split_path_info: c.split_path_info,
            params: c.params.clone(),
        }
    }
}

impl From<&crd::RuleAction> for config::Action {
    fn from(a: &crd::RuleAction) -> Self {
        match &a.split {
            Some(targets) => config::Action::Split(
                targets
                    .iter()
                    .map(|t| config::SplitTarget {
                        weight: t.weight,
                        action: (&t.action.handler).into(),
                    })
                    .collect(),
            ),
            None => (&a.handler).into(),
        }
    }
}

impl From<&crd::Handler> for config::Action {
    fn from(a: &crd::Handler) -> Self {
        if let Some(s) = &a.static_files {
            config::Action::Static {
                html_extension: s.html_extension,
                fallback: s.fallback.clone(),
            }
        } else if let Some(r) = &a.redirect {
            config::Action::Redirect {
                to: r.to.clone(),
                status: r.status,
            }
        } else if let Some(r) = &a.respond {
            config::Action::Return {
                status: r.status,
                body: r.body.clone(),
                content_type: config::default_return_type(),
            }
        } else if let Some(x) = &a.deny {
            config::Action::Deny {
                status: x.status.unwrap_or_else(config::default_deny_status),
            }
        } else if let Some(p) = &a.proxy {
            config::Action::Proxy(p.into())
        } else if let Some(c) = &a.fastcgi {
            config::Action::Fastcgi(c.into())
        } else if let Some(c) = &a.uwsgi {
            config::Action::Uwsgi(c.into())
        } else if let Some(c) = &a.scgi {
            config::Action::Scgi(c.into())
        } else {
            // The CRD's CEL rules admit exactly one handler; an object that got past them
            // anyway is answered with a clear 500 rather than a panic.
            config::Action::Return {
                status: 500,
                body: "rule without action\n".into(),
                content_type: config::default_return_type(),
            }
        }
    }
}

impl From<&crd::HeaderChanges> for config::HeaderOps {
    fn from(h: &crd::HeaderChanges) -> Self {
        config::HeaderOps {
            remove: h.remove.clone(),
            set: h.set.clone(),
            add: h.add.clone(),
        }
    }
}

impl From<&crd::CachePolicy> for config::CachePolicy {
    fn from(c: &crd::CachePolicy) -> Self {
        config::CachePolicy {
            max_age: c.max_age,
            visibility: c.visibility.map(Into::into),
            immutable: c.immutable,
        }
    }
}

impl From<&crd::Cors> for config::Cors {
    fn from(c: &crd::Cors) -> Self {
        config::Cors {
            allow_origins: c.allow_origins.clone(),
            allow_methods: if c.allow_methods.is_empty() {
                config::default_cors_methods()
            } else {
                c.allow_methods.clone()
            },
            allow_headers: c.allow_headers.clone(),
            expose_headers: c.expose_headers.clone(),
            allow_credentials: c.allow_credentials,
            max_age: c.max_age,
        }
    }
}

/// The htpasswd file is the Secret's `htpasswd` key, mounted under [`AUTH_DIR`] from an
/// optional volume: until the Secret exists (or on pods started before the rule named it)
/// the rule denies every request, and the rest of the config still loads.
impl From<&crd::BasicAuth> for config::BasicAuth {
    fn from(b: &crd::BasicAuth) -> Self {
        config::BasicAuth {
            realm: b.realm.clone(),
            htpasswd: format!("{AUTH_DIR}/{}/htpasswd", b.secret_name),
            optional: true,
        }
    }
}

impl From<&crd::Access> for config::AccessList {
    fn from(a: &crd::Access) -> Self {
        config::AccessList {
            allow: a.allow.clone(),
            deny: a.deny.clone(),
            status: config::default_deny_status(),
        }
    }
}

impl From<&crd::RateLimit> for config::RateLimit {
    fn from(r: &crd::RateLimit) -> Self {
        config::RateLimit {
            requests_per_second: r.requests_per_second,
            burst: r.burst,
        }
    }
}

impl From<&crd::Bandwidth> for config::Bandwidth {
    fn from(b: &crd::Bandwidth) -> Self {
        config::Bandwidth {
            per_connection: b.per_connection,
            total: b.total,
        }
    }
}

impl From<&crd::Rule> for config::Rule {
    fn from(r: &crd::Rule) -> Self {
        config::Rule {
            name: r.name.clone(),
            matches: (&r.matches).into(),
            action: (&r.action).into(),
            headers: r.headers.as_ref().map(Into::into),
            cache: r.cache.as_ref().map(Into::into),
            cors: r.cors.as_ref().map(Into::into),
            basic_auth: r.basic_auth.as_ref().map(Into::into),
            access: r.access.as_ref().map(Into::into),
            rate_limit: r.rate_limit.as_ref().map(Into::into),
            bandwidth: r.bandwidth.as_ref().map(Into::into),
            https_redirect: r.https_redirect,
        }
    }
}
