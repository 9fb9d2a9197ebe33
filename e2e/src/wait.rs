//! Polling waits with a deadline and a message saying what was awaited.

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `probe` every 250 ms until it returns `Some`, panicking after `timeout` with
/// `what` in the message.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A response read by [`wait_http`].
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

/// GETs `url` until `accept` approves the response (a Service's rules appear in kube-proxy
/// a moment after its endpoints are ready), panicking after `timeout` with the last answer.
pub async fn wait_http(
    url: &str,
    timeout: Duration,
    accept: impl Fn(&HttpResponse) -> bool,
) -> HttpResponse {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let deadline = Instant::now() + timeout;
    loop {
        let last = match client.get(url).send().await {
            Ok(r) => {
                let status = r.status().as_u16();
                let headers = r.headers().clone();
                let body = r.text().await.unwrap_or_default();
                let response = HttpResponse {
                    status,
                    headers,
                    body,
                };
                if accept(&response) {
                    return response;
                }
                format!("{status}: {:.200}", response.body)
            }
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {url}; last answer: {last}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
