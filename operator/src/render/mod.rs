//! A VirtualServer's spec rendered into the skiff server config the edge pods load, and
//! validated with the server's own config crate before anything is applied: an invalid
//! config is never rolled out. The config is built as the config crate's typed model
//! (the conversions are in `convert.rs`) and written with the crate's own serializer.
//! The crate's warnings about a valid config (rules shadowing protected ones) come along.

mod convert;
mod tls;

#[cfg(test)]
mod forwarding_tests;
#[cfg(test)]
mod tests;

use crate::crd::{Handler, Placement, Pool, RuleAction, VirtualServer};
use kube::ResourceExt;
use skiff_config as config;
use std::collections::BTreeMap;

pub use tls::{certificate_dir, vhost_name, HTTPS_PORT};

/// Where the edge pods find things; the Deployment mounts them at these paths.
pub const SITE_ROOT: &str = "/srv/site";
pub const CONFIG_DIR: &str = "/etc/skiff";
pub const CONFIG_FILE: &str = "skiff.yaml";
pub const AUTH_DIR: &str = "/etc/skiff/auth";
pub const SOCKET_DIR: &str = "/run/skiff/pools";
pub const HTTP_PORT: u16 = 8080;
pub const ADMIN_PORT: u16 = 9145;

/// The rendered config and its hash (the value pods report and status shows).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rendered {
    pub yaml: String,
    pub hash: String,
    /// What the config probably gets wrong though it is valid (rules that shadow
    /// protected ones), as `spec.rules[i]: message`, for `status.warnings`.
    pub warnings: Vec<String>,
    /// The hash of the fields only a restart applies (`skiff_config::restart_fields_hash`),
    /// for the pod template.
    pub restart_hash: String,
}

/// Why a spec cannot become a config: the validator's message, for `Accepted=False`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

pub fn server_config(vs: &VirtualServer) -> Result<Rendered, Invalid> {
    let config = config_model(vs)?;
    let yaml = config::to_yaml(&config);
    // Parsed back as the pods will parse it, with the server's own error messages.
    config::parse_yaml(&yaml).map_err(|e| Invalid(e.to_string()))?;
    let hash = config::config_hash(&yaml);
    // The config's rules are spec.rules in the same order, so indices carry over; the
    // virtual servers of per-host certificates repeat the main one's rules, so only its
    // own are looked at.
    let warnings = config
        .virtual_servers
        .iter()
        .take(1)
        .flat_map(|v| config::shadowed_rules(&v.rules))
        .map(|s| format!("spec.rules[{}]: {}", s.later, s.message))
        .collect();
    Ok(Rendered {
        yaml,
        hash,
        warnings,
        restart_hash: config::restart_fields_hash(&config),
    })
}

/// The config model of a VirtualServer: one default virtual server for its hosts (with
/// `spec.tls`, one per certificate: `tls.rs`), and its pools with the endpoints where
/// their workloads run.
fn config_model(vs: &VirtualServer) -> Result<config::Config, Invalid> {
    let spec = &vs.spec;
    let ns = vs.namespace().unwrap_or_else(|| "default".into());
    let name = vs.name_any();
    object_names(vs)?;
    autoscaling_targets(spec)?;
    for rule in &spec.rules {
        for pool in pools_of(&rule.action) {
            if !spec.pools.iter().any(|p| p.name == pool) {
                return Err(Invalid(format!(
                    "rule {}: pool {pool:?} is not among spec.pools",
                    rule.name.as_deref().unwrap_or("(unnamed)")
                )));
            }
        }
    }
    let virtual_server = config::VirtualServer {
        name: name.clone(),
        hosts: spec.hosts.clone(),
        default: true,
        root: SITE_ROOT.into(),
        compression: spec.compression.as_ref().map(Into::into),
        error_pages: error_pages(&spec.error_pages)?,
        listing: spec.listing,
        rules: spec.rules.iter().map(Into::into).collect(),
        ..config::VirtualServer::new(name.clone(), SITE_ROOT)
    };
    Ok(config::Config {
        listen: format!("0.0.0.0:{HTTP_PORT}"),
        admin_listen: format!("0.0.0.0:{ADMIN_PORT}"),
        tls: spec.tls.as_ref().map(Into::into),
        threads: None,
        cache: spec.cache.as_ref().map(Into::into).unwrap_or_default(),
        limits: config::LimitsConfig::default(),
        access_log: config::AccessLogConfig {
            format: spec.log_format.map(Into::into).unwrap_or_default(),
            path: None,
        },
        dns: config::DnsConfig::default(),
        trusted_proxies: spec.trusted_proxies.clone(),
        use_forwarded_headers: spec.use_forwarded_headers,
        unknown_host: config::UnknownHost::default(),
        virtual_servers: tls::virtual_servers(vs, virtual_server)?,
        pools: spec.pools.iter().map(|p| pool(p, &name, &ns)).collect(),
    })
}

