//! Compiled rules: conditions checked per request, the action that answers, the
//! modifiers around it, and bandwidth limits.

use super::basic_auth::BasicAuth;
use super::modifiers::{AccessList, CachePolicy, Cors, HeaderOps, RateLimiter};
use crate::http::request::RequestHead;
use crate::static_files::Misses;
use http::{HeaderValue, Method};
use regex::Regex;
use skiff_config::{Piece, Template};
use std::sync::Arc;

pub struct Conditions {
    pub prefix: Option<String>,
    pub path: Option<String>,
    pub regex: Option<Regex>,
    /// Lower-cased, without the dot.
    pub extensions: Vec<String>,
    pub methods: Vec<Method>,
    /// (name, exact value if required)
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// (name, exact value if required), on the Cookie header's pairs.
    pub cookies: Vec<(String, Option<String>)>,
}

impl Conditions {
    /// Whether the request matches; `path` is the decoded, normalized path. Regex
    /// captures, when any, are returned for the action.
    pub fn matches<'p>(
        &self,
        req: &RequestHead<'_>,
        path: &'p str,
    ) -> Option<Option<regex::Captures<'p>>> {
        if let Some(p) = &self.prefix {
            if !path.starts_with(p.as_str()) {
                return None;
            }
        }
        if let Some(p) = &self.path {
            if path != p {
                return None;
            }
        }
        if !self.extensions.is_empty() {
            let name = path.rsplit('/').next().unwrap_or("");
            let ext = name.rsplit_once('.').map(|(_, e)| e)?;
            if !self.extensions.iter().any(|x| x.eq_ignore_ascii_case(ext)) {
                return None;
            }
        }
        if !self.methods.is_empty() && !self.methods.contains(&req.method) {
            return None;
        }
        for (name, value) in &self.headers {
            let got = req.headers.get(name)?;
            if let Some(want) = value {
                if got != want.as_slice() {
                    return None;
                }
            }
        }
        if !self.cookies.is_empty() {
            let sent = req.headers.all("cookie");
            for (name, value) in &self.cookies {
                let got = cookie(&sent, name)?;
                if value.as_ref().is_some_and(|want| got != want.as_bytes()) {
                    return None;
                }
            }
        }
        match &self.regex {
            Some(re) => re.captures(path).map(Some),
            None => Some(None),
        }
    }
}

pub enum Action {
    /// Files from the root, and what a path that names nothing tries, if anything.
    Static {
        misses: Option<Box<Misses>>,
    },
    Redirect {
        to: Template,
        status: http::StatusCode,
    },
    Return {
        status: http::StatusCode,
        body: bytes::Bytes,
        content_type: HeaderValue,
    },
    Deny {
        status: http::StatusCode,
    },
    Upstream(std::sync::Arc<crate::upstream::Backend>),
    /// One of several actions by weight; never another split (`compile_action`).
    Split(Box<super::split::Split<Action>>),
}

/// The first value of cookie `name` in the Cookie fields sent (`a=1; b=2`, one field or
/// several as HTTP/2 sends them), as sent. Pairs without `=` are skipped.
fn cookie<'a>(fields: &[&'a [u8]], name: &str) -> Option<&'a [u8]> {
    fields
        .iter()
        .flat_map(|f| f.split(|&b| b == b';'))
        .find_map(|pair| {
            let pair = pair.trim_ascii();
            let eq = pair.iter().position(|&b| b == b'=')?;
            (pair[..eq].trim_ascii() == name.as_bytes()).then(|| pair[eq + 1..].trim_ascii())
        })
}

/// Renders a redirect target: a template whose own text starts with the request's path
/// is kept on this site.
pub fn render_location(
    t: &Template,
    req: &RequestHead<'_>,
    clean_path: &str,
    caps: Option<&regex::Captures<'_>>,
) -> String {
    let mut out = render(t, req, clean_path, caps, None);
    // A target that starts with the request's own path must stay on this site: from
    // `GET //evil.example`, `Location: //evil.example/` would be scheme-relative.
    if !matches!(t.pieces.first(), Some(Piece::Literal(_))) {
        let extra = out.len() - out.trim_start_matches(['/', '\\']).len();
        if extra > 1 || out.starts_with('\\') {
            out.replace_range(..extra, "/");
        }
    }
    out
}

