//! Certificates and Secrets: cert-manager Certificates per issuer and host, TLS and
//! htpasswd Secrets mounted as directories, and issuers told apart.

use super::*;
use crate::children::third_party::IssuerSpec;

#[test]
fn certificate_covers_every_host_from_the_issuer() {
    let v = vs(json!({
        "hosts": ["shop.example", "*.shop.example"], "content": { "configMap": "site" },
        "tls": { "issuerRef": { "name": "letsencrypt", "kind": "ClusterIssuer" } }
    }));
    let groups = v.certificate_groups();
    let c = certificate(&v, &groups[0]).unwrap();
    assert_eq!(c.metadata.name.as_deref(), Some("shop"));
    assert_eq!(c.spec.secret_name, "shop-tls");
    assert_eq!(c.spec.dns_names, ["shop.example", "*.shop.example"]);
    assert_eq!(c.spec.issuer_ref.kind.as_deref(), Some("ClusterIssuer"));
    assert_eq!(
        c.metadata.owner_references.unwrap()[0].kind,
        "VirtualServer"
    );
    let json = serde_json::to_value(certificate(&v, &groups[0])).unwrap();
    assert_eq!(json["apiVersion"], "cert-manager.io/v1");
    assert_eq!(json["kind"], "Certificate");
    assert_eq!(json["spec"]["issuerRef"]["group"], "cert-manager.io");
    assert_eq!(json["spec"]["dnsNames"][1], "*.shop.example");
}

