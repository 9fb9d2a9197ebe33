//! The reconcile loop: a VirtualServer in, its children server-side applied, its status
//! written. An invalid config is never applied: `Accepted=False` carries the validator's
//! message and the children (and so the pods' config) stay as they were.

use crate::children;
use crate::crd::{Condition, VirtualServer, VirtualServerStatus};
use crate::live_config;
use crate::metrics::Metrics;
use crate::render;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// CRDs of optional integrations, discovered at runtime.
pub const INTEGRATION_CRDS: [&str; 2] = [
    "certificates.cert-manager.io",
    "servicemonitors.monitoring.coreos.com",
];

/// The one field manager for every object and status the operator writes.
pub const MANAGER: &str = "skiff-operator";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("VirtualServer has no namespace")]
    NoNamespace,
}

impl Error {
    /// A bounded label for the error metric.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(s)) if s.code == 409 => "conflict",
            Error::Kube(kube::Error::Api(_)) => "api",
            Error::Kube(_) => "transport",
            Error::NoNamespace => "invalid",
        }
    }
}

/// What reconcile needs besides the object.
pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    /// Edge image used when a VirtualServer names none.
    pub default_image: String,
}

pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let vs: Api<VirtualServer> = Api::all(client.clone());
    let wc = watcher::Config::default().labels("app.kubernetes.io/managed-by=skiff-operator");
    let mut controller = Controller::new(vs, watcher::Config::default());
    ctx.metrics.watch(controller.store());
    // cert-manager or the Prometheus Operator installed (or removed) after the operator:
    // every VirtualServer is reconciled again, so its Certificate or ServiceMonitor appears
    // without waiting for an edit. One watch per CRD name keeps the (large) CRDs of other
    // projects out of memory.
    for crd in INTEGRATION_CRDS {
        let store = controller.store();
        controller = controller.watches(
            Api::<CustomResourceDefinition>::all(client.clone()),
            watcher::Config::default().fields(&format!("metadata.name={crd}")),
            move |_| {
                store
                    .state()
                    .iter()
                    .map(|vs| ObjectRef::from_obj(vs.as_ref()))
                    .collect::<Vec<_>>()
            },
        );
    }
    controller
        .owns(Api::<Deployment>::all(client.clone()), wc.clone())
        .owns(Api::<ConfigMap>::all(client.clone()), wc.clone())
        .owns(Api::<Service>::all(client.clone()), wc.clone())
        .owns(
            Api::<HorizontalPodAutoscaler>::all(client.clone()),
            wc.clone(),
        )
        .owns(Api::<PodDisruptionBudget>::all(client.clone()), wc.clone())
        // A burst of edits becomes one reconcile (and at most one rollout).
        .with_config(ControllerConfig::default().debounce(Duration::from_millis(500)))
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "reconcile stream");
            }
        })
        .await;
}

