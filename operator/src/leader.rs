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
use tokio::time::Instant;

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
        let held_since = loop {
            // The lease's renewTime is stamped as the attempt starts: the deadlines run from
            // there, not from the answer, which may come late.
            let attempt = Instant::now();
            match tokio::time::timeout(self.renew_deadline, self.try_hold()).await {
                Ok(Ok(true)) => break attempt,
                Ok(Ok(false)) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "leader election"),
                Err(_) => tracing::warn!("leader election: the API server did not answer in time"),
            }
            tokio::time::sleep(self.renew).await;
        };
        tracing::info!(lease = %self.name, identity = %self.identity, "became the leader");
        let handle = Leadership {
            api: self.api.clone(),
            name: self.name.clone(),
            identity: self.identity.clone(),
            renewing: None,
        };
        let renewing = tokio::spawn(async move {
            match self.keep_renewing(held_since).await {
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

    /// Renews the lease held since `renewed` (the start of the attempt that took or last
    /// renewed it) every `renew`, and every `RETRY` after a failure, until the renew
    /// deadline passes without a renewal: it is checked before each attempt and bounds
    /// the attempt itself, so neither a late answer nor a hanging request keeps a leader
    /// acting past it.
    async fn keep_renewing(&self, mut renewed: Instant) -> Lost {
        // Timed from the renewal's start, as its deadline is: an answer that came late
        // leaves the next attempt its whole margin.
        let mut next = renewed + self.renew;
        loop {
            let deadline = renewed + self.renew_deadline;
            tokio::time::sleep_until(next.min(deadline)).await;
            let attempt = Instant::now();
            if attempt >= deadline {
                return Lost::NotRenewed;
            }
            match tokio::time::timeout_at(deadline, self.try_hold()).await {
                Ok(Ok(true)) => {
                    renewed = attempt;
                    next = attempt + self.renew;
                }
                Ok(Ok(false)) => return Lost::TakenOver,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "cannot renew the leader lease");
                    next = Instant::now() + RETRY;
                }
                Err(_) => tracing::warn!("renewing the leader lease did not finish in time"),
            }
        }
    }
}

/// How soon a failed renewal is tried again (client-go's retry period).
const RETRY: Duration = Duration::from_secs(2);

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

    type Handle = tower_test::mock::Handle<
        http::Request<kube::client::Body>,
        http::Response<kube::client::Body>,
    >;

    fn elector() -> (Elector, Handle) {
        let (service, handle) = tower_test::mock::pair();
        let client = Client::new(service, "default");
        (Elector::new(client, "ns", "skiff-operator", "me"), handle)
    }

    /// Answers the next request, a renewal's GET or PUT of the lease, with a lease held by
    /// this process, after `delay`.
    async fn answer(handle: &mut Handle, delay: Duration) {
        let (request, respond) = handle.next_request().await.expect("a renewal");
        assert!(request.uri().path().ends_with("/leases/skiff-operator"));
        tokio::time::sleep(delay).await;
        let body = serde_json::to_vec(&lease("me", 0)).unwrap();
        respond.send_response(
            http::Response::builder()
                .body(kube::client::Body::from(body))
                .unwrap(),
        );
    }

    /// The API server takes the lease's GET and never answers: the leader gives up at
    /// the renew deadline, before another replica could take the lease over.
    #[tokio::test(start_paused = true)]
    async fn a_renewal_that_hangs_ends_the_leadership_at_the_renew_deadline() {
        let (elector, mut handle) = elector();
        let started = Instant::now();
        let apiserver = tokio::spawn(async move {
            let (request, _unanswered) = handle.next_request().await.expect("a renewal");
            assert_eq!(request.method(), http::Method::GET);
            std::future::pending::<()>().await
        });
        let lost = tokio::time::timeout(Duration::from_secs(60), elector.keep_renewing(started));
        assert_eq!(
            lost.await,
            Ok(Lost::NotRenewed),
            "still leading a minute later"
        );
        assert_eq!(started.elapsed(), elector.renew_deadline);
        apiserver.abort();
    }

    /// A renewal answered late counts from when it was sent (when its renewTime was
    /// stamped), not from its answer: the next one's deadline is 10 s after that.
    #[tokio::test(start_paused = true)]
    async fn a_late_answer_does_not_move_the_deadline_past_the_lease() {
        let (elector, mut handle) = elector();
        let started = Instant::now();
        let apiserver = tokio::spawn(async move {
            // The first renewal (at 5 s): its GET answered at once, its PUT at 9 s.
            answer(&mut handle, Duration::ZERO).await;
            answer(&mut handle, Duration::from_secs(4)).await;
            // The next one hangs.
            let _unanswered = handle.next_request().await;
            std::future::pending::<()>().await
        });
        let lost = tokio::time::timeout(Duration::from_secs(60), elector.keep_renewing(started));
        assert_eq!(lost.await, Ok(Lost::NotRenewed));
        assert_eq!(
            started.elapsed(),
            elector.renew + elector.renew_deadline,
            "10 s after the renewal was sent, not after its answer"
        );
        apiserver.abort();
    }

    /// Taking the lease took 6 s (its answer came late): the first renewal goes out at
    /// once, inside the deadline that runs from the take's start, instead of the leader
    /// giving up at that deadline without trying.
    #[tokio::test(start_paused = true)]
    async fn a_take_answered_late_is_renewed_at_once() {
        let (elector, mut handle) = elector();
        let taken = Instant::now();
        tokio::time::advance(Duration::from_secs(6)).await;
        let apiserver = tokio::spawn(async move {
            answer(&mut handle, Duration::ZERO).await;
            answer(&mut handle, Duration::ZERO).await;
            let _unanswered = handle.next_request().await;
            std::future::pending::<()>().await
        });
        let lost = tokio::time::timeout(Duration::from_secs(60), elector.keep_renewing(taken));
        assert_eq!(lost.await, Ok(Lost::NotRenewed));
        assert_eq!(
            taken.elapsed(),
            Duration::from_secs(16),
            "renewed at 6 s, then 10 s"
        );
        apiserver.abort();
    }

    #[test]
    fn an_expired_lease_or_our_own_is_taken() {
        assert!(can_take(&lease("other", 20), "me", Timestamp::now()));
        assert!(can_take(&lease("me", 3), "me", Timestamp::now()));
        assert!(can_take(&lease("", 3), "me", Timestamp::now()));
    }
}
