//! The reconcile loop: a VirtualServer in, its children server-side applied, its status
//! written. An invalid config is never applied: `Accepted=False` carries the validator's
//! message and the children (and so the pods' config) stay as they were.
//!
//! One reconcile runs in four steps, each in its own module: rendering (the spec into a
//! config and typed children, no API call: `crate::render`, `crate::children`), applying
//! them ([`apply`]), the optional integrations (cert-manager, the Prometheus Operator:
//! [`integrations`]), and the status with its Events ([`status`]).

mod apply;
mod integrations;
mod observe;
mod status;

#[cfg(test)]
mod tests;

use crate::children::Children;
use crate::crd::{ConditionType, EventReason, Reason, VirtualServer, VirtualServerStatus};
use crate::metrics::Metrics;
use crate::render::Invalid;
use crate::scope::Scope;
use crate::{render, Error, Result};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The one field manager for every object and status the operator writes.
pub const MANAGER: &str = "skiff-operator";

/// What reconcile needs besides the object.
pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    /// Edge image used when a VirtualServer names none.
    pub default_image: String,
    /// Who may reach the edge's admin port; `None`: no NetworkPolicies (existing ones
    /// are deleted).
    pub network_policy: Option<crate::children::NetworkPolicyConfig>,
    /// Extra labels on each ServiceMonitor (a Prometheus's selector).
    pub service_monitor_labels: BTreeMap<String, String>,
    /// Every VirtualServer, the controller's cache, set by [`run`]: whose children's
    /// names an older one already takes. Unset, no VirtualServer is refused for that.
    pub peers: OnceLock<Store<VirtualServer>>,
}

