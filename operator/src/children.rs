//! The objects a VirtualServer owns, built as pure functions of its spec and rendered
//! config: the config ConfigMap, the edge Deployment, its Service, HPA and
//! PodDisruptionBudget. The controller server-side applies them with one field manager.

use crate::crd::{Placement, VirtualServer};
use crate::render::{self, Rendered};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::{Resource, ResourceExt};
use serde_json::{json, Value};

/// The operator's default edge image.
pub const DEFAULT_IMAGE: &str = "localhost/skiff/skiff:dev";
/// Seconds the edge keeps listening after SIGTERM while its endpoint is removed.
const SHUTDOWN_DELAY_SECONDS: i64 = 5;

/// Labels on every child, and the edge pods' selector.
pub fn selector_labels(vs: &VirtualServer) -> Value {
    json!({ "app.kubernetes.io/name": "skiff", "app.kubernetes.io/instance": vs.name_any() })
}

/// `key=value,...` for the scale subresource's status.selector.
pub fn selector_string(vs: &VirtualServer) -> String {
    format!(
        "app.kubernetes.io/name=skiff,app.kubernetes.io/instance={}",
        vs.name_any()
    )
}

fn metadata(vs: &VirtualServer, name: &str) -> Value {
    let owner = vs
        .controller_owner_ref(&())
        .expect("a VirtualServer from the API has a uid");
    let mut labels = selector_labels(vs);
    labels["app.kubernetes.io/managed-by"] = "skiff-operator".into();
    json!({
        "name": name,
        "namespace": vs.namespace(),
        "labels": labels,
        "ownerReferences": [owner],
    })
}

pub fn config_map_name(vs: &VirtualServer) -> String {
    format!("{}-config", vs.name_any())
}

pub fn config_map(vs: &VirtualServer, rendered: &Rendered) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": metadata(vs, &config_map_name(vs)),
        "data": { render::CONFIG_FILE: rendered.yaml },
    }))
    .expect("valid ConfigMap")
}

