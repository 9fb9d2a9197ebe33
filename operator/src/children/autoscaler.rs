//! HorizontalPodAutoscalers of the edge farm and of each `placement: pool` backend: on CPU,
//! on busy workers and on requests per second (the last two read through
//! prometheus-adapter, whose rules the chart ships).

use super::edge::metadata_of;
use super::pool::pool_metadata;
use crate::crd::{
    Autoscaling, Placement, Pool, VirtualServer, DEFAULT_BUSY_RATIO, DEFAULT_CPU_TARGET,
};
use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, ExternalMetricSource, HorizontalPodAutoscaler,
    HorizontalPodAutoscalerSpec, MetricIdentifier, MetricSpec, MetricTarget, PodsMetricSource,
    ResourceMetricSource,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::ResourceExt;

/// prometheus-adapter's external metric: a `placement: pool` backend's requests in flight
/// over its workers (every edge pod sees the same workers).
pub const BUSY_RATIO_METRIC: &str = "skiff_pool_busy_ratio";
/// The same for sidecars, whose workers are each edge pod's own (summed, not shared).
pub const SIDECAR_BUSY_RATIO_METRIC: &str = "skiff_sidecar_busy_ratio";
/// prometheus-adapter's custom metric: an edge pod's requests per second.
pub const REQUESTS_METRIC: &str = "skiff_http_requests_per_second";

/// The edge farm's HPA: CPU (named, or 70 %), requests per second when asked, and the busy
/// ratio of each sidecar pool whose workers are known (a busy Django sidecar adds edge
/// pods, since its workers come with them).
pub fn autoscaler(vs: &VirtualServer) -> Option<HorizontalPodAutoscaler> {
    let a = vs.spec.autoscaling.as_ref()?;
    let mut metrics = vec![cpu(a.target_cpu_utilization.unwrap_or(DEFAULT_CPU_TARGET))];
    if let Some(rps) = a.target_requests_per_second {
        metrics.push(requests_per_second(rps));
    }
    for p in vs
        .spec
        .pools
        .iter()
        .filter(|p| p.placement == Placement::Sidecar)
    {
        if p.known_workers().is_some() {
            let target = a.target_busy_ratio.unwrap_or(DEFAULT_BUSY_RATIO);
            metrics.push(busy_ratio(
                SIDECAR_BUSY_RATIO_METRIC,
                &vs.name_any(),
                &p.name,
                target,
            ));
        }
    }
    Some(hpa(metadata_of(vs), a, metrics))
}

/// A pool's HPA: its busy ratio when its workers are known (named, or 0.7), CPU when
/// named or when the workers are not known (70 %).
pub fn pool_autoscaler(vs: &VirtualServer, p: &Pool) -> Option<HorizontalPodAutoscaler> {
    let a = p.autoscaling.as_ref()?;
    let mut metrics = Vec::new();
    if p.known_workers().is_some() {
        let target = a.target_busy_ratio.unwrap_or(DEFAULT_BUSY_RATIO);
        metrics.push(busy_ratio(
            BUSY_RATIO_METRIC,
            &vs.name_any(),
            &p.name,
            target,
        ));
    }
    match a.target_cpu_utilization {
        Some(percent) => metrics.push(cpu(percent)),
        None if metrics.is_empty() => metrics.push(cpu(DEFAULT_CPU_TARGET)),
        None => {}
    }
    Some(hpa(pool_metadata(vs, &p.name), a, metrics))
}

/// An HPA scaling the Deployment of the same name.
fn hpa(metadata: ObjectMeta, a: &Autoscaling, metrics: Vec<MetricSpec>) -> HorizontalPodAutoscaler {
    let target = metadata.name.clone().unwrap_or_default();
    HorizontalPodAutoscaler {
        metadata,
        spec: Some(HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: target,
            },
            min_replicas: Some(a.min_replicas),
            max_replicas: a.max_replicas,
            metrics: Some(metrics),
            behavior: a.behavior.clone(),
        }),
        ..Default::default()
    }
}

fn cpu(percent: i32) -> MetricSpec {
    MetricSpec {
        type_: "Resource".into(),
        resource: Some(ResourceMetricSource {
            name: "cpu".into(),
            target: MetricTarget {
                type_: "Utilization".into(),
                average_utilization: Some(percent),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

fn requests_per_second(rps: u32) -> MetricSpec {
    MetricSpec {
        type_: "Pods".into(),
        pods: Some(PodsMetricSource {
            metric: MetricIdentifier {
                name: REQUESTS_METRIC.into(),
                selector: None,
            },
            target: MetricTarget {
                type_: "AverageValue".into(),
                average_value: Some(Quantity(rps.to_string())),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

/// The pool's busy ratio as a total (`Value`): it is already per worker, so the HPA
/// scales by ratio over target, as it would on average utilization.
fn busy_ratio(metric: &str, virtualserver: &str, pool: &str, target: f64) -> MetricSpec {
    let labels = [("virtualserver", virtualserver), ("pool", pool)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    MetricSpec {
        type_: "External".into(),
        external: Some(ExternalMetricSource {
            metric: MetricIdentifier {
                name: metric.into(),
                selector: Some(LabelSelector {
                    match_labels: Some(labels),
                    ..Default::default()
                }),
            },
            target: MetricTarget {
                type_: "Value".into(),
                value: Some(Quantity(format!("{}m", (target * 1000.0).round() as i64))),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}
