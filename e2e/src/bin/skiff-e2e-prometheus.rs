//! Points the local cluster's Prometheus at the ServiceMonitors of some namespaces and
//! loads the chart's rules, as the e2e harness does in a test (scripts/quickstart.sh).

use clap::Parser;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use skiff_e2e::prometheus::{chart_rules, scrape_configs, service_monitors, Prometheus};
use std::time::Duration;

#[derive(Parser)]
#[command(
    about = "Configure the e2e cluster's Prometheus from ServiceMonitors and the chart's rules"
)]
struct Args {
    /// Namespaces whose ServiceMonitors Prometheus scrapes (repeatable).
    #[arg(long = "namespace", required = true)]
    namespaces: Vec<String>,
    /// The namespace the chart's PrometheusRule is rendered for.
    #[arg(long)]
    release_namespace: String,
    /// How long to wait for every target to be up.
    #[arg(long, default_value = "120", value_name = "SECONDS")]
    wait: u64,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    let cluster = skiff_e2e::running_cluster().await;
    let mut configs = Vec::new();
    for ns in &args.namespaces {
        let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
        if namespaces
            .get_opt(ns)
            .await
            .expect("get namespace")
            .is_none()
        {
            continue;
        }
        let monitors = service_monitors(&cluster.client, ns);
        let list = monitors
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("list the ServiceMonitors in {ns}: {e}"));
        for m in &list.items {
            let m = serde_json::to_value(m).unwrap();
            configs.extend(scrape_configs(&m, &cluster.kubeconfig, None));
        }
    }
    let rules = chart_rules(&cluster.kubeconfig, &args.release_namespace, &[]);
    let prom = Prometheus::new();
    let changed = prom.configure(&configs, &rules).await;
    let pools: Vec<(String, usize)> = configs
        .iter()
        .map(|c| (c["job_name"].as_str().unwrap().to_string(), 1))
        .collect();
    prom.wait_targets_up(&pools, Duration::from_secs(args.wait))
        .await;
    let groups = rules["groups"].as_array().map_or(0, Vec::len);
    println!(
        "Prometheus {} {} scrape jobs, all up, and {groups} rule groups",
        if changed {
            "reloaded with"
        } else {
            "already had"
        },
        pools.len()
    );
}