/// Backs off exponentially per object on errors: 1 s, 2 s, 4 s... up to 5 minutes.
pub fn error_policy(vs: Arc<VirtualServer>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.reconcile_error(error.reason());
    let failures = ctx.metrics.failure_streak(&key(&vs), true);
    let delay = Duration::from_secs(1u64 << failures.min(8)).min(Duration::from_secs(300));
    tracing::warn!(virtualserver = %key(&vs), error = %error, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

fn key(vs: &VirtualServer) -> String {
    format!("{}/{}", vs.namespace().unwrap_or_default(), vs.name_any())
}

pub async fn reconcile(vs: Arc<VirtualServer>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let result = reconcile_inner(&vs, &ctx).await;
    ctx.metrics.reconciled(started.elapsed());
    if result.is_ok() {
        ctx.metrics.failure_streak(&key(&vs), false);
    }
    result
}

async fn reconcile_inner(vs: &VirtualServer, ctx: &Context) -> Result<Action, Error> {
    let ns = vs.namespace().ok_or(Error::NoNamespace)?;
    let client = &ctx.client;
    let generation = vs.metadata.generation;
    let old = vs.status.clone().unwrap_or_default();
    let mut vs = vs.clone();
    if vs.spec.image.is_none() {
        vs.spec.image = Some(ctx.default_image.clone());
    }

    let rendered = match render::server_config(&vs) {
        Ok(r) => r,
        Err(invalid) => {
            let mut status = old.clone();
            set_condition(
                &mut status,
                generation,
                "Accepted",
                false,
                "InvalidConfig",
                &invalid.0,
            );
            set_condition(
                &mut status,
                generation,
                "Ready",
                false,
                "InvalidConfig",
                "the previous config keeps serving",
            );
            status.observed_generation = generation;
            if write_status(client, &vs, &old, status).await? {
                event(ctx, &vs, EventType::Warning, "Rejected", &invalid.0).await;
            }
            return Ok(Action::requeue(Duration::from_secs(300)));
        }
    };

    let missing = missing_refs(client, &ns, &vs).await?;
    let config_changed = old.config_hash.as_deref() != Some(rendered.hash.as_str());
    apply(client, &ns, &children::config_map(&vs, &rendered)).await?;
    let deployment = apply(client, &ns, &children::deployment(&vs)).await?;
    let service = apply(client, &ns, &children::service(&vs)).await?;
    match children::autoscaler(&vs) {
        Some(hpa) => {
            apply(client, &ns, &hpa).await?;
        }
        None => delete_if_present::<HorizontalPodAutoscaler>(client, &ns, &vs.name_any()).await?,
    }
    apply(client, &ns, &children::disruption_budget(&vs)).await?;
    for pool in children::pooled(&vs) {
        apply(client, &ns, &children::pool_deployment(&vs, pool)).await?;
        apply(client, &ns, &children::pool_service(&vs, pool)).await?;
        match children::pool_autoscaler(&vs, pool) {
            Some(hpa) => {
                apply(client, &ns, &hpa).await?;
            }
            None => {
                let name = render::pool_workload_name(&vs.name_any(), &pool.name);
                delete_if_present::<HorizontalPodAutoscaler>(client, &ns, &name).await?
            }
        }
    }
    remove_dropped_pools(client, &ns, &vs).await?;

    // The Deployment controller has not caught up with a new template yet: a rollout starts.
    let rolled = deployment
        .status
        .as_ref()
        .and_then(|s| s.observed_generation)
        < deployment.metadata.generation
        && old.observed_generation.is_some();
    let mut status = old.clone();
    status.observed_generation = generation;
    set_condition(
        &mut status,
        generation,
        "Accepted",
        true,
        "Valid",
        "the generated config passed validation",
    );
    match &missing {
        None => set_condition(
            &mut status,
            generation,
            "ResolvedRefs",
            true,
            "Resolved",
            "every referenced object exists",
        ),
        Some(m) => set_condition(
            &mut status,
            generation,
            "ResolvedRefs",
            false,
            "RefNotFound",
            m,
        ),
    }
    match monitoring(client, &ns, &vs).await? {
        true => set_condition(
            &mut status,
            generation,
            "Monitored",
            true,
            "ServiceMonitorCreated",
            "a ServiceMonitor scrapes the edge pods",
        ),
        false => set_condition(
            &mut status,
            generation,
            "Monitored",
            false,
            "PrometheusOperatorNotInstalled",
            &format!(
                "no ServiceMonitor CRD; scrape Service {}-metrics directly",
                vs.name_any()
            ),
        ),
    }
    let certificate = certificate(client, &ns, &vs).await?;
    // cert-manager's Certificates are not watched (their CRD may not exist): while one is
    // pending, look again soon rather than at the settled interval.
    let certificate_pending = matches!(&certificate, Some((false, "Pending", _)));
    if let Some((ok, reason, message)) = certificate {
        set_condition(
            &mut status,
            generation,
            "CertificateReady",
            ok,
            reason,
            &message,
        );
    } else {
        status.conditions.retain(|c| c.type_ != "CertificateReady");
    }
    let ds = deployment.status.clone().unwrap_or_default();
    let want = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let ready = ds.ready_replicas.unwrap_or(0);
    let settled = ds.observed_generation == deployment.metadata.generation
        && ds.updated_replicas.unwrap_or(0) == want
        && ds.available_replicas.unwrap_or(0) == want;
    if settled && ready > 0 {
        set_condition(
            &mut status,
            generation,
            "Ready",
            true,
            "Available",
            &format!("{ready}/{want} edge pods ready"),
        );
    } else {
        set_condition(
            &mut status,
            generation,
            "Ready",
            false,
            "RollingOut",
            &format!("{ready}/{want} edge pods ready"),
        );
    }
    // Which config the serving pods report: hot reloads land when the kubelet refreshes
    // the ConfigMap volume, so this trails configHash for up to a minute after a change.
    let pods = Api::<Pod>::namespaced(client.clone(), &ns)
        .list(&kube::api::ListParams::default().labels(&children::selector_string(&vs)))
        .await?;
    let serving: Vec<&Pod> = pods
        .items
        .iter()
        .filter(|p| live_config::serving(p))
        .collect();
    let reports = futures::future::join_all(
        serving
            .iter()
            .map(|p| live_config::served_hash(p, render::ADMIN_PORT)),
    )
    .await;
    let live = live_config::verdict(&rendered.hash, &reports);
    set_condition(
        &mut status,
        generation,
        "ConfigLive",
        live.live,
        live.reason,
        &live.message,
    );
    status.live_config_hash = live.live_hash.clone();
    status.replicas = ds.replicas;
    status.ready_replicas = Some(ready);
    status.selector = Some(children::selector_string(&vs));
    status.address = service.spec.and_then(|s| s.cluster_ip);
    status.config_hash = Some(rendered.hash.clone());
    if write_status(client, &vs, &old, status).await? {
        if old.observed_generation.is_none() {
            event(
                ctx,
                &vs,
                EventType::Normal,
                "Created",
                "edge Deployment, Service and config created",
            )
            .await;
        } else if rolled {
            event(
                ctx,
                &vs,
                EventType::Normal,
                "RollingOut",
                "the pod template changed; pods roll one by one",
            )
            .await;
        } else if config_changed {
            let note = format!(
                "config {} delivered in place; pods hot-reload it",
                rendered.hash
            );
            event(ctx, &vs, EventType::Normal, "Updated", &note).await;
        }
    }
    // Not settled yet: look again soon (the owned-Deployment watch usually comes first).
    // A reload on its way is looked at again soon; pods that do not answer (an operator
    // outside the cluster, a NetworkPolicy) less often.
    Ok(Action::requeue(if !settled || live.reason == "Reloading" {
        Duration::from_secs(5)
    } else if live.reason == "PodsUnreachable" {
        Duration::from_secs(30)
    } else if certificate_pending {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(300)
    }))
}

/// Server-side apply of a namespaced child with the operator's field manager. Re-applying
/// an unchanged object changes nothing, so a settled VirtualServer causes no writes.
async fn apply<K>(client: &Client, ns: &str, object: &K) -> Result<K, Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
    <K as Resource>::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let mut value = serde_json::to_value(object).expect("serializable");
    let dt = Default::default();
    value["apiVersion"] = K::api_version(&dt).into();
    value["kind"] = K::kind(&dt).into();
    let name = object.meta().name.clone().expect("children have names");
    Ok(api
        .patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&value),
        )
        .await?)
}