/// Runs the controller for the VirtualServers of `scope` until a stop signal. With several
/// namespaces, one runs per namespace, each with a `ctx` of its own (its cache of peers).
pub async fn run(ctx: Arc<Context>, scope: Scope) {
    tracing::info!(%scope, "reconciling VirtualServers");
    let client = ctx.client.clone();
    let vs: Api<VirtualServer> = scope.api(client.clone());
    let managed = format!(
        "{}={}",
        crate::children::MANAGED_BY.0,
        crate::children::MANAGED_BY.1
    );
    let wc = watcher::Config::default().labels(&managed);
    let mut controller = Controller::new(vs, watcher::Config::default());
    ctx.metrics.watch(controller.store());
    // Set once: a second run would find the first's store, which is just as full.
    let _ = ctx.peers.set(controller.store());
    // cert-manager or the Prometheus Operator installed (or removed) after the operator:
    // every VirtualServer is reconciled again, so its Certificate or ServiceMonitor appears
    // without waiting for an edit. One watch per CRD name keeps the (large) CRDs of other
    // projects out of memory.
    for crd in integrations::CRDS {
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
        .owns(scope.api::<Deployment>(client.clone()), wc.clone())
        .owns(scope.api::<ConfigMap>(client.clone()), wc.clone())
        .owns(scope.api::<Service>(client.clone()), wc.clone())
        .owns(
            scope.api::<HorizontalPodAutoscaler>(client.clone()),
            wc.clone(),
        )
        .owns(scope.api::<PodDisruptionBudget>(client.clone()), wc.clone())
        .owns(scope.api::<NetworkPolicy>(client.clone()), wc.clone())
        // A burst of edits becomes one reconcile (and at most one rollout).
        .with_config(ControllerConfig::default().debounce(Duration::from_millis(500)))
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                // A watch refused or failing (its Role gone, the API server down): nothing in
                // this scope is reconciled meanwhile, so it is a warning. Failed reconciles
                // are warned of by `error_policy`.
                Err(kube::runtime::controller::Error::QueueError(e)) => {
                    tracing::warn!(error = %e, "watching VirtualServers or their children failed")
                }
                Err(e) => tracing::debug!(error = %e, "reconcile stream"),
                Ok(_) => {}
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

pub async fn reconcile(vs: Arc<VirtualServer>, ctx: Arc<Context>) -> Result<Action> {
    let started = Instant::now();
    let result = reconcile_inner(&vs, &ctx).await;
    ctx.metrics.reconciled(started.elapsed());
    if result.is_ok() {
        ctx.metrics.failure_streak(&key(&vs), false);
    }
    result
}

async fn reconcile_inner(vs: &VirtualServer, ctx: &Context) -> Result<Action> {
    let ns = vs.namespace().ok_or(Error::NoNamespace)?;
    let client = &ctx.client;
    let old = vs.status.clone().unwrap_or_default();
    let mut vs = vs.clone();
    if vs.spec.image.is_none() {
        vs.spec.image = Some(ctx.default_image.clone());
    }

    // Rendering: no API call, and nothing is applied unless the config is valid.
    let rendered = match render::server_config(&vs) {
        Ok(r) => r,
        Err(invalid) => {
            let reason = Reason::InvalidConfig;
            refuse(ctx, &vs, &old, reason, &invalid).await?;
            return Ok(Action::requeue(status::REJECTED_REQUEUE));
        }
    };
    if let Some(conflict) = name_conflict(ctx, &vs).await? {
        refuse(ctx, &vs, &old, Reason::NameConflict, &Invalid(conflict)).await?;
        return Ok(Action::requeue(status::NAME_CONFLICT_REQUEUE));
    }
    let mut children = Children::new(&vs, &rendered, ctx.network_policy.as_ref());
    children.label_service_monitor(&ctx.service_monitor_labels);

    // Applying.
    let missing = observe::missing_refs(client, &ns, &vs).await?;
    let applied = apply::children(client, &ns, &vs, &children).await;
    let applied = reported(ctx, &vs, &old, applied).await?;

    // Integrations: a ServiceMonitor or Certificate refused (cert-manager's webhook down
    // during its upgrade, a Certificate another controller owns) is reported the same way.
    let monitored = integrations::monitoring(client, &ns, &vs, &children).await;
    let monitored = reported(ctx, &vs, &old, monitored).await?;
    let had_certificate = old
        .conditions
        .iter()
        .any(|c| c.is(ConditionType::CertificateReady));
    let certificates =
        integrations::certificates(client, &ns, &vs, &children, had_certificate).await;
    let certificates = reported(ctx, &vs, &old, certificates).await?;

    // Status.
    let served = observe::served(client, &ns, &vs, &rendered.hash).await?;
    let (certificate, missing_secrets) = match certificates {
        Some(c) => (
            Some(status::served_or_not(c.outcome, &served.unserved_secrets)),
            c.missing_secrets,
        ),
        None => (None, vec![]),
    };
    let observed = status::Observed {
        rendered: &rendered,
        missing_refs: missing,
        monitored,
        certificate,
        missing_secrets,
        served_certificates: served.certificates,
        deployment: &applied.deployment,
        service: &applied.service,
        pools: &applied.pools,
        live: served.live,
        selector: crate::children::selector_string(&vs),
    };
    let status = status::accepted(&old, vs.metadata.generation, &observed);
    if status::write(client, &vs, &old, status).await? {
        if let Some((reason, note)) = status::event(&old, &observed) {
            publish(ctx, &vs, EventType::Normal, reason, &note).await;
        }
        if let Some(note) = status::warning_event(&old, &observed) {
            let reason = EventReason::RulesShadowed;
            publish(ctx, &vs, EventType::Warning, reason, &note).await;
        }
        if let Some((reason, note)) = status::certificate_event(&old, &observed) {
            publish(ctx, &vs, EventType::Warning, reason, &note).await;
        }
    }
    Ok(Action::requeue(observed.requeue_after()))
}

/// Passes `result` on; an API server's refusal also sets `Ready=False ApplyFailed` with its
/// message, and a Warning Event, so it is seen without the operator's log. The reconcile
/// then fails and is retried with backoff.
async fn reported<T>(
    ctx: &Context,
    vs: &VirtualServer,
    old: &VirtualServerStatus,
    result: Result<T>,
) -> Result<T> {
    // A refusal (invalid, denied by a webhook or RBAC), not the API server's trouble
    // (429, 5xx) nor a race (404, 409), which the retry alone takes care of.
    let Err(Error::Kube(kube::Error::Api(refusal))) = &result else {
        return result;
    };
    if !(400..500).contains(&refusal.code) || [404, 409, 429].contains(&refusal.code) {
        return result;
    }
    let note = format!("the API server refused a child: {}", refusal.message);
    let status = status::apply_failed(old, vs.metadata.generation, &note);
    if status::write(&ctx.client, vs, old, status).await? {
        publish(ctx, vs, EventType::Warning, EventReason::ApplyFailed, &note).await;
    }
    result
}

/// Writes the status of a spec that is not applied, with a Warning Event when it changed.
async fn refuse(
    ctx: &Context,
    vs: &VirtualServer,
    old: &VirtualServerStatus,
    reason: Reason,
    why: &Invalid,
) -> Result<()> {
    let status = status::rejected(old, vs.metadata.generation, reason, why);
    if status::write(&ctx.client, vs, old, status).await? {
        let event = EventReason::Rejected;
        publish(ctx, vs, EventType::Warning, event, &why.0).await;
    }
    Ok(())
}

/// How long a reconcile waits for the controller's cache to be filled before it can tell
/// whether an older VirtualServer takes its names; past it, the reconcile is retried.
const PEERS_READY_WAIT: Duration = Duration::from_secs(30);

/// The message of a name another VirtualServer keeps, from the controller's cache once it
/// is filled (a reconcile may start before the first list ends). The one that holds the
/// live object keeps it, so an edit to an older VirtualServer does not take a running
/// newer one's objects; when neither holds it, the older keeps it.
async fn name_conflict(ctx: &Context, vs: &VirtualServer) -> Result<Option<String>> {
    let Some(peers) = ctx.peers.get() else {
        return Ok(None);
    };
    if !matches!(
        tokio::time::timeout(PEERS_READY_WAIT, peers.wait_until_ready()).await,
        Ok(Ok(()))
    ) {
        return Err(Error::CacheNotReady);
    }
    let ns = vs.namespace().unwrap_or_default();
    let ours = vs.uid().unwrap_or_default();
    for c in crate::children::collisions(vs, &peers.state()) {
        match apply::controller_of(&ctx.client, &ns, c.kind, &c.name).await? {
            Some(uid) if uid == ours => continue,
            Some(uid) if uid == c.peer_uid => return Ok(Some(c.message(true))),
            _ if c.peer_first => return Ok(Some(c.message(false))),
            _ => continue,
        }
    }
    Ok(None)
}

async fn publish(
    ctx: &Context,
    vs: &VirtualServer,
    type_: EventType,
    reason: EventReason,
    note: &str,
) {
    let ev = Event {
        type_,
        reason: reason.to_string(),
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
