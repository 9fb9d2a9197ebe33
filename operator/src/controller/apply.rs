//! Applying the children: server-side apply with the operator's field manager, deletion of
//! the HPAs, NetworkPolicies and pool workloads the spec (or the operator's settings) no
//! longer asks for.

use super::{key, MANAGER};
use crate::children::{self, Children};
use crate::crd::VirtualServer;
use crate::Result;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::NamespaceResourceScope;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

/// The edge Deployment and Service, and the pools' Deployments, as the apiserver returned
/// them from the apply: their status and cluster IP feed the VirtualServer's status.
pub(super) struct Applied {
    pub deployment: Deployment,
    pub service: Service,
    pub pools: Vec<Deployment>,
}

/// Applies every child the edge and its pools need, in a fixed order: the config first, so
/// that a new Deployment's pods start with it.
pub(super) async fn children(
    client: &Client,
    ns: &str,
    vs: &VirtualServer,
    children: &Children,
) -> Result<Applied> {
    apply(client, ns, &children.config_map).await?;
    // Each NetworkPolicy before the pods it selects, so none starts unprotected.
    let name = vs.name_any();
    let uid = vs.uid().unwrap_or_default();
    apply_or_delete(client, ns, &name, &uid, children.network_policy.as_ref()).await?;
    if children.autoscaler.is_some() {
        hand_replicas_over(client, ns, &name).await?;
    }
    let deployment = apply(client, ns, &children.deployment).await?;
    let service = apply(client, ns, &children.service).await?;
    apply_or_delete(client, ns, &name, &uid, children.autoscaler.as_ref()).await?;
    apply(client, ns, &children.disruption_budget).await?;
    let mut pools = Vec::with_capacity(children.pools.len());
    for pool in &children.pools {
        apply_or_delete(client, ns, &pool.name, &uid, pool.network_policy.as_ref()).await?;
        if pool.autoscaler.is_some() {
            hand_replicas_over(client, ns, &pool.name).await?;
        }
        pools.push(apply(client, ns, &pool.deployment).await?);
        apply(client, ns, &pool.service).await?;
        apply_or_delete(client, ns, &pool.name, &uid, pool.autoscaler.as_ref()).await?;
    }
    remove_dropped_pools(client, ns, vs).await?;
    Ok(Applied {
        deployment,
        service,
        pools,
    })
}

/// The field manager that holds a Deployment's replica count while an HPA takes it over.
pub(super) const HANDOVER_MANAGER: &str = "skiff-operator-replicas-handover";

/// Before an apply that leaves `spec.replicas` to an HPA: when the operator's manager
/// owns the field (it set the count before autoscaling was turned on), another manager
/// takes it over at its live value first. Server-side apply removes a field its only
/// manager drops, and the Deployment would fall to one replica until the HPA's first
/// sync (Kubernetes' documented handover to an HPA).
pub(super) async fn hand_replicas_over(client: &Client, ns: &str, name: &str) -> Result<()> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let Some(live) = api.get_opt(name).await? else {
        return Ok(());
    };
    let ours = live.managed_fields().iter().any(|m| {
        m.manager.as_deref() == Some(MANAGER)
            && m.operation.as_deref() == Some("Apply")
            && m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0.pointer("/f:spec/f:replicas").is_some())
    });
    let Some(replicas) = live.spec.as_ref().and_then(|s| s.replicas).filter(|_| ours) else {
        return Ok(());
    };
    let handover = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": name },
        "spec": { "replicas": replicas },
    });
    api.patch(
        name,
        &PatchParams::apply(HANDOVER_MANAGER).force(),
        &Patch::Apply(&handover),
    )
    .await?;
    tracing::info!(
        deployment = name,
        replicas,
        "replica count handed over to the HPA"
    );
    Ok(())
}

/// Server-side apply of a namespaced object with the operator's field manager. Re-applying
/// an unchanged object changes nothing, so a settled VirtualServer causes no writes.
pub(super) async fn apply<K>(client: &Client, ns: &str, object: &K) -> Result<K>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + Debug + Serialize + DeserializeOwned,
    <K as Resource>::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let name = object.meta().name.as_deref().expect("children have names");
    let params = PatchParams::apply(MANAGER).force();
    Ok(api.patch(name, &params, &Patch::Apply(object)).await?)
}

