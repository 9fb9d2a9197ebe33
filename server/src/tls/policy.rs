//! The TLS policy in one place: the crypto provider (chosen explicitly, so a second one
//! compiled in by a dependency never matters), TLS 1.2 and 1.3 (rustls offers no CBC and
//! no RSA key exchange at all), ALPN, tickets with rotating keys, no 0-RTT.

use super::table::Resolver;
use rustls::crypto::CryptoProvider;
use rustls::server::{ProducesTickets, ServerSessionMemoryCache};
use rustls::{ServerConfig, SupportedProtocolVersion};
use std::sync::Arc;

/// TLS 1.2 sessions remembered for resumption by ID (about 100 bytes each, process-wide).
const SESSION_CACHE: usize = 16 * 1024;

/// The provider the server uses: aws-lc-rs by default, ring with the `ring` feature alone.
pub fn provider() -> CryptoProvider {
    #[cfg(feature = "aws-lc-rs")]
    return rustls::crypto::aws_lc_rs::default_provider();
    #[cfg(all(feature = "ring", not(feature = "aws-lc-rs")))]
    return rustls::crypto::ring::default_provider();
}

fn ticketer() -> Result<Arc<dyn ProducesTickets>, rustls::Error> {
    // Keys rotate every six hours; the previous key still decrypts for one period.
    #[cfg(feature = "aws-lc-rs")]
    return rustls::crypto::aws_lc_rs::Ticketer::new();
    #[cfg(all(feature = "ring", not(feature = "aws-lc-rs")))]
    return rustls::crypto::ring::Ticketer::new();
}

/// The one `ServerConfig` of the process. Certificates come from `resolver`, so reloading
/// them keeps this config, its session cache and its ticket keys.
pub fn server_config(
    resolver: Arc<Resolver>,
    tls13_only: bool,
    ktls: bool,
) -> Result<Arc<ServerConfig>, String> {
    let versions: &[&SupportedProtocolVersion] = if tls13_only {
        &[&rustls::version::TLS13]
    } else {
        &[&rustls::version::TLS13, &rustls::version::TLS12]
    };
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider()))
        .with_protocol_versions(versions)
        .map_err(|e| format!("TLS versions: {e}"))?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config.ticketer = ticketer().map_err(|e| format!("TLS session tickets: {e}"))?;
    config.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE);
    // One ticket per full handshake: a client resumes one connection at a time, and each
    // ticket costs an encryption and a record.
    config.send_tls13_tickets = 1;
    // 0-RTT data can be replayed (RFC 8470): never accepted.
    config.max_early_data_size = 0;
    // kTLS needs the traffic secrets after the handshake.
    config.enable_secret_extraction = ktls;
    Ok(Arc::new(config))
}
