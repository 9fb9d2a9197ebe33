//! TLS from Secrets and without a usable issuer: renewals, no cert-manager, dropping spec.tls.

use super::certificates::tls_spec;
use super::*;

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
