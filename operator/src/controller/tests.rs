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

struct ApiServer {
    handle: Handle,
    /// Whether the operator applies NetworkPolicies (or deletes them).
    network_policy: bool,
}

/// One request, its JSON body, and the way to answer it.
struct Call {
    method: Method,
    path: String,
    query: BTreeMap<String, String>,
    content_type: Option<String>,
    accept: String,
    body: Value,
    respond: Responder,
}

impl ApiServer {
    async fn next(&mut self) -> Call {
        let (request, respond) = self
            .handle
            .next_request()
            .await
            .expect("reconcile made the request");
        let (parts, body) = request.into_parts();
        let bytes = body.collect_bytes().await.unwrap();
        Call {
            method: parts.method,
            path: parts.uri.path().to_string(),
            query: query(parts.uri.query().unwrap_or_default()),
            content_type: parts
                .headers
                .get(http::header::CONTENT_TYPE)
                .map(|v| v.to_str().unwrap().to_string()),
            accept: parts
                .headers
                .get(http::header::ACCEPT)
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default(),
            body: if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes).unwrap()
            },
            respond,
        }
    }

    /// The next request, which must be `method path`.
    async fn expect(&mut self, method: Method, path: &str) -> Call {
        let call = self.next().await;
        assert_eq!(
            (&call.method, call.path.as_str()),
            (&method, path),
            "request out of order"
        );
        call
    }

    /// The next request, which must be a server-side apply of `path` by the operator's
    /// field manager; answered with the object as applied plus `extra` (status, defaults).
    async fn expect_apply(&mut self, path: &str, extra: Value) -> Value {
        let call = self.expect(Method::PATCH, path).await;
        assert_eq!(
            call.content_type.as_deref(),
            Some("application/apply-patch+yaml"),
            "{path} is server-side applied"
        );
        assert_eq!(
            call.query.get("fieldManager").map(String::as_str),
            Some(MANAGER)
        );
        assert_eq!(call.query.get("force").map(String::as_str), Some("true"));
        let applied = call.body.clone();
        let mut answer = applied.clone();
        merge(&mut answer, extra);
        call.ok(answer);
        applied
    }

    /// Answers the applies, reads and deletes of an accepted VirtualServer with no pools,
    /// no Prometheus Operator, and a rolled-out Deployment; the content ConfigMap exists
    /// when `content_exists`.
    async fn accepted_children(&mut self, content_exists: bool) -> BTreeMap<&'static str, Value> {
        let applied = self.children(content_exists).await;
        self.no_pods().await;
        applied
    }

    /// [`Self::accepted_children`] up to the certificates (which come next with `spec.tls`).
    async fn children(&mut self, content_exists: bool) -> BTreeMap<&'static str, Value> {
        self.content(content_exists).await;
        self.children_after_refs().await
    }

    /// The read of the content ConfigMap `site`, found or not.
    async fn content(&mut self, exists: bool) {
        let content = self
            .expect(Method::GET, "/api/v1/namespaces/web/configmaps/site")
            .await;
        if exists {
            content.ok(
                json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "site" } }),
            );
        } else {
            content.not_found();
        }
    }

    /// [`Self::children`] after the referenced objects were read.
    async fn children_after_refs(&mut self) -> BTreeMap<&'static str, Value> {
        let mut applied = BTreeMap::new();
        let configmap = self
            .expect_apply("/api/v1/namespaces/web/configmaps/shop-config", json!({}))
            .await;
        applied.insert("configmap", configmap);
        let policy = "/apis/networking.k8s.io/v1/namespaces/web/networkpolicies/shop";
        if self.network_policy {
            let policy = self.expect_apply(policy, json!({})).await;
            applied.insert("networkpolicy", policy);
        } else {
            // Turned off: one left from before would be deleted (if it is this
            // VirtualServer's); there is none.
            self.expect(Method::GET, policy).await.not_found();
        }
        let rolled_out = json!({
            "metadata": { "generation": 1 },
            "status": { "observedGeneration": 1, "replicas": 2, "readyReplicas": 2,
                        "updatedReplicas": 2, "availableReplicas": 2 }
        });
        let deployment = self
            .expect_apply("/apis/apps/v1/namespaces/web/deployments/shop", rolled_out)
            .await;
        applied.insert("deployment", deployment);
        let service = self
            .expect_apply(
                "/api/v1/namespaces/web/services/shop",
                json!({ "spec": { "clusterIP": "10.0.0.7" } }),
            )
            .await;
        applied.insert("service", service);
        // No autoscaling: an HPA left from an earlier spec would be deleted; there is none.
        self.expect(
            Method::GET,
            "/apis/autoscaling/v2/namespaces/web/horizontalpodautoscalers/shop",
        )
        .await
        .not_found();
        let pdb = self
            .expect_apply(
                "/apis/policy/v1/namespaces/web/poddisruptionbudgets/shop",
                json!({}),
            )
            .await;
        applied.insert("pdb", pdb);
        let pools = self
            .expect(Method::GET, "/apis/apps/v1/namespaces/web/deployments")
            .await;
        assert_eq!(
            pools.query["labelSelector"],
            "app.kubernetes.io/instance=shop,skiff.dev/pool"
        );
        pools.ok(json!({ "apiVersion": "apps/v1", "kind": "DeploymentList", "metadata": {}, "items": [] }));
        let metrics = self
            .expect_apply("/api/v1/namespaces/web/services/shop-metrics", json!({}))
            .await;
        applied.insert("metrics", metrics);
        self.expect(
            Method::GET,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/servicemonitors.monitoring.coreos.com",
        )
        .await
        .not_found();
        applied
    }

    /// The list of edge pods whose config is read back: none yet.
    async fn no_pods(&mut self) {
        let pods = self
            .expect(Method::GET, "/api/v1/namespaces/web/pods")
            .await;
        assert_eq!(
            pods.query["labelSelector"],
            "app.kubernetes.io/name=skiff,app.kubernetes.io/instance=shop"
        );
        pods.ok(json!({ "apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [] }));
    }

    /// The next request, which must apply the VirtualServer's status; returns the status.
    async fn expect_status(&mut self) -> VirtualServerStatus {
        let call = self
            .expect(
                Method::PATCH,
                "/apis/skiff.dev/v1alpha1/namespaces/web/virtualservers/shop/status",
            )
            .await;
        assert_eq!(
            call.content_type.as_deref(),
            Some("application/apply-patch+yaml")
        );
        assert_eq!(
            call.query.get("fieldManager").map(String::as_str),
            Some(MANAGER)
        );
        assert_eq!(call.body["apiVersion"], "skiff.dev/v1alpha1");
        assert_eq!(call.body["kind"], "VirtualServer");
        let status: VirtualServerStatus =
            serde_json::from_value(call.body["status"].clone()).unwrap();
        let answer = json!({
            "apiVersion": "skiff.dev/v1alpha1", "kind": "VirtualServer",
            "metadata": { "name": "shop", "namespace": "web" },
            "spec": valid_spec(), "status": call.body["status"],
        });
        call.ok(answer);
        status
    }

    /// The next request, which must publish an Event with `reason`; returns its note.
    async fn expect_event(&mut self, reason: EventReason) -> String {
        self.expect_event_of("Normal", reason).await
    }

    /// [`Self::expect_event`] of a Warning.
    async fn expect_warning(&mut self, reason: EventReason) -> String {
        self.expect_event_of("Warning", reason).await
    }

    async fn expect_event_of(&mut self, type_: &str, reason: EventReason) -> String {
        let call = self
            .expect(Method::POST, "/apis/events.k8s.io/v1/namespaces/web/events")
            .await;
        assert_eq!(call.body["type"], type_);
        assert_eq!(call.body["reason"], reason.as_str());
        assert_eq!(call.body["regarding"]["name"], "shop");
        let note = call.body["note"].as_str().unwrap_or_default().to_string();
        let body = call.body.clone();
        call.ok(body);
        note
    }
}

/// The TLS requests, in the order a reconcile makes them after the children.
impl ApiServer {
    /// Whether cert-manager's Certificate CRD exists.
    async fn certificate_crd(&mut self, installed: bool) {
        let call = self
            .expect(
                Method::GET,
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/certificates.cert-manager.io",
            )
            .await;
        if !installed {
            return call.not_found();
        }
        call.ok(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": { "name": "certificates.cert-manager.io" },
            "spec": { "group": "cert-manager.io", "scope": "Namespaced", "versions": [],
                      "names": { "kind": "Certificate", "plural": "certificates" } }
        }));
    }

    /// A read of a TLS Secret's metadata, never its data: the key pair does not pass through
    /// the operator. `version` is its resourceVersion, `None`: it does not exist.
    async fn secret_metadata(&mut self, name: &str, version: Option<&str>) {
        self.secret_metadata_issued(name, version, None).await
    }

    /// [`Self::secret_metadata`] of a Secret cert-manager wrote for Certificate `issued_for`.
    async fn secret_metadata_issued(
        &mut self,
        name: &str,
        version: Option<&str>,
        issued_for: Option<&str>,
    ) {
        let call = self
            .expect(
                Method::GET,
                &format!("/api/v1/namespaces/web/secrets/{name}"),
            )
            .await;
        assert!(
            call.accept.contains("as=PartialObjectMetadata"),
            "metadata only: {}",
            call.accept
        );
        match version {
            None => call.not_found(),
            Some(v) => {
                let annotations = match issued_for {
                    Some(c) => json!({ "cert-manager.io/certificate-name": c }),
                    None => json!({}),
                };
                call.ok(json!({
                    "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                    "metadata": { "name": name, "namespace": "web", "resourceVersion": v,
                                  "annotations": annotations }
                }))
            }
        }
    }

    /// A Certificate left without an owner by `--cascade=orphan`, with the operator's labels
    /// for VirtualServer `instance`.
    async fn certificate_metadata_orphaned(&mut self, name: &str, instance: &str) {
        self.expect(
            Method::GET,
            &format!("/apis/cert-manager.io/v1/namespaces/web/certificates/{name}"),
        )
        .await
        .ok(json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": { "name": name, "namespace": "web",
                          "labels": { "app.kubernetes.io/instance": instance,
                                      "app.kubernetes.io/managed-by": "skiff-operator" } }
        }));
    }

    /// A read of Certificate `name`'s metadata before it is applied: `owner` is its
    /// controlling VirtualServer's name and uid, `None`: it does not exist.
    async fn certificate_metadata(&mut self, name: &str, owner: Option<(&str, &str)>) {
        let call = self
            .expect(
                Method::GET,
                &format!("/apis/cert-manager.io/v1/namespaces/web/certificates/{name}"),
            )
            .await;
        match owner {
            None => call.not_found(),
            Some((owner, uid)) => call.ok(json!({
                "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                "metadata": { "name": name, "namespace": "web",
                              "ownerReferences": [{ "apiVersion": "skiff.dev/v1alpha1",
                                  "kind": "VirtualServer", "name": owner, "uid": uid,
                                  "controller": true }] }
            })),
        }
    }

    /// The ClusterIssuer `le` with these ACME solvers.
    async fn cluster_issuer(&mut self, solvers: Value) {
        self.expect(Method::GET, "/apis/cert-manager.io/v1/clusterissuers/le")
            .await
            .ok(json!({
                "apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
                "metadata": { "name": "le" },
                "spec": { "acme": {
                    "server": "https://acme-v02.api.letsencrypt.org/directory",
                    "privateKeySecretRef": { "name": "le-account" },
                    "solvers": solvers
                } }
            }));
    }

    /// The Certificates labelled as this VirtualServer's: `(name, owner uid)`.
    async fn certificate_list(&mut self, items: &[(&str, &str)]) {
        let call = self
            .expect(
                Method::GET,
                "/apis/cert-manager.io/v1/namespaces/web/certificates",
            )
            .await;
        assert_eq!(
            call.query["labelSelector"],
            "app.kubernetes.io/instance=shop"
        );
        let items: Vec<Value> = items
            .iter()
            .map(|(name, uid)| {
                json!({ "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                        "metadata": { "name": name, "namespace": "web",
                                      "ownerReferences": [{ "apiVersion": "skiff.dev/v1alpha1",
                                          "kind": "VirtualServer", "name": "shop", "uid": uid,
                                          "controller": true }] } })
            })
            .collect();
        call.ok(
            json!({ "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                        "metadata": {}, "items": items }),
        );
    }

    /// The deletion of Certificate `name`.
    async fn certificate_deleted(&mut self, name: &str) {
        self.expect(
            Method::DELETE,
            &format!("/apis/cert-manager.io/v1/namespaces/web/certificates/{name}"),
        )
        .await
        .ok(json!({ "apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success", "code": 200 }));
    }
}

