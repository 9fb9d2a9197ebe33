//! Where a rule sends requests: a pool and how requests are forwarded to it (compiled
//! once per configuration generation), and a request routed there.

use super::pool::Pool;
use http::HeaderValue;
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
    },
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
    /// With the rule's CORS, its fields for this request's origin (maybe none).
    pub cors: Option<Vec<(http::HeaderName, HeaderValue)>>,
}