/// The CRD's string keys as status codes; the CEL rule refuses others at admission, and
/// this says which one for an object from before the rule.
fn error_pages(pages: &BTreeMap<String, String>) -> Result<BTreeMap<u16, String>, Invalid> {
    pages
        .iter()
        .map(|(code, page)| match code.parse::<u16>() {
            Ok(c) if (400..=599).contains(&c) => Ok((c, page.clone())),
            _ => Err(Invalid(format!(
                "spec.errorPages: {code:?} is not a status code from 400 to 599"
            ))),
        })
        .collect()
}

/// The pools an action names: its handler's, or each split target's.
fn pools_of(action: &RuleAction) -> Vec<&str> {
    match &action.split {
        Some(targets) => targets
            .iter()
            .filter_map(|t| pool_of(&t.action.handler))
            .collect(),
        None => pool_of(&action.handler).into_iter().collect(),
    }
}

fn pool_of(action: &Handler) -> Option<&str> {
    action
        .proxy
        .as_ref()
        .map(|p| p.pool.as_str())
        .or(action.fastcgi.as_ref().map(|c| c.pool.as_str()))
        .or(action.uwsgi.as_ref().map(|c| c.pool.as_str()))
        .or(action.scgi.as_ref().map(|c| c.pool.as_str()))
}

/// The name of the Deployment and headless Service of a `pool` placement.
pub fn pool_workload_name(vs_name: &str, pool: &str) -> String {
    format!("{vs_name}-{pool}")
}

fn pool(p: &Pool, vs_name: &str, ns: &str) -> config::Pool {
    let endpoints: Vec<String> = if p.image.is_none() {
        p.endpoints.clone()
    } else {
        let port = p.port.unwrap_or(9000);
        match (p.placement, &p.socket) {
            (Placement::Sidecar, Some(socket)) => vec![format!("unix:{SOCKET_DIR}/{socket}")],
            (Placement::Sidecar, None) => vec![format!("127.0.0.1:{port}")],
            // The headless Service's name: re-resolved every few seconds, so pods the
            // pool's HPA adds get traffic without a config change.
            (Placement::Pool, _) => {
                vec![format!(
                    "{}.{ns}.svc.cluster.local:{port}",
                    pool_workload_name(vs_name, &p.name)
                )]
            }
        }
    };
    let mut pool = config::Pool::new(p.name.clone(), p.protocol.into(), endpoints);
    // Reported as skiff_upstream_workers, the capacity of the busy ratio.
    pool.workers = p.known_workers();
    pool
}

/// The names the children take, checked before anything is applied: the edge's Service
/// is named after the VirtualServer, the metrics Service adds `-metrics` and a pool's
/// workload `-{pool}`, and a Service's name is a DNS label (RFC 1035) of 63 characters
/// at most. Otherwise the ConfigMap and Deployment would be applied and the Service
/// refused.
fn object_names(vs: &VirtualServer) -> Result<(), Invalid> {
    let name = vs.name_any();
    let max = 63 - METRICS_SUFFIX.len();
    if !dns_label(&name) || name.len() > max {
        return Err(Invalid(format!(
            "metadata.name {name:?}: the edge's Services are named after it, so it must start with a letter, hold only a-z, 0-9 and '-', and be at most {max} characters"
        )));
    }
    for p in crate::children::pooled(vs) {
        if format!("-{}", p.name) == METRICS_SUFFIX {
            return Err(Invalid(format!(
                "pool {}: its workload would take the metrics Service's name ({name}{METRICS_SUFFIX}); choose another name",
                p.name
            )));
        }
        let workload = pool_workload_name(&name, &p.name);
        if !dns_label(&workload) || workload.len() > 63 {
            return Err(Invalid(format!(
                "pool {}: its workload's name {workload:?} must be a DNS label of at most 63 characters (a-z, 0-9, '-')",
                p.name
            )));
        }
    }
    Ok(())
}

/// Appended to the VirtualServer's name for the Service the ServiceMonitor scrapes.
pub const METRICS_SUFFIX: &str = "-metrics";

/// RFC 1035 label, as Kubernetes checks a Service's name.
fn dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[b.len() - 1] != b'-'
}

/// The autoscaling targets that need more than the schema checks: a busy ratio needs the
/// workers it divides by, requests per second are the edge's.
fn autoscaling_targets(spec: &crate::crd::VirtualServerSpec) -> Result<(), Invalid> {
    for p in &spec.pools {
        let Some(a) = &p.autoscaling else { continue };
        if a.target_busy_ratio.is_some() && p.known_workers().is_none() {
            return Err(Invalid(format!(
                "pool {}: autoscaling.targetBusyRatio needs the pool's workers (spec.pools[].workers)",
                p.name
            )));
        }
        if a.target_requests_per_second.is_some() {
            return Err(Invalid(format!(
                "pool {}: autoscaling.targetRequestsPerSecond applies to the edge farm (spec.autoscaling), not to a pool",
                p.name
            )));
        }
    }
    Ok(())
}
