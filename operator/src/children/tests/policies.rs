//! NetworkPolicies, the ServiceMonitor and the labels the operator is given.

use super::*;

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
        json!([{
            "port": "admin", "path": "/metrics", "interval": "30s",
            "relabelings": [{
                "sourceLabels": ["__meta_kubernetes_service_label_app_kubernetes_io_instance"],
                "targetLabel": "virtualserver",
                "action": "replace"
            }]
        }]),
        "every edge series is labelled with its VirtualServer's name"
    );
}

#[test]
fn the_edge_policy_opens_the_data_port_to_all_and_the_admin_port_to_the_operator_and_metrics() {
    let v = vs(json!({ "hosts": ["shop.example"], "content": { "configMap": "site" } }));
    let policy = edge_network_policy(&v, &policy_settings());
    assert_eq!(policy.metadata.name.as_deref(), Some("shop"));
    assert_eq!(policy.metadata.namespace.as_deref(), Some("web"));
    assert_eq!(
        policy.metadata.owner_references.as_ref().unwrap()[0].kind,
        "VirtualServer",
        "deleted with its VirtualServer"
    );
    let json = serde_json::to_value(&policy).unwrap();
    assert_eq!(json["apiVersion"], "networking.k8s.io/v1");
    assert_eq!(json["kind"], "NetworkPolicy");
    let spec = &json["spec"];
    assert_eq!(
        spec["podSelector"],
        json!({ "matchLabels": { "app.kubernetes.io/name": "skiff", "app.kubernetes.io/instance": "shop" } }),
        "the edge pods, not the pool backends"
    );
    assert_eq!(spec["policyTypes"], json!(["Ingress"]));
    assert_eq!(
        spec["ingress"][0],
        json!({ "ports": [{ "port": 8080, "protocol": "TCP" }] }),
        "no `from`: the data port takes every source"
    );
    assert_eq!(
        spec["ingress"][1],
        json!({
            "ports": [{ "port": 9145, "protocol": "TCP" }],
            "from": [
                {
                    "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": "skiff-system" } },
                    "podSelector": { "matchLabels": {
                        "app.kubernetes.io/instance": "skiff", "app.kubernetes.io/name": "skiff-operator"
                    } }
                },
                { "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": "monitoring" } } },
                { "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": "prometheus" } } },
                { "namespaceSelector": { "matchLabels": { "team": "observability" } } }
            ]
        })
    );
    assert_eq!(spec["ingress"].as_array().unwrap().len(), 2);
}

#[test]
fn the_admin_port_is_only_the_operators_without_metrics_namespaces() {
    let v = vs(json!({ "hosts": ["shop.example"], "content": { "configMap": "site" } }));
    let settings = NetworkPolicyConfig {
        metrics_namespaces: vec![],
        metrics_namespace_labels: BTreeMap::new(),
        ..policy_settings()
    };
    let json = serde_json::to_value(edge_network_policy(&v, &settings)).unwrap();
    let from = json["spec"]["ingress"][1]["from"].as_array().unwrap();
    assert_eq!(
        from.len(),
        1,
        "an empty namespace selector would admit every namespace: {from:?}"
    );
    assert!(from[0]["podSelector"]["matchLabels"].is_object());
}

#[test]
fn a_pool_policy_admits_only_its_virtual_servers_edge_pods_on_the_backend_port() {
    let v = vs(json!({
        "hosts": ["shop.example"], "content": { "configMap": "site" },
        "pools": [
            { "name": "php", "protocol": "fastcgi", "image": "php-fpm:8", "port": 9001 },
            { "name": "app", "protocol": "uwsgi", "image": "django:1" }
        ]
    }));
    let pools: Vec<_> = pooled(&v).collect();
    let json = serde_json::to_value(pool_network_policy(&v, pools[0])).unwrap();
    assert_eq!(json["metadata"]["name"], "shop-php");
    assert_eq!(json["metadata"]["labels"][POOL_LABEL], "php");
    assert_eq!(
        json["spec"]["podSelector"]["matchLabels"],
        json!({ "app.kubernetes.io/name": "skiff-pool", "app.kubernetes.io/instance": "shop", POOL_LABEL: "php" })
    );
    assert_eq!(json["spec"]["policyTypes"], json!(["Ingress"]));
    assert_eq!(
        json["spec"]["ingress"],
        json!([{
            "ports": [{ "port": 9001, "protocol": "TCP" }],
            "from": [{ "podSelector": { "matchLabels": {
                "app.kubernetes.io/name": "skiff", "app.kubernetes.io/instance": "shop"
            } } }]
        }]),
        "a podSelector alone: edge pods of this namespace only"
    );
    let json = serde_json::to_value(pool_network_policy(&v, pools[1])).unwrap();
    assert_eq!(
        json["spec"]["ingress"][0]["ports"][0]["port"], 9000,
        "the default backend port"
    );
}

#[test]
fn children_carry_network_policies_only_when_the_operator_makes_them() {
    let v = vs(json!({
        "hosts": ["shop.example"], "content": { "configMap": "site" },
        "pools": [{ "name": "php", "protocol": "fastcgi", "image": "php-fpm:8" }]
    }));
    let rendered = render::Rendered::default();
    let off = Children::new(&v, &rendered, None);
    assert!(off.network_policy.is_none());
    assert!(off.pools[0].network_policy.is_none());
    let on = Children::new(&v, &rendered, Some(&policy_settings()));
    assert_eq!(
        on.network_policy.unwrap().metadata.name.as_deref(),
        Some("shop")
    );
    assert_eq!(
        on.pools[0]
            .network_policy
            .as_ref()
            .unwrap()
            .metadata
            .name
            .as_deref(),
        Some("shop-php")
    );
}

#[test]
fn labels_are_read_from_key_value_lists() {
    assert_eq!(
        parse_labels(&["a=1".into(), " b.io/c=x ".into(), "".into()]).unwrap(),
        BTreeMap::from([("a".into(), "1".into()), ("b.io/c".into(), "x".into())])
    );
    assert!(parse_labels(&["novalue".into()]).is_err());
    assert!(parse_labels(&["=x".into()]).is_err());
}

#[test]
fn the_service_monitor_carries_the_prometheus_selectors_labels_but_keeps_its_own() {
    let v = vs(json!({ "hosts": ["shop.example"], "content": { "configMap": "site" } }));
    let rendered = render::server_config(&v).unwrap();
    let mut c = Children::new(&v, &rendered, None);
    let extra = parse_labels(&[
        "release=kps".into(),
        "app.kubernetes.io/managed-by=someone-else".into(),
    ])
    .unwrap();
    c.label_service_monitor(&extra);
    let labels = c.service_monitor.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["release"], "kps");
    assert_eq!(labels["app.kubernetes.io/managed-by"], "skiff-operator");
    assert_eq!(
        c.deployment
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .get("release"),
        None,
        "only the ServiceMonitor"
    );
}
