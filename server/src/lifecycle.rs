//! The process lifecycle of `skiff serve` and `skiff run`: start the control runtime,
//! compile the first configuration, bind the listeners and start the workers, the admin
//! listener and the reload watcher, then on SIGTERM or SIGINT drain: readiness off,
//! listening stops after the shutdown delay, in-flight responses get the grace period.

use crate::admin;
use crate::app::{App, ServeOverrides};
use crate::cache::{FileCache, RootRegistry};
use crate::error::{ConfigError, StartError};
use crate::metrics::Metrics;
use crate::reload::{self, ConfigFile};
use crate::settings::Settings;
use crate::shutdown::{Phase, ShutdownControl};
use crate::state::Shared;
use arc_swap::ArcSwap;
use skiff_config::Config;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Diagnostics to stderr. `RUST_LOG` takes `LEVEL` or `target=LEVEL,...` (the Targets
/// syntax: no regex engine, so nothing heavy is touched at startup); the default is info.
pub fn init_logging() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| v.parse::<tracing_subscriber::filter::Targets>().ok())
        .unwrap_or_else(|| {
            tracing_subscriber::filter::Targets::new().with_default(tracing::Level::INFO)
        });
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(filter)
        .init();
}

/// Raises the soft open-file limit to the hard one: connections and the descriptors the
/// I/O cache keeps for sendfile both count against it, and 1024 is a common default.
fn raise_nofile_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        limit.current = limit.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, limit) {
            tracing::warn!(error = %e, "cannot raise the open-file limit");
        }
    }
}

