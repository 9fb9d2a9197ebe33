//! The status a reconcile writes: its conditions computed from what the reconcile observed
//! (pure functions, tested without an apiserver), the write itself (only when something
//! changed), the Events that go with it, and when to look again.

use super::MANAGER;
use crate::crd::{
    Condition, ConditionType, EventReason, Reason, ServedCertificate, VirtualServer,
    VirtualServerStatus,
};
use crate::live_config::Verdict;
use crate::render::{Invalid, Rendered};
use crate::Result;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use std::borrow::Cow;
use std::time::Duration;

/// How soon a rejected spec is looked at again (an edit reconciles it at once anyway).
pub(super) const REJECTED_REQUEUE: Duration = Duration::from_secs(300);

/// How soon a VirtualServer whose names an older one takes is looked at again: the older
/// one's deletion or rename is not an edit of this one.
pub(super) const NAME_CONFLICT_REQUEUE: Duration = Duration::from_secs(30);

/// One condition's status, reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Outcome {
    pub ok: bool,
    pub reason: Reason,
    pub message: String,
}

impl Outcome {
    pub fn yes(reason: Reason, message: impl Into<String>) -> Outcome {
        Outcome {
            ok: true,
            reason,
            message: message.into(),
        }
    }

    pub fn no(reason: Reason, message: impl Into<String>) -> Outcome {
        Outcome {
            ok: false,
            reason,
            message: message.into(),
        }
    }
}

impl From<&Verdict> for Outcome {
    fn from(v: &Verdict) -> Outcome {
        Outcome {
            ok: v.live,
            reason: v.reason,
            message: v.message.clone(),
        }
    }
}

/// What a reconcile of a valid spec found, from which its status follows.
pub(super) struct Observed<'a> {
    pub rendered: &'a Rendered,
    /// The message of `ResolvedRefs=False`, when a referenced object is missing.
    pub missing_refs: Option<String>,
    pub monitored: Outcome,
    /// `None` without `spec.tls`.
    pub certificate: Option<Outcome>,
    /// TLS Secrets the edge pods mount that do not exist yet (new pods wait for them).
    pub missing_secrets: Vec<String>,
    /// The certificates the serving pods report (`status.servedCertificates`).
    pub served_certificates: Vec<ServedCertificate>,
    /// The edge Deployment and Service as the apply returned them.
    pub deployment: &'a Deployment,
    pub service: &'a Service,
    /// The pools' own Deployments (`placement: pool`) as the apply returned them.
    pub pools: &'a [Deployment],
    pub live: Verdict,
    pub selector: String,
}

impl Observed<'_> {
    /// Replicas the Deployment wants, and how many are ready.
    fn replicas(&self) -> (i32, i32) {
        let want = self
            .deployment
            .spec
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(1);
        let ready = self
            .deployment
            .status
            .as_ref()
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        (want, ready)
    }

    /// Whether the Deployment controller has rolled out the current template everywhere.
    fn settled(&self) -> bool {
        let ds = self.deployment.status.clone().unwrap_or_default();
        let (want, _) = self.replicas();
        ds.observed_generation == self.deployment.metadata.generation
            && ds.updated_replicas.unwrap_or(0) == want
            && ds.available_replicas.unwrap_or(0) == want
    }

    /// The rollout has passed its progress deadline (`Progressing=False`,
    /// ProgressDeadlineExceeded), until a new template or a pod's progress resets it.
    fn stalled(&self) -> bool {
        self.deployment
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Progressing" && c.status == "False")
            })
    }

    /// The Deployment controller has not caught up with a new template yet: a rollout starts.
    fn rolling(&self) -> bool {
        self.deployment
            .status
            .as_ref()
            .and_then(|s| s.observed_generation)
            < self.deployment.metadata.generation
    }

    /// The pools (by name) whose Deployment wants pods and has none available: their
    /// routes answer 502 or 503 while the edge itself is fine.
    fn unavailable_pools(&self) -> Vec<String> {
        self.pools
            .iter()
            .filter(|d| {
                let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                let available = d.status.as_ref().and_then(|s| s.available_replicas);
                want > 0 && available.unwrap_or(0) == 0
            })
            .map(|d| {
                d.labels()
                    .get(crate::children::POOL_LABEL)
                    .cloned()
                    .unwrap_or_else(|| d.name_any())
            })
            .collect()
    }

    fn ready(&self) -> Outcome {
        let (want, ready) = self.replicas();
        let message = format!("{ready}/{want} edge pods ready");
        if self.settled() && ready > 0 {
            match &self.unavailable_pools()[..] {
                [] => Outcome::yes(Reason::Available, message),
                [one] => Outcome::no(
                    Reason::PoolUnavailable,
                    format!("{message}; pool {one} has no available pod"),
                ),
                many => Outcome::no(
                    Reason::PoolUnavailable,
                    format!("{message}; pools {} have no available pod", many.join(", ")),
                ),
            }
        } else if self.missing_secrets.is_empty() {
            Outcome::no(Reason::RollingOut, message)
        } else {
            let secrets = match &self.missing_secrets[..] {
                [one] => format!("TLS Secret {one} exists"),
                many => format!("TLS Secrets {} exist", many.join(", ")),
            };
            Outcome::no(
                Reason::RollingOut,
                format!("{message}; new pods start once {secrets}"),
            )
        }
    }

    /// When to reconcile again. Not settled yet: look again soon (the owned-Deployment
    /// watch usually comes first). A reload on its way is looked at again soon; pods that
    /// do not answer (an operator outside the cluster, a NetworkPolicy) less often.
    /// cert-manager's Certificates, issuers and the TLS Secrets are not watched (their CRDs
    /// may not exist; Secrets are many): while a certificate is pending or its Secret
    /// missing, look again soon rather than at the settled interval, and a refused issuer
    /// (which may be fixed without touching the VirtualServer) every minute. A Secret not
    /// served by every pod is looked at every 30 s: the kubelet's refresh takes about a
    /// minute, and one that never loads should not poll the pods every 10 s for ever.
    pub fn requeue_after(&self) -> Duration {
        let certificate = self
            .certificate
            .as_ref()
            .filter(|c| !c.ok)
            .map(|c| c.reason);
        let unsettled = if self.stalled() && !self.rolling() {
            // The Deployment controller gave up waiting (progressDeadlineSeconds): a pod
            // that cannot start. Its status changes wake this anyway (`owns`).
            60
        } else {
            5
        };
        // Each thing still to settle says how soon to look; the soonest wins.
        let soon = [
            (!self.settled()).then_some(unsettled),
            (self.live.reason == Reason::Reloading).then_some(5),
            matches!(certificate, Some(Reason::Pending | Reason::SecretNotFound)).then_some(10),
            // The pools' Deployments are owned: their changes wake this sooner.
            (!self.unavailable_pools().is_empty()).then_some(30),
            (self.live.reason == Reason::PodsUnreachable).then_some(30),
            (certificate == Some(Reason::NotServed)).then_some(30),
            matches!(
                certificate,
                Some(Reason::Http01Unsupported | Reason::SecretInUse | Reason::CertificateInUse)
            )
            .then_some(60),
        ];
        Duration::from_secs(soon.into_iter().flatten().min().unwrap_or(300))
    }
}

