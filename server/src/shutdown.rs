//! Graceful shutdown phases, broadcast through a watch channel (HTTP/1.1 connections
//! waiting between requests hear it from their worker: `conn/stop_wait.rs`): Serving -> Draining (/readyz fails, still serving) -> Stopping (listeners
//! close, idle keep-alives close, in-flight responses finish) -> Closing (the grace period is
//! over: workers drop what is left and write out their access logs).

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::watch;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Phase {
    Serving = 0,
    Draining = 1,
    Stopping = 2,
    Closing = 3,
}

#[derive(Clone)]
pub struct ShutdownControl {
    tx: Arc<watch::Sender<Phase>>,
    /// The phase, for `phase()`: every request asks it, and the watch's value sits
    /// behind a lock whose read is two atomic writes to a line all workers share.
    now: Arc<AtomicU8>,
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
            now: Arc::new(AtomicU8::new(Phase::Serving as u8)),
            open_connections: Arc::new(AtomicUsize::new(0)),
        }
    }
    pub fn phase(&self) -> Phase {
        match self.now.load(Ordering::Acquire) {
            0 => Phase::Serving,
            1 => Phase::Draining,
            2 => Phase::Stopping,
            _ => Phase::Closing,
        }
    }
    pub fn subscribe(&self) -> watch::Receiver<Phase> {
        self.tx.subscribe()
    }
    pub fn advance(&self, phase: Phase) {
        self.tx.send_if_modified(|p| {
            if *p < phase {
                *p = phase;
                // Under the watch's lock, so the two never disagree for long, and never
                // move backwards.
                self.now.store(phase as u8, Ordering::Release);
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
    reached(rx, Phase::Stopping).await;
}

/// Resolves once the phase reaches `phase`.
pub(crate) async fn reached(rx: &mut watch::Receiver<Phase>, phase: Phase) {
    let _ = rx.wait_for(|p| *p >= phase).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_phase_read_without_the_watch_follows_it_forward_only() {
        let control = ShutdownControl::new();
        let rx = control.subscribe();
        assert_eq!(control.phase(), Phase::Serving);
        control.advance(Phase::Draining);
        assert_eq!(control.phase(), Phase::Draining);
        assert_eq!(*rx.borrow(), Phase::Draining);
        control.advance(Phase::Serving);
        assert_eq!(control.phase(), Phase::Draining, "phases never go back");
        let clone = control.clone();
        clone.advance(Phase::Stopping);
        assert_eq!(control.phase(), Phase::Stopping, "clones share the phase");
        assert_eq!(*rx.borrow(), Phase::Stopping);
        control.advance(Phase::Closing);
        assert_eq!(control.phase(), Phase::Closing);
    }
}
