//! Rules: what requests they match, their actions, and the modifiers around them.

use super::defaults::{default_true, is_false, is_true};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A rule: what requests it matches, what handles them, and what it changes on the way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// An optional name, for logs and error messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Conditions, all of which must hold. An empty match matches every request.
    #[serde(default, rename = "match")]
    pub matches: Match,
    /// What answers the request.
    pub action: Action,
    /// Response headers to add, set or remove, on 2xx and 3xx responses: files, fixed answers and backends' responses alike.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<HeaderOps>,
    /// Browser caching: sets Cache-Control and Expires on 2xx and 3xx responses. On a backend's response only when it is a 200, 203, 204, 206, 301 or 308 without Cache-Control, Expires or Set-Cookie of its own (so no sign-in redirect or 304 gets a policy, and no cookie becomes cacheable), and not to a request with Authorization. `public` beside `basic_auth` is refused: a shared cache would serve the protected answers to anyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CachePolicy>,
    /// Cross-origin resource sharing, including preflight answers; on a backend's response the rule's CORS fields replace the backend's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cors: Option<Cors>,
    /// HTTP basic authentication against an htpasswd file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic_auth: Option<BasicAuth>,
    /// Client address allow and deny lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<AccessList>,
    /// Per-client-address request rate limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// Bandwidth limits for responses of this rule (`total` is shared by all of them; `per_connection` overrides the virtual server's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<Bandwidth>,
    /// Redirect plain-HTTP requests this rule takes to HTTPS (308), or with `false` serve
    /// them over HTTP even when the virtual server redirects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https_redirect: Option<bool>,
}

impl Rule {
    /// A rule for every request, with no modifiers: what the parser gives for `action` alone.
    pub fn new(action: Action) -> Rule {
        Rule {
            name: None,
            matches: Match::default(),
            action,
            headers: None,
            cache: None,
            cors: None,
            basic_auth: None,
            access: None,
            rate_limit: None,
            bandwidth: None,
            https_redirect: None,
        }
    }
}

/// Traffic shaping, in bytes per second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Bandwidth {
    /// Each response body is sent at most this fast.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_connection: Option<u64>,
    /// All responses together are sent at most this fast (with a one-second burst).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
}

/// Request conditions. All given conditions must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Match {
    /// The path starts with this (after decoding and normalization), e.g. `/static/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The path equals this exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The path matches this regular expression (Rust `regex` syntax); its captures are `$1`..`$9` in redirects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// The file extension is one of these (without the dot), e.g. `[css, js]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    /// The method is one of these, e.g. `[GET, HEAD]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
    /// Request headers that must be present, or equal a value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HeaderMatch>,
    /// Cookies that must be present, or equal a value (names are case-sensitive), e.g. to
    /// send testers who set `canary=always` to a new version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cookies: Vec<CookieMatch>,
}

/// A request cookie condition, on the `Cookie` header's `name=value` pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CookieMatch {
    /// The cookie name, compared exactly.
    pub name: String,
    /// When given, the cookie must equal this value exactly (as sent, quotes included);
    /// otherwise it must only be present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// A request header condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HeaderMatch {
    /// The header name (case-insensitive).
    pub name: String,
    /// When given, the header must equal this value exactly; otherwise it must only be present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// What answers a matched request. Exactly one kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// Serve files from the virtual server's root.
    Static {
        /// A GET or HEAD whose path names no file, or names a folder without the trailing `/`, is tried with `.html` appended, before the folder's redirect and the fallback: `/about` serves `/about.html` (the pretty URLs of Next.js and SvelteKit static exports; nginx's `try_files $uri $uri.html $uri/`). Not tried: paths ending in `/`, paths refused before any rule, a forbidden file. Each such request costs one failed open before the page, which is then served from the cache.
        #[serde(default, skip_serializing_if = "is_false")]
        html_extension: bool,
        /// A file under the root answered to a GET or HEAD whose path names no file or folder, as that file's own answer (200, or 304 and 206 by its ETag): the history-API fallback of a single-page app (nginx's `try_files $uri $uri/ /index.html`), e.g. `/index.html`; a value ending in `/` serves that folder's index. Written as the path on disk: no `%`, `?`, `#`, dot segments or hidden names. Unchanged: paths refused before any rule (hidden, malformed), a folder without an index, a refused symlink, other methods. Under a catch-all rule a missing `/favicon.ico` gets the page too, as with nginx; a plain `static` rule above it for `/assets/` keeps real 404s there. A fallback that serves no file when the configuration loads is logged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fallback: Option<String>,
    },
    /// Redirect. `to` may use `$1`..`$9` (regex captures), `$host` (the request's host name, lower-cased, without the port), `$scheme` (`https` over TLS, else `http`), `$request_uri` (path and query as received), `$uri` (the cleaned path the rules matched, percent-encoded) and `$args` (query). A target that starts with a variable keeps to this site: a leading `//` it renders becomes `/`.
    Redirect {
        /// The Location template.
        to: String,
        /// 301, 302, 303, 307 or 308.
        #[serde(default = "default_redirect_status")]
        status: u16,
    },
    /// Answer with a fixed response.
    Return {
        /// The status code (200-599).
        status: u16,
        /// The body.
        #[serde(default)]
        body: String,
        /// The Content-Type of the body.
        #[serde(default = "default_return_type")]
        content_type: String,
    },
    /// Refuse the request.
    Deny {
        /// The status code (400-599), 403 by default.
        #[serde(default = "default_deny_status")]
        status: u16,
    },
    /// Send to an HTTP backend pool.
    Proxy(ProxyTarget),
    /// Send to a FastCGI backend pool (PHP-FPM).
    Fastcgi(CgiTarget),
    /// Send to a uWSGI backend pool.
    Uwsgi(CgiTarget),
    /// Send to an SCGI backend pool.
    Scgi(CgiTarget),
    /// Send each request to one of these actions, chosen at random by weight: a canary
    /// release (`90` to the current pool, `10` to the new one) or a blue-green switch
    /// (`100`/`0`, then `0`/`100`). The weights add up to 100. Not sticky: pin testers with
    /// an earlier rule that matches a cookie or header.
    Split(Vec<SplitTarget>),
}

