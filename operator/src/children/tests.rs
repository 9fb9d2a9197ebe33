use super::*;
use crate::render;
use serde_json::{json, Value};

fn vs(spec: Value) -> VirtualServer {
    serde_json::from_value(json!({
        "apiVersion": "skiff.dev/v1alpha1", "kind": "VirtualServer",
        "metadata": { "name": "shop", "namespace": "web", "uid": "0c1e-uid" },
        "spec": spec,
    }))
    .unwrap()
}

fn pod_spec(d: &Deployment) -> Value {
    serde_json::to_value(d.spec.as_ref().unwrap().template.spec.as_ref().unwrap()).unwrap()
}

#[test]
fn edge_deployment_is_locked_down_probed_and_rolls_without_unavailability() {
    let v = vs(json!({ "hosts": ["shop.example"], "content": { "configMap": "site" } }));
    let d = deployment(&v);
    let spec = d.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(2));
    let strategy = serde_json::to_value(&spec.strategy).unwrap();
    assert_eq!(strategy["rollingUpdate"]["maxUnavailable"], 0);
    let pod = pod_spec(&d);
    let skiff = &pod["containers"][0];
    assert_eq!(skiff["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(skiff["securityContext"]["capabilities"]["drop"][0], "ALL");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    assert_eq!(skiff["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(skiff["readinessProbe"]["httpGet"]["port"], "admin");
    assert!(
        skiff["resources"]["requests"]["cpu"].is_string(),
        "requests let the HPA work"
    );
    // The config is a directory mount (no subPath), so the kubelet updates it in place.
    let config_mount = skiff["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "config")
        .unwrap();
    assert!(config_mount.get("subPath").is_none());
    assert_eq!(
        d.metadata.owner_references.as_ref().unwrap()[0].kind,
        "VirtualServer"
    );
    assert_eq!(
        d.metadata.owner_references.as_ref().unwrap()[0].controller,
        Some(true)
    );
    assert_eq!(
        d.metadata.labels.as_ref().unwrap()["app.kubernetes.io/managed-by"],
        "skiff-operator",
        "the controller watches its children by this label"
    );
}

#[test]
fn the_edge_service_and_budget_select_the_edge_pods() {
    let v = vs(json!({
        "hosts": ["shop.example"], "content": { "configMap": "site" },
        "service": { "type": "LoadBalancer", "port": 8088 }
    }));
    let svc = service(&v).spec.unwrap();
    assert_eq!(svc.type_.as_deref(), Some("LoadBalancer"));
    assert_eq!(svc.selector, Some(selector_labels(&v)));
    let port = &svc.ports.unwrap()[0];
    assert_eq!(port.port, 8088);
    assert_eq!(
        serde_json::to_value(&port.target_port).unwrap(),
        "http",
        "the named container port"
    );
    let pdb = disruption_budget(&v).spec.unwrap();
    assert_eq!(serde_json::to_value(&pdb.max_unavailable).unwrap(), 1);
    assert_eq!(
        pdb.selector.unwrap().match_labels,
        Some(selector_labels(&v))
    );
    let metrics = metrics_service(&v);
    assert_eq!(metrics.metadata.name.as_deref(), Some("shop-metrics"));
    assert_eq!(
        metrics.metadata.labels.unwrap()["skiff.dev/metrics"],
        "true",
        "the ServiceMonitor selects it by this label"
    );
}

#[test]
fn autoscaled_deployment_leaves_replicas_to_the_hpa() {
    let v = vs(json!({
        "hosts": ["shop.example"], "content": { "configMap": "site" },
        "autoscaling": { "minReplicas": 2, "maxReplicas": 6, "targetCpuUtilization": 60 }
    }));
    assert_eq!(deployment(&v).spec.unwrap().replicas, None);
    let hpa = serde_json::to_value(autoscaler(&v).unwrap()).unwrap();
    assert_eq!(hpa["apiVersion"], "autoscaling/v2");
    assert_eq!(hpa["spec"]["maxReplicas"], 6);
    assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], "shop");
    assert_eq!(
        hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        60
    );
}

