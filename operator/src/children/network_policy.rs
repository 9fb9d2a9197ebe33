//! NetworkPolicies. The edge pods take their data ports (HTTP, and HTTPS with `spec.tls`)
//! from anywhere, but their admin port (`/metrics`, `/config-hash` and `/certificates`,
//! unauthenticated) only from the operator's pods (which read each pod's `/config-hash`
//! and `/certificates`) and from the metrics namespaces the chart names; a
//! `placement: pool` backend takes its port only from its VirtualServer's edge pods.
//! Kubelet probes come from the node, which NetworkPolicies always admit. Only a CNI that
//! enforces NetworkPolicies (Calico, Cilium...) makes them hold.

use super::pool::{backend_port, pool_labels};
use super::{metadata, metadata_labelled, selector_labels, POOL_LABEL};
use crate::crd::{Pool, VirtualServer};
use crate::render;
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use std::collections::BTreeMap;

/// The label every namespace carries with its own name (set by the apiserver).
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Who besides the edge's clients may reach what; from the operator's flags, which the
/// chart sets. Without it (`--network-policy=false`) no NetworkPolicy is applied.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NetworkPolicyConfig {
    /// The operator's own namespace.
    pub operator_namespace: String,
    /// Labels of the operator's pods.
    pub operator_labels: BTreeMap<String, String>,
    /// Namespaces, by name, whose pods may scrape the edge's `/metrics`.
    pub metrics_namespaces: Vec<String>,
    /// Namespaces, by label, whose pods may scrape `/metrics`; empty admits none (an
    /// empty selector would admit every namespace).
    pub metrics_namespace_labels: BTreeMap<String, String>,
}

/// `key=value` items (`a=b,c=d` split on commas) as a label map; empty items are skipped.
pub fn parse_labels(items: &[String]) -> Result<BTreeMap<String, String>, String> {
    items
        .iter()
        .map(|item| item.trim())
        .filter(|item| !item.is_empty())
        .map(|item| match item.split_once('=') {
            Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
            _ => Err(format!("{item:?} is not a label such as key=value")),
        })
        .collect()
}

/// The edge pods' policy: the data ports (8080, and 8443 with `spec.tls`) from anywhere,
/// the admin port from the operator and the metrics namespaces only.
pub fn edge_network_policy(vs: &VirtualServer, config: &NetworkPolicyConfig) -> NetworkPolicy {
    let mut admin_peers = vec![NetworkPolicyPeer {
        // Namespace and pods in one peer: both must hold.
        namespace_selector: Some(match_labels([(
            NAMESPACE_NAME_LABEL.to_string(),
            config.operator_namespace.clone(),
        )])),
        pod_selector: Some(match_labels(config.operator_labels.clone())),
        ..Default::default()
    }];
    admin_peers.extend(
        config
            .metrics_namespaces
            .iter()
            .map(|ns| NetworkPolicyPeer {
                namespace_selector: Some(match_labels([(
                    NAMESPACE_NAME_LABEL.to_string(),
                    ns.clone(),
                )])),
                ..Default::default()
            }),
    );
    if !config.metrics_namespace_labels.is_empty() {
        admin_peers.push(NetworkPolicyPeer {
            namespace_selector: Some(match_labels(config.metrics_namespace_labels.clone())),
            ..Default::default()
        });
    }
    let mut data_ports = vec![tcp(render::HTTP_PORT)];
    if vs.spec.tls.is_some() {
        data_ports.push(tcp(render::HTTPS_PORT));
    }
    NetworkPolicy {
        metadata: metadata(vs, &vs.name_any()),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(match_labels(selector_labels(vs))),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(vec![
                // No `from`: every source, inside the cluster and out.
                NetworkPolicyIngressRule {
                    ports: Some(data_ports),
                    from: None,
                },
                NetworkPolicyIngressRule {
                    ports: Some(vec![tcp(render::ADMIN_PORT)]),
                    from: Some(admin_peers),
                },
            ]),
            ..Default::default()
        }),
    }
}

/// A `placement: pool` backend's policy: its port from its VirtualServer's edge pods only
/// (a `podSelector` alone means pods of the same namespace).
pub fn pool_network_policy(vs: &VirtualServer, p: &Pool) -> NetworkPolicy {
    let name = render::pool_workload_name(&vs.name_any(), &p.name);
    NetworkPolicy {
        metadata: metadata_labelled(vs, &name, POOL_LABEL, &p.name),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(match_labels(pool_labels(vs, &p.name))),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                ports: Some(vec![tcp(backend_port(p))]),
                from: Some(vec![NetworkPolicyPeer {
                    pod_selector: Some(match_labels(selector_labels(vs))),
                    ..Default::default()
                }]),
            }]),
            ..Default::default()
        }),
    }
}

fn match_labels(labels: impl IntoIterator<Item = (String, String)>) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels.into_iter().collect()),
        ..Default::default()
    }
}

/// A pod's port: policies see the container's port (8080), not the Service's (80).
fn tcp(port: u16) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(port.into())),
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}
