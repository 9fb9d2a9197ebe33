//! Compiling one configured rule: its match conditions, its action (a pool looked up by
//! name), and its modifiers, with errors that name the rule's place in the file.

use super::basic_auth::BasicAuth;
use super::modifiers::{AccessList, CachePolicy, Cors, HeaderOps, RateLimiter};
use super::rules::{Action, AuthOrigin, BandwidthLimits, Conditions, Rule};
use super::split::Split;
use crate::static_files::Misses;
use crate::upstream::pool::Pool;
use crate::upstream::ResponseEdits;
use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, StatusCode};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

pub(super) fn compile_rule(
    r: &skiff_config::Rule,
    at: &str,
    base: &Path,
    pools: &HashMap<&str, Arc<Pool>>,
    previous_auth: Option<(&BasicAuth, &Path)>,
    reloading: bool,
    path_policy: crate::fs::path::PathPolicy,
) -> Result<Rule, String> {
    let m = &r.matches;
    let regex = match &m.regex {
        Some(re) => Some(regex::Regex::new(re).map_err(|e| format!("{at}.match.regex: {e}"))?),
        None => None,
    };
    let captures = regex.as_ref().map_or(0, |r| r.captures_len() - 1);
    let methods = m
        .methods
        .iter()
        .map(|x| Method::from_bytes(x.as_bytes()).map_err(|_| format!("{at}.match.methods: {x:?}")))
        .collect::<Result<Vec<_>, _>>()?;
    let conditions = Conditions {
        prefix: m.prefix.clone(),
        path: m.path.clone(),
        regex,
        extensions: m
            .extensions
            .iter()
            .map(|e| e.to_ascii_lowercase())
            .collect(),
        methods,
        headers: m
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.clone(),
                    h.value.as_ref().map(|v| v.as_bytes().to_vec()),
                )
            })
            .collect(),
        cookies: m
            .cookies
            .iter()
            .map(|c| (c.name.clone(), c.value.clone()))
            .collect(),
    };
    let action = compile_action(
        &r.action,
        &format!("{at}.action"),
        m,
        captures,
        pools,
        path_policy,
    )?;
    let status =
        |code: u16| StatusCode::from_u16(code).map_err(|_| format!("{at}: bad status {code}"));
    let access = match &r.access {
        Some(a) => Some(AccessList {
            allow: a
                .allow
                .iter()
                .map(|c| skiff_config::parse_cidr(c))
                .collect::<Result<_, _>>()?,
            deny: a
                .deny
                .iter()
                .map(|c| skiff_config::parse_cidr(c))
                .collect::<Result<_, _>>()?,
            status: status(a.status)?,
        }),
        None => None,
    };
    let joined = |list: &[String]| -> Option<HeaderValue> {
        (!list.is_empty())
            .then(|| HeaderValue::from_str(&list.join(", ")).ok())
            .flatten()
    };
    let cors = r.cors.as_ref().map(|c| Cors {
        any_origin: c.allow_origins.iter().any(|o| o == "*"),
        origins: c.allow_origins.clone(),
        allow_methods: joined(&c.allow_methods)
            .unwrap_or(HeaderValue::from_static("GET, HEAD, POST")),
        allow_headers: joined(&c.allow_headers),
        expose_headers: joined(&c.expose_headers),
        credentials: c.allow_credentials,
        max_age: c.max_age.map(HeaderValue::from),
    });
    let (basic_auth, auth_origin) = match &r.basic_auth {
        Some(b) => {
            let file = base.join(&b.htpasswd);
            let (auth, source) = read_htpasswd(b, &file, at, previous_auth, reloading)
                .map_err(|e| format!("{at}.basic_auth.htpasswd: {e}"))?;
            let origin = AuthOrigin {
                matches: r.matches.clone(),
                source,
            };
            (Some(auth), Some(Box::new(origin)))
        }
        None => (None, None),
    };
    let header = |n: &str| {
        HeaderName::from_bytes(n.as_bytes()).map_err(|_| format!("{at}.headers: bad name {n:?}"))
    };
    let value =
        |v: &str| HeaderValue::from_str(v).map_err(|_| format!("{at}.headers: bad value {v:?}"));
    let headers = match &r.headers {
        Some(h) => Some(HeaderOps {
            remove: h
                .remove
                .iter()
                .map(|n| header(n))
                .collect::<Result<_, _>>()?,
            set: h
                .set
                .iter()
                .map(|(n, v)| Ok((header(n)?, value(v)?)))
                .collect::<Result<_, String>>()?,
            add: h
                .add
                .iter()
                .map(|(n, v)| Ok((header(n)?, value(v)?)))
                .collect::<Result<_, String>>()?,
        }),
        None => None,
    };
    let cache = r.cache.as_ref().map(|c| {
        let mut cc = String::new();
        match c.visibility {
            Some(skiff_config::CacheVisibility::Public) => cc.push_str("public, "),
            Some(skiff_config::CacheVisibility::Private) => cc.push_str("private, "),
            None => {}
        }
        cc.push_str(&format!("max-age={}", c.max_age));
        if c.immutable {
            cc.push_str(", immutable");
        }
        CachePolicy {
            cache_control: HeaderValue::from_str(&cc).expect("ASCII"),
            max_age: c.max_age,
        }
    });
    let backend_edits = backend_edits(headers.as_ref(), cache.as_ref());
    Ok(Rule {
        backend_edits,
        bandwidth: BandwidthLimits::from_config(r.bandwidth.as_ref()),
        https_redirect: r.https_redirect,
        conditions,
        action,
        access,
        rate_limit: r
            .rate_limit
            .as_ref()
            .map(|l| RateLimiter::new(l.requests_per_second, l.burst)),
        cors,
        auth_origin,
        basic_auth,
        headers,
        cache,
    })
}