/// `CertificateReady` as the certificate step found it, unless every certificate is in
/// place and a pod serving the current config does not serve one of them: the Secret
/// exists, but clients do not get it from that pod.
pub(super) fn served_or_not(found: Outcome, unserved: &[String]) -> Outcome {
    if !found.ok || unserved.is_empty() {
        return found;
    }
    let secrets = match unserved {
        [one] => format!("Secret {one}"),
        many => format!("Secrets {}", many.join(", ")),
    };
    Outcome::no(
        Reason::NotServed,
        format!(
            "not every edge pod on the current config serves {secrets} yet: pods started \
             before it was added or renamed serve it once the rollout replaces them; if this \
             lasts, the Secret does not hold a valid pair (the pods' logs say why)"
        ),
    )
}

/// The status of a spec that is not applied, with the reason: it does not render into a
/// valid config (`InvalidConfig`, the validator's message), or an older VirtualServer
/// takes one of its children's names (`NameConflict`). The previous config keeps serving.
pub(super) fn rejected(
    old: &VirtualServerStatus,
    generation: Option<i64>,
    reason: Reason,
    invalid: &Invalid,
) -> VirtualServerStatus {
    let mut status = old.clone();
    let mut set = |type_, outcome| set_condition(&mut status, generation, type_, outcome);
    set(
        ConditionType::Accepted,
        Outcome::no(reason, invalid.0.clone()),
    );
    set(
        ConditionType::Ready,
        Outcome::no(reason, "the previous config keeps serving"),
    );
    status.observed_generation = generation;
    status
}

/// The status of an accepted spec one of whose children the API server refused: Ready
/// says which and why, so it is seen without the operator's log. The reconcile is
/// retried with backoff.
pub(super) fn apply_failed(
    old: &VirtualServerStatus,
    generation: Option<i64>,
    message: &str,
) -> VirtualServerStatus {
    let mut status = old.clone();
    set_condition(
        &mut status,
        generation,
        ConditionType::Ready,
        Outcome::no(Reason::ApplyFailed, message),
    );
    status
}

