//! Issue #17's proof on real components: the cluster's Prometheus (e2e/cluster) scrapes
//! the farm through its Kubernetes service discovery, driven by the ServiceMonitors the
//! operator and the chart create (translated by the harness, see e2e/src/prometheus.rs),
//! and evaluates the chart's rules with short `for:` (prometheusRule.forAll). After a load
//! phase against real VirtualServers (a static site, a php-fpm pool, a pool whose backend
//! is down, a config reload and a scale-up):
//! - every dashboard query (panel targets and variable queries) and every rule
//!   expression parses and returns data. An alert that does not fire is checked through
//!   its expression with `bool` comparisons, which must return data (and must read
//!   metrics known to Prometheus, so a misspelled name cannot pass); counters that only
//!   move on failures start at 0, and the static site serves HTTPS from its own Secret
//!   so the certificate expiry has data;
//! - the pool-down, 5xx and certificate-expiry alerts reach `firing` within their
//!   shortened `for`.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::ListParams;

use serde_json::{json, Value};
use skiff_e2e::certs::{nearly_expired, tls_secret};
use skiff_e2e::prometheus::{chart_rules, scrape_configs, service_monitors, Prometheus};
use skiff_e2e::queries::{all_dashboard_queries, metric_names, rule_queries, Query};
use skiff_e2e::{
    install_third_party_crds, remove_crd, repo_root, wait_condition, wait_for, wait_http, Load,
    Release, PHP_FPM_IMAGE,
};
use skiff_operator::crd::VirtualServer;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// The alerts' `for:` in this test (prometheusRule.forAll), instead of 2m to 1h.
const FOR: Duration = Duration::from_secs(20);

/// An alert's own expression is empty unless it fires: it is checked through its form
/// with `bool` comparisons (see `skiff_e2e::queries::unfiltered`), which must return data.
fn is_alert_condition(q: &Query) -> bool {
    q.source.starts_with("alert ") && !q.source.ends_with(BOOL_FORM)
}

/// How `rule_queries` names an alert's `bool` form.
const BOOL_FORM: &str = "(comparisons as bool)";

/// The alerts this run provokes: (alertname, labels they must carry).
fn expected_alerts(ns: &str) -> Vec<(String, BTreeMap<&'static str, String>)> {
    let labels = |extra: &[(&'static str, &str)]| {
        let mut m: BTreeMap<&'static str, String> = [
            ("namespace", ns.to_string()),
            ("virtualserver", "broken".to_string()),
        ]
        .into();
        for (k, v) in extra {
            m.insert(k, v.to_string());
        }
        m
    };
    let mut out = vec![(
        "SkiffPoolNoEndpointUp".to_string(),
        labels(&[("pool", "gone")]),
    )];
    // Every request to `broken` is a 5xx: all three availability burn-rate windows fire.
    for burn in ["14.4", "6", "1"] {
        out.push((
            "SkiffAvailabilityBudgetBurn".to_string(),
            labels(&[("burn_rate", burn)]),
        ));
    }
    // The site's certificate has 2 of its 32 days left: under the alert's sixth.
    out.push((
        "SkiffCertificateExpiringSoon".to_string(),
        [
            ("namespace", ns.to_string()),
            ("virtualserver", "site".to_string()),
            ("vhost", "site".to_string()),
        ]
        .into(),
    ));
    out
}

fn matches(alert: &Value, name: &str, labels: &BTreeMap<&'static str, String>) -> bool {
    alert["labels"]["alertname"] == name
        && labels
            .iter()
            .all(|(k, v)| alert["labels"][*k].as_str() == Some(v.as_str()))
}

const SUFFIXES: [&str; 6] = ["_total", "_bucket", "_count", "_sum", "_created", "_info"];

/// Whether Prometheus knows `name`: a scraped family (OpenMetrics names counters and
/// histograms without their `_total`/`_bucket`... suffix) or a recording rule.
fn known(name: &str, families: &BTreeSet<String>, records: &BTreeSet<String>) -> bool {
    if families.contains(name) || records.contains(name) {
        return true;
    }
    SUFFIXES.iter().any(|s| {
        name.strip_suffix(s)
            .is_some_and(|base| families.contains(base))
    })
}