/// Serves until SIGTERM or SIGINT, then drains. With a config file, also reloads it.
pub fn serve(
    cfg: Config,
    hash: String,
    settings: Settings,
    base: &std::path::Path,
    overrides: ServeOverrides,
    file: Option<ConfigFile>,
) -> Result<(), StartError> {
    raise_nofile_limit();
    let cache = Arc::new(FileCache::new(settings.cache.clone()));
    let roots = RootRegistry::default();
    // The control runtime exists first: building spawns DNS refresh tasks on it.
    let control = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(StartError::Runtime)?;
    // Watching starts before building reads the htpasswd files, so no change between is
    // missed.
    let reload_triggers = file.map(|f| {
        let _guard = control.enter();
        let htpasswd = crate::app::htpasswd_files(&cfg, base);
        (reload::Triggers::register(&f, &htpasswd), f)
    });
    let app = {
        let _in_runtime = control.enter();
        App::build(&cfg, base, hash.clone(), &cache, &roots, &overrides, None)
            .map_err(ConfigError::Invalid)?
    };
    app.log_warnings();
    let metrics = Metrics::new();
    metrics.config_loaded(&hash, app.htpasswd_entries_left_out());
    let tls = match &settings.tls {
        Some(t) => Some(
            crate::tls::Tls::new(
                t.clone(),
                crate::tls::Wanted::from_config(&cfg, base),
                metrics.clone(),
            )
            .map_err(ConfigError::Invalid)?,
        ),
        None => None,
    };
    let shutdown = ShutdownControl::new();
    metrics
        .connections_max
        .set(i64::try_from(settings.limits.max_connections).unwrap_or(i64::MAX));
    let shared = Arc::new(Shared {
        app: ArcSwap::from_pointee(app),
        cache,
        roots,
        metrics: metrics.clone(),
        shutdown: shutdown.clone(),
        permits: Arc::new(tokio::sync::Semaphore::new(settings.limits.max_connections)),
        reclaim: Default::default(),
        tls: tls.clone(),
        settings,
    });
    let admin_listener = match shared.settings.admin_listen {
        Some(addr) => {
            let l = control
                .block_on(tokio::net::TcpListener::bind(addr))
                .map_err(|source| StartError::AdminListen { addr, source })?;
            Some(l)
        }
        None => None,
    };
    let (bound, workers) =
        crate::listener::run(shared.clone()).map_err(|e| StartError::Listen {
            addr: e.addr,
            source: e.source,
        })?;
    for _ in 0..workers.threads.len() {
        if workers
            .started
            .recv_timeout(Duration::from_secs(10))
            .is_err()
        {
            break;
        }
    }
    // Without a config file there is nothing to reload, but SIGHUP (sent from habit, to
    // pick up certificates) must not end the server as its default action would.
    let hup_without_config = match reload_triggers {
        None => {
            let _guard = control.enter();
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok()
        }
        Some(_) => None,
    };
    let admin_addr = admin_listener.as_ref().and_then(|l| l.local_addr().ok());
    // Installed before the line below says the server listens: a SIGTERM sent at once
    // then drains instead of killing. Installing runs once, before startup's pages go back.
    let signalled = {
        let _guard = control.enter();
        shutdown_signal()
    };
    // Tests and scripts read the bound addresses from this line (port 0 picks a free one).
    let admin_text = off_or(admin_addr);
    tracing::info!(
        threads = shared.settings.threads,
        cpu_scheduling = ?shared.settings.cpu_scheduling,
        "skiff listening on {} admin {admin_text} tls {}",
        off_or(bound.plain),
        off_or(bound.tls),
    );
    let grace = shared.settings.shutdown_grace;
    let delay = shared.settings.shutdown_delay;
    control.block_on(async {
        if let Some(listener) = admin_listener {
            let s = shared.clone();
            let sampler: admin::Sampler = Arc::new(move || {
                s.metrics.cache_bytes.set(s.cache.weight() as i64);
                (s.metrics.upstream_body_buffer_bytes)
                    .set(crate::upstream::buffered_body_bytes() as i64);
                // Only the live generation's pools are reported.
                s.metrics.upstream_endpoints.clear();
                s.metrics.upstream_workers.clear();
                for pool in &s.app.load().pools {
                    let (up, down) = pool.endpoint_states();
                    if let Some(workers) = pool.workers {
                        s.metrics
                            .upstream_workers
                            .get_or_create(&crate::metrics::PoolLabels { pool: pool.name })
                            .set(up as i64 * i64::from(workers));
                    }
                    for (state, n) in [("up", up), ("down", down)] {
                        s.metrics
                            .upstream_endpoints
                            .get_or_create(&crate::metrics::PoolStateLabels {
                                pool: pool.name,
                                state,
                            })
                            .set(n as i64);
                    }
                }
            });
            tokio::spawn(admin::serve(
                listener,
                metrics.clone(),
                shutdown.clone(),
                sampler,
            ));
        }
        if let Some(tls) = tls {
            tokio::spawn(crate::tls::watch::watch(tls));
        }
        tokio::spawn(crate::cache::idle::sweep(shared.cache.clone()));
        if let Some(mut hup) = hup_without_config {
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    tracing::warn!("SIGHUP: no configuration file to reload (`skiff run --config` reloads one); still serving");
                }
            });
        }
        if let Some((triggers, file)) = reload_triggers {
            tokio::spawn(reload::watch(
                triggers,
                shared.clone(),
                file,
                cfg,
                overrides,
            ));
        }
        // The workers accept and these tasks have started: what starting touched and
        // serving does not use goes back (BENCHMARKS.md, idle RSS).
        tokio::task::yield_now().await;
        let released = crate::startup_pages::release();
        tracing::debug!(mappings = released, "startup's code pages given back");
        signalled.await;
        tracing::info!(delay = ?delay, grace = ?grace, "shutting down: readiness off");
        shutdown.advance(Phase::Draining);
        tokio::time::sleep(delay).await;
        shutdown.advance(Phase::Stopping);
        tracing::info!(
            open = shutdown.open_connections(),
            "listening stopped; finishing in-flight responses"
        );
        let deadline = Instant::now() + grace;
        while shutdown.open_connections() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    let left = shutdown.open_connections();
    if left > 0 {
        tracing::warn!(
            open = left,
            "grace period over; closing remaining connections"
        );
        shutdown.advance(Phase::Closing);
        // The workers drop their connections and write out their access logs. A worker
        // stuck in a blocking call (a log write to a stalled pipe) is left to the exit.
        let until = Instant::now() + CLOSING_WAIT;
        while workers.threads.iter().any(|w| !w.is_finished()) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        return Ok(());
    }
    for w in workers.threads {
        let _ = w.join();
    }
    tracing::info!("stopped cleanly");
    Ok(())
}

/// How long the workers get, after the grace period, to close what is left and write
/// their logs.
const CLOSING_WAIT: Duration = Duration::from_secs(2);

fn off_or(addr: Option<std::net::SocketAddr>) -> String {
    addr.map_or_else(|| "off".to_owned(), |a| a.to_string())
}

/// Installs the SIGTERM and SIGINT handlers now; the future ends at the first of them.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }
}
