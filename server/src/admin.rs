//! The admin listener: /healthz (the process is alive), /readyz (503 while draining, so
//! load balancers stop sending traffic before listening stops), /metrics, and
//! /config-hash (the hash of the configuration being served, which the operator reads
//! back to report which config is live).

use crate::metrics::Metrics;
use crate::shutdown::{Phase, ShutdownControl};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Reads gauges that are sampled rather than tracked (cache size) just before a scrape.
pub type Sampler = Arc<dyn Fn() + Send + Sync>;

pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    shutdown: ShutdownControl,
    sample: Sampler,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let metrics = metrics.clone();
        let shutdown = shutdown.clone();
        let sample = sample.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let r = route(&req, &metrics, &shutdown, &sample);
                async move { Ok::<_, Infallible>(r) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
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
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}
