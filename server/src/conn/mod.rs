//! The connection layer: each accepted connection starts on the HTTP/1.1 fast path (`h1`)
//! and moves to hyper (`hyper`) for what the fast path does not serve (h2c, request
//! bodies, upgrades); TLS connections (`tls`) handshake first, then go to hyper over
//! rustls, or, when the kernel takes the session (kTLS, `tls::ktls`), to the fast path
//! on the socket as plain connections do. Both route through `exchange::front` and record through
//! `exchange::Exchange`; file bodies go out with `file_send` (sendfile) or `reply_body`.

mod activity;
mod file_send;
mod h1;
mod hyper;
mod origin;
mod recorded_body;
mod reply_body;
mod rewind;
mod send_deadline;
mod tls;

use crate::state::Shared;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpStream;

/// Serves one accepted plain-HTTP connection until it closes.
pub(crate) async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    local_port: u16,
    shared: &Arc<Shared>,
) {
    if let h1::Ended::Handoff(stream, prefix, _) =
        h1::serve(stream, peer, local_port, shared, None).await
    {
        // The fast path hands an HTTP/2 connection over only once its whole preface is in.
        let wire = if prefix.starts_with(skiff_http::h1_head::H2_PREFACE) {
            hyper::Wire::Http2
        } else {
            hyper::Wire::Http1
        };
        let io = send_deadline::SendDeadline::new(
            rewind::Rewind::new(stream, prefix),
            shared.settings.limits.send_timeout,
        );
        let origin = origin::Origin {
            peer,
            local_port,
            tls: None,
        };
        hyper::serve(io, wire, origin, shared.clone()).await;
    }
}

/// Serves one accepted connection on the TLS listener until it closes.
pub(crate) async fn serve_tls(
    stream: TcpStream,
    peer: SocketAddr,
    local_port: u16,
    shared: &Arc<Shared>,
) {
    tls::serve(stream, peer, local_port, shared).await;
}