#[test]
fn pool_placement_gets_its_own_deployment_headless_service_and_hpa() {
    let v = vs(json!({
        "hosts": ["shop.example"], "content": { "configMap": "site" },
        "pools": [
            { "name": "php", "protocol": "fastcgi", "image": "php-fpm:8", "port": 9000,
              "autoscaling": { "minReplicas": 1, "maxReplicas": 5 } },
            { "name": "ext", "protocol": "http", "endpoints": ["api.other:80"] }
        ]
    }));
    let pools: Vec<_> = pooled(&v).collect();
    assert_eq!(pools.len(), 1, "a pool without an image runs nothing");
    let d = pool_deployment(&v, pools[0]);
    assert_eq!(d.metadata.name.as_deref(), Some("shop-php"));
    assert_eq!(
        d.spec.as_ref().unwrap().replicas,
        None,
        "the HPA owns the count"
    );
    let labels = d
        .spec
        .as_ref()
        .unwrap()
        .selector
        .match_labels
        .clone()
        .unwrap();
    assert_eq!(
        labels["app.kubernetes.io/name"], "skiff-pool",
        "the edge Service must not select backends"
    );
    assert_eq!(d.metadata.labels.as_ref().unwrap()[POOL_LABEL], "php");
    let svc = pool_service(&v, pools[0]);
    assert_eq!(
        svc.spec.as_ref().unwrap().cluster_ip.as_deref(),
        Some("None")
    );
    let hpa = pool_autoscaler(&v, pools[0]).unwrap();
    assert_eq!(hpa.spec.unwrap().scale_target_ref.name, "shop-php");
}

#[test]
fn certificate_covers_every_host_from_the_issuer() {
    let v = vs(json!({
        "hosts": ["shop.example", "*.shop.example"], "content": { "configMap": "site" },
        "tls": { "issuerRef": { "name": "letsencrypt", "kind": "ClusterIssuer" } }
    }));
    let c = certificate(&v);
    assert_eq!(c.spec.secret_name, "shop-tls");
    assert_eq!(c.spec.dns_names, ["shop.example", "*.shop.example"]);
    assert_eq!(c.spec.issuer_ref.kind.as_deref(), Some("ClusterIssuer"));
    assert_eq!(
        c.metadata.owner_references.unwrap()[0].kind,
        "VirtualServer"
    );
    let json = serde_json::to_value(certificate(&v)).unwrap();
    assert_eq!(json["apiVersion"], "cert-manager.io/v1");
    assert_eq!(json["kind"], "Certificate");
    assert_eq!(json["spec"]["issuerRef"]["group"], "cert-manager.io");
    assert_eq!(json["spec"]["dnsNames"][1], "*.shop.example");
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
fn the_service_monitor_scrapes_the_metrics_service() {
    let v = vs(json!({ "hosts": ["shop.example"], "content": { "configMap": "site" } }));
    let sm = serde_json::to_value(service_monitor(&v)).unwrap();
    assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(sm["kind"], "ServiceMonitor");
    assert_eq!(
        sm["spec"]["selector"]["matchLabels"],
        json!({ "app.kubernetes.io/instance": "shop", "skiff.dev/metrics": "true" })
    );
    assert_eq!(
        sm["spec"]["endpoints"],
        json!([{ "port": "admin", "path": "/metrics", "interval": "30s" }])
    );
}

#[test]
fn image_content_is_copied_by_init_containers_and_sidecars_share_a_socket_dir() {
    let v = vs(json!({
        "hosts": ["shop.example"],
        "content": { "image": { "reference": "registry.local/site:3", "path": "/public" } },
        "pools": [{ "name": "app", "protocol": "uwsgi", "image": "django:1", "socket": "app.sock", "placement": "sidecar" }],
        "rules": [{ "match": { "prefix": "/admin/" }, "action": { "static": {} }, "basicAuth": { "realm": "A", "secretName": "admins" } }]
    }));
    let pod = pod_spec(&deployment(&v));
    assert_eq!(pod["initContainers"][1]["image"], "registry.local/site:3");
    assert_eq!(pod["initContainers"][1]["command"][2], "/public");
    assert_eq!(pod["containers"][1]["name"], "pool-app");
    assert_eq!(
        pod["containers"][1]["volumeMounts"][0]["mountPath"],
        render::SOCKET_DIR
    );
    let volumes = pod["volumes"].as_array().unwrap();
    assert!(volumes
        .iter()
        .any(|v| v["secret"]["secretName"] == "admins"));
}

#[test]
fn children_hold_a_certificate_only_for_an_issuer() {
    let rendered = render::Rendered {
        yaml: "{}".into(),
        hash: "h".into(),
    };
    let with_secret = vs(json!({
        "hosts": ["a"], "content": { "configMap": "s" }, "tls": { "secretName": "mine" }
    }));
    assert!(Children::new(&with_secret, &rendered).certificate.is_none());
    let with_issuer = vs(json!({
        "hosts": ["a"], "content": { "configMap": "s" }, "tls": { "issuerRef": { "name": "le" } }
    }));
    let children = Children::new(&with_issuer, &rendered);
    assert_eq!(
        children
            .certificate
            .unwrap()
            .spec
            .issuer_ref
            .kind
            .as_deref(),
        Some("Issuer")
    );
    assert_eq!(children.config_map.data.unwrap()[render::CONFIG_FILE], "{}");
}