impl Call {
    fn ok(self, body: Value) {
        self.answer(StatusCode::OK, body);
    }

    fn not_found(self) {
        let status = json!({
            "apiVersion": "v1", "kind": "Status", "status": "Failure",
            "message": "not found", "reason": "NotFound", "code": 404,
        });
        self.answer(StatusCode::NOT_FOUND, status);
    }

    fn forbidden(self) {
        let status = json!({
            "apiVersion": "v1", "kind": "Status", "status": "Failure",
            "message": "forbidden", "reason": "Forbidden", "code": 403,
        });
        self.answer(StatusCode::FORBIDDEN, status);
    }

    fn answer(self, code: StatusCode, body: Value) {
        let response = Response::builder()
            .status(code)
            .body(Body::from(serde_json::to_vec(&body).unwrap()))
            .unwrap();
        self.respond.send_response(response);
    }
}

/// Deep-merges `extra` into `base` (objects merge, everything else replaces).
fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, e) => *b = e,
    }
}

/// `&a=1&b=x%2Cy` as a map, percent-decoded.
fn query(text: &str) -> BTreeMap<String, String> {
    let decode = |s: &str| {
        let bytes = s.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' && i + 2 < bytes.len() {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            } else {
                out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
                i += 1;
            }
        }
        String::from_utf8(out).unwrap()
    };
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn condition(status: &VirtualServerStatus, type_: ConditionType) -> &Condition {
    status
        .conditions
        .iter()
        .find(|c| c.is(type_))
        .unwrap_or_else(|| panic!("no {type_} condition in {status:?}"))
}

