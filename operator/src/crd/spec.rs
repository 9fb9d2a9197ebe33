//! The spec's top level: hosts, content, pools, scaling and the edge pods' settings, with
//! the cross-field rules of the whole spec. The rules sit in `rules.rs`, TLS in `tls.rs`,
//! the status in `status.rs`.

use super::rules::Rule;
use super::slo::Slo;
use super::status::VirtualServerStatus;
use super::tls::Tls;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior;
use k8s_openapi::api::core::v1::ResourceRequirements;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Edge replicas when `replicas` is not set and autoscaling is off.
pub const DEFAULT_REPLICAS: i32 = 2;

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
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.tls) || !has(self.tls.certificates) || self.tls.certificates.all(c, c.hosts.all(h, h in self.hosts))",
        "message": "every host in tls.certificates must be one of spec.hosts"
    },
    {
        "rule": "!has(self.tls) || (has(self.tls.port) ? self.tls.port : 443) != (has(self.service) && has(self.service.port) ? self.service.port : 80)",
        "message": "tls.port must differ from service.port"
    },
    {
        "rule": "has(self.tls) || !has(self.rules) || self.rules.all(r, !has(r.httpsRedirect) || !r.httpsRedirect)",
        "message": "httpsRedirect: true needs spec.tls"
    },
    {
        "rule": "!has(self.errorPages) || self.errorPages.all(code, code.matches('^[45][0-9][0-9]$'))",
        "message": "errorPages keys are status codes from 400 to 599"
    },
    {
        "rule": "!has(self.useForwardedHeaders) || !self.useForwardedHeaders || (has(self.trustedProxies) && size(self.trustedProxies) > 0)",
        "message": "useForwardedHeaders needs spec.trustedProxies, the proxies whose word is taken"
    }
]))]
pub struct VirtualServerSpec {
    /// Host names this site answers: exact (`www.example.com`) or a leading wildcard
    /// (`*.example.com`). Requests for other hosts get the first host's site too.
    #[schemars(length(min = 1, max = 64), inner(length(min = 1, max = 253)))]
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
    /// Edge replicas when autoscaling is off (and the starting count when it is on). At most
    /// 1000, as the autoscaler's bounds: a typo should not start ten thousand pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000))]
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
    /// Pages of the content sent as the body of an error, by status code (nginx's
    /// `error_page`): `{"404": "/404.html"}`. The status stays the error's; a page that
    /// is missing leaves the plain error.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 32))]
    pub error_pages: BTreeMap<String, String>,
    /// An HTML listing for folders without an index file (a downloads volume).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub listing: bool,
    /// Access log format on the pods' stdout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_format: Option<LogFormat>,
    /// Proxies in front of the edge pods (CIDRs or addresses of a cloud load balancer or an
    /// ingress controller; not the whole pod network) whose X-Forwarded-For is believed when finding the client's
    /// address, for address lists, rate limits and X-Real-IP (NGINX Ingress's
    /// `proxy-real-ip-cidr`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub trusted_proxies: Vec<String>,
    /// Pass on to HTTP backends the X-Forwarded-Proto and -Port that `trustedProxies` send,
    /// instead of Skiff's own (for a balancer that ends TLS: backends then see `https`);
    /// only for one that sets both, replacing a client's.
    /// X-Forwarded-Host, Forwarded and the like are never taken from a proxy.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub use_forwarded_headers: bool,
    /// The Service in front of the edge pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServicePorts>,
    /// HTTPS: the certificate (a Secret, or a cert-manager issuer to get one from), per-host
    /// certificates, the redirect from plain HTTP, HSTS and the Service's HTTPS port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Tls>,
    /// The skiff image for the edge pods; the operator's default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Service level objectives (availability and latency), which the operator exports
    /// for the SLO recording rules, alerts and dashboards; defaults when unset (99.9 % not
    /// 5xx, 99 % under 0.25 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<Slo>,
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
    /// Worker processes in each backend pod (php-fpm's `pm.max_children`, uWSGI's
    /// `--processes`): the capacity of the busy ratio pools scale on. When unset, read from
    /// uWSGI's `--processes`, `-p` or `--workers` in `args`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub workers: Option<u32>,
    /// Autoscaling of a `pool` placement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<Autoscaling>,
}

impl Pool {
    /// `workers`, or the process count in a uWSGI pool's `args`.
    pub fn known_workers(&self) -> Option<u32> {
        if self.workers.is_some() || self.protocol != PoolProtocol::Uwsgi {
            return self.workers;
        }
        let mut args = self.args.iter();
        while let Some(arg) = args.next() {
            for flag in ["--processes", "--workers"] {
                if let Some(n) = arg.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
                    return n.parse().ok();
                }
            }
            if ["--processes", "--workers", "-p"].contains(&arg.as_str()) {
                return args.next()?.parse().ok();
            }
        }
        None
    }
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

/// HorizontalPodAutoscaler settings. With no target named, CPU at 70 %; a pool whose
/// `workers` are known scales on its busy ratio (0.7) unless told otherwise.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.minReplicas <= self.maxReplicas", "message": "minReplicas must not exceed maxReplicas"}
]))]
pub struct Autoscaling {
    /// Lowest replica count.
    #[schemars(range(min = 1, max = 1000))]
    pub min_replicas: i32,
    /// Highest replica count.
    #[schemars(range(min = 1, max = 1000))]
    pub max_replicas: i32,
    /// Average CPU utilization to aim for, in percent of the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub target_cpu_utilization: Option<i32>,
    /// Busy workers over workers to aim for: a pool's requests in flight from every edge
    /// pod over its ready pods times `workers` (prometheus-adapter's external metrics
    /// `skiff_pool_busy_ratio`, and `skiff_sidecar_busy_ratio` where each edge pod has its
    /// own workers). On a pool, its own; on the edge farm, that of each sidecar pool whose
    /// workers are known. 0.7 when unset and the workers are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.05, max = 1.0))]
    pub target_busy_ratio: Option<f64>,
    /// Edge farm only: requests per second per edge pod to aim for (prometheus-adapter's
    /// custom metric `skiff_http_requests_per_second`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub target_requests_per_second: Option<u32>,
    /// The HPA's scaling policies and stabilization windows (Kubernetes' defaults when
    /// unset: scale up at once, scale down after 5 minutes of lower demand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<HorizontalPodAutoscalerBehavior>,
}

/// The CPU target when none is named and no other target applies.
pub const DEFAULT_CPU_TARGET: i32 = 70;
/// The busy ratio a pool with known workers aims for when none is named.
pub const DEFAULT_BUSY_RATIO: f64 = 0.7;

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

impl VirtualServerSpec {
    /// The edge farm's replica bounds (min, max): the HPA's, or `replicas` for both.
    pub fn replica_bounds(&self) -> (i32, i32) {
        match &self.autoscaling {
            Some(a) => (a.min_replicas, a.max_replicas),
            None => {
                let n = self.replicas.unwrap_or(DEFAULT_REPLICAS);
                (n, n)
            }
        }
    }
}
