//! Leader election on a coordination.k8s.io Lease, so that two operator replicas can run:
//! only the holder reconciles. Takes are optimistic (resourceVersion), a holder renews
//! every `renew` and a lease not renewed for `duration` may be taken over. A leader that
//! has not renewed within `renew_deadline` (shorter than `duration`, as client-go's
//! RenewDeadline) exits, so it never reconciles beside a new leader; a renewal that hangs
//! counts as failed when that deadline passes.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use kube::Client;
use std::time::Duration;

pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
    renew: Duration,
    renew_deadline: Duration,
}

/// Why a leader stopped renewing its lease.
#[derive(Debug, PartialEq, Eq)]
pub enum Lost {
    /// Another replica holds it.
    TakenOver,
    /// No renewal succeeded within the renew deadline (the API server refused, failed or
    /// did not answer).
    NotRenewed,
}

/// Whether `lease` lets `identity` take it now.
pub fn can_take(lease: &Lease, identity: &str, now: Timestamp) -> bool {
    let Some(spec) = &lease.spec else { return true };
    match spec.holder_identity.as_deref() {
        None | Some("") => true,
        Some(holder) if holder == identity => true,
        Some(_) => {
            let seconds = spec.lease_duration_seconds.unwrap_or(15) as i64;
            match &spec.renew_time {
                Some(MicroTime(renewed)) => *renewed + SignedDuration::from_secs(seconds) < now,
                None => true,
            }
        }
    }
}

impl Elector {
    pub fn new(client: Client, namespace: &str, name: &str, identity: &str) -> Elector {
        Elector {
            api: Api::namespaced(client, namespace),
            name: name.into(),
            identity: identity.into(),
            duration: Duration::from_secs(15),
            renew: Duration::from_secs(5),
            renew_deadline: Duration::from_secs(10),
        }
    }

    /// Tries once to take or renew the lease; true when this process holds it.
    async fn try_hold(&self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let spec = |transitions: i32, acquired: Option<MicroTime>| LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.duration.as_secs() as i32),
            renew_time: Some(MicroTime(now)),
            acquire_time: Some(acquired.unwrap_or(MicroTime(now))),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        };
        match self.api.get_opt(&self.name).await? {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec(0, None)),
                };
                match self.api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
            Some(mut lease) => {
                if !can_take(&lease, &self.identity, now) {
                    return Ok(false);
                }
                let old = lease.spec.clone().unwrap_or_default();
                let mine = old.holder_identity.as_deref() == Some(self.identity.as_str());
                let transitions = old.lease_transitions.unwrap_or(0) + i32::from(!mine);
                let acquired = if mine { old.acquire_time } else { None };
                lease.spec = Some(spec(transitions, acquired));
                // replace carries the resourceVersion read above: a racing taker gets 409.
                match self
                    .api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
                {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Waits until this process holds the lease, then keeps renewing it in the background.
    /// The returned handle hands the lease back on graceful shutdown.
    pub async fn acquire(self) -> Leadership {
        loop {
            match self.try_hold().await {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "leader election"),
            }
            tokio::time::sleep(self.renew).await;
        }
        tracing::info!(lease = %self.name, identity = %self.identity, "became the leader");
        let handle = Leadership {
            api: self.api.clone(),
            name: self.name.clone(),
            identity: self.identity.clone(),
            renewing: None,
        };
        let renewing = tokio::spawn(async move {
            match self.keep_renewing().await {
                Lost::TakenOver => {
                    tracing::error!("lost the leader lease to another replica; exiting")
                }
                Lost::NotRenewed => tracing::error!("leader lease not renewed in time; exiting"),
            }
            std::process::exit(1);
        });
        Leadership {
            renewing: Some(renewing),
            ..handle
        }
    }

    /// Renews the held lease every `renew` until that fails for good. Each attempt gets
    /// what is left of the renew deadline, so a request that hangs cannot keep a leader
    /// acting past its lease.
    async fn keep_renewing(&self) -> Lost {
        let mut last_renewed = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.renew).await;
            let left = self.renew_deadline.saturating_sub(last_renewed.elapsed());
            match tokio::time::timeout(left, self.try_hold()).await {
                Ok(Ok(true)) => last_renewed = tokio::time::Instant::now(),
                Ok(Ok(false)) => return Lost::TakenOver,
                Ok(Err(e)) => tracing::warn!(error = %e, "cannot renew the leader lease"),
                Err(_) => tracing::warn!("renewing the leader lease did not finish in time"),
            }
            if last_renewed.elapsed() >= self.renew_deadline {
                return Lost::NotRenewed;
            }
        }
    }
}

/// A held lease. Releasing it on shutdown lets a standby (or the next pod of a rollout)
/// lead at once instead of waiting out the lease duration, as client-go's ReleaseOnCancel.
pub struct Leadership {
    api: Api<Lease>,
    name: String,
    identity: String,
    renewing: Option<tokio::task::JoinHandle<()>>,
}

impl Leadership {
    /// Stops renewing and empties the holder, if this process still holds the lease.
    pub async fn release(mut self) {
        if let Some(task) = self.renewing.take() {
            task.abort();
        }
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        // A racing taker makes this a 409, which is as good as released.
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(lease = %self.name, "released the leader lease"),
            Err(e) => tracing::warn!(error = %e, "could not release the leader lease"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lease(holder: &str, renewed_secs_ago: i64) -> Lease {
        let now = Timestamp::now();
        serde_json::from_value(json!({
            "metadata": { "name": "skiff-operator" },
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": 15,
                "renewTime": MicroTime(now - SignedDuration::from_secs(renewed_secs_ago)),
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_fresh_lease_of_another_holder_is_not_taken() {
        assert!(!can_take(&lease("other", 3), "me", Timestamp::now()));
    }

    /// The API server takes the lease's GET and never answers: the leader gives up at
    /// the renew deadline, before another replica could take the lease over.
    #[tokio::test(start_paused = true)]
    async fn a_renewal_that_hangs_ends_the_leadership_at_the_renew_deadline() {
        let (service, mut handle) = tower_test::mock::pair::<
            http::Request<kube::client::Body>,
            http::Response<kube::client::Body>,
        >();
        let elector = Elector::new(
            Client::new(service, "default"),
            "ns",
            "skiff-operator",
            "me",
        );
        let started = tokio::time::Instant::now();
        let apiserver = tokio::spawn(async move {
            let (request, _unanswered) = handle.next_request().await.expect("a renewal");
            assert_eq!(request.method(), http::Method::GET);
            assert!(request.uri().path().ends_with("/leases/skiff-operator"));
            // Held unanswered until the leader gives up.
            std::future::pending::<()>().await
        });
        let lost = tokio::time::timeout(Duration::from_secs(60), elector.keep_renewing()).await;
        assert_eq!(lost, Ok(Lost::NotRenewed), "still leading a minute later");
        let took = started.elapsed();
        assert_eq!(
            took, elector.renew_deadline,
            "gave up at the deadline, not later"
        );
        assert!(took < elector.duration);
        apiserver.abort();
    }

    #[test]
    fn an_expired_lease_or_our_own_is_taken() {
        assert!(can_take(&lease("other", 20), "me", Timestamp::now()));
        assert!(can_take(&lease("me", 3), "me", Timestamp::now()));
        assert!(can_take(&lease("", 3), "me", Timestamp::now()));
    }
}
