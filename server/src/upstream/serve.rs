//! Serving a request from a pool: admission (the bound on requests in flight), the
//! request body limit, dispatch to the CGI exchanges or the HTTP proxy, failures turned
//! into 502/503/504 with a log line naming the pool and endpoint, and the pool's metrics.

use super::body::TimedBody;
use super::body_spill;
use super::client_body::{ClientBodyError, GATHER_BEFORE_ADMISSION};
use super::failure::Failure;
use super::request::{BackendRequest, Message};
use super::response::{error_response, Payload, UpstreamResponse};
use super::route::Forwarding;
use super::{cgi, proxy};
use crate::metrics::Metrics;
use http::StatusCode;
use http_body_util::BodyExt;
use std::sync::Arc;
use std::time::Instant;

/// Serves a request from its route's pool, with the rule's and the virtual server's
/// changes to the response (also to one refused before the backend was asked).
pub async fn serve(req: BackendRequest<'_>, metrics: &Arc<Metrics>) -> UpstreamResponse {
    let route = req.route;
    let mut resp = exchange(req, metrics).await;
    if let Some(edits) = &route.edits {
        edits.apply(
            resp.status,
            &mut resp.head,
            crate::coarse_clock::unix_seconds(),
            route.authorized,
        );
    }
    super::edits::apply_cors(route.cors.as_deref(), &mut resp.head);
    if let Some(hsts) = &route.hsts {
        resp.head
            .set_if_absent(http::header::STRICT_TRANSPORT_SECURITY, hsts);
    }
    resp
}