/// Renders a template for a request. `$uri` is the cleaned path the rules matched,
/// encoded again; `$request_uri` the path and query as received; `$remote_addr` is
/// `client`.
pub fn render(
    t: &Template,
    req: &RequestHead<'_>,
    clean_path: &str,
    caps: Option<&regex::Captures<'_>>,
    client: Option<std::net::IpAddr>,
) -> String {
    let mut out = String::with_capacity(64);
    for piece in &t.pieces {
        match piece {
            Piece::Literal(s) => out.push_str(s),
            Piece::Capture(i) => {
                if let Some(m) = caps.and_then(|c| c.get(*i)) {
                    out.push_str(m.as_str());
                }
            }
            Piece::Host => {
                // The normalised name, without the port (nginx's `$host`); the connection
                // layer has refused a Host that does not parse.
                if let Some(a) = req
                    .host
                    .and_then(|h| skiff_http::host::parse_authority(h).ok())
                {
                    out.push_str(&a.name);
                }
            }
            Piece::Scheme => out.push_str(if req.secure { "https" } else { "http" }),
            Piece::RequestUri => {
                out.push_str(req.path);
                if let Some(q) = req.query {
                    out.push('?');
                    out.push_str(q);
                }
            }
            Piece::Uri => out.push_str(&skiff_http::path::percent_encode_path(clean_path)),
            Piece::Args => out.push_str(req.query.unwrap_or("")),
            Piece::RemoteAddr => {
                if let Some(ip) = client {
                    use std::fmt::Write;
                    let _ = write!(out, "{ip}");
                }
            }
        }
    }
    out
}

/// Bandwidth limits at one level (virtual server or rule).
#[derive(Default)]
pub struct BandwidthLimits {
    pub per_connection: Option<u64>,
    pub total: Option<Arc<crate::shaping::TokenBucket>>,
}

impl BandwidthLimits {
    pub fn from_config(b: Option<&skiff_config::Bandwidth>) -> BandwidthLimits {
        b.map_or_else(BandwidthLimits::default, |b| BandwidthLimits {
            per_connection: b.per_connection,
            total: b
                .total
                .map(|t| Arc::new(crate::shaping::TokenBucket::new(t))),
        })
    }
    pub fn is_empty(&self) -> bool {
        self.per_connection.is_none() && self.total.is_none()
    }
}

/// A rule's configured match, and the htpasswd file its users were read from: a rule of
/// the next generation with the same match, whose (other) htpasswd folder is not on this
/// pod, keeps these users.
pub struct AuthOrigin {
    pub matches: skiff_config::Match,
    pub source: std::path::PathBuf,
}

/// A compiled rule: when it applies, what it does, and the modifiers around it.
pub struct Rule {
    pub bandwidth: BandwidthLimits,
    pub conditions: Conditions,
    pub action: Action,
    pub access: Option<AccessList>,
    pub rate_limit: Option<RateLimiter>,
    pub cors: Option<Cors>,
    pub basic_auth: Option<BasicAuth>,
    /// Where a rule with basic auth got its users: the next generation finds them by it.
    /// Boxed: rules are scanned per request, and only a reload reads it.
    pub auth_origin: Option<Box<AuthOrigin>>,
    pub headers: Option<HeaderOps>,
    pub cache: Option<CachePolicy>,
    /// `headers` and `cache` for the responses of the backends this rule routes to.
    pub backend_edits: Option<Arc<crate::upstream::ResponseEdits>>,
    /// Overrides the virtual server's `https_redirect` for the requests this rule takes.
    pub https_redirect: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(to: &str, target: &str, clean: &str, secure: bool) -> String {
        let (path, query) = RequestHead::split_target(target);
        let req = RequestHead {
            target,
            path,
            query,
            host: Some(b"Example.com:8443"),
            secure,
            ..Default::default()
        };
        render_location(&Template::parse(to, 0).unwrap(), &req, clean, None)
    }

