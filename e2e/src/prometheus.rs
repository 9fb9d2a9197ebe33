//! The cluster's Prometheus (e2e/cluster runs it on 127.0.0.1:9090, scraping through its
//! Kubernetes service discovery) and what the harness feeds it.
//!
//! There is no Prometheus Operator here (README: "Prometheus in the e2e cluster" says
//! why), so the harness does its job for the two kinds the project ships:
//! - [`scrape_configs`] translates a ServiceMonitor into the scrape configs the Prometheus
//!   Operator generates for it (role `endpoints`, the Service selected by its labels, the
//!   port by name, the standard target labels, then the endpoint's own relabelings and
//!   `honor_labels`);
//! - [`chart_rules`] renders the chart's PrometheusRule with `helm template` (the same
//!   template and `prometheusRule.forAll` value users set) and takes its `spec`, the rule
//!   file Prometheus loads.
//!
//! [`Prometheus::configure`] writes both into the state directory and reloads Prometheus.

use crate::{helm_stdout, repo_root, state_dir};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The ServiceMonitors (monitoring.coreos.com/v1) of namespace `ns`, as untyped objects.
pub fn service_monitors(client: &kube::Client, ns: &str) -> kube::Api<kube::api::DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor");
    kube::Api::namespaced_with(client.clone(), ns, &kube::api::ApiResource::from_gvk(&gvk))
}

/// Where e2e/cluster's Prometheus listens.
pub const PROMETHEUS_URL: &str = "http://127.0.0.1:9090";

/// Prometheus's directory under the cluster's state (config, rules/, data/).
pub fn prometheus_dir() -> PathBuf {
    state_dir().join("prometheus")
}

