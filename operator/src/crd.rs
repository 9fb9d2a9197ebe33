//! The `VirtualServer` custom resource (skiff.dev/v1alpha1): its spec, next to its status.
//! `crdgen` writes the CRD from these types into crds/virtualserver.yaml.

use k8s_openapi::api::core::v1::ResourceRequirements;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A static site on an autoscaled farm of Skiff edge servers, with rules that route some
/// paths to FastCGI, uWSGI, SCGI or HTTP backend pools.
// clippy reads the repeated `type_ = ...` of the printcolumns as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "skiff.dev",
    version = "v1alpha1",
    kind = "VirtualServer",
    plural = "virtualservers",
    shortname = "skiffvs",
    category = "skiff",
    namespaced,
    status = "VirtualServerStatus",
    doc = "A static site served by an autoscaled farm of Skiff edge servers",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Hosts", type_ = "string", json_path = ".spec.hosts"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        json_path = ".status.readyReplicas"
    ),
    printcolumn(name = "Config", type_ = "string", json_path = ".status.configHash"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualServerSpec {
    /// Host names this site answers: exact (`www.example.com`) or a leading wildcard
    /// (`*.example.com`). Requests for other hosts get the first host's site too.
    #[schemars(length(min = 1, max = 64))]
    pub hosts: Vec<String>,
    /// The static files to serve: a read-only volume, or an OCI image holding them.
    pub content: Content,
    /// Ordered rules; the first whose match fits a request handles it. Requests no rule
    /// matches are served from the content.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    // Bounded so the apiserver's CEL cost estimate for the per-rule checks fits its budget.
    #[schemars(length(max = 64))]
    pub rules: Vec<Rule>,
    /// Backend pools that rules route to by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub pools: Vec<Pool>,
    /// Edge replicas when autoscaling is off (and the starting count when it is on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
    /// Horizontal autoscaling of the edge farm on CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<Autoscaling>,
    /// CPU and memory for each edge pod. Requests are needed for CPU autoscaling; the
    /// default asks for 100m CPU and 64Mi memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// The in-memory I/O cache of each edge pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<Cache>,
    /// On-the-fly compression of text responses (each file version compressed once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<Compression>,
    /// Access log format on the pods' stdout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_format: Option<LogFormat>,
    /// The Service in front of the edge pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServicePorts>,
    /// TLS: a Secret holding the certificate, or a cert-manager issuer to get one from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Tls>,
    /// The skiff image for the edge pods; the operator's default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// Where the site's files come from. Exactly one of the fields is set.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "[has(self.configMap), has(self.persistentVolumeClaim), has(self.image)].exists_one(x, x)",
    "message": "content needs exactly one of configMap, persistentVolumeClaim or image"
}]))]
pub struct Content {
    /// A ConfigMap whose keys are the files (small sites).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<String>,
    /// A PersistentVolumeClaim holding the files, mounted read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<String>,
    /// An OCI image holding the files; an init container copies them into an emptyDir.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ContentImage>,
}

/// Site files shipped in an image.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContentImage {
    /// The image reference.
    pub reference: String,
    /// The folder inside the image that holds the site.
    #[serde(default = "default_content_path")]
    pub path: String,
}

fn default_content_path() -> String {
    "/site".into()
}

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
    /// Response headers to set, add or remove.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<HeaderChanges>,
    /// Cache-Control for the responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CachePolicy>,
    /// CORS: answers preflights and adds Access-Control-* headers.
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
}

/// The handler. Exactly one field is set.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "[has(self.static), has(self.redirect), has(self.respond), has(self.deny), has(self.proxy), has(self.fastcgi), has(self.uwsgi), has(self.scgi)].exists_one(x, x)",
    "message": "an action needs exactly one of static, redirect, respond, deny, proxy, fastcgi, uwsgi or scgi"
}]))]
pub struct RuleAction {
    /// Serve files from the content.
    #[serde(rename = "static", default, skip_serializing_if = "Option::is_none")]
    pub static_files: Option<Empty>,
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

/// No settings.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Empty {}

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
pub struct PoolRef {
    /// The pool's name in `spec.pools`.
    pub pool: String,
    /// Host header sent to the backend (the client's by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
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

/// Response header changes.
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

/// A backend pool and, when an image is given, the workload that runs it.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.image) || has(self.endpoints)", "message": "a pool needs an image to run, or endpoints to reach"},
    {"rule": "!has(self.socket) || self.placement == 'sidecar'", "message": "a unix socket only works with placement: sidecar"}
]))]
pub struct Pool {
    /// The name rules use.
    #[schemars(
        length(min = 1, max = 40),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: String,
    /// The wire protocol.
    pub protocol: PoolProtocol,
    /// The backend image (php-fpm, uWSGI...); omit it to reach existing `endpoints`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Command for the backend container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Arguments for the backend container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment of the backend container.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The TCP port the backend listens on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u16>,
    /// A unix socket file name in the shared emptyDir (sidecar placement only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<String>,
    /// `sidecar`: in every edge pod; `pool`: its own Deployment, headless Service and HPA.
    #[serde(default)]
    pub placement: Placement,
    /// Existing endpoints (`host:port`, `unix:/path`) when no image is run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<String>,
    /// CPU and memory of the backend container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Autoscaling of a `pool` placement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<Autoscaling>,
}

