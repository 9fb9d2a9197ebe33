//! State the serving threads share (settings, the live configuration generation, the I/O
//! cache, metrics, shutdown, connection permits) and each worker thread's own (metric
//! handles and its access-log buffer). Its own module so that the listener, the
//! connection layer, reload and the lifecycle all reach it without reaching into each
//! other.

use crate::access_log::AccessLog;
use crate::app::App;
use crate::cache::{FileCache, RootRegistry};
use crate::metrics::{Metrics, WorkerMetrics};
use crate::settings::Settings;
use crate::shutdown::ShutdownControl;
use arc_swap::ArcSwap;
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, Semaphore};

/// State every worker reads; immutable while serving.
pub struct Shared {
    pub settings: Settings,
    /// The live configuration generation; a reload swaps it, in-flight requests keep theirs.
    pub app: ArcSwap<App>,
    pub cache: Arc<FileCache>,
    pub roots: RootRegistry,
    pub metrics: Arc<Metrics>,
    pub shutdown: ShutdownControl,
    pub permits: Arc<Semaphore>,
    /// Asks the workers to close idle connections when `permits` run out.
    pub reclaim: IdleReclaim,
    /// HTTPS, when a TLS listener is configured.
    pub tls: Option<Arc<crate::tls::Tls>>,
}

/// Requests, across workers, to close the longest-idle parked connection so that a new
/// one can take its permit (nginx closes idle keep-alive connections the same way when
/// it runs out of connections). A worker first closes one of its own; only when it has
/// none does it ask the others, whose park sets each take a request from `owed`.
#[derive(Default)]
pub struct IdleReclaim {
    owed: AtomicUsize,
    /// Each worker's park-set wake-up: `notify_one` keeps a permit, so no ask is lost.
    wakes: Mutex<Vec<Arc<Notify>>>,
}

impl IdleReclaim {
    /// Registers a worker's park set, woken on every ask.
    pub fn register(&self, wake: Arc<Notify>) {
        self.wakes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(wake);
    }

    /// Asks every worker for one idle connection.
    pub fn ask(&self) {
        self.owed.fetch_add(1, Ordering::AcqRel);
        for wake in self.wakes.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            wake.notify_one();
        }
    }

    /// Takes one outstanding ask, if any: the caller then closes a connection, or hands
    /// the ask back with `ask_again` when it has none.
    pub fn take(&self) -> bool {
        self.owed
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Puts back an ask that could not be met here, for another worker, without waking anyone.
    pub fn ask_again(&self) {
        self.owed.fetch_add(1, Ordering::AcqRel);
    }

    /// Withdraws an ask once its connection has a permit some other way (another
    /// connection closed), so no idle connection is closed for nothing later.
    pub fn withdraw(&self) {
        let _ = self.take();
    }
}

/// Per-thread mutable state: metric handles and the access-log buffer. Thread-local, so
/// connection tasks reach it without locks or Send bounds.
pub(crate) struct WorkerState {
    pub metrics: WorkerMetrics,
    pub log: AccessLog,
}

thread_local! {
    static WORKER: RefCell<Option<WorkerState>> = const { RefCell::new(None) };
}

/// Makes `state` this thread's worker state.
pub(crate) fn install_worker(state: WorkerState) {
    WORKER.with(|w| *w.borrow_mut() = Some(state));
}

/// Runs `f` on this thread's worker state; `None` off the worker threads.
pub(crate) fn with_worker<R>(f: impl FnOnce(&mut WorkerState) -> R) -> Option<R> {
    WORKER.with(|w| w.borrow_mut().as_mut().map(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every worker hears an ask even when none is waiting yet; one worker meets it, and
    /// a withdrawn ask is met by nobody.
    #[tokio::test]
    async fn an_ask_wakes_every_worker_and_is_met_once() {
        let reclaim = IdleReclaim::default();
        let (a, b) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        reclaim.register(a.clone());
        reclaim.register(b.clone());
        reclaim.ask();
        // notify_one kept a permit for each: both wake without having been waiting.
        a.notified().await;
        b.notified().await;
        // The first without a connection to close hands it back; the next takes it.
        assert!(reclaim.take());
        reclaim.ask_again();
        assert!(reclaim.take());
        assert!(!reclaim.take(), "one ask was met twice");
        reclaim.ask();
        reclaim.withdraw();
        assert!(!reclaim.take(), "a withdrawn ask was still open");
        reclaim.withdraw();
        assert!(!reclaim.take());
    }
}