#[tokio::test]
async fn a_valid_virtual_server_gets_its_children_applied_and_is_accepted_and_ready() {
    let vs = virtual_server(valid_spec(), None);
    let expected_hash = render::server_config(&{
        let mut v = (*vs).clone();
        v.spec.image = Some("registry.test/skiff:1".into());
        v
    })
    .unwrap()
    .hash;
    let (result, (applied, status, note)) = run(vs, |mut api| async move {
        let applied = api.accepted_children(true).await;
        let status = api.expect_status().await;
        let note = api.expect_event(EventReason::Created).await;
        (api, (applied, status, note))
    })
    .await;
    assert_eq!(
        result.unwrap(),
        Action::requeue(Duration::from_secs(300)),
        "settled, no pods to wait for: the long interval"
    );

    // The children: owned by the VirtualServer, labelled for the controller's watches.
    for (what, object) in &applied {
        assert_eq!(object["metadata"]["namespace"], "web", "{what}");
        assert_eq!(
            object["metadata"]["ownerReferences"][0]["uid"], "vs-uid",
            "{what}"
        );
        assert_eq!(
            object["metadata"]["ownerReferences"][0]["controller"], true,
            "{what}"
        );
        assert_eq!(
            object["metadata"]["labels"]["app.kubernetes.io/managed-by"], "skiff-operator",
            "{what}"
        );
    }
    let config = applied["configmap"]["data"]["skiff.yaml"].as_str().unwrap();
    assert_eq!(skiff_config::config_hash(config), expected_hash);
    let deployment = &applied["deployment"];
    assert_eq!(deployment["apiVersion"], "apps/v1");
    assert_eq!(deployment["kind"], "Deployment");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"], "registry.test/skiff:1",
        "the operator's default image"
    );
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        applied["service"]["spec"]["selector"]["app.kubernetes.io/instance"],
        "shop"
    );
    assert_eq!(applied["pdb"]["spec"]["maxUnavailable"], 1);
    assert_eq!(applied["metrics"]["spec"]["clusterIP"], "None");
    let policy = &applied["networkpolicy"];
    assert_eq!(policy["apiVersion"], "networking.k8s.io/v1");
    assert_eq!(policy["kind"], "NetworkPolicy");
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/instance"],
        "shop"
    );

    // The status.
    assert_eq!(status.observed_generation, Some(3));
    let accepted = condition(&status, ConditionType::Accepted);
    assert_eq!(
        (accepted.status.as_str(), accepted.reason.as_str()),
        ("True", "Valid")
    );
    let ready = condition(&status, ConditionType::Ready);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "Available")
    );
    assert_eq!(ready.message, "2/2 edge pods ready");
    assert_eq!(ready.observed_generation, Some(3));
    let refs = condition(&status, ConditionType::ResolvedRefs);
    assert_eq!(
        (refs.status.as_str(), refs.reason.as_str()),
        ("True", "Resolved")
    );
    let monitored = condition(&status, ConditionType::Monitored);
    assert_eq!(
        (monitored.status.as_str(), monitored.reason.as_str()),
        ("False", "PrometheusOperatorNotInstalled")
    );
    let live = condition(&status, ConditionType::ConfigLive);
    assert_eq!(
        (live.status.as_str(), live.reason.as_str()),
        ("False", "NoPodsServing")
    );
    assert!(
        !status
            .conditions
            .iter()
            .any(|c| c.is(ConditionType::CertificateReady)),
        "no tls, no certificate condition"
    );
    let types: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(
        types,
        [
            "Accepted",
            "ConfigLive",
            "Monitored",
            "Ready",
            "ResolvedRefs"
        ],
        "sorted by type"
    );
    assert_eq!(status.config_hash.as_deref(), Some(expected_hash.as_str()));
    assert_eq!(status.address.as_deref(), Some("10.0.0.7"));
    assert_eq!(status.replicas, Some(2));
    assert_eq!(status.ready_replicas, Some(2));
    assert_eq!(
        status.selector.as_deref(),
        Some("app.kubernetes.io/name=skiff,app.kubernetes.io/instance=shop")
    );
    assert_eq!(note, "edge Deployment, Service and config created");
}

#[tokio::test]
async fn an_unchanged_status_is_not_written_again() {
    // The first reconcile's status, as the apiserver stored it...
    let (_, status) = run(virtual_server(valid_spec(), None), |mut api| async move {
        api.accepted_children(true).await;
        let status = api.expect_status().await;
        api.expect_event(EventReason::Created).await;
        (api, status)
    })
    .await;
    // ...makes the next reconcile re-apply the children (a no-op for the apiserver) and
    // neither write the status nor publish an Event.
    let vs = virtual_server(valid_spec(), Some(&status));
    let (result, ()) = run(vs, |mut api| async move {
        api.accepted_children(true).await;
        (api, ())
    })
    .await;
    assert_eq!(result.unwrap(), Action::requeue(Duration::from_secs(300)));
}

#[tokio::test]
async fn a_missing_content_config_map_is_reported_and_the_children_are_still_applied() {
    let vs = virtual_server(valid_spec(), None);
    let (result, status) = run(vs, |mut api| async move {
        api.accepted_children(false).await;
        let status = api.expect_status().await;
        api.expect_event(EventReason::Created).await;
        (api, status)
    })
    .await;
    assert!(result.is_ok());
    let refs = condition(&status, ConditionType::ResolvedRefs);
    assert_eq!(
        (
            refs.status.as_str(),
            refs.reason.as_str(),
            refs.message.as_str()
        ),
        ("False", "RefNotFound", "not found: ConfigMap site")
    );
    let accepted = condition(&status, ConditionType::Accepted);
    assert_eq!(
        accepted.status, "True",
        "a missing reference is not an invalid config"
    );
}

/// The htpasswd Secret's volume is optional, so the kubelet says nothing when its
/// `htpasswd` key is missing (an ingress-nginx Secret keeps it under `auth`): the status
/// does.
#[tokio::test]
async fn an_auth_secret_without_an_htpasswd_key_is_a_missing_reference() {
    let spec = json!({
        "hosts": ["shop.example"], "content": { "configMap": "site" },
        "rules": [{ "match": { "prefix": "/admin/" }, "action": { "static": {} },
                    "basicAuth": { "realm": "Admin", "secretName": "admins" } }]
    });
    let (result, status) = run(virtual_server(spec, None), |mut api| async move {
        api.content(true).await;
        api.expect(Method::GET, "/api/v1/namespaces/web/secrets/admins")
            .await
            .ok(
                json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "admins" },
                        "data": { "auth": "YWxpY2U6eAo=" } }),
            );
        api.children_after_refs().await;
        api.no_pods().await;
        let status = api.expect_status().await;
        api.expect_event(EventReason::Created).await;
        (api, status)
    })
    .await;
    assert!(result.is_ok());
    let refs = condition(&status, ConditionType::ResolvedRefs);
    assert_eq!(
        (refs.status.as_str(), refs.message.as_str()),
        ("False", "not found: key htpasswd in Secret admins")
    );
}

#[tokio::test]
async fn an_invalid_config_is_refused_with_the_validators_message_and_nothing_is_applied() {
    let spec = json!({
        "hosts": ["shop.example"], "content": { "configMap": "site" },
        "rules": [{ "name": "api", "match": { "prefix": "/api/" }, "action": { "proxy": { "pool": "missing" } } }]
    });
    let vs = virtual_server(spec.clone(), None);
    // Only the status and an Event: a child applied would be a request out of order.
    let (result, (status, note)) = run(vs, |mut api| async move {
        let status = api.expect_status().await;
        let note = api.expect_warning(EventReason::Rejected).await;
        (api, (status, note))
    })
    .await;
    assert_eq!(result.unwrap(), Action::requeue(Duration::from_secs(300)));
    let message = "rule api: pool \"missing\" is not among spec.pools";
    let accepted = condition(&status, ConditionType::Accepted);
    assert_eq!(
        (
            accepted.status.as_str(),
            accepted.reason.as_str(),
            accepted.message.as_str()
        ),
        ("False", "InvalidConfig", message)
    );
    let ready = condition(&status, ConditionType::Ready);
    assert_eq!(
        (
            ready.status.as_str(),
            ready.reason.as_str(),
            ready.message.as_str()
        ),
        (
            "False",
            "InvalidConfig",
            "the previous config keeps serving"
        )
    );
    assert_eq!(status.observed_generation, Some(3));
    assert_eq!(status.config_hash, None, "no config was delivered");
    assert_eq!(note, message);

    // Reconciled again while still invalid: nothing at all is written.
    let vs = virtual_server(spec, Some(&status));
    let (result, ()) = run(vs, |api| async move { (api, ()) }).await;
    assert_eq!(result.unwrap(), Action::requeue(Duration::from_secs(300)));
}