/// Prometheus label names are `[a-zA-Z_][a-zA-Z0-9_]*`; Kubernetes label keys become
/// `__meta_kubernetes_*_label_<key>` with every other character replaced by `_`.
fn sanitize(key: &str) -> String {
    key.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// One `relabel_config` from a ServiceMonitor's (camelCase) relabeling.
fn relabel_config(r: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for (from, to) in [
        ("sourceLabels", "source_labels"),
        ("targetLabel", "target_label"),
        ("separator", "separator"),
        ("regex", "regex"),
        ("replacement", "replacement"),
        ("modulus", "modulus"),
    ] {
        if let Some(v) = r.get(from) {
            out.insert(to.into(), v.clone());
        }
    }
    if let Some(action) = r.get("action").and_then(Value::as_str) {
        out.insert("action".into(), action.to_ascii_lowercase().into());
    }
    Value::Object(out)
}

/// The scrape configs the Prometheus Operator generates for a ServiceMonitor
/// (monitoring.coreos.com/v1, as read from the API), one per endpoint, discovering through
/// `kubeconfig`. `interval` replaces every endpoint's own (the tests scrape every 5 s
/// whatever the monitor says, to have data within a short run). Panics on the parts of a
/// ServiceMonitor this translation does not implement, rather than scraping something else.
pub fn scrape_configs(monitor: &Value, kubeconfig: &Path, interval: Option<&str>) -> Vec<Value> {
    let ns = monitor["metadata"]["namespace"]
        .as_str()
        .expect("ServiceMonitor namespace");
    let name = monitor["metadata"]["name"]
        .as_str()
        .expect("ServiceMonitor name");
    let spec = &monitor["spec"];
    for unsupported in [
        "podTargetLabels",
        "targetLabels",
        "sampleLimit",
        "attachMetadata",
    ] {
        assert!(
            spec.get(unsupported).is_none(),
            "ServiceMonitor {ns}/{name}: spec.{unsupported} is not translated by the harness"
        );
    }
    assert!(
        spec["selector"].get("matchExpressions").is_none(),
        "ServiceMonitor {ns}/{name}: selector.matchExpressions is not translated by the harness"
    );
    // The monitor's own namespace unless namespaceSelector names others.
    let namespaces: Vec<Value> = match spec["namespaceSelector"]["matchNames"].as_array() {
        Some(names) if !names.is_empty() => names.clone(),
        _ => {
            assert!(
                spec["namespaceSelector"]["any"] != json!(true),
                "ServiceMonitor {ns}/{name}: namespaceSelector.any is not translated"
            );
            vec![ns.into()]
        }
    };
    let mut selector = Vec::new();
    if let Some(labels) = spec["selector"]["matchLabels"].as_object() {
        for (k, v) in labels {
            let k = sanitize(k);
            selector.push(json!({
                "action": "keep",
                "source_labels": [
                    format!("__meta_kubernetes_service_label_{k}"),
                    format!("__meta_kubernetes_service_labelpresent_{k}"),
                ],
                "regex": format!("({});true", v.as_str().expect("label value")),
            }));
        }
    }
    let endpoints = spec["endpoints"].as_array().expect("spec.endpoints");
    endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let port = e["port"]
                .as_str()
                .unwrap_or_else(|| panic!("ServiceMonitor {ns}/{name}: endpoint {i} has no port name (targetPort is not translated)"));
            for unsupported in ["tlsConfig", "bearerTokenSecret", "authorization", "basicAuth", "oauth2", "params", "proxyUrl"] {
                assert!(
                    e.get(unsupported).is_none(),
                    "ServiceMonitor {ns}/{name}: endpoints[{i}].{unsupported} is not translated by the harness"
                );
            }
            let mut relabel = selector.clone();
            relabel.push(json!({
                "action": "keep",
                "source_labels": ["__meta_kubernetes_endpoint_port_name"],
                "regex": port,
            }));
            for kind in ["Node", "Pod"] {
                relabel.push(json!({
                    "source_labels": [
                        "__meta_kubernetes_endpoint_address_target_kind",
                        "__meta_kubernetes_endpoint_address_target_name",
                    ],
                    "separator": ";",
                    "regex": format!("{kind};(.*)"),
                    "replacement": "${1}",
                    "target_label": kind.to_ascii_lowercase(),
                }));
            }
            for (source, target) in [
                ("__meta_kubernetes_namespace", "namespace"),
                ("__meta_kubernetes_service_name", "service"),
                ("__meta_kubernetes_pod_name", "pod"),
                ("__meta_kubernetes_pod_container_name", "container"),
                ("__meta_kubernetes_service_name", "job"),
            ] {
                relabel.push(json!({
                    "source_labels": [source], "target_label": target, "replacement": "${1}",
                }));
            }
            if let Some(job_label) = spec["jobLabel"].as_str() {
                relabel.push(json!({
                    "source_labels": [format!("__meta_kubernetes_service_label_{}", sanitize(job_label))],
                    "target_label": "job", "regex": "(.+)", "replacement": "${1}",
                }));
            }
            relabel.push(json!({ "target_label": "endpoint", "replacement": port }));
            for r in e["relabelings"].as_array().into_iter().flatten() {
                relabel.push(relabel_config(r));
            }
            let mut config = json!({
                "job_name": format!("serviceMonitor/{ns}/{name}/{i}"),
                "honor_labels": e["honorLabels"].as_bool().unwrap_or(false),
                "metrics_path": e["path"].as_str().unwrap_or("/metrics"),
                "scheme": e["scheme"].as_str().unwrap_or("http"),
                "kubernetes_sd_configs": [{
                    "role": "endpoints",
                    "kubeconfig_file": kubeconfig,
                    "namespaces": { "names": namespaces },
                }],
                "relabel_configs": relabel,
            });
            if let Some(every) = interval.or(e["interval"].as_str()) {
                config["scrape_interval"] = every.into();
                // The scrape timeout must not exceed the interval (the default is 10 s).
                config["scrape_timeout"] = every.into();
            }
            if let Some(timeout) = e["scrapeTimeout"].as_str() {
                config["scrape_timeout"] = timeout.into();
            }
            if let Some(m) = e["metricRelabelings"].as_array() {
                config["metric_relabel_configs"] = m.iter().map(relabel_config).collect();
            }
            config
        })
        .collect()
}

/// The chart's PrometheusRule rendered by `helm template` with `sets` (for example
/// `prometheusRule.forAll=20s`), as the `groups` of a Prometheus rule file.
pub fn chart_rules(kubeconfig: &Path, namespace: &str, sets: &[&str]) -> Value {
    let chart = repo_root().join("charts/skiff");
    let mut args = vec![
        "template",
        "skiff",
        chart.to_str().unwrap(),
        "--namespace",
        namespace,
        "--show-only",
        "templates/prometheusrule.yaml",
        "--set",
        "prometheusRule.enabled=true",
    ];
    for set in sets {
        args.extend(["--set", set]);
    }
    let text = helm_stdout(kubeconfig, &args);
    let rule: Value = serde_saphyr::from_str(&text)
        .unwrap_or_else(|e| panic!("helm template's PrometheusRule: {e}\n{text}"));
    assert_eq!(rule["kind"], "PrometheusRule", "{text}");
    json!({ "groups": rule["spec"]["groups"] })
}

/// The chart's ServiceMonitor for the operator, rendered by `helm template` with `sets`
/// (for the unit tests; the e2e test reads the installed one from the API).
pub fn chart_operator_monitor(kubeconfig: &Path, namespace: &str, sets: &[&str]) -> Value {
    let chart = repo_root().join("charts/skiff");
    let mut args = vec![
        "template",
        "skiff",
        chart.to_str().unwrap(),
        "--namespace",
        namespace,
        "--show-only",
        "templates/operator-monitor.yaml",
        "--set",
        "operator.monitor.enabled=true",
    ];
    for set in sets {
        args.extend(["--set", set]);
    }
    let text = helm_stdout(kubeconfig, &args);
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("operator ServiceMonitor: {e}"))
}

