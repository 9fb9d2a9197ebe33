//! The edge tier's objects: the config ConfigMap, the Deployment of skiff pods, the Service
//! in front of them, their HPA and PodDisruptionBudget, and the metrics Service.

use super::{labels, metadata, metadata_labelled, selector_labels, DEFAULT_IMAGE};
use crate::crd::{Placement, Pool, PoolProtocol, VirtualServer};
use crate::render::{self, Rendered};
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource,
    EnvVar, HTTPGetAction, KeyToPath, PersistentVolumeClaimVolumeSource, PodSecurityContext,
    PodSpec, PodTemplateSpec, Probe, ResourceRequirements, SeccompProfile, SecretVolumeSource,
    SecurityContext, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use std::collections::BTreeMap;

/// Seconds the edge keeps listening after SIGTERM while its endpoint is removed.
const SHUTDOWN_DELAY_SECONDS: i64 = 5;
/// What in-flight responses get after listening stops (the server's default, said here so
/// the pod's termination grace period is computed from it).
const SHUTDOWN_GRACE_SECONDS: i64 = 30;
/// After the grace period the server drops what is left and writes its logs (up to 2 s):
/// the kubelet's kill waits for that too.
const AFTER_GRACE_SECONDS: i64 = 5;
/// The uid and gid of the edge pods (the image's nonroot user).
const NONROOT: i64 = 65532;

pub fn config_map_name(vs: &VirtualServer) -> String {
    format!("{}-config", vs.name_any())
}

pub fn config_map(vs: &VirtualServer, rendered: &Rendered) -> ConfigMap {
    ConfigMap {
        metadata: metadata(vs, &config_map_name(vs)),
        data: Some(BTreeMap::from([(
            render::CONFIG_FILE.to_string(),
            rendered.yaml.clone(),
        )])),
        ..ConfigMap::default()
    }
}

