//! Protocol upgrades through the HTTP proxy (WebSocket): the token a client asks for, and
//! the splice of both upgraded connections once the backend answers 101.

use http::{HeaderMap, HeaderValue};

/// The Upgrade token of a request that asks for one (`Connection: upgrade`).
pub(super) fn upgrade_token(headers: &HeaderMap) -> Option<HeaderValue> {
    let asks = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
        });
    asks.then(|| headers.get(http::header::UPGRADE).cloned())
        .flatten()
}

/// Copies bytes both ways between the upgraded client and backend connections.
pub(super) async fn splice(
    client: hyper::upgrade::OnUpgrade,
    backend: hyper::upgrade::OnUpgrade,
    pool: &'static str,
) {
    let (client, backend) = match tokio::try_join!(client, backend) {
        Ok(pair) => pair,
        Err(e) => {
            tracing::warn!(pool, error = %e, "upgrade failed");
            return;
        }
    };
    let mut client = hyper_util::rt::TokioIo::new(client);
    let mut backend = hyper_util::rt::TokioIo::new(backend);
    if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut backend).await {
        tracing::debug!(pool, error = %e, "upgraded connection ended");
    }
}
