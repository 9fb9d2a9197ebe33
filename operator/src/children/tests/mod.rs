//! The children a VirtualServer becomes, built without an API server: by theme below.

use super::*;
use crate::render;
use serde_json::{json, Value};

mod names;
mod policies;
mod tls;
mod workloads;

fn vs(spec: Value) -> VirtualServer {
    serde_json::from_value(json!({
        "apiVersion": "skiff.dev/v1alpha1", "kind": "VirtualServer",
        "metadata": { "name": "shop", "namespace": "web", "uid": "0c1e-uid" },
        "spec": spec,
    }))
    .unwrap()
}

fn pod_spec(d: &Deployment) -> Value {
    serde_json::to_value(d.spec.as_ref().unwrap().template.spec.as_ref().unwrap()).unwrap()
}

fn policy_settings() -> NetworkPolicyConfig {
    NetworkPolicyConfig {
        operator_namespace: "skiff-system".into(),
        operator_labels: parse_labels(&[
            "app.kubernetes.io/name=skiff-operator".into(),
            "app.kubernetes.io/instance=skiff".into(),
        ])
        .unwrap(),
        metrics_namespaces: vec!["monitoring".into(), "prometheus".into()],
        metrics_namespace_labels: parse_labels(&["team=observability".into()]).unwrap(),
    }
}