/// The edge Deployment. A config-only change does not touch the pod template: the pods
/// hot-reload the mounted ConfigMap (mounted as a directory, never subPath, so the kubelet
/// updates it). Changes to the template roll pod by pod with maxUnavailable 0.
pub fn deployment(vs: &VirtualServer) -> Deployment {
    let spec = &vs.spec;
    let name = vs.name_any();
    let mut volumes =
        vec![json!({ "name": "config", "configMap": { "name": config_map_name(vs) } })];
    let mut mounts = vec![
        json!({ "name": "config", "mountPath": render::CONFIG_DIR, "readOnly": true }),
        json!({ "name": "site", "mountPath": render::SITE_ROOT, "readOnly": true }),
    ];
    let mut init_containers = vec![];
    match (&spec.content.config_map, &spec.content.persistent_volume_claim, &spec.content.image) {
        (Some(cm), _, _) => volumes.push(json!({ "name": "site", "configMap": { "name": cm } })),
        (_, Some(claim), _) => volumes.push(
            json!({ "name": "site", "persistentVolumeClaim": { "claimName": claim, "readOnly": true } }),
        ),
        (_, _, Some(image)) => {
            volumes.push(json!({ "name": "site", "emptyDir": {} }));
            // The content image needs no shell: the skiff binary from the edge image
            // copies the tree (`skiff copy-tree`), run from a shared emptyDir.
            volumes.push(json!({ "name": "tools", "emptyDir": {} }));
            init_containers.push(json!({
                "name": "skiff-tools",
                "image": spec.image.as_deref().unwrap_or(DEFAULT_IMAGE),
                "command": ["/skiff", "copy-tree", "/skiff", "/tools/skiff"],
                "volumeMounts": [{ "name": "tools", "mountPath": "/tools" }],
                "securityContext": container_security(),
            }));
            init_containers.push(json!({
                "name": "content",
                "image": image.reference,
                "command": ["/tools/skiff", "copy-tree", image.path, "/site"],
                "volumeMounts": [{ "name": "tools", "mountPath": "/tools", "readOnly": true },
                                 { "name": "site", "mountPath": "/site" }],
                "securityContext": container_security(),
            }));
        }
        (None, None, None) => {}
    }
    let mut containers = vec![];
    let sidecars: Vec<_> = spec
        .pools
        .iter()
        .filter(|p| p.placement == Placement::Sidecar && p.image.is_some())
        .collect();
    if !sidecars.is_empty() {
        volumes.push(json!({ "name": "pool-sockets", "emptyDir": {} }));
        mounts.push(json!({ "name": "pool-sockets", "mountPath": render::SOCKET_DIR }));
    }
    for rule in &spec.rules {
        if let Some(auth) = &rule.basic_auth {
            let volume = format!("auth-{}", auth.secret_name);
            if !volumes.iter().any(|v| v["name"] == volume.as_str()) {
                volumes
                    .push(json!({ "name": volume, "secret": { "secretName": auth.secret_name } }));
                mounts.push(json!({
                    "name": volume,
                    "mountPath": format!("{}/{}", render::AUTH_DIR, auth.secret_name),
                    "readOnly": true
                }));
            }
        }
    }
    let resources = spec
        .resources
        .clone()
        .map(|r| serde_json::to_value(r).unwrap())
        .unwrap_or(json!({
            "requests": { "cpu": "100m", "memory": "64Mi" },
            "limits": { "memory": "256Mi" },
        }));
    containers.push(json!({
        "name": "skiff",
        "image": spec.image.as_deref().unwrap_or(DEFAULT_IMAGE),
        "args": ["run", "--config", format!("{}/{}", render::CONFIG_DIR, render::CONFIG_FILE),
                 "--shutdown-delay", format!("{SHUTDOWN_DELAY_SECONDS}s")],
        "ports": [
            { "name": "http", "containerPort": render::HTTP_PORT },
            { "name": "admin", "containerPort": render::ADMIN_PORT },
        ],
        "readinessProbe": { "httpGet": { "path": "/readyz", "port": "admin" }, "periodSeconds": 2, "failureThreshold": 1 },
        "livenessProbe": { "httpGet": { "path": "/healthz", "port": "admin" }, "periodSeconds": 10, "failureThreshold": 3 },
        "resources": resources,
        "securityContext": container_security(),
        "volumeMounts": mounts,
    }));
    for p in sidecars {
        let mut c = json!({
            "name": format!("pool-{}", p.name),
            "image": p.image,
            "env": p.env.iter().map(|(k, v)| json!({ "name": k, "value": v })).collect::<Vec<_>>(),
            "volumeMounts": [{ "name": "pool-sockets", "mountPath": render::SOCKET_DIR }],
        });
        if !p.command.is_empty() {
            c["command"] = json!(p.command);
        }
        if !p.args.is_empty() {
            c["args"] = json!(p.args);
        }
        if let Some(r) = &p.resources {
            c["resources"] = serde_json::to_value(r).unwrap();
        }
        containers.push(c);
    }
    let mut deployment = json!({
        "metadata": metadata(vs, &name),
        "spec": {
            "selector": { "matchLabels": selector_labels(vs) },
            "strategy": { "type": "RollingUpdate", "rollingUpdate": { "maxUnavailable": 0, "maxSurge": 1 } },
            "template": {
                "metadata": { "labels": selector_labels(vs) },
                "spec": {
                    "terminationGracePeriodSeconds": SHUTDOWN_DELAY_SECONDS + 30,
                    "automountServiceAccountToken": false,
                    "enableServiceLinks": false,
                    "securityContext": {
                        "runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
                        "seccompProfile": { "type": "RuntimeDefault" }
                    },
                    "initContainers": init_containers,
                    "containers": containers,
                    "volumes": volumes,
                }
            }
        }
    });
    // With an HPA the replica count is the HPA's: leaving it out of the applied object
    // keeps the operator from fighting it.
    if spec.autoscaling.is_none() {
        deployment["spec"]["replicas"] = json!(spec.replicas.unwrap_or(2));
    }
    serde_json::from_value(deployment).expect("valid Deployment")
}

fn container_security() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "capabilities": { "drop": ["ALL"] },
    })
}

