//! Prometheus metrics (prometheus-client). Every label value is bounded: methods outside
//! the standard set become "OTHER", vhosts are configured names, codes are status numbers.
//! Never a raw path or Host header from a request.

use http::Method;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use std::sync::Arc;

mod labels;
mod per_worker;
pub use labels::*;
use per_worker::{CountCell, HistogramCell, SummedCounter, SummedHistogram};

pub struct Metrics {
    registry: Registry,
    // What every request records: each worker adds to cells of its own (`per_worker`).
    pub requests: Family<RequestLabels, SummedCounter>,
    pub request_duration: Family<VhostLabels, SummedHistogram, fn() -> SummedHistogram>,
    pub response_bytes: Family<VhostLabels, SummedCounter>,
    pub connections_open: Gauge,
    /// The configured `max_connections`, so that saturation is `open / max`.
    pub connections_max: Gauge,
    /// Idle keep-alive connections parked out of their tasks (`conn::park`).
    pub connections_parked: Gauge,
    /// Parked connections closed early to admit new ones at `max_connections`.
    pub connections_reclaimed: Counter,
    pub cache_hits: SummedCounter,
    pub cache_misses: SummedCounter,
    pub cache_bytes: Gauge,
    /// Request bytes held in files for CGI backends, sampled at scrape time.
    pub upstream_body_buffer_bytes: Gauge,
    pub sendfile_bytes: Counter,
    pub config_reloads: Family<ResultLabels, Counter>,
    pub config_last_success: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// 1 for the hash of the configuration being served (one series at a time).
    pub config_info: Family<HashLabels, Gauge>,
    pub basic_auth_left_out: Gauge,
    /// The same hash as text, for the admin `/config-hash` (read by the operator).
    pub config_hash: arc_swap::ArcSwap<String>,
    /// The certificates served, per virtual server, as JSON for the admin
    /// `/certificates` (read by the operator): `[{"vhost","serial","not_after"}]`.
    pub served_certificates: arc_swap::ArcSwap<String>,
    pub upstream_requests: Family<PoolCodeLabels, Counter>,
    pub upstream_duration: Family<PoolPhaseLabels, Histogram, fn() -> Histogram>,
    pub upstream_active: Family<PoolLabels, Gauge>,
    pub upstream_failures: Family<PoolReasonLabels, Counter>,
    /// Endpoints by passive-health state, sampled at scrape time.
    pub upstream_endpoints: Family<PoolStateLabels, Gauge>,
    /// Workers behind the endpoints up (pools with `workers` only), sampled at scrape time.
    pub upstream_workers: Family<PoolLabels, Gauge>,
    /// bcrypt runs for basic auth, by result: success, wrong_password, unknown_user.
    pub auth_verifications: Family<ResultLabels, Counter>,
    /// Basic-auth verifications waiting for a slot in the verification pool or running.
    pub auth_verifications_pending: Gauge,
    pub tls_handshakes: Family<HandshakeLabels, Counter>,
    /// Established TLS connections by where records are encrypted.
    pub tls_connections: Family<TlsModeLabels, Counter>,
    /// Connections closed because the kernel refused their keys once they had left
    /// rustls (kTLS set-up failed half way).
    pub tls_kernel_failures: Counter,
    pub tls_certificate_reloads: Family<ResultLabels, Counter>,
    /// The served certificate's notAfter per virtual server (configured names only).
    pub tls_certificate_expiry: Family<VhostNameLabels, Gauge>,
    /// notBefore beside notAfter: the expiry alert allows for short-lived certificates.
    pub tls_certificate_issued: Family<VhostNameLabels, Gauge>,
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        let mut registry = Registry::with_prefix("skiff");
        let requests = Family::<RequestLabels, SummedCounter>::default();
        registry.register("http_requests", "HTTP requests answered", requests.clone());
        let request_duration =
            Family::new_with_constructor(request_duration_histogram as fn() -> SummedHistogram);
        registry.register(
            "http_request_duration_seconds",
            "Time from a complete request head to the response being handed to the kernel",
            request_duration.clone(),
        );
        let response_bytes = Family::<VhostLabels, SummedCounter>::default();
        registry.register(
            "http_response_bytes",
            "Response body bytes sent",
            response_bytes.clone(),
        );
        let connections_open = Gauge::default();
        registry.register(
            "connections_open",
            "Client connections currently open",
            connections_open.clone(),
        );
        let connections_max = Gauge::default();
        registry.register(
            "connections_max",
            "Client connections this server admits at once (max_connections)",
            connections_max.clone(),
        );
        let connections_parked = Gauge::default();
        registry.register(
            "connections_parked",
            "Idle keep-alive connections parked out of their tasks (a subset of the open ones)",
            connections_parked.clone(),
        );
        let connections_reclaimed = Counter::default();
        registry.register(
            "connections_reclaimed",
            "Idle parked connections closed before their keep-alive deadline to admit new ones at the connection limit",
            connections_reclaimed.clone(),
        );
        let cache_hits = SummedCounter::default();
        registry.register(
            "cache_hits",
            "I/O cache lookups served from memory",
            cache_hits.clone(),
        );
        let cache_misses = SummedCounter::default();
        registry.register(
            "cache_misses",
            "I/O cache lookups that went to the file system",
            cache_misses.clone(),
        );
        let cache_bytes = Gauge::default();
        registry.register(
            "cache_bytes",
            "Bytes held by the I/O cache",
            cache_bytes.clone(),
        );
        let upstream_body_buffer_bytes = Gauge::default();
        registry.register(
            "upstream_body_buffer_bytes",
            "Request body bytes buffered in files before a CGI backend takes them (at most 1 GiB; past that, bodies with a length stream)",
            upstream_body_buffer_bytes.clone(),
        );
        let sendfile_bytes = Counter::default();
        registry.register(
            "sendfile_bytes",
            "Body bytes sent with sendfile(2)",
            sendfile_bytes.clone(),
        );
        let config_reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "config_reloads",
            "Configuration reloads by result: success, failure (old config kept), restart_required",
            config_reloads.clone(),
        );
        // Every result from 0, so the first failure is an increase the alerts see (a series
        // born at 1 shows none).
        for result in ["success", "failure", "restart_required"] {
            let _ = config_reloads.get_or_create(&ResultLabels { result });
        }
        let config_last_success = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        registry.register(
            "config_last_reload_success_timestamp_seconds",
            "When a configuration was last loaded successfully (Unix seconds)",
            config_last_success.clone(),
        );
        let basic_auth_left_out = Gauge::default();
        registry.register(
            "basic_auth_entries_left_out",
            "htpasswd lines the configuration being served left out (not bcrypt, malformed, cost above 14): those users cannot sign in",
            basic_auth_left_out.clone(),
        );
        let config_info = Family::<HashLabels, Gauge>::default();
        registry.register(
            "config_info",
            "The configuration being served, by hash",
            config_info.clone(),
        );
        let upstream_requests = Family::<PoolCodeLabels, Counter>::default();
        registry.register(
            "upstream_requests",
            "Requests answered by backend pools, by status",
            upstream_requests.clone(),
        );
        let upstream_duration =
            Family::new_with_constructor(duration_histogram as fn() -> Histogram);
        registry.register(
            "upstream_duration_seconds",
            "Time from sending a request to a pool until its response head (phase=first_byte) and its last body byte (phase=total)",
            upstream_duration.clone(),
        );
        let upstream_active = Family::<PoolLabels, Gauge>::default();
        registry.register(
            "upstream_active_requests",
            "Requests in flight to each pool",
            upstream_active.clone(),
        );
        let upstream_failures = Family::<PoolReasonLabels, Counter>::default();
        registry.register(
            "upstream_failures",
            "Backend failures by reason: connect, timeout, protocol, io, stale, no_script, client_timeout, body_too_large, client_body, queue_full (every reason starts at 0 for each pool)",
            upstream_failures.clone(),
        );
        let upstream_endpoints = Family::<PoolStateLabels, Gauge>::default();
        registry.register(
            "upstream_endpoints",
            "Pool endpoints by state: up, or down after max_fails failures",
            upstream_endpoints.clone(),
        );
        let upstream_workers = Family::<PoolLabels, Gauge>::default();
        registry.register(
            "upstream_workers",
            "Backend workers of each pool that declares its workers per endpoint: that number times the endpoints up (the capacity a busy ratio divides active requests by)",
            upstream_workers.clone(),
        );
        let auth_verifications = Family::<ResultLabels, Counter>::default();
        registry.register(
            "auth_verifications",
            "Basic-auth bcrypt verifications by result: success, wrong_password, unknown_user (verified against a dummy hash)",
            auth_verifications.clone(),
        );
        let auth_verifications_pending = Gauge::default();
        registry.register(
            "auth_verifications_pending",
            "Basic-auth verifications waiting for or running in the verification pool",
            auth_verifications_pending.clone(),
        );
        let tls_handshakes = Family::<HandshakeLabels, Counter>::default();
        registry.register(
            "tls_handshakes",
            "TLS handshakes by result (success, failure, timeout) and protocol version",
            tls_handshakes.clone(),
        );
        let tls_connections = Family::<TlsModeLabels, Counter>::default();
        registry.register(
            "tls_connections",
            "Established TLS connections by where records are encrypted: kernel (kTLS, files by sendfile) or userspace",
            tls_connections.clone(),
        );
        let tls_kernel_failures = Counter::default();
        registry.register(
            "tls_kernel_failures",
            "TLS connections closed because the kernel refused their keys after they left rustls (kTLS set-up failed half way)",
            tls_kernel_failures.clone(),
        );
        let tls_certificate_reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "tls_certificate_reloads",
            "Certificate reloads after their files changed, by result: success, failure (the previous certificate keeps serving)",
            tls_certificate_reloads.clone(),
        );
        let tls_certificate_expiry = Family::<VhostNameLabels, Gauge>::default();
        registry.register(
            "tls_certificate_expiry_timestamp_seconds",
            "When the certificate each virtual server serves expires (notAfter, Unix seconds)",
            tls_certificate_expiry.clone(),
        );
        let tls_certificate_issued = Family::<VhostNameLabels, Gauge>::default();
        registry.register(
            "tls_certificate_not_before_timestamp_seconds",
            "When the certificate each virtual server serves became valid (notBefore, Unix seconds)",
            tls_certificate_issued.clone(),
        );
        registry.register(
            "build",
            "Build information",
            Info::new(BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            }),
        );
        Arc::new(Metrics {
            registry,
            requests,
            request_duration,
            response_bytes,
            connections_open,
            connections_max,
            connections_parked,
            connections_reclaimed,
            cache_hits,
            cache_misses,
            cache_bytes,
            upstream_body_buffer_bytes,
            sendfile_bytes,
            config_reloads,
            config_last_success,
            config_info,
            basic_auth_left_out,
            config_hash: Default::default(),
            served_certificates: arc_swap::ArcSwap::from_pointee("[]\n".to_owned()),
            upstream_requests,
            upstream_duration,
            upstream_active,
            upstream_failures,
            upstream_endpoints,
            upstream_workers,
            auth_verifications,
            auth_verifications_pending,
            tls_handshakes,
            tls_connections,
            tls_kernel_failures,
            tls_certificate_reloads,
            tls_certificate_expiry,
            tls_certificate_issued,
        })
    }

    /// Records a configuration now being served, and how many htpasswd lines it left out.
    pub fn config_loaded(&self, hash: &str, htpasswd_left_out: usize) {
        self.basic_auth_left_out.set(htpasswd_left_out as i64);
        self.config_hash.store(Arc::new(hash.to_owned()));
        self.config_info.clear();
        self.config_info
            .get_or_create(&HashLabels {
                hash: hash.to_owned(),
            })
            .set(1);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.config_last_success.set(now);
    }

    pub fn upstream_failure(&self, pool: &'static str, reason: &'static str) {
        self.upstream_failures
            .get_or_create(&PoolReasonLabels { pool, reason })
            .inc();
    }

    /// The handles a pool's requests update, looked up once. Its failure counters start at
    /// 0 for every reason, so that rates and alerts read 0, not "no data", until one fails.
    pub fn pool(&self, pool: &'static str) -> PoolMetrics {
        for &reason in UPSTREAM_FAILURE_REASONS {
            let _ = self
                .upstream_failures
                .get_or_create(&PoolReasonLabels { pool, reason });
        }
        let phase = |phase| {
            self.upstream_duration
                .get_or_create(&PoolPhaseLabels { pool, phase })
                .clone()
        };
        PoolMetrics {
            pool,
            active: self
                .upstream_active
                .get_or_create(&PoolLabels { pool })
                .clone(),
            first_byte: phase("first_byte"),
            total: phase("total"),
            codes: std::sync::RwLock::new(Vec::new()),
        }
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(8192);
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

/// Every `reason` of `skiff_upstream_failures_total`.
pub const UPSTREAM_FAILURE_REASONS: &[&str] = &[
    "connect",
    "timeout",
    "protocol",
    "io",
    "stale",
    "no_script",
    "client_timeout",
    "body_too_large",
    "client_body",
    "body_buffer",
    "rewrite",
    "body_memory",
    "queue_full",
];

/// One pool's metric handles, so its requests do not hash label sets (SipHash, under the
/// family's lock) several times each.
pub struct PoolMetrics {
    pool: &'static str,
    pub active: Gauge,
    /// `skiff_upstream_duration_seconds{phase="first_byte"}`: until the response head.
    pub first_byte: Histogram,
    /// `skiff_upstream_duration_seconds{phase="total"}`: until the last body byte.
    pub total: Histogram,
    /// `skiff_upstream_requests_total` by status code, created as codes are seen.
    codes: std::sync::RwLock<Vec<(u16, Counter)>>,
}

impl PoolMetrics {
    pub fn count(&self, metrics: &Metrics, code: u16) {
        let known = self.codes.read().unwrap_or_else(|e| e.into_inner());
        if let Some((_, c)) = known.iter().find(|(k, _)| *k == code) {
            c.inc();
            return;
        }
        drop(known);
        let c = metrics
            .upstream_requests
            .get_or_create(&PoolCodeLabels {
                pool: self.pool,
                code,
            })
            .clone();
        c.inc();
        let mut known = self.codes.write().unwrap_or_else(|e| e.into_inner());
        if !known.iter().any(|(k, _)| *k == code) {
            known.push((code, c));
        }
    }
}

fn duration_histogram() -> Histogram {
    // 100 µs .. 10 s in round steps: an SLO's latency threshold is one of them.
    Histogram::new(skiff_config::DURATION_BUCKETS)
}

/// The request-duration bounds, for the per-worker cells.
static DURATION_BOUNDS: [f64; 16] = skiff_config::DURATION_BUCKETS;

fn request_duration_histogram() -> SummedHistogram {
    SummedHistogram::new(&DURATION_BOUNDS)
}

/// A worker's memo of its cells, so the hot path neither hashes label sets nor writes
/// lines other workers write. It stays on the thread that made it (not `Send`): each
/// cell has one writer.
pub struct WorkerMetrics {
    pub shared: Arc<Metrics>,
    counters: Vec<(&'static str, &'static str, u16, Arc<CountCell>)>,
    per_vhost: Vec<(&'static str, Arc<HistogramCell>, Arc<CountCell>)>,
    cache_hits: Arc<CountCell>,
    cache_misses: Arc<CountCell>,
    one_thread: std::marker::PhantomData<*const ()>,
}

impl WorkerMetrics {
    pub fn new(shared: Arc<Metrics>) -> WorkerMetrics {
        WorkerMetrics {
            cache_hits: shared.cache_hits.cell(),
            cache_misses: shared.cache_misses.cell(),
            shared,
            counters: Vec::new(),
            per_vhost: Vec::new(),
            one_thread: std::marker::PhantomData,
        }
    }

    pub fn record(
        &mut self,
        vhost: &'static str,
        method: &Method,
        status: u16,
        body_bytes: u64,
        seconds: f64,
        cache_hit: Option<bool>,
    ) {
        let m = method_label(method);
        match self
            .counters
            .iter()
            .find(|(v, cm, cs, _)| *cs == status && std::ptr::eq(*cm, m) && std::ptr::eq(*v, vhost))
        {
            Some((.., c)) => c.add(1),
            None => {
                let c = self
                    .shared
                    .requests
                    .get_or_create(&RequestLabels {
                        vhost,
                        method: m,
                        code: status,
                    })
                    .cell();
                c.add(1);
                self.counters.push((vhost, m, status, c));
            }
        }
        let (duration, bytes) = match self
            .per_vhost
            .iter()
            .find(|(v, ..)| std::ptr::eq(*v, vhost))
        {
            Some((_, d, b)) => (d, b),
            None => {
                let labels = VhostLabels { vhost };
                let d = self.shared.request_duration.get_or_create(&labels).cell();
                let b = self.shared.response_bytes.get_or_create(&labels).cell();
                self.per_vhost.push((vhost, d, b));
                let last = self.per_vhost.last().expect("just pushed");
                (&last.1, &last.2)
            }
        };
        duration.observe(seconds);
        bytes.add(body_bytes);
        match cache_hit {
            Some(true) => self.cache_hits.add(1),
            Some(false) => self.cache_misses.add(1),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bounds are the round numbers an SLO threshold is picked from, rendered as the
    /// operator renders `skiff_operator_virtualserver_slo_latency_threshold_seconds{le}`
    /// so recording rules can join on `le`.
    #[test]
    fn request_duration_buckets_are_the_round_slo_bounds() {
        let m = Metrics::new();
        m.request_duration
            .get_or_create(&VhostLabels { vhost: "site" })
            .cell()
            .observe(0.2);
        let text = m.encode();
        let les: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("skiff_http_request_duration_seconds_bucket{"))
            .filter_map(|l| l.split("le=\"").nth(1)?.split('"').next())
            .collect();
        assert_eq!(
            les,
            [
                "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
                "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf"
            ]
        );
        assert!(text.contains(
            "skiff_http_request_duration_seconds_bucket{le=\"0.25\",vhost=\"site\"} 1\n"
        ));
        assert!(text
            .contains("skiff_http_request_duration_seconds_bucket{le=\"0.1\",vhost=\"site\"} 0\n"));
    }

    #[test]
    fn reload_counters_start_at_zero() {
        let text = Metrics::new().encode();
        for result in ["success", "failure", "restart_required"] {
            let line = format!("skiff_config_reloads_total{{result=\"{result}\"}} 0\n");
            assert!(text.contains(&line), "{line:?} missing from\n{text}");
        }
    }

    #[test]
    fn a_pools_failure_counters_start_at_zero_for_every_reason() {
        let m = Metrics::new();
        let _pool = m.pool("php");
        let text = m.encode();
        for reason in UPSTREAM_FAILURE_REASONS {
            let line =
                format!("skiff_upstream_failures_total{{pool=\"php\",reason=\"{reason}\"}} 0\n");
            assert!(text.contains(&line), "{line:?} missing from\n{text}");
        }
    }
}
