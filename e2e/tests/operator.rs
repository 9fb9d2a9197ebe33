//! The operator against the real cluster: the CRD from the Rust types is accepted by the
//! apiserver (CEL rules included); a VirtualServer becomes a config, Deployment, Service
//! and PDB that serve its site; reconcile is idempotent (no resourceVersion moves on a
//! settled object); a child edited by hand is put back; a config-only change is delivered
//! in place (no rollout) and hot-reloaded; and an invalid config is refused with
//! `Accepted=False` while the old one keeps serving.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, CustomResourceExt, ResourceExt};
use serde_json::json;
use skiff_e2e::{wait_for, wait_http, Load, TestNamespace, SKIFF_IMAGE};
use skiff_operator::controller::{self, Context};
use skiff_operator::crd::VirtualServer;
use std::sync::Arc;
use std::time::Duration;

async fn install_crd(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = VirtualServer::crd();
    crds.patch(
        "virtualservers.skiff.dev",
        &PatchParams::apply("skiff-e2e").force(),
        &Patch::Apply(serde_json::to_value(&crd).unwrap()),
    )
    .await
    .expect("the apiserver accepts the generated CRD");
    wait_for("the CRD to be established", Duration::from_secs(30), || {
        let crds = crds.clone();
        async move {
            let crd = crds.get("virtualservers.skiff.dev").await.ok()?;
            let established = crd
                .status?
                .conditions?
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            established.then_some(())
        }
    })
    .await;
}

