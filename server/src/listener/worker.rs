//! Worker threads, listeners and the accept loop.

use crate::access_log::AccessLog;
use crate::conn::Admission;
use crate::metrics::WorkerMetrics;
use crate::shutdown::{stopping, Phase};
use crate::state::{install_worker, with_worker, Shared, WorkerState};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::TryAcquireError;

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

/// What a listening socket speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// HTTP/1.1 and h2c.
    Plain,
    /// TLS, then HTTP/1.1 or HTTP/2 by ALPN.
    Tls,
}

/// The addresses the listeners were bound to (port 0 resolved).
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    pub plain: Option<SocketAddr>,
    pub tls: Option<SocketAddr>,
}

/// A listener that could not be bound.
#[derive(Debug)]
pub struct BindError {
    pub addr: SocketAddr,
    pub source: io::Error,
}

/// Starts the worker threads. The first socket of each listener is bound here, so a bad
/// address fails fast, and port 0 resolves to one real port that every worker then shares.
/// The started workers: their threads, and one message each on `started` once it accepts.
pub struct Workers {
    pub threads: Vec<JoinHandle<()>>,
    pub started: mpsc::Receiver<()>,
}

/// Binds the listeners and starts the workers.
pub fn run(shared: Arc<Shared>) -> Result<(Bound, Workers), BindError> {
    let threads = shared.settings.threads.max(1);
    let wanted = [
        (Kind::Plain, shared.settings.listen),
        (Kind::Tls, shared.settings.tls.as_ref().map(|t| t.listen)),
    ];
    let mut per_worker: Vec<Vec<(std::net::TcpListener, Kind)>> =
        (0..threads).map(|_| Vec::new()).collect();
    let mut bound = Bound {
        plain: None,
        tls: None,
    };
    for (kind, addr) in wanted {
        let Some(addr) = addr else { continue };
        let fail = |source| BindError { addr, source };
        let first = bind_std(addr).map_err(fail)?;
        let real = first.local_addr().map_err(fail)?;
        match kind {
            Kind::Plain => bound.plain = Some(real),
            Kind::Tls => bound.tls = Some(real),
        }
        per_worker[0].push((first, kind));
        for listeners in per_worker.iter_mut().skip(1) {
            listeners.push((bind_std(real).map_err(fail)?, kind));
        }
    }
    let mut handles = Vec::with_capacity(threads);
    let (ready, started) = mpsc::channel();
    for (i, listeners) in per_worker.into_iter().enumerate() {
        let shared = shared.clone();
        let ready = ready.clone();
        let handle = std::thread::Builder::new()
            .name(format!("skiff-worker-{i}"))
            .spawn(move || worker_main(listeners, shared, ready))
            .map_err(|source| BindError {
                addr: bound.plain.or(bound.tls).expect("a listener was bound"),
                source,
            })?;
        handles.push(handle);
    }
    Ok((
        bound,
        Workers {
            threads: handles,
            started,
        },
    ))
}

fn bind_std(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    // Binding must happen inside a runtime context for tokio's socket conversion.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    let _guard = rt.enter();
    bind_listener(addr)
}

fn worker_main(
    listeners: Vec<(std::net::TcpListener, Kind)>,
    shared: Arc<Shared>,
    ready: mpsc::Sender<()>,
) {
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
        // The access log is flushed at least once a second, even when quiet, and the
        // worker's copy of the configuration follows a reload even without requests.
        let flusher = tokio::spawn(async {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                with_worker(|w| w.log.flush());
                crate::state::refresh_live_app();
            }
        });
        crate::conn::start_worker(&shared);
        let local = Arc::new(AtomicUsize::new(0));
        let mut loops = Vec::with_capacity(listeners.len());
        for (listener, kind) in listeners {
            let listener = match TcpListener::from_std(listener) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(error = %e, "cannot register the listener");
                    continue;
                }
            };
            let (shared, local) = (shared.clone(), local.clone());
            loops.push(tokio::spawn(async move {
                accept_loop(listener, kind, &shared, &local).await
            }));
        }
        // Once every accept loop has run to its first wait.
        tokio::task::yield_now().await;
        let _ = ready.send(());
        drop(ready);
        for accepting in loops {
            let _ = accepting.await;
        }
        // Listening has stopped: let this worker's connections finish their responses,
        // until the grace period ends.
        let mut phase = shared.shutdown.subscribe();
        let finished = async {
            while local.load(Ordering::Acquire) > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::select! {
            _ = finished => {}
            _ = crate::shutdown::reached(&mut phase, Phase::Closing) => {}
        }
        flusher.abort();
    });
    // Shutting the runtime down drops the connections left at the grace period's end;
    // those that record on drop log a cut exchange, and then every line this worker
    // buffered is written before the process exits. Its blocking tasks (a file read) get
    // half a second, within the 2 s the main thread waits.
    rt.shutdown_timeout(Duration::from_millis(500));
    with_worker(|w| w.log.flush());
}

async fn accept_loop(
    listener: TcpListener,
    kind: Kind,
    shared: &Arc<Shared>,
    local: &Arc<AtomicUsize>,
) {
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
        let permit = match shared.permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(TryAcquireError::Closed) => return,
            // At the limit: an idle keep-alive connection makes room for this one, this
            // worker's own if it has one parked, else another worker's, else the first
            // to close or go idle. Its permit is handed over, not queued for.
            Err(TryAcquireError::NoPermits) => match crate::conn::close_longest_idle() {
                Some(p) => p,
                None => {
                    let mut room = shared.reclaim.ask();
                    tokio::select! {
                        biased;
                        _ = stopping(&mut phase) => return,
                        Ok(p) = &mut room => p,
                        p = shared.permits.clone().acquire_owned() => match p {
                            Ok(p) => p,
                            Err(_) => return,
                        },
                    }
                }
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
        let admission = Admission::new(shared.clone(), permit, local);
        tokio::spawn(async move {
            match kind {
                Kind::Plain => crate::conn::serve(stream, peer, local_port, admission, None).await,
                Kind::Tls => crate::conn::serve_tls(stream, peer, local_port, admission).await,
            }
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