    #[test]
    fn cookies_are_found_by_exact_name_in_every_cookie_field() {
        let fields: [&[u8]; 2] = [
            b"theme=dark;canary = always ; flag; empty=",
            b"b=2; canary=no",
        ];
        assert_eq!(
            cookie(&fields, "canary"),
            Some(&b"always"[..]),
            "the first one sent"
        );
        assert_eq!(cookie(&fields, "b"), Some(&b"2"[..]), "a later field");
        assert_eq!(cookie(&fields, "empty"), Some(&b""[..]));
        assert_eq!(cookie(&fields, "flag"), None, "no `=`, no cookie");
        assert_eq!(cookie(&fields, "Canary"), None, "names are case-sensitive");
        assert_eq!(cookie(&fields, "nary"), None);
        assert_eq!(cookie(&[], "canary"), None);
    }

    #[test]
    fn a_cookie_condition_needs_the_cookie_and_its_value_when_given() {
        let conditions = |cookies: Vec<(&str, Option<&str>)>| Conditions {
            prefix: None,
            path: None,
            regex: None,
            extensions: vec![],
            methods: vec![],
            headers: vec![],
            cookies: cookies
                .into_iter()
                .map(|(n, v)| (n.to_owned(), v.map(str::to_owned)))
                .collect(),
        };
        let sent = [httparse::Header {
            name: "Cookie",
            value: b"session=1; canary=always",
        }];
        let with = RequestHead {
            headers: crate::http::request::HeaderSource::H1(&sent),
            ..Default::default()
        };
        let without = RequestHead::default();
        let present = conditions(vec![("canary", None)]);
        assert!(present.matches(&with, "/").is_some());
        assert!(present.matches(&without, "/").is_none());
        let exact = conditions(vec![("canary", Some("always")), ("session", None)]);
        assert!(exact.matches(&with, "/").is_some());
        assert!(conditions(vec![("canary", Some("never"))])
            .matches(&with, "/")
            .is_none());
    }

    #[test]
    fn a_redirect_names_the_scheme_the_request_came_by() {
        let to = "$scheme://$host/new";
        assert_eq!(render(to, "/old", "/old", false), "http://example.com/new");
        assert_eq!(render(to, "/old", "/old", true), "https://example.com/new");
    }

    #[test]
    fn uri_is_the_cleaned_path_encoded_and_request_uri_the_path_and_query_received() {
        assert_eq!(
            render("$uri/", "/a/./b%20c?x=1", "/a/b c", false),
            "/a/b%20c/"
        );
        // What a path may hold stays as it is; what it may not is encoded.
        assert_eq!(
            render("$uri", "/wiki/Help:Contents", "/wiki/Help:Contents", false),
            "/wiki/Help:Contents"
        );
        assert_eq!(
            render("$uri", "/x", "/a+b;v=1@c/%?#é", false),
            "/a+b;v=1@c/%25%3F%23%C3%A9"
        );
        assert_eq!(
            render(
                "https://$host$request_uri",
                "http://other/a?x=1",
                "/a",
                false
            ),
            "https://example.com/a?x=1",
            "an absolute-form target's authority is not part of $request_uri"
        );
    }

    #[test]
    fn a_target_starting_with_the_path_cannot_leave_the_site() {
        // `GET //blog.evil.example` matches `prefix: /blog` once cleaned.
        for (target, clean) in [
            ("//blog.evil.example", "/blog.evil.example"),
            ("//evil/../blog", "/blog"),
        ] {
            let to = render("$request_uri/", target, clean, false);
            assert!(!to.starts_with("//"), "{target} -> {to}");
            let to = render("$uri/", target, clean, false);
            assert!(!to.starts_with("//"), "{target} -> {to}");
        }
        assert_eq!(render("$request_uri", "/\\evil", "/", false), "/evil");
        // A template that names its own scheme-relative target keeps it.
        assert_eq!(
            render("//cdn.example.com$uri", "/x", "/x", false),
            "//cdn.example.com/x"
        );
    }
}