/// Backend wire protocols.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PoolProtocol {
    Fastcgi,
    Uwsgi,
    Scgi,
    Http,
}

/// Where a pool's backend runs.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// In each edge pod, over a unix socket or localhost.
    Sidecar,
    /// In its own autoscaled Deployment behind a headless Service.
    #[default]
    Pool,
}

/// HorizontalPodAutoscaler settings.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.minReplicas <= self.maxReplicas", "message": "minReplicas must not exceed maxReplicas"}
]))]
pub struct Autoscaling {
    /// Lowest replica count.
    #[schemars(range(min = 1))]
    pub min_replicas: i32,
    /// Highest replica count.
    #[schemars(range(min = 1))]
    pub max_replicas: i32,
    /// Average CPU utilization to aim for, in percent of the request.
    #[serde(default = "default_cpu_target")]
    #[schemars(range(min = 1, max = 100))]
    pub target_cpu_utilization: i32,
}

fn default_cpu_target() -> i32 {
    70
}

/// Response compression.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Compression {
    /// Codings offered, best first among equals: `br`, `zstd`, `gzip` (all three by default).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 3))]
    pub encodings: Vec<Coding>,
    /// Bodies smaller than this many bytes go uncompressed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_size: Option<u64>,
    /// Media types compressed, exact (`application/json`) or by type (`text/*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub types: Vec<String>,
}

/// A content coding.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Coding {
    Br,
    Zstd,
    Gzip,
}

/// I/O cache sizes.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cache {
    /// Total bytes held in memory per pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Largest file held in memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_file_size: Option<u64>,
}

/// Access log formats.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Combined,
    Json,
    Off,
}

/// The Service in front of the edge pods.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServicePorts {
    /// ClusterIP, NodePort or LoadBalancer.
    #[serde(default = "default_service_type", rename = "type")]
    #[schemars(regex(pattern = "^(ClusterIP|NodePort|LoadBalancer)$"))]
    pub type_: String,
    /// The HTTP port.
    #[serde(default = "default_http_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
}

fn default_service_type() -> String {
    "ClusterIP".into()
}

fn default_http_port() -> u16 {
    80
}

/// TLS for the hosts. Exactly one field is set.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.secretName) != has(self.issuerRef)",
    "message": "tls needs exactly one of secretName or issuerRef"
}]))]
pub struct Tls {
    /// A kubernetes.io/tls Secret in this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
    /// A cert-manager Issuer or ClusterIssuer to request a Certificate from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer_ref: Option<IssuerRef>,
}

/// A cert-manager issuer.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct IssuerRef {
    /// The issuer's name.
    pub name: String,
    /// `Issuer` or `ClusterIssuer`.
    #[serde(default = "default_issuer_kind")]
    pub kind: String,
}

fn default_issuer_kind() -> String {
    "Issuer".into()
}

/// What the operator last observed and did.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualServerStatus {
    /// The generation these conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Accepted, ResolvedRefs, Ready, ConfigLive, Monitored and CertificateReady.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Edge pods in the Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Edge pods ready to serve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// The label selector of the edge pods (for the scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// The Service's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Hash of the server config the pods were given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    /// Hash of the config every ready edge pod reports serving (read back from each pod's
    /// admin `/config-hash`); equal to `configHash` once a change has been hot-reloaded
    /// everywhere. The ConfigLive condition says how many pods are there yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_config_hash: Option<String>,
}

/// A status condition, shaped like metav1.Condition.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Accepted, ResolvedRefs, Ready, ConfigLive, Monitored or CertificateReady.
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    pub status: String,
    /// A CamelCase reason.
    pub reason: String,
    /// Details for people.
    pub message: String,
    /// The generation the condition was computed from.
    pub observed_generation: Option<i64>,
    /// When the status last changed (RFC 3339).
    pub last_transition_time: String,
}

fn default_true() -> bool {
    true
}
