//! Applying and deleting children: replicas handover, owned-only deletion, refused objects.

use super::certificates::{dns01, tls_spec};
use super::*;

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
