//! Checks of rules (matches, actions, modifiers) and of backend pools.

use super::fields::*;
use super::request_headers::check_request_headers;
use super::{check_cidr, Checker};
use crate::model::*;
use crate::template::Template;
use std::collections::HashMap;

/// Seconds: longer means nothing more to a cache, and Expires past year 9999 cannot be
/// written.
const MAX_CACHE_AGE: u64 = 10 * 365 * 24 * 3600;

/// Targets of one split at most: more shares than anyone routes by hand.
const MAX_SPLIT_TARGETS: usize = 16;

/// A fallback is a file path under the root, written as it is on disk: it is never
/// percent-decoded, and what the request path cleaner would refuse is refused here.
fn check_fallback(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("{path:?} must be a path starting with '/'"));
    }
    if let Some(ch) = path.chars().find(|ch| matches!(ch, '?' | '#' | '%')) {
        return Err(format!(
            "{path:?} holds {ch:?}; give the file's path under the root as it is on disk, without a query or escapes"
        ));
    }
    if let Some(ch) = path.chars().find(|ch| ch.is_ascii_control() || *ch == '\\') {
        return Err(format!(
            "{path:?} holds {ch:?}, which no request path can name"
        ));
    }
    for segment in path.split('/').skip(1) {
        match segment {
            "." | ".." => {
                return Err(format!(
                    "{path:?} has a {segment:?} segment; give the path from the root"
                ))
            }
            s if s.starts_with(".;") || s.starts_with("..;") => {
                return Err(format!(
                    "{path:?} has a dot segment with parameters ({s:?}), which no request path can name"
                ))
            }
            s if s.starts_with('.') && s != ".well-known" => {
                return Err(format!(
                    "{path:?} names a hidden file or folder ({s:?}), which is never served as a fallback"
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// An action's own checks, at `at` (`…rules[2].action`, or a split target's action).
fn check_action(
    c: &mut Checker,
    at: &str,
    action: &Action,
    m: &Match,
    captures: usize,
    pools: &HashMap<&str, PoolProtocol>,
) {
    match action {
        Action::Split(targets) => check_split(c, at, targets, m, captures, pools),
        Action::Static { fallback, .. } => {
            if let Some(Err(e)) = fallback.as_deref().map(check_fallback) {
                c.fail(format!("{at}.static.fallback"), e);
            }
        }
        Action::Redirect { to, status } => {
            if ![301, 302, 303, 307, 308].contains(status) {
                c.fail(
                    format!("{at}.redirect.status"),
                    format!("{status} is not a redirect; expected 301, 302, 303, 307 or 308"),
                );
            }
            if let Err(e) = Template::parse(to, captures) {
                c.fail(format!("{at}.redirect.to"), e);
            } else if header_value_invalid(to) || to.contains(char::is_whitespace) {
                c.fail(
                    format!("{at}.redirect.to"),
                    "a Location cannot hold spaces or control characters; percent-encode them",
                );
            }
        }
        Action::Return {
            status,
            content_type,
            ..
        } => {
            if !(200..=599).contains(status) {
                c.fail(
                    format!("{at}.return.status"),
                    format!("{status} is out of range; expected 200 to 599"),
                );
            }
            if header_value_invalid(content_type) {
                c.fail(
                    format!("{at}.return.content_type"),
                    "not a valid header value",
                );
            }
        }
        Action::Deny { status } => {
            if !(400..=599).contains(status) {
                c.fail(
                    format!("{at}.deny.status"),
                    format!("{status} is out of range; expected 400 to 599"),
                );
            }
        }
        Action::Proxy(r) => check_pool(
            c,
            &format!("{at}.proxy.pool"),
            &r.pool,
            PoolProtocol::Http,
            pools,
        ),
        Action::Fastcgi(r) => check_pool(
            c,
            &format!("{at}.fastcgi.pool"),
            &r.pool,
            PoolProtocol::Fastcgi,
            pools,
        ),
        Action::Uwsgi(r) => check_pool(
            c,
            &format!("{at}.uwsgi.pool"),
            &r.pool,
            PoolProtocol::Uwsgi,
            pools,
        ),
        Action::Scgi(r) => check_pool(
            c,
            &format!("{at}.scgi.pool"),
            &r.pool,
            PoolProtocol::Scgi,
            pools,
        ),
    }

    match action {
        Action::Fastcgi(t) | Action::Uwsgi(t) | Action::Scgi(t) => {
            if t.index
                .as_ref()
                .is_some_and(|i| i.is_empty() || i.contains('/'))
            {
                c.fail(
                    format!("{at}.index"),
                    "must be a plain file name such as index.php",
                );
            }
            for name in t.params.keys() {
                if name.is_empty() || name.bytes().any(|b| b == 0 || b == b'=') {
                    c.fail(
                        format!("{at}.params"),
                        format!("{name:?} is not a parameter name"),
                    );
                }
            }
        }
        Action::Proxy(t) => {
            if t.host
                .as_ref()
                .is_some_and(|h| header_value_invalid(h) || h.is_empty())
            {
                c.fail(format!("{at}.proxy.host"), "not a valid Host value");
            }
            if let Some(Err(e)) = t.rewrite_path.as_deref().map(|to| check_rewrite(to, m)) {
                c.fail(format!("{at}.proxy.rewrite_path"), e);
            }
            if let Some(h) = &t.request_headers {
                check_request_headers(c, &format!("{at}.proxy.request_headers"), h, captures);
            }
        }
        _ => {}
    }
}

/// At least two targets, weights adding up to 100, and no split inside a split.
fn check_split(
    c: &mut Checker,
    at: &str,
    targets: &[SplitTarget],
    m: &Match,
    captures: usize,
    pools: &HashMap<&str, PoolProtocol>,
) {
    if targets.len() < 2 {
        c.fail(
            format!("{at}.split"),
            format!(
                "has {} target(s); a split needs at least two (use the action itself for one)",
                targets.len()
            ),
        );
    }
    if targets.len() > MAX_SPLIT_TARGETS {
        c.fail(
            format!("{at}.split"),
            format!("has {} targets; at most {MAX_SPLIT_TARGETS}", targets.len()),
        );
    }
    let mut total: u64 = 0;
    for (i, t) in targets.iter().enumerate() {
        let here = format!("{at}.split[{i}]");
        if t.weight > 100 {
            c.fail(
                format!("{here}.weight"),
                format!("{} is a percentage; expected 0 to 100", t.weight),
            );
        }
        total += u64::from(t.weight);
        if matches!(t.action, Action::Split(_)) {
            c.fail(
                format!("{here}.action.split"),
                "a split cannot hold another split; give its targets their share of this one",
            );
        } else {
            check_action(c, &format!("{here}.action"), &t.action, m, captures, pools);
        }
    }
    if !targets.is_empty() && total != 100 {
        c.fail(
            format!("{at}.split"),
            format!("the weights add up to {total}; they must add up to 100"),
        );
    }
}

/// A rewrite replaces what `match.prefix` or `match.path` matched with a path written as
/// text (the server encodes it), which no request could read differently.
fn check_rewrite(to: &str, m: &Match) -> Result<(), String> {
    if m.prefix.is_none() && m.path.is_none() {
        return Err(format!(
            "{to:?} replaces what match.prefix or match.path matched; give the rule one of them"
        ));
    }
    if !to.starts_with('/') {
        return Err(format!("{to:?} must be a path starting with '/'"));
    }
    for ch in to.chars() {
        let what = match ch {
            '?' => "a query",
            '#' => "a fragment",
            '%' => "a percent escape (write the text: it is encoded for the backend)",
            '\\' => "a backslash",
            c if c.is_control() => "a control character",
            _ => continue,
        };
        return Err(format!("{to:?} holds {ch:?}, {what}"));
    }
    if to.contains("//") {
        return Err(format!(
            "{to:?} has an empty segment; a backend may read `//name` as a host"
        ));
    }
    if let Some(seg) = to
        .split('/')
        .find(|s| *s == "." || *s == ".." || s.starts_with(".;") || s.starts_with("..;"))
    {
        return Err(format!("{to:?} has a dot segment ({seg:?})"));
    }
    Ok(())
}

pub(super) fn check_rule(
    c: &mut Checker,
    p: &str,
    rule: &Rule,
    pools: &HashMap<&str, PoolProtocol>,
) {
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

    for (i, cookie) in m.cookies.iter().enumerate() {
        if cookie_name_invalid(&cookie.name) {
            c.fail(
                format!("{p}.match.cookies[{i}].name"),
                format!("{:?} is not a cookie name", cookie.name),
            );
        }
        if let Some(v) = &cookie.value {
            let inner = v
                .strip_prefix('"')
                .and_then(|x| x.strip_suffix('"'))
                .unwrap_or(v);
            if let Some(b) = inner.bytes().find(|&b| !cookie_value_byte(b)) {
                c.fail(
                    format!("{p}.match.cookies[{i}].value"),
                    format!("{v:?} holds {:?}, which a cookie value cannot", b as char),
                );
            }
        }
    }
    check_action(c, &format!("{p}.action"), &rule.action, m, captures, pools);
    if let Some(h) = &rule.headers {
        for (i, name) in h.remove.iter().enumerate() {
            if header_name_invalid(name) {
                c.fail(
                    format!("{p}.headers.remove[{i}]"),
                    format!("{name:?} is not a header name"),
                );
            } else if let Some(why) = framing_header(name) {
                c.fail(format!("{p}.headers.remove[{i}]"), why);
            }
        }
        for (kind, map) in [("set", &h.set), ("add", &h.add)] {
            for (name, value) in map {
                if header_name_invalid(name) {
                    c.fail(
                        format!("{p}.headers.{kind}.{name}"),
                        format!("{name:?} is not a header name"),
                    );
                } else if let Some(why) = framing_header(name) {
                    c.fail(format!("{p}.headers.{kind}.{name}"), why);
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
        for (field, list) in [
            ("allow_headers", &cors.allow_headers),
            ("expose_headers", &cors.expose_headers),
        ] {
            for (i, name) in list.iter().enumerate() {
                if header_name_invalid(name) {
                    c.fail(
                        format!("{p}.cors.{field}[{i}]"),
                        format!("{name:?} is not a header name"),
                    );
                }
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
    if let Some(cache) = &rule.cache {
        if cache.max_age > MAX_CACHE_AGE {
            c.fail(
                format!("{p}.cache.max_age"),
                format!("must be at most {MAX_CACHE_AGE} (ten years, nginx's `expires max`)"),
            );
        }
        // RFC 9111 §3.5: `public` lets a shared cache keep an answer to a request with
        // Authorization, and hand the protected page to anyone who asks after.
        if rule.basic_auth.is_some() && cache.visibility == Some(CacheVisibility::Public) {
            c.fail(
                format!("{p}.cache.visibility"),
                "`public` would let a shared cache (a CDN, a proxy) serve what basic_auth protects to anyone; use `private` or leave it out",
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

pub(super) fn check_bandwidth(c: &mut Checker, p: &str, bw: &Bandwidth) {
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
