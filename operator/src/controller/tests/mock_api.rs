//! The mock apiserver: each request a reconcile makes, checked in order, and its answer.

use super::*;

pub(super) struct ApiServer {
    pub(super) handle: Handle,
    /// Whether the operator applies NetworkPolicies (or deletes them).
    pub(super) network_policy: bool,
}

/// One request, its JSON body, and the way to answer it.
pub(super) struct Call {
    method: Method,
    path: String,
    pub(super) query: BTreeMap<String, String>,
    content_type: Option<String>,
    pub(super) accept: String,
    pub(super) body: Value,
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
    pub(super) async fn expect(&mut self, method: Method, path: &str) -> Call {
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
    pub(super) async fn expect_apply(&mut self, path: &str, extra: Value) -> Value {
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
    pub(super) async fn accepted_children(
        &mut self,
        content_exists: bool,
    ) -> BTreeMap<&'static str, Value> {
        let applied = self.children(content_exists).await;
        self.no_pods().await;
        applied
    }

    /// [`Self::accepted_children`] up to the certificates (which come next with `spec.tls`).
    pub(super) async fn children(&mut self, content_exists: bool) -> BTreeMap<&'static str, Value> {
        self.content(content_exists).await;
        self.children_after_refs().await
    }

    /// The read of the content ConfigMap `site`, found or not.
    pub(super) async fn content(&mut self, exists: bool) {
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
    pub(super) async fn children_after_refs(&mut self) -> BTreeMap<&'static str, Value> {
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
    pub(super) async fn no_pods(&mut self) {
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
    pub(super) async fn expect_status(&mut self) -> VirtualServerStatus {
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
    pub(super) async fn expect_event(&mut self, reason: EventReason) -> String {
        self.expect_event_of("Normal", reason).await
    }

    /// [`Self::expect_event`] of a Warning.
    pub(super) async fn expect_warning(&mut self, reason: EventReason) -> String {
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

impl Call {
    pub(super) fn ok(self, body: Value) {
        self.answer(StatusCode::OK, body);
    }

    pub(super) fn not_found(self) {
        let status = json!({
            "apiVersion": "v1", "kind": "Status", "status": "Failure",
            "message": "not found", "reason": "NotFound", "code": 404,
        });
        self.answer(StatusCode::NOT_FOUND, status);
    }

    pub(super) fn forbidden(self) {
        let status = json!({
            "apiVersion": "v1", "kind": "Status", "status": "Failure",
            "message": "forbidden", "reason": "Forbidden", "code": 403,
        });
        self.answer(StatusCode::FORBIDDEN, status);
    }

    pub(super) fn answer(self, code: StatusCode, body: Value) {
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
