//! cert-manager itself, not a stand-in: its controller (built from cert-manager's module by
//! e2e/tools/cert-manager) runs with the cluster (`e2e/cluster up`), and issues a
//! VirtualServer's certificate:
//! - a selfSigned ClusterIssuer issues a CA Certificate (isCA) into a Secret in the
//!   `cert-manager` namespace, and a CA ClusterIssuer signs with that key pair;
//! - a VirtualServer with `tls.issuerRef` on the CA ClusterIssuer gets a Certificate from the
//!   operator, whose CertificateReady condition follows cert-manager's Ready: False with
//!   cert-manager's own message while the issuer does not exist yet, then True once it
//!   issues;
//! - the Secret holds a certificate for the host signed by the CA (`tls.crt`), its key
//!   (`tls.key`) and the CA (`ca.crt`);
//! - a forced renewal (what `cmctl renew` does) re-issues it with a new serial.
//!
//! `virtual_server_serves_the_issued_certificate_over_https` checks that the edge pods serve
//! that certificate through the Service on 443, and the new one after a renewal reaches the
//! pods through the Secret volume, without a restart.
//!
//! `virtual_server_serves_its_own_secret_and_a_replaced_one` does the same without
//! cert-manager: a kubernetes.io/tls Secret of the user's, replaced in place, and the
//! plain-HTTP redirect.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use skiff_e2e::certs::{openssl, self_signed, tls_secret};
use skiff_e2e::{
    condition, install_cert_manager_crds, wait_condition, wait_for, Cluster, Release,
    TestNamespace, FIELD_MANAGER,
};
use skiff_operator::crd::VirtualServer;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The namespace where cert-manager's controller keeps ClusterIssuers' Secrets
/// (`--cluster-resource-namespace` in e2e/cluster).
const CLUSTER_RESOURCE_NAMESPACE: &str = "cert-manager";
const HOST: &str = "site.example";
const INDEX: &str = "<h1>issued by cert-manager</h1>\n";

fn cert_manager_api(client: &Client, namespace: Option<&str>, kind: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("cert-manager.io", "v1", kind));
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

async fn apply(api: &Api<DynamicObject>, object: Value) {
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&object),
    )
    .await
    .unwrap_or_else(|e| panic!("apply {} {name}: {e}", object["kind"]));
}

/// The (status, message) of a cert-manager object's Ready condition.
fn ready(object: &DynamicObject) -> Option<(String, String)> {
    let c = object.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?;
    Some((
        c["status"].as_str()?.to_string(),
        c["message"].as_str().unwrap_or_default().to_string(),
    ))
}

/// A selfSigned ClusterIssuer, the CA Certificate it issues (in the cluster resource
/// namespace) and a CA ClusterIssuer signing with it, named after the test's namespace.
/// Cluster-scoped, so they are deleted when this drops (unless `SKIFF_E2E_KEEP=1`).
struct CaIssuers {
    client: Client,
    selfsigned: String,
    /// The CA ClusterIssuer, and the CA's Certificate and Secret.
    ca: String,
}

impl CaIssuers {
    fn named_after(ns: &TestNamespace) -> CaIssuers {
        CaIssuers {
            client: ns.client.clone(),
            selfsigned: format!("{}-selfsigned", ns.name),
            ca: format!("{}-ca", ns.name),
        }
    }

    /// Creates the issuers and waits until the CA ClusterIssuer is Ready.
    async fn create(&self) {
        let issuers = cert_manager_api(&self.client, None, "ClusterIssuer");
        apply(
            &issuers,
            json!({
                "apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
                "metadata": { "name": self.selfsigned }, "spec": { "selfSigned": {} }
            }),
        )
        .await;
        let certificates = cert_manager_api(
            &self.client,
            Some(CLUSTER_RESOURCE_NAMESPACE),
            "Certificate",
        );
        apply(&certificates, json!({
            "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
            "metadata": { "name": self.ca, "namespace": CLUSTER_RESOURCE_NAMESPACE },
            "spec": {
                "isCA": true, "commonName": format!("{} CA", self.ca), "secretName": self.ca,
                "privateKey": { "algorithm": "ECDSA", "size": 256 },
                "issuerRef": { "name": self.selfsigned, "kind": "ClusterIssuer", "group": "cert-manager.io" }
            }
        }))
        .await;
        apply(
            &issuers,
            json!({
                "apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
                "metadata": { "name": self.ca }, "spec": { "ca": { "secretName": self.ca } }
            }),
        )
        .await;
        // A CRD installed a moment ago may take cert-manager's informers a while to list.
        wait_for(
            &format!("ClusterIssuer {} Ready", self.ca),
            Duration::from_secs(150),
            || {
                let issuers = issuers.clone();
                async move {
                    let issuer = issuers.get_opt(&self.ca).await.ok()??;
                    (ready(&issuer)?.0 == "True").then_some(())
                }
            },
        )
        .await;
    }