/// Where a metric Prometheus has never seen is registered: skiff and the operator leave a
/// labelled family out of /metrics until its first sample (no HELP/TYPE either), so an
/// error counter that never counted, or the TLS expiry of a farm without TLS, is unknown
/// to Prometheus. The name must then be registered in server/src/metrics/mod.rs or
/// operator/src/metrics.rs (as `"name"` under the registry's `skiff` or
/// `skiff_operator` prefix), so a misspelling still fails.
fn registered_in_source(name: &str) -> Option<&'static str> {
    let mut base = name;
    for s in SUFFIXES {
        if let Some(b) = base.strip_suffix(s) {
            base = b;
            break;
        }
    }
    let (file, rest) = match base.strip_prefix("skiff_operator_") {
        Some(rest) => ("operator/src/metrics.rs", rest),
        None => ("server/src/metrics/mod.rs", base.strip_prefix("skiff_")?),
    };
    let text = std::fs::read_to_string(repo_root().join(file)).ok()?;
    text.contains(&format!("\"{rest}\"")).then_some(file)
}

/// What the alert watcher saw: for each expected alert (by index), how long after it was
/// first seen pending it was first seen firing (`None` when no pending was seen), and the
/// last `/api/v1/alerts`.
type Watched = (BTreeMap<usize, Option<Duration>>, Vec<Value>);