/// Applies `object` when there is one, or deletes what may have been applied as `name`
/// by the VirtualServer whose uid is `owner`.
async fn apply_or_delete<K>(
    client: &Client,
    ns: &str,
    name: &str,
    owner: &str,
    object: Option<&K>,
) -> Result<()>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + Debug + Serialize + DeserializeOwned,
    <K as Resource>::DynamicType: Default,
{
    match object {
        Some(object) => apply(client, ns, object).await.map(drop),
        None => delete_if_owned::<K>(client, ns, name, owner).await,
    }
}

/// The uid of the controller of the live object `kind`/`name` (a kind
/// `children::claims` names), if it exists and has one. A Secret's controller is its
/// Certificate, not a VirtualServer: `None`, and age decides.
pub(super) async fn controller_of(
    client: &Client,
    ns: &str,
    kind: &str,
    name: &str,
) -> Result<Option<String>> {
    async fn read<K>(client: &Client, ns: &str, name: &str) -> Result<Option<String>>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + Debug + DeserializeOwned,
        <K as Resource>::DynamicType: Default,
    {
        let api: Api<K> = Api::namespaced(client.clone(), ns);
        let found = match api.get_metadata_opt(name).await {
            Ok(found) => found,
            // cert-manager's CRD absent: no Certificate holds the name.
            Err(kube::Error::Api(s)) if s.code == 404 => None,
            Err(e) => return Err(e.into()),
        };
        Ok(found.and_then(|m| {
            m.owner_references()
                .iter()
                .find(|o| o.controller == Some(true))
                .map(|o| o.uid.clone())
        }))
    }
    match kind {
        "Deployment" => read::<Deployment>(client, ns, name).await,
        "Service" => read::<Service>(client, ns, name).await,
        "ConfigMap" => read::<ConfigMap>(client, ns, name).await,
        "Certificate" => read::<crate::children::Certificate>(client, ns, name).await,
        _ => Ok(None),
    }
}

/// Deletes `name` if it exists and the VirtualServer whose uid is `owner` owns it: an
/// object of that name someone else made (an HPA a user points at the VirtualServer's
/// scale subresource, a NetworkPolicy of their own) is left alone. The delete is
/// conditional on the object read, so one replaced meanwhile is not deleted either.
pub(super) async fn delete_if_owned<K>(
    client: &Client,
    ns: &str,
    name: &str,
    owner: &str,
) -> Result<()>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + Debug + DeserializeOwned,
    <K as Resource>::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let Some(found) = api.get_metadata_opt(name).await? else {
        return Ok(());
    };
    if !found.owner_references().iter().any(|o| o.uid == owner) {
        return Ok(());
    }
    let params = DeleteParams {
        preconditions: found.uid().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        // Gone, or replaced by another object of that name, meanwhile.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Deletes the workloads of pools no longer in the spec (or no longer `placement: pool`),
/// found by label among the Deployments this VirtualServer owns.
async fn remove_dropped_pools(client: &Client, ns: &str, vs: &VirtualServer) -> Result<()> {
    let keep: Vec<&str> = children::pooled(vs).map(|p| p.name.as_str()).collect();
    let selector = format!(
        "app.kubernetes.io/instance={},{}",
        vs.name_any(),
        children::POOL_LABEL
    );
    let deployments = Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&selector))
        .await?;
    let uid = vs.uid().unwrap_or_default();
    for d in deployments.items {
        let pool = d
            .labels()
            .get(children::POOL_LABEL)
            .cloned()
            .unwrap_or_default();
        let ours = d.owner_references().iter().any(|o| o.uid == uid);
        if keep.contains(&pool.as_str()) || !ours {
            continue;
        }
        let name = d.name_any();
        tracing::info!(virtualserver = %key(vs), pool, "removing a dropped pool's workload");
        delete_if_owned::<Deployment>(client, ns, &name, &uid).await?;
        delete_if_owned::<Service>(client, ns, &name, &uid).await?;
        delete_if_owned::<HorizontalPodAutoscaler>(client, ns, &name, &uid).await?;
        delete_if_owned::<NetworkPolicy>(client, ns, &name, &uid).await?;
    }
    Ok(())
}
