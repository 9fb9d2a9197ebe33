//! The Helm chart on the real cluster: `helm install` gives a running operator (the
//! skiff-operator image, in-cluster config, RBAC from the chart; two replicas, one elected
//! leader on a Lease) that reconciles the
//! chart's example VirtualServer into a site answering through its Service; uninstalling
//! keeps the CRD (crds.keep), so no VirtualServer is ever deleted by accident. With
//! `operator.watchNamespaces`, the operator works on Roles in those namespaces only.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, PostParams};
use kube::Api;
use skiff_e2e::{leader_metrics, metric, wait_condition, wait_for, wait_http, Cluster, Release};
use skiff_operator::crd::VirtualServer;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_runs_the_operator_and_the_example_site() {
    let Some(cluster) = skiff_e2e::cluster().await else {
        return;
    };
    let ns = cluster.namespace("chart").await;
    let release = Release::install(
        &cluster,
        &ns,
        &["example.enabled=true", "operator.replicas=2"],
    )
    .await;
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());

    // The operator reconciles the example into a ready site.
    let vs = wait_condition(&ns, "skiff-example", "Ready", "True").await;
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
    assert!(
        pods.items
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(holder.as_str())),
        "the Lease holder {holder} is not an operator pod"
    );
    let metrics = leader_metrics(&ns).await;
    let count = metric(&metrics, "skiff_operator_reconciliations_total").unwrap();
    assert!(count >= 1.0, "{metrics}");
    let ready = metrics
        .lines()
        .find(|l| {
            l.starts_with("skiff_operator_virtualservers{condition=\"Ready\",status=\"True\"}")
        })
        .unwrap_or_else(|| panic!("no VirtualServers-by-condition gauge:\n{metrics}"));
    assert!(
        ready.rsplit(' ').next().unwrap().parse::<f64>().unwrap() >= 1.0,
        "{ready}"
    );

    // Failover: the leader, told to stop, hands the Lease back, so another operator pod
    // leads at once rather than after the 15 s lease duration. That is the standby, or
    // the pod the ReplicaSet starts in the deleted one's place, whichever asks first.
    let stopped = std::time::Instant::now();
    ns.api::<Pod>()
        .delete(&holder, &Default::default())
        .await
        .unwrap();
    let leases = ns.api::<Lease>();
    let new_holder = wait_for(
        "another operator pod to take the Lease",
        Duration::from_secs(30),
        || {
            let (leases, old) = (leases.clone(), holder.clone());
            async move {
                let lease = leases.get("skiff-operator").await.ok()?;
                let now = lease.spec?.holder_identity?;
                (!now.is_empty() && now != old).then_some(now)
            }
        },
    )
    .await;
    assert!(
        new_holder.starts_with("skiff-"),
        "the Lease went to {new_holder}"
    );
    let took = stopped.elapsed();
    eprintln!("leader failover took {took:?}");
    assert!(
        took < Duration::from_secs(10),
        "the next leader waited out the lease ({took:?}): the old one did not release it"
    );

    release.uninstall();
    assert!(
        crds.get_opt("virtualservers.skiff.dev")
            .await
            .unwrap()
            .is_some(),
        "crds.keep leaves the CRD in place on uninstall"
    );
}

/// Whether the operator's ServiceAccount (in `ns`) may do `verb` on `group`'s `resource`
/// in `namespace`, as the API server's own authorizer answers.
async fn operator_may(
    cluster: &Cluster,
    ns: &str,
    (verb, group, resource): (&str, &str, &str),
    namespace: &str,
) -> bool {
    let review: SubjectAccessReview = serde_json::from_value(serde_json::json!({
        "spec": {
            "user": format!("system:serviceaccount:{ns}:skiff"),
            "groups": [
                "system:serviceaccounts",
                format!("system:serviceaccounts:{ns}"),
                "system:authenticated",
            ],
            "resourceAttributes": {
                "verb": verb, "group": group, "resource": resource, "namespace": namespace,
            },
        }
    }))
    .unwrap();
    let answer = Api::<SubjectAccessReview>::all(cluster.client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    answer.status.is_some_and(|s| s.allowed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_confined_to_its_namespaces_leaves_the_others_alone() {
    let Some(cluster) = skiff_e2e::cluster().await else {
        return;
    };
    let ns = cluster.namespace("scoped").await;
    let other = cluster.namespace("unwatched").await;
    let watch = format!("operator.watchNamespaces={{{}}}", ns.name);
    let release = Release::install(&cluster, &ns, &["example.enabled=true", &watch]).await;

    // The chart's Role is all the operator needs where it works: the example gets ready.
    wait_condition(&ns, "skiff-example", "Ready", "True").await;
    // A VirtualServer in a namespace it does not watch gets nothing: no status, no edge.
    let site = serde_json::json!({
        "apiVersion": "skiff.dev/v1alpha1", "kind": "VirtualServer",
        "metadata": { "name": "elsewhere" },
        "spec": { "hosts": ["elsewhere.example"], "content": { "configMap": "site" } },
    });
    other.apply::<VirtualServer>(site).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let untouched = other.api::<VirtualServer>().get("elsewhere").await.unwrap();
    assert!(untouched.status.is_none(), "{:?}", untouched.status);
    assert!(other
        .api::<Deployment>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());

    // And the API server would refuse it there anyway: Secrets and Deployments are its own
    // namespace's only; CRDs it may still read cluster-wide.
    for asked in [
        ("get", "", "secrets"),
        ("patch", "apps", "deployments"),
        ("list", "", "pods"),
    ] {
        assert!(
            operator_may(&cluster, &ns.name, asked, &ns.name).await,
            "{asked:?}"
        );
        assert!(
            !operator_may(&cluster, &ns.name, asked, &other.name).await,
            "{asked:?} in {}",
            other.name
        );
    }
    let crds = ("list", "apiextensions.k8s.io", "customresourcedefinitions");
    assert!(operator_may(&cluster, &ns.name, crds, "").await);
    release.uninstall();
}
