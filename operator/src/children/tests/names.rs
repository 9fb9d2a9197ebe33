//! The names a VirtualServer's children take, and which of two VirtualServers keeps a
//! name both would take.

use super::*;
use crate::children::names::{claims, conflict};

fn created(name: &str, ns: &str, at: &str, spec: Value) -> std::sync::Arc<VirtualServer> {
    let mut v = vs(spec);
    v.metadata.name = Some(name.into());
    v.metadata.namespace = Some(ns.into());
    v.metadata.uid = Some(format!("{ns}-{name}-uid"));
    v.metadata.creation_timestamp = Some(serde_json::from_value(json!(at)).unwrap());
    std::sync::Arc::new(v)
}

fn with_pool(pool: &str) -> Value {
    json!({
        "hosts": ["a.example"], "content": { "configMap": "site" },
        "pools": [{ "name": pool, "protocol": "fastcgi", "image": "php-fpm:8" }]
    })
}

fn plain() -> Value {
    json!({ "hosts": ["b.example"], "content": { "configMap": "site" } })
}

/// The claims are the names the children are really given: every Deployment, Service,
/// ConfigMap and Certificate by its own claim, the HPAs, budget, NetworkPolicies and
/// ServiceMonitor by their Deployment's, and each issued Certificate's Secret.
#[test]
fn every_child_is_named_by_a_claim() {
    let v = vs(json!({
        "hosts": ["shop.example", "shop.example.org", "x.example.net"],
        "content": { "configMap": "site" },
        "autoscaling": { "minReplicas": 2, "maxReplicas": 4 },
        "tls": {
            "issuerRef": { "name": "le", "kind": "ClusterIssuer" },
            "certificates": [
                { "hosts": ["shop.example.org"], "secretName": "org-tls", "issuerRef": { "name": "org-ca" } },
                { "hosts": ["x.example.net"], "secretName": "user-tls" }
            ]
        },
        "pools": [
            { "name": "php", "protocol": "fastcgi", "image": "php-fpm:8",
              "autoscaling": { "minReplicas": 1, "maxReplicas": 5 } },
            { "name": "side", "protocol": "uwsgi", "image": "uwsgi:2", "placement": "sidecar" },
            { "name": "ext", "protocol": "http", "endpoints": ["api.other:80"] }
        ]
    }));
    let rendered = render::server_config(&v).unwrap();
    let c = Children::new(&v, &rendered, Some(&policy_settings()));
    let claims = claims(&v);
    let claimed = |kind: &str, name: &str| claims.iter().any(|c| c.kind == kind && c.name == name);
    let name = |m: &ObjectMeta| m.name.clone().unwrap();
    let mut named = vec![
        ("ConfigMap", name(&c.config_map.metadata)),
        ("Deployment", name(&c.deployment.metadata)),
        ("Service", name(&c.service.metadata)),
        ("Service", name(&c.metrics_service.metadata)),
    ];
    let mut after_their_deployment = vec![
        name(&c.autoscaler.as_ref().unwrap().metadata),
        name(&c.disruption_budget.metadata),
        name(&c.network_policy.as_ref().unwrap().metadata),
        name(&c.service_monitor.metadata),
    ];
    for p in &c.pools {
        named.push(("Deployment", name(&p.deployment.metadata)));
        named.push(("Service", name(&p.service.metadata)));
        after_their_deployment.push(name(&p.autoscaler.as_ref().unwrap().metadata));
        after_their_deployment.push(name(&p.network_policy.as_ref().unwrap().metadata));
    }
    assert_eq!(c.pools.len(), 1, "only the pool placement has a workload");
    assert_eq!(
        c.certificates.len(),
        2,
        "the user's own certificate is none"
    );
    for cert in &c.certificates {
        named.push(("Certificate", name(&cert.metadata)));
        named.push(("Secret", cert.spec.secret_name.clone()));
    }
    for (kind, n) in &named {
        assert!(claimed(kind, n), "{kind} {n} is not claimed: {claims:?}");
    }
    for n in &after_their_deployment {
        assert!(claimed("Deployment", n), "{n} is not a Deployment's name");
    }
    assert_eq!(
        claims.len(),
        named.len(),
        "nothing is claimed that is not applied: {claims:?}"
    );
    assert!(
        !claimed("Secret", "user-tls"),
        "a Secret of the user's is only read"
    );
}

