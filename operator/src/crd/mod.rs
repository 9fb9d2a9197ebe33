//! The `VirtualServer` custom resource (skiff.dev/v1alpha1): its spec, next to its status.
//! `crdgen` writes the CRD from these types into crds/virtualserver.yaml.

mod rules;
mod slo;
mod spec;
mod status;
mod tls;

pub use rules::*;
pub use slo::*;
pub use spec::*;
pub use status::*;
pub use tls::*;
