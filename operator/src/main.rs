//! `skiff-operator`: watches VirtualServers and reconciles them into the edge tier.
//! Serves /metrics, /healthz and /readyz; logs JSON lines.

use clap::Parser;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use skiff_operator::{parse_labels, Context, Elector, Metrics, NetworkPolicyConfig, Scope};
use std::convert::Infallible;
use std::sync::Arc;

#[derive(Parser, Debug)]
#[command(version, about = "Reconciles VirtualServers into Skiff edge farms")]
struct Args {
    /// Address for /metrics, /healthz and /readyz.
    #[arg(long, env = "SKIFF_OPERATOR_LISTEN", default_value = "0.0.0.0:8081")]
    listen: std::net::SocketAddr,
    /// Edge image for VirtualServers that name none.
    #[arg(long, env = "SKIFF_OPERATOR_EDGE_IMAGE", default_value = skiff_operator::DEFAULT_IMAGE)]
    edge_image: String,
    /// Take a Lease before reconciling, so that several replicas can run (one leads).
    #[arg(long, env = "SKIFF_OPERATOR_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    leader_election: bool,
    /// The operator's own namespace: where its leader Lease is, and whose pods (with
    /// --operator-pod-labels) the NetworkPolicies admit to the edge's admin port.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    lease_namespace: String,
    /// Log format: json (default) or text.
    #[arg(long, env = "SKIFF_OPERATOR_LOG_FORMAT", default_value = "json")]
    log_format: String,
    /// Give each VirtualServer NetworkPolicies: the edge's admin port only from the
    /// operator's pods (in --lease-namespace, with --operator-pod-labels) and the metrics
    /// namespaces, a pool's port only from its edge pods. Off: existing ones are deleted.
    #[arg(long, env = "SKIFF_OPERATOR_NETWORK_POLICY", default_value_t = false, action = clap::ArgAction::Set)]
    network_policy: bool,
    /// Labels of the operator's own pods, `key=value,...` (needed with --network-policy).
    #[arg(long, env = "SKIFF_OPERATOR_POD_LABELS", value_delimiter = ',')]
    operator_pod_labels: Vec<String>,
    /// Namespaces whose pods may scrape the edge's /metrics, by name (`monitoring,...`).
    #[arg(long, env = "SKIFF_OPERATOR_METRICS_NAMESPACES", value_delimiter = ',')]
    metrics_namespaces: Vec<String>,
    /// Namespaces whose pods may scrape the edge's /metrics, by label (`key=value,...`).
    #[arg(
        long,
        env = "SKIFF_OPERATOR_METRICS_NAMESPACE_LABELS",
        value_delimiter = ','
    )]
    metrics_namespace_labels: Vec<String>,
    /// Extra labels on each VirtualServer's ServiceMonitor (`key=value,...`), such as the
    /// `release=<name>` a kube-prometheus-stack Prometheus selects ServiceMonitors by.
    #[arg(
        long,
        env = "SKIFF_OPERATOR_SERVICE_MONITOR_LABELS",
        value_delimiter = ','
    )]
    service_monitor_labels: Vec<String>,
    /// Namespaces whose VirtualServers are reconciled; none: every namespace.
    #[arg(long, env = "SKIFF_OPERATOR_WATCH_NAMESPACES", value_delimiter = ',')]
    watch_namespaces: Vec<String>,
}

impl Args {
    /// The NetworkPolicy settings, or `None` when they are off.
    fn network_policy(&self) -> Result<Option<NetworkPolicyConfig>, String> {
        if !self.network_policy {
            return Ok(None);
        }
        let operator_labels = parse_labels(&self.operator_pod_labels)?;
        // Without labels the policy would admit every pod of the operator's namespace.
        if operator_labels.is_empty() {
            return Err(
                "--network-policy needs --operator-pod-labels (SKIFF_OPERATOR_POD_LABELS)".into(),
            );
        }
        Ok(Some(NetworkPolicyConfig {
            operator_namespace: self.lease_namespace.clone(),
            operator_labels,
            metrics_namespaces: self
                .metrics_namespaces
                .iter()
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .collect(),
            metrics_namespace_labels: parse_labels(&self.metrics_namespace_labels)?,
        }))
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let filter = tracing_subscriber::filter::Targets::new()
        .with_default(tracing::Level::INFO)
        .with_target("kube", tracing::Level::WARN);
    use tracing_subscriber::prelude::*;
    let fmt = tracing_subscriber::fmt::layer().with_ansi(false);
    if args.log_format == "json" {
        tracing_subscriber::registry()
            .with(fmt.json().with_filter(filter))
            .init();
    } else {
        tracing_subscriber::registry()
            .with(fmt.with_filter(filter))
            .init();
    }
    let network_policy = args.network_policy()?;
    let service_monitor_labels = parse_labels(&args.service_monitor_labels)?;
    let scopes = Scope::from_list(&args.watch_namespaces)?;
    skiff_operator::install_crypto_provider();
    let client = kube::Client::try_default().await?;
    let metrics = Arc::new(Metrics::new());
    let recorder = kube::runtime::events::Recorder::new(client.clone(), skiff_operator::reporter());
    // One context per controller: each keeps its own cache of peers.
    let context = || {
        Arc::new(Context {
            client: client.clone(),
            recorder: recorder.clone(),
            metrics: metrics.clone(),
            default_image: args.edge_image.clone(),
            network_policy: network_policy.clone(),
            service_monitor_labels: service_monitor_labels.clone(),
            peers: Default::default(),
        })
    };
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    tracing::info!(listen = %args.listen, "skiff-operator started");
    tokio::spawn(serve_admin(listener, metrics.clone()));
    let mut leadership = None;
    if args.leader_election {
        let identity = std::env::var("POD_NAME").unwrap_or_else(|_| {
            format!(
                "{}-{}",
                std::env::var("HOSTNAME").unwrap_or_default(),
                std::process::id()
            )
        });
        let elector = Elector::new(
            client.clone(),
            &args.lease_namespace,
            "skiff-operator",
            &identity,
        );
        // A standby that is told to stop while waiting for the lease just stops.
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            held = elector.acquire() => leadership = Some(held),
            _ = terminate.recv() => {
                tracing::info!("stopped while standing by");
                return Ok(());
            }
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
    metrics.set_leader(true);
    futures::future::join_all(
        scopes
            .into_iter()
            .map(|scope| skiff_operator::run(context(), scope)),
    )
    .await;
    if let Some(leadership) = leadership {
        leadership.release().await;
    }
    tracing::info!("skiff-operator stopped");
    Ok(())
}

/// The admin endpoint's content types.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const PLAIN: &str = "text/plain; charset=utf-8";

async fn serve_admin(listener: tokio::net::TcpListener, metrics: Arc<Metrics>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let metrics = metrics.clone();
                async move {
                    // prometheus-client writes OpenMetrics text; Prometheus 3 refuses a
                    // scrape without a Content-Type ("non-compliant scrape target").
                    let (status, content_type, body) = match req.uri().path() {
                        "/metrics" => (200, OPENMETRICS, metrics.encode()),
                        "/healthz" | "/readyz" => (200, PLAIN, "ok\n".to_string()),
                        _ => (404, PLAIN, "not found\n".to_string()),
                    };
                    Ok::<_, Infallible>(
                        Response::builder()
                            .status(status)
                            .header(hyper::header::CONTENT_TYPE, content_type)
                            .body(Full::new(Bytes::from(body)))
                            .unwrap(),
                    )
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