/// `shop` and `shop-metrics`: the metrics Service of one is the edge Service of the other.
fn shop_and_shop_metrics(shop_first: bool) -> (Arc<VirtualServer>, Arc<VirtualServer>) {
    let at = |first: bool| {
        if first {
            "2026-01-01T00:00:00Z"
        } else {
            "2026-02-01T00:00:00Z"
        }
    };
    let mut peer: VirtualServer = (*virtual_server(valid_spec(), None)).clone();
    peer.metadata.name = Some("shop-metrics".into());
    peer.metadata.uid = Some("peer-uid".into());
    peer.metadata.creation_timestamp =
        Some(serde_json::from_value(json!(at(!shop_first))).unwrap());
    let mut shop: VirtualServer = (*virtual_server(valid_spec(), None)).clone();
    shop.metadata.creation_timestamp = Some(serde_json::from_value(json!(at(shop_first))).unwrap());
    (Arc::new(shop), Arc::new(peer))
}

impl ApiServer {
    /// A read of Service `name`'s metadata: `controller` is its controller's uid.
    async fn service_metadata(&mut self, name: &str, controller: Option<&str>) {
        let call = self
            .expect(
                Method::GET,
                &format!("/api/v1/namespaces/web/services/{name}"),
            )
            .await;
        match controller {
            None => call.not_found(),
            Some(uid) => call.ok(json!({
                "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                "metadata": { "name": name, "namespace": "web",
                              "ownerReferences": [{ "apiVersion": "skiff.dev/v1alpha1",
                                  "kind": "VirtualServer", "name": "x", "uid": uid,
                                  "controller": true }] }
            })),
        }
    }
}

/// A name another VirtualServer keeps is refused before anything is applied, with which
/// name and whose, and looked at again soon: when neither holds the live object, the older
/// keeps it; when the newer holds it (it ran first, and the older was edited to want it),
/// the newer keeps it. One that holds the name itself goes on.
#[tokio::test]
async fn a_name_another_virtual_server_keeps_is_refused_and_nothing_is_applied() {
    for (shop_first, holder, why) in [
        (false, None, "which is older"),
        (true, Some("peer-uid"), "which holds it"),
    ] {
        let (shop, peer) = shop_and_shop_metrics(shop_first);
        let (result, (status, note)) = run_among(&[peer], shop, |mut api| async move {
            api.service_metadata("shop-metrics", holder).await;
            let status = api.expect_status().await;
            let note = api.expect_warning(EventReason::Rejected).await;
            (api, (status, note))
        })
        .await;
        assert_eq!(result.unwrap(), Action::requeue(Duration::from_secs(30)));
        let accepted = condition(&status, ConditionType::Accepted);
        assert_eq!(
            (accepted.status.as_str(), accepted.reason.as_str()),
            ("False", "NameConflict")
        );
        let expected = format!(
            r#"Service "shop-metrics" (the metrics Service here) is also the edge of VirtualServer "shop-metrics", {why}; nothing is applied until one of them is renamed"#
        );
        assert_eq!(accepted.message, expected);
        assert_eq!(note, accepted.message);
        let ready = condition(&status, ConditionType::Ready);
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "NameConflict")
        );
    }

    // The newer holding its own name goes on, older peer or not.
    let (shop, peer) = shop_and_shop_metrics(false);
    let (result, ()) = run_among(&[peer], shop, |mut api| async move {
        api.service_metadata("shop-metrics", Some("vs-uid")).await;
        api.accepted_children(true).await;
        api.expect_status().await;
        api.expect_event(EventReason::Created).await;
        (api, ())
    })
    .await;
    assert!(result.is_ok());
}

#[tokio::test]
async fn without_network_policies_a_left_over_one_is_deleted() {
    let vs = virtual_server(valid_spec(), None);
    let (result, applied) = run_with(None, vs, |mut api| async move {
        let applied = api.accepted_children(true).await;
        api.expect_status().await;
        api.expect_event(EventReason::Created).await;
        (api, applied)
    })
    .await;
    assert!(result.is_ok());
    assert!(!applied.contains_key("networkpolicy"));
}

#[tokio::test]
async fn a_rule_shadowing_a_protected_one_is_a_status_warning_and_a_warning_event() {
    let spec = json!({
        "hosts": ["shop.example"], "content": { "configMap": "site" },
        "rules": [
            { "name": "assets", "match": { "extensions": ["css"] }, "action": { "static": {} } },
            { "name": "internal", "match": { "prefix": "/internal/" }, "action": { "static": {} },
              "access": { "allow": ["10.0.0.0/8"] } }
        ]
    });
    let warning = "spec.rules[1]: rule \"assets\" (index 0) matches /internal/x.css before rule \
                   \"internal\" (index 1), which requires an address allow list; move \
                   \"internal\" above \"assets\" or give \"assets\" the same modifiers";
    let vs = virtual_server(spec.clone(), None);
    let (result, (status, note)) = run(vs, |mut api| async move {
        api.accepted_children(true).await;
        let status = api.expect_status().await;
        api.expect_event(EventReason::Created).await;
        let note = api.expect_warning(EventReason::RulesShadowed).await;
        (api, (status, note))
    })
    .await;
    assert!(result.is_ok());
    assert_eq!(status.warnings, [warning]);
    assert_eq!(note, warning);
    let accepted = condition(&status, ConditionType::Accepted);
    assert_eq!(
        (accepted.status.as_str(), accepted.message.as_str()),
        (
            "True",
            "the generated config passed validation, with a warning in status.warnings"
        ),
        "a warning does not refuse the spec"
    );

    // The same warnings again: no status write, no second Event.
    let vs = virtual_server(spec, Some(&status));
    let (result, ()) = run(vs, |mut api| async move {
        api.accepted_children(true).await;
        (api, ())
    })
    .await;
    assert!(result.is_ok());
}

fn dns01() -> Value {
    json!([{ "dns01": { "cloudflare": { "apiTokenSecretRef": { "name": "cf", "key": "token" } } } }])
}

fn http01() -> Value {
    json!([{ "http01": { "ingress": { "ingressClassName": "nginx" } } }])
}

fn tls_spec(tls: Value) -> Value {
    json!({ "hosts": ["shop.example"], "content": { "configMap": "site" }, "tls": tls })
}

