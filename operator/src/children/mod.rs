//! The objects a VirtualServer owns, built as typed values from its spec and rendered
//! config: the config ConfigMap, the edge Deployment, its Services, HPA,
//! PodDisruptionBudget and NetworkPolicy, the workloads of `placement: pool` backends (with
//! theirs), and the cert-manager Certificate and Prometheus ServiceMonitor. Building them calls no API; the controller
//! server-side applies them with one field manager.

mod autoscaler;
mod edge;
mod names;
mod network_policy;
mod pool;
mod third_party;

#[cfg(test)]
mod tests;

use crate::crd::VirtualServer;
use crate::render::Rendered;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};
use std::collections::BTreeMap;

pub use autoscaler::{autoscaler, pool_autoscaler};
pub use edge::{config_map, deployment, disruption_budget, metrics_service, service};
pub use names::collisions;
pub use network_policy::{
    edge_network_policy, parse_labels, pool_network_policy, NetworkPolicyConfig,
};
pub use pool::{pool_deployment, pool_service, pooled};
pub use third_party::{
    certificate, service_monitor, Certificate, ClusterIssuer, Issuer, ServiceMonitor,
};

/// The operator's default edge image.
pub const DEFAULT_IMAGE: &str = "localhost/skiff/skiff:dev";

/// The label every child carries, naming the operator as its manager; the controller
/// watches owned objects by it.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "skiff-operator");
/// The label of a `placement: pool` backend's objects, holding the pool's name.
pub const POOL_LABEL: &str = "skiff.dev/pool";

/// Every child of one VirtualServer, as it should be.
#[derive(Clone, Debug, PartialEq)]
pub struct Children {
    pub config_map: ConfigMap,
    pub deployment: Deployment,
    pub service: Service,
    /// Present when `spec.autoscaling` is set; otherwise an existing HPA is deleted.
    pub autoscaler: Option<HorizontalPodAutoscaler>,
    pub disruption_budget: PodDisruptionBudget,
    /// Present when the operator runs with network policies; otherwise an existing one
    /// is deleted.
    pub network_policy: Option<NetworkPolicy>,
    /// The workloads of the `placement: pool` backends that run an image.
    pub pools: Vec<PoolChildren>,
    /// The headless Service Prometheus scrapes, applied always.
    pub metrics_service: Service,
    /// Applied only when the Prometheus Operator's CRD exists.
    pub service_monitor: ServiceMonitor,
    /// One per certificate of `spec.tls` that an issuer provides (`tls.issuerRef`, or an
    /// entry's), in the order of [`VirtualServer::certificate_groups`]; applied only when
    /// cert-manager's CRDs exist.
    pub certificates: Vec<Certificate>,
}

/// The objects of one `placement: pool` backend.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolChildren {
    /// The name of the Deployment, Service and HPA.
    pub name: String,
    pub deployment: Deployment,
    pub service: Service,
    /// Present when the pool autoscales; otherwise an existing HPA is deleted.
    pub autoscaler: Option<HorizontalPodAutoscaler>,
    /// Present when the operator runs with network policies; otherwise deleted.
    pub network_policy: Option<NetworkPolicy>,
}

impl Children {
    /// Builds every child from the spec (with its image defaulted) and the rendered config;
    /// NetworkPolicies only with `network` (the operator's settings).
    pub fn new(
        vs: &VirtualServer,
        rendered: &Rendered,
        network: Option<&NetworkPolicyConfig>,
    ) -> Children {
        Children {
            config_map: config_map(vs, rendered),
            deployment: with_restart_hash(deployment(vs), &rendered.restart_hash),
            service: service(vs),
            autoscaler: autoscaler(vs),
            disruption_budget: disruption_budget(vs),
            network_policy: network.map(|n| edge_network_policy(vs, n)),
            pools: pooled(vs)
                .map(|p| PoolChildren {
                    name: crate::render::pool_workload_name(&vs.name_any(), &p.name),
                    deployment: pool_deployment(vs, p),
                    service: pool_service(vs, p),
                    autoscaler: pool_autoscaler(vs, p),
                    network_policy: network.map(|_| pool_network_policy(vs, p)),
                })
                .collect(),
            metrics_service: metrics_service(vs),
            service_monitor: service_monitor(vs),
            certificates: vs
                .certificate_groups()
                .iter()
                .filter_map(|g| certificate(vs, g))
                .collect(),
        }
    }
}

impl Children {
    /// Adds `extra` to the ServiceMonitor's labels (a Prometheus's selector), never in
    /// place of one of its own: the operator watches its children by those.
    pub fn label_service_monitor(&mut self, extra: &BTreeMap<String, String>) {
        let labels = self
            .service_monitor
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new);
        for (k, v) in extra {
            labels.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

/// The pod template's annotation that rolls the pods when a field only a restart applies
/// (listeners, threads, cache, limits, access log) changes: a reload refuses those.
/// Derived from the config alone, never from a Secret, so a renewal rolls nothing.
pub const RESTART_HASH_ANNOTATION: &str = "skiff.dev/restart-config";

fn with_restart_hash(mut d: Deployment, hash: &str) -> Deployment {
    if let Some(spec) = d.spec.as_mut() {
        spec.template
            .metadata
            .get_or_insert_with(Default::default)
            .annotations
            .get_or_insert_with(Default::default)
            .insert(RESTART_HASH_ANNOTATION.into(), hash.into());
    }
    d
}

/// A label map from `(key, value)` pairs.
fn labels<const N: usize>(pairs: [(&str, &str); N]) -> BTreeMap<String, String> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Labels on every child, and the edge pods' selector.
pub fn selector_labels(vs: &VirtualServer) -> BTreeMap<String, String> {
    labels([
        ("app.kubernetes.io/name", "skiff"),
        ("app.kubernetes.io/instance", &vs.name_any()),
    ])
}

/// `key=value,...` for the scale subresource's status.selector.
pub fn selector_string(vs: &VirtualServer) -> String {
    format!(
        "app.kubernetes.io/name=skiff,app.kubernetes.io/instance={}",
        vs.name_any()
    )
}

/// Name, namespace, the selector and managed-by labels, and the controller owner reference.
fn metadata(vs: &VirtualServer, name: &str) -> ObjectMeta {
    let owner = vs
        .controller_owner_ref(&())
        .expect("a VirtualServer from the API has a uid");
    let mut labels = selector_labels(vs);
    labels.insert(MANAGED_BY.0.into(), MANAGED_BY.1.into());
    ObjectMeta {
        name: Some(name.into()),
        namespace: vs.namespace(),
        labels: Some(labels),
        owner_references: Some(vec![owner]),
        ..ObjectMeta::default()
    }
}

/// [`metadata`] with one more label.
fn metadata_labelled(vs: &VirtualServer, name: &str, key: &str, value: &str) -> ObjectMeta {
    let mut meta = metadata(vs, name);
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .insert(key.into(), value.into());
    meta
}
