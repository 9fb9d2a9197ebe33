//! The operator's Prometheus metrics (prefix `skiff_operator_`), and the per-object failure
//! streaks that drive the error back-off.

use crate::crd::{le_label, Slo, VirtualServer};
use kube::runtime::reflector::Store;
use kube::ResourceExt;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConditionLabels {
    condition: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SloLabels {
    namespace: String,
    virtualserver: String,
    slo: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ThresholdLabels {
    namespace: String,
    virtualserver: String,
    le: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BoundLabels {
    namespace: String,
    virtualserver: String,
    bound: &'static str,
}

type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

pub struct Metrics {
    registry: Registry,
    reconciliations: Counter,
    errors: Family<ReasonLabels, Counter>,
    duration: Histogram,
    by_condition: Family<ConditionLabels, Gauge>,
    slo_objective: Family<SloLabels, FloatGauge>,
    slo_threshold: Family<ThresholdLabels, FloatGauge>,
    replica_bounds: Family<BoundLabels, Gauge>,
    leader: Gauge,
    /// The controller's cache of VirtualServers, counted by condition at scrape time.
    /// The controllers' caches: one, or one per watched namespace.
    stores: Mutex<Vec<Store<VirtualServer>>>,
    streaks: Mutex<HashMap<String, u32>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("skiff_operator");
        let reconciliations = Counter::default();
        registry.register("reconciliations", "Reconciles run", reconciliations.clone());
        let errors = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, by reason",
            errors.clone(),
        );
        // At 0 from the start, so rates and the failing-reconcile alert read 0, not "no data".
        for reason in crate::Error::REASONS {
            let _ = errors.get_or_create(&ReasonLabels { reason });
        }
        let duration = Histogram::new([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0]);
        registry.register(
            "reconcile_duration_seconds",
            "Time one reconcile took",
            duration.clone(),
        );
        let by_condition = Family::<ConditionLabels, Gauge>::default();
        registry.register(
            "virtualservers",
            "VirtualServers by condition and status",
            by_condition.clone(),
        );
        let slo_objective = Family::default();
        registry.register(
            "virtualserver_slo_objective",
            "Each VirtualServer's service level objective (spec.slo or the default): the share of requests not answered 5xx (slo=availability) or faster than the latency threshold (slo=latency)",
            slo_objective.clone(),
        );
        let slo_threshold = Family::default();
        registry.register(
            "virtualserver_slo_latency_threshold_seconds",
            "Each VirtualServer's SLO latency threshold; le is the skiff_http_request_duration_seconds bucket bound it names",
            slo_threshold.clone(),
        );
        let replica_bounds = Family::default();
        registry.register(
            "virtualserver_replicas",
            "Each VirtualServer's edge replica bounds: bound=min and max from spec.autoscaling, or spec.replicas for both when autoscaling is off",
            replica_bounds.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 on the replica that runs the controller (it holds the leader Lease, or runs without election), 0 while it stands by",
            leader.clone(),
        );
        Metrics {
            registry,
            reconciliations,
            errors,
            duration,
            by_condition,
            slo_objective,
            slo_threshold,
            replica_bounds,
            leader,
            stores: Mutex::default(),
            streaks: Mutex::default(),
        }
    }

    pub fn reconciled(&self, took: Duration) {
        self.reconciliations.inc();
        self.duration.observe(took.as_secs_f64());
    }

    pub fn reconcile_error(&self, reason: &'static str) {
        self.errors.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Consecutive failures of one object: `failed` adds one and returns the count; a
    /// success clears it.
    pub fn failure_streak(&self, key: &str, failed: bool) -> u32 {
        let mut map = self.streaks.lock().unwrap();
        if failed {
            let n = map.entry(key.to_string()).or_insert(0);
            *n += 1;
            *n
        } else {
            map.remove(key);
            0
        }
    }

    /// Whether this replica runs the controller.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Counts the VirtualServers of `store` too (a controller's cache).
    pub fn watch(&self, store: Store<VirtualServer>) {
        self.stores.lock().unwrap().push(store);
    }

    /// Every VirtualServer in the controllers' caches.
    fn cached(&self) -> Vec<Arc<VirtualServer>> {
        let stores = self.stores.lock().unwrap();
        stores.iter().flat_map(|s| s.state()).collect()
    }

    /// Recounts VirtualServers by condition from the cache.
    fn count_conditions(&self) {
        self.by_condition.clear();
        for vs in self.cached() {
            for c in vs.status.iter().flat_map(|s| &s.conditions) {
                let labels = ConditionLabels {
                    condition: c.type_.clone(),
                    status: c.status.clone(),
                };
                self.by_condition.get_or_create(&labels).inc();
            }
        }
    }

    /// Rewrites the per-VirtualServer gauges (SLO objectives, replica bounds) from the
    /// VirtualServers there are now, so a deleted one's series go with it.
    fn record_objectives<'a>(&self, all: impl IntoIterator<Item = &'a VirtualServer>) {
        self.slo_objective.clear();
        self.slo_threshold.clear();
        self.replica_bounds.clear();
        for vs in all {
            let namespace = vs.namespace().unwrap_or_default();
            let virtualserver = vs.name_any();
            let (min, max) = vs.spec.replica_bounds();
            for (bound, n) in [("min", min), ("max", max)] {
                let labels = BoundLabels {
                    namespace: namespace.clone(),
                    virtualserver: virtualserver.clone(),
                    bound,
                };
                self.replica_bounds.get_or_create(&labels).set(i64::from(n));
            }
            let o = Slo::objectives(vs.spec.slo.as_ref());
            for (slo, target) in [("availability", o.availability), ("latency", o.latency)] {
                let labels = SloLabels {
                    namespace: namespace.clone(),
                    virtualserver: virtualserver.clone(),
                    slo,
                };
                self.slo_objective.get_or_create(&labels).set(target);
            }
            let labels = ThresholdLabels {
                namespace,
                virtualserver,
                le: le_label(o.latency_threshold_seconds),
            };
            self.slo_threshold
                .get_or_create(&labels)
                .set(o.latency_threshold_seconds);
        }
    }

    pub fn encode(&self) -> String {
        self.count_conditions();
        self.record_objectives(self.cached().iter().map(|vs| vs.as_ref()));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("text encoding");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_reconciles_errors_and_streaks() {
        let m = Metrics::new();
        m.reconciled(Duration::from_millis(20));
        m.reconcile_error("conflict");
        assert_eq!(m.failure_streak("ns/a", true), 1);
        assert_eq!(m.failure_streak("ns/a", true), 2);
        assert_eq!(m.failure_streak("ns/a", false), 0);
        assert_eq!(m.failure_streak("ns/a", true), 1);
        let text = m.encode();
        assert!(
            text.contains("skiff_operator_reconciliations_total 1"),
            "{text}"
        );
        assert!(
            text.contains("skiff_operator_reconcile_errors_total{reason=\"conflict\"} 1"),
            "{text}"
        );
        // The other reasons are there from the start, at 0.
        for reason in ["api", "transport", "invalid"] {
            let line = format!("skiff_operator_reconcile_errors_total{{reason=\"{reason}\"}} 0");
            assert!(text.contains(&line), "{line} missing from {text}");
        }
        assert!(
            text.contains("skiff_operator_reconcile_duration_seconds_count 1"),
            "{text}"
        );
    }

    fn virtual_server(namespace: &str, name: &str, slo: serde_json::Value) -> VirtualServer {
        let mut spec =
            serde_json::json!({ "hosts": ["a.example"], "content": { "configMap": "site" } });
        if !slo.is_null() {
            spec["slo"] = slo;
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "skiff.dev/v1alpha1",
            "kind": "VirtualServer",
            "metadata": { "name": name, "namespace": namespace },
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn exports_each_virtual_server_s_objectives_and_forgets_deleted_ones() {
        use kube::runtime::{reflector::store::Writer, watcher::Event};
        let m = Metrics::new();
        // Two controllers' caches (two watched namespaces): both are counted.
        let mut writer = Writer::<VirtualServer>::default();
        let mut docs_writer = Writer::<VirtualServer>::default();
        m.watch(writer.as_reader());
        m.watch(docs_writer.as_reader());
        let plain = virtual_server("web", "shop", serde_json::Value::Null);
        let strict = virtual_server(
            "web",
            "docs",
            serde_json::json!({
                "availability": { "target": 0.9995 },
                "latency": { "thresholdSeconds": 1, "target": 0.95 }
            }),
        );
        writer.apply_watcher_event(&Event::Apply(plain.clone()));
        docs_writer.apply_watcher_event(&Event::Apply(strict));
        let text = m.encode();
        for line in [
            "# TYPE skiff_operator_virtualserver_slo_objective gauge",
            "skiff_operator_virtualserver_slo_objective{namespace=\"web\",virtualserver=\"shop\",slo=\"availability\"} 0.999\n",
            "skiff_operator_virtualserver_slo_objective{namespace=\"web\",virtualserver=\"shop\",slo=\"latency\"} 0.99\n",
            "skiff_operator_virtualserver_slo_latency_threshold_seconds{namespace=\"web\",virtualserver=\"shop\",le=\"0.25\"} 0.25\n",
            "skiff_operator_virtualserver_slo_objective{namespace=\"web\",virtualserver=\"docs\",slo=\"availability\"} 0.9995\n",
            "skiff_operator_virtualserver_slo_objective{namespace=\"web\",virtualserver=\"docs\",slo=\"latency\"} 0.95\n",
            "skiff_operator_virtualserver_slo_latency_threshold_seconds{namespace=\"web\",virtualserver=\"docs\",le=\"1.0\"} 1.0\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        writer.apply_watcher_event(&Event::Delete(plain));
        let text = m.encode();
        assert!(!text.contains("virtualserver=\"shop\""), "{text}");
        assert!(text.contains("virtualserver=\"docs\""), "{text}");
    }

    #[test]
    fn exports_replica_bounds_and_leadership() {
        use kube::runtime::{reflector::store::Writer, watcher::Event};
        let m = Metrics::new();
        let mut writer = Writer::<VirtualServer>::default();
        m.watch(writer.as_reader());
        let mut scaled = virtual_server("web", "shop", serde_json::Value::Null);
        scaled.spec.autoscaling =
            serde_json::from_value(serde_json::json!({ "minReplicas": 2, "maxReplicas": 9 }))
                .unwrap();
        let mut fixed = virtual_server("web", "docs", serde_json::Value::Null);
        fixed.spec.replicas = Some(3);
        let default = virtual_server("web", "blog", serde_json::Value::Null);
        for vs in [scaled, fixed, default] {
            writer.apply_watcher_event(&Event::Apply(vs));
        }
        let text = m.encode();
        assert!(text.contains("skiff_operator_leader 0\n"), "{text}");
        for line in [
            "skiff_operator_virtualserver_replicas{namespace=\"web\",virtualserver=\"shop\",bound=\"min\"} 2\n",
            "skiff_operator_virtualserver_replicas{namespace=\"web\",virtualserver=\"shop\",bound=\"max\"} 9\n",
            "skiff_operator_virtualserver_replicas{namespace=\"web\",virtualserver=\"docs\",bound=\"min\"} 3\n",
            "skiff_operator_virtualserver_replicas{namespace=\"web\",virtualserver=\"docs\",bound=\"max\"} 3\n",
            "skiff_operator_virtualserver_replicas{namespace=\"web\",virtualserver=\"blog\",bound=\"max\"} 2\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        m.set_leader(true);
        assert!(m.encode().contains("skiff_operator_leader 1\n"));
    }
}
