//! What the operator writes back: the status subresource and its conditions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the operator last observed and did.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualServerStatus {
    /// The generation these conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Accepted, ResolvedRefs, Ready, ConfigLive, Monitored and CertificateReady.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Edge pods in the Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Edge pods ready to serve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// The label selector of the edge pods (for the scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// The Service's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Hash of the server config the pods were given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    /// Hash of the config every ready edge pod reports serving (read back from each pod's
    /// admin `/config-hash`); equal to `configHash` once a change has been hot-reloaded
    /// everywhere. The ConfigLive condition says how many pods are there yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_config_hash: Option<String>,
    /// What the accepted config probably gets wrong, though it is valid: a rule that takes
    /// requests a later rule protects with basic auth, an address list or a rate limit,
    /// named with a sample path (`spec.rules[1]: rule "php" (index 0) matches
    /// /admin/x.php before rule "admin" (index 1)...`). Empty when there is nothing to say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// With `spec.tls`: the certificates the serving edge pods report serving (read back
    /// from each pod's admin `/certificates`), soonest expiry first. During a renewal the
    /// old and the new one are both listed, each with its number of pods. Empty until
    /// the pods answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub served_certificates: Vec<ServedCertificate>,
}

/// A certificate the edge pods serve.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServedCertificate {
    /// The Secret it comes from.
    pub secret_name: String,
    /// Its serial number, in hex.
    pub serial: String,
    /// When it expires (RFC 3339).
    pub not_after: String,
    /// How many serving pods serve it.
    pub pods: i32,
}

/// A status condition, shaped like metav1.Condition.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Accepted, ResolvedRefs, Ready, ConfigLive, Monitored or CertificateReady.
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    pub status: String,
    /// A CamelCase reason.
    pub reason: String,
    /// Details for people.
    pub message: String,
    /// The generation the condition was computed from.
    pub observed_generation: Option<i64>,
    /// When the status last changed (RFC 3339).
    pub last_transition_time: String,
}

impl Condition {
    /// Whether this is the condition of type `type_`.
    pub fn is(&self, type_: ConditionType) -> bool {
        self.type_ == type_.as_str()
    }
}

/// Defines a string-valued enum with `as_str()` and `Display`: the strings are the ones
/// written into the status, so they never change.
macro_rules! vocabulary {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The string written into the status.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => stringify!($variant),)*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

vocabulary! {
    /// The condition types a VirtualServer's status carries.
    ConditionType {
        /// The spec rendered into a config the server's validator accepts.
        Accepted,
        /// Every referenced ConfigMap, PersistentVolumeClaim and Secret exists.
        ResolvedRefs,
        /// The edge Deployment is rolled out and has ready pods.
        Ready,
        /// Every serving pod reports the desired config hash.
        ConfigLive,
        /// A ServiceMonitor scrapes the edge pods.
        Monitored,
        /// Every certificate of `spec.tls` is in place: its cert-manager Certificate is
        /// Ready, or its Secret exists (only with `spec.tls`).
        CertificateReady,
    }
}

vocabulary! {
    /// The CamelCase reasons of the conditions.
    Reason {
        /// Accepted: the config passed validation.
        Valid,
        /// Accepted and Ready: the spec does not render into a valid config.
        InvalidConfig,
        /// Accepted and Ready: an older VirtualServer in the namespace already takes the
        /// name of one of the children (`a` with pool `b`, and `a-b`).
        NameConflict,
        /// ResolvedRefs: every referenced object exists.
        Resolved,
        /// ResolvedRefs: a referenced object is missing.
        RefNotFound,
        /// Ready: the rollout is complete with ready pods.
        Available,
        /// Ready: pods are still being replaced or started.
        RollingOut,
        /// Ready: the edge is available, and a backend pool's own Deployment
        /// (`placement: pool`) has no available pod, so its routes fail.
        PoolUnavailable,
        /// Monitored: a ServiceMonitor was applied.
        ServiceMonitorCreated,
        /// Monitored: the Prometheus Operator's CRD is absent.
        PrometheusOperatorNotInstalled,
        /// CertificateReady: the named Secret exists.
        SecretFound,
        /// CertificateReady: the Secret exists, and an edge pod on the current config does
        /// not serve it yet (the kubelet fills the volume lazily), or cannot load it.
        NotServed,
        /// CertificateReady: the named Secret does not exist.
        SecretNotFound,
        /// CertificateReady: tls.issuerRef without cert-manager's CRDs.
        CertManagerNotInstalled,
        /// CertificateReady: cert-manager issued the Certificate.
        Issued,
        /// CertificateReady: the Certificate is requested but not ready.
        Pending,
        /// CertificateReady: the ACME issuer only solves HTTP-01 challenges, which the
        /// edge does not route; it needs a DNS-01 solver.
        Http01Unsupported,
        /// CertificateReady: the Secret an issuer would write exists and cert-manager did
        /// not issue it for this Certificate (another app's): it is not overwritten.
        SecretInUse,
        /// CertificateReady: a Certificate of that name exists and is not this
        /// VirtualServer's: it is not taken over.
        CertificateInUse,
        /// ConfigLive: no edge pod is ready.
        NoPodsServing,
        /// ConfigLive: every serving pod serves the desired config.
        Live,
        /// ConfigLive: some serving pods did not answer on the admin port.
        PodsUnreachable,
        /// ConfigLive: some serving pods still serve an older config.
        Reloading,
        /// Ready: the API server refused a child (an invalid object, an admission
        /// webhook's denial); the message says which and why.
        ApplyFailed,
    }
}

vocabulary! {
    /// The reasons of the Events the operator publishes about a VirtualServer.
    EventReason {
        /// The spec was refused; the previous config keeps serving.
        Rejected,
        /// The children were created.
        Created,
        /// The pod template changed.
        RollingOut,
        /// A new config was delivered in place.
        Updated,
        /// The config is valid, but a rule shadows one that is protected (status.warnings).
        RulesShadowed,
        /// The certificate's ACME issuer only solves HTTP-01, which the edge cannot serve.
        Http01Unsupported,
        /// The API server refused a child object.
        ApplyFailed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vocabulary_is_the_strings_written_into_the_status() {
        assert_eq!(ConditionType::Ready.as_str(), "Ready");
        assert_eq!(
            ConditionType::CertificateReady.to_string(),
            "CertificateReady"
        );
        assert_eq!(Reason::Reloading.as_str(), "Reloading");
        assert_eq!(
            Reason::PrometheusOperatorNotInstalled.to_string(),
            "PrometheusOperatorNotInstalled"
        );
        assert_eq!(EventReason::Rejected.as_str(), "Rejected");
        assert_eq!(ConditionType::ALL.len(), 6);
        assert_eq!(Reason::ALL.len(), 24);
    }
}