#[tokio::test]
async fn an_issued_certificate_is_served_over_https_and_one_no_longer_asked_for_is_removed() {
    let spec = tls_spec(json!({
        "issuerRef": { "name": "le", "kind": "ClusterIssuer" }, "redirect": true
    }));
    let vs = virtual_server(spec, None);
    let (result, (applied, certificate, status)) = run(vs, |mut api| async move {
        let applied = api.children(true).await;
        api.certificate_crd(true).await;
        api.secret_metadata_issued("shop-tls", Some("7"), Some("shop"))
            .await;
        api.cluster_issuer(dns01()).await;
        api.certificate_metadata("shop", Some(("shop", "vs-uid")))
            .await;
        let ready = json!({ "status": { "conditions": [{
            "type": "Ready", "status": "True", "reason": "Ready",
            "message": "Certificate is up to date and has not expired"
        }] } });
        let certificate = api
            .expect_apply(
                "/apis/cert-manager.io/v1/namespaces/web/certificates/shop",
                ready,
            )
            .await;
        // One left from an entry since removed, and one that is not this VirtualServer's.
        api.certificate_list(&[
            ("shop", "vs-uid"),
            ("old-tls", "vs-uid"),
            ("theirs", "other"),
        ])
        .await;
        api.certificate_deleted("old-tls").await;
        api.no_pods().await;
        let status = api.expect_status().await;
        api.expect_event(EventReason::Created).await;
        (api, (applied, certificate, status))
    })
    .await;
    assert_eq!(result.unwrap(), Action::requeue(Duration::from_secs(300)));

    assert_eq!(certificate["kind"], "Certificate");
    assert_eq!(certificate["spec"]["secretName"], "shop-tls");
    assert_eq!(certificate["spec"]["dnsNames"], json!(["shop.example"]));
    assert_eq!(certificate["spec"]["issuerRef"]["kind"], "ClusterIssuer");
    assert_eq!(
        certificate["metadata"]["ownerReferences"][0]["uid"],
        "vs-uid"
    );

    let yaml = applied["configmap"]["data"]["skiff.yaml"].as_str().unwrap();
    let config = skiff_config::parse_yaml(yaml).unwrap();
    let listener = config.tls.unwrap();
    assert_eq!(
        (listener.listen.as_str(), listener.public_port),
        ("0.0.0.0:8443", Some(443))
    );
    let shop = &config.virtual_servers[0];
    assert_eq!(
        shop.tls.as_ref().unwrap().cert,
        "/etc/skiff/tls/shop-tls/tls.crt"
    );
    assert!(shop.https_redirect);
    let pod = &applied["deployment"]["spec"]["template"]["spec"];
    assert!(pod["volumes"].as_array().unwrap().contains(
        &json!({ "name": "tls-0", "secret": { "secretName": "shop-tls", "defaultMode": 0o440,
                  "items": [{ "key": "tls.crt", "path": "tls.crt" }, { "key": "tls.key", "path": "tls.key" }] } })
    ));
    assert_eq!(
        applied["service"]["spec"]["ports"][1],
        json!({ "name": "https", "port": 443, "targetPort": "https", "protocol": "TCP" })
    );
    assert_eq!(
        applied["networkpolicy"]["spec"]["ingress"][0]["ports"][1],
        json!({ "port": 8443, "protocol": "TCP" })
    );

    let ready = condition(&status, ConditionType::CertificateReady);
    assert_eq!(
        (
            ready.status.as_str(),
            ready.reason.as_str(),
            ready.message.as_str()
        ),
        ("True", "Issued", "Certificate shop is ready")
    );
    assert_eq!(status.served_certificates, [], "no pod serves yet");
}

/// An issuer's Certificate is not requested over what is someone else's: a Secret
/// cert-manager did not issue, or issued for another app's Certificate (cert-manager would
/// overwrite it), or a Certificate of that name another VirtualServer owns (a forced apply
/// would take it over). Each is said in CertificateReady and looked at every minute; an
/// own Certificate of that name is kept, not deleted.
#[tokio::test]
async fn a_certificate_is_not_requested_over_another_apps_secret_or_certificate() {
    let spec = tls_spec(json!({ "issuerRef": { "name": "le", "kind": "ClusterIssuer" } }));
    for (case, reason, message) in [
        (
            "a Secret of the user's",
            "SecretInUse",
            "Secret shop-tls exists and cert-manager did not issue it; Certificate shop would overwrite it",
        ),
        (
            "issued for another app",
            "SecretInUse",
            "Secret shop-tls exists and cert-manager issued it for Certificate billing, which is not this VirtualServer's;",
        ),
        (
            "issued for a Certificate since deleted",
            "SecretInUse",
            "Secret shop-tls exists and cert-manager issued it for Certificate gone, which no longer exists;",
        ),
        (
            "another's Certificate",
            "CertificateInUse",
            "Certificate shop exists and is not this VirtualServer's",
        ),
        (
            "another's orphan",
            "CertificateInUse",
            "Certificate shop exists and is not this VirtualServer's",
        ),
    ] {
        let vs = virtual_server(spec.clone(), None);
        let (result, status) = run(vs, |mut api| async move {
            api.children(true).await;
            api.certificate_crd(true).await;
            match case {
                "a Secret of the user's" => {
                    api.secret_metadata_issued("shop-tls", Some("3"), None).await;
                    api.cluster_issuer(dns01()).await;
                }
                "issued for another app" => {
                    api.secret_metadata_issued("shop-tls", Some("3"), Some("billing"))
                        .await;
                    api.cluster_issuer(dns01()).await;
                    api.certificate_metadata("billing", Some(("billing", "billing-uid")))
                        .await;
                }
                "issued for a Certificate since deleted" => {
                    api.secret_metadata_issued("shop-tls", Some("3"), Some("gone"))
                        .await;
                    api.cluster_issuer(dns01()).await;
                    api.certificate_metadata("gone", None).await;
                }
                "another's orphan" => {
                    api.secret_metadata("shop-tls", None).await;
                    api.cluster_issuer(dns01()).await;
                    api.certificate_metadata_orphaned("shop", "billing").await;
                }
                _ => {
                    api.secret_metadata("shop-tls", None).await;
                    api.cluster_issuer(dns01()).await;
                    api.certificate_metadata("shop", Some(("billing", "billing-uid")))
                        .await;
                }
            }
            // Nothing applied or deleted: this VirtualServer's own `shop` stays.
            api.certificate_list(&[("shop", "vs-uid")]).await;
            api.no_pods().await;
            let status = api.expect_status().await;
            api.expect_event(EventReason::Created).await;
            (api, status)
        })
        .await;
        assert_eq!(result.unwrap(), Action::requeue(Duration::from_secs(60)));
        let ready = condition(&status, ConditionType::CertificateReady);
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", reason),
            "{case}"
        );
        assert!(ready.message.starts_with(message), "{}", ready.message);
    }
}

/// What is this VirtualServer's is not refused: a Secret issued for another of its
/// Certificates (secretNames moved between its certificates), and a Certificate left by a
/// VirtualServer of the same name deleted before (its garbage collection not done yet, or
/// `--cascade=orphan`), which this one takes on.
#[tokio::test]
async fn a_certificate_over_what_this_virtual_server_had_is_requested() {
    let spec = tls_spec(json!({ "issuerRef": { "name": "le", "kind": "ClusterIssuer" } }));
    for case in ["moved", "predecessor", "orphaned"] {
        let vs = virtual_server(spec.clone(), None);
        let (result, certificate) = run(vs, |mut api| async move {
            api.children(true).await;
            api.certificate_crd(true).await;
            match case {
                "moved" => {
                    api.secret_metadata_issued("shop-tls", Some("3"), Some("b-tls"))
                        .await;
                    api.cluster_issuer(dns01()).await;
                    api.certificate_metadata("b-tls", Some(("shop", "vs-uid")))
                        .await;
                    api.certificate_metadata("shop", None).await;
                }
                "orphaned" => {
                    api.secret_metadata("shop-tls", None).await;
                    api.cluster_issuer(dns01()).await;
                    api.certificate_metadata_orphaned("shop", "shop").await;
                }
                _ => {
                    api.secret_metadata("shop-tls", None).await;
                    api.cluster_issuer(dns01()).await;
                    api.certificate_metadata("shop", Some(("shop", "old-uid")))
                        .await;
                }
            }
            let certificate = api
                .expect_apply(
                    "/apis/cert-manager.io/v1/namespaces/web/certificates/shop",
                    json!({}),
                )
                .await;
            api.certificate_list(&[("shop", "vs-uid")]).await;
            api.no_pods().await;
            api.expect_status().await;
            api.expect_event(EventReason::Created).await;
            (api, certificate)
        })
        .await;
        assert!(result.is_ok(), "{case}");
        assert_eq!(certificate["spec"]["secretName"], "shop-tls", "{case}");
    }
}

