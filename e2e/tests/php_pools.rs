//! PHP through the operator's two pool placements, with Debian's php-fpm in the cluster
//! (e2e/images/php-fpm), installed by `helm install`:
//! - `placement: sidecar`: php-fpm in the edge pod, FastCGI over a unix socket in the
//!   shared emptyDir;
//! - `placement: pool`: php-fpm in its own Deployment behind a headless Service, reached
//!   by DNS name from the edge.
//!
//! Both serve the same PHP page through the edge Service.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::ListParams;
use serde_json::json;
use skiff_e2e::{wait_condition, wait_http, Release, PHP_FPM_IMAGE};
use skiff_operator::crd::VirtualServer;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn php_fpm_as_a_sidecar_and_as_a_pool() {
    let Some(cluster) = skiff_e2e::cluster().await else {
        return;
    };
    let ns = cluster.namespace("php").await;
    let _release = Release::install(&cluster, &ns, &["operator.replicas=1"]).await;
    ns.apply::<ConfigMap>(json!({
        "metadata": { "name": "files" }, "data": { "index.html": "static\n" }
    }))
    .await;
    let resources = json!({ "requests": { "cpu": "20m", "memory": "16Mi" } });
    let php_rule = json!([{ "name": "php", "match": { "extensions": ["php"] },
        "action": { "fastcgi": { "pool": "php", "documentRoot": "/var/www/html" } } }]);
    ns.apply::<VirtualServer>(json!({
        "metadata": { "name": "side" },
        "spec": {
            "hosts": ["side.example"], "content": { "configMap": "files" }, "replicas": 1,
            "resources": resources, "rules": php_rule,
            "pools": [{ "name": "php", "protocol": "fastcgi", "image": PHP_FPM_IMAGE,
                "placement": "sidecar", "socket": "php.sock",
                "env": { "FPM_LISTEN": "/run/skiff/pools/php.sock" } }]
        }
    }))
    .await;
    ns.apply::<VirtualServer>(json!({
        "metadata": { "name": "pooled" },
        "spec": {
            "hosts": ["pooled.example"], "content": { "configMap": "files" }, "replicas": 1,
            "resources": resources, "rules": php_rule,
            "pools": [{ "name": "php", "protocol": "fastcgi", "image": PHP_FPM_IMAGE,
                "placement": "pool", "port": 9000, "resources": resources,
                "env": { "FPM_LISTEN": "0.0.0.0:9000" } }]
        }
    }))
    .await;
    for name in ["side", "pooled"] {
        let vs = wait_condition(&ns, name, "Ready", "True").await;
        let address = vs.status.unwrap().address.expect("a Service address");
        let page = wait_http(
            &format!("http://{address}/index.php"),
            Duration::from_secs(120),
            |r| r.status == 200,
        )
        .await;
        assert!(
            page.body.starts_with("php-fpm in the cluster\n"),
            "{name}: {}",
            page.body
        );
        assert!(
            page.body
                .contains("SCRIPT_FILENAME=/var/www/html/index.php\n"),
            "{name}: {}",
            page.body
        );
        let static_page = wait_http(
            &format!("http://{address}/"),
            Duration::from_secs(10),
            |r| r.status == 200,
        )
        .await;
        assert_eq!(static_page.body, "static\n");
    }
    // Where PHP ran: in the edge pod for the sidecar, in the pool's own pod otherwise.
    let pods = ns.api::<Pod>();
    let side = pods
        .list(&ListParams::default().labels("app.kubernetes.io/instance=side"))
        .await
        .unwrap();
    let containers: Vec<String> = side.items[0]
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(containers, ["skiff", "pool-php"]);
    let page = wait_http(
        &format!(
            "http://{}/index.php",
            ns.api::<VirtualServer>()
                .get("pooled")
                .await
                .unwrap()
                .status
                .unwrap()
                .address
                .unwrap()
        ),
        Duration::from_secs(10),
        |r| r.status == 200,
    )
    .await;
    let host = page
        .body
        .lines()
        .find_map(|l| l.strip_prefix("HOSTNAME="))
        .unwrap()
        .to_string();
    assert!(
        host.starts_with("pooled-php-"),
        "PHP ran in {host}, not in the pool's Deployment"
    );
}
