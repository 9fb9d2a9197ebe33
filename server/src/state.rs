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
use std::sync::Arc;
use tokio::sync::Semaphore;

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
    pub reclaim: crate::idle_reclaim::IdleReclaim,
    /// HTTPS, when a TLS listener is configured.
    pub tls: Option<Arc<crate::tls::Tls>>,
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
