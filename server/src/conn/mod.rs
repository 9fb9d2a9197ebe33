//! The connection layer: each accepted connection starts on the HTTP/1.1 fast path (`h1`)
//! and moves to hyper (`hyper`) for what the fast path does not serve (h2c, request
//! bodies, upgrades). Both route through `exchange::front` and record through
//! `exchange::Exchange`; file bodies go out with `file_send` (sendfile) or `reply_body`.

mod activity;
mod file_send;
mod h1;
mod hyper;
mod recorded_body;
mod reply_body;
mod rewind;
mod send_deadline;

use crate::state::Shared;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpStream;

/// Serves one accepted connection until it closes.
pub(crate) async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    local_port: u16,
    shared: &Arc<Shared>,
) {
    if let h1::Ended::Handoff(stream, prefix) = h1::serve(stream, peer, local_port, shared).await {
        let io = send_deadline::SendDeadline::new(
            rewind::Rewind::new(stream, prefix),
            shared.settings.limits.send_timeout,
        );
        hyper::serve(io, peer, local_port, shared.clone()).await;
    }
}
