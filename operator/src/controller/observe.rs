//! What the reconcile reads besides the children it applies: whether the objects the spec
//! refers to exist, and which config and certificates the serving edge pods report.

use crate::children;
use crate::crd::{ServedCertificate, VirtualServer};
use crate::live_config::{self, Verdict};
use crate::{render, served_certificates, Result};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret};
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

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
            // The volume is optional, so the kubelet says nothing of a missing Secret or
            // key: the rule would deny everyone without a word.
            match Api::<Secret>::namespaced(client.clone(), ns)
                .get_opt(name)
                .await?
            {
                None => missing.push(format!("Secret {name}")),
                Some(s) if !has_key(&s, "htpasswd") => {
                    missing.push(format!("key htpasswd in Secret {name}"))
                }
                Some(_) => {}
            }
        }
    }
    Ok((!missing.is_empty()).then(|| format!("not found: {}", missing.join(", "))))
}

/// Whether a Secret holds `key` (in `data`, or in `stringData` as written).
fn has_key(secret: &Secret, key: &str) -> bool {
    secret.data.as_ref().is_some_and(|d| d.contains_key(key))
        || secret
            .string_data
            .as_ref()
            .is_some_and(|d| d.contains_key(key))
}

/// What the serving edge pods report: which config each serves, and with `spec.tls`
/// which certificates.
pub(super) struct Served {
    pub live: Verdict,
    /// Empty without `spec.tls`, or until the pods answer `/certificates`.
    pub certificates: Vec<ServedCertificate>,
    /// TLS Secrets a pod on the desired config answered without.
    pub unserved_secrets: Vec<String>,
}

/// Asks each serving pod which config it serves (hot reloads land when the kubelet
/// refreshes the ConfigMap volume, so this trails the desired hash for up to a minute after
/// a change) and, with `spec.tls`, which certificates (a renewed Secret lands the same way).
pub(super) async fn served(
    client: &Client,
    ns: &str,
    vs: &VirtualServer,
    desired_hash: &str,
) -> Result<Served> {
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&children::selector_string(vs)))
        .await?;
    let groups = vs.certificate_groups();
    let tls = !groups.is_empty();
    let serving: Vec<&Pod> = pods
        .items
        .iter()
        .filter(|p| live_config::serving(p))
        .collect();
    let ask = |p| served_certificates::hash_then_served(p, render::ADMIN_PORT, tls);
    let reports = futures::future::join_all(serving.into_iter().map(ask)).await;
    let (hashes, certificates): (Vec<_>, Vec<_>) = reports.into_iter().unzip();
    let name = vs.name_any();
    let secrets = groups
        .into_iter()
        .map(|g| (render::vhost_name(&name, g.index), g.secret_name))
        .collect();
    let by_pod: Vec<(bool, _)> = hashes
        .iter()
        .map(|h| h.as_deref() == Some(desired_hash))
        .zip(certificates.iter().cloned())
        .collect();
    Ok(Served {
        live: live_config::verdict(desired_hash, &hashes),
        certificates: served_certificates::summarize(&secrets, &certificates),
        unserved_secrets: served_certificates::unserved(&secrets, &by_pod),
    })
}
