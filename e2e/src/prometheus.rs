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
    pub async fn configure(&self, scrape_configs: &[Value], rules: &Value) {
        let dir = prometheus_dir();
        std::fs::create_dir_all(dir.join("rules")).unwrap();
        // JSON is YAML: Prometheus reads both files as written here.
        let rules_path = dir.join("rules/skiff.yaml");
        std::fs::write(rules_path.with_extension("tmp"), rules.to_string()).unwrap();
        std::fs::rename(rules_path.with_extension("tmp"), &rules_path).unwrap();
        let config = json!({
            "global": { "scrape_interval": "5s", "scrape_timeout": "4s", "evaluation_interval": "5s" },
            "rule_files": ["rules/*.yaml"],
            "scrape_configs": scrape_configs,
        });
        let path = dir.join("prometheus.yml");
        std::fs::write(path.with_extension("tmp"), config.to_string()).unwrap();
        std::fs::rename(path.with_extension("tmp"), &path).unwrap();
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
mod tests {
    use super::*;

    /// The ServiceMonitor the operator writes for a VirtualServer
    /// (operator/src/children/third_party.rs), as the API returns it.
    fn edge_monitor() -> Value {
        json!({
            "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
            "metadata": { "name": "site", "namespace": "web" },
            "spec": {
                "selector": { "matchLabels": {
                    "app.kubernetes.io/instance": "site", "skiff.dev/metrics": "true" } },
                "endpoints": [{
                    "port": "admin", "path": "/metrics", "interval": "30s",
                    "relabelings": [{
                        "sourceLabels": ["__meta_kubernetes_service_label_app_kubernetes_io_instance"],
                        "targetLabel": "virtualserver", "action": "replace" }]
                }]
            }
        })
    }

    #[test]
    fn translates_the_operators_service_monitor() {
        let configs = scrape_configs(&edge_monitor(), Path::new("/k/admin.kubeconfig"), None);
        assert_eq!(configs.len(), 1);
        let c = &configs[0];
        assert_eq!(c["job_name"], "serviceMonitor/web/site/0");
        assert_eq!(c["honor_labels"], false);
        assert_eq!(c["scrape_interval"], "30s");
        assert_eq!(c["metrics_path"], "/metrics");
        assert_eq!(
            c["kubernetes_sd_configs"],
            json!([{ "role": "endpoints", "kubeconfig_file": "/k/admin.kubeconfig",
                     "namespaces": { "names": ["web"] } }])
        );
        let relabel = c["relabel_configs"].as_array().unwrap();
        assert_eq!(
            relabel[0],
            json!({ "action": "keep", "source_labels": [
                "__meta_kubernetes_service_label_app_kubernetes_io_instance",
                "__meta_kubernetes_service_labelpresent_app_kubernetes_io_instance"],
                "regex": "(site);true" })
        );
        assert_eq!(
            relabel[1]["source_labels"][0],
            "__meta_kubernetes_service_label_skiff_dev_metrics"
        );
        assert_eq!(
            relabel[2],
            json!({ "action": "keep", "source_labels": ["__meta_kubernetes_endpoint_port_name"], "regex": "admin" })
        );
        let targets: Vec<&str> = relabel
            .iter()
            .filter_map(|r| r["target_label"].as_str())
            .collect();
        assert_eq!(
            targets,
            [
                "node",
                "pod",
                "namespace",
                "service",
                "pod",
                "container",
                "job",
                "endpoint",
                "virtualserver"
            ]
        );
        // The monitor's own relabeling comes last, in Prometheus's spelling.
        assert_eq!(
            relabel.last().unwrap(),
            &json!({ "source_labels": ["__meta_kubernetes_service_label_app_kubernetes_io_instance"],
                     "target_label": "virtualserver", "action": "replace" })
        );
        let fast = scrape_configs(&edge_monitor(), Path::new("/k"), Some("5s"));
        assert_eq!(
            (&fast[0]["scrape_interval"], &fast[0]["scrape_timeout"]),
            (&json!("5s"), &json!("5s"))
        );
    }

    #[test]
    fn refuses_what_it_does_not_translate() {
        let mut m = edge_monitor();
        m["spec"]["selector"]["matchExpressions"] = json!([{ "key": "a", "operator": "Exists" }]);
        assert!(std::panic::catch_unwind(|| scrape_configs(&m, Path::new("/k"), None)).is_err());
        let mut m = edge_monitor();
        m["spec"]["endpoints"][0]["tlsConfig"] = json!({ "insecureSkipVerify": true });
        assert!(std::panic::catch_unwind(|| scrape_configs(&m, Path::new("/k"), None)).is_err());
    }

    #[test]
    fn encodes_queries() {
        assert_eq!(
            encode(r#"a{b=~"c.+"} [5m]"#),
            "a%7Bb%3D~%22c.%2B%22%7D%20%5B5m%5D"
        );
    }

    /// The chart's own templates, rendered by the project's helm (install-tools.sh).
    fn helm_available() -> bool {
        let ok = crate::tool("helm").exists();
        if !ok {
            eprintln!(
                "SKIPPED: no helm at {} (e2e/scripts/install-tools.sh)",
                crate::tool("helm").display()
            );
        }
        ok
    }

    #[test]
    fn translates_the_charts_operator_monitor_with_honor_labels() {
        if !helm_available() {
            return;
        }
        let m = chart_operator_monitor(
            Path::new("/nonexistent"),
            "ops",
            &["operator.monitor.interval=5s"],
        );
        let c = &scrape_configs(&m, Path::new("/k"), None)[0];
        assert_eq!(c["job_name"], "serviceMonitor/ops/skiff-operator/0");
        assert_eq!(c["honor_labels"], true);
        assert_eq!(c["scrape_interval"], "5s");
        assert_eq!(
            c["kubernetes_sd_configs"][0]["namespaces"]["names"],
            json!(["ops"])
        );
        let keep_port = c["relabel_configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["source_labels"][0] == "__meta_kubernetes_endpoint_port_name")
            .unwrap();
        assert_eq!(keep_port["regex"], "metrics");
    }

    /// The real Prometheus (install-prometheus.sh's build) accepts the generated scrape
    /// configs and the chart's rules: it is started on them and must become ready (a bad
    /// config or rule file makes it exit at startup).
    #[test]
    fn prometheus_loads_the_generated_config_and_rules_and_parses_every_expression() {
        let binary = crate::tool("prometheus");
        if !binary.exists() || !helm_available() {
            eprintln!(
                "SKIPPED: no {} (e2e/scripts/install-tools.sh)",
                binary.display()
            );
            return;
        }
        let dir = std::env::temp_dir().join(format!("skiff-prom-check-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("rules")).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n\
             users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n\
             current-context: x\n",
        )
        .unwrap();
        let operator = chart_operator_monitor(Path::new("/nonexistent"), "ops", &[]);
        let mut configs = scrape_configs(&edge_monitor(), &kubeconfig, Some("5s"));
        configs.extend(scrape_configs(&operator, &kubeconfig, Some("5s")));
        let config = json!({
            "global": { "scrape_interval": "5s", "evaluation_interval": "5s" },
            "rule_files": ["rules/*.yaml"],
            "scrape_configs": configs,
        });
        std::fs::write(dir.join("prometheus.yml"), config.to_string()).unwrap();
        let rules = chart_rules(
            Path::new("/nonexistent"),
            "ops",
            &["prometheusRule.forAll=20s"],
        );
        std::fs::write(dir.join("rules/skiff.yaml"), rules.to_string()).unwrap();
        let log = std::fs::File::create(dir.join("log")).unwrap();
        let mut child = std::process::Command::new(&binary)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg("--web.listen-address=127.0.0.1:0")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let deadline = Instant::now() + Duration::from_secs(30);
        let outcome = loop {
            let text = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
            if let Some(status) = child.try_wait().unwrap() {
                break Err(format!("prometheus exited ({status}):\n{text}"));
            }
            if text.contains("Server is ready to receive web requests") {
                break Ok(text);
            }
            if Instant::now() >= deadline {
                break Err(format!("prometheus not ready after 30 s:\n{text}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        // Every expression the project ships must parse (there is no data here: the e2e
        // test, tests/observability.rs, checks that they return some).
        let parse_errors = outcome.as_ref().ok().map(|text| {
            let port = text
                .lines()
                .filter(|l| l.contains("msg=\"Listening on\""))
                .find_map(|l| {
                    l.rsplit("address=127.0.0.1:")
                        .next()?
                        .trim()
                        .parse::<u16>()
                        .ok()
                })
                .expect("the port Prometheus listens on");
            let http = reqwest::blocking::Client::new();
            let mut queries =
                crate::queries::all_dashboard_queries(&repo_root().join("dashboards"));
            queries.extend(crate::queries::rule_queries(&rules));
            let errors: Vec<String> = queries
                .iter()
                .filter_map(|q| {
                    let url = format!(
                        "http://127.0.0.1:{port}/api/v1/query?query={}",
                        encode(&q.expr)
                    );
                    let body = http.get(url).send().and_then(|r| r.text()).unwrap();
                    let v: Value = serde_json::from_str(&body).unwrap();
                    (v["status"] != "success")
                        .then(|| format!("{}: {}\n    {}", q.source, v["error"], q.expr))
                })
                .collect();
            (queries.len(), errors)
        });
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&dir);
        let text = outcome.unwrap_or_else(|e| panic!("{e}"));
        assert!(!text.contains("level=ERROR msg=\"Error loading"), "{text}");
        let (count, errors) = parse_errors.unwrap();
        assert!(
            errors.is_empty(),
            "{} of {count} expressions do not parse:\n{}",
            errors.len(),
            errors.join("\n")
        );
        eprintln!("{count} expressions parse in Prometheus");
    }

    #[test]
    fn renders_the_charts_rules_with_short_fors_and_the_same_expressions() {
        if !helm_available() {
            return;
        }
        let rendered = chart_rules(
            Path::new("/nonexistent"),
            "ops",
            &["prometheusRule.forAll=20s"],
        );
        let source: Value = serde_saphyr::from_str(
            &std::fs::read_to_string(repo_root().join("dashboards/rules/skiff-rules.yaml"))
                .unwrap(),
        )
        .unwrap();
        let rules = |v: &Value| -> Vec<Value> {
            v["groups"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|g| g["rules"].as_array().unwrap().clone())
                .collect()
        };
        let (got, want) = (rules(&rendered), rules(&source));
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(
                g["expr"], w["expr"],
                "the chart must not change an expression"
            );
            if g.get("alert").is_some() {
                assert_eq!(g["for"], "20s", "{}", g["alert"]);
            }
        }
    }
}