/// cert-manager answers HTTP-01 from a solver behind its own Ingress, which the edge never
/// routes: an ACME issuer with HTTP-01 solvers only is refused with a reason that points
/// at DNS-01 and a Warning Event, no Certificate is requested, and one made earlier is
/// removed.
#[tokio::test]
async fn an_acme_issuer_with_http01_solvers_only_is_refused_with_a_pointer_to_dns01() {
    let spec = tls_spec(json!({ "issuerRef": { "name": "le", "kind": "ClusterIssuer" } }));
    let vs = virtual_server(spec.clone(), None);
    let (result, (status, warning)) = run(vs, |mut api| async move {
        api.children(true).await;
        api.certificate_crd(true).await;
        api.secret_metadata("shop-tls", None).await;
        api.cluster_issuer(http01()).await;
        // No Certificate applied; the one from before the issuer changed goes.
        api.certificate_list(&[("shop", "vs-uid")]).await;
        api.certificate_deleted("shop").await;
        api.no_pods().await;
        let status = api.expect_status().await;
        api.expect_event(EventReason::Created).await;
        let warning = api.expect_warning(EventReason::Http01Unsupported).await;
        (api, (status, warning))
    })
    .await;
    assert_eq!(
        result.unwrap(),
        Action::requeue(Duration::from_secs(60)),
        "the issuer is not watched: looked at again every minute"
    );
    let ready = condition(&status, ConditionType::CertificateReady);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "Http01Unsupported")
    );
    for needle in [
        "ClusterIssuer le solves ACME challenges over HTTP-01 only",
        "shop.example",
        "dns01 solver",
        "https://cert-manager.io/docs/configuration/acme/dns01/",
    ] {
        assert!(
            ready.message.contains(needle),
            "{needle:?} in {}",
            ready.message
        );
    }
    assert_eq!(warning, ready.message);
    assert_eq!(
        condition(&status, ConditionType::Accepted).status,
        "True",
        "the config is fine; the certificate is what cannot be had"
    );

    // Unchanged: no second Event, no status write.
    let vs = virtual_server(spec, Some(&status));
    let (result, ()) = run(vs, |mut api| async move {
        api.children(true).await;
        api.certificate_crd(true).await;
        api.secret_metadata("shop-tls", None).await;
        api.cluster_issuer(http01()).await;
        api.certificate_list(&[]).await;
        api.no_pods().await;
        (api, ())
    })
    .await;
    assert_eq!(result.unwrap(), Action::requeue(Duration::from_secs(60)));
}

/// A Secret renewed in place (cert-manager, or by hand) changes nothing the operator
/// applies: the Deployment names the Secret, never its content (which the operator does
/// not even read), so the pods are not rolled; the kubelet refreshes the mounted directory
/// and the server reloads the pair.
#[tokio::test]
async fn a_renewed_secret_changes_nothing_applied_and_rolls_no_pod() {
    let spec = json!({
        "hosts": ["shop.example", "shop.example.org"], "content": { "configMap": "site" },
        "tls": { "secretName": "shop-cert",
                 "certificates": [{ "hosts": ["shop.example.org"], "secretName": "org-cert" }] }
    });
    // The second certificate's Secret is not there yet.
    let vs = virtual_server(spec.clone(), None);
    let (result, (first, status)) = run(vs, |mut api| async move {
        let applied = api.children(true).await;
        api.secret_metadata("shop-cert", Some("1")).await;
        api.secret_metadata("org-cert", None).await;
        api.no_pods().await;
        let status = api.expect_status().await;
        api.expect_event(EventReason::Created).await;
        (api, (applied, status))
    })
    .await;
    assert_eq!(
        result.unwrap(),
        Action::requeue(Duration::from_secs(10)),
        "Secrets are not watched: a missing one is looked for again soon"
    );
    let ready = condition(&status, ConditionType::CertificateReady);
    assert_eq!(
        (
            ready.status.as_str(),
            ready.reason.as_str(),
            ready.message.as_str()
        ),
        (
            "False",
            "SecretNotFound",
            "spec.tls.certificates[0]: Secret org-cert does not exist"
        )
    );
    let config = first["configmap"]["data"]["skiff.yaml"].as_str().unwrap();
    let config = skiff_config::parse_yaml(config).unwrap();
    let names: Vec<&str> = config
        .virtual_servers
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(names, ["shop", "shop-tls-1"]);

    // It appears. (With a CertificateReady condition from before, Certificates this
    // VirtualServer may have made earlier are looked for: none.)
    let vs = virtual_server(spec.clone(), Some(&status));
    let (result, (second, status)) = run(vs, |mut api| async move {
        let applied = api.children(true).await;
        api.certificate_crd(true).await;
        api.secret_metadata("shop-cert", Some("1")).await;
        api.secret_metadata("org-cert", Some("2")).await;
        api.certificate_list(&[]).await;
        api.no_pods().await;
        let status = api.expect_status().await;
        (api, (applied, status))
    })
    .await;
    assert_eq!(result.unwrap(), Action::requeue(Duration::from_secs(300)));
    let ready = condition(&status, ConditionType::CertificateReady);
    assert_eq!(
        (
            ready.status.as_str(),
            ready.reason.as_str(),
            ready.message.as_str()
        ),
        (
            "True",
            "SecretFound",
            "spec.tls: Secret shop-cert holds the certificate; \
             spec.tls.certificates[0]: Secret org-cert holds the certificate"
        )
    );
    assert_eq!(second, first, "a Secret appearing changes no child");

    // Both are renewed: nothing is written at all.
    let vs = virtual_server(spec, Some(&status));
    let (result, third) = run(vs, |mut api| async move {
        let applied = api.children(true).await;
        api.certificate_crd(false).await;
        api.secret_metadata("shop-cert", Some("8")).await;
        api.secret_metadata("org-cert", Some("9")).await;
        api.no_pods().await;
        (api, applied)
    })
    .await;
    assert!(result.is_ok());
    assert_eq!(third["deployment"], first["deployment"]);
    // The template holds the restart-only fields' hash, nothing of a Secret.
    let template = &third["deployment"]["spec"]["template"];
    let annotations = template["metadata"]["annotations"].as_object().unwrap();
    assert_eq!(
        annotations.keys().collect::<Vec<_>>(),
        [crate::children::RESTART_HASH_ANNOTATION]
    );
}

#[tokio::test]
async fn an_issuer_without_cert_manager_says_so_and_asks_nothing_of_cert_manager() {
    let spec = tls_spec(json!({ "issuerRef": { "name": "le", "kind": "ClusterIssuer" } }));
    let (result, status) = run(virtual_server(spec, None), |mut api| async move {
        api.children(true).await;
        api.certificate_crd(false).await;
        api.secret_metadata("shop-tls", None).await;
        api.no_pods().await;
        let status = api.expect_status().await;
        api.expect_event(EventReason::Created).await;
        (api, status)
    })
    .await;
    assert!(result.is_ok());
    let ready = condition(&status, ConditionType::CertificateReady);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "CertManagerNotInstalled")
    );
}

