//! The admin listener: /healthz (the process is alive), /readyz (503 while draining, so
//! load balancers stop sending traffic before listening stops), /metrics, and
//! /config-hash (the hash of the configuration being served, which the operator reads
//! back to report which config is live) and /certificates (what each virtual server's
//! HTTPS serves: serial and expiry).

use crate::metrics::Metrics;
use crate::shutdown::{Phase, ShutdownControl};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Reads gauges that are sampled rather than tracked (cache size) just before a scrape.
pub type Sampler = Arc<dyn Fn() + Send + Sync>;

/// Probes and scrapers need a handful of connections; beyond this, new ones are closed
/// at once rather than queued, so a flood cannot hold the process's descriptors.
pub const MAX_CONNECTIONS: usize = 64;
/// A probe's or scraper's request head arrives at once; a half-sent head is cut off.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// No admin connection lives longer: scrapers reconnect, a slow reader cannot stay.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    shutdown: ShutdownControl,
    sample: Sampler,
) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::warn!(%peer, "admin connection refused: {MAX_CONNECTIONS} already open");
            drop(stream);
            continue;
        };
        let metrics = metrics.clone();
        let shutdown = shutdown.clone();
        let sample = sample.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let svc = service_fn(move |req| {
                let r = route(&req, &metrics, &shutdown, &sample);
                async move { Ok::<_, Infallible>(r) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), svc);
            let _ = tokio::time::timeout(CONNECTION_LIFETIME, conn).await;
        });
    }
}

fn route(
    req: &Request<Incoming>,
    metrics: &Metrics,
    shutdown: &ShutdownControl,
    sample: &Sampler,
) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: &'static str| {
        Response::builder()
            .status(status)
            .header("content-type", "text/plain; charset=utf-8")
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .expect("static response")
    };
    match req.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" => {
            if shutdown.phase() == Phase::Serving {
                text(StatusCode::OK, "ready\n")
            } else {
                text(StatusCode::SERVICE_UNAVAILABLE, "draining\n")
            }
        }
        "/metrics" => {
            sample();
            Response::builder()
                .header(
                    "content-type",
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                )
                .body(Full::new(Bytes::from(metrics.encode())))
                .expect("static response")
        }
        "/config-hash" => Response::builder()
            .header("content-type", "text/plain; charset=utf-8")
            .body(Full::new(Bytes::from(format!(
                "{}\n",
                metrics.config_hash.load()
            ))))
            .expect("static response"),
        "/certificates" => Response::builder()
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(
                metrics.served_certificates.load().as_str().to_owned(),
            )))
            .expect("static response"),
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}
