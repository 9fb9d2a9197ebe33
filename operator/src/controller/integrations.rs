//! The optional integrations, discovered at each reconcile so that installing cert-manager
//! or the Prometheus Operator later just works: a ServiceMonitor for the edge pods' metrics
//! and cert-manager Certificates for the hosts (refused, with a reason, for an ACME issuer
//! that only solves HTTP-01).

use super::apply::apply;
use super::status::Outcome;
use crate::children::{Certificate, Children, ClusterIssuer, Issuer};
use crate::crd::{CertificateGroup, IssuerRef, Reason, VirtualServer};
use crate::Result;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams};
use kube::core::PartialObjectMeta;
use kube::{Api, Client, ResourceExt};

/// The cert-manager CRD whose presence turns `tls.issuerRef` into a Certificate.
pub(super) const CERTIFICATES: &str = "certificates.cert-manager.io";
/// The Prometheus Operator CRD whose presence gets the edge pods a ServiceMonitor.
pub(super) const SERVICE_MONITORS: &str = "servicemonitors.monitoring.coreos.com";
/// CRDs of optional integrations, watched so that installing one reconciles again.
pub(super) const CRDS: [&str; 2] = [CERTIFICATES, SERVICE_MONITORS];

async fn crd_installed(client: &Client, name: &str) -> Result<bool> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    Ok(crds.get_opt(name).await?.is_some())
}

/// The metrics Service always; a ServiceMonitor when the Prometheus Operator's CRD exists.
/// The outcome is the `Monitored` condition.
pub(super) async fn monitoring(
    client: &Client,
    ns: &str,
    vs: &VirtualServer,
    children: &Children,
) -> Result<Outcome> {
    apply(client, ns, &children.metrics_service).await?;
    if !crd_installed(client, SERVICE_MONITORS).await? {
        return Ok(Outcome::no(
            Reason::PrometheusOperatorNotInstalled,
            format!(
                "no ServiceMonitor CRD; scrape Service {}-metrics directly",
                vs.name_any()
            ),
        ));
    }
    apply(client, ns, &children.service_monitor).await?;
    Ok(Outcome::yes(
        Reason::ServiceMonitorCreated,
        "a ServiceMonitor scrapes the edge pods",
    ))
}

/// What the certificate step found.
pub(super) struct Certificates {
    /// The `CertificateReady` condition.
    pub outcome: Outcome,
    /// TLS Secrets the edge pods mount that do not exist yet: new pods wait for them
    /// (the volumes are not optional, so a renamed Secret not issued yet cannot roll the
    /// certificate away), while the running pods keep serving.
    pub missing_secrets: Vec<String>,
}

/// The certificates of `spec.tls`. A group whose Secret is the user's is checked for; one
/// from an issuer gets a cert-manager Certificate when cert-manager's CRDs exist (and a
/// clear condition when they do not, or when its ACME issuer only solves HTTP-01).
/// Certificates this VirtualServer no longer asks for are deleted. `None` without
/// `spec.tls`. `had` says whether the last status carried `CertificateReady`, so that
/// dropping `spec.tls` removes its Certificates once.
pub(super) async fn certificates(
    client: &Client,
    ns: &str,
    vs: &VirtualServer,
    children: &Children,
    had: bool,
) -> Result<Option<Certificates>> {
    let groups = vs.certificate_groups();
    if groups.is_empty() && !had {
        return Ok(None);
    }
    let issued = groups.iter().any(|g| g.issuer.is_some());
    let installed = (issued || had) && crd_installed(client, CERTIFICATES).await?;
    // Metadata only: the key pair never passes through the operator.
    let secrets = Api::<Secret>::namespaced(client.clone(), ns);
    let mut outcomes = vec![];
    let mut missing_secrets = vec![];
    let mut wanted = vec![];
    for g in &groups {
        let secret = &g.secret_name;
        let found = secrets.get_metadata_opt(secret).await?;
        let exists = found.is_some();
        if !exists {
            missing_secrets.push(secret.clone());
        }
        let outcome = match &g.issuer {
            None if exists => Outcome::yes(
                Reason::SecretFound,
                format!("Secret {secret} holds the certificate"),
            ),
            None => Outcome::no(
                Reason::SecretNotFound,
                format!("Secret {secret} does not exist"),
            ),
            Some(_) if !installed => Outcome::no(
                Reason::CertManagerNotInstalled,
                "tls.issuerRef needs cert-manager; its CRDs are not installed",
            ),
            Some(issuer) if acme_http01_only(client, ns, issuer).await? => {
                Outcome::no(Reason::Http01Unsupported, http01_message(issuer, g))
            }
            Some(_) => {
                let name = g.certificate_name(vs);
                if let Some(refusal) = taken(client, ns, vs, &name, found.as_ref()).await? {
                    // A Certificate of that name this VirtualServer made stays as it is.
                    wanted.push(name);
                    outcomes.push((g.field(), refusal));
                    continue;
                }
                let certificate = children
                    .certificates
                    .iter()
                    .find(|c| c.metadata.name.as_deref() == Some(name.as_str()))
                    .expect("Children holds a Certificate for every group with an issuer");
                let applied = apply(client, ns, certificate).await?;
                wanted.push(name.clone());
                match applied.ready_condition() {
                    Some(c) if c.status == "True" => {
                        Outcome::yes(Reason::Issued, format!("Certificate {name} is ready"))
                    }
                    Some(c) => {
                        Outcome::no(Reason::Pending, c.message.as_deref().unwrap_or("not ready"))
                    }
                    None => Outcome::no(Reason::Pending, format!("Certificate {name} requested")),
                }
            }
        };
        outcomes.push((g.field(), outcome));
    }
    if installed {
        remove_dropped_certificates(client, ns, vs, &wanted).await?;
    }
    if groups.is_empty() {
        return Ok(None);
    }
    Ok(Some(Certificates {
        outcome: combine(outcomes),
        missing_secrets,
    }))
}