#[tokio::test]
async fn dropping_tls_removes_its_certificate_and_its_condition() {
    // The status of a VirtualServer served with an issued certificate...
    let (_, mut status) = run(virtual_server(valid_spec(), None), |mut api| async move {
        api.accepted_children(true).await;
        let status = api.expect_status().await;
        api.expect_event(EventReason::Created).await;
        (api, status)
    })
    .await;
    status::set_condition(
        &mut status,
        Some(3),
        ConditionType::CertificateReady,
        status::Outcome::yes(Reason::Issued, "Certificate shop is ready"),
    );
    // ...whose spec.tls is gone.
    let vs = virtual_server(valid_spec(), Some(&status));
    let (result, status) = run(vs, |mut api| async move {
        api.children(true).await;
        api.certificate_crd(true).await;
        api.certificate_list(&[("shop", "vs-uid")]).await;
        api.certificate_deleted("shop").await;
        api.no_pods().await;
        let status = api.expect_status().await;
        (api, status)
    })
    .await;
    assert!(result.is_ok());
    assert!(!status
        .conditions
        .iter()
        .any(|c| c.is(ConditionType::CertificateReady)));
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

/// The edge is rolled out, and a pool's own Deployment has no available pod: its routes
/// fail, so the VirtualServer is not Ready. A pool scaled to zero, or with a pod
/// available, is not named.
#[test]
fn a_pool_without_an_available_pod_makes_the_virtual_server_not_ready() {
    let rendered = render::Rendered::default();
    let deployment = |name: &str, pool: Option<&str>, want: i32, available: i32| -> Deployment {
        let labels = pool
            .map(|p| json!({ "skiff.dev/pool": p }))
            .unwrap_or(json!({}));
        serde_json::from_value(json!({
            "metadata": { "name": name, "generation": 1, "labels": labels },
            "spec": { "replicas": want, "selector": {}, "template": {} },
            "status": { "observedGeneration": 1, "replicas": want, "readyReplicas": available,
                "updatedReplicas": want, "availableReplicas": available }
        }))
        .unwrap()
    };
    let edge = deployment("shop", None, 2, 2);
    let service = Service::default();
    let pools = [
        deployment("shop-php", Some("php"), 2, 0),
        deployment("shop-api", Some("api"), 2, 1),
        deployment("shop-idle", Some("idle"), 0, 0),
    ];
    let mut o = observed(&rendered, &edge, &service, None);
    o.pools = &pools;
    let s = status::accepted(&VirtualServerStatus::default(), Some(1), &o);
    let ready = condition(&s, ConditionType::Ready);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "PoolUnavailable")
    );
    assert_eq!(
        ready.message,
        "2/2 edge pods ready; pool php has no available pod"
    );
    assert_eq!(o.requeue_after(), Duration::from_secs(30));

    let two_down = [
        deployment("shop-php", Some("php"), 2, 0),
        deployment("shop-api", Some("api"), 1, 0),
    ];
    o.pools = &two_down;
    let s = status::accepted(&VirtualServerStatus::default(), Some(1), &o);
    assert_eq!(
        condition(&s, ConditionType::Ready).message,
        "2/2 edge pods ready; pools php, api have no available pod"
    );
    let up = [deployment("shop-php", Some("php"), 2, 1)];
    o.pools = &up;
    let s = status::accepted(&VirtualServerStatus::default(), Some(1), &o);
    assert_eq!(condition(&s, ConditionType::Ready).reason, "Available");
}

#[test]
fn the_served_certificates_go_into_the_status_and_a_refusal_is_announced_once() {
    let rendered = render::Rendered::default();
    let deployment = Deployment::default();
    let service = Service::default();
    let refused = status::Outcome::no(Reason::Http01Unsupported, "use DNS-01");
    let mut o = observed(&rendered, &deployment, &service, Some(refused));
    o.served_certificates = vec![crate::crd::ServedCertificate {
        secret_name: "shop-tls".into(),
        serial: "0a1b".into(),
        not_after: "2026-01-01T00:00:00Z".into(),
        pods: 2,
    }];
    let old = VirtualServerStatus::default();
    let s = status::accepted(&old, Some(1), &o);
    assert_eq!(s.served_certificates, o.served_certificates);
    assert_eq!(
        status::certificate_event(&old, &o),
        Some((EventReason::Http01Unsupported, "use DNS-01".into()))
    );
    assert_eq!(status::certificate_event(&s, &o), None, "said already");
    let fine = observed(&rendered, &deployment, &service, None);
    assert_eq!(status::certificate_event(&s, &fine), None);
}

/// Pods mount their TLS Secrets, so they wait for a missing one: Ready says so.
#[test]
fn pods_waiting_for_a_tls_secret_are_named_in_ready() {
    let rendered = render::Rendered::default();
    let starting: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "shop", "generation": 2 },
        "spec": { "replicas": 2, "selector": {}, "template": {} },
        "status": { "observedGeneration": 2, "replicas": 1, "readyReplicas": 0 }
    }))
    .unwrap();
    let service = Service::default();
    let waiting = status::Outcome::no(
        Reason::Pending,
        "Issuing certificate as Secret does not exist",
    );
    let mut o = observed(&rendered, &starting, &service, Some(waiting));
    o.missing_secrets = vec!["shop-tls".into()];
    let s = status::accepted(&VirtualServerStatus::default(), Some(2), &o);
    let ready = condition(&s, ConditionType::Ready);
    assert_eq!(
        ready.message,
        "0/2 edge pods ready; new pods start once TLS Secret shop-tls exists"
    );
    assert_eq!(o.requeue_after(), Duration::from_secs(5));
    // Past its progress deadline, the rollout is looked at every minute, not every 5 s.
    let stalled: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "shop", "generation": 2 },
        "spec": { "replicas": 2, "selector": {}, "template": {} },
        "status": { "observedGeneration": 2, "replicas": 1, "readyReplicas": 0,
            "conditions": [{ "type": "Progressing", "status": "False",
                "reason": "ProgressDeadlineExceeded" }] }
    }))
    .unwrap();
    o.deployment = &stalled;
    assert_eq!(
        o.requeue_after(),
        Duration::from_secs(10),
        "the pending certificate is still looked at soon"
    );
    o.certificate = None;
    assert_eq!(o.requeue_after(), Duration::from_secs(60));
}

/// A Secret in place that a pod on the current config does not serve (a pod started
/// before it was added or renamed, or a pair that does not load) is not ready for clients.
#[test]
fn a_certificate_in_place_that_a_pod_does_not_serve_is_not_ready() {
    let issued = status::Outcome::yes(Reason::Issued, "Certificate shop-tls is ready");
    let o = status::served_or_not(issued.clone(), &["shop-tls".into()]);
    assert_eq!((o.ok, o.reason), (false, Reason::NotServed));
    assert!(
        o.message
            .starts_with("not every edge pod on the current config serves Secret shop-tls yet"),
        "{}",
        o.message
    );
    let all = status::served_or_not(issued, &[]);
    assert_eq!((all.ok, all.reason), (true, Reason::Issued));
    // A reason of its own (not issued yet) is kept.
    let pending = status::Outcome::no(Reason::Pending, "requested");
    let o = status::served_or_not(pending, &["shop-tls".into()]);
    assert_eq!((o.ok, o.reason), (false, Reason::Pending));
}

#[test]
fn several_certificates_make_one_condition() {
    use status::Outcome;
    let combine = super::integrations::combine;
    let one = Outcome::no(Reason::Pending, "waiting");
    assert_eq!(combine(vec![("spec.tls".into(), one.clone())]), one);
    let all = combine(vec![
        (
            "spec.tls".into(),
            Outcome::yes(Reason::Issued, "Certificate shop is ready"),
        ),
        (
            "spec.tls.certificates[0]".into(),
            Outcome::yes(Reason::SecretFound, "Secret x holds the certificate"),
        ),
    ]);
    assert_eq!(
        all,
        Outcome::yes(
            Reason::Issued,
            "spec.tls: Certificate shop is ready; spec.tls.certificates[0]: Secret x holds the certificate"
        )
    );
    let some = combine(vec![
        ("spec.tls".into(), Outcome::yes(Reason::Issued, "ready")),
        (
            "spec.tls.certificates[0]".into(),
            Outcome::no(Reason::SecretNotFound, "Secret x does not exist"),
        ),
        (
            "spec.tls.certificates[1]".into(),
            Outcome::no(Reason::Pending, "issuing"),
        ),
    ]);
    assert_eq!(
        some,
        Outcome::no(
            Reason::SecretNotFound,
            "spec.tls.certificates[0]: Secret x does not exist; spec.tls.certificates[1]: issuing"
        )
    );
}

