//! Objects of other projects' CRDs, typed here because k8s-openapi has no types for them:
//! a cert-manager Certificate (and the Issuer or ClusterIssuer it names, read only) and a
//! Prometheus Operator ServiceMonitor. Only the fields the operator writes or reads are
//! modelled; the rest of what the apiserver returns is ignored.

use super::{labels, metadata};
use crate::crd::{CertificateGroup, VirtualServer};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::{CustomResource, ResourceExt};
use serde::{Deserialize, Serialize};

/// A cert-manager certificate request (cert-manager.io/v1).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "cert-manager.io",
    version = "v1",
    kind = "Certificate",
    namespaced,
    status = "CertificateStatus",
    schema = "disabled",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct CertificateSpec {
    /// The Secret cert-manager writes the key pair into.
    pub secret_name: String,
    /// The names the certificate covers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns_names: Vec<String>,
    /// Who issues it.
    pub issuer_ref: IssuerReference,
}

/// An Issuer or ClusterIssuer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IssuerReference {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// What cert-manager reports about a Certificate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CertificateStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<CertificateCondition>,
}

/// One of a Certificate's conditions.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CertificateCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Certificate {
    /// The `Ready` condition, when cert-manager has written one.
    pub fn ready_condition(&self) -> Option<&CertificateCondition> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
    }
}

/// A Prometheus Operator scrape target (monitoring.coreos.com/v1).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "monitoring.coreos.com",
    version = "v1",
    kind = "ServiceMonitor",
    namespaced,
    schema = "disabled",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitorSpec {
    /// The Services whose endpoints are scraped.
    pub selector: LabelSelector,
    /// How each endpoint is scraped.
    pub endpoints: Vec<MonitorEndpoint>,
}

/// One scraped port.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MonitorEndpoint {
    /// The Service port's name.
    pub port: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// Rewrites of the target's labels before the scrape.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relabelings: Vec<Relabeling>,
}

/// One Prometheus `relabel_config` (the fields the operator writes).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Relabeling {
    pub source_labels: Vec<String>,
    pub target_label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

/// A cert-manager Certificate for one certificate group: its hosts, from its issuer, into
/// the Secret the edge pods mount. `None` for a group whose Secret is the user's.
pub fn certificate(vs: &VirtualServer, group: &CertificateGroup) -> Option<Certificate> {
    let issuer = group.issuer.as_ref()?;
    Some(Certificate {
        metadata: metadata(vs, &group.certificate_name(vs)),
        spec: CertificateSpec {
            secret_name: group.secret_name.clone(),
            dns_names: group.hosts.clone(),
            issuer_ref: IssuerReference {
                name: issuer.name.clone(),
                kind: Some(issuer.kind.clone()),
                group: Some("cert-manager.io".into()),
            },
        },
        status: None,
    })
}

/// A cert-manager Issuer (cert-manager.io/v1), read to tell whether its ACME challenges
/// can be solved for the edge's hosts. Only the solvers' kinds are modelled.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "cert-manager.io",
    version = "v1",
    kind = "Issuer",
    namespaced,
    schema = "disabled",
    derive = "PartialEq"
)]
pub struct IssuerSpec {
    /// Set for an ACME issuer (Let's Encrypt...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acme: Option<AcmeIssuer>,
}

/// A cert-manager ClusterIssuer: an [`IssuerSpec`] for every namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "cert-manager.io",
    version = "v1",
    kind = "ClusterIssuer",
    schema = "disabled",
    derive = "PartialEq"
)]
pub struct ClusterIssuerSpec {
    #[serde(flatten)]
    pub issuer: IssuerSpec,
}

/// An ACME issuer's challenge solvers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct AcmeIssuer {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub solvers: Vec<AcmeSolver>,
}

/// One ACME solver: HTTP-01 or DNS-01 (their settings are not needed here).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct AcmeSolver {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http01: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns01: Option<serde_json::Value>,
}

impl IssuerSpec {
    /// An ACME issuer whose every solver is HTTP-01. cert-manager solves HTTP-01 with a
    /// solver pod behind an Ingress or HTTPRoute of its own, which a Skiff edge serving the
    /// hosts never routes to, so such a Certificate would never be issued.
    pub fn acme_http01_only(&self) -> bool {
        self.acme.as_ref().is_some_and(|acme| {
            !acme.solvers.is_empty()
                && acme
                    .solvers
                    .iter()
                    .all(|s| s.http01.is_some() && s.dns01.is_none())
        })
    }
}

/// A ServiceMonitor scraping the edge pods through [`super::metrics_service`]. Every series
/// gets the target labels `namespace` and `pod` (the Prometheus Operator's) and
/// `virtualserver`, the VirtualServer's name, from the metrics Service's
/// `app.kubernetes.io/instance` label: the label the recording rules, alerts and dashboards
/// (`dashboards/`) group by.
pub fn service_monitor(vs: &VirtualServer) -> ServiceMonitor {
    let match_labels = labels([
        ("app.kubernetes.io/instance", &vs.name_any()),
        ("skiff.dev/metrics", "true"),
    ]);
    ServiceMonitor {
        metadata: metadata(vs, &vs.name_any()),
        spec: ServiceMonitorSpec {
            selector: LabelSelector {
                match_labels: Some(match_labels),
                ..Default::default()
            },
            endpoints: vec![MonitorEndpoint {
                port: "admin".into(),
                path: Some("/metrics".into()),
                interval: Some("30s".into()),
                relabelings: vec![Relabeling {
                    source_labels: vec![
                        "__meta_kubernetes_service_label_app_kubernetes_io_instance".into(),
                    ],
                    target_label: "virtualserver".into(),
                    action: Some("replace".into()),
                }],
            }],
        },
    }
}