/// Polls `/api/v1/alerts` every second until every expected alert is firing.
async fn watch_alerts(
    expected: Vec<(String, BTreeMap<&'static str, String>)>,
    timeout: Duration,
) -> Result<Watched, String> {
    let prom = Prometheus::new();
    let mut pending_since: BTreeMap<usize, Instant> = BTreeMap::new();
    let mut fired: BTreeMap<usize, Option<Duration>> = BTreeMap::new();
    let deadline = Instant::now() + timeout;
    let mut last = Vec::new();
    while fired.len() < expected.len() {
        last = prom.alerts().await;
        for (i, (name, labels)) in expected.iter().enumerate() {
            if fired.contains_key(&i) {
                continue;
            }
            let state = last
                .iter()
                .find(|a| matches(a, name, labels))
                .map(|a| a["state"].as_str().unwrap_or("").to_string());
            match state.as_deref() {
                Some("pending") => {
                    pending_since.entry(i).or_insert_with(Instant::now);
                }
                Some("firing") => {
                    fired.insert(i, pending_since.get(&i).map(Instant::elapsed));
                }
                // Resolved before firing: its pending phase starts again.
                _ => {
                    pending_since.remove(&i);
                }
            }
        }
        if Instant::now() >= deadline {
            let missing: Vec<String> = expected
                .iter()
                .enumerate()
                .filter(|(i, _)| !fired.contains_key(i))
                .map(|(_, (n, l))| format!("{n} {l:?}"))
                .collect();
            return Err(format!(
                "alerts not firing after {timeout:?}: {missing:?}\n/api/v1/alerts: {}",
                serde_json::to_string_pretty(&last).unwrap()
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok((fired, last))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_and_rule_has_data_and_alerts_fire() {
    let Some(cluster) = skiff_e2e::cluster().await else {
        return;
    };
    let t0 = Instant::now();
    let ns = cluster.namespace("obs").await;
    // The ServiceMonitor CRD makes the chart create the operator's ServiceMonitor
    // (operator.monitor.enabled=auto) and the operator create one per VirtualServer.
    install_third_party_crds(&cluster).await;
    let release = Release::install(
        &cluster,
        &ns,
        &["operator.replicas=1", "operator.monitor.interval=5s"],
    )
    .await;
    ns.apply::<ConfigMap>(json!({
        "metadata": { "name": "files" },
        "data": { "index.html": "static\n", "big.txt": "x".repeat(256 * 1024) }
    }))
    .await;
    let resources = json!({ "requests": { "cpu": "20m", "memory": "16Mi" } });
    let php_rule = |pool: &str| {
        json!([{ "name": "php", "match": { "extensions": ["php"] },
            "action": { "fastcgi": { "pool": pool, "documentRoot": "/var/www/html" } } }])
    };
    // The site serves HTTPS from a Secret of its own, so the certificate expiry metric
    // and its alert have data (2 of the certificate's 32 days are left: the alert fires).
    let (crt, key) = nearly_expired("site.example");
    ns.apply::<Secret>(tls_secret("site-cert", &crt, &key))
        .await;
    let site_spec = json!({
        "hosts": ["site.example"], "content": { "configMap": "files" }, "replicas": 1,
        "resources": resources, "tls": { "secretName": "site-cert" },
    });
    ns.apply::<VirtualServer>(json!({ "metadata": { "name": "site" }, "spec": site_spec }))
        .await;
    ns.apply::<VirtualServer>(json!({
        "metadata": { "name": "php" },
        "spec": {
            "hosts": ["php.example"], "content": { "configMap": "files" }, "replicas": 1,
            "resources": resources, "rules": php_rule("php"),
            "pools": [{ "name": "php", "protocol": "fastcgi", "image": PHP_FPM_IMAGE,
                "placement": "pool", "port": 9000, "resources": resources,
                "env": { "FPM_LISTEN": "0.0.0.0:9000" } }]
        }
    }))
    .await;
    // A pool whose backend is down: nothing listens on the edge pod's port 9, so every
    // PHP request is a 502 and the endpoint is marked down.
    ns.apply::<VirtualServer>(json!({
        "metadata": { "name": "broken" },
        "spec": {
            "hosts": ["broken.example"], "content": { "configMap": "files" }, "replicas": 1,
            "resources": resources, "rules": php_rule("gone"),
            "pools": [{ "name": "gone", "protocol": "fastcgi", "endpoints": ["127.0.0.1:9"] }]
        }
    }))
    .await;
    let mut address = BTreeMap::new();
    for name in ["site", "php", "broken"] {
        let vs = wait_condition(&ns, name, "Ready", "True").await;
        address.insert(
            name,
            format!("http://{}", vs.status.unwrap().address.unwrap()),
        );
    }
    wait_http(
        &format!("{}/index.php", address["php"]),
        Duration::from_secs(120),
        |r| r.status == 200,
    )
    .await;
    wait_http(
        &format!("{}/index.php", address["broken"]),
        Duration::from_secs(60),
        |r| r.status >= 500,
    )
    .await;
    eprintln!("[{:>4}s] VirtualServers ready", t0.elapsed().as_secs());

    // The ServiceMonitors, as the Prometheus Operator would read them, become scrape
    // configs; the chart's PrometheusRule (forAll) becomes the rule file.
    let monitors = service_monitors(&ns.client, &ns.name);
    let want_monitors = ["broken", "php", "site", "skiff-operator"];
    let monitors = wait_for(
        "the ServiceMonitors of the operator and of each VirtualServer",
        Duration::from_secs(60),
        || {
            let monitors = monitors.clone();
            async move {
                let list = monitors.list(&ListParams::default()).await.ok()?;
                let names: Vec<String> = list
                    .items
                    .iter()
                    .filter_map(|m| m.metadata.name.clone())
                    .collect();
                want_monitors
                    .iter()
                    .all(|w| names.iter().any(|n| n == w))
                    .then_some(list.items)
            }
        },
    )
    .await;
    let mut configs = Vec::new();
    for m in &monitors {
        let m = serde_json::to_value(m).unwrap();
        configs.extend(scrape_configs(&m, &cluster.kubeconfig, Some("5s")));
    }
    let for_all = format!("prometheusRule.forAll={}s", FOR.as_secs());
    let rules = chart_rules(&cluster.kubeconfig, &ns.name, &[&for_all]);
    let prom = Prometheus::new();
    prom.configure(&configs, &rules).await;
    let pools: Vec<(String, usize)> = configs
        .iter()
        .map(|c| (c["job_name"].as_str().unwrap().to_string(), 1))
        .collect();
    prom.wait_targets_up(&pools, Duration::from_secs(120)).await;
    eprintln!(
        "[{:>4}s] Prometheus scrapes {} ServiceMonitors",
        t0.elapsed().as_secs(),
        pools.len()
    );

    // From now on the expected alerts are watched: first seen pending, first seen firing.
    let expected = expected_alerts(&ns.name);
    let watcher = tokio::spawn(watch_alerts(expected.clone(), Duration::from_secs(420)));

    // A trickle of requests to the down pool for the rest of the test, so its endpoint
    // stays marked down (a failed endpoint is retried after a while) and 5xx keep coming.
    let trickle = {
        let url = format!("{}/index.php", address["broken"]);
        tokio::spawn(async move {
            let http = reqwest::Client::builder()
                .timeout(Duration::from_secs(3))
                .build()
                .unwrap();
            loop {
                let _ = http.get(&url).send().await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    // The load phase: static files (small, from the cache, and large), PHP, and the down
    // pool, while the site's config is hot-reloaded and the site scales up.
    let load_for = Duration::from_secs(60);
    let loads = [
        (
            "site /",
            Load::start(&format!("{}/", address["site"]), load_for, 2),
        ),
        (
            "site /big.txt",
            Load::start(&format!("{}/big.txt", address["site"]), load_for, 1),
        ),
        (
            "php /index.php",
            Load::start(&format!("{}/index.php", address["php"]), load_for, 2),
        ),
        (
            "broken /index.php",
            Load::start(&format!("{}/index.php", address["broken"]), load_for, 1),
        ),
    ];
    tokio::time::sleep(Duration::from_secs(10)).await;
    let mut reloaded = site_spec.clone();
    reloaded["rules"] = json!([{ "name": "hello", "match": { "path": "/hello" },
        "action": { "respond": { "status": 200, "body": "hot\n" } } }]);
    ns.apply::<VirtualServer>(json!({ "metadata": { "name": "site" }, "spec": reloaded }))
        .await;
    wait_http(
        &format!("{}/hello", address["site"]),
        Duration::from_secs(120),
        |r| r.body == "hot\n",
    )
    .await;
    eprintln!("[{:>4}s] config reloaded", t0.elapsed().as_secs());
    let mut scaled = reloaded.clone();
    scaled["replicas"] = json!(2);
    ns.apply::<VirtualServer>(json!({ "metadata": { "name": "site" }, "spec": scaled }))
        .await;
    let deployments = ns.api::<Deployment>();
    wait_for(
        "the site's Deployment to ask for 2 replicas",
        Duration::from_secs(60),
        || {
            let deployments = deployments.clone();
            async move {
                let d = deployments.get("site").await.ok()?;
                (d.spec?.replicas == Some(2)).then_some(())
            }
        },
    )
    .await;
    ns.wait_rollout("site", Duration::from_secs(120)).await;
    eprintln!("[{:>4}s] site scaled to 2 replicas", t0.elapsed().as_secs());
    for (what, load) in loads {
        let report = load.finish();
        eprintln!(
            "load {what}: {} requests, {} errors",
            report.requests,
            report.errors()
        );
        assert!(report.requests > 0, "{what}: no request got through");
        if what.starts_with("broken") {
            assert!(
                report.bad_status > 0,
                "{what}: the down pool must answer 5xx"
            );
        }
    }
    // The new pod is scraped too (the discovery follows the Endpoints).
    let site_pool = pools
        .iter()
        .find(|p| p.0.contains("/site/"))
        .unwrap()
        .0
        .clone();
    prom.wait_targets_up(&[(site_pool, 2)], Duration::from_secs(60))
        .await;

    // Alerts: each expected one reaches firing, within `for` of becoming pending.
    let (fired, last) = watcher
        .await
        .expect("alert watcher")
        .unwrap_or_else(|e| panic!("{e}"));
    for (i, took) in &fired {
        let (name, labels) = &expected[*i];
        match took {
            Some(took) => {
                eprintln!(
                    "firing: {name} {labels:?} ({}s after pending)",
                    took.as_secs()
                );
                // `for`, plus an evaluation interval (5 s) and the watcher's polling.
                assert!(
                    *took <= FOR + Duration::from_secs(12),
                    "{name} {labels:?} took {took:?} from pending to firing (for: {FOR:?})"
                );
            }
            None => eprintln!("firing: {name} {labels:?} (its pending phase was not seen)"),
        }
    }
    for a in &last {
        if !expected.iter().any(|(n, l)| matches(a, n, l)) {
            eprintln!(
                "also {}: {} {}",
                a["state"].as_str().unwrap_or("?"),
                a["labels"]["alertname"].as_str().unwrap_or("?"),
                a["labels"]
            );
        }
    }
    eprintln!("[{:>4}s] alerts fired", t0.elapsed().as_secs());

    // Every expression the project ships, sent to Prometheus.
    let mut queries: Vec<Query> = all_dashboard_queries(&repo_root().join("dashboards"));
    let dashboard_count = queries.len();
    queries.extend(rule_queries(&rules));
    let records: BTreeSet<String> = rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().iter())
        .filter_map(|r| r["record"].as_str().map(str::to_string))
        .collect();
    let allowed = |q: &Query| {
        is_alert_condition(q).then_some(&("", "not firing (its bool form returned data)"))
    };
    // Recording rules over long windows and their dependants fill within a few
    // evaluations: empty results are asked again for up to a minute.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut with_data, mut failures, mut allowed_empty);
    loop {
        with_data = 0;
        failures = Vec::new();
        allowed_empty = Vec::new();
        let families = prom.metric_families().await;
        for q in &queries {
            match prom.query(&q.expr).await {
                Err(e) => failures.push(format!("{}: {e}\n    {}", q.source, q.expr)),
                Ok(result) if !result.is_empty() => with_data += 1,
                Ok(_) => match allowed(q) {
                    Some((_, reason)) => {
                        let mut unknown = Vec::new();
                        let mut absent = Vec::new();
                        for n in metric_names(&q.expr) {
                            if known(&n, &families, &records) {
                                continue;
                            }
                            match registered_in_source(&n) {
                                Some(file) => absent.push(format!("{n}, registered in {file}")),
                                None => unknown.push(n),
                            }
                        }
                        if unknown.is_empty() {
                            let absent = if absent.is_empty() {
                                String::new()
                            } else {
                                format!(
                                    " (not on /metrics before its first sample: {})",
                                    absent.join("; ")
                                )
                            };
                            allowed_empty.push(format!("{}: {reason}{absent}", q.source));
                        } else {
                            failures.push(format!(
                                "{}: empty, and no metric {unknown:?} is known to Prometheus or registered in metrics.rs\n    {}",
                                q.source, q.expr
                            ));
                        }
                    }
                    None => failures.push(format!("{}: no data\n    {}", q.source, q.expr)),
                },
            }
        }
        if failures.is_empty() || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    trickle.abort();
    eprintln!("allowed to be empty in this run ({}):", allowed_empty.len());
    for a in &allowed_empty {
        eprintln!("  {a}");
    }
    assert!(
        failures.is_empty(),
        "{} of {} queries failed:\n{}",
        failures.len(),
        queries.len(),
        failures.join("\n")
    );
    println!(
        "{} queries ({dashboard_count} from the dashboards, {} rules), {with_data} returned data; {} alerts fired as expected",
        queries.len(),
        queries.len() - dashboard_count,
        fired.len()
    );
    eprintln!(
        "{} queries, {with_data} returned data; {} alerts fired as expected",
        queries.len(),
        fired.len()
    );

    // Prometheus back to no target and no rule, then the release and the ServiceMonitor
    // CRD go, so the next tests see the cluster as `e2e/cluster up` leaves it.
    prom.configure(&[], &json!({ "groups": [] })).await;
    release.uninstall();
    remove_crd(&cluster, "servicemonitors.monitoring.coreos.com").await;
}
