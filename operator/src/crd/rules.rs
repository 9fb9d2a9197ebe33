//! The routing rules of a VirtualServer: matches, actions and per-rule policies.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One routing rule.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// A name for logs and metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Which requests the rule takes; every condition given must hold.
    #[serde(rename = "match", default)]
    pub matches: RuleMatch,
    /// What happens to the requests the rule takes.
    pub action: RuleAction,
    /// Response headers to set, add or remove on 2xx and 3xx responses, files' and
    /// backends' alike.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<HeaderChanges>,
    /// Cache-Control and Expires for 2xx and 3xx responses; on a backend's, only for a
    /// 200, 203, 204, 206, 301 or 308 without Cache-Control, Expires or Set-Cookie, to a
    /// request without Authorization. `public` beside `basicAuth` is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CachePolicy>,
    /// CORS: answers preflights and adds Access-Control-* headers (in place of a
    /// backend's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cors: Option<Cors>,
    /// HTTP basic authentication against an htpasswd file kept in a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic_auth: Option<BasicAuth>,
    /// Client IP allow and deny lists (CIDRs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
    /// A token-bucket rate limit per client IP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// Bandwidth caps in bytes per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<Bandwidth>,
    /// With `spec.tls`: `true` answers this rule's plain-HTTP requests with a 308 to
    /// HTTPS, `false` serves them over HTTP even when `tls.redirect` is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https_redirect: Option<bool>,
}

/// Conditions on a request.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuleMatch {
    /// The path starts with this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The path is exactly this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The path matches this regular expression; captures are $1, $2... in redirects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// The file extension is one of these (without the dot).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    /// The method is one of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
    /// Request headers that must be present, or equal a value (names in any case).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub headers: Vec<NameValue>,
    /// Cookies that must be present, or equal a value (names case-sensitive), e.g.
    /// `{name: canary, value: always}` to pin testers to a new version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub cookies: Vec<NameValue>,
}

/// A header or cookie condition.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct NameValue {
    /// The name.
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// The exact value; without it, the header or cookie must only be present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub value: Option<String>,
}

/// The handler: exactly one of the handlers, or a `split` among them.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "[has(self.static), has(self.redirect), has(self.respond), has(self.deny), has(self.proxy), has(self.fastcgi), has(self.uwsgi), has(self.scgi), has(self.split)].exists_one(x, x)",
    "message": "an action needs exactly one of static, redirect, respond, deny, proxy, fastcgi, uwsgi, scgi or split"
}, {
    "rule": "!has(self.split) || self.split.map(t, t.weight).sum() == 100",
    "message": "the weights of a split must add up to 100"
}]))]
pub struct RuleAction {
    #[serde(flatten)]
    pub handler: Handler,
    /// Each request to one of these, drawn at random by weight (percentages adding up
    /// to 100): a canary (`90`/`10`) or a blue-green switch (`100`/`0`, then `0`/`100`).
    /// Not sticky: pin testers with an earlier rule matching a cookie or header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 16))]
    pub split: Option<Vec<SplitTarget>>,
}

/// One share of a split.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct SplitTarget {
    /// The percentage of the rule's requests this action answers; 0 sends it none.
    #[schemars(range(min = 0, max = 100))]
    pub weight: u32,
    /// What answers them: one handler, not another split.
    pub action: SplitAction,
}

/// A split target's handler. Exactly one field is set.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "[has(self.static), has(self.redirect), has(self.respond), has(self.deny), has(self.proxy), has(self.fastcgi), has(self.uwsgi), has(self.scgi)].exists_one(x, x)",
    "message": "a split target needs exactly one of static, redirect, respond, deny, proxy, fastcgi, uwsgi or scgi"
}]))]
pub struct SplitAction {
    #[serde(flatten)]
    pub handler: Handler,
}

/// The handlers an action may name.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Handler {
    /// Serve files from the content.
    #[serde(rename = "static", default, skip_serializing_if = "Option::is_none")]
    pub static_files: Option<StaticFiles>,
    /// Redirect; `to` may use $host, $uri, $request_uri and regex captures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect: Option<Redirect>,
    /// Answer with a fixed status and body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub respond: Option<Respond>,
    /// Refuse with 403 (or the given status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny: Option<Deny>,
    /// Reverse-proxy to an HTTP pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<PoolRef>,
    /// Hand the request to a FastCGI pool (PHP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fastcgi: Option<CgiRef>,
    /// Hand the request to a uWSGI pool (Python WSGI, Django).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uwsgi: Option<CgiRef>,
    /// Hand the request to an SCGI pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scgi: Option<CgiRef>,
}

/// Files from the content.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StaticFiles {
    /// A GET or HEAD whose path names no file, or a folder without the trailing `/`, is
    /// tried with `.html` appended, before the folder's redirect and the fallback:
    /// `/about` serves `/about.html` (Next.js and SvelteKit static exports; nginx's
    /// `try_files $uri $uri.html $uri/`). Not for paths ending in `/`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub html_extension: bool,
    /// A file of the content answered to a GET or HEAD for a path that names no file or
    /// folder: a single-page app's shell (`/index.html`), whose script routes the path
    /// (nginx's `try_files $uri $uri/ /index.html`); ending in `/`, that folder's index.
    /// Written as the path on disk, from `/`: no `%`, `?`, `#`, dot segments or hidden
    /// names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

