use super::names::{claims, conflict};
use super::third_party::IssuerSpec;
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

fn policy_settings() -> NetworkPolicyConfig {
    NetworkPolicyConfig {
        operator_namespace: "skiff-system".into(),
        operator_labels: parse_labels(&[
            "app.kubernetes.io/name=skiff-operator".into(),
            "app.kubernetes.io/instance=skiff".into(),
        ])
        .unwrap(),
        metrics_namespaces: vec!["monitoring".into(), "prometheus".into()],
        metrics_namespace_labels: parse_labels(&["team=observability".into()]).unwrap(),
    }
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
