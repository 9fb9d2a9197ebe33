//! The operator as users run it, installed by `helm install` of charts/skiff, against the
//! real cluster:
//! - the CRD from the Rust types is accepted by the apiserver, and every CEL case in
//!   operator/tests/cases/refused-by-cel.yaml is refused there with its message;
//! - a VirtualServer becomes a config, Deployment, Service, PDB and NetworkPolicy that
//!   serve its site;
//! - reconcile is idempotent (no resourceVersion moves on a settled object), also after
//!   the operator pod is replaced;
//! - a child edited or deleted by hand is put back;
//! - cert-manager's and the Prometheus Operator's CRDs installed later are discovered:
//!   a Certificate and a ServiceMonitor appear, and CertificateReady follows the Ready
//!   condition cert-manager's controller (running with the cluster) writes on it (issuance
//!   and renewal from real issuers: tests/cert_manager.rs);
//! - a config-only change is hot-reloaded in place (same pods, new config hash), and the
//!   status reports it live once every pod serves it (read back from the pods);
//! - an invalid config is refused with `Accepted=False` while the old one keeps serving;
//! - a burst of pod-template edits under load becomes one rollout with no failed request;
//! - Events tell the story, and deleting the VirtualServer collects every child.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{ListParams, Patch, PatchParams, PostParams};

use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Api, ResourceExt};
use serde_json::{json, Value};
use skiff_e2e::prometheus::service_monitors;
use skiff_e2e::{
    condition, install_third_party_crds, leader, leader_metrics, metric, remove_third_party_crds,
    wait_condition, wait_for, wait_http, Load, Release, TestNamespace, SKIFF_IMAGE,
};
use skiff_operator::crd::VirtualServer;
use std::time::{Duration, Instant};

/// Waits until the operator reports every serving pod on `hash` (ConfigLive=True).
async fn wait_live(ns: &TestNamespace, name: &str, hash: &str) -> VirtualServer {
    let api = ns.api::<VirtualServer>();
    wait_for(
        &format!("config {hash} live on every pod of {name}"),
        Duration::from_secs(150),
        || {
            let api = api.clone();
            async move {
                let vs = api.get(name).await.ok()?;
                let live = vs.status.as_ref()?.live_config_hash.as_deref() == Some(hash)
                    && condition(&vs, "ConfigLive")?.0 == "True";
                live.then_some(vs)
            }
        },
    )
    .await
}

async fn resource_version<K>(ns: &TestNamespace, name: &str) -> String
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
    <K as kube::Resource>::DynamicType: Default,
{
    ns.api::<K>()
        .get(name)
        .await
        .unwrap()
        .resource_version()
        .unwrap()
}

