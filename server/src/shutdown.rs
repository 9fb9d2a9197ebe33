//! Graceful shutdown phases, broadcast through a watch channel (HTTP/1.1 connections
//! waiting between requests hear it from their worker: `conn/stop_wait.rs`): Serving -> Draining (/readyz fails, still serving) -> Stopping (listeners
//! close, idle keep-alives close, in-flight responses finish).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::watch;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Serving,
    Draining,
    Stopping,
}

#[derive(Clone)]
pub struct ShutdownControl {
    tx: Arc<watch::Sender<Phase>>,
    open_connections: Arc<AtomicUsize>,
}

impl Default for ShutdownControl {
    fn default() -> Self {
        Self::new()
    }
}

impl ShutdownControl {
    pub fn new() -> ShutdownControl {
        let (tx, _) = watch::channel(Phase::Serving);
        ShutdownControl {
            tx: Arc::new(tx),
            open_connections: Arc::new(AtomicUsize::new(0)),
        }
    }
    pub fn phase(&self) -> Phase {
        *self.tx.borrow()
    }
    pub fn subscribe(&self) -> watch::Receiver<Phase> {
        self.tx.subscribe()
    }
    pub fn advance(&self, phase: Phase) {
        self.tx.send_if_modified(|p| {
            if *p < phase {
                *p = phase;
                true
            } else {
                false
            }
        });
    }
    pub fn open_connections(&self) -> usize {
        self.open_connections.load(Ordering::Acquire)
    }
    pub(crate) fn connection_opened(&self) -> ConnectionGuard {
        self.open_connections.fetch_add(1, Ordering::AcqRel);
        ConnectionGuard {
            counter: self.open_connections.clone(),
        }
    }
}

/// Counts a connection as open for as long as it lives.
pub(crate) struct ConnectionGuard {
    counter: Arc<AtomicUsize>,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.counter.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Resolves once the phase reaches Stopping.
pub(crate) async fn stopping(rx: &mut watch::Receiver<Phase>) {
    let _ = rx.wait_for(|p| *p >= Phase::Stopping).await;
}
