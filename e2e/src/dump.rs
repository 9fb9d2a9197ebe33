//! What a failing test leaves behind: the namespace's objects (VirtualServers and
//! cert-manager's Certificates and CertificateRequests too), its Events in time order,
//! and every container's log (the previous instance's too, after a restart). Printed to
//! stderr, and written to the cluster's state directory, in dumps/NAMESPACE.txt.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Service};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, LogParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use std::fmt::Write;

pub async fn namespace(client: &Client, ns: &str) {
    let mut out = String::new();
    let _ = writeln!(out, "======== e2e dump of namespace {ns} ========");
    objects::<Deployment>(client, ns, &mut out).await;
    objects::<ReplicaSet>(client, ns, &mut out).await;
    objects::<Pod>(client, ns, &mut out).await;
    objects::<Service>(client, ns, &mut out).await;
    objects::<ConfigMap>(client, ns, &mut out).await;
    objects::<HorizontalPodAutoscaler>(client, ns, &mut out).await;
    for (group, version, kind) in [
        ("skiff.dev", "v1alpha1", "VirtualServer"),
        ("cert-manager.io", "v1", "Certificate"),
        ("cert-manager.io", "v1", "CertificateRequest"),
    ] {
        custom_objects(
            client,
            ns,
            &GroupVersionKind::gvk(group, version, kind),
            &mut out,
        )
        .await;
    }
    events(client, ns, &mut out).await;
    logs(client, ns, &mut out).await;
    eprintln!("{out}");
    let dir = crate::state_dir().join("dumps");
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join(format!("{ns}.txt")), &out);
    }
}

async fn objects<K>(client: &Client, ns: &str, out: &mut String)
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + DeserializeOwned
        + serde::Serialize,
    <K as Resource>::DynamicType: Default,
{
    let kind = K::kind(&Default::default()).to_string();
    match Api::<K>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
    {
        Ok(list) => {
            for mut item in list.items {
                item.meta_mut().managed_fields = None;
                let yaml = serde_json::to_string_pretty(&item).unwrap_or_default();
                let _ = writeln!(out, "---- {kind}/{}\n{yaml}", item.name_any());
            }
        }
        Err(e) => {
            let _ = writeln!(out, "---- {kind}: cannot list: {e}");
        }
    }
}

/// Objects of a custom resource, when its CRD is installed.
async fn custom_objects(client: &Client, ns: &str, gvk: &GroupVersionKind, out: &mut String) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk(gvk));
    match api.list(&ListParams::default()).await {
        Ok(list) => {
            for mut item in list.items {
                item.metadata.managed_fields = None;
                let yaml = serde_json::to_string_pretty(&item).unwrap_or_default();
                let _ = writeln!(out, "---- {}/{}\n{yaml}", gvk.kind, item.name_any());
            }
        }
        Err(e) => {
            let _ = writeln!(out, "---- {}: cannot list: {e}", gvk.kind);
        }
    }
}

async fn events(client: &Client, ns: &str, out: &mut String) {
    let _ = writeln!(out, "---- Events");
    let Ok(list) = Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
    else {
        return;
    };
    let mut events = list.items;
    events.sort_by_key(|e| {
        e.last_timestamp
            .clone()
            .or(e.first_timestamp.clone())
            .map(|t| t.0)
    });
    for e in events {
        let o = &e.involved_object;
        let _ = writeln!(
            out,
            "{} {} {}/{} {}: {}",
            e.last_timestamp
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
            e.type_.unwrap_or_default(),
            o.kind.clone().unwrap_or_default(),
            o.name.clone().unwrap_or_default(),
            e.reason.unwrap_or_default(),
            e.message.unwrap_or_default()
        );
    }
}

async fn logs(client: &Client, ns: &str, out: &mut String) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let Ok(list) = pods.list(&ListParams::default()).await else {
        return;
    };
    for pod in list.items {
        let name = pod.name_any();
        let spec = pod.spec.unwrap_or_default();
        let containers = spec
            .init_containers
            .unwrap_or_default()
            .into_iter()
            .chain(spec.containers);
        for c in containers {
            for previous in [true, false] {
                let params = LogParams {
                    container: Some(c.name.clone()),
                    previous,
                    tail_lines: Some(200),
                    ..LogParams::default()
                };
                if let Ok(text) = pods.logs(&name, &params).await {
                    let which = if previous { " (previous)" } else { "" };
                    let _ = writeln!(out, "---- logs {name}/{}{which}\n{text}", c.name);
                }
            }
        }
    }
}