/// The annotation cert-manager puts on a Secret it writes: the Certificate's name.
const ISSUED_FOR: &str = "cert-manager.io/certificate-name";

/// Why the Certificate `name` must not be applied: its Secret exists and was not issued
/// for a Certificate of this VirtualServer's (an app's own certificate, or one another
/// Certificate keeps, which cert-manager would overwrite), or a Certificate of that name
/// exists that is not this VirtualServer's (a forced apply would take it over, and its
/// deletion later delete it).
async fn taken(
    client: &Client,
    ns: &str,
    vs: &VirtualServer,
    name: &str,
    secret: Option<&PartialObjectMeta<Secret>>,
) -> Result<Option<Outcome>> {
    let certificates = Api::<Certificate>::namespaced(client.clone(), ns);
    if let Some(secret) = secret {
        let issued_for = secret.annotations().get(ISSUED_FOR).map(String::as_str);
        let whose = match issued_for {
            Some(other) if other == name => None,
            // Moved between this VirtualServer's certificates. One issued for a Certificate
            // since deleted is not free: cert-manager leaves such Secrets, which an app may
            // still serve.
            Some(other) => match certificates.get_metadata_opt(other).await? {
                Some(c) if this_virtual_servers(&c, vs) => None,
                Some(_) => Some(format!(
                    "cert-manager issued it for Certificate {other}, which is not this \
                     VirtualServer's"
                )),
                None => Some(format!(
                    "cert-manager issued it for Certificate {other}, which no longer exists"
                )),
            },
            None => Some("cert-manager did not issue it".to_owned()),
        };
        if let Some(whose) = whose {
            return Ok(Some(Outcome::no(
                Reason::SecretInUse,
                format!(
                    "Secret {} exists and {whose}; Certificate {name} would overwrite it, so it \
                     is not requested. Name another secretName, or delete the Secret",
                    secret.name_any()
                ),
            )));
        }
    }
    match certificates.get_metadata_opt(name).await? {
        Some(c) if !this_virtual_servers(&c, vs) => Ok(Some(Outcome::no(
            Reason::CertificateInUse,
            format!(
                "Certificate {name} exists and is not this VirtualServer's; it is not taken \
                 over. Name another secretName, or delete that Certificate"
            ),
        ))),
        _ => Ok(None),
    }
}