/// One share of a `split`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SplitTarget {
    /// The percentage of the rule's requests this action answers, 0 to 100; 0 keeps a
    /// version configured but sends it nothing.
    pub weight: u32,
    /// What answers them: any action but another split.
    pub action: Action,
}

fn default_redirect_status() -> u16 {
    302
}
/// The status of `deny` and of a refused access list, when none is given.
pub fn default_deny_status() -> u16 {
    403
}
/// The Content-Type of a `return` action's body, when none is given.
pub fn default_return_type() -> String {
    "text/plain; charset=utf-8".into()
}

/// An HTTP backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProxyTarget {
    /// The name of an `http` pool in `pools`.
    pub pool: String,
    /// The Host header sent to the backend; by default the client's is passed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Replaces the part of the path the rule's `match.prefix` (or `match.path`) matched, as nginx's `proxy_pass http://backend/;` in `location /api/` and NGINX VirtualServer's `rewritePath`: with `prefix: /api/` and `rewrite_path: /`, `/api/items?page=2` reaches the backend as `/items?page=2`. The backend gets the cleaned path, percent-encoded again (a `;` the client sent stays `%3B`); a joined path with a `.` or `..` segment (`prefix: /api` and `/api../x`) is answered 400. Needs `match.prefix` or `match.path`; give prefixes a trailing `/`, as `prefix: /api` also takes `/apix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite_path: Option<String>,
    /// Request header changes for the backend (nginx's `proxy_set_header`; NGINX VirtualServer's `requestHeaders` sets only), after the forwarding headers are set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_headers: Option<RequestHeaders>,
    /// `Upgrade` protocols tunnelled to the backend (case-insensitive). Only WebSocket by default: once tunnelled, the connection's bytes bypass every rule, so an `Upgrade: h2c` would reach paths a `deny` rule guards.
    #[serde(
        default = "default_upgrades",
        skip_serializing_if = "is_default_upgrades"
    )]
    pub upgrades: Vec<String>,
}

impl ProxyTarget {
    /// A proxy target with the defaults the parser gives.
    pub fn new(pool: impl Into<String>) -> ProxyTarget {
        ProxyTarget {
            pool: pool.into(),
            host: None,
            rewrite_path: None,
            request_headers: None,
            upgrades: default_upgrades(),
        }
    }
}

fn default_upgrades() -> Vec<String> {
    vec!["websocket".into()]
}

fn is_default_upgrades(v: &[String]) -> bool {
    v == default_upgrades().as_slice()
}

/// A FastCGI, uwsgi or SCGI backend, and how the CGI environment is built for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CgiTarget {
    /// The name of a pool in `pools`, of the matching protocol.
    pub pool: String,
    /// DOCUMENT_ROOT as the backend sees it (its container may mount the code elsewhere). Default: the virtual server's root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document_root: Option<String>,
    /// Script for paths ending in `/` (FastCGI), e.g. `index.php`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    /// Split `/app.php/extra` into SCRIPT_NAME `/app.php` and PATH_INFO `/extra` at the first path component ending in `.php` (FastCGI; PHP-style). When this machine can see the document root, a script that does not exist is answered 404 without asking the backend.
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub split_path_info: bool,
    /// Extra parameters, added to or overriding the CGI ones.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
}

