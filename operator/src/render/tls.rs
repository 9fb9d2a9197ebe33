//! `spec.tls` in the server config: the TLS listener on [`HTTPS_PORT`] with the Service's
//! port as the public one, and one virtual server per certificate, each with its own
//! certificate files (from its Secret's directory mount), HSTS and redirect. A virtual
//! server's certificate is served for exactly its hosts, so per-host certificates are
//! virtual servers of their own, with the same root and rules as the main one.

use super::Invalid;
use crate::crd::{self, CertificateGroup, VirtualServer};
use skiff_config as config;
use std::collections::BTreeMap;
use std::time::Duration;

/// The pods' HTTPS port, behind the Service's `tls.port`.
pub const HTTPS_PORT: u16 = 8443;
/// Each certificate's Secret is mounted as a directory under here, named like the Secret.
pub const TLS_DIR: &str = "/etc/skiff/tls";
/// The longest virtual server name the server accepts.
const MAX_NAME: usize = 63;

/// Where the pods find a Secret's `tls.crt` and `tls.key`.
pub fn certificate_dir(secret_name: &str) -> String {
    format!("{TLS_DIR}/{secret_name}")
}

/// The config's name for the virtual server of certificate group `index`: the
/// VirtualServer's own for the main one, `<name>-tls-<i>` for `tls.certificates[i-1]`.
pub fn vhost_name(vs_name: &str, index: usize) -> String {
    if index == 0 {
        return vs_name.to_string();
    }
    let suffix = format!("-tls-{index}");
    let keep = vs_name.len().min(MAX_NAME.saturating_sub(suffix.len()));
    let mut cut = keep;
    while !vs_name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &vs_name[..cut])
}

/// The TLS listener for `spec.tls`: redirects name the Service's port, not the pods'.
impl From<&crd::Tls> for config::TlsConfig {
    fn from(tls: &crd::Tls) -> Self {
        config::TlsConfig {
            public_port: Some(tls.port),
            ..config::TlsConfig::new(format!("0.0.0.0:{HTTPS_PORT}"))
        }
    }
}

/// A certificate's files: the keys of its kubernetes.io/tls Secret, mounted as a
/// directory (never subPath), so the kubelet's update of a renewed Secret reaches the
/// server, which watches the folder. Optional in the config (not in the pod, which waits
/// for it): running pods, which cannot mount a Secret added or renamed since they started,
/// load the new config anyway, and keep serving what they had for those hosts.
impl From<&CertificateGroup> for config::CertificateFiles {
    fn from(g: &CertificateGroup) -> Self {
        let dir = certificate_dir(&g.secret_name);
        config::CertificateFiles {
            cert: format!("{dir}/tls.crt"),
            key: format!("{dir}/tls.key"),
            ocsp: None,
            optional: true,
        }
    }
}

impl TryFrom<&crd::Hsts> for config::Hsts {
    type Error = Invalid;

    fn try_from(h: &crd::Hsts) -> Result<Self, Invalid> {
        let max_age = humantime::parse_duration(&h.max_age).map_err(|e| {
            Invalid(format!(
                "spec.tls.hsts.maxAge: {:?} is not a duration such as 365d: {e}",
                h.max_age
            ))
        })?;
        let year = Duration::from_secs(365 * 24 * 3600);
        if h.preload && (!h.include_subdomains || max_age < year) {
            return Err(Invalid(
                "spec.tls.hsts.preload needs includeSubdomains and a maxAge of at least 365d"
                    .into(),
            ));
        }
        Ok(config::Hsts {
            max_age,
            include_subdomains: h.include_subdomains,
            preload: h.preload,
        })
    }
}

/// What the CRD's CEL rules cannot see, or what got past them: each host has one
/// certificate, the main one keeps a host, and no two certificates share a Secret or a
/// Certificate name.
pub(super) fn check(vs: &VirtualServer, groups: &[CertificateGroup]) -> Result<(), Invalid> {
    let mut owner: BTreeMap<&str, &CertificateGroup> = BTreeMap::new();
    for g in groups.iter().skip(1) {
        for h in &g.hosts {
            if !vs.spec.hosts.contains(h) {
                return Err(Invalid(format!(
                    "{}: host {h} is not one of spec.hosts",
                    g.field()
                )));
            }
            if let Some(first) = owner.insert(h, g) {
                return Err(Invalid(format!(
                    "{}: host {h} is also in {}; a host has one certificate",
                    g.field(),
                    first.field()
                )));
            }
        }
    }
    if groups.first().is_some_and(|main| main.hosts.is_empty()) {
        return Err(Invalid(
            "spec.tls.certificates take every host, so the main certificate would serve none; \
             leave a host to it or move an entry's hosts into the main certificate"
                .into(),
        ));
    }
    let mut secrets: BTreeMap<&str, &CertificateGroup> = BTreeMap::new();
    let mut names: BTreeMap<String, &CertificateGroup> = BTreeMap::new();
    for g in groups {
        if let Some(first) = secrets.insert(&g.secret_name, g) {
            return Err(Invalid(format!(
                "{}: Secret {} is also {}'s; each certificate needs its own Secret",
                g.field(),
                g.secret_name,
                first.field()
            )));
        }
        if g.issuer.is_some() {
            if let Some(first) = names.insert(g.certificate_name(vs), g) {
                return Err(Invalid(format!(
                    "{}: its Certificate would be named {}, like {}'s; choose another secretName",
                    g.field(),
                    g.certificate_name(vs),
                    first.field()
                )));
            }
        }
    }
    Ok(())
}

/// One virtual server per certificate, built from the main one: its hosts, its
/// certificate, HSTS and the redirect. The main one stays the default.
pub(super) fn virtual_servers(
    vs: &VirtualServer,
    base: config::VirtualServer,
) -> Result<Vec<config::VirtualServer>, Invalid> {
    let Some(tls) = &vs.spec.tls else {
        return Ok(vec![base]);
    };
    let groups = vs.certificate_groups();
    check(vs, &groups)?;
    let hsts = tls.hsts.as_ref().map(config::Hsts::try_from).transpose()?;
    Ok(groups
        .iter()
        .map(|g| config::VirtualServer {
            name: vhost_name(&base.name, g.index),
            hosts: g.hosts.clone(),
            default: g.index == 0,
            tls: Some(g.into()),
            hsts: hsts.clone(),
            https_redirect: tls.redirect,
            ..base.clone()
        })
        .collect())
}
