//! Cluster DNS (CoreDNS, run by e2e/cluster) as pods see it: a skiff "front" proxies to a
//! pool named by a headless Service's DNS name, which its pure-Rust resolver reads through
//! the pod's resolv.conf. The name must resolve to both backend pods, and requests must
//! reach both, without any config reload.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::api::{ListParams, LogParams};
use serde_json::{json, Value};
use skiff_e2e::{wait_for, wait_http, SKIFF_IMAGE};
use std::time::Duration;

fn skiff_deployment(name: &str, args: Value, config_map: &str, mount: &str) -> Value {
    json!({
        "metadata": { "name": name },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "automountServiceAccountToken": false,
                    "securityContext": { "runAsNonRoot": true, "runAsUser": 65532 },
                    "containers": [{
                        "name": "skiff",
                        "image": SKIFF_IMAGE,
                        "imagePullPolicy": "Never",
                        "args": args,
                        "ports": [{ "name": "http", "containerPort": 8080 }, { "name": "admin", "containerPort": 9145 }],
                        "readinessProbe": { "httpGet": { "path": "/readyz", "port": "admin" }, "periodSeconds": 1 },
                        "resources": { "requests": { "cpu": "20m", "memory": "16Mi" } },
                        "volumeMounts": [{ "name": "data", "mountPath": mount, "readOnly": true }]
                    }],
                    "volumes": [{ "name": "data", "configMap": { "name": config_map } }]
                }
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_resolve_a_headless_service_through_cluster_dns() {
    let Some(cluster) = skiff_e2e::cluster().await else {
        return;
    };
    let ns = cluster.namespace("dns").await;

    ns.apply::<ConfigMap>(json!({
        "metadata": { "name": "backend-site" },
        "data": { "from.txt": "served by the backend pool\n" }
    }))
    .await;
    ns.apply::<Deployment>(skiff_deployment(
        "backend",
        json!([
            "serve",
            "/srv/site",
            "--listen",
            "0.0.0.0:8080",
            "--admin-listen",
            "0.0.0.0:9145",
            "--threads",
            "1"
        ]),
        "backend-site",
        "/srv/site",
    ))
    .await;
    ns.apply::<Service>(json!({
        "metadata": { "name": "backend" },
        "spec": { "clusterIP": "None", "selector": { "app": "backend" }, "ports": [{ "name": "http", "port": 8080 }] }
    }))
    .await;

    let config = format!(
        "listen: 0.0.0.0:8080\nadmin_listen: 0.0.0.0:9145\nthreads: 1\n\
         dns: {{ refresh: 1s }}\n\
         virtual_servers:\n  - name: front\n    default: true\n    hosts: [front]\n    root: /srv/www\n\
         \x20   rules:\n      - match: {{ prefix: / }}\n        action: {{ proxy: {{ pool: backend }} }}\n\
         pools:\n  - name: backend\n    protocol: http\n\
         \x20   endpoints: [\"backend.{}.svc.cluster.local:8080\"]\n",
        ns.name
    );
    ns.apply::<ConfigMap>(
        json!({ "metadata": { "name": "front-config" }, "data": { "skiff.yaml": config } }),
    )
    .await;
    ns.apply::<Deployment>(skiff_deployment(
        "front",
        json!(["run", "--config", "/etc/skiff/skiff.yaml"]),
        "front-config",
        "/etc/skiff",
    ))
    .await;
    ns.apply::<Service>(json!({
        "metadata": { "name": "front" },
        "spec": { "selector": { "app": "front" }, "ports": [{ "name": "http", "port": 80, "targetPort": "http" }] }
    }))
    .await;
    ns.wait_rollout("backend", Duration::from_secs(120)).await;
    ns.wait_rollout("front", Duration::from_secs(120)).await;

    let url = ns.service_url("front", 80).await;
    let r = wait_http(&format!("{url}/from.txt"), Duration::from_secs(60), |r| {
        r.status == 200
    })
    .await;
    assert_eq!(r.body, "served by the backend pool\n");

    // Each front pod resolved the headless name to both backend pod IPs (its log says so
    // when the address set changes)...
    let pods = ns.api::<Pod>();
    let backend_ips: Vec<String> = pods
        .list(&ListParams::default().labels("app=backend"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.status?.pod_ip)
        .collect();
    assert_eq!(backend_ips.len(), 2);
    let fronts = pods
        .list(&ListParams::default().labels("app=front"))
        .await
        .unwrap();
    for front in &fronts.items {
        let name = front.metadata.name.clone().unwrap();
        let line = wait_for(
            &format!("{name} to resolve both backend pods"),
            Duration::from_secs(30),
            || {
                let (pods, name, ips) = (pods.clone(), name.clone(), backend_ips.clone());
                async move {
                    let log = pods.logs(&name, &LogParams::default()).await.ok()?;
                    let line = log
                        .lines()
                        .rfind(|l| l.contains("endpoint addresses changed"))?;
                    ips.iter()
                        .all(|ip| line.contains(&format!("{ip}:8080")))
                        .then(|| line.to_string())
                }
            },
        )
        .await;
        eprintln!("{name}: {line}");
    }
    // ...which its metrics count as two endpoints up...
    let http = reqwest::Client::new();
    for front in &fronts.items {
        let ip = front
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .expect("front pod IP");
        wait_for(
            "skiff_upstream_endpoints to count both backend pods",
            Duration::from_secs(30),
            || {
                let (http, ip) = (http.clone(), ip.clone());
                async move {
                    let text = http
                        .get(format!("http://{ip}:9145/metrics"))
                        .send()
                        .await
                        .ok()?
                        .text()
                        .await
                        .ok()?;
                    text.lines()
                        .any(|l| l == "skiff_upstream_endpoints{pool=\"backend\",state=\"up\"} 2")
                        .then_some(())
                }
            },
        )
        .await;
    }
    // ...and requests through the front reach both of them.
    let client = reqwest::Client::new();
    for _ in 0..20 {
        let r = client.get(format!("{url}/from.txt")).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
    // (The access log is flushed once a second, so each backend's log is polled.)
    let backends = pods
        .list(&ListParams::default().labels("app=backend"))
        .await
        .unwrap();
    for backend in backends.items {
        let name = backend.metadata.name.unwrap();
        let served = wait_for(
            &format!("backend pod {name} to log a request"),
            Duration::from_secs(10),
            || {
                let (pods, name) = (pods.clone(), name.clone());
                async move {
                    let log = pods.logs(&name, &LogParams::default()).await.ok()?;
                    let served = log.lines().filter(|l| l.contains("GET /from.txt")).count();
                    (served > 0).then_some(served)
                }
            },
        )
        .await;
        eprintln!("{name} served {served} requests");
    }
}