/// Hosts with a certificate of their own leave the main one; each issued certificate is a
/// Certificate named like its Secret, and a certificate of the user's is none.
#[test]
fn per_host_certificates_split_the_hosts_and_get_certificates_of_their_own() {
    let v = vs(json!({
        "hosts": ["shop.example", "www.shop.example", "shop.example.org", "legacy.example.net"],
        "content": { "configMap": "site" },
        "tls": {
            "issuerRef": { "name": "le", "kind": "ClusterIssuer" },
            "certificates": [
                { "hosts": ["shop.example.org"], "secretName": "org-tls", "issuerRef": { "name": "org-ca" } },
                { "hosts": ["legacy.example.net"], "secretName": "legacy-tls" }
            ]
        }
    }));
    let groups = v.certificate_groups();
    let summary: Vec<(usize, Vec<&str>, &str)> = groups
        .iter()
        .map(|g| {
            let hosts = g.hosts.iter().map(String::as_str).collect();
            (g.index, hosts, g.secret_name.as_str())
        })
        .collect();
    assert_eq!(
        summary,
        [
            (0, vec!["shop.example", "www.shop.example"], "shop-tls"),
            (1, vec!["shop.example.org"], "org-tls"),
            (2, vec!["legacy.example.net"], "legacy-tls"),
        ]
    );
    let children = Children::new(&v, &render::Rendered::default(), None);
    let certificates: Vec<(&str, &str, &[String], &str)> = children
        .certificates
        .iter()
        .map(|c| {
            (
                c.metadata.name.as_deref().unwrap(),
                c.spec.secret_name.as_str(),
                c.spec.dns_names.as_slice(),
                c.spec.issuer_ref.kind.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        certificates,
        [
            (
                "shop",
                "shop-tls",
                &["shop.example".to_string(), "www.shop.example".to_string()][..],
                "ClusterIssuer"
            ),
            (
                "org-tls",
                "org-tls",
                &["shop.example.org".to_string()][..],
                "Issuer"
            ),
        ],
        "legacy-tls is the user's Secret: no Certificate"
    );
}

/// Each certificate's Secret is a read-only directory mount (never subPath, so the kubelet
/// updates it and the server reloads it), and nothing in the pod template depends on the
/// Secret's content: a renewal rolls no pod.
#[test]
fn tls_secrets_are_mounted_as_directories_and_the_https_port_is_open() {
    let v = vs(json!({
        "hosts": ["shop.example", "shop.example.org"], "content": { "configMap": "site" },
        "tls": { "secretName": "shop-cert", "port": 8443,
                 "certificates": [{ "hosts": ["shop.example.org"], "secretName": "org-cert" }] }
    }));
    let d = deployment(&v);
    let template = &d.spec.as_ref().unwrap().template;
    assert_eq!(
        template.metadata.as_ref().unwrap().annotations,
        None,
        "no checksum annotation: a renewed Secret must not roll the pods"
    );
    let pod = pod_spec(&d);
    let volumes = pod["volumes"].as_array().unwrap();
    let tls: Vec<&Value> = volumes.iter().filter(|v| v["secret"].is_object()).collect();
    // Only the key pair: another key of the Secret (or another Secret's) is not mounted.
    let pair =
        json!([{ "key": "tls.crt", "path": "tls.crt" }, { "key": "tls.key", "path": "tls.key" }]);
    assert_eq!(
        tls,
        [
            &json!({ "name": "tls-0", "secret": { "secretName": "shop-cert", "defaultMode": 0o440, "items": pair } }),
            &json!({ "name": "tls-1", "secret": { "secretName": "org-cert", "defaultMode": 0o440, "items": pair } }),
        ],
        "not optional: a new pod waits for its certificate, so a rename to a Secret not \
         issued yet cannot roll the working one away"
    );
    let skiff = &pod["containers"][0];
    let mounts: Vec<&Value> = skiff["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["name"].as_str().unwrap().starts_with("tls-"))
        .collect();
    assert_eq!(
        mounts,
        [
            &json!({ "name": "tls-0", "mountPath": "/etc/skiff/tls/shop-cert", "readOnly": true }),
            &json!({ "name": "tls-1", "mountPath": "/etc/skiff/tls/org-cert", "readOnly": true }),
        ],
        "directories, no subPath"
    );
    assert_eq!(
        skiff["ports"],
        json!([
            { "name": "http", "containerPort": 8080 },
            { "name": "admin", "containerPort": 9145 },
            { "name": "https", "containerPort": 8443 }
        ])
    );
    let svc = serde_json::to_value(service(&v)).unwrap();
    assert_eq!(
        svc["spec"]["ports"],
        json!([
            { "name": "http", "port": 80, "targetPort": "http", "protocol": "TCP" },
            { "name": "https", "port": 8443, "targetPort": "https", "protocol": "TCP" }
        ])
    );
    let policy = serde_json::to_value(edge_network_policy(&v, &policy_settings())).unwrap();
    assert_eq!(
        policy["spec"]["ingress"][0],
        json!({ "ports": [{ "port": 8080, "protocol": "TCP" }, { "port": 8443, "protocol": "TCP" }] }),
        "HTTPS from anywhere, like HTTP"
    );
}

#[test]
fn without_tls_there_is_no_https_port_and_no_secret_volume() {
    let v = vs(json!({ "hosts": ["shop.example"], "content": { "configMap": "site" } }));
    let pod = pod_spec(&deployment(&v));
    assert!(!pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["name"].as_str().unwrap().starts_with("tls-")));
    assert_eq!(pod["containers"][0]["ports"].as_array().unwrap().len(), 2);
    let svc = service(&v).spec.unwrap();
    assert_eq!(svc.ports.unwrap().len(), 1);
    assert!(Children::new(&v, &render::Rendered::default(), None)
        .certificates
        .is_empty());
}

#[test]
fn an_acme_issuer_with_http01_solvers_only_is_told_apart() {
    let issuer = |solvers: Value| -> IssuerSpec {
        serde_json::from_value(json!({ "acme": {
            "server": "https://acme-v02.api.letsencrypt.org/directory",
            "privateKeySecretRef": { "name": "le-account" },
            "solvers": solvers
        } }))
        .unwrap()
    };
    let http01 = json!({ "http01": { "ingress": { "ingressClassName": "nginx" } } });
    let dns01 = json!({ "dns01": { "cloudflare": { "apiTokenSecretRef": { "name": "cf", "key": "token" } } },
                        "selector": { "dnsZones": ["example.com"] } });
    assert!(issuer(json!([http01])).acme_http01_only());
    assert!(issuer(json!([http01, http01])).acme_http01_only());
    assert!(!issuer(json!([http01, dns01])).acme_http01_only());
    assert!(!issuer(json!([dns01])).acme_http01_only());
    assert!(!issuer(json!([])).acme_http01_only());
    let ca: IssuerSpec = serde_json::from_value(json!({ "ca": { "secretName": "ca" } })).unwrap();
    assert!(!ca.acme_http01_only(), "not ACME");
    let cluster: ClusterIssuer = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
        "metadata": { "name": "le" },
        "spec": { "acme": { "solvers": [http01] } }
    }))
    .unwrap();
    assert!(cluster.spec.issuer.acme_http01_only());
}