/// Whether a Certificate belongs to this VirtualServer: by its uid, or to a VirtualServer
/// of the same name and namespace since deleted, whose Certificates this one takes on:
/// still owned by it (garbage collection not done yet), or left without an owner by
/// `--cascade=orphan` with the operator's labels for this name.
fn this_virtual_servers(c: &PartialObjectMeta<Certificate>, vs: &VirtualServer) -> bool {
    let name = vs.name_any();
    let owners = c.owner_references();
    let labelled = |key: &str, value: &str| c.labels().get(key).is_some_and(|v| v == value);
    owners.iter().any(|o| {
        vs.uid().is_some_and(|uid| o.uid == uid)
            || (o.kind == "VirtualServer"
                && o.api_version.starts_with("skiff.dev/")
                && o.name == name)
    }) || (owners.is_empty()
        && labelled(crate::children::MANAGED_BY.0, crate::children::MANAGED_BY.1)
        && labelled("app.kubernetes.io/instance", &name))
}

/// One condition from each certificate's: the only one as it is; with several, True when
/// all are (with the main one's reason), else the first failing one's reason, and the
/// messages of those that decide it, each with the field it comes from.
pub(super) fn combine(mut outcomes: Vec<(String, Outcome)>) -> Outcome {
    if outcomes.len() == 1 {
        return outcomes.pop().expect("one").1;
    }
    let failing: Vec<&(String, Outcome)> = outcomes.iter().filter(|(_, o)| !o.ok).collect();
    let message = |list: &[&(String, Outcome)]| {
        list.iter()
            .map(|(field, o)| format!("{field}: {}", o.message))
            .collect::<Vec<_>>()
            .join("; ")
    };
    match failing.first() {
        None => Outcome::yes(
            outcomes[0].1.reason,
            message(&outcomes.iter().collect::<Vec<_>>()),
        ),
        Some((_, first)) => Outcome::no(first.reason, message(&failing)),
    }
}

/// Whether an issuer is ACME with HTTP-01 solvers only. An issuer that cannot be read
/// (not there yet, cert-manager's issuer CRDs absent, or an older ClusterRole without
/// them) is not judged here: cert-manager says what is wrong with it in the Certificate's
/// own Ready condition.
async fn acme_http01_only(client: &Client, ns: &str, issuer: &IssuerRef) -> Result<bool> {
    let spec = if issuer.kind == "ClusterIssuer" {
        Api::<ClusterIssuer>::all(client.clone())
            .get_opt(&issuer.name)
            .await
            .map(|i| i.map(|i| i.spec.issuer))
    } else {
        Api::<Issuer>::namespaced(client.clone(), ns)
            .get_opt(&issuer.name)
            .await
            .map(|i| i.map(|i| i.spec))
    };
    match spec {
        Ok(spec) => Ok(spec.is_some_and(|s| s.acme_http01_only())),
        Err(kube::Error::Api(s)) if s.code == 403 => {
            tracing::warn!(issuer = %issuer.name, "cannot read the issuer (RBAC): not checked for HTTP-01");
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

fn http01_message(issuer: &IssuerRef, g: &CertificateGroup) -> String {
    format!(
        "{} {} solves ACME challenges over HTTP-01 only; cert-manager answers those from a \
         solver behind an Ingress or HTTPRoute of its own, which the Skiff edge serving {} \
         never routes to, so no Certificate was requested. Give the issuer a dns01 solver \
         (https://cert-manager.io/docs/configuration/acme/dns01/), or bring a certificate \
         in a Secret (tls.secretName)",
        issuer.kind,
        issuer.name,
        g.hosts.join(", ")
    )
}

/// Deletes the Certificates this VirtualServer made that it no longer asks for (an entry
/// of `tls.certificates` removed, `tls` dropped, an issuer refused). cert-manager leaves
/// their Secrets in place.
async fn remove_dropped_certificates(
    client: &Client,
    ns: &str,
    vs: &VirtualServer,
    wanted: &[String],
) -> Result<()> {
    let api = Api::<Certificate>::namespaced(client.clone(), ns);
    let selector = format!("app.kubernetes.io/instance={}", vs.name_any());
    let uid = vs.uid().unwrap_or_default();
    let list = match api
        .list_metadata(&ListParams::default().labels(&selector))
        .await
    {
        Ok(list) => list,
        Err(kube::Error::Api(s)) if s.code == 403 => {
            tracing::warn!(virtualserver = %super::key(vs), "cannot list Certificates (RBAC): none removed");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    for c in list.items {
        let name = c.name_any();
        let ours = c.owner_references().iter().any(|o| o.uid == uid);
        if !ours || wanted.contains(&name) {
            continue;
        }
        tracing::info!(virtualserver = %super::key(vs), certificate = %name, "removing a Certificate no longer asked for");
        match api.delete(&name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
