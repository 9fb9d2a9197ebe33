//! Reading and awaiting a VirtualServer's status conditions, as the operator writes them.

use crate::{wait_for, TestNamespace};
use skiff_operator::crd::VirtualServer;
use std::time::Duration;

/// The (status, reason, message) of condition `type_`, if the status has it.
pub fn condition(vs: &VirtualServer, type_: &str) -> Option<(String, String, String)> {
    let c = vs
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Waits (up to 3 minutes) until `name`'s condition `type_` has `status`, written for
/// the current generation: a condition left from before the last edit does not count.
pub async fn wait_condition(
    ns: &TestNamespace,
    name: &str,
    type_: &str,
    status: &str,
) -> VirtualServer {
    let api = ns.api::<VirtualServer>();
    wait_for(
        &format!("{type_}={status} on {name}"),
        Duration::from_secs(180),
        || {
            let api = api.clone();
            async move {
                let vs = api.get(name).await.ok()?;
                let current = vs.status.as_ref()?.observed_generation == vs.metadata.generation
                    && condition(&vs, type_)?.0 == status;
                current.then_some(vs)
            }
        },
    )
    .await
}