async fn delete_if_present<K>(client: &Client, ns: &str, name: &str) -> Result<(), Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope> + Clone + Debug + DeserializeOwned,
    <K as Resource>::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The metrics Service always; a ServiceMonitor when the Prometheus Operator's CRD exists
/// (discovered per reconcile). Returns whether a ServiceMonitor was applied.
async fn monitoring(client: &Client, ns: &str, vs: &VirtualServer) -> Result<bool, Error> {
    apply(client, ns, &children::metrics_service(vs)).await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    if crds.get_opt(INTEGRATION_CRDS[1]).await?.is_none() {
        return Ok(false);
    }
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "monitoring.coreos.com",
        "v1",
        "ServiceMonitor",
    ));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    api.patch(
        &vs.name_any(),
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&children::service_monitor(vs)),
    )
    .await?;
    Ok(true)
}

/// The TLS certificate: a named Secret is checked for; an issuer gets a cert-manager
/// Certificate when cert-manager's CRDs exist (discovered at each reconcile, so installing
/// cert-manager later just works), and a clear condition when they do not.
async fn certificate(
    client: &Client,
    ns: &str,
    vs: &VirtualServer,
) -> Result<Option<(bool, &'static str, String)>, Error> {
    let Some(tls) = &vs.spec.tls else {
        return Ok(None);
    };
    let secret_name = children::tls_secret_name(vs);
    if tls.issuer_ref.is_none() {
        let found = Api::<Secret>::namespaced(client.clone(), ns)
            .get_opt(&secret_name)
            .await?
            .is_some();
        return Ok(Some(if found {
            (
                true,
                "SecretFound",
                format!("Secret {secret_name} holds the certificate"),
            )
        } else {
            (
                false,
                "SecretNotFound",
                format!("Secret {secret_name} does not exist"),
            )
        }));
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    if crds.get_opt(INTEGRATION_CRDS[0]).await?.is_none() {
        return Ok(Some((
            false,
            "CertManagerNotInstalled",
            "tls.issuerRef needs cert-manager; its CRDs are not installed".into(),
        )));
    }
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "cert-manager.io",
        "v1",
        "Certificate",
    ));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    let name = vs.name_any();
    let applied = api
        .patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&children::certificate(vs)),
        )
        .await?;
    let ready = applied.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready");
    Ok(Some(match ready {
        Some(c) if c["status"] == "True" => {
            (true, "Issued", format!("Certificate {name} is ready"))
        }
        Some(c) => (
            false,
            "Pending",
            c["message"].as_str().unwrap_or("not ready").to_string(),
        ),
        None => (false, "Pending", format!("Certificate {name} requested")),
    }))
}

