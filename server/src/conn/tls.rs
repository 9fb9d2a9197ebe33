//! TLS connections: the handshake in the connection's own task under a deadline (never
//! in the accept loop, where one slow client would stall every accept), then HTTP/2 or
//! HTTP/1.1 as ALPN chose, on hyper over rustls; or, once the session moves into the
//! kernel (kTLS), the HTTP/1.1 fast path with sendfile on the socket itself.

use super::hyper::Wire;
use super::origin::{Origin, TlsSession};
use super::send_deadline::SendDeadline;
use crate::metrics::{HandshakeLabels, TlsModeLabels};
use crate::state::Shared;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpStream;

/// Serves one accepted connection on the TLS listener until it closes.
pub(super) async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    local_port: u16,
    shared: &Arc<Shared>,
) {
    let Some(tls) = shared.tls.clone() else {
        return;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config.clone());
    let handshake = tokio::time::timeout(tls.settings.handshake_timeout, acceptor.accept(stream));
    let count = |result: &'static str, version: &'static str| {
        shared
            .metrics
            .tls_handshakes
            .get_or_create(&HandshakeLabels { result, version })
            .inc();
    };
    let stream = match handshake.await {
        Err(_) => {
            count("timeout", "none");
            tracing::debug!(peer = %peer, "TLS handshake timed out");
            return;
        }
        Ok(Err(e)) => {
            count("failure", "none");
            tracing::debug!(peer = %peer, error = %e, "TLS handshake failed");
            return;
        }
        Ok(Ok(stream)) => stream,
    };
    let (_, conn) = stream.get_ref();
    let version = match conn.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => "1.3",
        Some(rustls::ProtocolVersion::TLSv1_2) => "1.2",
        _ => "other",
    };
    count("success", version);
    let wire = match conn.alpn_protocol() {
        Some(b"h2") => Wire::Http2,
        _ => Wire::Http1,
    };
    let session = TlsSession {
        slot: tls.slot_for(conn.server_name()),
    };
    shared
        .metrics
        .tls_connections
        .get_or_create(&TlsModeLabels { mode: "userspace" })
        .inc();
    let origin = Origin {
        peer,
        local_port,
        tls: Some(session),
    };
    let io = SendDeadline::new(stream, shared.settings.limits.send_timeout);
    super::hyper::serve(io, wire, origin, shared.clone()).await;
}
