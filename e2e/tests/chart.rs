//! The Helm chart on the real cluster: `helm install` gives a running operator (the
//! skiff-operator image, in-cluster config, RBAC from the chart; two replicas, one elected
//! leader on a Lease) that reconciles the
//! chart's example VirtualServer into a site answering through its Service; uninstalling
//! keeps the CRD (crds.keep), so no VirtualServer is ever deleted by accident.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams};
use kube::Api;
use skiff_e2e::{repo_root, tool, wait_for, wait_http};
use skiff_operator::crd::VirtualServer;
use std::process::Command;
use std::time::Duration;

fn helm(kubeconfig: &std::path::Path, args: &[&str]) -> String {
    let helm_home = skiff_e2e::state_dir().join("helm");
    let out = Command::new(tool("helm"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HELM_CACHE_HOME", helm_home.join("cache"))
        .env("HELM_CONFIG_HOME", helm_home.join("config"))
        .env("HELM_DATA_HOME", helm_home.join("data"))
        .output()
        .expect("run helm");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "helm {} failed:\n{text}",
        args.join(" ")
    );
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_runs_the_operator_and_the_example_site() {
    let Some(cluster) = skiff_e2e::cluster().await else {
        return;
    };
    let ns = cluster.namespace("chart").await;
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    // A CRD left by another release (crds.keep) would block this one: start without it.
    if crds
        .get_opt("virtualservers.skiff.dev")
        .await
        .unwrap()
        .is_some()
    {
        crds.delete("virtualservers.skiff.dev", &DeleteParams::default())
            .await
            .unwrap();
        wait_for("the old CRD to go", Duration::from_secs(60), || {
            let crds = crds.clone();
            async move {
                crds.get_opt("virtualservers.skiff.dev")
                    .await
                    .ok()?
                    .is_none()
                    .then_some(())
            }
        })
        .await;
    }
    let chart = repo_root().join("charts/skiff");
    let kc = cluster.kubeconfig.clone();
    helm(
        &kc,
        &[
            "install",
            "skiff",
            chart.to_str().unwrap(),
            "--namespace",
            &ns.name,
            "--set",
            "operator.image.pullPolicy=Never",
            "--set",
            "example.enabled=true",
            "--set",
            "operator.replicas=2",
            "--wait",
            "--timeout",
            "180s",
        ],
    );

    // The operator reconciles the example into a ready site.
    let vs_api: Api<VirtualServer> = ns.api();
    let vs = wait_for(
        "the example VirtualServer to be Ready",
        Duration::from_secs(180),
        || {
            let api = vs_api.clone();
            async move {
                let vs = api.get("skiff-example").await.ok()?;
                let ready = vs
                    .status
                    .as_ref()?
                    .conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                ready.then_some(vs)
            }
        },
    )
    .await;
    let address = vs
        .status
        .unwrap()
        .address
        .expect("Service address in status");
    let page = wait_http(
        &format!("http://{address}/"),
        Duration::from_secs(60),
        |r| r.status == 200,
    )
    .await;
    assert!(page.body.contains("Served by Skiff"), "{}", page.body);
    let health = wait_http(
        &format!("http://{address}/healthz"),
        Duration::from_secs(30),
        |r| r.status == 200,
    )
    .await;
    assert_eq!(health.body, "ok\n");

    // Two replicas, one leader: the Lease names one of the operator pods, and that pod's
    // metrics say it reconciled.
    let pods = ns
        .api::<Pod>()
        .list(&ListParams::default().labels("app.kubernetes.io/name=skiff-operator"))
        .await
        .unwrap();
    assert_eq!(pods.items.len(), 2);
    let lease = ns
        .api::<Lease>()
        .get("skiff-operator")
        .await
        .expect("the leader Lease");
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .expect("a holder");
    let leader = pods
        .items
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(holder.as_str()));
    let leader =
        leader.unwrap_or_else(|| panic!("the Lease holder {holder} is not an operator pod"));
    let ip = leader
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .expect("operator pod IP");
    let metrics = wait_http(
        &format!("http://{ip}:8081/metrics"),
        Duration::from_secs(30),
        |r| r.status == 200,
    )
    .await;
    let line = metrics
        .body
        .lines()
        .find(|l| l.starts_with("skiff_operator_reconciliations_total"))
        .unwrap();
    let count: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 1.0, "{line}");
    let ready = metrics
        .body
        .lines()
        .find(|l| {
            l.starts_with("skiff_operator_virtualservers{condition=\"Ready\",status=\"True\"}")
        })
        .unwrap_or_else(|| panic!("no VirtualServers-by-condition gauge:\n{}", metrics.body));
    assert!(
        ready.rsplit(' ').next().unwrap().parse::<f64>().unwrap() >= 1.0,
        "{ready}"
    );

    helm(
        &kc,
        &[
            "uninstall",
            "skiff",
            "--namespace",
            &ns.name,
            "--wait",
            "--timeout",
            "120s",
        ],
    );
    assert!(
        crds.get_opt("virtualservers.skiff.dev")
            .await
            .unwrap()
            .is_some(),
        "crds.keep leaves the CRD in place on uninstall"
    );
}
