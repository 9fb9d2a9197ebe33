//! `spec.tls`: HTTPS for the hosts. A main certificate (a Secret of yours, or one that
//! cert-manager issues), optional certificates for some of the hosts, the redirect from
//! plain HTTP, HSTS and the Service's HTTPS port. [`VirtualServer::certificate_groups`]
//! says which certificate serves which hosts; rendering, the children and the status all
//! read it.

use super::spec::VirtualServer;
use kube::ResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// HTTPS for the hosts: the main certificate from a Secret (`secretName`) or from a
/// cert-manager issuer (`issuerRef`), exactly one of the two; `certificates` for hosts
/// that need another one. The edge pods mount each Secret as a directory and reload a
/// renewed certificate in place, with no restart.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.secretName) != has(self.issuerRef)",
        "message": "tls needs exactly one of secretName or issuerRef"
    },
    {
        "rule": "!has(self.certificates) || self.certificates.all(c, self.certificates.exists_one(d, d.secretName == c.secretName))",
        "message": "each entry of tls.certificates needs its own secretName"
    },
    {
        "rule": "!has(self.secretName) || !has(self.certificates) || self.certificates.all(c, c.secretName != self.secretName)",
        "message": "tls.certificates must not reuse tls.secretName"
    }
]))]
pub struct Tls {
    /// A kubernetes.io/tls Secret in this namespace holding the main certificate
    /// (`tls.crt`, `tls.key`). Renewing it in place reaches the pods without a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: Option<String>,
    /// A cert-manager Issuer or ClusterIssuer to request the main certificate from. The
    /// operator creates a Certificate named after the VirtualServer, whose Secret is
    /// `<name>-tls`. ACME issuers need a DNS-01 solver: the edge does not route
    /// cert-manager's HTTP-01 solver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer_ref: Option<IssuerRef>,
    /// Certificates for some of the hosts, served for those hosts instead of the main
    /// one (another domain, another CA). The main certificate serves the other hosts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub certificates: Vec<HostCertificate>,
    /// Answer plain-HTTP requests with a 308 redirect to the same URL over HTTPS (a rule's
    /// own `httpsRedirect` overrides this for the requests it takes).
    #[serde(default)]
    pub redirect: bool,
    /// Strict-Transport-Security on HTTPS responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hsts: Option<Hsts>,
    /// The Service's HTTPS port (to the pods' 8443); also the port of the redirects.
    #[serde(default = "default_https_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
}

fn default_https_port() -> u16 {
    443
}

/// A certificate for some of the hosts.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostCertificate {
    /// Hosts of `spec.hosts` this certificate is served for; a host is in one entry at most.
    #[schemars(length(min = 1, max = 64), inner(length(min = 1, max = 253)))]
    pub hosts: Vec<String>,
    /// The kubernetes.io/tls Secret holding it: one of yours, or, with `issuerRef`, the one
    /// cert-manager writes.
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
    /// Request this certificate from a cert-manager issuer, as a Certificate named like
    /// the Secret; without it, the Secret is yours to provide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer_ref: Option<IssuerRef>,
}

/// HTTP Strict Transport Security: browsers that saw it use HTTPS only, for `maxAge`.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.preload) || !self.preload || (has(self.includeSubdomains) && self.includeSubdomains)",
    "message": "hsts.preload needs includeSubdomains (and a maxAge of at least 365d)"
}]))]
pub struct Hsts {
    /// How long browsers keep to HTTPS: a duration such as `365d`, `26w` or `12h30m`
    /// (units s, m, h, d, w, y).
    #[serde(default = "default_hsts_max_age")]
    #[schemars(length(max = 32), regex(pattern = r"^([0-9]+(s|m|h|d|w|y))+$"))]
    pub max_age: String,
    /// Also for every subdomain (`includeSubDomains`).
    #[serde(default)]
    pub include_subdomains: bool,
    /// Ask browsers to preload the policy (needs `includeSubdomains` and a year or more).
    #[serde(default)]
    pub preload: bool,
}

fn default_hsts_max_age() -> String {
    "365d".into()
}

/// A cert-manager issuer.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct IssuerRef {
    /// The issuer's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// `Issuer` (in this namespace) or `ClusterIssuer`.
    #[serde(default = "default_issuer_kind")]
    #[schemars(regex(pattern = "^(Issuer|ClusterIssuer)$"))]
    pub kind: String,
}

fn default_issuer_kind() -> String {
    "Issuer".into()
}

/// One certificate the edge serves and the hosts it is served for: the main one (index 0,
/// every host no entry of `tls.certificates` takes), then one per entry.
#[derive(Clone, Debug, PartialEq)]
pub struct CertificateGroup {
    /// 0 for the main certificate, `i + 1` for `tls.certificates[i]`.
    pub index: usize,
    pub hosts: Vec<String>,
    /// The Secret the pods read it from.
    pub secret_name: String,
    /// The issuer cert-manager requests it from; `None`: the Secret is the user's.
    pub issuer: Option<IssuerRef>,
}

impl CertificateGroup {
    /// The cert-manager Certificate's name: the VirtualServer's for the main certificate,
    /// the Secret's for the others.
    pub fn certificate_name(&self, vs: &VirtualServer) -> String {
        if self.index == 0 {
            vs.name_any()
        } else {
            self.secret_name.clone()
        }
    }

    /// Where in `spec` it comes from, for messages.
    pub fn field(&self) -> String {
        match self.index {
            0 => "spec.tls".into(),
            i => format!("spec.tls.certificates[{}]", i - 1),
        }
    }
}

impl VirtualServer {
    /// The certificates and the hosts each serves; empty without `spec.tls`.
    pub fn certificate_groups(&self) -> Vec<CertificateGroup> {
        let Some(tls) = &self.spec.tls else {
            return vec![];
        };
        let taken = |h: &String| tls.certificates.iter().any(|c| c.hosts.contains(h));
        let main = CertificateGroup {
            index: 0,
            hosts: self
                .spec
                .hosts
                .iter()
                .filter(|h| !taken(h))
                .cloned()
                .collect(),
            secret_name: tls
                .secret_name
                .clone()
                .unwrap_or_else(|| format!("{}-tls", self.name_any())),
            issuer: tls.issuer_ref.clone(),
        };
        let others = tls
            .certificates
            .iter()
            .enumerate()
            .map(|(i, c)| CertificateGroup {
                index: i + 1,
                hosts: c.hosts.clone(),
                secret_name: c.secret_name.clone(),
                issuer: c.issuer_ref.clone(),
            });
        std::iter::once(main).chain(others).collect()
    }
}
