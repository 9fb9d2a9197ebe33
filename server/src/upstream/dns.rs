//! The pure-Rust resolver (hickory) that re-resolves pool endpoints given by name, and
//! the task per pool that does it.

use super::pool::Pool;
use hickory_resolver::config::{NameServerConfigGroup, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::TokioResolver;
use std::sync::Arc;
use std::time::Duration;

/// A resolver for the configured name servers, or the system's. Its cache keeps answers
/// no longer than the refresh interval, so changes are seen within one interval.
pub fn resolver(cfg: &skiff_config::DnsConfig) -> Result<TokioResolver, String> {
    let mut builder = if cfg.servers.is_empty() {
        TokioResolver::builder_tokio()
            .map_err(|e| format!("dns: cannot read the system resolver configuration: {e}"))?
    } else {
        let mut group = NameServerConfigGroup::new();
        for s in &cfg.servers {
            let addr: std::net::SocketAddr = s
                .parse()
                .map_err(|_| format!("dns.servers: {s:?} is not IP:PORT"))?;
            group.merge(NameServerConfigGroup::from_ips_clear(
                &[addr.ip()],
                addr.port(),
                true,
            ));
        }
        TokioResolver::builder_with_config(
            ResolverConfig::from_parts(None, vec![], group),
            TokioConnectionProvider::default(),
        )
    };
    let opts: &mut ResolverOpts = builder.options_mut();
    opts.positive_max_ttl = Some(cfg.refresh);
    opts.negative_max_ttl = Some(cfg.refresh);
    Ok(builder.build())
}

/// Re-resolves the pool's named endpoints every `refresh`, until the pool (its config
/// generation) is gone. Runs on the current runtime; without one (as in `skiff check`),
/// names are resolved on each connection instead.
pub fn watch(pool: &Arc<Pool>, resolver: Arc<TokioResolver>, refresh: Duration) {
    let named = pool.named_endpoints();
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if named.is_empty() {
        return;
    }
    tracing::info!(pool = pool.name, names = named.len(), every = ?refresh, "resolving endpoint names by DNS");
    let weak = Arc::downgrade(pool);
    handle.spawn(async move {
        loop {
            let Some(pool) = weak.upgrade() else { return };
            for (i, host, port) in &named {
                match resolver.lookup_ip(host.as_str()).await {
                    Ok(ips) => {
                        let mut addrs: Vec<std::net::SocketAddr> =
                            ips.iter().map(|ip| (ip, *port).into()).collect();
                        addrs.sort();
                        if pool.set_addrs(*i, addrs.clone()) {
                            tracing::info!(pool = pool.name, endpoint = host.as_str(), addresses = ?addrs, "endpoint addresses changed");
                        }
                    }
                    Err(e) => tracing::warn!(pool = pool.name, endpoint = host.as_str(), error = %e, "DNS lookup failed; keeping the last addresses"),
                }
            }
            drop(pool);
            tokio::time::sleep(refresh).await;
        }
    });
}