/// The cluster's Prometheus, through its HTTP API.
pub struct Prometheus {
    http: reqwest::Client,
}

impl Default for Prometheus {
    fn default() -> Self {
        Self::new()
    }
}

/// Percent-encodes a query-string value.
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Prometheus {
    pub fn new() -> Prometheus {
        Prometheus {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
        }
    }

    /// Writes the scrape configs and rule groups (replacing the earlier ones) and reloads.
    /// Returns false, without a reload, when both files already hold exactly these.
    pub async fn configure(&self, scrape_configs: &[Value], rules: &Value) -> bool {
        let dir = prometheus_dir();
        std::fs::create_dir_all(dir.join("rules")).unwrap();
        // JSON is YAML: Prometheus reads both files as written here.
        let config = json!({
            "global": { "scrape_interval": "5s", "scrape_timeout": "4s", "evaluation_interval": "5s" },
            "rule_files": ["rules/*.yaml"],
            "scrape_configs": scrape_configs,
        });
        let files = [
            (dir.join("rules/skiff.yaml"), rules.to_string()),
            (dir.join("prometheus.yml"), config.to_string()),
        ];
        if files
            .iter()
            .all(|(path, text)| std::fs::read_to_string(path).ok().as_ref() == Some(text))
        {
            return false;
        }
        for (path, text) in &files {
            std::fs::write(path.with_extension("tmp"), text).unwrap();
            std::fs::rename(path.with_extension("tmp"), path).unwrap();
        }
        let r = self
            .http
            .post(format!("{PROMETHEUS_URL}/-/reload"))
            .send()
            .await
            .expect("POST /-/reload");
        let status = r.status();
        let body = r.text().await.unwrap_or_default();
        assert!(
            status.is_success(),
            "Prometheus refused the config ({status}): {body}"
        );
        true
    }

    /// GETs `/api/v1/<path>` and returns `data`, or the error Prometheus gave.
    pub async fn api(&self, path_and_query: &str) -> Result<Value, String> {
        let r = self
            .http
            .get(format!("{PROMETHEUS_URL}/api/v1/{path_and_query}"))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let body = r.text().await.map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body:.300}"))?;
        if v["status"] != "success" {
            return Err(format!(
                "{}: {}",
                v["errorType"].as_str().unwrap_or("error"),
                v["error"].as_str().unwrap_or(&body)
            ));
        }
        Ok(v["data"].clone())
    }

    /// An instant query: the result's samples (a scalar or string counts as one), or the
    /// parse or evaluation error.
    pub async fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let data = self.api(&format!("query?query={}", encode(expr))).await?;
        match data["resultType"].as_str() {
            Some("vector") | Some("matrix") => {
                Ok(data["result"].as_array().cloned().unwrap_or_default())
            }
            Some(_) => Ok(vec![data["result"].clone()]),
            None => Err(format!("no resultType in {data}")),
        }
    }

    /// Active targets: (scrape pool, labels, health, last error).
    pub async fn targets(&self) -> Vec<(String, Value, String, String)> {
        let data = self.api("targets?state=active").await.expect("targets");
        data["activeTargets"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                (
                    t["scrapePool"].as_str().unwrap_or("").to_string(),
                    t["labels"].clone(),
                    t["health"].as_str().unwrap_or("").to_string(),
                    t["lastError"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }

    /// `/api/v1/alerts`: every pending or firing alert.
    pub async fn alerts(&self) -> Vec<Value> {
        self.api("alerts").await.expect("alerts")["alerts"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The metric families Prometheus has metadata for (from the scraped HELP and TYPE
    /// lines, so a labelled counter that was never incremented is known too).
    pub async fn metric_families(&self) -> BTreeSet<String> {
        self.api("metadata")
            .await
            .expect("metadata")
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Waits until every scrape pool in `pools` has `min` targets, all up.
    pub async fn wait_targets_up(&self, pools: &[(String, usize)], timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let targets = self.targets().await;
            let missing: Vec<String> = pools
                .iter()
                .filter_map(|(pool, min)| {
                    let mine: Vec<_> = targets.iter().filter(|t| &t.0 == pool).collect();
                    let up = mine.iter().filter(|t| t.2 == "up").count();
                    (up < *min || up < mine.len()).then(|| {
                        format!(
                            "{pool}: {up} of {} up (want {min}){}",
                            mine.len(),
                            mine.iter()
                                .filter(|t| !t.3.is_empty())
                                .map(|t| format!("; {}", t.3))
                                .collect::<String>()
                        )
                    })
                })
                .collect();
            if missing.is_empty() {
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "timed out after {timeout:?} waiting for the scrape targets: {}",
                    missing.join(" | ")
                );
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

#[cfg(test)]
mod tests;
