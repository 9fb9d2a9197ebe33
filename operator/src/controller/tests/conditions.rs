//! The status computed from observed state alone: pools, TLS Secrets, served certificates.

use super::*;

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
