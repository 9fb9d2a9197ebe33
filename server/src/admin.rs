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
use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;

/// Reads gauges that are sampled rather than tracked (cache size) just before a scrape.
pub type Sampler = Arc<dyn Fn() + Send + Sync>;

/// Probes and scrapers need a handful of connections. Beyond this, a new connection
/// takes the place of the oldest, so a flood cannot hold the process's descriptors nor
/// keep the kubelet's probes out.
pub const MAX_CONNECTIONS: usize = 64;
/// One peer's share: its new connection beyond this takes the place of its own oldest,
/// so one client cannot push every other one out.
pub const MAX_CONNECTIONS_PER_PEER: usize = 8;
/// A probe's or scraper's request head arrives at once; a half-sent head is cut off.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// No admin connection lives longer: scrapers reconnect, a slow reader cannot stay.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

/// The admin connections open, oldest first.
#[derive(Default)]
struct Open {
    next_id: u64,
    conns: VecDeque<(u64, IpAddr, tokio::task::AbortHandle)>,
}

impl Open {
    /// Makes room for a connection from `peer`: its own oldest goes when it has its
    /// share, else the oldest of all when the table is full.
    fn make_room(&mut self, peer: IpAddr) {
        let own = self.conns.iter().filter(|c| c.1 == peer).count();
        let evict = if own >= MAX_CONNECTIONS_PER_PEER {
            self.conns.iter().position(|c| c.1 == peer)
        } else if self.conns.len() >= MAX_CONNECTIONS {
            Some(0)
        } else {
            None
        };
        if let Some((_, _, handle)) = evict.and_then(|i| self.conns.remove(i)) {
            handle.abort();
        }
    }
}

pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    shutdown: ShutdownControl,
    sample: Sampler,
) {
    let open = Arc::new(Mutex::new(Open::default()));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors, most likely: wait rather than spin the control
                // thread, which also handles signals and reloads.
                tracing::warn!(error = %e, "admin accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let metrics = metrics.clone();
        let shutdown = shutdown.clone();
        let sample = sample.clone();
        let mut table = open.lock().unwrap_or_else(|e| e.into_inner());
        table.make_room(peer.ip());
        let id = table.next_id;
        table.next_id += 1;
        let open_for_task = open.clone();
        let handle = tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let r = route(&req, &metrics, &shutdown, &sample);
                async move { Ok::<_, Infallible>(r) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), svc);
            let _ = tokio::time::timeout(CONNECTION_LIFETIME, conn).await;
            let mut table = open_for_task.lock().unwrap_or_else(|e| e.into_inner());
            table.conns.retain(|c| c.0 != id);
        });
        table
            .conns
            .push_back((id, peer.ip(), handle.abort_handle()));
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