/// The rule's `headers` and `cache` as they apply to backend responses, when it has either.
fn backend_edits(
    headers: Option<&HeaderOps>,
    cache: Option<&CachePolicy>,
) -> Option<Arc<ResponseEdits>> {
    if headers.is_none() && cache.is_none() {
        return None;
    }
    let mut edits = ResponseEdits {
        remove: Vec::new(),
        append: Vec::new(),
        cache: cache.map(|c| (c.cache_control.clone(), c.max_age)),
    };
    if let Some(h) = headers {
        edits.remove.extend(h.remove.iter().cloned());
        edits.remove.extend(h.set.iter().map(|(n, _)| n.clone()));
        edits.append.extend(h.set.iter().cloned());
        edits.append.extend(h.add.iter().cloned());
    }
    Some(Arc::new(edits))
}

/// A rule's users and the file they come from. An optional file that does not exist: the
/// users the same rule had, when they came from another file whose folder this pod does
/// not have either (a Secret renamed since the pod started); else nobody. On a reload (and
/// for an optional file, at start too) a line refused only leaves its user out, so an
/// edit that removes users always lands.
fn read_htpasswd(
    b: &skiff_config::BasicAuth,
    file: &Path,
    at: &str,
    previous: Option<(&BasicAuth, &Path)>,
    reloading: bool,
) -> Result<(BasicAuth, std::path::PathBuf), String> {
    let text = match std::fs::read_to_string(file) {
        Err(e) if b.optional && e.kind() == std::io::ErrorKind::NotFound => {
            let folder_exists = file.parent().is_some_and(Path::is_dir);
            return match previous.filter(|(_, from)| *from != file && !folder_exists) {
                Some((old, from)) => {
                    tracing::warn!(at, htpasswd = %file.display(), kept_from = %from.display(), "the optional htpasswd file's folder is not on this pod: the rule keeps the users it had");
                    Ok((old.clone(), from.to_owned()))
                }
                None => {
                    tracing::warn!(at, htpasswd = %file.display(), "the optional htpasswd file does not exist: every request is denied until it does");
                    Ok((BasicAuth::deny_all(&b.realm)?, file.to_owned()))
                }
            };
        }
        Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
        Ok(text) => text,
    };
    // An optional file is a Secret's: a pod started later must not fail on a line the
    // running ones left out.
    let auth = if reloading || b.optional {
        let (auth, refused) = BasicAuth::from_htpasswd_skipping(&text, &b.realm)?;
        for why in refused {
            tracing::error!(at, htpasswd = %file.display(), "htpasswd entry left out: {why}");
        }
        auth
    } else {
        BasicAuth::from_htpasswd(&text, &b.realm).map_err(|e| format!("{}: {e}", file.display()))?
    };
    if auth.denies_all() {
        tracing::warn!(at, htpasswd = %file.display(), "the htpasswd file has no users: every request is denied");
    }
    Ok((auth, file.to_owned()))
}

