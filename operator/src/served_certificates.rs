//! Which certificates the edge pods actually serve: each serving pod's admin
//! `/certificates` (`[{"vhost": "shop", "serial": "0a1b...", "not_after": 1767225600}]`, one
//! entry per virtual server that has a certificate) is read back, so the status shows the
//! expiry and serial of what clients get, not of what was written into a Secret (the
//! kubelet refreshes Secret volumes lazily, and a pair the server refuses keeps the old one
//! serving). Pods that do not answer the path (an older image) are left out.

use crate::crd::ServedCertificate;
use crate::live_config::admin_get;
use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The most a pod's answer may weigh: one short entry per virtual server.
const LIMIT: usize = 64 * 1024;

/// One entry of a pod's `/certificates`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Report {
    /// The config's virtual server the certificate is served for.
    pub vhost: String,
    /// The serial number in hex.
    pub serial: String,
    /// The end of its validity, in seconds since the Unix epoch.
    pub not_after: i64,
    /// The pair the virtual server had, served while its own (a Secret the pod cannot
    /// mount, renamed since it started) is pending: not the current Secret's.
    #[serde(default)]
    pub fallback: bool,
}

/// What a pod reports serving; `None` when it does not answer (or not in this shape).
pub async fn served(pod: &Pod, admin_port: u16) -> Option<Vec<Report>> {
    let body = admin_get(pod, admin_port, "/certificates", LIMIT).await?;
    parse(&body)
}

/// A pod's config hash and, with `tls`, what it reports serving. Asked in that order: a
/// reload installs its certificates before its hash, so a pod that answers the desired
/// hash then answers that config's certificates (asked together, a reload between the
/// two answers paired the new hash with the old certificates: `NotServed` for a cycle).
pub async fn hash_then_served(
    pod: &Pod,
    admin_port: u16,
    tls: bool,
) -> (Option<String>, Option<Vec<Report>>) {
    let hash = crate::live_config::served_hash(pod, admin_port).await;
    if !tls {
        return (hash, None);
    }
    (hash, served(pod, admin_port).await)
}

/// A pod's `/certificates` body; `None` unless it is a JSON list of reports.
pub fn parse(body: &[u8]) -> Option<Vec<Report>> {
    serde_json::from_slice(body).ok()
}

/// The status entries from every pod's reports: one per certificate (Secret, serial and
/// expiry) with the number of pods serving it, soonest expiry first. `secrets` names the
/// Secret behind each virtual server of the config; reports of other virtual servers are
/// ignored, and a pod counts once per certificate.
pub fn summarize(
    secrets: &BTreeMap<String, String>,
    pods: &[Option<Vec<Report>>],
) -> Vec<ServedCertificate> {
    let mut counts: BTreeMap<(i64, &str, &str), i32> = BTreeMap::new();
    for reports in pods.iter().flatten() {
        let mut seen = std::collections::BTreeSet::new();
        for r in reports.iter().filter(|r| !r.fallback) {
            let Some(secret) = secrets.get(&r.vhost) else {
                continue;
            };
            let key = (r.not_after, secret.as_str(), r.serial.as_str());
            if seen.insert(key) {
                *counts.entry(key).or_default() += 1;
            }
        }
    }
    counts
        .into_iter()
        .map(|((not_after, secret, serial), pods)| ServedCertificate {
            secret_name: secret.to_string(),
            serial: serial.to_string(),
            not_after: rfc3339(not_after),
            pods,
        })
        .collect()
}

