//! Harness for Skiff's end-to-end tests on the project's local Kubernetes cluster
//! (`e2e/cluster`): a real kube-apiserver, etcd, kubelet, containerd, kube-proxy, CoreDNS
//! and metrics-server on this machine.
//!
//! - [`cluster`] connects with kube-rs, bringing the cluster up first when it is down and
//!   importing the images the tests use. With `SKIFF_E2E=skip` (never in CI) it returns
//!   `None` and the test says it was skipped.
//! - [`Cluster::namespace`] gives each test its own namespace, deleted when the test ends;
//!   when the test fails, the namespace's objects, Events and pod logs are dumped first.
//! - [`prometheus`] drives the cluster's Prometheus (ServiceMonitors translated into scrape
//!   configs, the chart's rules) and [`queries`] lists every expression the project ships.
//! - Helpers wait for conditions, reach Services from the host through their ClusterIP,
//!   and run a bounded wrk load while something changes.

pub mod certs;
mod dump;
mod load;
pub mod prometheus;
pub mod queries;
mod release;
mod virtual_server;
mod wait;

pub use load::{Load, LoadReport};
pub use release::{
    helm, helm_stdout, install_cert_manager_crds, install_third_party_crds, leader, leader_metrics,
    metric, remove_crd, remove_third_party_crds, Release,
};
pub use virtual_server::{condition, wait_condition};
pub use wait::{wait_for, wait_http, HttpResponse};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config, Resource};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// The field manager for everything the tests apply.
pub const FIELD_MANAGER: &str = "skiff-e2e";
/// The skiff server image, as images/build.sh names it.
pub const SKIFF_IMAGE: &str = "localhost/skiff/skiff:dev";

/// The repository root (this crate lives in `e2e/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The cluster's state directory, as e2e/cluster resolves it (`SKIFF_E2E_DIR`).
pub fn state_dir() -> PathBuf {
    std::env::var_os("SKIFF_E2E_DIR")
        .map_or_else(|| repo_root().join("e2e/.cluster"), PathBuf::from)
}

fn cluster_script() -> PathBuf {
    repo_root().join("e2e/cluster")
}

/// A connection to the running local cluster.
#[derive(Clone)]
pub struct Cluster {
    pub client: Client,
    pub kubeconfig: PathBuf,
}

/// Brings the cluster up (once per test binary; `e2e/cluster up` is a no-op on a running
/// cluster) and imports the skiff image. Returns `None` only with `SKIFF_E2E=skip`.
pub async fn cluster() -> Option<Cluster> {
    if std::env::var("SKIFF_E2E").as_deref() == Ok("skip") {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "SKIFF_E2E=skip is not allowed in CI: the e2e tests must run there"
        );
        eprintln!("SKIPPED: SKIFF_E2E=skip is set, so this e2e test did not run");
        return None;
    }
    static READY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let kubeconfig = READY
        .get_or_init(|| {
            let kubeconfig = run_cluster(&["up"])?;
            import_images()?;
            Ok(PathBuf::from(kubeconfig.trim()))
        })
        .clone()
        .unwrap_or_else(|e| panic!("the e2e cluster is not available: {e}"));
    Some(connect(kubeconfig).await)
}

/// A connection to the cluster as it is, with no `up` and no image import (for tools run
/// against a cluster something else brought up, such as scripts/quickstart.sh).
pub async fn running_cluster() -> Cluster {
    let kubeconfig = PathBuf::from(
        run_cluster(&["kubeconfig"])
            .unwrap_or_else(|e| panic!("{e}"))
            .trim(),
    );
    connect(kubeconfig).await
}

async fn connect(kubeconfig: PathBuf) -> Cluster {
    let kc = Kubeconfig::read_from(&kubeconfig).expect("read the cluster's kubeconfig");
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig to client config");
    let client = Client::try_from(config).expect("kube client");
    Cluster { client, kubeconfig }
}

