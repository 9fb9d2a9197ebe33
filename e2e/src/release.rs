//! The operator as users run it: `helm install` of `charts/skiff` into a test's namespace,
//! uninstalled when the guard drops. Also the third-party CRDs (cert-manager, Prometheus
//! Operator) the operator discovers at runtime, and reading the leader's /metrics.

use crate::{repo_root, state_dir, tool, wait_for, wait_http, Cluster, TestNamespace};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams};
use kube::Api;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Runs the project's helm with its state kept under the cluster's state directory.
pub fn helm(kubeconfig: &Path, args: &[&str]) -> String {
    let out = helm_command(kubeconfig, args).output().expect("run helm");
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

/// Runs the project's helm like [`helm`], returning its stdout only (for `helm template`,
/// whose output is parsed: warnings on stderr stay out of it).
pub fn helm_stdout(kubeconfig: &Path, args: &[&str]) -> String {
    let out = helm_command(kubeconfig, args).output().expect("run helm");
    assert!(
        out.status.success(),
        "helm {} failed:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn helm_command(kubeconfig: &Path, args: &[&str]) -> Command {
    let home = state_dir().join("helm");
    let mut cmd = Command::new(tool("helm"));
    cmd.args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"));
    cmd
}

/// A `helm install` of charts/skiff; `helm uninstall` on drop (declare it after the
/// namespace, so that it drops first).
pub struct Release {
    pub name: String,
    pub namespace: String,
    kubeconfig: PathBuf,
}

impl Release {
    /// Installs the chart into `ns` with the local images (`pullPolicy=Never`) and `sets`,
    /// waiting for the operator to be ready. A VirtualServer CRD left by an earlier
    /// release (`crds.keep`) would block the install, so it is removed first.
    pub async fn install(cluster: &Cluster, ns: &TestNamespace, sets: &[&str]) -> Release {
        remove_crd(cluster, "virtualservers.skiff.dev").await;
        let chart = repo_root().join("charts/skiff");
        let mut args = vec![
            "install",
            "skiff",
            chart.to_str().unwrap(),
            "--namespace",
            &ns.name,
            "--set",
            "operator.image.pullPolicy=Never",
            "--wait",
            "--timeout",
            "180s",
        ];
        for set in sets {
            args.extend(["--set", set]);
        }
        helm(&cluster.kubeconfig, &args);
        Release {
            name: "skiff".into(),
            namespace: ns.name.clone(),
            kubeconfig: cluster.kubeconfig.clone(),
        }
    }

    /// Uninstalls now, failing the test when helm fails.
    pub fn uninstall(self) {
        helm(
            &self.kubeconfig,
            &[
                "uninstall",
                &self.name,
                "--namespace",
                &self.namespace,
                "--wait",
                "--timeout",
                "120s",
            ],
        );
        std::mem::forget(self);
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        let _ = helm_command(
            &self.kubeconfig,
            &["uninstall", &self.name, "--namespace", &self.namespace],
        )
        .output();
    }
}

/// Deletes a CRD (and so its objects) and waits until it is gone.
pub async fn remove_crd(cluster: &Cluster, name: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    if crds.get_opt(name).await.unwrap().is_none() {
        return;
    }
    let _ = crds.delete(name, &DeleteParams::default()).await;
    // The apiserver deletes the CRD's objects first; on a busy two-core machine that once
    // took over a minute. Polled, so a quick deletion still ends the wait at once.
    wait_for(
        &format!("CRD {name} to go"),
        Duration::from_secs(180),
        || {
            let crds = crds.clone();
            async move { crds.get_opt(name).await.ok()?.is_none().then_some(()) }
        },
    )
    .await;
}

/// cert-manager's and the Prometheus Operator's CRDs, as install-tools.sh fetched them.
fn third_party_crd_files() -> PathBuf {
    tool("third-party-crds")
}

/// The names of cert-manager's CRDs (third-party-crds/cert-manager.yaml).
const CERT_MANAGER_CRDS: [&str; 4] = [
    "certificates.cert-manager.io",
    "certificaterequests.cert-manager.io",
    "issuers.cert-manager.io",
    "clusterissuers.cert-manager.io",
];

/// The names of the CRDs in the third-party files.
const THIRD_PARTY_CRDS: [&str; 5] = [
    CERT_MANAGER_CRDS[0],
    CERT_MANAGER_CRDS[1],
    CERT_MANAGER_CRDS[2],
    CERT_MANAGER_CRDS[3],
    "servicemonitors.monitoring.coreos.com",
];

/// Installs the third-party CRDs (server-side apply) and waits until they are established.
pub async fn install_third_party_crds(cluster: &Cluster) {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(third_party_crd_files()).expect("third-party CRDs") {
        files.push(entry.unwrap().path());
    }
    install_crds(cluster, &files, &THIRD_PARTY_CRDS).await;
}

/// Installs cert-manager's CRDs only, as `e2e/cluster up` does before it starts
/// cert-manager's controller (a test that removed them puts them back with this).
pub async fn install_cert_manager_crds(cluster: &Cluster) {
    let file = third_party_crd_files().join("cert-manager.yaml");
    install_crds(cluster, &[file], &CERT_MANAGER_CRDS).await;
}

async fn install_crds(cluster: &Cluster, files: &[PathBuf], names: &[&str]) {
    // One -f per file: kubectl reads a symlinked directory as a file.
    let mut kubectl = Command::new(tool("kubectl"));
    kubectl.args(["apply", "--server-side", "--field-manager", "skiff-e2e"]);
    for file in files {
        kubectl.arg("-f").arg(file);
    }
    let out = kubectl
        .env("KUBECONFIG", &cluster.kubeconfig)
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl apply of the third-party CRDs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    for &name in names {
        wait_for(
            &format!("CRD {name} to be established"),
            Duration::from_secs(60),
            || {
                let crds = crds.clone();
                async move {
                    let crd = crds.get_opt(name).await.ok()??;
                    crd.status?
                        .conditions?
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                        .then_some(())
                }
            },
        )
        .await;
    }
}

/// Removes the third-party CRDs, so that a test sees a cluster without them.
pub async fn remove_third_party_crds(cluster: &Cluster) {
    for name in THIRD_PARTY_CRDS {
        remove_crd(cluster, name).await;
    }
}

/// The operator pod that holds the leader Lease, once it is running with an IP.
pub async fn leader(ns: &TestNamespace) -> Pod {
    let (leases, pods) = (ns.api::<Lease>(), ns.api::<Pod>());
    wait_for(
        "an operator pod holding the Lease",
        Duration::from_secs(90),
        || {
            let (leases, pods) = (leases.clone(), pods.clone());
            async move {
                let holder = leases
                    .get_opt("skiff-operator")
                    .await
                    .ok()??
                    .spec?
                    .holder_identity?;
                let lp = ListParams::default().labels("app.kubernetes.io/name=skiff-operator");
                let pod = pods
                    .list(&lp)
                    .await
                    .ok()?
                    .items
                    .into_iter()
                    .find(|p| p.metadata.name.as_deref() == Some(holder.as_str()))?;
                pod.status.as_ref()?.pod_ip.as_ref()?;
                (pod.metadata.deletion_timestamp.is_none()).then_some(pod)
            }
        },
    )
    .await
}

/// The leader's /metrics text.
pub async fn leader_metrics(ns: &TestNamespace) -> String {
    let pod = leader(ns).await;
    let ip = pod.status.and_then(|s| s.pod_ip).unwrap();
    wait_http(
        &format!("http://{ip}:8081/metrics"),
        Duration::from_secs(30),
        |r| r.status == 200,
    )
    .await
    .body
}

/// The value of the first sample whose line starts with `series` (name and labels).
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series))?
        .rsplit(' ')
        .next()?
        .parse()
        .ok()
}