pub fn service(vs: &VirtualServer) -> Service {
    let ports = vs.spec.service.clone();
    let (type_, port) = ports.map_or(("ClusterIP".to_string(), 80), |s| (s.type_, s.port));
    serde_json::from_value(json!({
        "metadata": metadata(vs, &vs.name_any()),
        "spec": {
            "type": type_,
            "selector": selector_labels(vs),
            "ports": [{ "name": "http", "port": port, "targetPort": "http", "protocol": "TCP" }],
        }
    }))
    .expect("valid Service")
}

/// The edge HPA, when autoscaling is on.
pub fn autoscaler(vs: &VirtualServer) -> Option<HorizontalPodAutoscaler> {
    let a = vs.spec.autoscaling.as_ref()?;
    Some(
        serde_json::from_value(json!({
            "metadata": metadata(vs, &vs.name_any()),
            "spec": {
                "scaleTargetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": vs.name_any() },
                "minReplicas": a.min_replicas,
                "maxReplicas": a.max_replicas,
                "metrics": [{ "type": "Resource", "resource": { "name": "cpu",
                    "target": { "type": "Utilization", "averageUtilization": a.target_cpu_utilization } } }],
            }
        }))
        .expect("valid HPA"),
    )
}

/// Keeps one edge pod serving through voluntary disruptions (node drains).
pub fn disruption_budget(vs: &VirtualServer) -> PodDisruptionBudget {
    serde_json::from_value(json!({
        "metadata": metadata(vs, &vs.name_any()),
        "spec": { "maxUnavailable": 1, "selector": { "matchLabels": selector_labels(vs) } },
    }))
    .expect("valid PDB")
}

/// Labels of a `placement: pool` backend's pods (distinct from the edge pods', so the edge
/// Service never selects them).
pub fn pool_labels(vs: &VirtualServer, pool: &str) -> Value {
    json!({
        "app.kubernetes.io/name": "skiff-pool",
        "app.kubernetes.io/instance": vs.name_any(),
        "skiff.dev/pool": pool,
    })
}

fn pool_metadata(vs: &VirtualServer, pool: &str) -> Value {
    let mut meta = metadata(vs, &render::pool_workload_name(&vs.name_any(), pool));
    meta["labels"]["skiff.dev/pool"] = pool.into();
    meta
}

/// The pools that run as their own workload: `placement: pool` with an image.
pub fn pooled(vs: &VirtualServer) -> impl Iterator<Item = &crate::crd::Pool> {
    vs.spec
        .pools
        .iter()
        .filter(|p| p.placement == Placement::Pool && p.image.is_some())
}

/// A `placement: pool` backend's Deployment.
pub fn pool_deployment(vs: &VirtualServer, p: &crate::crd::Pool) -> Deployment {
    let port = p.port.unwrap_or(9000);
    let mut container = json!({
        "name": p.name,
        "image": p.image,
        "env": p.env.iter().map(|(k, v)| json!({ "name": k, "value": v })).collect::<Vec<_>>(),
        "ports": [{ "name": "backend", "containerPort": port }],
        "readinessProbe": { "tcpSocket": { "port": "backend" }, "periodSeconds": 2 },
        "resources": p.resources.clone().map(|r| serde_json::to_value(r).unwrap())
            .unwrap_or(json!({ "requests": { "cpu": "100m", "memory": "64Mi" } })),
    });
    if !p.command.is_empty() {
        container["command"] = json!(p.command);
    }
    if !p.args.is_empty() {
        container["args"] = json!(p.args);
    }
    let mut d = json!({
        "metadata": pool_metadata(vs, &p.name),
        "spec": {
            "selector": { "matchLabels": pool_labels(vs, &p.name) },
            "strategy": { "type": "RollingUpdate", "rollingUpdate": { "maxUnavailable": 0, "maxSurge": 1 } },
            "template": {
                "metadata": { "labels": pool_labels(vs, &p.name) },
                "spec": { "enableServiceLinks": false, "containers": [container] }
            }
        }
    });
    if p.autoscaling.is_none() {
        d["spec"]["replicas"] = json!(2);
    }
    serde_json::from_value(d).expect("valid pool Deployment")
}

