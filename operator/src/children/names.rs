//! The names a VirtualServer's children take, and the other VirtualServers in the same
//! namespace that take one of them too: `a` with pool `b` and a VirtualServer `a-b` would
//! both apply a Deployment `a-b`, and each reconcile would take it from the other.

use crate::crd::{ConditionType, Reason, VirtualServer};
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

fn refused_for_a_name(vs: &VirtualServer) -> bool {
    vs.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.is(ConditionType::Accepted)
                && c.status == "False"
                && c.reason == Reason::NameConflict.as_str()
        })
    })
}

/// A name `vs` would apply that a peer in its namespace takes too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Collision {
    pub kind: &'static str,
    pub name: String,
    /// The peer's uid, to tell whether it holds the live object.
    pub peer_uid: String,
    /// Whether the peer keeps the name when neither holds the object: it is older.
    pub peer_first: bool,
    /// "Deployment "a-b" (the edge here) is also the workload of pool b of VirtualServer "a"".
    what: String,
}

impl Collision {
    /// The message of `Accepted=False`, with why the peer keeps the name.
    pub fn message(&self, peer_holds_it: bool) -> String {
        let why = if peer_holds_it {
            "which holds it"
        } else {
            "which is older"
        };
        format!(
            "{}, {why}; nothing is applied until one of them is renamed",
            self.what
        )
    }
}

/// Every name `vs` would apply that another VirtualServer in its namespace (among
/// `peers`, the controller's cache) takes too. A peer being deleted gives its names up;
/// one refused for a name does not keep a name by age, but still keeps what it holds
/// (its children keep serving).
pub fn collisions(vs: &VirtualServer, peers: &[Arc<VirtualServer>]) -> Vec<Collision> {
    let ns = vs.namespace();
    let ours = claims(vs);
    peers
        .iter()
        .filter(|p| p.namespace() == ns && p.uid() != vs.uid())
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .flat_map(|peer| {
            let theirs = claims(peer);
            let first = precedes(peer, vs) && !refused_for_a_name(peer);
            ours.iter().filter_map(move |mine| {
                let taken = theirs
                    .iter()
                    .find(|t| t.kind == mine.kind && t.name == mine.name)?;
                Some(Collision {
                    kind: mine.kind,
                    name: mine.name.clone(),
                    peer_uid: peer.uid().unwrap_or_default(),
                    peer_first: first,
                    what: format!(
                        "{} {:?} ({} here) is also {} of VirtualServer {:?}",
                        mine.kind,
                        mine.name,
                        mine.role,
                        taken.role,
                        peer.name_any(),
                    ),
                })
            })
        })
        .collect()
}

/// The message of `Accepted=False` when, by age alone, an older VirtualServer in the
/// namespace keeps a name `vs` would apply (the controller also asks who holds it).
#[cfg(test)]
pub fn conflict(vs: &VirtualServer, peers: &[Arc<VirtualServer>]) -> Option<String> {
    collisions(vs, peers)
        .into_iter()
        .find(|c| c.peer_first)
        .map(|c| c.message(false))
}