fn condition(vs: &VirtualServer, type_: &str) -> Option<(String, String, String)> {
    let c = vs
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

async fn wait_condition(
    ns: &TestNamespace,
    name: &str,
    type_: &str,
    status: &str,
) -> VirtualServer {
    let api = ns.api::<VirtualServer>();
    wait_for(
        &format!("{type_}={status} on {name}"),
        Duration::from_secs(180),
        || {
            let api = api.clone();
            async move {
                let vs = api.get(name).await.ok()?;
                let current = vs.status.as_ref()?.observed_generation == vs.metadata.generation
                    && condition(&vs, type_)?.0 == status;
                current.then_some(vs)
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
        resource_version::<VirtualServer>(ns, "site").await,
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtualserver_reconciles_into_a_serving_edge_farm() {
    let Some(cluster) = skiff_e2e::cluster().await else {
        return;
    };
    install_crd(&cluster.client).await;
    let ns = cluster.namespace("operator").await;
    // The operator itself, in-process, against the real apiserver.
    let ctx = Arc::new(Context {
        client: cluster.client.clone(),
        recorder: kube::runtime::events::Recorder::new(
            cluster.client.clone(),
            controller::reporter(),
        ),
        metrics: Default::default(),
        default_image: SKIFF_IMAGE.into(),
    });
    let mut operator = tokio::spawn(controller::run(ctx.clone()));

    // CEL at admission: two content sources are refused before the operator sees them.
    let bad: VirtualServer = serde_json::from_value(json!({
        "metadata": { "name": "bad" },
        "spec": { "hosts": ["a.example"], "content": { "configMap": "x", "persistentVolumeClaim": "y" } }
    }))
    .unwrap();
    let err = ns
        .api::<VirtualServer>()
        .create(&PostParams::default(), &bad)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("exactly one of configMap"),
        "{err}"
    );
    let bad: VirtualServer = serde_json::from_value(json!({
        "metadata": { "name": "bad-cors" },
        "spec": { "hosts": ["a.example"], "content": { "configMap": "x" }, "rules": [{
            "match": { "prefix": "/api/" }, "action": { "static": {} },
            "cors": { "allowOrigins": ["*"], "allowCredentials": true }
        }] }
    }))
    .unwrap();
    let err = ns
        .api::<VirtualServer>()
        .create(&PostParams::default(), &bad)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("allowCredentials cannot be combined"),
        "{err}"
    );

    // Every example in examples/virtualservers/ passes the apiserver's schema and CEL rules.
    let examples = skiff_e2e::repo_root().join("examples/virtualservers");
    for entry in std::fs::read_dir(&examples).unwrap() {
        let path = entry.unwrap().path();
        let vs: VirtualServer =
            serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let dry_run = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        ns.api::<VirtualServer>()
            .create(&dry_run, &vs)
            .await
            .unwrap_or_else(|e| panic!("{} refused: {e}", path.display()));
    }

    ns.apply::<ConfigMap>(json!({ "metadata": { "name": "site-files" }, "data": { "index.html": "<h1>operated</h1>\n" } }))
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
    ns.api::<VirtualServer>()
        .delete("secure", &Default::default())
        .await
        .unwrap();

    let spec = json!({
        "hosts": ["site.example"],
        "content": { "configMap": "site-files" },
        "replicas": 2,
        "resources": { "requests": { "cpu": "20m", "memory": "16Mi" } },
        "rules": [{ "name": "old", "match": { "prefix": "/old/" }, "action": { "redirect": { "to": "/", "status": 301 } } }]
    });
    ns.apply::<VirtualServer>(json!({ "metadata": { "name": "site" }, "spec": spec.clone() }))
        .await;
    let vs = wait_condition(&ns, "site", "Ready", "True").await;
    assert_eq!(condition(&vs, "Accepted").unwrap().0, "True");
    assert_eq!(condition(&vs, "ResolvedRefs").unwrap().0, "True");
    let status = vs.status.clone().unwrap();
    assert_eq!(status.ready_replicas, Some(2));
    let hash = status.config_hash.clone().unwrap();
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
    // A restarted operator reconciles everything again, and writes nothing either.
    let before = resource_versions(&ns).await;
    operator.abort();
    let reconciles_before = reconciliations(&ctx);
    operator = tokio::spawn(controller::run(ctx.clone()));
    wait_for(
        "the restarted operator to reconcile",
        Duration::from_secs(30),
        || {
            let n = reconciliations(&ctx);
            async move { (n > reconciles_before).then_some(()) }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        resource_versions(&ns).await,
        before,
        "a restarted operator wrote to settled objects"
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

    // A pod-template change (resources) under load: pods roll one by one, and no request
    // through the Service fails.
    let load = Load::start(&format!("{url}/"), Duration::from_secs(40), 8);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut bigger = spec.clone();
    bigger["resources"] = json!({ "requests": { "cpu": "30m", "memory": "16Mi" } });
    ns.apply::<VirtualServer>(json!({ "metadata": { "name": "site" }, "spec": bigger }))
        .await;
    // The operator applies the new template first (a moment after the edit), then it rolls.
    wait_condition(&ns, "site", "Accepted", "True").await;
    let d = ns.wait_rollout("site", Duration::from_secs(120)).await;
    let cpu = &d.spec.unwrap().template.spec.unwrap().containers[0];
    assert_eq!(
        cpu.resources.as_ref().unwrap().requests.as_ref().unwrap()["cpu"].0,
        "30m"
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

    // Deleting the VirtualServer garbage-collects every child.
    ns.api::<VirtualServer>()
        .delete("site", &Default::default())
        .await
        .unwrap();
    let (deployments, configs, services) = (
        ns.api::<Deployment>(),
        ns.api::<ConfigMap>(),
        ns.api::<Service>(),
    );
    wait_for(
        "the children to be garbage-collected",
        Duration::from_secs(90),
        || {
            let (d, c, s) = (deployments.clone(), configs.clone(), services.clone());
            async move {
                let gone = d.get_opt("site").await.ok()?.is_none()
                    && c.get_opt("site-config").await.ok()?.is_none()
                    && s.get_opt("site").await.ok()?.is_none();
                gone.then_some(())
            }
        },
    )
    .await;

    operator.abort();
}

fn reconciliations(ctx: &Context) -> f64 {
    let text = ctx.metrics.encode();
    let line = text
        .lines()
        .find(|l| l.starts_with("skiff_operator_reconciliations_total"))
        .unwrap();
    line.rsplit(' ').next().unwrap().parse().unwrap()
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