/// One action, at `at` (`…rules[2].action`, or a split target's): a pool looked up by
/// name, a template parsed, a fallback path cleaned.
fn compile_action(
    action: &skiff_config::Action,
    at: &str,
    m: &skiff_config::Match,
    captures: usize,
    pools: &HashMap<&str, Arc<Pool>>,
    path_policy: crate::fs::path::PathPolicy,
) -> Result<Action, String> {
    let status =
        |code: u16| StatusCode::from_u16(code).map_err(|_| format!("{at}: bad status {code}"));
    let action = match action {
        skiff_config::Action::Static {
            html_extension,
            fallback,
        } => Action::Static {
            misses: match (html_extension, fallback) {
                (false, None) => None,
                (_, f) => Some(Box::new(Misses {
                    html_extension: *html_extension,
                    fallback: match f {
                        None => None,
                        Some(f) => Some(
                            crate::fs::path::clean_request_path(f, path_policy)
                                .map_err(|e| format!("{at}.static.fallback: {f:?}: {e}"))?
                                .into_owned(),
                        ),
                    },
                })),
            },
        },
        skiff_config::Action::Redirect { to, status: s } => Action::Redirect {
            to: skiff_config::Template::parse(to, captures)
                .map_err(|e| format!("{at}.redirect.to: {e}"))?,
            status: status(*s)?,
        },
        skiff_config::Action::Return {
            status: s,
            body,
            content_type,
        } => Action::Return {
            status: status(*s)?,
            body: Bytes::from(body.clone()),
            content_type: HeaderValue::from_str(content_type)
                .map_err(|_| format!("{at}.return.content_type"))?,
        },
        skiff_config::Action::Deny { status: s } => Action::Deny {
            status: status(*s)?,
        },
        skiff_config::Action::Proxy(p) => Action::Upstream(Arc::new(crate::upstream::Backend {
            pool: find_pool(pools, &p.pool, at)?,
            forwarding: crate::upstream::Forwarding::Http {
                host: match &p.host {
                    Some(h) => {
                        Some(HeaderValue::from_str(h).map_err(|_| format!("{at}.proxy.host"))?)
                    }
                    None => None,
                },
                upgrades: p.upgrades.iter().map(|u| u.to_ascii_lowercase()).collect(),
                rewrite: match &p.rewrite_path {
                    Some(to) => Some(crate::upstream::Rewrite {
                        matched: m.prefix.clone().or_else(|| m.path.clone()).ok_or_else(|| {
                            format!("{at}.proxy.rewrite_path: needs match.prefix or match.path")
                        })?,
                        to: to.clone(),
                    }),
                    None => None,
                },
                request_headers: match &p.request_headers {
                    Some(h) => Some(request_header_rule(h, captures, at)?),
                    None => None,
                },
            },
        })),
        skiff_config::Action::Fastcgi(t)
        | skiff_config::Action::Uwsgi(t)
        | skiff_config::Action::Scgi(t) => Action::Upstream(Arc::new(crate::upstream::Backend {
            pool: find_pool(pools, &t.pool, at)?,
            forwarding: crate::upstream::Forwarding::Cgi {
                document_root: t.document_root.clone(),
                index: t.index.clone(),
                split_path_info: t.split_path_info,
                params: t
                    .params
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            },
        })),
        skiff_config::Action::Split(targets) => {
            let mut weighted = Vec::with_capacity(targets.len());
            for (i, t) in targets.iter().enumerate() {
                if matches!(t.action, skiff_config::Action::Split(_)) {
                    return Err(format!(
                        "{at}.split[{i}].action: a split cannot hold another split"
                    ));
                }
                let weight = u8::try_from(t.weight)
                    .map_err(|_| format!("{at}.split[{i}].weight: {} is over 100", t.weight))?;
                let here = format!("{at}.split[{i}].action");
                weighted.push((
                    weight,
                    compile_action(&t.action, &here, m, captures, pools, path_policy)?,
                ));
            }
            Action::Split(Box::new(
                Split::new(weighted).map_err(|e| format!("{at}.split: {e}"))?,
            ))
        }
    };
    Ok(action)
}

fn find_pool(pools: &HashMap<&str, Arc<Pool>>, name: &str, at: &str) -> Result<Arc<Pool>, String> {
    pools
        .get(name)
        .cloned()
        .ok_or_else(|| format!("{at}: no pool named {name:?}"))
}

/// A proxy's `request_headers` with names parsed and values as templates; validation
/// has refused what would fail here.
fn request_header_rule(
    h: &skiff_config::RequestHeaders,
    captures: usize,
    at: &str,
) -> Result<crate::upstream::RequestHeaderRule, String> {
    let at = format!("{at}.proxy.request_headers");
    let name = |n: &str| {
        http::HeaderName::from_bytes(n.as_bytes()).map_err(|_| format!("{at}: header {n:?}"))
    };
    let templates = |map: &std::collections::BTreeMap<String, String>| {
        map.iter()
            .map(|(n, v)| {
                let t = skiff_config::Template::parse_header(v, captures)
                    .map_err(|e| format!("{at}.{n}: {e}"))?;
                Ok((name(n)?, t))
            })
            .collect::<Result<Vec<_>, String>>()
    };
    Ok(crate::upstream::RequestHeaderRule {
        remove: h.remove.iter().map(|n| name(n)).collect::<Result<_, _>>()?,
        set: templates(&h.set)?,
        add: templates(&h.add)?,
    })
}
