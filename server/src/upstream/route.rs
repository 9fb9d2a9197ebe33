//! Where a rule sends requests: a pool and how requests are forwarded to it (compiled
//! once per configuration generation), and a request routed there.

use super::pool::Pool;
use http::{HeaderName, HeaderValue};
use std::net::IpAddr;
use std::sync::Arc;

/// How requests reach a pool's backends.
pub enum Forwarding {
    /// FastCGI, uwsgi or SCGI: a CGI environment.
    Cgi {
        document_root: Option<String>,
        index: Option<String>,
        split_path_info: bool,
        params: Vec<(String, String)>,
    },
    /// HTTP, optionally with the Host the backend should see, and the `Upgrade`
    /// protocols that may be tunnelled (lower-case).
    Http {
        host: Option<HeaderValue>,
        upgrades: Vec<String>,
        rewrite: Option<Rewrite>,
        request_headers: Option<RequestHeaderRule>,
    },
}

/// A proxy rule's `request_headers`, compiled: the values are rendered per request.
pub struct RequestHeaderRule {
    pub remove: Vec<HeaderName>,
    pub set: Vec<(HeaderName, skiff_config::Template)>,
    pub add: Vec<(HeaderName, skiff_config::Template)>,
}

/// One change a rule makes to the request its backend gets, rendered for this request.
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderEdit {
    Remove(HeaderName),
    Set(HeaderName, HeaderValue),
    Add(HeaderName, HeaderValue),
}

/// A proxy rule's `rewrite_path`: the cleaned path's `matched` start (the rule's prefix or
/// exact path) becomes `to`.
pub struct Rewrite {
    pub matched: String,
    pub to: String,
}

impl Rewrite {
    /// The path and query the backend gets for cleaned path `path` and `query`: 400 when
    /// the joined path would hold a dot segment (`prefix: /api` with `to: /` and
    /// `/api../admin`, nginx's "off-by-slash"), 500 when the path does not start with what
    /// the rule matched (matching guarantees it does).
    pub fn target(&self, path: &str, query: Option<&str>) -> Result<String, http::StatusCode> {
        let rest = path
            .strip_prefix(self.matched.as_str())
            .ok_or(http::StatusCode::INTERNAL_SERVER_ERROR)?;
        // `prefix: /api/` with `to: /` must not give `//items` for `/api/items`.
        let rest = match self.to.ends_with('/') {
            true => rest.strip_prefix('/').unwrap_or(rest),
            false => rest,
        };
        let joined = format!("{}{rest}", self.to);
        let dotted = |s: &str| s == "." || s == ".." || s.starts_with(".;") || s.starts_with("..;");
        if joined.split('/').any(dotted) {
            return Err(http::StatusCode::BAD_REQUEST);
        }
        // What came from the client keeps `;` encoded, as it arrived: decoded, a backend
        // such as Tomcat would read `/x%3B.css` as `/x` with a path parameter.
        let mut out = skiff_http::path::percent_encode_path(&self.to);
        out.push_str(&skiff_http::path::percent_encode_path(rest).replace(';', "%3B"));
        if let Some(q) = query {
            out.push('?');
            out.push_str(q);
        }
        Ok(out)
    }

    /// The X-Forwarded-Prefix of a rewrite that strips what the rule matched (`to: /`):
    /// `/api` for `prefix: /api/`, so the backend can write links the client can follow.
    /// Not percent-encoded: the caller encodes it.
    pub fn stripped_prefix(&self) -> Option<&str> {
        let prefix = self.matched.trim_end_matches('/');
        (self.to == "/" && !prefix.is_empty()).then_some(prefix)
    }
}

/// A rule's backend: the pool and how to forward to it.
pub struct Backend {
    pub pool: Arc<Pool>,
    pub forwarding: Forwarding,
}

