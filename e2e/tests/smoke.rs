//! The cluster smoke test: the skiff image serves a ConfigMap-mounted site from a
//! 2-replica Deployment behind a Service, reached from the host through its ClusterIP; a
//! pod-template change rolls out under load with no failed request; and an HPA reads the
//! pods' CPU from metrics-server.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::api::ListParams;
use serde_json::{json, Value};
use skiff_e2e::{wait_for, wait_http, Load, TestNamespace, SKIFF_IMAGE};
use std::time::Duration;

const SITE_TEXT: &str = "hello from a ConfigMap\n";

/// The edge Deployment as the operator will shape it: non-root, read-only root filesystem,
/// no capabilities, probes on the admin port, and a shutdown delay that outlasts the
/// endpoint removal so a rollout drops nothing.
fn web_deployment(revision: &str) -> Value {
    json!({
        "metadata": { "name": "web" },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": "web" } },
            "strategy": { "type": "RollingUpdate", "rollingUpdate": { "maxUnavailable": 0, "maxSurge": 1 } },
            "template": {
                "metadata": { "labels": { "app": "web" }, "annotations": { "skiff.dev/revision": revision } },
                "spec": {
                    "terminationGracePeriodSeconds": 20,
                    "enableServiceLinks": false,
                    "automountServiceAccountToken": false,
                    "securityContext": {
                        "runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
                        "seccompProfile": { "type": "RuntimeDefault" }
                    },
                    "containers": [{
                        "name": "skiff",
                        "image": SKIFF_IMAGE,
                        "imagePullPolicy": "Never",
                        "args": ["serve", "/srv/site", "--listen", "0.0.0.0:8080",
                                 "--admin-listen", "0.0.0.0:9145", "--threads", "1",
                                 "--shutdown-delay", "3s", "--access-log", "off"],
                        "ports": [{ "name": "http", "containerPort": 8080 }, { "name": "admin", "containerPort": 9145 }],
                        "readinessProbe": { "httpGet": { "path": "/readyz", "port": "admin" }, "periodSeconds": 1, "failureThreshold": 1 },
                        "livenessProbe": { "httpGet": { "path": "/healthz", "port": "admin" }, "periodSeconds": 10 },
                        "resources": { "requests": { "cpu": "50m", "memory": "16Mi" }, "limits": { "cpu": "500m", "memory": "64Mi" } },
                        "securityContext": {
                            "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                            "capabilities": { "drop": ["ALL"] }
                        },
                        "volumeMounts": [{ "name": "site", "mountPath": "/srv/site", "readOnly": true }]
                    }],
                    "volumes": [{ "name": "site", "configMap": { "name": "site" } }]
                }
            }
        }
    })
}

async fn deploy_site(ns: &TestNamespace) -> String {
    ns.apply::<ConfigMap>(json!({
        "metadata": { "name": "site" },
        "data": { "index.html": "<h1>skiff smoke</h1>\n", "hello.txt": SITE_TEXT }
    }))
    .await;
    ns.apply::<Deployment>(web_deployment("1")).await;
    ns.apply::<Service>(json!({
        "metadata": { "name": "web" },
        "spec": { "selector": { "app": "web" }, "ports": [{ "name": "http", "port": 80, "targetPort": "http" }] }
    }))
    .await;
    ns.wait_rollout("web", Duration::from_secs(180)).await;
    ns.service_url("web", 80).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_serves_rolls_and_autoscales() {
    let Some(cluster) = skiff_e2e::cluster().await else {
        return;
    };
    let ns = cluster.namespace("smoke").await;
    let url = deploy_site(&ns).await;

    // 1-2. Both replicas run, and the site answers through the ClusterIP.
    let pods = ns
        .api::<Pod>()
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(pods.items.len(), 2, "two replicas");
    let r = wait_http(&format!("{url}/hello.txt"), Duration::from_secs(60), |r| {
        r.status == 200
    })
    .await;
    assert_eq!(r.body, SITE_TEXT);
    assert_eq!(r.headers["content-type"], "text/plain; charset=utf-8");
    let index = wait_http(&format!("{url}/"), Duration::from_secs(10), |r| {
        r.status == 200
    })
    .await;
    assert!(index.body.contains("skiff smoke"), "index: {}", index.body);
    let missing = wait_http(&format!("{url}/nope"), Duration::from_secs(10), |_| true).await;
    assert_eq!(missing.status, 404);

    // 3. A pod-template change rolls pod by pod while wrk keeps 8 connections busy.
    let load = Load::start(&format!("{url}/hello.txt"), Duration::from_secs(30), 8);
    tokio::time::sleep(Duration::from_secs(3)).await;
    ns.apply::<Deployment>(web_deployment("2")).await;
    ns.wait_rollout("web", Duration::from_secs(120)).await;
    let report = load.finish();
    eprintln!(
        "load during the rollout: {} requests, {} errors",
        report.requests,
        report.errors()
    );
    assert!(report.requests > 1000, "the load ran: {}", report.raw);
    assert_eq!(
        report.errors(),
        0,
        "no request may fail during a rolling update:\n{}",
        report.raw
    );
    let pods = ns
        .api::<Pod>()
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    let revisions: Vec<_> = pods
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| p.metadata.annotations.as_ref().unwrap()["skiff.dev/revision"].clone())
        .collect();
    assert_eq!(
        revisions,
        ["2", "2"],
        "every live pod runs the new template"
    );
    let sets = ns
        .api::<ReplicaSet>()
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(sets.items.len(), 2, "one ReplicaSet per template revision");
    let old_replicas: i32 = sets
        .items
        .iter()
        .filter(|rs| {
            rs.metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"] == "1"
        })
        .map(|rs| rs.spec.as_ref().unwrap().replicas.unwrap_or(0))
        .sum();
    assert_eq!(old_replicas, 0, "the old ReplicaSet is scaled down");

    // 4. An HPA reads the pods' CPU utilization from metrics-server.
    ns.apply::<HorizontalPodAutoscaler>(json!({
        "metadata": { "name": "web" },
        "spec": {
            "scaleTargetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": "web" },
            "minReplicas": 2, "maxReplicas": 4,
            "metrics": [{ "type": "Resource", "resource": { "name": "cpu", "target": { "type": "Utilization", "averageUtilization": 50 } } }]
        }
    }))
    .await;
    let load = Load::start(&format!("{url}/hello.txt"), Duration::from_secs(50), 8);
    let hpa_api = ns.api::<HorizontalPodAutoscaler>();
    let utilization = wait_for(
        "the HPA to read CPU from metrics-server",
        Duration::from_secs(150),
        || {
            let api = hpa_api.clone();
            async move {
                let hpa = api.get("web").await.ok()?;
                let metrics = hpa.status?.current_metrics?;
                metrics
                    .first()?
                    .resource
                    .as_ref()?
                    .current
                    .average_utilization
            }
        },
    )
    .await;
    eprintln!("HPA reads {utilization}% CPU utilization");
    let report = load.finish();
    assert_eq!(report.errors(), 0, "{}", report.raw);
}
