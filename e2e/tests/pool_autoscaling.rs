//! A php-fpm pool that scales on busy workers, not CPU: its script sleeps 200 ms (a worker
//! waiting on a database), so under load its workers are all busy while its CPU stays
//! near zero. The HPA reads `skiff_pool_busy_ratio` from the cluster's prometheus-adapter
//! (over Prometheus, scraping the edge pods as the operator's ServiceMonitor says); the
//! pool scales up under load and back down after it, with no failed request throughout.
//! And the edge farm scales on requests per second per pod (the adapter's custom metric)
//! while its CPU stays under its target, and on the busy ratio of its Django sidecars,
//! whose capacity sums every edge pod's own workers.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::{json, Value};
use skiff_e2e::prometheus::{scrape_configs, service_monitors, Prometheus};
use skiff_e2e::{
    install_third_party_crds, tool, wait_condition, wait_for, wait_http, Cluster, Load, Release,
    TestNamespace, DJANGO_IMAGE, PHP_FPM_IMAGE,
};
use skiff_operator::crd::VirtualServer;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// `kubectl get --raw PATH` as JSON, or None while it fails (an API not yet served).
fn raw(kubeconfig: &Path, path: &str) -> Option<Value> {
    let out = Command::new(tool("kubectl"))
        .args(["get", "--raw", path])
        .env("KUBECONFIG", kubeconfig)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

/// The pool Deployment's replicas (spec, ready).
async fn replicas(deployments: &Api<Deployment>) -> (i32, i32) {
    let d = deployments.get("busy-php").await.expect("get busy-php");
    let spec = d.spec.and_then(|s| s.replicas).unwrap_or(0);
    let ready = d.status.and_then(|s| s.ready_replicas).unwrap_or(0);
    (spec, ready)
}

/// The highest CPU (millicores) metrics-server reports for the pool's pods.
fn pool_cpu_millis(kubeconfig: &Path, ns: &str) -> Option<f64> {
    let pods = raw(
        kubeconfig,
        &format!(
            "/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods?labelSelector=skiff.dev/pool%3Dphp"
        ),
    )?;
    pods["items"]
        .as_array()?
        .iter()
        .flat_map(|p| p["containers"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| {
            let cpu = c["usage"]["cpu"].as_str()?;
            Some(match cpu.strip_suffix('n') {
                Some(n) => n.parse::<f64>().ok()? / 1e6,
                None => cpu.strip_suffix('m')?.parse().ok()?,
            })
        })
        .reduce(f64::max)
}

/// What every test here starts from: a namespace with the chart (and the ServiceMonitor
/// CRD, so the operator makes one), the VirtualServer `name` with `spec` Ready and
/// answering `path`, Prometheus scraping its edge pods every 5 s as the ServiceMonitor
/// says, and the adapter serving `metric` (an API path under /apis, `{ns}` for the
/// namespace). Returns the release (drop it before the namespace), the namespace, the URL
/// of `path` and the metric's first answer.
async fn autoscaled_site(
    cluster: &Cluster,
    name: &str,
    spec: Value,
    path: &str,
    metric: &str,
) -> (Release, TestNamespace, String, Value) {
    let ns = cluster.namespace(name).await;
    install_third_party_crds(cluster).await;
    let release = Release::install(cluster, &ns, &["operator.replicas=1"]).await;
    ns.apply::<ConfigMap>(json!({
        "metadata": { "name": "files" }, "data": { "index.html": "static\n" }
    }))
    .await;
    ns.apply::<VirtualServer>(json!({ "metadata": { "name": name }, "spec": spec }))
        .await;
    let vs = wait_condition(&ns, name, "Ready", "True").await;
    let url = format!("http://{}{path}", vs.status.unwrap().address.unwrap());
    wait_http(&url, Duration::from_secs(120), |r| r.status == 200).await;

    let monitors = service_monitors(&ns.client, &ns.name);
    let monitor = wait_for(
        &format!("the ServiceMonitor of {name}"),
        Duration::from_secs(60),
        || {
            let monitors = monitors.clone();
            async move { monitors.get_opt(name).await.ok().flatten() }
        },
    )
    .await;
    let configs = scrape_configs(
        &serde_json::to_value(&monitor).unwrap(),
        &cluster.kubeconfig,
        Some("5s"),
    );
    Prometheus::new()
        .configure(&configs, &json!({ "groups": [] }))
        .await;

    let metric = metric.replace("{ns}", &ns.name);
    let first = wait_for(
        &format!("{metric} from prometheus-adapter"),
        Duration::from_secs(120),
        || {
            let v = raw(&cluster.kubeconfig, &metric);
            async move { v.filter(|v| v["items"].as_array().is_some_and(|i| !i.is_empty())) }
        },
    )
    .await;
    (release, ns, url, first)
}

/// Fast scale-up and a 30 s scale-down window, so a test sees both within minutes.
fn quick_behavior() -> Value {
    json!({
        "scaleUp": { "stabilizationWindowSeconds": 0,
            "policies": [{ "type": "Pods", "value": 2, "periodSeconds": 15 }] },
        "scaleDown": { "stabilizationWindowSeconds": 30,
            "policies": [{ "type": "Percent", "value": 100, "periodSeconds": 15 }] }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_scales_on_busy_workers_at_low_cpu_without_a_failed_request() {
    let Some(cluster) = skiff_e2e::cluster().await else {
        return;
    };
    let t0 = Instant::now();
    // CPU request 100m, target 70 % had it been on CPU: the sleeping workers stay far below.
    let spec = json!({
        "hosts": ["busy.example"], "content": { "configMap": "files" }, "replicas": 1,
        "resources": { "requests": { "cpu": "50m", "memory": "16Mi" } },
        "rules": [{ "name": "php", "match": { "extensions": ["php"] },
            "action": { "fastcgi": { "pool": "php", "documentRoot": "/var/www/html" } } }],
        "pools": [{ "name": "php", "protocol": "fastcgi", "image": PHP_FPM_IMAGE,
            "placement": "pool", "port": 9000, "workers": 2,
            "env": { "FPM_LISTEN": "0.0.0.0:9000" },
            "resources": { "requests": { "cpu": "100m", "memory": "32Mi" } },
            "autoscaling": { "minReplicas": 1, "maxReplicas": 5, "behavior": quick_behavior() } }]
    });
    // The adapter serves the pool's busy ratio (0 at rest) to the HPA's namespace.
    let (_release, ns, url, at_rest) = autoscaled_site(
        &cluster,
        "busy",
        spec,
        "/sleep.php",
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/skiff_pool_busy_ratio?labelSelector=virtualserver%3Dbusy,pool%3Dphp",
    )
    .await;
    eprintln!(
        "[{:>4}s] busy ratio at rest: {}",
        t0.elapsed().as_secs(),
        at_rest["items"][0]["value"]
    );

    // Load: 8 connections on 2 workers, each request 200 ms asleep.
    let deployments = ns.api::<Deployment>();
    let heavy = Load::start(&url, Duration::from_secs(60), 8);
    let scaled_up = Instant::now();
    let mut peak_cpu: f64 = 0.0;
    let mut peak = 1;
    while scaled_up.elapsed() < Duration::from_secs(56) {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (spec, ready) = replicas(&deployments).await;
        if let Some(cpu) = pool_cpu_millis(&cluster.kubeconfig, &ns.name) {
            peak_cpu = peak_cpu.max(cpu);
        }
        if spec > peak {
            peak = spec;
            eprintln!(
                "[{:>4}s] pool scaled to {spec} ({ready} ready), {:.0} s into the load",
                t0.elapsed().as_secs(),
                scaled_up.elapsed().as_secs_f64()
            );
        }
    }
    let heavy = heavy.finish();
    eprintln!(
        "[{:>4}s] heavy load: {} requests, {} failed; pool peaked at {peak} replicas; pool CPU peaked at {peak_cpu:.1}m of 100m requested",
        t0.elapsed().as_secs(),
        heavy.requests,
        heavy.errors()
    );
    assert!(
        peak >= 3,
        "the pool did not scale up on busy workers (peak {peak})"
    );
    assert!(
        peak_cpu < 70.0,
        "the pool's CPU reached {peak_cpu:.1}m: a CPU-based HPA (70 % of 100m) would have scaled too, which this test is to rule out"
    );

    // A trickle through the scale-down (a 30 s window, then 12 s of preStop drain): pods
    // leave while requests keep coming.
    let light = Load::start(&url, Duration::from_secs(80), 1);
    let down = Instant::now();
    let mut back_to_one = None;
    while down.elapsed() < Duration::from_secs(76) {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (spec, _) = replicas(&deployments).await;
        if spec == 1 && back_to_one.is_none() {
            back_to_one = Some(down.elapsed());
            eprintln!(
                "[{:>4}s] pool back to 1 replica, {:.0} s after the load dropped",
                t0.elapsed().as_secs(),
                down.elapsed().as_secs_f64()
            );
        }
    }
    let light = light.finish();
    eprintln!(
        "[{:>4}s] light load: {} requests, {} failed",
        t0.elapsed().as_secs(),
        light.requests,
        light.errors()
    );
    assert!(back_to_one.is_some(), "the pool did not scale back down");
    assert_eq!(
        (heavy.errors(), light.errors()),
        (0, 0),
        "failed requests while the pool scaled:\n{}\n{}",
        heavy.raw,
        light.raw
    );
    eprintln!(
        "zero failed requests of {} through scale-up and scale-down",
        heavy.requests + light.requests
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_edge_farm_scales_on_requests_per_second() {
    let Some(cluster) = skiff_e2e::cluster().await else {
        return;
    };
    let t0 = Instant::now();
    // A CPU request large enough that the load stays far under the CPU target: only the
    // request rate can scale the farm.
    let spec = json!({
        "hosts": ["rps.example"], "content": { "configMap": "files" },
        "resources": { "requests": { "cpu": "500m", "memory": "16Mi" } },
        "autoscaling": { "minReplicas": 1, "maxReplicas": 3, "targetRequestsPerSecond": 50 }
    });
    let (_release, ns, url, _) = autoscaled_site(
        &cluster,
        "rps",
        spec,
        "/",
        "/apis/custom.metrics.k8s.io/v1beta1/namespaces/{ns}/pods/*/skiff_http_requests_per_second",
    )
    .await;

    let deployments = ns.api::<Deployment>();
    let hpas = ns.api::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>();
    // Paced (2 connections, 10 ms between requests: about 200 requests/s), so the rate
    // is four times the target while the CPU stays far under its own.
    let load = Load::start_paced(&url, Duration::from_secs(60), 2, Duration::from_millis(10));
    let start = Instant::now();
    let mut scaled = None;
    let mut cpu_seen = Vec::new();
    while start.elapsed() < Duration::from_secs(56) {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let d = deployments.get("rps").await.unwrap();
        let spec = d.spec.and_then(|s| s.replicas).unwrap_or(0);
        let hpa = serde_json::to_value(hpas.get("rps").await.unwrap()).unwrap();
        // CPU until the farm has scaled: a scale-up then is the request rate's doing.
        for m in hpa["status"]["currentMetrics"]
            .as_array()
            .into_iter()
            .flatten()
        {
            match m["resource"]["current"]["averageUtilization"].as_i64() {
                Some(cpu) if scaled.is_none() => cpu_seen.push(cpu),
                _ => {}
            }
        }
        if spec >= 2 && scaled.is_none() {
            scaled = Some(start.elapsed());
            eprintln!(
                "[{:>4}s] edge farm scaled to {spec}, {:.0} s into the load; the HPA saw {}",
                t0.elapsed().as_secs(),
                start.elapsed().as_secs_f64(),
                hpa["status"]["currentMetrics"]
            );
        }
    }
    let load = load.finish();
    eprintln!(
        "[{:>4}s] load: {} requests, {} failed; CPU utilization the HPA saw until it scaled: {cpu_seen:?} (target 70)",
        t0.elapsed().as_secs(),
        load.requests,
        load.errors()
    );
    assert!(
        scaled.is_some(),
        "the edge farm did not scale on requests per second"
    );
    assert!(
        cpu_seen.iter().all(|&c| c < 70),
        "CPU had reached its target before the farm scaled, so CPU may have scaled it: {cpu_seen:?}"
    );
    assert_eq!(load.errors(), 0, "{}", load.raw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_django_sidecar_adds_edge_pods() {
    let Some(cluster) = skiff_e2e::cluster().await else {
        return;
    };
    let t0 = Instant::now();
    // Each edge pod runs uWSGI with 2 processes beside skiff; a Django view that sleeps
    // 300 ms keeps them busy at little CPU.
    let spec = json!({
        "hosts": ["side.example"], "content": { "configMap": "files" },
        "resources": { "requests": { "cpu": "200m", "memory": "16Mi" } },
        "rules": [{ "name": "django", "match": { "prefix": "/" },
            "action": { "uwsgi": { "pool": "django" } } }],
        "pools": [{ "name": "django", "protocol": "uwsgi", "image": DJANGO_IMAGE,
            "placement": "sidecar", "socket": "django.sock",
            "args": ["--socket", "/run/skiff/pools/django.sock", "--chmod-socket=666", "--processes", "2"],
            "resources": { "requests": { "cpu": "200m", "memory": "64Mi" } } }],
        "autoscaling": { "minReplicas": 1, "maxReplicas": 3, "behavior": quick_behavior() }
    });
    let metric = "/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/skiff_sidecar_busy_ratio?labelSelector=virtualserver%3Dside,pool%3Ddjango";
    let (_release, ns, url, _) =
        autoscaled_site(&cluster, "side", spec, "/slow/?seconds=0.3", metric).await;
    let metric = metric.replace("{ns}", &ns.name);

    // 6 connections, each with a request asleep in Django: 6 busy of 2 workers per pod.
    let deployments = ns.api::<Deployment>();
    let hpas = ns.api::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>();
    let load = Load::start(&url, Duration::from_secs(75), 6);
    let start = Instant::now();
    let mut scaled_to = 1;
    let mut cpu_when_scaled = None;
    let mut ratio_when_scaled = None;
    let mut ratio_at_three = None;
    while start.elapsed() < Duration::from_secs(70) {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let d = deployments.get("side").await.unwrap();
        let ready = d.status.and_then(|s| s.ready_replicas).unwrap_or(0);
        let spec = d.spec.and_then(|s| s.replicas).unwrap_or(0);
        if spec > scaled_to {
            let hpa = serde_json::to_value(hpas.get("side").await.unwrap()).unwrap();
            let metrics = hpa["status"]["currentMetrics"].clone();
            if scaled_to == 1 {
                let each = || metrics.as_array().into_iter().flatten();
                cpu_when_scaled =
                    each().find_map(|m| m["resource"]["current"]["averageUtilization"].as_i64());
                ratio_when_scaled =
                    each().find_map(|m| m["external"]["current"]["value"].as_str().map(quantity));
            }
            scaled_to = spec;
            eprintln!(
                "[{:>4}s] edge farm scaled to {spec}, {:.0} s into the load; the HPA saw {metrics}",
                t0.elapsed().as_secs(),
                start.elapsed().as_secs_f64()
            );
        }
        // Once 3 pods (6 workers) serve, the ratio counts all their workers: about 1, where
        // one pod's workers as the capacity would read about 3.
        if ready == 3 && start.elapsed() > Duration::from_secs(40) {
            let v = raw(&cluster.kubeconfig, &metric).expect("the sidecar busy ratio");
            ratio_at_three = v["items"][0]["value"].as_str().map(String::from);
        }
    }
    let load = load.finish();
    eprintln!(
        "[{:>4}s] load: {} requests, {} failed; busy ratio with 3 pods: {ratio_at_three:?}",
        t0.elapsed().as_secs(),
        load.requests,
        load.errors()
    );
    assert!(scaled_to >= 2, "a busy sidecar did not add edge pods");
    // The HPA scales on the metrics it has: CPU under its target, or not reported yet
    // (metrics-server's first sample can come after the first scale), and the sidecar's
    // busy ratio over its 0.7 target.
    assert!(
        ratio_when_scaled.is_some_and(|r| r > 0.7),
        "the farm scaled with the sidecar busy ratio at {ratio_when_scaled:?}"
    );
    assert!(
        cpu_when_scaled.is_none_or(|c| c < 70),
        "CPU ({cpu_when_scaled:?} %) may have scaled the farm, not the sidecar's busy workers"
    );
    let ratio = quantity(
        ratio_at_three
            .as_deref()
            .expect("the farm never had 3 ready pods under the load"),
    );
    assert!(
        ratio < 2.0,
        "with 3 edge pods of 2 workers and 6 requests in flight the ratio read {ratio}: the capacity is not summed over the edge pods"
    );
    assert_eq!(load.errors(), 0, "{}", load.raw);
}

/// A Kubernetes quantity as the adapter writes it ("1500m", "2").
fn quantity(q: &str) -> f64 {
    match q.strip_suffix('m') {
        Some(milli) => milli.parse::<f64>().unwrap() / 1000.0,
        None => q.parse().unwrap(),
    }
}
