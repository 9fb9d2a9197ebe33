//! Which config the edge pods actually serve: each ready pod's admin `/config-hash` is
//! read back, so the status says when a hot reload has reached every pod instead of
//! assuming it from what was written to the ConfigMap (the kubelet refreshes ConfigMap
//! volumes lazily, up to a minute later).

use crate::crd::Reason;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use std::time::Duration;

/// How long one pod gets to answer.
const TIMEOUT: Duration = Duration::from_secs(2);

/// The hash a pod serves, or `None` when it cannot be asked (not ready, no IP, no answer).
pub async fn served_hash(pod: &Pod, admin_port: u16) -> Option<String> {
    let body = admin_get(pod, admin_port, "/config-hash", 1024).await?;
    let text = std::str::from_utf8(&body).ok()?.trim();
    (!text.is_empty() && text.len() <= 64).then(|| text.to_string())
}

/// The body of a successful `GET path` on a pod's admin port, at most `limit` bytes; `None`
/// when the pod has no IP, does not answer within [`TIMEOUT`], answers with an error
/// status (an older server without the path: 404) or sends more.
pub async fn admin_get(pod: &Pod, admin_port: u16, path: &str, limit: usize) -> Option<Bytes> {
    let ip = pod.status.as_ref()?.pod_ip.clone()?;
    tokio::time::timeout(TIMEOUT, fetch(&ip, admin_port, path, limit))
        .await
        .ok()
        .flatten()
}

async fn fetch(ip: &str, port: u16, path: &str, limit: usize) -> Option<Bytes> {
    let stream = tokio::net::TcpStream::connect((ip, port)).await.ok()?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .ok()?;
    tokio::spawn(conn);
    let req = hyper::Request::get(path)
        .header("host", ip)
        .body(Empty::<Bytes>::new())
        .ok()?;
    let resp = sender.send_request(req).await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let body = Limited::new(resp.into_body(), limit);
    Some(body.collect().await.ok()?.to_bytes())
}

/// Whether a pod is Ready and not on its way out: only those serve traffic.
pub fn serving(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The ConfigLive verdict from what each serving pod reported.
#[derive(Debug, PartialEq, Eq)]
pub struct Verdict {
    pub live: bool,
    pub reason: Reason,
    pub message: String,
    /// The hash all serving pods agree on, if they do.
    pub live_hash: Option<String>,
}

pub fn verdict(desired: &str, reports: &[Option<String>]) -> Verdict {
    let on_desired = reports
        .iter()
        .filter(|r| r.as_deref() == Some(desired))
        .count();
    let unreachable = reports.iter().filter(|r| r.is_none()).count();
    let first = reports.first().cloned().flatten();
    let agreed = first.filter(|h| reports.iter().all(|r| r.as_ref() == Some(h)));
    let n = reports.len();
    if n == 0 {
        return Verdict {
            live: false,
            reason: Reason::NoPodsServing,
            message: "no edge pod is ready yet".into(),
            live_hash: None,
        };
    }
    if on_desired == n {
        return Verdict {
            live: true,
            reason: Reason::Live,
            message: format!("{n}/{n} serving pods serve config {desired}"),
            live_hash: agreed,
        };
    }
    let (reason, detail) = if unreachable > 0 {
        (
            Reason::PodsUnreachable,
            format!("; {unreachable} did not answer on the admin port"),
        )
    } else {
        (Reason::Reloading, String::new())
    };
    Verdict {
        live: false,
        reason,
        message: format!("{on_desired}/{n} serving pods serve config {desired}{detail}"),
        live_hash: agreed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn some(h: &str) -> Option<String> {
        Some(h.into())
    }

    #[test]
    fn live_only_when_every_serving_pod_serves_the_desired_config() {
        let v = verdict("new", &[some("new"), some("new")]);
        assert!(v.live);
        assert_eq!(v.live_hash.as_deref(), Some("new"));
        assert_eq!(v.message, "2/2 serving pods serve config new");
    }

    #[test]
    fn a_pod_still_on_the_old_config_means_reloading() {
        let v = verdict("new", &[some("new"), some("old")]);
        assert!(!v.live);
        assert_eq!(v.reason, Reason::Reloading);
        assert_eq!(v.live_hash, None, "the pods disagree");
        assert_eq!(v.message, "1/2 serving pods serve config new");
        let v = verdict("new", &[some("old"), some("old")]);
        assert_eq!(
            v.live_hash.as_deref(),
            Some("old"),
            "all still serve the old one"
        );
    }

    #[test]
    fn a_pod_that_does_not_answer_is_reported_as_such() {
        let v = verdict("new", &[some("new"), None]);
        assert!(!v.live);
        assert_eq!(v.reason, Reason::PodsUnreachable);
        assert!(v.message.contains("1 did not answer"), "{}", v.message);
    }

    #[test]
    fn no_serving_pod_is_not_live() {
        let v = verdict("new", &[]);
        assert!(!v.live);
        assert_eq!(v.reason, Reason::NoPodsServing);
    }
}
