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
use arc_swap::{ArcSwap, Cache};
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

/// `Shared::app` through its `Arc`, for a per-thread `arc_swap::Cache`.
pub(crate) struct LiveApp(Arc<Shared>);

impl std::ops::Deref for LiveApp {
    type Target = ArcSwap<App>;
    fn deref(&self) -> &ArcSwap<App> {
        &self.0.app
    }
}

thread_local! {
    /// This thread's copy of the live configuration: a request on the HTTP/1.1 fast path
    /// checks it with one plain load instead of arc-swap's two atomic updates per load.
    static LIVE_APP: RefCell<Option<Cache<LiveApp, Arc<App>>>> = const { RefCell::new(None) };
}

/// Runs `f` on the live configuration of `shared`, through this thread's cached copy.
/// `f` must not call `with_live_app` itself.
pub(crate) fn with_live_app<R>(shared: &Arc<Shared>, f: impl FnOnce(&App) -> R) -> R {
    LIVE_APP.with(|cell| {
        let mut cell = cell.borrow_mut();
        let cache = match &mut *cell {
            // Another server in the same thread (tests) has its own configuration.
            Some(c) if std::ptr::eq(c.arc_swap(), &shared.app) => c,
            other => other.insert(Cache::new(LiveApp(shared.clone()))),
        };
        f(cache.load())
    })
}

/// Revalidates this thread's cached configuration, so that an idle worker lets go of a
/// generation a reload replaced (and of its pools); called once a second.
pub(crate) fn refresh_live_app() {
    LIVE_APP.with(|cell| {
        if let Some(c) = &mut *cell.borrow_mut() {
            c.load();
        }
    });
}