/// The children's resourceVersions, then the VirtualServer's (last).
async fn resource_versions(ns: &TestNamespace) -> Vec<String> {
    vec![
        resource_version::<ConfigMap>(ns, "site-config").await,
        resource_version::<Deployment>(ns, "site").await,
        resource_version::<Service>(ns, "site").await,
        resource_version::<Service>(ns, "site-metrics").await,
        resource_version::<PodDisruptionBudget>(ns, "site").await,
        // The chart turns NetworkPolicies on; the bridge CNI does not enforce them, but
        // the apiserver validates and stores this one.
        resource_version::<NetworkPolicy>(ns, "site").await,
        resource_version::<VirtualServer>(ns, "site").await,
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtualserver_reconciles_into_a_serving_edge_farm() {
    let Some(cluster) = skiff_e2e::cluster().await else {
        return;
    };
    let ns = cluster.namespace("operator").await;
    // The first half runs on a cluster without cert-manager or the Prometheus Operator.
    remove_third_party_crds(&cluster).await;
    let release = Release::install(&cluster, &ns, &["operator.replicas=1"]).await;

    // CEL at admission: every refused case is refused by the real apiserver, with the
    // message the client-side unit test (operator/tests/cel_rules.rs) expects.
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let cases_path = skiff_e2e::repo_root().join("operator/tests/cases/refused-by-cel.yaml");
    let cases: Vec<Value> =
        serde_saphyr::from_str(&std::fs::read_to_string(cases_path).unwrap()).unwrap();
    assert!(cases.len() >= 10);
    let raw: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &ApiResource::erase::<VirtualServer>(&()),
    );
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "skiff.dev/v1alpha1", "kind": "VirtualServer",
            "metadata": { "name": name }, "spec": case["spec"],
        }))
        .unwrap();
        let err = match raw.create(&dry_run, &object).await {
            Ok(_) => panic!("the apiserver accepted CEL case {name}"),
            Err(e) => e.to_string(),
        };
        let want = case["refused"].as_str().unwrap();
        assert!(
            err.contains(want),
            "case {name}: wanted {want:?}, got {err}"
        );
    }

    // Every example in examples/virtualservers/ passes the apiserver's schema and CEL rules.
    let examples = skiff_e2e::repo_root().join("examples/virtualservers");
    for entry in std::fs::read_dir(&examples).unwrap() {
        let path = entry.unwrap().path();
        let vs: VirtualServer =
            serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        ns.api::<VirtualServer>()
            .create(&dry_run, &vs)
            .await
            .unwrap_or_else(|e| panic!("{} refused: {e}", path.display()));
    }

    ns.apply::<ConfigMap>(json!({ "metadata": { "name": "site-files" }, "data": { "index.html": "<h1>operated</h1>\n", "404.html": "<h1>lost</h1>\n" } }))
        .await;
    // TLS from an issuer, on a cluster without cert-manager: a clear condition, no crash.
    ns.apply::<VirtualServer>(json!({
        "metadata": { "name": "secure" },
        "spec": {
            "hosts": ["secure.example"], "content": { "configMap": "site-files" }, "replicas": 0,
            "tls": { "issuerRef": { "name": "letsencrypt", "kind": "ClusterIssuer" } }
        }
    }))
    .await;
    let secure = wait_condition(&ns, "secure", "CertificateReady", "False").await;
    assert_eq!(
        condition(&secure, "CertificateReady").unwrap().1,
        "CertManagerNotInstalled"
    );
    assert_eq!(condition(&secure, "Accepted").unwrap().0, "True");

    let spec = json!({
        "hosts": ["site.example"],
        "content": { "configMap": "site-files" },
        "errorPages": { "404": "/404.html" },
        "replicas": 2,
        "resources": { "requests": { "cpu": "20m", "memory": "16Mi" } },
        "rules": [
            { "name": "old", "match": { "prefix": "/old/" }, "action": { "redirect": { "to": "/", "status": 301 } } },
            { "name": "app", "match": { "prefix": "/app/" }, "action": { "static": { "fallback": "/index.html" } } },
            { "name": "ab", "match": { "prefix": "/ab/" }, "action": { "split": [
                { "weight": 50, "action": { "respond": { "status": 200, "body": "a" } } },
                { "weight": 50, "action": { "respond": { "status": 200, "body": "b" } } }
            ] } }
        ]
    });
    ns.apply::<VirtualServer>(json!({ "metadata": { "name": "site" }, "spec": spec.clone() }))
        .await;
    let vs = wait_condition(&ns, "site", "Ready", "True").await;
    assert_eq!(condition(&vs, "Accepted").unwrap().0, "True");
    assert_eq!(condition(&vs, "ResolvedRefs").unwrap().0, "True");
    let status = vs.status.clone().unwrap();
    assert_eq!(status.ready_replicas, Some(2));
    let hash = status.config_hash.clone().unwrap();
    // The operator read the served config back from the pods.
    let live = wait_live(&ns, "site", &hash).await;
    assert_eq!(
        condition(&live, "ConfigLive").unwrap().2,
        format!("2/2 serving pods serve config {hash}")
    );
    let url = format!(
        "http://{}",
        status
            .address
            .clone()
            .expect("status has the Service address")
    );
    let r = wait_http(&format!("{url}/"), Duration::from_secs(60), |r| {
        r.status == 200
    })
    .await;
    assert_eq!(r.body, "<h1>operated</h1>\n");
    // A single-page app's route gets the shell; a path no fallback covers is a 404, with
    // the site's own page.
    let shell = Duration::from_secs(10);
    let r = wait_http(&format!("{url}/app/orders/7"), shell, |r| r.status == 200).await;
    assert_eq!(r.body, "<h1>operated</h1>\n");
    let r = wait_http(&format!("{url}/orders/7"), shell, |r| r.status == 404).await;
    assert_eq!(r.body, "<h1>lost</h1>\n");
    // A split's targets both answer (the apiserver's CEL took the weights).
    for body in ["a", "b"] {
        wait_http(&format!("{url}/ab/"), shell, |r| r.body == body).await;
    }
    let d = ns.api::<Deployment>().get("site").await.unwrap();
    assert_eq!(
        d.owner_references()[0].name,
        "site",
        "children are owned by the VirtualServer"
    );

    // Idempotent: a reconcile of the settled object writes nothing.
    let before = resource_versions(&ns).await;
    let vs_api = ns.api::<VirtualServer>();
    vs_api
        .patch(
            "site",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "annotations": { "e2e/poke": "1" } } })),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut after = resource_versions(&ns).await;
    let mut expected = before.clone();
    // Only the VirtualServer itself moved (the annotation just added).
    expected.pop();
    after.pop();
    assert_eq!(after, expected, "a settled reconcile changed a child");
    // A replaced operator pod reconciles everything again, and writes nothing either.
    let before = resource_versions(&ns).await;
    let old_leader = leader(&ns).await.name_any();
    ns.api::<Pod>()
        .delete(&old_leader, &Default::default())
        .await
        .unwrap();
    let new_leader = wait_for(
        "a new operator pod to lead",
        Duration::from_secs(120),
        || {
            let ns = &ns;
            let old_leader = old_leader.clone();
            async move {
                let pod = leader(ns).await;
                (pod.name_any() != old_leader).then_some(pod.name_any())
            }
        },
    )
    .await;
    wait_for(
        "the new operator to reconcile both VirtualServers",
        Duration::from_secs(60),
        || async {
            let m = leader_metrics(&ns).await;
            (metric(&m, "skiff_operator_reconciliations_total")? >= 2.0).then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        resource_versions(&ns).await,
        before,
        "the new operator ({new_leader}) wrote to settled objects"
    );

    // Drift: a hand edit of the config is put back.
    let cms = ns.api::<ConfigMap>();
    cms.patch(
        "site-config",
        &PatchParams::default(),
        &Patch::Merge(json!({ "data": { "skiff.yaml": "garbage: [" } })),
    )
    .await
    .unwrap();
    wait_for(
        "the hand-edited config to be restored",
        Duration::from_secs(30),
        || {
            let (cms, hash) = (cms.clone(), hash.clone());
            async move {
                let cm = cms.get("site-config").await.ok()?;
                let text = cm.data?.get("skiff.yaml")?.clone();
                (skiff_config::config_hash(&text) == hash).then_some(())
            }
        },
    )
    .await;

    // A child deleted by hand is recreated.
    let services = ns.api::<Service>();
    let old_uid = services.get("site").await.unwrap().metadata.uid;
    services.delete("site", &Default::default()).await.unwrap();
    wait_for(
        "the deleted Service to be recreated",
        Duration::from_secs(30),
        || {
            let (services, old_uid) = (services.clone(), old_uid.clone());
            async move {
                let svc = services.get_opt("site").await.ok()??;
                (svc.metadata.uid != old_uid && svc.metadata.deletion_timestamp.is_none())
                    .then_some(())
            }
        },
    )
    .await;
    let url = format!(
        "http://{}",
        ns.api::<Service>()
            .get("site")
            .await
            .unwrap()
            .spec
            .unwrap()
            .cluster_ip
            .unwrap()
    );
    wait_http(&format!("{url}/"), Duration::from_secs(60), |r| {
        r.status == 200
    })
    .await;

    // No Prometheus Operator here: a clear condition, and the metrics Service to scrape.
    let vs = ns.api::<VirtualServer>().get("site").await.unwrap();
    let (status, reason, _) = condition(&vs, "Monitored").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "PrometheusOperatorNotInstalled")
    );
    assert!(services.get_opt("site-metrics").await.unwrap().is_some());

    // cert-manager and the Prometheus Operator installed now: their CRDs are discovered
    // with no edit to either VirtualServer. (cert-manager's controller runs with the
    // cluster and resumes once its CRDs are back; the Prometheus Operator does not run.)
    install_third_party_crds(&cluster).await;
    let vs = wait_condition(&ns, "site", "Monitored", "True").await;
    assert_eq!(
        condition(&vs, "Monitored").unwrap().1,
        "ServiceMonitorCreated"
    );
    let monitors = service_monitors(&ns.client, &ns.name);
    let monitor = monitors.get("site").await.unwrap();
    let selector = &monitor.data["spec"]["selector"]["matchLabels"];
    let metrics_labels = services
        .get("site-metrics")
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap();
    for (k, v) in selector.as_object().unwrap() {
        assert_eq!(
            metrics_labels.get(k).map(String::as_str),
            v.as_str(),
            "the ServiceMonitor selects the metrics Service"
        );
    }
    assert_eq!(monitor.data["spec"]["endpoints"][0]["port"], "admin");
    assert_eq!(
        monitor.data["spec"]["endpoints"][0]["relabelings"][0],
        json!({
            "sourceLabels": ["__meta_kubernetes_service_label_app_kubernetes_io_instance"],
            "targetLabel": "virtualserver",
            "action": "replace"
        }),
        "every edge series gets its VirtualServer's name, kept by the real CRD's schema"
    );
    let pending = wait_for(
        "the Certificate for secure",
        Duration::from_secs(60),
        || async {
            let vs = ns.api::<VirtualServer>().get("secure").await.ok()?;
            (condition(&vs, "CertificateReady")?.1 == "Pending").then_some(vs)
        },
    )
    .await;
    assert_eq!(condition(&pending, "CertificateReady").unwrap().0, "False");
    let certificates: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "cert-manager.io",
            "v1",
            "Certificate",
        )),
    );
    let certificate = certificates.get("secure").await.unwrap();
    assert_eq!(
        certificate.data["spec"]["dnsNames"],
        json!(["secure.example"])
    );
    assert_eq!(certificate.data["spec"]["issuerRef"]["name"], "letsencrypt");
    assert_eq!(
        certificate.data["spec"]["issuerRef"]["kind"],
        "ClusterIssuer"
    );
    assert_eq!(certificate.owner_references()[0].name, "secure");
    // cert-manager's own Ready condition, which CertificateReady follows: it cannot issue
    // (no ClusterIssuer "letsencrypt" exists), so False, with cert-manager's message.
    let (message, follows) = wait_for(
        "CertificateReady to carry cert-manager's Ready=False message",
        Duration::from_secs(150),
        || {
            let (certificates, vs_api) = (certificates.clone(), ns.api::<VirtualServer>());
            async move {
                let certificate = certificates.get("secure").await.ok()?;
                let ready = certificate.data["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .find(|c| c["type"] == "Ready")?
                    .clone();
                let vs = vs_api.get("secure").await.ok()?;
                let (status, reason, message) = condition(&vs, "CertificateReady")?;
                let follows = ready["status"] == "False"
                    && ready["message"].as_str() == Some(message.as_str());
                follows.then_some((message, (status, reason)))
            }
        },
    )
    .await;
    assert_eq!(
        follows,
        ("False".to_string(), "Pending".to_string()),
        "{message}"
    );

    // A config-only change: delivered in place, no rollout, hot-reloaded by the pods.
    let generation = ns
        .api::<Deployment>()
        .get("site")
        .await
        .unwrap()
        .metadata
        .generation;
    let uids_before = pod_uids(&ns).await;
    let mut changed = spec.clone();
    changed["rules"].as_array_mut().unwrap().push(json!({
        "name": "hello", "match": { "path": "/hello" }, "action": { "respond": { "status": 200, "body": "hot\n" } }
    }));
    ns.apply::<VirtualServer>(json!({ "metadata": { "name": "site" }, "spec": changed }))
        .await;
    // Each pod reloads when the kubelet refreshes its ConfigMap volume: ask every pod.
    let pods = ns
        .api::<Pod>()
        .list(
            &ListParams::default()
                .labels("app.kubernetes.io/name=skiff,app.kubernetes.io/instance=site"),
        )
        .await
        .unwrap();
    assert_eq!(pods.items.len(), 2);
    for pod in pods.items {
        let ip = pod.status.and_then(|s| s.pod_ip).expect("pod IP");
        let r = wait_http(
            &format!("http://{ip}:8080/hello"),
            Duration::from_secs(120),
            |r| r.body == "hot\n",
        )
        .await;
        assert_eq!(r.status, 200);
    }
    let d = ns.api::<Deployment>().get("site").await.unwrap();
    assert_eq!(
        d.metadata.generation, generation,
        "a config-only change must not roll the pods"
    );
    let vs = wait_condition(&ns, "site", "Accepted", "True").await;
    let new_hash = vs.status.unwrap().config_hash.unwrap();
    assert_ne!(new_hash, hash);
    // The status says when the reload reached every pod, from the pods themselves.
    wait_live(&ns, "site", &new_hash).await;
    // Same pods (no restart), each reporting the new config's hash.
    assert_eq!(
        pod_uids(&ns).await,
        uids_before,
        "hot reload must not restart pods"
    );
    let client = reqwest::Client::new();
    for ip in pod_ips(&ns).await {
        let metrics = client
            .get(format!("http://{ip}:9145/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let want = format!("skiff_config_info{{hash=\"{new_hash}\"}} 1");
        assert!(
            metrics.contains(&want),
            "{ip} does not report {want}:\n{metrics}"
        );
    }

    // An invalid config is refused; the previous one keeps serving.
    let mut broken = spec.clone();
    broken["rules"] = json!([{ "match": { "regex": "([unclosed" }, "action": { "static": {} } }]);
    ns.apply::<VirtualServer>(json!({ "metadata": { "name": "site" }, "spec": broken }))
        .await;
    let vs = wait_condition(&ns, "site", "Accepted", "False").await;
    let (_, reason, message) = condition(&vs, "Accepted").unwrap();
    assert_eq!(reason, "InvalidConfig");
    assert!(message.contains("regex"), "{message}");
    let cm = cms.get("site-config").await.unwrap();
    assert_eq!(
        skiff_config::config_hash(&cm.data.unwrap()["skiff.yaml"]),
        new_hash,
        "the old config stays"
    );
    let r = wait_http(&format!("{url}/hello"), Duration::from_secs(10), |_| true).await;
    assert_eq!(r.body, "hot\n");

    // A backend pool with `placement: pool`: its own Deployment and headless Service
    // (the skiff image serving its built-in example site stands in for an app server),
    // reached by DNS name from the edge. Dropping the pool deletes its workload.
    let mut pooled = spec.clone();
    pooled["pools"] = json!([{
        "name": "app", "protocol": "http", "image": SKIFF_IMAGE, "port": 9000,
        "args": ["serve", "/srv/www", "--listen", "0.0.0.0:9000", "--admin-listen", "127.0.0.1:9146", "--threads", "1"],
        "resources": { "requests": { "cpu": "20m", "memory": "16Mi" } }
    }]);
    pooled["rules"] = json!([{ "name": "app", "match": { "prefix": "/css/" }, "action": { "proxy": { "pool": "app" } } }]);
    ns.apply::<VirtualServer>(json!({ "metadata": { "name": "site" }, "spec": pooled }))
        .await;
    wait_condition(&ns, "site", "Accepted", "True").await;
    ns.wait_rollout("site-app", Duration::from_secs(120)).await;
    let svc = ns.api::<Service>().get("site-app").await.unwrap();
    assert_eq!(
        svc.spec.unwrap().cluster_ip.as_deref(),
        Some("None"),
        "a headless Service"
    );
    let css = wait_http(
        &format!("{url}/css/site.css"),
        Duration::from_secs(120),
        |r| r.status == 200,
    )
    .await;
    assert!(!css.body.is_empty());
    ns.apply::<VirtualServer>(json!({ "metadata": { "name": "site" }, "spec": spec.clone() }))
        .await;
    let deployments = ns.api::<Deployment>();
    wait_for(
        "the dropped pool's Deployment to be deleted",
        Duration::from_secs(60),
        || {
            let deployments = deployments.clone();
            async move {
                deployments
                    .get_opt("site-app")
                    .await
                    .ok()?
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;

    // A burst of pod-template edits (resources) under load: the operator coalesces them
    // into one Deployment update, so pods roll once, one by one, and no request through
    // the Service fails.
    wait_condition(&ns, "site", "Ready", "True").await;
    let generation_before = ns
        .api::<Deployment>()
        .get("site")
        .await
        .unwrap()
        .metadata
        .generation
        .unwrap();
    let load = Load::start(&format!("{url}/"), Duration::from_secs(40), 8);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let burst = Instant::now();
    for cpu in ["21m", "22m", "23m", "24m", "25m"] {
        let mut edited = spec.clone();
        edited["resources"] = json!({ "requests": { "cpu": cpu, "memory": "16Mi" } });
        ns.apply::<VirtualServer>(json!({ "metadata": { "name": "site" }, "spec": edited }))
            .await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let burst = burst.elapsed();
    // The operator applies the new template first (a moment after the edits), then it rolls.
    wait_condition(&ns, "site", "Accepted", "True").await;
    let d = ns.wait_rollout("site", Duration::from_secs(120)).await;
    assert_eq!(
        d.metadata.generation.unwrap(),
        generation_before + 1,
        "5 edits in {burst:?} must become one Deployment update"
    );
    let cpu = &d.spec.unwrap().template.spec.unwrap().containers[0];
    assert_eq!(
        cpu.resources.as_ref().unwrap().requests.as_ref().unwrap()["cpu"].0,
        "25m",
        "the last edit wins"
    );
    let report = load.finish();
    eprintln!(
        "load during the operator's rollout: {} requests, {} errors",
        report.requests,
        report.errors()
    );
    assert!(report.requests > 1000, "{}", report.raw);
    assert_eq!(
        report.errors(),
        0,
        "a rollout must not fail requests:\n{}",
        report.raw
    );
    wait_condition(&ns, "site", "Ready", "True").await;

    // Events tell the story: created, updated in place, rejected, rolled out.
    let events = ns
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .unwrap();
    let reasons: Vec<String> = events
        .items
        .iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("site"))
        .filter(|e| e.reporting_controller.as_deref() == Some("skiff-operator"))
        .filter_map(|e| e.reason.clone())
        .collect();
    for want in ["Created", "Updated", "Rejected", "RollingOut"] {
        assert!(
            reasons.iter().any(|r| r == want),
            "no {want} Event for site; saw {reasons:?}"
        );
    }

    // Deleting the VirtualServer garbage-collects every child.
    ns.api::<VirtualServer>()
        .delete("site", &Default::default())
        .await
        .unwrap();
    let (deployments, configs, services, policies) = (
        ns.api::<Deployment>(),
        ns.api::<ConfigMap>(),
        ns.api::<Service>(),
        ns.api::<NetworkPolicy>(),
    );
    wait_for(
        "the children to be garbage-collected",
        Duration::from_secs(90),
        || {
            let (d, c, s, p) = (
                deployments.clone(),
                configs.clone(),
                services.clone(),
                policies.clone(),
            );
            async move {
                let gone = d.get_opt("site").await.ok()?.is_none()
                    && c.get_opt("site-config").await.ok()?.is_none()
                    && s.get_opt("site").await.ok()?.is_none()
                    && p.get_opt("site").await.ok()?.is_none();
                gone.then_some(())
            }
        },
    )
    .await;

    // The third-party CRDs go, so a rerun starts without them; then the chart.
    remove_third_party_crds(&cluster).await;
    release.uninstall();
}

async fn edge_pods(ns: &TestNamespace) -> Vec<Pod> {
    let lp = ListParams::default()
        .labels("app.kubernetes.io/name=skiff,app.kubernetes.io/instance=site");
    let mut pods = ns.api::<Pod>().list(&lp).await.unwrap().items;
    pods.retain(|p| p.metadata.deletion_timestamp.is_none());
    pods.sort_by_key(|p| p.metadata.name.clone());
    pods
}

async fn pod_uids(ns: &TestNamespace) -> Vec<String> {
    edge_pods(ns)
        .await
        .into_iter()
        .filter_map(|p| p.metadata.uid)
        .collect()
}

async fn pod_ips(ns: &TestNamespace) -> Vec<String> {
    edge_pods(ns)
        .await
        .into_iter()
        .filter_map(|p| p.status?.pod_ip)
        .collect()
}
