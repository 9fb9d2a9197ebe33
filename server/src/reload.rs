//! Hot reload. The config file's folder is watched (which also sees a Kubernetes ConfigMap's
//! atomic `..data` symlink swap), and SIGHUP forces a check. A valid new config is compiled
//! and swapped in atomically; an invalid one is logged and counted, and the old one keeps
//! serving. Changes that cannot apply in place (listeners, threads, cache sizing, limits,
//! the access log) are reported as needing a restart and not applied at all.

use crate::app::{App, ServeOverrides};
use crate::server::Shared;
use skiff_config::Config;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Where the configuration comes from.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    pub path: PathBuf,
}

impl ConfigFile {
    /// The folder relative paths (roots, htpasswd files) are taken from.
    pub fn base(&self) -> PathBuf {
        self.path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."))
    }

    pub fn read(&self) -> Result<(Config, String), String> {
        let text = std::fs::read_to_string(&self.path)
            .map_err(|e| format!("cannot read {}: {e}", self.path.display()))?;
        let cfg = skiff_config::parse_yaml(&text)
            .map_err(|e| format!("{}:\n{e}", self.path.display()))?;
        Ok((cfg, skiff_config::config_hash(&text)))
    }
}

/// Fields a running process cannot change.
fn restart_fields_changed(old: &Config, new: &Config) -> Option<&'static str> {
    if old.listen != new.listen {
        return Some("listen");
    }
    if old.admin_listen != new.admin_listen {
        return Some("admin_listen");
    }
    if old.threads != new.threads {
        return Some("threads");
    }
    if old.cache != new.cache {
        return Some("cache");
    }
    if old.limits != new.limits {
        return Some("limits");
    }
    if old.access_log != new.access_log {
        return Some("access_log");
    }
    None
}

#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Unchanged,
    Applied(String),
    Failed(String),
    RestartRequired(&'static str),
}

/// One reload attempt.
pub fn reload_once(
    shared: &Shared,
    file: &ConfigFile,
    startup: &Config,
    overrides: &ServeOverrides,
) -> Outcome {
    let outcome = match file.read() {
        Err(e) => Outcome::Failed(e),
        Ok((_, hash)) if hash == shared.app.load().hash => Outcome::Unchanged,
        Ok((cfg, hash)) => match restart_fields_changed(startup, &cfg) {
            Some(field) => Outcome::RestartRequired(field),
            None => match App::build(
                &cfg,
                &file.base(),
                hash.clone(),
                &shared.cache,
                &shared.roots,
                overrides,
            ) {
                Ok(app) => {
                    shared.app.store(Arc::new(app));
                    shared.metrics.config_loaded(&hash);
                    Outcome::Applied(hash)
                }
                Err(e) => Outcome::Failed(format!("{}: {e}", file.path.display())),
            },
        },
    };
    let result = match &outcome {
        Outcome::Unchanged => return outcome,
        Outcome::Applied(hash) => {
            tracing::info!(hash = hash.as_str(), "configuration reloaded");
            "success"
        }
        Outcome::Failed(e) => {
            tracing::error!("configuration rejected, the previous one keeps serving: {e}");
            "failure"
        }
        Outcome::RestartRequired(field) => {
            tracing::warn!(field, "configuration change needs a restart; not applied");
            "restart_required"
        }
    };
    shared
        .metrics
        .config_reloads
        .get_or_create(&crate::metrics::ResultLabels { result })
        .inc();
    outcome
}

/// What wakes the reload loop: file-system events in the config folder, and SIGHUP.
/// Registered before the server reports that it listens, so no early change is missed.
pub struct Triggers {
    _watcher: Option<notify::RecommendedWatcher>,
    events: tokio::sync::mpsc::UnboundedReceiver<()>,
    hup: Option<tokio::signal::unix::Signal>,
}

impl Triggers {
    /// Must run inside the control runtime (for the signal handler).
    pub fn register(file: &ConfigFile) -> Triggers {
        use notify::Watcher;
        let (tx, events) = tokio::sync::mpsc::unbounded_channel::<()>();
        let watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
            if ev.is_ok() {
                let _ = tx.send(());
            }
        })
        .and_then(|mut w| {
            // The folder, not the file: editors and Kubernetes replace files rather than write them.
            w.watch(&file.base(), notify::RecursiveMode::NonRecursive)
                .map(|()| w)
        });
        let watcher = match watcher {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch the config folder; reload with SIGHUP");
                None
            }
        };
        let hup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "no SIGHUP handler");
                None
            }
        };
        Triggers {
            _watcher: watcher,
            events,
            hup,
        }
    }
}

/// Reloads whenever a trigger fires, after changes settle.
pub async fn watch(
    mut triggers: Triggers,
    shared: Arc<Shared>,
    file: ConfigFile,
    startup: Config,
    overrides: ServeOverrides,
) {
    // A change between the first read and the watcher's registration is caught here.
    let mut pending = true;
    loop {
        if !pending {
            tokio::select! {
                Some(()) = triggers.events.recv() => {}
                Some(()) = async { match triggers.hup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => {}
            }
        }
        pending = false;
        // Let a burst of events (a ConfigMap swap is several) settle into one reload.
        tokio::time::sleep(Duration::from_millis(100)).await;
        while triggers.events.try_recv().is_ok() {}
        let (shared, file, startup, overrides) = (
            shared.clone(),
            file.clone(),
            startup.clone(),
            overrides.clone(),
        );
        // Building opens roots and reads files: keep it off the control loop's thread.
        let _ =
            tokio::task::spawn_blocking(move || reload_once(&shared, &file, &startup, &overrides))
                .await;
    }
}