/// Runs `e2e/cluster ARGS`, returning its stdout or its exit status and stderr.
fn run_cluster(args: &[&str]) -> Result<String, String> {
    let out = Command::new(cluster_script())
        .args(args)
        .output()
        .map_err(|e| format!("cannot run e2e/cluster: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "e2e/cluster {} failed ({}):\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Where e2e/scripts/install-tools.sh puts kubectl, helm and the other cluster tools.
pub fn tool(name: &str) -> PathBuf {
    let cache = std::env::var_os("SKIFF_E2E_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/skiff-e2e")
        });
    cache.join("bin").join(name)
}

/// The php-fpm image the pool tests run (Debian's php-fpm, see e2e/images/php-fpm).
pub const PHP_FPM_IMAGE: &str = "localhost/skiff/e2e-php-fpm:dev";

/// The uWSGI + Django image (Debian's, with a demo site, see e2e/images/django).
pub const DJANGO_IMAGE: &str = "localhost/skiff/e2e-django:dev";

/// Imports the skiff and skiff-operator image archives, building them first when missing,
/// and the php-fpm and Django test images (rebuilt each time: they only copy files).
fn import_images() -> Result<(), String> {
    let root = repo_root();
    for image in ["php-fpm", "django"] {
        let script = root.join(format!("e2e/images/{image}/build.sh"));
        let status = Command::new(&script)
            .stdout(std::process::Stdio::null())
            .status()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        if !status.success() {
            return Err(format!("{} failed: {status}", script.display()));
        }
    }
    let php_tar = root.join("target/images/php-fpm.oci.tar");
    let django_tar = root.join("target/images/django.oci.tar");
    let tar = root.join("target/images/skiff.oci.tar");
    let operator_tar = root.join("target/images/skiff-operator.oci.tar");
    if !tar.exists() || !operator_tar.exists() {
        let status = Command::new(root.join("images/build.sh"))
            .status()
            .map_err(|e| format!("cannot run images/build.sh: {e}"))?;
        if !status.success() {
            return Err(format!("images/build.sh failed: {status}"));
        }
    }
    run_cluster(&[
        "load",
        tar.to_str().unwrap(),
        operator_tar.to_str().unwrap(),
        php_tar.to_str().unwrap(),
        django_tar.to_str().unwrap(),
    ])
    .map(|_| ())
}

impl Cluster {
    /// A fresh namespace named after the test, deleted when the returned guard drops.
    pub async fn namespace(&self, test: &str) -> TestNamespace {
        let suffix = std::process::id() ^ (std::time::UNIX_EPOCH.elapsed().unwrap().subsec_nanos());
        let name = format!("e2e-{test}-{:05x}", suffix & 0xfffff);
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "labels": { "skiff.dev/e2e": "true" } }
        }))
        .unwrap();
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
        // Pods need the namespace's default ServiceAccount, which appears a moment later.
        let sa: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(self.client.clone(), &name);
        wait_for(
            "the default ServiceAccount",
            Duration::from_secs(30),
            || {
                let sa = sa.clone();
                async move { sa.get_opt("default").await.ok().flatten() }
            },
        )
        .await;
        TestNamespace {
            name,
            client: self.client.clone(),
        }
    }
}

/// A namespace owned by one test. On drop it dumps its state when the test is failing,
/// then deletes itself (set `SKIFF_E2E_KEEP=1` to keep it for a look).
pub struct TestNamespace {
    pub name: String,
    pub client: Client,
}

impl TestNamespace {
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }

    /// Server-side applies a namespaced object (given as JSON) into this namespace.
    pub async fn apply<K>(&self, object: serde_json::Value) -> K
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + Debug
            + DeserializeOwned
            + Serialize,
        <K as Resource>::DynamicType: Default,
    {
        let mut object = object;
        let name = object["metadata"]["name"]
            .as_str()
            .expect("metadata.name")
            .to_string();
        object["metadata"]["namespace"] = self.name.clone().into();
        if object.get("apiVersion").is_none() {
            let dt = Default::default();
            object["apiVersion"] = K::api_version(&dt).into();
            object["kind"] = K::kind(&dt).into();
        }
        self.api::<K>()
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&object),
            )
            .await
            .unwrap_or_else(|e| panic!("apply {} {name}: {e}", K::kind(&Default::default())))
    }

    /// Waits until a Deployment's rollout is complete: the controller saw the latest spec,
    /// every replica runs it and is available, and no old replica is left.
    pub async fn wait_rollout(&self, name: &str, timeout: Duration) -> Deployment {
        let api = self.api::<Deployment>();
        wait_for(&format!("rollout of deployment/{name}"), timeout, || {
            let api = api.clone();
            async move {
                let d = api.get(name).await.ok()?;
                let want = d.spec.as_ref()?.replicas.unwrap_or(1);
                let s = d.status.as_ref()?;
                let done = s.observed_generation? >= d.metadata.generation?
                    && s.updated_replicas.unwrap_or(0) == want
                    && s.available_replicas.unwrap_or(0) == want
                    && s.ready_replicas.unwrap_or(0) == want
                    && s.replicas.unwrap_or(0) == want;
                done.then_some(d)
            }
        })
        .await
    }

    /// `http://CLUSTER_IP:PORT` of a Service, reachable from the host through kube-proxy.
    pub async fn service_url(&self, name: &str, port: u16) -> String {
        let svc = self.api::<Service>().get(name).await.expect("get service");
        let ip = svc
            .spec
            .and_then(|s| s.cluster_ip)
            .expect("service has a ClusterIP");
        format!("http://{ip}:{port}")
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let keep = std::env::var("SKIFF_E2E_KEEP").as_deref() == Ok("1");
        let failing = std::thread::panicking();
        let (client, name) = (self.client.clone(), self.name.clone());
        // Drop can't await; a short-lived thread with its own runtime does the async work.
        let worker = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                if failing {
                    dump::namespace(&client, &name).await;
                }
                if !keep {
                    let _ = Api::<Namespace>::all(client)
                        .delete(&name, &DeleteParams::background())
                        .await;
                }
            })
        });
        let _ = worker.join();
    }
}
