//! The names a VirtualServer's children take, and the older VirtualServer in the same
//! namespace that already takes one of them: `a` with pool `b` and a VirtualServer `a-b`
//! would both apply a Deployment `a-b`, and each reconcile would take it from the other.

use crate::crd::VirtualServer;
use crate::render::{pool_workload_name, METRICS_SUFFIX};
use kube::ResourceExt;
use std::sync::Arc;

/// One name a VirtualServer's children take, of one kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    pub kind: &'static str,
    pub name: String,
    /// What it is, for the message: "the edge", "the workload of pool php".
    pub role: String,
}

fn claim(kind: &'static str, name: String, role: impl Into<String>) -> Claim {
    Claim {
        kind,
        name,
        role: role.into(),
    }
}

/// Every name this VirtualServer's children take. The edge's and each pool's HPA,
/// PodDisruptionBudget, NetworkPolicy and ServiceMonitor are named after their
/// Deployment, so the Deployment's claim stands for them; the Secret an issued
/// Certificate writes is claimed too, since two Certificates writing one Secret fight.
pub fn claims(vs: &VirtualServer) -> Vec<Claim> {
    let name = vs.name_any();
    let mut claims = vec![
        claim("Deployment", name.clone(), "the edge"),
        claim("Service", name.clone(), "the edge"),
        claim(
            "Service",
            format!("{name}{METRICS_SUFFIX}"),
            "the metrics Service",
        ),
        claim("ConfigMap", super::edge::config_map_name(vs), "the config"),
    ];
    for p in super::pooled(vs) {
        let workload = pool_workload_name(&name, &p.name);
        let role = format!("the workload of pool {}", p.name);
        claims.push(claim("Deployment", workload.clone(), role.clone()));
        claims.push(claim("Service", workload, role));
    }
    for group in vs.certificate_groups() {
        if group.issuer.is_none() {
            continue;
        }
        let field = group.field();
        let certificate = format!("the Certificate of {field}");
        claims.push(claim(
            "Certificate",
            group.certificate_name(vs),
            certificate,
        ));
        let secret = format!("the Secret issued for {field}");
        claims.push(claim("Secret", group.secret_name.clone(), secret));
    }
    claims
}

/// Whether `peer` keeps its names when it and `vs` want the same one: the older keeps
/// them, and of two created in the same second, the one whose name sorts first.
fn precedes(peer: &VirtualServer, vs: &VirtualServer) -> bool {
    let created = |v: &VirtualServer| v.creation_timestamp().map(|t| t.0);
    (created(peer), peer.name_any()) < (created(vs), vs.name_any())
}

/// The message of `Accepted=False` when an older VirtualServer in the same namespace
/// (among `peers`, the controller's cache) already takes a name `vs` would apply.
pub fn conflict(vs: &VirtualServer, peers: &[Arc<VirtualServer>]) -> Option<String> {
    let ns = vs.namespace();
    let ours = claims(vs);
    peers
        .iter()
        .filter(|p| p.namespace() == ns && p.uid() != vs.uid() && precedes(p, vs))
        .find_map(|peer| {
            let theirs = claims(peer);
            ours.iter().find_map(|mine| {
                let taken = theirs
                    .iter()
                    .find(|t| t.kind == mine.kind && t.name == mine.name)?;
                Some(format!(
                    "{} {:?} ({} here) is also {} of VirtualServer {:?}, which is older; nothing is applied until one of them is renamed",
                    mine.kind,
                    mine.name,
                    mine.role,
                    taken.role,
                    peer.name_any(),
                ))
            })
        })
}
