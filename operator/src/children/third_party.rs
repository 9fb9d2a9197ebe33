//! Objects of other projects' CRDs, typed here because k8s-openapi has no types for them:
//! a cert-manager Certificate and a Prometheus Operator ServiceMonitor. Only the fields the
//! operator writes or reads are modelled; the rest of what the apiserver returns is ignored.

use super::{labels, metadata};
use crate::crd::VirtualServer;
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
}

/// The Secret holding the hosts' certificate: the one named, or the one cert-manager fills.
pub fn tls_secret_name(vs: &VirtualServer) -> String {
    vs.spec
        .tls
        .as_ref()
        .and_then(|t| t.secret_name.clone())
        .unwrap_or_else(|| format!("{}-tls", vs.name_any()))
}

/// A cert-manager Certificate for every host, from the named issuer.
pub fn certificate(vs: &VirtualServer) -> Certificate {
    let issuer = vs.spec.tls.as_ref().and_then(|t| t.issuer_ref.as_ref());
    Certificate {
        metadata: metadata(vs, &vs.name_any()),
        spec: CertificateSpec {
            secret_name: tls_secret_name(vs),
            dns_names: vs.spec.hosts.clone(),
            issuer_ref: IssuerReference {
                name: issuer.map(|i| i.name.clone()).unwrap_or_default(),
                kind: Some(issuer.map_or("Issuer", |i| i.kind.as_str()).into()),
                group: Some("cert-manager.io".into()),
            },
        },
        status: None,
    }
}

/// A ServiceMonitor scraping the edge pods through [`super::metrics_service`].
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
            }],
        },
    }
}
