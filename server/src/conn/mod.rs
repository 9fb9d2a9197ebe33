//! The connection layer: each accepted connection starts on the HTTP/1.1 fast path (`h1`)
//! and moves to Skiff's HTTP/2 driver (`h2`) for h2c, or to hyper (`hyper`) for what the
//! fast path does not serve (request bodies, upgrades; HTTP/2 too with
//! `--h2-engine hyper`); TLS connections (`tls`) handshake first, then go to the HTTP/2
//! driver (ALPN h2) or hyper over rustls, or, when the kernel takes the session (kTLS,
//! `tls::ktls`), to the fast path on the socket as plain connections do. Both route through `exchange::front` and record through
//! `exchange::Exchange`; file bodies go out with `file_send` (sendfile) or `reply_body`.

mod activity;
mod admission;
mod file_send;
mod h1;
mod h2;
mod hyper;
mod origin;
mod park;
mod recorded_body;
mod reply_body;
mod rewind;
mod send_deadline;
mod stop_wait;
mod tls;

pub(crate) use admission::Admission;
pub(crate) use park::close_longest_idle;

use crate::settings::H2Engine;
use std::net::SocketAddr;
use tokio::net::TcpStream;

/// Serves one accepted plain-HTTP connection until it closes, is parked, or is handed to
/// a task of its own (HTTP/2, hyper); `resumed` is the last request's time of a parked
/// connection that is readable again.
pub(crate) async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    local_port: u16,
    admission: Admission,
    resumed: Option<std::time::Instant>,
) {
    let shared = &admission.shared;
    let stream = h1::transport::Transport::Plain(stream);
    match h1::serve(stream, peer, local_port, shared, None, resumed).await {
        h1::Ended::Closed => {}
        h1::Ended::Parked(stream, last_active) => {
            park::park(stream, peer, local_port, last_active, admission);
        }
        h1::Ended::Handoff(h1::transport::Transport::Plain(stream), prefix, _) => {
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
            // A task of its own: this one's future is sized for the fast path (about
            // 1.4 KB), which a long-lived HTTP/2 connection would otherwise keep reserved.
            let shared = shared.clone();
            if wire == hyper::Wire::Http2 && shared.settings.h2_engine == H2Engine::Skiff {
                tokio::spawn(h2::serve(io, origin, shared, admission));
            } else {
                // Boxed before the spawn, so the task does not hold `io` twice.
                let serving = Box::pin(hyper::serve(io, wire, origin, shared));
                tokio::spawn(async move {
                    serving.await;
                    drop(admission);
                });
            }
        }
        // A plain connection stays plain.
        h1::Ended::Handoff(h1::transport::Transport::Rustls(_), ..) => {}
    }
}

/// Starts this worker's parking of idle connections (`park`) and its shutdown wake-up
/// of waiting ones (`stop_wait`).
pub(crate) fn start_worker(shared: &std::sync::Arc<crate::state::Shared>) {
    park::start(shared, resume);
    stop_wait::start(shared);
    // A thread-local with a destructor registers it on first use, which runs the loader's
    // code: done now, before startup's pages go back, not on the first connection.
    h1::claim_worker_buffers();
    h2::claim_worker_buffers();
}

/// Serves a parked connection that became readable, in a new task.
fn resume(conn: park::Parked) {
    let park::Parked {
        stream,
        peer,
        local_port,
        last_request,
        admission,
    } = conn;
    tokio::spawn(async move {
        match TcpStream::from_std(stream) {
            Ok(stream) => serve(stream, peer, local_port, admission, Some(last_request)).await,
            Err(e) => tracing::debug!(error = %e, "cannot resume a parked connection"),
        }
    });
}

/// Handshakes one accepted connection on the TLS listener; it is then served in a task
/// of its own (`tls::serve`).
pub(crate) async fn serve_tls(
    stream: TcpStream,
    peer: SocketAddr,
    local_port: u16,
    admission: Admission,
) {
    Box::pin(tls::serve(stream, peer, local_port, admission)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future an async fn taking these arguments returns.
    fn future_size<A, B, C, D, F>(_f: impl Fn(A, B, C, D) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// A connection's task reserves its future's whole size for as long as it lives. The
    /// rare paths (TLS's handshake, pool requests, writers that must wait) are boxed, and
    /// HTTP/2 and hyper move to tasks of their own, so that a keep-alive connection's task
    /// stays near 1 KiB (it was 9 KiB before, the TLS path's size) while it is served;
    /// once idle it is parked and holds no task (`park`; BENCHMARKS.md, idle connections).
    #[test]
    fn connection_tasks_reserve_little_for_rare_paths() {
        let plain = future_size(|s: TcpStream, p: SocketAddr, l: u16, a: Admission| {
            serve(s, p, l, a, None)
        });
        let tls = future_size(serve_tls);
        // Debug builds, where tests run, lay futures out a little larger than release. The
        // connection's `Admission` (40 bytes) was the accept loop's closure's before, a
        // resumed connection's last request time came with parking, and the fast path's
        // stream became plain or rustls (`h1::transport`, 48 bytes) when it took HTTPS.
        assert!(
            plain <= 1456,
            "a plain connection's future is {plain} bytes"
        );
        assert!(tls <= 176, "a TLS connection's future is {tls} bytes");
    }
}
