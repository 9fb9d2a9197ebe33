//! What the reconcile reads besides the children it applies: whether the objects the spec
//! refers to exist, and which config the serving edge pods report.

use crate::children;
use crate::crd::VirtualServer;
use crate::live_config::{self, Verdict};
use crate::render;
use crate::Result;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret};
use kube::api::ListParams;
use kube::{Api, Client};

/// Names of referenced objects that do not exist (content and auth Secrets), as the
/// message of `ResolvedRefs=False`; `None` when all exist.
pub(super) async fn missing_refs(
    client: &Client,
    ns: &str,
    vs: &VirtualServer,
) -> Result<Option<String>> {
    let mut missing = vec![];
    if let Some(cm) = &vs.spec.content.config_map {
        if Api::<ConfigMap>::namespaced(client.clone(), ns)
            .get_opt(cm)
            .await?
            .is_none()
        {
            missing.push(format!("ConfigMap {cm}"));
        }
    }
    if let Some(claim) = &vs.spec.content.persistent_volume_claim {
        if Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
            .get_opt(claim)
            .await?
            .is_none()
        {
            missing.push(format!("PersistentVolumeClaim {claim}"));
        }
    }
    for rule in &vs.spec.rules {
        if let Some(auth) = &rule.basic_auth {
            let name = &auth.secret_name;
            if Api::<Secret>::namespaced(client.clone(), ns)
                .get_opt(name)
                .await?
                .is_none()
            {
                missing.push(format!("Secret {name}"));
            }
        }
    }
    Ok((!missing.is_empty()).then(|| format!("not found: {}", missing.join(", "))))
}

/// Which config the serving pods report: hot reloads land when the kubelet refreshes the
/// ConfigMap volume, so this trails the desired hash for up to a minute after a change.
pub(super) async fn live_config(
    client: &Client,
    ns: &str,
    vs: &VirtualServer,
    desired_hash: &str,
) -> Result<Verdict> {
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&children::selector_string(vs)))
        .await?;
    let serving = pods.items.iter().filter(|p| live_config::serving(p));
    let reports =
        futures::future::join_all(serving.map(|p| live_config::served_hash(p, render::ADMIN_PORT)))
            .await;
    Ok(live_config::verdict(desired_hash, &reports))
}
