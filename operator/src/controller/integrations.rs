//! The optional integrations, discovered at each reconcile so that installing cert-manager
//! or the Prometheus Operator later just works: a ServiceMonitor for the edge pods' metrics
//! and a cert-manager Certificate for the hosts.

use super::apply::apply;
use super::status::Outcome;
use crate::children::{self, Children};
use crate::crd::{Reason, VirtualServer};
use crate::Result;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
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

/// The TLS certificate: a named Secret is checked for; an issuer gets a cert-manager
/// Certificate when cert-manager's CRDs exist, and a clear condition when they do not.
/// The outcome is the `CertificateReady` condition; `None` without `spec.tls`.
pub(super) async fn certificate(
    client: &Client,
    ns: &str,
    vs: &VirtualServer,
    children: &Children,
) -> Result<Option<Outcome>> {
    if vs.spec.tls.is_none() {
        return Ok(None);
    }
    let Some(certificate) = &children.certificate else {
        let secret_name = children::tls_secret_name(vs);
        let found = Api::<Secret>::namespaced(client.clone(), ns)
            .get_opt(&secret_name)
            .await?
            .is_some();
        return Ok(Some(if found {
            Outcome::yes(
                Reason::SecretFound,
                format!("Secret {secret_name} holds the certificate"),
            )
        } else {
            Outcome::no(
                Reason::SecretNotFound,
                format!("Secret {secret_name} does not exist"),
            )
        }));
    };
    if !crd_installed(client, CERTIFICATES).await? {
        return Ok(Some(Outcome::no(
            Reason::CertManagerNotInstalled,
            "tls.issuerRef needs cert-manager; its CRDs are not installed",
        )));
    }
    let applied = apply(client, ns, certificate).await?;
    let name = applied.name_any();
    Ok(Some(match applied.ready_condition() {
        Some(c) if c.status == "True" => {
            Outcome::yes(Reason::Issued, format!("Certificate {name} is ready"))
        }
        Some(c) => Outcome::no(Reason::Pending, c.message.as_deref().unwrap_or("not ready")),
        None => Outcome::no(Reason::Pending, format!("Certificate {name} requested")),
    }))
}