/// Response header changes, applied in the order remove, set, add. Framing fields (Content-Length, Transfer-Encoding, Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Upgrade) are refused: the server writes them itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HeaderOps {
    /// Header names to remove.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
    /// Headers to set, replacing any value present.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, String>,
    /// Headers to add, keeping values present.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub add: BTreeMap<String, String>,
}

/// Request header changes for a backend, applied in the order remove, set, add, after Skiff has set Host and the forwarding headers (so `set` may replace `X-Forwarded-Proto`, `X-Forwarded-Host` or `X-Real-IP`). Values may name variables: `$host`, `$scheme`, `$request_uri`, `$uri`, `$args`, `$remote_addr` (the client, as `trusted_proxies` find it), `$1`..`$9` (the rule's regex captures); `$$` is a dollar sign; `$scheme` is how the client reached Skiff. Framing fields and `Host` (see `host`) are refused, `X-Forwarded-For` may only be removed (Skiff appends the client to it), single-valued forwarding fields (X-Forwarded-Proto, -Host, -Port, -Prefix, X-Real-IP) may be set but not added, and a name may appear once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestHeaders {
    /// Header names to remove, e.g. `Cookie`, so a backend never sees the site's cookies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
    /// Headers to set, replacing any value the client sent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, String>,
    /// Headers to add, keeping values the client sent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub add: BTreeMap<String, String>,
}

/// Browser caching policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CachePolicy {
    /// Seconds a response may be reused: `Cache-Control: max-age=N` and a matching `Expires`. At most 315360000 (ten years).
    pub max_age: u64,
    /// Adds `public` (shared caches may store it) or `private`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility: Option<CacheVisibility>,
    /// Adds `immutable`, for fingerprinted assets.
    #[serde(default, skip_serializing_if = "is_false")]
    pub immutable: bool,
}

/// Who may store a cached response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CacheVisibility {
    Public,
    Private,
}

/// CORS policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cors {
    /// Allowed origins (`https://app.example.com`), or `*` for any.
    pub allow_origins: Vec<String>,
    /// Methods allowed in preflight answers.
    #[serde(default = "default_cors_methods")]
    pub allow_methods: Vec<String>,
    /// Request headers allowed in preflight answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_headers: Vec<String>,
    /// Response headers exposed to scripts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expose_headers: Vec<String>,
    /// Send `Access-Control-Allow-Credentials: true` (not allowed with `*`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_credentials: bool,
    /// Seconds a preflight answer may be cached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<u64>,
}

/// The methods CORS allows, when none are given.
pub fn default_cors_methods() -> Vec<String> {
    vec!["GET".into(), "HEAD".into(), "POST".into()]
}

/// Basic authentication.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BasicAuth {
    /// The realm shown by browsers.
    #[serde(default = "default_realm")]
    pub realm: String,
    /// Path of an htpasswd file with bcrypt (`$2y$`) entries, of cost 14 at most (`htpasswd -B -C 12`). A user named on more than one line is refused like any bad line (the start fails; on a reload, or for an optional file, the user is left out until one line is left): which password is theirs would be unclear. Checks run on one thread per CPU; when too many wait, a request is answered 503 with `Retry-After`, not 401.
    pub htpasswd: String,
    /// A missing htpasswd file is not an error: every request is denied (401) until it
    /// exists (a Kubernetes Secret created after the pod, through an optional volume),
    /// but where its folder does not exist either and the rule had its users from another
    /// file (a pod that cannot mount a Secret renamed since it started) it keeps them.
    /// Otherwise a missing file fails the start or the reload. Either way the file is
    /// watched and a change reloads the configuration; a file without users denies
    /// everyone, and on a reload a refused line only leaves its user out (logged).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

fn default_realm() -> String {
    "Restricted".into()
}

/// Address lists. A client in `deny` is refused; if `allow` is not empty, a client must be in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AccessList {
    /// CIDRs allowed, e.g. `10.0.0.0/8`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// CIDRs denied; checked first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// The status for refused clients (403 by default).
    #[serde(default = "default_deny_status")]
    pub status: u16,
}

/// A token bucket per client address: `burst` requests at once, refilled at `requests_per_second`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Sustained rate.
    pub requests_per_second: f64,
    /// Bucket size: requests allowed at once.
    pub burst: u32,
}