/// Deletes the workloads of pools no longer in the spec (or no longer `placement: pool`).
async fn remove_dropped_pools(client: &Client, ns: &str, vs: &VirtualServer) -> Result<(), Error> {
    let keep: Vec<String> = children::pooled(vs).map(|p| p.name.clone()).collect();
    let selector = format!(
        "app.kubernetes.io/instance={},skiff.dev/pool",
        vs.name_any()
    );
    let lp = kube::api::ListParams::default().labels(&selector);
    let deployments = Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&lp)
        .await?;
    for d in deployments.items {
        let pool = d
            .labels()
            .get("skiff.dev/pool")
            .cloned()
            .unwrap_or_default();
        if keep.contains(&pool)
            || !d
                .owner_references()
                .iter()
                .any(|o| o.uid == vs.uid().unwrap_or_default())
        {
            continue;
        }
        let name = d.name_any();
        tracing::info!(virtualserver = %key(vs), pool, "removing a dropped pool's workload");
        delete_if_present::<Deployment>(client, ns, &name).await?;
        delete_if_present::<Service>(client, ns, &name).await?;
        delete_if_present::<HorizontalPodAutoscaler>(client, ns, &name).await?;
    }
    Ok(())
}

/// Names of referenced objects that do not exist (content and auth Secrets).
async fn missing_refs(
    client: &Client,
    ns: &str,
    vs: &VirtualServer,
) -> Result<Option<String>, Error> {
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

/// Sets a condition, keeping its transition time when its status did not change.
fn set_condition(
    status: &mut VirtualServerStatus,
    generation: Option<i64>,
    type_: &str,
    ok: bool,
    reason: &str,
    message: &str,
) {
    let value = if ok { "True" } else { "False" };
    let now = k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .unwrap()
        .to_string();
    let since = status
        .conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == value)
        .map_or(now, |c| c.last_transition_time.clone());
    status.conditions.retain(|c| c.type_ != type_);
    status.conditions.push(Condition {
        type_: type_.into(),
        status: value.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: since,
    });
    status.conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
}

/// Writes the status subresource by server-side apply, only when it changed. Returns
/// whether it wrote. Kept apart from the children's apply, so a status write never
/// touches the config path and the config path never waits on status.
async fn write_status(
    client: &Client,
    vs: &VirtualServer,
    old: &VirtualServerStatus,
    new: VirtualServerStatus,
) -> Result<bool, Error> {
    if *old == new {
        return Ok(false);
    }
    let api: Api<VirtualServer> =
        Api::namespaced(client.clone(), &vs.namespace().unwrap_or_default());
    let patch = serde_json::json!({
        "apiVersion": "skiff.dev/v1alpha1",
        "kind": "VirtualServer",
        "status": new,
    });
    api.patch_status(
        &vs.name_any(),
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(true)
}

async fn event(ctx: &Context, vs: &VirtualServer, type_: EventType, reason: &str, note: &str) {
    let ev = Event {
        type_,
        reason: reason.into(),
        note: Some(note.chars().take(1000).collect()),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&ev, &vs.object_ref(&())).await {
        tracing::warn!(error = %e, "cannot publish an Event");
    }
}

/// Reporter for Events: the operator's Deployment, and its pod when known.
pub fn reporter() -> Reporter {
    Reporter {
        controller: MANAGER.into(),
        instance: std::env::var("POD_NAME").ok(),
    }
}
