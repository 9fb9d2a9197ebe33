//! The operator's Prometheus metrics (prefix `skiff_operator_`), and the per-object failure
//! streaks that drive the error back-off.

use crate::crd::VirtualServer;
use kube::runtime::reflector::Store;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
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

pub struct Metrics {
    registry: Registry,
    reconciliations: Counter,
    errors: Family<ReasonLabels, Counter>,
    duration: Histogram,
    by_condition: Family<ConditionLabels, Gauge>,
    /// The controller's cache of VirtualServers, counted by condition at scrape time.
    store: OnceLock<Store<VirtualServer>>,
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
        Metrics {
            registry,
            reconciliations,
            errors,
            duration,
            by_condition,
            store: OnceLock::new(),
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

    pub fn watch(&self, store: Store<VirtualServer>) {
        let _ = self.store.set(store);
    }

    /// Recounts VirtualServers by condition from the cache.
    fn count_conditions(&self) {
        let Some(store) = self.store.get() else {
            return;
        };
        self.by_condition.clear();
        for vs in store.state() {
            for c in vs.status.iter().flat_map(|s| &s.conditions) {
                let labels = ConditionLabels {
                    condition: c.type_.clone(),
                    status: c.status.clone(),
                };
                self.by_condition.get_or_create(&labels).inc();
            }
        }
    }

    pub fn encode(&self) -> String {
        self.count_conditions();
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
        assert!(
            text.contains("skiff_operator_reconcile_duration_seconds_count 1"),
            "{text}"
        );
    }
}