/// The Secrets (values of `secrets`, by virtual server) that some pod serving the desired
/// config answered without (or with the pair it had before, a fallback): its server has
/// not loaded the pair (a pod started before the Secret was added or renamed, or a pair
/// that does not load). Pods on another
/// config, and pods that did not answer, say nothing either way.
pub fn unserved(
    secrets: &BTreeMap<String, String>,
    pods: &[(bool, Option<Vec<Report>>)],
) -> Vec<String> {
    let mut missing: Vec<String> = secrets
        .iter()
        .filter(|(vhost, _)| {
            pods.iter().any(|(on_desired, reports)| {
                *on_desired
                    && reports
                        .as_ref()
                        .is_some_and(|r| !r.iter().any(|r| &r.vhost == *vhost && !r.fallback))
            })
        })
        .map(|(_, secret)| secret.clone())
        .collect();
    missing.sort();
    missing.dedup();
    missing
}

/// Seconds since the epoch as RFC 3339 (UTC); out of range, the epoch's own.
fn rfc3339(seconds: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(seconds)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(vhost: &str, serial: &str, not_after: i64) -> Report {
        Report {
            vhost: vhost.into(),
            serial: serial.into(),
            not_after,
            fallback: false,
        }
    }

    fn secrets() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("shop".to_string(), "shop-tls".to_string()),
            ("shop-tls-1".to_string(), "org-tls".to_string()),
        ])
    }

    #[test]
    fn the_servers_answer_is_read_and_anything_else_is_not() {
        let body = br#"[{"vhost": "shop", "serial": "0a1b", "not_after": 1767225600, "extra": 1}]"#;
        assert_eq!(parse(body), Some(vec![report("shop", "0a1b", 1767225600)]));
        assert_eq!(parse(b"[]"), Some(vec![]));
        let lent = br#"[{"vhost": "shop", "serial": "0a1b", "not_after": 1, "fallback": true}]"#;
        assert!(parse(lent).unwrap()[0].fallback);
        assert_eq!(parse(b"404 page not found"), None);
        assert_eq!(parse(br#"{"vhost": "shop"}"#), None);
    }

    #[test]
    fn pods_agreeing_make_one_entry_per_certificate_soonest_expiry_first() {
        let pod = Some(vec![
            report("shop", "aa", 1_800_000_000),
            report("shop-tls-1", "bb", 1_767_225_600),
        ]);
        let served = summarize(&secrets(), &[pod.clone(), pod]);
        assert_eq!(
            serde_json::to_value(&served).unwrap(),
            json!([
                { "secretName": "org-tls", "serial": "bb", "notAfter": "2026-01-01T00:00:00Z", "pods": 2 },
                { "secretName": "shop-tls", "serial": "aa", "notAfter": "2027-01-15T08:00:00Z", "pods": 2 }
            ])
        );
    }

    #[test]
    fn a_renewal_half_way_shows_both_certificates_and_silent_pods_are_left_out() {
        let old = Some(vec![report("shop", "01", 1_767_225_600)]);
        let new = Some(vec![report("shop", "02", 1_775_001_600)]);
        let served = summarize(&secrets(), &[old, new.clone(), None, new]);
        let summary: Vec<(&str, i32)> =
            served.iter().map(|c| (c.serial.as_str(), c.pods)).collect();
        assert_eq!(summary, [("01", 1), ("02", 2)]);
    }

    #[test]
    fn unknown_virtual_servers_are_ignored_and_no_answers_make_no_entries() {
        let pod = Some(vec![report("other", "01", 1), report("shop", "02", 2)]);
        let served = summarize(&secrets(), &[pod]);
        assert_eq!(served.len(), 1);
        assert_eq!(served[0].not_after, "1970-01-01T00:00:02Z");
        assert!(summarize(&secrets(), &[None, None]).is_empty());
        assert!(summarize(&secrets(), &[]).is_empty());
    }

    /// A local listener standing in for a pod's admin port: `answer` gives each path's
    /// status and body (awaited, so it may wait or change state); the pod to ask it as.
    async fn admin_port<F, Fut>(answer: F) -> (Pod, u16)
    where
        F: Fn(String) -> Fut + Clone + Send + Sync + 'static,
        Fut: std::future::Future<Output = (u16, String)> + Send + 'static,
    {
        use http_body_util::Full;
        use hyper::body::Bytes;
        use hyper_util::rt::TokioIo;

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let answer = answer.clone();
                let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
                    let answer = answer.clone();
                    async move {
                        let (status, body) = answer(req.uri().path().to_string()).await;
                        hyper::Response::builder()
                            .status(status)
                            .body(Full::new(Bytes::from(body)))
                    }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service),
                );
            }
        });
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": "edge-1" }, "status": { "podIP": "127.0.0.1" }
        }))
        .unwrap();
        (pod, port)
    }

    /// The body of `/certificates` is read; a pod answering 404 (an older server) or not at
    /// all gives `None`.
    #[tokio::test]
    async fn pods_are_asked_on_their_admin_port_and_an_older_server_is_tolerated() {
        let (pod, port) = admin_port(|path: String| async move {
            match path.as_str() {
                "/certificates" => (
                    200,
                    r#"[{"vhost":"shop","serial":"0a","not_after":1767225600}]"#.to_string(),
                ),
                _ => (404, "not found".to_string()),
            }
        })
        .await;
        assert_eq!(
            served(&pod, port).await,
            Some(vec![report("shop", "0a", 1767225600)])
        );
        assert_eq!(admin_get(&pod, port, "/elsewhere", 1024).await, None);
        let no_ip: Pod = serde_json::from_value(json!({ "metadata": { "name": "new" } })).unwrap();
        assert_eq!(served(&no_ip, port).await, None);
    }

    /// A pod that reloads while it is asked: its hash answer is slow and the reload lands
    /// as it is given. The certificates read with the new hash are the new config's.
    #[tokio::test]
    async fn the_certificates_are_asked_after_the_hash_they_go_with() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let reloaded = std::sync::Arc::new(AtomicBool::new(false));
        let (pod, port) = admin_port(move |path: String| {
            let reloaded = reloaded.clone();
            async move {
                match path.as_str() {
                    "/config-hash" => {
                        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                        reloaded.store(true, Ordering::SeqCst);
                        (200, "new\n".to_string())
                    }
                    "/certificates" if reloaded.load(Ordering::SeqCst) => (
                        200,
                        r#"[{"vhost":"shop","serial":"0a","not_after":1},{"vhost":"shop-tls-1","serial":"0b","not_after":2}]"#.to_string(),
                    ),
                    "/certificates" => (200, r#"[{"vhost":"shop","serial":"0a","not_after":1}]"#.to_string()),
                    _ => (404, "not found".to_string()),
                }
            }
        })
        .await;
        let (hash, reports) = hash_then_served(&pod, port, true).await;
        assert_eq!(hash.as_deref(), Some("new"));
        assert_eq!(
            unserved(&secrets(), &[(true, reports)]),
            Vec::<String>::new()
        );
        assert_eq!(
            hash_then_served(&pod, port, false).await,
            (Some("new".into()), None)
        );
    }

    #[test]
    fn a_secret_a_pod_on_the_desired_config_does_not_serve_is_unserved() {
        let secrets = secrets();
        let report = |vhost: &str| report(vhost, "01", 0);
        let both = Some(vec![report("shop"), report("shop-tls-1")]);
        let shop_only = Some(vec![report("shop")]);
        assert!(unserved(&secrets, &[(true, both.clone()), (true, None)]).is_empty());
        assert_eq!(
            unserved(&secrets, &[(true, both), (true, shop_only.clone())]),
            ["org-tls"]
        );
        // A pod still on the old config (without that certificate) says nothing.
        assert!(unserved(&secrets, &[(false, shop_only)]).is_empty());
        assert!(unserved(&secrets, &[]).is_empty());
        // The pair a renamed Secret's virtual server had is not the new Secret's.
        let lent = Report {
            fallback: true,
            ..report("shop-tls-1")
        };
        assert_eq!(
            unserved(&secrets, &[(true, Some(vec![report("shop"), lent]))]),
            ["org-tls"]
        );
    }
}