#[test]
fn a_certificates_ready_condition_is_read_from_what_cert_manager_returns() {
    let returned: Certificate = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": { "name": "shop" },
        "spec": { "secretName": "shop-tls", "dnsNames": ["a"], "issuerRef": { "name": "x" },
                  "privateKey": { "rotationPolicy": "Always" } },
        "status": { "conditions": [
            { "type": "Issuing", "status": "True" },
            { "type": "Ready", "status": "False", "message": "waiting for approval",
              "lastTransitionTime": "2025-01-01T00:00:00Z" }
        ] }
    }))
    .unwrap();
    let ready = returned.ready_condition().unwrap();
    assert_eq!(ready.status, "False");
    assert_eq!(ready.message.as_deref(), Some("waiting for approval"));
}

#[test]
fn htpasswd_volumes_are_named_by_position_whatever_their_secret_is_called() {
    // A Secret's name may hold dots and run to 253 characters; a volume's may not.
    let long = format!("htpasswd.{}", "a".repeat(200));
    let v = vs(json!({
        "hosts": ["shop.example"],
        "content": { "configMap": "site" },
        "rules": [
            { "match": { "prefix": "/a/" }, "action": { "static": {} }, "basicAuth": { "realm": "A", "secretName": "example.com-htpasswd" } },
            { "match": { "prefix": "/b/" }, "action": { "static": {} }, "basicAuth": { "realm": "B", "secretName": long } },
            { "match": { "prefix": "/c/" }, "action": { "static": {} }, "basicAuth": { "realm": "C", "secretName": "example.com-htpasswd" } }
        ]
    }));
    let pod = pod_spec(&deployment(&v));
    let auth: Vec<(String, String)> = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["name"].as_str().unwrap().starts_with("auth-"))
        .map(|v| {
            (
                v["name"].as_str().unwrap().to_owned(),
                v["secret"]["secretName"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for v in pod["volumes"].as_array().unwrap() {
        if v["name"].as_str().unwrap().starts_with("auth-") {
            assert_eq!(
                v["secret"]["items"],
                json!([{ "key": "htpasswd", "path": "htpasswd" }]),
                "only the htpasswd key"
            );
            assert_eq!(
                v["secret"]["optional"],
                json!(true),
                "a missing Secret keeps no pod from starting; the rule denies meanwhile"
            );
        }
    }
    assert_eq!(
        auth,
        [
            ("auth-0".to_owned(), "example.com-htpasswd".to_owned()),
            ("auth-1".to_owned(), long.clone())
        ]
    );
    // Mounted where the config looks for each Secret's file.
    let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
    assert!(
        mounts
            .iter()
            .any(|m| m["name"] == "auth-1"
                && m["mountPath"] == format!("{}/{long}", render::AUTH_DIR))
    );
}

#[test]
fn children_hold_a_certificate_only_for_an_issuer() {
    let rendered = render::Rendered {
        yaml: "{}".into(),
        hash: "h".into(),
        ..Default::default()
    };
    let with_secret = vs(json!({
        "hosts": ["a"], "content": { "configMap": "s" }, "tls": { "secretName": "mine" }
    }));
    assert!(Children::new(&with_secret, &rendered, None)
        .certificates
        .is_empty());
    let with_issuer = vs(json!({
        "hosts": ["a"], "content": { "configMap": "s" }, "tls": { "issuerRef": { "name": "le" } }
    }));
    let children = Children::new(&with_issuer, &rendered, None);
    assert_eq!(children.certificates.len(), 1);
    assert_eq!(
        children.certificates[0].spec.issuer_ref.kind.as_deref(),
        Some("Issuer")
    );
    assert_eq!(children.config_map.data.unwrap()[render::CONFIG_FILE], "{}");
}