/// The status of an accepted spec whose children were applied.
pub(super) fn accepted(
    old: &VirtualServerStatus,
    generation: Option<i64>,
    observed: &Observed<'_>,
) -> VirtualServerStatus {
    let mut status = old.clone();
    status.observed_generation = generation;
    let mut set = |type_, outcome| set_condition(&mut status, generation, type_, outcome);
    let warnings = &observed.rendered.warnings;
    set(
        ConditionType::Accepted,
        Outcome::yes(
            Reason::Valid,
            match warnings.len() {
                0 => "the generated config passed validation".to_string(),
                1 => "the generated config passed validation, with a warning in status.warnings"
                    .to_string(),
                n => format!(
                    "the generated config passed validation, with {n} warnings in status.warnings"
                ),
            },
        ),
    );
    set(
        ConditionType::ResolvedRefs,
        match &observed.missing_refs {
            None => Outcome::yes(Reason::Resolved, "every referenced object exists"),
            Some(m) => Outcome::no(Reason::RefNotFound, m.clone()),
        },
    );
    set(ConditionType::Monitored, observed.monitored.clone());
    if let Some(certificate) = &observed.certificate {
        set(ConditionType::CertificateReady, certificate.clone());
    }
    set(ConditionType::Ready, observed.ready());
    set(ConditionType::ConfigLive, Outcome::from(&observed.live));
    if observed.certificate.is_none() {
        status
            .conditions
            .retain(|c| !c.is(ConditionType::CertificateReady));
    }
    let (_, ready) = observed.replicas();
    status.live_config_hash = observed.live.live_hash.clone();
    status.replicas = observed.deployment.status.as_ref().and_then(|s| s.replicas);
    status.ready_replicas = Some(ready);
    status.selector = Some(observed.selector.clone());
    status.address = observed
        .service
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.clone());
    status.config_hash = Some(observed.rendered.hash.clone());
    status.warnings = warnings.clone();
    status.served_certificates = observed.served_certificates.clone();
    status
}

/// The Warning Event for a certificate that cannot be issued as asked (an ACME issuer
/// with HTTP-01 solvers only), when the condition newly says so.
pub(super) fn certificate_event(
    old: &VirtualServerStatus,
    observed: &Observed<'_>,
) -> Option<(EventReason, String)> {
    let now = observed.certificate.as_ref().filter(|c| !c.ok)?;
    let before = old
        .conditions
        .iter()
        .find(|c| c.is(ConditionType::CertificateReady))
        .map(|c| c.reason.as_str());
    (now.reason == Reason::Http01Unsupported && before != Some(now.reason.as_str()))
        .then(|| (EventReason::Http01Unsupported, now.message.clone()))
}

/// The Warning Event for an accepted spec's warnings, when they are new: the same
/// warnings are not announced again on every reconcile.
pub(super) fn warning_event(old: &VirtualServerStatus, observed: &Observed<'_>) -> Option<String> {
    let warnings = &observed.rendered.warnings;
    (!warnings.is_empty() && *warnings != old.warnings).then(|| warnings.join("\n"))
}

/// The Event for a status just written about an accepted spec, if it says something new:
/// the children created, a rollout started, or a config delivered in place.
pub(super) fn event(
    old: &VirtualServerStatus,
    observed: &Observed<'_>,
) -> Option<(EventReason, String)> {
    let hash = &observed.rendered.hash;
    if old.observed_generation.is_none() {
        Some((
            EventReason::Created,
            "edge Deployment, Service and config created".into(),
        ))
    } else if observed.rolling() {
        Some((
            EventReason::RollingOut,
            "the pod template changed; pods roll one by one".into(),
        ))
    } else if old.config_hash.as_deref() != Some(hash.as_str()) {
        Some((
            EventReason::Updated,
            format!("config {hash} delivered in place; pods hot-reload it"),
        ))
    } else {
        None
    }
}

/// Sets a condition, keeping its transition time when its status did not change.
pub(super) fn set_condition(
    status: &mut VirtualServerStatus,
    generation: Option<i64>,
    type_: ConditionType,
    outcome: Outcome,
) {
    let value = if outcome.ok { "True" } else { "False" };
    let now = k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .unwrap()
        .to_string();
    let since = status
        .conditions
        .iter()
        .find(|c| c.is(type_) && c.status == value)
        .map_or(now, |c| c.last_transition_time.clone());
    status.conditions.retain(|c| !c.is(type_));
    status.conditions.push(Condition {
        type_: type_.to_string(),
        status: value.into(),
        reason: outcome.reason.to_string(),
        message: outcome.message,
        observed_generation: generation,
        last_transition_time: since,
    });
    status.conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
}

/// The body of a server-side apply of the status subresource.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusApply<'a> {
    api_version: Cow<'a, str>,
    kind: Cow<'a, str>,
    status: &'a VirtualServerStatus,
}

/// Writes the status subresource by server-side apply, only when it changed. Returns
/// whether it wrote. Kept apart from the children's apply, so a status write never
/// touches the config path and the config path never waits on status.
pub(super) async fn write(
    client: &Client,
    vs: &VirtualServer,
    old: &VirtualServerStatus,
    new: VirtualServerStatus,
) -> Result<bool> {
    if *old == new {
        return Ok(false);
    }
    let api: Api<VirtualServer> =
        Api::namespaced(client.clone(), &vs.namespace().unwrap_or_default());
    let body = StatusApply {
        api_version: VirtualServer::api_version(&()),
        kind: VirtualServer::kind(&()),
        status: &new,
    };
    api.patch_status(
        &vs.name_any(),
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await?;
    Ok(true)
}