/// A request routed to a backend by a rule.
pub struct BackendRoute {
    pub backend: Arc<Backend>,
    /// The decoded, normalized path.
    pub path: String,
    /// The virtual server's root, the default DOCUMENT_ROOT.
    pub root: String,
    /// The request came over HTTPS (HTTPS=on, REQUEST_SCHEME, X-Forwarded-Proto).
    pub secure: bool,
    /// Strict-Transport-Security for the response, when the virtual server sends it.
    pub hsts: Option<http::HeaderValue>,
    /// The rule's `headers` and `cache`, when it has either.
    pub edits: Option<Arc<super::edits::ResponseEdits>>,
    /// The request carried Authorization (the rule's cache policy is then left out).
    pub authorized: bool,
    /// With the rule's CORS, its fields for this request's origin (maybe none).
    pub cors: Option<Vec<(http::HeaderName, HeaderValue)>>,
    /// What an HTTP backend is told of the client and the proxies before it.
    pub forwarded: Forwarded,
}

/// What an HTTP backend is told of the client: rendered by the rule's routing, where
/// the trusted proxies and the regex captures are known.
#[derive(Debug, Default)]
pub struct Forwarded {
    /// The client's address (X-Real-IP), behind trusted proxies the one they name.
    pub client_ip: Option<IpAddr>,
    /// The peer is a trusted proxy and `use_forwarded_headers` is on: its X-Forwarded-Proto
    /// and -Port are passed on; otherwise Skiff sets the first and removes the second.
    pub believe_peer: bool,
    /// The rule's `request_headers`, rendered.
    pub edits: Vec<HeaderEdit>,
}

#[cfg(test)]
mod tests {
    use super::Rewrite;

    #[test]
    fn a_rewrite_replaces_what_the_rule_matched_and_keeps_the_query() {
        let r = |matched: &str, to: &str| Rewrite {
            matched: matched.into(),
            to: to.into(),
        };
        let api = r("/api/", "/");
        assert_eq!(
            api.target("/api/items", Some("page=2")).unwrap(),
            "/items?page=2"
        );
        assert_eq!(api.target("/api/", None).unwrap(), "/");
        assert_eq!(api.target("/api/a b/é", None).unwrap(), "/a%20b/%C3%A9");
        assert_eq!(r("/api", "/").target("/api/items", None).unwrap(), "/items");
        assert_eq!(r("/api", "/").target("/api", None).unwrap(), "/");
        assert_eq!(r("/v1/", "/v2/").target("/v1/x", None).unwrap(), "/v2/x");
        assert_eq!(r("/old", "/new").target("/old", Some("")).unwrap(), "/new?");
        assert_eq!(r("/app", "/srv").target("/app/x", None).unwrap(), "/srv/x");
        assert_eq!(
            api.target("/other", None),
            Err(http::StatusCode::INTERNAL_SERVER_ERROR)
        );
        // Nothing the client sends can climb out of the rewritten path.
        for path in [
            "/api..",
            "/api../admin",
            "/api..;/admin",
            "/api.",
            "/api.;x",
        ] {
            assert_eq!(
                r("/api", "/").target(path, None),
                Err(http::StatusCode::BAD_REQUEST),
                "{path}"
            );
            assert_eq!(
                r("/api", "/internal/v2/").target(path, None),
                Err(http::StatusCode::BAD_REQUEST),
                "{path}"
            );
        }
        assert_eq!(r("/api", "/").target("/apix/y", None).unwrap(), "/x/y");
        assert_eq!(api.stripped_prefix(), Some("/api"));
        assert_eq!(r("/api", "/").stripped_prefix(), Some("/api"));
        assert_eq!(r("/v1/", "/v2/").stripped_prefix(), None);
        assert_eq!(r("/", "/").stripped_prefix(), None);
        assert_eq!(
            api.target("/api/x;.css", None).unwrap(),
            "/x%3B.css",
            "the client's `;` stays encoded"
        );
        assert_eq!(
            r("/a/", "/m;v=1/").target("/a/b", None).unwrap(),
            "/m;v=1/b"
        );
    }
}
