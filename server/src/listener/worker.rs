//! Worker threads, listeners and the accept loop.

use crate::access_log::AccessLog;
use crate::metrics::WorkerMetrics;
use crate::shutdown::stopping;
use crate::state::{install_worker, with_worker, Shared, WorkerState};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket};

/// Binds a listening socket with SO_REUSEPORT so that every worker can own one.
pub fn bind_listener(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    // tokio's TcpSocket needs a runtime only for conversion, not for binding.
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.set_nodelay(true)?;
    socket.bind(addr)?;
    let listener = socket.listen(4096)?;
    listener.into_std()
}

/// Starts the worker threads. The first listener is bound here, so a bad address fails
/// fast, and port 0 resolves to one real port that every worker then shares.
pub fn run(shared: Arc<Shared>) -> io::Result<(SocketAddr, Vec<JoinHandle<()>>)> {
    let threads = shared.settings.threads.max(1);
    let first = bind_std(shared.settings.listen)?;
    let addr = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..threads {
        listeners.push(bind_std(addr)?);
    }
    let mut handles = Vec::with_capacity(threads);
    for (i, listener) in listeners.into_iter().enumerate() {
        let shared = shared.clone();
        let handle = std::thread::Builder::new()
            .name(format!("skiff-worker-{i}"))
            .spawn(move || worker_main(listener, shared))?;
        handles.push(handle);
    }
    Ok((addr, handles))
}

fn bind_std(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    // Binding must happen inside a runtime context for tokio's socket conversion.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    let _guard = rt.enter();
    bind_listener(addr)
}

fn worker_main(listener: std::net::TcpListener, shared: Arc<Shared>) {
    let policy = shared.settings.cpu_scheduling;
    if let Err(e) = policy.apply_to_current_thread() {
        // A seccomp profile may forbid it; serving works the same, only less batched.
        tracing::warn!(error = %e, ?policy, "cannot set the worker's CPU scheduling policy");
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start a worker runtime");
            return;
        }
    };
    install_worker(WorkerState {
        metrics: WorkerMetrics::new(shared.metrics.clone()),
        log: AccessLog::new(
            shared.settings.access_log,
            shared.settings.access_log_destination.clone(),
        ),
    });
    rt.block_on(async {
        let listener = match TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot register the listener");
                return;
            }
        };
        // The access log is flushed at least once a second, even when quiet.
        let flusher = tokio::spawn(async {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                with_worker(|w| w.log.flush());
            }
        });
        let local = Arc::new(AtomicUsize::new(0));
        accept_loop(listener, &shared, &local).await;
        // Listening has stopped: let this worker's connections finish their responses.
        while local.load(Ordering::Acquire) > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        flusher.abort();
    });
    with_worker(|w| w.log.flush());
}

async fn accept_loop(listener: TcpListener, shared: &Arc<Shared>, local: &Arc<AtomicUsize>) {
    let mut phase = shared.shutdown.subscribe();
    // Every accepted connection has the listener's port as its local port (SERVER_PORT):
    // read once here instead of a getsockname per connection.
    let local_port = listener.local_addr().map_or(0, |a| a.port());
    loop {
        let (stream, peer) = tokio::select! {
            biased;
            _ = stopping(&mut phase) => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // EMFILE and friends: back off briefly instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // The permit is taken after accept: with one SO_REUSEPORT listener per worker, a
        // worker waiting for a permit before accepting could be handed one while the
        // waiting connection sits in another worker's queue. This way only a worker that
        // holds a connection waits, and the limit stays exact across workers.
        let permit = tokio::select! {
            biased;
            _ = stopping(&mut phase) => return,
            p = shared.permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        // TCP_NODELAY needs no setsockopt here: Linux copies it from the listening socket
        // (set in bind_listener) to each accepted one, as a test below checks.
        if shared.settings.send_buffer_bytes > 0 {
            let _ = rustix::net::sockopt::set_socket_send_buffer_size(
                &stream,
                shared.settings.send_buffer_bytes,
            );
        }
        let shared = shared.clone();
        let global = shared.shutdown.connection_opened();
        local.fetch_add(1, Ordering::AcqRel);
        let local = local.clone();
        tokio::spawn(async move {
            shared.metrics.connections_open.inc();
            crate::conn::serve(stream, peer, local_port, &shared).await;
            shared.metrics.connections_open.dec();
            drop(permit);
            drop(global);
            local.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The accept loop relies on this instead of a setsockopt per connection.
    #[test]
    fn accepted_connections_inherit_tcp_nodelay_from_the_listener() {
        let listener = bind_std("127.0.0.1:0".parse().unwrap()).unwrap();
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert!(accepted.nodelay().unwrap());
    }
}
