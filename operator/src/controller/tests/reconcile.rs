//! Reconciles without TLS: children, status writes, missing refs, refusals, conflicts, policies.

use super::*;

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