#[test]
fn a_pool_workload_and_a_virtual_server_of_its_name_conflict_and_the_older_keeps_it() {
    let a = created("a", "web", "2026-01-01T00:00:00Z", with_pool("b"));
    let ab = created("a-b", "web", "2026-01-02T00:00:00Z", plain());
    let peers = [a.clone(), ab.clone()];
    assert_eq!(conflict(&a, &peers), None, "the older one applies");
    let message = conflict(&ab, &peers).expect("the newer one is refused");
    assert!(
        message.starts_with(
            r#"Deployment "a-b" (the edge here) is also the workload of pool b of VirtualServer "a", which is older"#
        ),
        "{message}"
    );

    // Created the other way round, the pool's VirtualServer is the one refused.
    let ab = created("a-b", "web", "2025-12-31T00:00:00Z", plain());
    let peers = [a.clone(), ab.clone()];
    assert_eq!(conflict(&ab, &peers), None);
    assert!(conflict(&a, &peers)
        .unwrap()
        .contains(r#"VirtualServer "a-b""#));

    // Another namespace takes nothing.
    let elsewhere = created("a-b", "shop", "2025-12-31T00:00:00Z", plain());
    assert_eq!(conflict(&a, &[a.clone(), elsewhere]), None);
}

#[test]
fn the_metrics_service_and_issued_secrets_are_names_too() {
    let a = created("a", "web", "2026-01-01T00:00:00Z", plain());
    let metrics = created("a-metrics", "web", "2026-01-02T00:00:00Z", plain());
    let message = conflict(&metrics, &[a.clone(), metrics.clone()]).unwrap();
    assert!(
        message.starts_with(r#"Service "a-metrics" (the edge here) is also the metrics Service of VirtualServer "a""#),
        "{message}"
    );

    let issued = |name: &str, at: &str, issuer: bool| {
        let mut spec = plain();
        spec["tls"] = if issuer {
            json!({ "secretName": "site-tls", "issuerRef": { "name": "le", "kind": "ClusterIssuer" } })
        } else {
            json!({ "secretName": "site-tls" })
        };
        created(name, "web", at, spec)
    };
    let first = issued("first", "2026-01-01T00:00:00Z", true);
    let second = issued("second", "2026-01-02T00:00:00Z", true);
    let message = conflict(&second, &[first.clone(), second.clone()]).unwrap();
    assert!(message.starts_with(r#"Secret "site-tls""#), "{message}");
    // Serving a Secret another VirtualServer's Certificate writes only reads it.
    let reader = issued("reader", "2026-01-02T00:00:00Z", false);
    assert_eq!(conflict(&reader, &[first, reader.clone()]), None);
}

#[test]
fn of_two_created_in_the_same_second_the_first_name_keeps_the_names() {
    let at = "2026-01-01T00:00:00Z";
    let a = created("a", "web", at, with_pool("b"));
    let ab = created("a-b", "web", at, plain());
    let peers = [a.clone(), ab.clone()];
    assert_eq!(conflict(&a, &peers), None);
    assert!(conflict(&ab, &peers).is_some());
}

#[test]
fn a_peer_being_deleted_or_refused_for_a_name_keeps_no_name_by_age() {
    let a = created("a", "web", "2026-01-01T00:00:00Z", with_pool("b"));
    let ab = created("a-b", "web", "2026-01-02T00:00:00Z", plain());
    let mut leaving = (*a).clone();
    leaving.metadata.deletion_timestamp =
        Some(serde_json::from_value(json!("2026-01-03T00:00:00Z")).unwrap());
    assert_eq!(
        conflict(&ab, &[std::sync::Arc::new(leaving), ab.clone()]),
        None
    );
    let mut refused = (*a).clone();
    refused.status = Some(
        serde_json::from_value(json!({ "conditions": [{
            "type": "Accepted", "status": "False", "reason": "NameConflict",
            "message": "…", "lastTransitionTime": "2026-01-03T00:00:00Z"
        }] }))
        .unwrap(),
    );
    assert_eq!(
        conflict(&ab, &[std::sync::Arc::new(refused), ab.clone()]),
        None
    );
    assert!(
        conflict(&ab, &[a, ab.clone()]).is_some(),
        "as it is, a keeps its names"
    );
}
