//! The harness's translation of ServiceMonitors and rules, and a real Prometheus loading them.
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
        let mut queries = crate::queries::all_dashboard_queries(&repo_root().join("dashboards"));
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
        &std::fs::read_to_string(repo_root().join("dashboards/rules/skiff-rules.yaml")).unwrap(),
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
