//! cert-manager Certificates: the TLS requests of a reconcile, and when one is requested.

use super::*;

/// The TLS requests, in the order a reconcile makes them after the children.
impl ApiServer {
    /// Whether cert-manager's Certificate CRD exists.
    pub(super) async fn certificate_crd(&mut self, installed: bool) {
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
    pub(super) async fn secret_metadata(&mut self, name: &str, version: Option<&str>) {
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
    pub(super) async fn certificate_metadata(&mut self, name: &str, owner: Option<(&str, &str)>) {
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
    pub(super) async fn cluster_issuer(&mut self, solvers: Value) {
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
    pub(super) async fn certificate_list(&mut self, items: &[(&str, &str)]) {
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
    pub(super) async fn certificate_deleted(&mut self, name: &str) {
        self.expect(
            Method::DELETE,
            &format!("/apis/cert-manager.io/v1/namespaces/web/certificates/{name}"),
        )
        .await
        .ok(json!({ "apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success", "code": 200 }));
    }
}

pub(super) fn dns01() -> Value {
    json!([{ "dns01": { "cloudflare": { "apiTokenSecretRef": { "name": "cf", "key": "token" } } } }])
}

fn http01() -> Value {
    json!([{ "http01": { "ingress": { "ingressClassName": "nginx" } } }])
}

pub(super) fn tls_spec(tls: Value) -> Value {
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