/// A redirect.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Redirect {
    /// Target URL template.
    pub to: String,
    /// 301, 302, 303, 307 or 308.
    #[serde(default = "default_redirect_status")]
    #[schemars(range(min = 300, max = 308))]
    pub status: u16,
}

fn default_redirect_status() -> u16 {
    302
}

/// A fixed answer.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Respond {
    /// The status code.
    #[schemars(range(min = 200, max = 599))]
    pub status: u16,
    /// The body.
    #[serde(default)]
    pub body: String,
}

/// A refusal.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Deny {
    /// The status code (403 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 400, max = 599))]
    pub status: Option<u16>,
}

/// A pool by name, for the HTTP proxy.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolRef {
    /// The pool's name in `spec.pools`.
    pub pool: String,
    /// Host header sent to the backend (the client's by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Replaces what the rule's `match.prefix` (or `match.path`) matched: with `prefix:
    /// /api/` and `rewritePath: /`, `/api/items?page=2` reaches the backend as
    /// `/items?page=2` (NGINX VirtualServer's `rewritePath`). Give prefixes a trailing
    /// `/`: `prefix: /api` also takes `/apix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite_path: Option<String>,
    /// Request header changes for the backend (as NGINX VirtualServer's `requestHeaders`,
    /// which only sets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_headers: Option<RequestHeaderChanges>,
}

/// Request header changes for a backend, in the order remove, set, add, after Skiff has
/// set Host and the forwarding headers. Values may name `$host`, `$scheme`,
/// `$request_uri`, `$uri`, `$args`, `$remote_addr` and `$1`..`$9`; `$$` is a dollar sign.
/// Host, framing fields, setting X-Forwarded-For and adding a single-valued forwarding
/// field (X-Forwarded-Proto and the like: set it) are refused.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RequestHeaderChanges {
    /// Headers to set, replacing any value the client sent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, String>,
    /// Headers to add beside the client's values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub add: BTreeMap<String, String>,
    /// Headers to remove, e.g. `Cookie`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

/// A pool by name, for FastCGI, uWSGI and SCGI.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CgiRef {
    /// The pool's name in `spec.pools`.
    pub pool: String,
    /// DOCUMENT_ROOT and the base of SCRIPT_FILENAME as the backend sees them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document_root: Option<String>,
    /// Script for paths ending in `/` (for example index.php).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    /// Split `/x.php/more` into SCRIPT_NAME and PATH_INFO, as PHP expects (the default,
    /// as in the server config). `false` sends the whole path as PATH_INFO with an empty
    /// SCRIPT_NAME, for FastCGI apps that route by path themselves.
    #[serde(default = "default_true")]
    pub split_path_info: bool,
    /// Extra request parameters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
}

/// Response header changes, in the order remove, set, add. Framing fields (Content-Length,
/// Transfer-Encoding, Connection, Keep-Alive, TE, Trailer, Upgrade) are refused.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct HeaderChanges {
    /// Headers to set, replacing any value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, String>,
    /// Headers to add beside existing values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub add: BTreeMap<String, String>,
    /// Headers to remove.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

/// Cache-Control for matched responses.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CachePolicy {
    /// max-age in seconds.
    pub max_age: u64,
    /// `public` or `private`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility: Option<Visibility>,
    /// Add `immutable`.
    #[serde(default)]
    pub immutable: bool,
}

/// Cache-Control visibility.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    Public,
    Private,
}

/// Cross-origin resource sharing.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!(has(self.allowCredentials) && self.allowCredentials && '*' in self.allowOrigins)",
    "message": "allowCredentials cannot be combined with the * origin"
}]))]
pub struct Cors {
    /// Allowed origins (`https://app.example.com`), or `*` for any.
    #[schemars(length(min = 1, max = 32))]
    pub allow_origins: Vec<String>,
    /// Methods allowed in preflight answers (GET, HEAD and POST by default).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub allow_methods: Vec<String>,
    /// Request headers allowed in preflight answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub allow_headers: Vec<String>,
    /// Response headers exposed to scripts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub expose_headers: Vec<String>,
    /// Send `Access-Control-Allow-Credentials: true`.
    #[serde(default)]
    pub allow_credentials: bool,
    /// Seconds a preflight answer may be cached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<u64>,
}

/// Basic authentication.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BasicAuth {
    /// The realm shown by browsers.
    pub realm: String,
    /// A Secret in this namespace whose `htpasswd` key holds bcrypt entries.
    pub secret_name: String,
}

/// IP lists; deny wins over allow.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Access {
    /// CIDRs allowed; when given, others are refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// CIDRs refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}

/// A rate limit.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateLimit {
    /// Sustained requests per second per client IP.
    pub requests_per_second: f64,
    /// Requests allowed in a burst above the rate.
    #[serde(default)]
    pub burst: u32,
}

/// Bandwidth caps.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bandwidth {
    /// Bytes per second for each connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_connection: Option<u64>,
    /// Bytes per second shared by all connections of a pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
}

fn default_true() -> bool {
    true
}
