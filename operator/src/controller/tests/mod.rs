//! reconcile against a mocked apiserver (tower-test): each scenario answers the exact
//! requests one reconcile should make, in order, and fails on any other, so that what is
//! applied, with which field manager, and what is (not) written into the status are pinned.

use super::*;
use crate::children::NetworkPolicyConfig;
use crate::crd::{Condition, ConditionType, Reason, VirtualServerStatus};
use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{json, Value};
use std::collections::BTreeMap;

mod applying;
mod certificates;
mod conditions;
mod mock_api;
mod reconcile;
mod tls;

use mock_api::ApiServer;

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;
type Responder = tower_test::mock::SendResponse<Response<Body>>;

/// The NetworkPolicy settings the chart passes by default.
fn network_policy() -> NetworkPolicyConfig {
    NetworkPolicyConfig {
        operator_namespace: "skiff".into(),
        operator_labels: BTreeMap::from([(
            "app.kubernetes.io/name".into(),
            "skiff-operator".into(),
        )]),
        ..Default::default()
    }
}

/// A context whose client talks to the returned mock apiserver.
fn context(network_policy: Option<NetworkPolicyConfig>) -> (Arc<Context>, ApiServer) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    let api = ApiServer {
        handle,
        network_policy: network_policy.is_some(),
    };
    let ctx = Context {
        recorder: Recorder::new(client.clone(), reporter()),
        client,
        metrics: Arc::new(Metrics::new()),
        default_image: "registry.test/skiff:1".into(),
        network_policy,
        service_monitor_labels: Default::default(),
        peers: Default::default(),
    };
    (Arc::new(ctx), api)
}

fn virtual_server(spec: Value, status: Option<&VirtualServerStatus>) -> Arc<VirtualServer> {
    let mut vs: VirtualServer = serde_json::from_value(json!({
        "apiVersion": "skiff.dev/v1alpha1", "kind": "VirtualServer",
        "metadata": { "name": "shop", "namespace": "web", "uid": "vs-uid", "generation": 3 },
        "spec": spec,
    }))
    .unwrap();
    vs.status = status.cloned();
    Arc::new(vs)
}

fn valid_spec() -> Value {
    json!({ "hosts": ["shop.example"], "content": { "configMap": "site" } })
}

/// Runs reconcile while `scenario` answers the apiserver's side. A request beyond the
/// scenario fails the test (and the reconcile, which gets no answer to it).
async fn run<S, F, T>(vs: Arc<VirtualServer>, scenario: S) -> (Result<Action>, T)
where
    S: FnOnce(ApiServer) -> F,
    F: std::future::Future<Output = (ApiServer, T)> + Send + 'static,
    T: Send + 'static,
{
    run_with(Some(network_policy()), vs, scenario).await
}

/// [`run`] with the controller's cache of VirtualServers holding `peers` (and `vs`).
async fn run_among<S, F, T>(
    peers: &[Arc<VirtualServer>],
    vs: Arc<VirtualServer>,
    scenario: S,
) -> (Result<Action>, T)
where
    S: FnOnce(ApiServer) -> F,
    F: std::future::Future<Output = (ApiServer, T)> + Send + 'static,
    T: Send + 'static,
{
    let mut writer = kube::runtime::reflector::store::Writer::<VirtualServer>::default();
    writer.apply_watcher_event(&watcher::Event::Init);
    for v in peers.iter().chain([&vs]) {
        writer.apply_watcher_event(&watcher::Event::InitApply(v.as_ref().clone()));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    let store = writer.as_reader();
    run_in(Some(network_policy()), Some(store), vs, scenario).await
}

/// [`run`] with the operator's NetworkPolicy settings (`None`: off).
async fn run_with<S, F, T>(
    network_policy: Option<NetworkPolicyConfig>,
    vs: Arc<VirtualServer>,
    scenario: S,
) -> (Result<Action>, T)
where
    S: FnOnce(ApiServer) -> F,
    F: std::future::Future<Output = (ApiServer, T)> + Send + 'static,
    T: Send + 'static,
{
    run_in(network_policy, None, vs, scenario).await
}

async fn run_in<S, F, T>(
    network_policy: Option<NetworkPolicyConfig>,
    peers: Option<Store<VirtualServer>>,
    vs: Arc<VirtualServer>,
    scenario: S,
) -> (Result<Action>, T)
where
    S: FnOnce(ApiServer) -> F,
    F: std::future::Future<Output = (ApiServer, T)> + Send + 'static,
    T: Send + 'static,
{
    let (ctx, api) = context(network_policy);
    if let Some(peers) = peers {
        assert!(
            ctx.peers.set(peers).is_ok(),
            "a new context's cache is unset"
        );
    }
    let scenario = scenario(api);
    let apiserver = tokio::spawn(async move {
        let (mut api, out) = scenario.await;
        // Every client clone goes with the context when reconcile returns; until then,
        // nothing more may be asked.
        if let Some((request, _)) = api.handle.next_request().await {
            panic!(
                "unexpected request after the scenario: {} {}",
                request.method(),
                request.uri()
            );
        }
        out
    });
    let result = tokio::time::timeout(Duration::from_secs(5), reconcile(vs, ctx))
        .await
        .expect("reconcile finished");
    let out = tokio::time::timeout(Duration::from_secs(5), apiserver)
        .await
        .expect("the scenario finished")
        .expect("the scenario's assertions held");
    (result, out)
}

fn condition(status: &VirtualServerStatus, type_: ConditionType) -> &Condition {
    status
        .conditions
        .iter()
        .find(|c| c.is(type_))
        .unwrap_or_else(|| panic!("no {type_} condition in {status:?}"))
}

fn observed<'a>(
    rendered: &'a render::Rendered,
    deployment: &'a Deployment,
    service: &'a Service,
    certificate: Option<status::Outcome>,
) -> status::Observed<'a> {
    status::Observed {
        rendered,
        missing_refs: None,
        monitored: status::Outcome::yes(Reason::ServiceMonitorCreated, ""),
        certificate,
        missing_secrets: vec![],
        served_certificates: vec![],
        deployment,
        service,
        pools: &[],
        live: crate::live_config::verdict("h", &[]),
        selector: String::new(),
    }
}