    /// The CA certificate (PEM), from the CA's Secret.
    async fn ca_pem(&self) -> Vec<u8> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), CLUSTER_RESOURCE_NAMESPACE);
        let secret = secrets.get(&self.ca).await.unwrap();
        secret.data.unwrap()["tls.crt"].0.clone()
    }
}

impl Drop for CaIssuers {
    fn drop(&mut self) {
        if std::env::var("SKIFF_E2E_KEEP").as_deref() == Ok("1") {
            return;
        }
        let (client, names) = (
            self.client.clone(),
            [self.selfsigned.clone(), self.ca.clone()],
        );
        // Drop can't await; a short-lived thread with its own runtime does the deleting.
        let worker = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let dp = DeleteParams::default();
                let issuers = cert_manager_api(&client, None, "ClusterIssuer");
                for name in &names {
                    let _ = issuers.delete(name, &dp).await;
                }
                let ns = Some(CLUSTER_RESOURCE_NAMESPACE);
                let _ = cert_manager_api(&client, ns, "Certificate")
                    .delete(&names[1], &dp)
                    .await;
                let secrets: Api<Secret> = Api::namespaced(client, CLUSTER_RESOURCE_NAMESPACE);
                let _ = secrets.delete(&names[1], &dp).await;
            })
        });
        let _ = worker.join();
    }
}

/// A certificate's serial number as openssl prints it (hex, upper case).
fn serial(pem: &[u8]) -> String {
    let out = openssl(&["x509", "-noout", "-serial"], pem);
    out.trim().trim_start_matches("serial=").to_string()
}

/// A serial in any of the usual hex spellings (colons, case, leading zeros) made comparable.
fn normalize_serial(s: &str) -> String {
    let hex: String = s.chars().filter(|c| *c != ':').collect();
    let hex = hex.trim_start_matches("0x").trim_start_matches('0');
    hex.to_ascii_lowercase()
}

/// A scratch directory for PEM files that openssl and curl read from disk, removed when
/// the returned guard drops.
fn scratch(ns: &TestNamespace) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("skiff-e2e-{}-", ns.name))
        .tempdir()
        .unwrap()
}

fn write(dir: &Path, name: &str, data: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, data).unwrap();
    path.to_str().unwrap().to_string()
}

/// The Secret cert-manager fills for the VirtualServer: checked for its three keys, a
/// certificate for HOST that the CA signed and that matches the key. Returns
/// (tls.crt, ca.crt).
async fn issued_secret(ns: &TestNamespace, issuers: &CaIssuers) -> (Vec<u8>, Vec<u8>) {
    let secret = ns.api::<Secret>().get("site-tls").await.unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let data = secret.data.unwrap();
    for key in ["tls.crt", "tls.key", "ca.crt"] {
        assert!(
            data.get(key).is_some_and(|v| !v.0.is_empty()),
            "Secret site-tls has no {key}"
        );
    }
    let (crt, key, ca) = (&data["tls.crt"].0, &data["tls.key"].0, &data["ca.crt"].0);
    assert_eq!(
        *ca,
        issuers.ca_pem().await,
        "ca.crt is the CA's certificate"
    );
    let text = openssl(&["x509", "-noout", "-ext", "subjectAltName"], crt);
    assert!(
        text.contains(&format!("DNS:{HOST}")),
        "no SAN for {HOST}:\n{text}"
    );
    let issuer = openssl(&["x509", "-noout", "-issuer", "-nameopt", "RFC2253"], crt);
    assert_eq!(issuer.trim(), format!("issuer=CN={} CA", issuers.ca));
    let dir = scratch(ns);
    let (ca_file, crt_file) = (
        write(dir.path(), "ca.crt", ca),
        write(dir.path(), "tls.crt", crt),
    );
    let verified = openssl(&["verify", "-CAfile", &ca_file, &crt_file], b"");
    assert!(verified.contains(": OK"), "{verified}");
    assert_eq!(
        openssl(&["pkey", "-pubout"], key),
        openssl(&["x509", "-noout", "-pubkey"], crt),
        "tls.key is the certificate's key"
    );
    (crt.clone(), ca.clone())
}

