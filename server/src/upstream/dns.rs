//! The pure-Rust resolver (hickory) that re-resolves pool endpoints given by name.

use hickory_resolver::config::{NameServerConfigGroup, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::TokioResolver;

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
