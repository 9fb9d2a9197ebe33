//! The edge and pool workloads: Deployments, Services, budgets, autoscalers, drains, the
//! upload folder, image content and what rolls the pods.

use super::*;

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
    // The kubelet's kill comes after the server's whole drain (delay, then grace, then the
    // logs written), so the lines of responses cut at the grace period's end are kept.
    let args: Vec<&str> = skiff["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let seconds = |flag: &str| -> i64 {
        let at = args.iter().position(|a| *a == flag).unwrap();
        args[at + 1].trim_end_matches('s').parse().unwrap()
    };
    let drain = seconds("--shutdown-delay") + seconds("--shutdown-grace");
    assert!(pod["terminationGracePeriodSeconds"].as_i64().unwrap() >= drain + 2);
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
    // No API token, RuntimeDefault seccomp, no privilege escalation; the image's own user.
    let pod = pod_spec(&d);
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    assert_eq!(
        pod["containers"][0]["securityContext"]["allowPrivilegeEscalation"],
        false
    );
}

/// The HPA's metrics, as JSON.
fn hpa_metrics(
    hpa: Option<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>,
) -> Vec<Value> {
    serde_json::to_value(hpa.expect("an HPA")).unwrap()["spec"]["metrics"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn a_pool_with_known_workers_scales_on_its_busy_ratio_and_cpu_only_when_named() {
    let v = vs(json!({
        "hosts": ["shop.example"], "content": { "configMap": "site" },
        "pools": [
            { "name": "php", "protocol": "fastcgi", "image": "php-fpm:8", "workers": 2,
              "autoscaling": { "minReplicas": 1, "maxReplicas": 5,
                "behavior": { "scaleDown": { "stabilizationWindowSeconds": 30 } } } },
            { "name": "both", "protocol": "fastcgi", "image": "php-fpm:8", "workers": 4,
              "autoscaling": { "minReplicas": 1, "maxReplicas": 5, "targetBusyRatio": 0.5,
                "targetCpuUtilization": 80 } },
            { "name": "cpu", "protocol": "fastcgi", "image": "php-fpm:8",
              "autoscaling": { "minReplicas": 1, "maxReplicas": 5 } },
            { "name": "wsgi", "protocol": "uwsgi", "image": "uwsgi:2",
              "args": ["--socket", ":9000", "--processes", "3"],
              "autoscaling": { "minReplicas": 1, "maxReplicas": 5 } }
        ]
    }));
    let pools: Vec<_> = pooled(&v).collect();
    let php = pool_autoscaler(&v, pools[0]);
    let behavior = serde_json::to_value(&php).unwrap()["spec"]["behavior"].clone();
    assert_eq!(behavior["scaleDown"]["stabilizationWindowSeconds"], 30);
    let m = hpa_metrics(php);
    assert_eq!(m.len(), 1, "busy ratio only: {m:?}");
    assert_eq!(m[0]["type"], "External");
    assert_eq!(m[0]["external"]["metric"]["name"], "skiff_pool_busy_ratio");
    assert_eq!(
        m[0]["external"]["metric"]["selector"]["matchLabels"],
        json!({ "virtualserver": "shop", "pool": "php" })
    );
    assert_eq!(
        m[0]["external"]["target"],
        json!({ "type": "Value", "value": "700m" })
    );
    let m = hpa_metrics(pool_autoscaler(&v, pools[1]));
    assert_eq!(m[0]["external"]["target"]["value"], "500m");
    assert_eq!(m[1]["resource"]["target"]["averageUtilization"], 80);
    let m = hpa_metrics(pool_autoscaler(&v, pools[2]));
    assert_eq!(m.len(), 1, "no workers known: CPU at 70 %");
    assert_eq!(m[0]["resource"]["target"]["averageUtilization"], 70);
    assert_eq!(pools[3].known_workers(), Some(3), "uWSGI's --processes");
    assert_eq!(
        hpa_metrics(pool_autoscaler(&v, pools[3]))[0]["type"],
        "External"
    );
}

#[test]
fn the_edge_farm_scales_on_cpu_requests_per_second_and_its_sidecars_busy_ratio() {
    let v = vs(json!({
        "hosts": ["blog.example"], "content": { "configMap": "site" },
        "autoscaling": { "minReplicas": 2, "maxReplicas": 8, "targetRequestsPerSecond": 500 },
        "pools": [
            { "name": "django", "protocol": "uwsgi", "image": "uwsgi:2", "placement": "sidecar",
              "socket": "django.sock", "args": ["--processes=4"] },
            { "name": "unknown", "protocol": "uwsgi", "image": "uwsgi:2", "placement": "sidecar",
              "socket": "other.sock" }
        ]
    }));
    let m = hpa_metrics(autoscaler(&v));
    assert_eq!(m.len(), 3, "{m:?}");
    assert_eq!(m[0]["resource"]["target"]["averageUtilization"], 70);
    assert_eq!(
        m[1]["pods"]["metric"]["name"],
        "skiff_http_requests_per_second"
    );
    assert_eq!(
        m[1]["pods"]["target"],
        json!({ "type": "AverageValue", "averageValue": "500" })
    );
    // Each edge pod's sidecar has its own workers: the sidecar ratio sums them.
    assert_eq!(
        m[2]["external"]["metric"]["name"],
        "skiff_sidecar_busy_ratio"
    );
    assert_eq!(
        m[2]["external"]["metric"]["selector"]["matchLabels"]["pool"],
        "django"
    );
}

#[test]
fn pool_pods_drain_before_their_stop_signal() {
    let v = vs(json!({
        "hosts": ["shop.example"], "content": { "configMap": "site" },
        "pools": [{ "name": "php", "protocol": "fastcgi", "image": "php-fpm:8" }]
    }));
    let d = pool_deployment(&v, pooled(&v).next().unwrap());
    let spec = pod_spec(&d);
    let sleep = spec["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_i64()
        .unwrap();
    // Longer than CoreDNS's cache and the edge's re-resolution (5 s each).
    assert!(sleep > 10, "{sleep}");
    assert!(spec["terminationGracePeriodSeconds"].as_i64().unwrap() > sleep);
}

/// A CGI pool's uploads are buffered in files under /tmp before a worker is taken: the
/// edge gets a writable, size-limited /tmp (its root is read-only). An HTTP pool streams
/// uploads and gets none.
#[test]
fn a_cgi_pool_gives_the_edge_a_writable_tmp_for_uploads() {
    let with_pool = |protocol: &str| {
        let v = vs(json!({
            "hosts": ["shop.example"], "content": { "configMap": "site" },
            "pools": [{ "name": "app", "protocol": protocol, "endpoints": ["app:9000"] }]
        }));
        pod_spec(&deployment(&v))
    };
    let pod = with_pool("fastcgi");
    let tmp = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "tmp");
    assert_eq!(tmp.unwrap()["emptyDir"]["sizeLimit"], "2Gi");
    let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
    let mount = mounts.iter().find(|m| m["name"] == "tmp").unwrap();
    assert_eq!(mount["mountPath"], "/tmp");
    assert_ne!(mount["readOnly"], true);
    let pod = with_pool("http");
    assert!(!pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["name"] == "tmp"));
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
    let sidecar = &pod["containers"][1]["securityContext"];
    assert_eq!(sidecar["allowPrivilegeEscalation"], false);
    assert_eq!(sidecar["capabilities"]["drop"][0], "ALL");
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
fn a_change_only_a_restart_applies_rolls_the_pods_and_a_rule_change_does_not() {
    let template = |spec: Value| {
        let v = vs(spec);
        let rendered = render::server_config(&v).unwrap();
        let d = Children::new(&v, &rendered, None).deployment;
        serde_json::to_value(&d.spec.unwrap().template.metadata).unwrap()["annotations"]
            [RESTART_HASH_ANNOTATION]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let base = json!({ "hosts": ["a.example"], "content": { "configMap": "site" } });
    let mut rules = base.clone();
    rules["rules"] =
        json!([{ "match": { "prefix": "/x/" }, "action": { "deny": { "status": 403 } } }]);
    let mut cache = base.clone();
    cache["cache"] = json!({ "maxBytes": 1000000 });
    let mut log = base.clone();
    log["logFormat"] = json!("json");
    assert_eq!(
        template(base.clone()),
        template(rules),
        "a reload applies rules"
    );
    assert_ne!(
        template(base.clone()),
        template(cache),
        "the cache needs a restart"
    );
    assert_ne!(
        template(base),
        template(log),
        "the access log needs a restart"
    );
}