/// The edge Deployment. A config-only change does not touch the pod template: the pods
/// hot-reload the mounted ConfigMap (mounted as a directory, never subPath, so the kubelet
/// updates it), and the same holds for the TLS Secrets. Changes to the template roll pod by
/// pod with maxUnavailable 0. A pod waits for its TLS Secrets to exist before it starts;
/// htpasswd Secret volumes are optional (their rules deny until the file exists).
pub fn deployment(vs: &VirtualServer) -> Deployment {
    let spec = &vs.spec;
    let image = spec.image.as_deref().unwrap_or(DEFAULT_IMAGE);
    let mut volumes = vec![Volume {
        name: "config".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map_name(vs),
            ..Default::default()
        }),
        ..Default::default()
    }];
    let mut mounts = vec![
        mount("config", render::CONFIG_DIR, true),
        mount("site", render::SITE_ROOT, true),
    ];
    // A CGI pool's uploads are buffered in unnamed files under /tmp before a worker is
    // taken (the root file system is read-only). The server caps what they hold at 1 GiB,
    // under this limit, past which the kubelet would evict the pod.
    if spec.pools.iter().any(|p| p.protocol != PoolProtocol::Http) {
        volumes.push(Volume {
            name: "tmp".into(),
            empty_dir: Some(EmptyDirVolumeSource {
                size_limit: Some(Quantity("2Gi".into())),
                ..Default::default()
            }),
            ..Default::default()
        });
        mounts.push(mount("tmp", "/tmp", false));
    }
    let mut init_containers = vec![];
    let content = &spec.content;
    match (
        &content.config_map,
        &content.persistent_volume_claim,
        &content.image,
    ) {
        (Some(cm), _, _) => volumes.push(Volume {
            name: "site".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: cm.clone(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        (_, Some(claim), _) => volumes.push(Volume {
            name: "site".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.clone(),
                read_only: Some(true),
            }),
            ..Default::default()
        }),
        (_, _, Some(content_image)) => {
            volumes.push(empty_dir("site"));
            // The content image needs no shell: the skiff binary from the edge image
            // copies the tree (`skiff copy-tree`), run from a shared emptyDir.
            volumes.push(empty_dir("tools"));
            init_containers.push(Container {
                name: "skiff-tools".into(),
                image: Some(image.into()),
                command: Some(strings(["/skiff", "copy-tree", "/skiff", "/tools/skiff"])),
                volume_mounts: Some(vec![mount("tools", "/tools", false)]),
                security_context: Some(container_security()),
                ..Default::default()
            });
            init_containers.push(Container {
                name: "content".into(),
                image: Some(content_image.reference.clone()),
                command: Some(strings([
                    "/tools/skiff",
                    "copy-tree",
                    &content_image.path,
                    "/site",
                ])),
                volume_mounts: Some(vec![
                    mount("tools", "/tools", true),
                    mount("site", "/site", false),
                ]),
                security_context: Some(container_security()),
                ..Default::default()
            });
        }
        (None, None, None) => {}
    }
    let sidecars: Vec<&Pool> = spec
        .pools
        .iter()
        .filter(|p| p.placement == Placement::Sidecar && p.image.is_some())
        .collect();
    if !sidecars.is_empty() {
        volumes.push(empty_dir("pool-sockets"));
        mounts.push(VolumeMount {
            name: "pool-sockets".into(),
            mount_path: render::SOCKET_DIR.into(),
            ..Default::default()
        });
    }
    // Named by position, not by Secret: a Secret's name may hold dots or run to 253
    // characters, which a volume's name (a DNS label) cannot.
    let mut auth_secrets: Vec<&str> = Vec::new();
    for rule in &spec.rules {
        if let Some(auth) = &rule.basic_auth {
            if !auth_secrets.contains(&auth.secret_name.as_str()) {
                let volume = format!("auth-{}", auth_secrets.len());
                auth_secrets.push(&auth.secret_name);
                volumes.push(Volume {
                    name: volume.clone(),
                    secret: Some(SecretVolumeSource {
                        secret_name: Some(auth.secret_name.clone()),
                        items: Some(keys(&["htpasswd"])),
                        // A missing Secret must not keep pods from starting: the rule
                        // denies until the kubelet fills the volume.
                        optional: Some(true),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
                let path = format!("{}/{}", render::AUTH_DIR, auth.secret_name);
                mounts.push(mount(&volume, &path, true));
            }
        }
    }
    // Each certificate's Secret as a directory (never subPath), read-only: the kubelet
    // swaps in a renewed Secret and the server, which watches the folder, reloads it. The
    // template names only the Secret, never its content, so a renewal changes nothing
    // here and rolls no pod.
    for g in vs.certificate_groups() {
        let volume = format!("tls-{}", g.index);
        volumes.push(Volume {
            name: volume.clone(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(g.secret_name.clone()),
                items: Some(keys(&["tls.crt", "tls.key"])),
                // Owner root, group the pod's fsGroup: readable by the server only.
                default_mode: Some(0o440),
                // Not optional: a new pod waits for its certificate, so a Secret renamed
                // to one not issued yet cannot roll the working certificate away (the
                // running pods keep it: the config marks the files optional).
                ..Default::default()
            }),
            ..Default::default()
        });
        mounts.push(mount(
            &volume,
            &render::certificate_dir(&g.secret_name),
            true,
        ));
    }
    let mut ports = vec![
        container_port("http", render::HTTP_PORT),
        container_port("admin", render::ADMIN_PORT),
    ];
    if spec.tls.is_some() {
        ports.push(container_port("https", render::HTTPS_PORT));
    }
    let config_path = format!("{}/{}", render::CONFIG_DIR, render::CONFIG_FILE);
    let shutdown_delay = format!("{SHUTDOWN_DELAY_SECONDS}s");
    let shutdown_grace = format!("{SHUTDOWN_GRACE_SECONDS}s");
    let mut containers = vec![Container {
        name: "skiff".into(),
        image: Some(image.into()),
        args: Some(strings([
            "run",
            "--config",
            &config_path,
            "--shutdown-delay",
            &shutdown_delay,
            "--shutdown-grace",
            &shutdown_grace,
        ])),
        ports: Some(ports),
        readiness_probe: Some(http_probe("/readyz", 2, 1)),
        liveness_probe: Some(http_probe("/healthz", 10, 3)),
        resources: Some(spec.resources.clone().unwrap_or_else(|| {
            requirements(
                [("cpu", "100m"), ("memory", "64Mi")],
                Some([("memory", "256Mi")]),
            )
        })),
        security_context: Some(container_security()),
        volume_mounts: Some(mounts),
        ..Default::default()
    }];
    containers.extend(sidecars.into_iter().map(|p| Container {
        name: format!("pool-{}", p.name),
        image: p.image.clone(),
        env: Some(env(&p.env)),
        command: non_empty(&p.command),
        args: non_empty(&p.args),
        resources: p.resources.clone(),
        volume_mounts: Some(vec![VolumeMount {
            name: "pool-sockets".into(),
            mount_path: render::SOCKET_DIR.into(),
            ..Default::default()
        }]),
        // The pod runs as a non-root user: no capabilities to keep, no setuid to gain.
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }));
    let pod = PodSpec {
        termination_grace_period_seconds: Some(
            SHUTDOWN_DELAY_SECONDS + SHUTDOWN_GRACE_SECONDS + AFTER_GRACE_SECONDS,
        ),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(NONROOT),
            run_as_group: Some(NONROOT),
            fs_group: Some(NONROOT),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        init_containers: Some(init_containers),
        containers,
        volumes: Some(volumes),
        ..Default::default()
    };
    Deployment {
        metadata: metadata(vs, &vs.name_any()),
        spec: Some(DeploymentSpec {
            // With an HPA the replica count is the HPA's: leaving it out of the applied
            // object keeps the operator from fighting it.
            replicas: spec
                .autoscaling
                .is_none()
                .then(|| spec.replicas.unwrap_or(crate::crd::DEFAULT_REPLICAS)),
            selector: match_labels(selector_labels(vs)),
            strategy: Some(surge_one_at_a_time()),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(selector_labels(vs)),
                    ..Default::default()
                }),
                spec: Some(pod),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The edge Service: `http` to the pods' 8080, and with `spec.tls` also `https` (on
/// `tls.port`) to their 8443.
pub fn service(vs: &VirtualServer) -> Service {
    let (type_, port) = vs
        .spec
        .service
        .as_ref()
        .map_or(("ClusterIP", 80), |s| (s.type_.as_str(), s.port));
    let tcp = |name: &str, port: u16| ServicePort {
        name: Some(name.into()),
        port: port.into(),
        target_port: Some(IntOrString::String(name.into())),
        protocol: Some("TCP".into()),
        ..Default::default()
    };
    let mut ports = vec![tcp("http", port)];
    if let Some(tls) = &vs.spec.tls {
        ports.push(tcp("https", tls.port));
    }
    Service {
        metadata: metadata(vs, &vs.name_any()),
        spec: Some(ServiceSpec {
            type_: Some(type_.into()),
            selector: Some(selector_labels(vs)),
            ports: Some(ports),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The metadata of the edge objects named after the VirtualServer.
pub(super) fn metadata_of(vs: &VirtualServer) -> ObjectMeta {
    metadata(vs, &vs.name_any())
}

/// Keeps one edge pod serving through voluntary disruptions (node drains).
pub fn disruption_budget(vs: &VirtualServer) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: metadata(vs, &vs.name_any()),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(match_labels(selector_labels(vs))),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A headless Service for the edge pods' admin port (/metrics), for Prometheus.
pub fn metrics_service(vs: &VirtualServer) -> Service {
    let name = format!("{}{}", vs.name_any(), render::METRICS_SUFFIX);
    Service {
        metadata: metadata_labelled(vs, &name, "skiff.dev/metrics", "true"),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(selector_labels(vs)),
            ports: Some(vec![ServicePort {
                name: Some("admin".into()),
                port: render::ADMIN_PORT.into(),
                target_port: Some(IntOrString::String("admin".into())),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Rolling updates that add one pod before taking one away.
pub(super) fn surge_one_at_a_time() -> DeploymentStrategy {
    DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_unavailable: Some(IntOrString::Int(0)),
            max_surge: Some(IntOrString::Int(1)),
        }),
    }
}

pub(super) fn match_labels(labels: BTreeMap<String, String>) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels),
        ..Default::default()
    }
}

/// The container environment from a name-to-value map.
pub(super) fn env(vars: &BTreeMap<String, String>) -> Vec<EnvVar> {
    vars.iter()
        .map(|(name, value)| EnvVar {
            name: name.clone(),
            value: Some(value.clone()),
            ..Default::default()
        })
        .collect()
}

/// `None` for an empty list, so that the image's own command or args apply.
pub(super) fn non_empty(list: &[String]) -> Option<Vec<String>> {
    (!list.is_empty()).then(|| list.to_vec())
}

pub(super) fn container_port(name: &str, port: u16) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: port.into(),
        ..Default::default()
    }
}

/// Resource requests, and limits when given.
pub(super) fn requirements<const N: usize, const M: usize>(
    requests: [(&str, &str); N],
    limits: Option<[(&str, &str); M]>,
) -> ResourceRequirements {
    let quantities = |pairs: BTreeMap<String, String>| {
        pairs
            .into_iter()
            .map(|(k, v)| (k, Quantity(v)))
            .collect::<BTreeMap<_, _>>()
    };
    ResourceRequirements {
        requests: Some(quantities(labels(requests))),
        limits: limits.map(|l| quantities(labels(l))),
        ..Default::default()
    }
}

fn http_probe(path: &str, period_seconds: i32, failure_threshold: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String("admin".into()),
            ..Default::default()
        }),
        period_seconds: Some(period_seconds),
        failure_threshold: Some(failure_threshold),
        ..Default::default()
    }
}

fn container_security() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(strings(["ALL"])),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A Secret volume's keys, each as the file of its name. Only these are mounted: a
/// VirtualServer naming some other Secret (a database password, in a pod whose image its
/// author chooses) mounts nothing of it. A TLS Secret without one of them keeps the pod
/// waiting with the kubelet's message; an htpasswd one's volume is optional, and the
/// operator's `ResolvedRefs` says when the Secret or its key is missing.
fn keys(names: &[&str]) -> Vec<KeyToPath> {
    names
        .iter()
        .map(|k| KeyToPath {
            key: (*k).into(),
            path: (*k).into(),
            mode: None,
        })
        .collect()
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..Default::default()
    }
}

fn empty_dir(name: &str) -> Volume {
    Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    }
}

fn strings<const N: usize>(items: [&str; N]) -> Vec<String> {
    items.into_iter().map(String::from).collect()
}
