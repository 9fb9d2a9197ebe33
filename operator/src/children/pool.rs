//! The workload of a `placement: pool` backend: its Deployment, the headless Service the
//! edge resolves, and its HPA.

use super::edge::{
    container_port, env, match_labels, non_empty, requirements, surge_one_at_a_time,
};
use super::{labels, metadata_labelled, POOL_LABEL};
use crate::crd::{Placement, Pool, VirtualServer};
use crate::render;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, Lifecycle, LifecycleHandler, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    SeccompProfile, SecurityContext, Service, ServicePort, ServiceSpec, SleepAction,
    TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use std::collections::BTreeMap;

/// The port a backend listens on when the pool names none.
const DEFAULT_PORT: u16 = 9000;
/// The preStop pause of a pool pod: the pod has left the headless Service's endpoints,
/// and this outlasts CoreDNS's 5 s cache plus the edge's 5 s re-resolution, so no new
/// request reaches it after.
const POOL_DRAIN_SECONDS: i64 = 12;
/// Then the time its requests in flight have to finish after the stop signal.
const POOL_FINISH_SECONDS: i64 = 30;

/// The port a pool's backend listens on.
pub(super) fn backend_port(p: &Pool) -> u16 {
    p.port.unwrap_or(DEFAULT_PORT)
}

/// The pools that run as their own workload: `placement: pool` with an image.
pub fn pooled(vs: &VirtualServer) -> impl Iterator<Item = &Pool> {
    vs.spec
        .pools
        .iter()
        .filter(|p| p.placement == Placement::Pool && p.image.is_some())
}

/// Labels of a `placement: pool` backend's pods (distinct from the edge pods', so the edge
/// Service never selects them).
pub fn pool_labels(vs: &VirtualServer, pool: &str) -> BTreeMap<String, String> {
    labels([
        ("app.kubernetes.io/name", "skiff-pool"),
        ("app.kubernetes.io/instance", &vs.name_any()),
        (POOL_LABEL, pool),
    ])
}

pub(super) fn pool_metadata(vs: &VirtualServer, pool: &str) -> ObjectMeta {
    let name = render::pool_workload_name(&vs.name_any(), pool);
    metadata_labelled(vs, &name, POOL_LABEL, pool)
}

/// A `placement: pool` backend's Deployment.
pub fn pool_deployment(vs: &VirtualServer, p: &Pool) -> Deployment {
    let container = Container {
        name: p.name.clone(),
        image: p.image.clone(),
        env: Some(env(&p.env)),
        command: non_empty(&p.command),
        args: non_empty(&p.args),
        ports: Some(vec![container_port("backend", backend_port(p))]),
        readiness_probe: Some(Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::String("backend".into()),
                ..Default::default()
            }),
            period_seconds: Some(2),
            ..Default::default()
        }),
        resources: Some(p.resources.clone().unwrap_or_else(|| {
            requirements([("cpu", "100m"), ("memory", "64Mi")], None::<[_; 0]>)
        })),
        // No setuid binary raises privileges; a root master may still switch to its
        // workers' user, which is no escalation.
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            ..Default::default()
        }),
        // A pod leaving (scale-down, rollout) keeps serving until every edge pod has
        // stopped sending to it, then gets its stop signal.
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                sleep: Some(SleepAction {
                    seconds: POOL_DRAIN_SECONDS,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    Deployment {
        metadata: pool_metadata(vs, &p.name),
        spec: Some(DeploymentSpec {
            replicas: p.autoscaling.is_none().then_some(2),
            selector: match_labels(pool_labels(vs, &p.name)),
            strategy: Some(surge_one_at_a_time()),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pool_labels(vs, &p.name)),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    // A backend needs no API access. Its image may start as root and drop
                    // to a worker user (php-fpm), so only what that allows is locked down.
                    automount_service_account_token: Some(false),
                    security_context: Some(PodSecurityContext {
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    enable_service_links: Some(false),
                    termination_grace_period_seconds: Some(
                        POOL_DRAIN_SECONDS + POOL_FINISH_SECONDS,
                    ),
                    containers: vec![container],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A `placement: pool` backend's headless Service: its DNS name resolves to every ready
/// pod, and the edge re-resolves it every few seconds.
pub fn pool_service(vs: &VirtualServer, p: &Pool) -> Service {
    Service {
        metadata: pool_metadata(vs, &p.name),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(pool_labels(vs, &p.name)),
            ports: Some(vec![ServicePort {
                name: Some("backend".into()),
                port: backend_port(p).into(),
                target_port: Some(IntOrString::String("backend".into())),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}