/// Asks cert-manager to renew now: the Issuing condition `cmctl renew` sets.
async fn force_renewal(certificates: &Api<DynamicObject>, name: &str) {
    wait_for(
        "the Issuing condition to be set",
        Duration::from_secs(30),
        || async {
            let certificate = certificates.get(name).await.ok()?;
            let mut conditions = certificate.data["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            conditions.retain(|c| c["type"] != "Issuing");
            conditions.push(json!({
                "type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
                "message": "Certificate re-issuance manually triggered by the e2e test",
                "lastTransitionTime": "2026-01-01T00:00:00Z"
            }));
            // The resourceVersion makes it a compare-and-swap; a conflict is tried again.
            let patch = json!({
                "metadata": { "resourceVersion": certificate.metadata.resource_version },
                "status": { "conditions": conditions }
            });
            certificates
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .ok()
                .map(|_| ())
        },
    )
    .await;
}

/// The Secret's certificate once its serial differs from `old`.
async fn wait_reissued(ns: &TestNamespace, old: &str) -> Vec<u8> {
    let secrets = ns.api::<Secret>();
    wait_for(
        &format!("site-tls re-issued (serial other than {old})"),
        Duration::from_secs(120),
        || {
            let secrets = secrets.clone();
            async move {
                let crt = secrets
                    .get("site-tls")
                    .await
                    .ok()?
                    .data?
                    .get("tls.crt")?
                    .0
                    .clone();
                (serial(&crt) != old).then_some(crt)
            }
        },
    )
    .await
}

/// Waits until cert-manager reports the Certificate `site` at `revision` (the count of
/// issuances) and Ready=True: its own view, which CertificateReady follows.
async fn wait_revision(certificates: &Api<DynamicObject>, revision: u64) {
    wait_for(
        &format!("Certificate site at revision {revision}, Ready=True"),
        Duration::from_secs(60),
        || {
            let certificates = certificates.clone();
            async move {
                let c = certificates.get("site").await.ok()?;
                let done = c.data["status"]["revision"] == revision && ready(&c)?.0 == "True";
                done.then_some(())
            }
        },
    )
    .await;
}

/// The test's namespace with the operator installed, cert-manager's CRDs in place (a test
/// before may have removed them), and the site's files.
async fn setup(cluster: &Cluster, ns: &TestNamespace) -> Release {
    install_cert_manager_crds(cluster).await;
    let release = Release::install(cluster, ns, &["operator.replicas=1"]).await;
    ns.apply::<ConfigMap>(
        json!({ "metadata": { "name": "site-files" }, "data": { "index.html": INDEX } }),
    )
    .await;
    release
}

fn site(issuer: &str, replicas: u32) -> Value {
    json!({
        "metadata": { "name": "site" },
        "spec": {
            "hosts": [HOST], "content": { "configMap": "site-files" }, "replicas": replicas,
            "resources": { "requests": { "cpu": "20m", "memory": "16Mi" } },
            "tls": { "issuerRef": { "name": issuer, "kind": "ClusterIssuer" } }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_server_gets_its_certificate_from_cert_manager() {
    let Some(cluster) = skiff_e2e::cluster().await else {
        return;
    };
    let ns = cluster.namespace("certmanager").await;
    let release = setup(&cluster, &ns).await;
    let issuers = CaIssuers::named_after(&ns);

    // The VirtualServer first, while its issuer does not exist: cert-manager says why the
    // Certificate is not ready, and CertificateReady says the same.
    ns.apply::<VirtualServer>(site(&issuers.ca, 0)).await;
    let certificates = cert_manager_api(&ns.client, Some(&ns.name), "Certificate");
    let vss = ns.api::<VirtualServer>();
    let waiting = wait_for(
        "CertificateReady=False with cert-manager's Ready message",
        Duration::from_secs(150),
        || {
            let (certificates, vss) = (certificates.clone(), vss.clone());
            async move {
                let (status, message) = ready(&certificates.get_opt("site").await.ok()??)?;
                let vs = vss.get("site").await.ok()?;
                let (s, reason, m) = condition(&vs, "CertificateReady")?;
                let follows = status == "False" && s == "False" && reason == "Pending";
                (follows && m == message).then_some(message)
            }
        },
    )
    .await;
    eprintln!("before the issuer exists, cert-manager and the operator say: {waiting}");
    let certificate = certificates.get("site").await.unwrap();
    assert_eq!(certificate.data["spec"]["secretName"], "site-tls");
    assert_eq!(certificate.data["spec"]["dnsNames"], json!([HOST]));
    assert_eq!(
        certificate.data["spec"]["issuerRef"]["name"],
        issuers.ca.as_str()
    );

    // The issuers now; cert-manager issues, and CertificateReady follows its Ready=True.
    issuers.create().await;
    let vs = wait_condition(&ns, "site", "CertificateReady", "True").await;
    assert_eq!(condition(&vs, "CertificateReady").unwrap().1, "Issued");
    wait_revision(&certificates, 1).await;
    let (crt, _) = issued_secret(&ns, &issuers).await;
    let first = serial(&crt);

    // A forced renewal: a new certificate (new serial) in the same Secret, revision 2, and
    // CertificateReady stays (or is again) True.
    force_renewal(&certificates, "site").await;
    let renewed = wait_reissued(&ns, &first).await;
    wait_revision(&certificates, 2).await;
    let (crt, _) = issued_secret(&ns, &issuers).await;
    assert_eq!(crt, renewed);
    eprintln!("serial {first} renewed as {}", serial(&crt));
    let vs = wait_condition(&ns, "site", "CertificateReady", "True").await;
    assert_eq!(condition(&vs, "CertificateReady").unwrap().1, "Issued");

    release.uninstall();
}

/// The certificate an HTTPS client is shown for HOST at `ip:443` (SNI), as a serial.
fn served_serial(ip: &str) -> Option<String> {
    let out = Command::new("timeout")
        .args([
            "10",
            "openssl",
            "s_client",
            "-connect",
            &format!("{ip}:443"),
        ])
        .args(["-servername", HOST])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let pem = String::from_utf8_lossy(&out.stdout);
    let begin = pem.find("-----BEGIN CERTIFICATE-----")?;
    let end = pem.find("-----END CERTIFICATE-----")? + "-----END CERTIFICATE-----".len();
    Some(serial(pem[begin..end].as_bytes()))
}

/// What each edge pod's admin port says it serves for the site: GET /certificates is
/// `[{"vhost": .., "serial": "0a:1b:..", "not_after": UNIX_SECONDS}]`. Returns the
/// serials, one per pod.
async fn admin_serials(ns: &TestNamespace) -> Option<Vec<String>> {
    let lp = ListParams::default()
        .labels("app.kubernetes.io/name=skiff,app.kubernetes.io/instance=site");
    let pods = ns.api::<Pod>().list(&lp).await.ok()?.items;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let mut serials = Vec::new();
    for pod in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let ip = pod.status.as_ref()?.pod_ip.clone()?;
        let url = format!("http://{ip}:9145/certificates");
        let text = client.get(&url).send().await.ok()?.text().await.ok()?;
        let body: Value = serde_json::from_str(&text).ok()?;
        // `vhost` is the config's virtual server name, which the operator takes from the
        // VirtualServer ("site"); its host would do as well.
        let entry = body
            .as_array()?
            .iter()
            .find(|e| e["vhost"] == "site" || e["vhost"] == HOST)?;
        assert!(
            !entry["not_after"].is_null(),
            "{url}: no not_after in {entry}"
        );
        serials.push(normalize_serial(entry["serial"].as_str()?));
    }
    (!serials.is_empty()).then_some(serials)
}

/// The operator mounts the Secret, gives the Service 443 -> 8443, and each pod's admin
/// port reports the serial it serves on /certificates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_server_serves_the_issued_certificate_over_https() {
    let Some(cluster) = skiff_e2e::cluster().await else {
        return;
    };
    let ns = cluster.namespace("certmanager-https").await;
    let release = setup(&cluster, &ns).await;
    let issuers = CaIssuers::named_after(&ns);
    issuers.create().await;
    ns.apply::<VirtualServer>(site(&issuers.ca, 2)).await;
    wait_condition(&ns, "site", "CertificateReady", "True").await;
    wait_condition(&ns, "site", "Ready", "True").await;
    let (crt, ca) = issued_secret(&ns, &issuers).await;
    let first = serial(&crt);

    // The Service: 443 to the pods' 8443.
    let svc = ns.api::<Service>().get("site").await.unwrap();
    let spec = svc.spec.unwrap();
    let https = spec
        .ports
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.port == 443)
        .expect("Service site has port 443");
    let target = match https
        .target_port
        .clone()
        .expect("port 443 has a targetPort")
    {
        IntOrString::Int(port) => port,
        IntOrString::String(name) => {
            // A named port: the edge container's port of that name.
            let d = ns.api::<Deployment>().get("site").await.unwrap();
            let containers = d.spec.unwrap().template.spec.unwrap().containers;
            let port = containers
                .iter()
                .flat_map(|c| c.ports.clone().unwrap_or_default());
            port.into_iter()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .unwrap_or_else(|| panic!("no container port named {name}"))
                .container_port
        }
    };
    assert_eq!(target, 8443, "Service port 443 goes to the pods' 8443");
    let ip = spec.cluster_ip.expect("a ClusterIP");

    // Through the Service: the issued certificate by SNI, and a client that trusts only
    // the CA gets the site.
    let wanted = first.clone();
    wait_for(
        &format!("{ip}:443 to present serial {first} for {HOST}"),
        Duration::from_secs(120),
        || {
            let (ip, wanted) = (ip.clone(), wanted.clone());
            async move { (served_serial(&ip)? == wanted).then_some(()) }
        },
    )
    .await;
    let dir = scratch(&ns);
    let ca_file = write(dir.path(), "ca.crt", &ca);
    let out = Command::new("curl")
        .args(["--silent", "--show-error", "--fail", "--max-time", "10"])
        .args([
            "--cacert",
            &ca_file,
            "--resolve",
            &format!("{HOST}:443:{ip}"),
        ])
        .arg(format!("https://{HOST}/"))
        .output()
        .expect("run curl");
    assert!(
        out.status.success(),
        "curl https://{HOST}/: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), INDEX);
    // Each pod's admin port says which certificate it serves.
    let want = normalize_serial(&first);
    wait_for(
        "every pod to report the serial on /certificates",
        Duration::from_secs(60),
        || {
            let (ns, want) = (&ns, want.clone());
            async move {
                let serials = admin_serials(ns).await?;
                serials.iter().all(|s| *s == want).then_some(())
            }
        },
    )
    .await;

    // A renewal reaches the pods without a restart: the new serial is served.
    let certificates = cert_manager_api(&ns.client, Some(&ns.name), "Certificate");
    force_renewal(&certificates, "site").await;
    let second = serial(&wait_reissued(&ns, &first).await);
    // The kubelet refreshes a Secret volume within about a minute, then the pods reload.
    wait_for(
        &format!("{ip}:443 to present the renewed serial {second}"),
        Duration::from_secs(180),
        || {
            let (ip, second) = (ip.clone(), second.clone());
            async move { (served_serial(&ip)? == second).then_some(()) }
        },
    )
    .await;
    let want = normalize_serial(&second);
    wait_for(
        "every pod to report the renewed serial",
        Duration::from_secs(120),
        || {
            let (ns, want) = (&ns, want.clone());
            async move {
                let serials = admin_serials(ns).await?;
                serials.iter().all(|s| *s == want).then_some(())
            }
        },
    )
    .await;

    release.uninstall();
}

/// The edge pods' (name, uid, restart count), to show a certificate change restarted none.
async fn edge_pods(ns: &TestNamespace) -> Vec<(String, String, i32)> {
    let lp = ListParams::default()
        .labels("app.kubernetes.io/name=skiff,app.kubernetes.io/instance=site");
    let mut pods: Vec<_> = ns
        .api::<Pod>()
        .list(&lp)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let restarts = p
                .status
                .and_then(|s| s.container_statuses)
                .unwrap_or_default()
                .iter()
                .map(|c| c.restart_count)
                .sum();
            (
                p.metadata.name.unwrap_or_default(),
                p.metadata.uid.unwrap_or_default(),
                restarts,
            )
        })
        .collect();
    pods.sort();
    pods
}

/// A VirtualServer whose certificate is a Secret of the user's: served over HTTPS through
/// the Service (verified against that very certificate), plain HTTP redirected with 308;
/// the Secret's data replaced in place reaches every pod with no pod restarted or replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_server_serves_its_own_secret_and_a_replaced_one() {
    let Some(cluster) = skiff_e2e::cluster().await else {
        return;
    };
    let ns = cluster.namespace("tls-secret").await;
    let release = setup(&cluster, &ns).await;
    let dir = scratch(&ns);
    let (crt, key) = self_signed(dir.path(), "first", HOST);
    ns.apply::<Secret>(tls_secret("site-cert", &crt, &key))
        .await;
    let mut vs = site("unused", 2);
    vs["spec"]["tls"] = json!({ "secretName": "site-cert", "redirect": true });
    ns.apply::<VirtualServer>(vs).await;
    wait_condition(&ns, "site", "Ready", "True").await;
    let ip = ns
        .api::<Service>()
        .get("site")
        .await
        .unwrap()
        .spec
        .unwrap()
        .cluster_ip
        .expect("a ClusterIP");

    let first = serial(&crt);
    wait_for(
        &format!("{ip}:443 to present the Secret's serial {first}"),
        Duration::from_secs(120),
        || {
            let (ip, first) = (ip.clone(), first.clone());
            async move { (served_serial(&ip)? == first).then_some(()) }
        },
    )
    .await;
    let pinned = write(dir.path(), "first-pinned.crt", &crt);
    let curl = |args: &[&str]| {
        let out = Command::new("curl")
            .args(["--silent", "--show-error", "--max-time", "10"])
            .args(["--resolve", &format!("{HOST}:443:{ip}")])
            .args(["--resolve", &format!("{HOST}:80:{ip}")])
            .args(args)
            .output()
            .expect("run curl");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, body, err) = curl(&["--cacert", &pinned, &format!("https://{HOST}/")]);
    assert!(
        ok,
        "curl https://{HOST}/ trusting the Secret's certificate: {err}"
    );
    assert_eq!(body, INDEX);
    let (ok, head, err) = curl(&["--include", &format!("http://{HOST}/a?b=1")]);
    assert!(ok, "curl http://{HOST}/a?b=1: {err}");
    assert!(
        head.starts_with("HTTP/1.1 308"),
        "plain HTTP is redirected: {head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("location: https://{HOST}/a?b=1")),
        "to the same URL over HTTPS: {head}"
    );

    // The Secret's data replaced in place (what a renewal by any tool does).
    let before = edge_pods(&ns).await;
    assert_eq!(before.len(), 2, "two edge pods: {before:?}");
    let (crt2, key2) = self_signed(dir.path(), "second", HOST);
    let second = serial(&crt2);
    assert_ne!(first, second);
    ns.apply::<Secret>(tls_secret("site-cert", &crt2, &key2))
        .await;
    // The kubelet refreshes a Secret volume within about a minute, then the pods reload.
    wait_for(
        &format!("{ip}:443 to present the replaced serial {second}"),
        Duration::from_secs(180),
        || {
            let (ip, second) = (ip.clone(), second.clone());
            async move { (served_serial(&ip)? == second).then_some(()) }
        },
    )
    .await;
    let want = normalize_serial(&second);
    wait_for(
        "every pod to report the replaced serial",
        Duration::from_secs(120),
        || {
            let (ns, want) = (&ns, want.clone());
            async move {
                let serials = admin_serials(ns).await?;
                (serials.len() == 2 && serials.iter().all(|s| *s == want)).then_some(())
            }
        },
    )
    .await;
    let pinned = write(dir.path(), "second-pinned.crt", &crt2);
    let (ok, body, err) = curl(&["--cacert", &pinned, &format!("https://{HOST}/")]);
    assert!(
        ok,
        "curl https://{HOST}/ trusting the new certificate: {err}"
    );
    assert_eq!(body, INDEX);
    assert_eq!(
        edge_pods(&ns).await,
        before,
        "no edge pod was restarted or replaced by the new certificate"
    );

    release.uninstall();
}