/// A `placement: pool` backend's headless Service: its DNS name resolves to every ready
/// pod, and the edge re-resolves it every few seconds.
pub fn pool_service(vs: &VirtualServer, p: &crate::crd::Pool) -> Service {
    serde_json::from_value(json!({
        "metadata": pool_metadata(vs, &p.name),
        "spec": {
            "clusterIP": "None",
            "selector": pool_labels(vs, &p.name),
            "ports": [{ "name": "backend", "port": p.port.unwrap_or(9000), "targetPort": "backend" }],
        }
    }))
    .expect("valid pool Service")
}

/// A `placement: pool` backend's HPA, when it autoscales.
pub fn pool_autoscaler(
    vs: &VirtualServer,
    p: &crate::crd::Pool,
) -> Option<HorizontalPodAutoscaler> {
    let a = p.autoscaling.as_ref()?;
    let name = render::pool_workload_name(&vs.name_any(), &p.name);
    Some(
        serde_json::from_value(json!({
            "metadata": pool_metadata(vs, &p.name),
            "spec": {
                "scaleTargetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": name },
                "minReplicas": a.min_replicas,
                "maxReplicas": a.max_replicas,
                "metrics": [{ "type": "Resource", "resource": { "name": "cpu",
                    "target": { "type": "Utilization", "averageUtilization": a.target_cpu_utilization } } }],
            }
        }))
        .expect("valid pool HPA"),
    )
}

/// The Secret holding the hosts' certificate: the one named, or the one cert-manager fills.
pub fn tls_secret_name(vs: &VirtualServer) -> String {
    vs.spec
        .tls
        .as_ref()
        .and_then(|t| t.secret_name.clone())
        .unwrap_or_else(|| format!("{}-tls", vs.name_any()))
}

/// A cert-manager Certificate for every host, from the named issuer.
pub fn certificate(vs: &VirtualServer) -> Value {
    let issuer = vs.spec.tls.as_ref().and_then(|t| t.issuer_ref.clone());
    let (name, kind) = issuer.map_or((String::new(), "Issuer".to_string()), |i| (i.name, i.kind));
    json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": metadata(vs, &vs.name_any()),
        "spec": {
            "secretName": tls_secret_name(vs),
            "dnsNames": vs.spec.hosts,
            "issuerRef": { "name": name, "kind": kind, "group": "cert-manager.io" },
        }
    })
}

/// A headless Service for the edge pods' admin port (/metrics), for Prometheus.
pub fn metrics_service(vs: &VirtualServer) -> Service {
    let mut meta = metadata(vs, &format!("{}-metrics", vs.name_any()));
    meta["labels"]["skiff.dev/metrics"] = "true".into();
    serde_json::from_value(json!({
        "metadata": meta,
        "spec": {
            "clusterIP": "None",
            "selector": selector_labels(vs),
            "ports": [{ "name": "admin", "port": render::ADMIN_PORT, "targetPort": "admin" }],
        }
    }))
    .expect("valid metrics Service")
}

/// A Prometheus Operator ServiceMonitor scraping the edge pods through [`metrics_service`].
pub fn service_monitor(vs: &VirtualServer) -> Value {
    json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": metadata(vs, &vs.name_any()),
        "spec": {
            "selector": { "matchLabels": {
                "app.kubernetes.io/instance": vs.name_any(), "skiff.dev/metrics": "true"
            } },
            "endpoints": [{ "port": "admin", "path": "/metrics", "interval": "30s" }],
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn autoscaled_deployment_leaves_replicas_to_the_hpa() {
        let v = vs(json!({
            "hosts": ["shop.example"], "content": { "configMap": "site" },
            "autoscaling": { "minReplicas": 2, "maxReplicas": 6, "targetCpuUtilization": 60 }
        }));
        assert_eq!(deployment(&v).spec.unwrap().replicas, None);
        let hpa = serde_json::to_value(autoscaler(&v).unwrap()).unwrap();
        assert_eq!(hpa["spec"]["maxReplicas"], 6);
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
        assert_eq!(c["spec"]["secretName"], "shop-tls");
        assert_eq!(
            c["spec"]["dnsNames"],
            json!(["shop.example", "*.shop.example"])
        );
        assert_eq!(c["spec"]["issuerRef"]["kind"], "ClusterIssuer");
        assert_eq!(c["metadata"]["ownerReferences"][0]["kind"], "VirtualServer");
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
}