/// An issuer that cannot be read (none yet, or a ClusterRole from before this check) is
/// left to cert-manager: the Certificate is requested and its own condition tells.
#[tokio::test]
async fn an_issuer_that_cannot_be_read_is_left_to_cert_manager() {
    let spec = tls_spec(json!({ "issuerRef": { "name": "le", "kind": "ClusterIssuer" } }));
    let (result, status) = run(virtual_server(spec, None), |mut api| async move {
        api.children(true).await;
        api.certificate_crd(true).await;
        api.secret_metadata("shop-tls", None).await;
        api.expect(Method::GET, "/apis/cert-manager.io/v1/clusterissuers/le")
            .await
            .forbidden();
        api.certificate_metadata("shop", None).await;
        let pending = json!({ "status": { "conditions": [{
            "type": "Ready", "status": "False", "reason": "IssuerNotFound",
            "message": "Referenced \"ClusterIssuer\" not found"
        }] } });
        api.expect_apply(
            "/apis/cert-manager.io/v1/namespaces/web/certificates/shop",
            pending,
        )
        .await;
        api.expect(
            Method::GET,
            "/apis/cert-manager.io/v1/namespaces/web/certificates",
        )
        .await
        .forbidden();
        api.no_pods().await;
        let status = api.expect_status().await;
        api.expect_event(EventReason::Created).await;
        (api, status)
    })
    .await;
    assert_eq!(result.unwrap(), Action::requeue(Duration::from_secs(10)));
    let ready = condition(&status, ConditionType::CertificateReady);
    assert_eq!(
        (
            ready.status.as_str(),
            ready.reason.as_str(),
            ready.message.as_str()
        ),
        ("False", "Pending", "Referenced \"ClusterIssuer\" not found")
    );
}

/// Turning autoscaling on: the replica count the operator set is handed to another field
/// manager at its live value before the apply that drops it, or server-side apply would
/// remove it and the Deployment fall to one replica. Once handed over (or owned by the
/// HPA), nothing more is written.
#[tokio::test]
async fn replicas_the_operator_set_are_handed_over_before_an_hpa_takes_them() {
    let deployment = |manager: &str| {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "shop", "namespace": "web", "managedFields": [{
                "manager": manager, "operation": if manager == MANAGER { "Apply" } else { "Update" },
                "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                "fieldsV1": { "f:spec": { "f:replicas": {}, "f:template": {} } }
            }] },
            "spec": { "replicas": 10, "selector": {}, "template": {} }
        })
    };
    for (owner, handed) in [(MANAGER, true), ("kube-controller-manager", false)] {
        let (ctx, mut api) = context(None);
        let scenario = tokio::spawn(async move {
            api.expect(Method::GET, "/apis/apps/v1/namespaces/web/deployments/shop")
                .await
                .ok(deployment(owner));
            if handed {
                let call = api
                    .expect(
                        Method::PATCH,
                        "/apis/apps/v1/namespaces/web/deployments/shop",
                    )
                    .await;
                assert_eq!(call.query["fieldManager"], apply::HANDOVER_MANAGER);
                assert_eq!(call.body["spec"], json!({ "replicas": 10 }));
                let body = call.body.clone();
                call.ok(body);
            }
            api
        });
        apply::hand_replicas_over(&ctx.client, "web", "shop")
            .await
            .unwrap();
        drop(ctx);
        let mut api = scenario.await.unwrap();
        assert!(
            api.handle.next_request().await.is_none(),
            "{owner}: nothing more is asked"
        );
    }
}

/// An object no longer wanted is deleted only if this VirtualServer owns it, on the
/// condition that it is still the object read: an HPA a user made under the same name is
/// left alone.
#[tokio::test]
async fn only_an_owned_object_is_deleted_and_only_the_one_read() {
    let hpa = |owner: &str| {
        json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": { "name": "shop", "namespace": "web", "uid": "hpa-uid",
                "ownerReferences": [{ "apiVersion": "skiff.dev/v1alpha1", "kind": "VirtualServer",
                    "name": "shop", "uid": owner, "controller": true }] }
        })
    };
    let path = "/apis/autoscaling/v2/namespaces/web/horizontalpodautoscalers/shop";
    for (owner, deleted) in [("vs-uid", true), ("someone-else", false)] {
        let (ctx, mut api) = context(None);
        let scenario = tokio::spawn(async move {
            api.expect(Method::GET, path).await.ok(hpa(owner));
            if deleted {
                let call = api.expect(Method::DELETE, path).await;
                assert_eq!(call.body["preconditions"]["uid"], "hpa-uid");
                call.ok(json!({ "apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success", "code": 200 }));
            }
            api
        });
        apply::delete_if_owned::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>(
            &ctx.client,
            "web",
            "shop",
            "vs-uid",
        )
        .await
        .unwrap();
        drop(ctx);
        let mut api = scenario.await.unwrap();
        assert!(
            api.handle.next_request().await.is_none(),
            "{owner}: nothing more is asked"
        );
    }
}

/// A child the API server refuses (here the Deployment, as an admission webhook would):
/// Ready says so with the API server's message and a Warning Event is published, rather
/// than the failure living only in the operator's log; the reconcile is retried.
#[tokio::test]
async fn a_child_the_api_server_refuses_is_reported_in_ready_and_an_event() {
    let vs = virtual_server(valid_spec(), None);
    let (result, (status, note)) = run(vs, |mut api| async move {
        api.expect(Method::GET, "/api/v1/namespaces/web/configmaps/site")
            .await
            .ok(json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "site" } }));
        api.expect_apply("/api/v1/namespaces/web/configmaps/shop-config", json!({}))
            .await;
        api.expect_apply(
            "/apis/networking.k8s.io/v1/namespaces/web/networkpolicies/shop",
            json!({}),
        )
        .await;
        api.expect(Method::PATCH, "/apis/apps/v1/namespaces/web/deployments/shop")
            .await
            .answer(
                StatusCode::FORBIDDEN,
                json!({ "apiVersion": "v1", "kind": "Status", "status": "Failure",
                        "message": "admission webhook \"policy.example\" denied the request: no latest tags",
                        "reason": "Forbidden", "code": 403 }),
            );
        let status = api.expect_status().await;
        let note = api.expect_warning(EventReason::ApplyFailed).await;
        (api, (status, note))
    })
    .await;
    assert!(result.is_err(), "retried with backoff");
    let ready = condition(&status, ConditionType::Ready);
    let message = "the API server refused a child: admission webhook \"policy.example\" denied the request: no latest tags";
    assert_eq!(
        (
            ready.status.as_str(),
            ready.reason.as_str(),
            ready.message.as_str()
        ),
        ("False", "ApplyFailed", message)
    );
    assert_eq!(note, message);
}

/// A Certificate the API server refuses (cert-manager's webhook) is reported as a refused
/// child is, instead of the reconcile failing before any status is written.
#[tokio::test]
async fn a_certificate_the_api_server_refuses_is_reported_in_ready_and_an_event() {
    let spec = tls_spec(json!({ "issuerRef": { "name": "le", "kind": "ClusterIssuer" } }));
    let (result, (status, note)) = run(virtual_server(spec, None), |mut api| async move {
        api.children(true).await;
        api.certificate_crd(true).await;
        api.secret_metadata("shop-tls", None).await;
        api.cluster_issuer(dns01()).await;
        api.certificate_metadata("shop", None).await;
        api.expect(
            Method::PATCH,
            "/apis/cert-manager.io/v1/namespaces/web/certificates/shop",
        )
        .await
        .answer(
            StatusCode::BAD_REQUEST,
            json!({ "apiVersion": "v1", "kind": "Status", "status": "Failure",
                    "message": "admission webhook \"webhook.cert-manager.io\" denied the request: spec.privateKey: invalid",
                    "reason": "BadRequest", "code": 400 }),
        );
        let status = api.expect_status().await;
        let note = api.expect_warning(EventReason::ApplyFailed).await;
        (api, (status, note))
    })
    .await;
    assert!(result.is_err(), "retried with backoff");
    let ready = condition(&status, ConditionType::Ready);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "ApplyFailed")
    );
    assert!(
        ready.message.contains("webhook.cert-manager.io"),
        "{}",
        ready.message
    );
    assert_eq!(note, ready.message);
}