async fn exchange(req: BackendRequest<'_>, metrics: &Arc<Metrics>) -> UpstreamResponse {
    let BackendRequest {
        route,
        client,
        local_port,
        message,
    } = req;
    let pool = &route.backend.pool;
    let declared = match &message {
        Message::Http(req) => req
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok()),
        Message::Cgi(_) => Some(0),
    };
    if declared.is_some_and(|n| n > pool.max_body_size) {
        metrics.upstream_failure(pool.name, "body_too_large");
        return error_response(StatusCode::PAYLOAD_TOO_LARGE);
    }
    // A rewritten path is checked before the body is read or a slot taken.
    let rewritten = match (&route.backend.forwarding, &message) {
        (
            Forwarding::Http {
                rewrite: Some(r), ..
            },
            Message::Http(req),
        ) => match r.target(&route.path, req.uri().query()) {
            Ok(target) => Some(target),
            Err(status) => {
                if status.is_server_error() {
                    tracing::warn!(
                        pool = pool.name,
                        path = route.path.as_str(),
                        "the path is not under what the rewriting rule matched"
                    );
                } else {
                    tracing::debug!(
                        pool = pool.name,
                        path = route.path.as_str(),
                        "rewritten path refused: a dot segment"
                    );
                }
                metrics.upstream_failure(pool.name, "rewrite");
                return error_response(status);
            }
        },
        _ => None,
    };
    // The body first, the slot after: a client whose body trickles in holds no backend
    // worker meanwhile. A CGI backend needs CONTENT_LENGTH up front, so a body without one
    // is read whole (within the pool's limit); others up to a bound, then streamed.
    let (message, declared) = match message {
        Message::Http(req) => {
            let (parts, mut body) = req.into_parts();
            body.limit(pool.max_body_size);
            let cgi = matches!(route.backend.forwarding, Forwarding::Cgi { .. });
            let mut gathered = body.gather(GATHER_BEFORE_ADMISSION).await;
            // A CGI worker (php-fpm, uWSGI) serves one request at a time: a large upload is
            // buffered whole in a file first, so a slow one holds no worker; what meets the
            // files' budget streams. One without a length must be gathered whole anyway
            // (for CONTENT_LENGTH): in memory, as before, past the budget or without a file.
            if cgi && matches!(gathered, Ok(false)) {
                let whole = declared.is_none();
                let dir = std::env::temp_dir();
                gathered = match body.spill_rest(&dir, &body_spill::FILES, whole).await {
                    Ok(false) if whole => {
                        let all = usize::try_from(pool.max_body_size).unwrap_or(usize::MAX);
                        body.gather(all.saturating_add(1)).await
                    }
                    spilled => spilled,
                };
            }
            if let Err(e) = gathered {
                let failure = Failure::Client(e);
                match &failure {
                    Failure::Client(ClientBodyError::Buffer(why)) => {
                        body_spill::warn_buffer_failure(pool.name, why)
                    }
                    Failure::Client(e @ ClientBodyError::BufferFull) => {
                        body_spill::warn_buffer_failure(pool.name, &e.to_string())
                    }
                    _ => {}
                }
                tracing::debug!(pool = pool.name, error = %failure, "client body refused");
                metrics.upstream_failure(pool.name, failure.reason());
                return error_response(failure.status());
            }
            let declared = declared.or_else(|| body.collected_len());
            (
                Message::Http(http::Request::from_parts(parts, body)),
                declared,
            )
        }
        cgi => (cgi, declared),
    };
    let Some(mut slot) = pool.admit() else {
        metrics.upstream_failure(pool.name, "queue_full");
        return error_response(StatusCode::SERVICE_UNAVAILABLE);
    };
    let handles = pool.metrics.get_or_init(|| metrics.pool(pool.name));
    let active = InFlight::new(&handles.active);
    let start = Instant::now();
    let result = match (&route.backend.forwarding, message) {
        (
            Forwarding::Http {
                host,
                upgrades,
                rewrite,
                ..
            },
            Message::Http(req),
        ) => {
            let (parts, body) = req.into_parts();
            let to = proxy::Target {
                host: host.as_ref(),
                upgrades,
                secure: route.secure,
                rewritten,
                stripped_prefix: rewrite.as_ref().and_then(|r| r.stripped_prefix()),
                forwarded: &route.forwarded,
            };
            proxy::forward(pool, &mut slot, parts, body, client, to)
                .await
                .map(UpstreamResponse::from_hyper)
        }
        (Forwarding::Cgi { .. }, message) => {
            cgi::exchange(route, &mut slot, message, declared, client, local_port).await
        }
        (Forwarding::Http { .. }, Message::Cgi(_)) => Err((
            Failure::Protocol("a CGI request for an HTTP pool".into()),
            String::new(),
        )),
    };
    drop(active);
    let resp = match result {
        Ok(resp) => resp,
        Err((failure, endpoint)) => {
            if let Failure::Client(ClientBodyError::Buffer(why)) = &failure {
                // Reading the buffered body back failed: this machine's disk, not the client.
                body_spill::warn_buffer_failure(pool.name, why);
            } else if matches!(failure, Failure::NoScript(_) | Failure::Client(_)) {
                // The client's doing, not the backend's: not worth a warning per request.
                tracing::debug!(pool = pool.name, error = %failure, "request refused");
            } else {
                tracing::warn!(pool = pool.name, endpoint = endpoint.as_str(), error = %failure, "upstream request failed");
            }
            metrics.upstream_failure(pool.name, failure.reason());
            error_response(failure.status())
        }
    };
    handles.count(metrics, resp.status.as_u16());
    let first_byte = start.elapsed().as_secs_f64();
    handles.first_byte.observe(first_byte);
    // The total is taken when the body's last frame is sent (at once for whole bodies).
    match resp.payload {
        Payload::Whole(_) => {
            handles.total.observe(first_byte);
            resp
        }
        Payload::Stream(inner) => UpstreamResponse {
            payload: Payload::Stream(
                TimedBody {
                    inner,
                    start,
                    total: handles.total.clone(),
                    done: false,
                }
                .boxed(),
            ),
            ..resp
        },
    }
}

/// One request in `skiff_upstream_active_requests`, until dropped: also when the client
/// leaves and the request's future is dropped mid-exchange.
struct InFlight<'g>(&'g prometheus_client::metrics::gauge::Gauge);

impl<'g> InFlight<'g> {
    fn new(gauge: &'g prometheus_client::metrics::gauge::Gauge) -> InFlight<'g> {
        gauge.inc();
        InFlight(gauge)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}
