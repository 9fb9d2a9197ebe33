//! Hot reload. The config file's folder is watched (which also sees a Kubernetes ConfigMap's
//! atomic `..data` symlink swap), and so are the htpasswd files it names (`htpasswd`);
//! SIGHUP forces a check. A valid new config is compiled
//! and swapped in atomically; an invalid one is logged and counted, and the old one keeps
//! serving. Changes that cannot apply in place (listeners, threads, cache sizing, limits,
//! the access log) are reported as needing a restart and not applied at all.

mod htpasswd;

use crate::app::{App, ServeOverrides};
use crate::error::ConfigError;
use crate::state::Shared;
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

    pub fn read(&self) -> Result<(Config, String), ConfigError> {
        let text = std::fs::read_to_string(&self.path).map_err(|source| ConfigError::Read {
            path: self.path.clone(),
            source,
        })?;
        let cfg = skiff_config::parse_yaml(&text).map_err(|e| ConfigError::Parse {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        Ok((cfg, skiff_config::config_hash(&text)))
    }
}

/// Logs what a configuration about to serve probably gets wrong (rules that shadow
/// protected ones); `skiff check` prints the same with line numbers.
pub fn log_warnings(cfg: &Config) {
    for w in skiff_config::warnings(cfg) {
        tracing::warn!(at = w.path.as_str(), "{}", w.message);
    }
}

#[derive(Debug)]
pub enum Outcome {
    Unchanged,
    Applied(String),
    Failed(ConfigError),
    RestartRequired(&'static str),
}

/// One reload attempt. An unchanged config text is not rebuilt unless `forced` (SIGHUP):
/// what it names (htpasswd files, roots swapped by rename) may have changed.
pub fn reload_once(
    shared: &Shared,
    file: &ConfigFile,
    startup: &Config,
    overrides: &ServeOverrides,
    forced: bool,
) -> Outcome {
    let current = shared.app.load_full();
    let outcome = match file.read() {
        Err(e) => Outcome::Failed(e),
        Ok((_, hash)) if hash == current.hash && !forced => Outcome::Unchanged,
        Ok((cfg, hash)) => match skiff_config::restart_fields_changed(startup, &cfg) {
            Some(field) => Outcome::RestartRequired(field),
            None => match App::build(
                &cfg,
                &file.base(),
                hash.clone(),
                &shared.cache,
                &shared.roots,
                overrides,
                Some(&current),
            )
            .and_then(|app| {
                // The new certificates load before anything is swapped: a bad one
                // rejects the whole reload.
                let certs = match &shared.tls {
                    Some(tls) => {
                        Some(tls.prepare(crate::tls::Wanted::from_config(&cfg, &file.base()))?)
                    }
                    None => None,
                };
                Ok((app, certs))
            }) {
                Ok((app, certs)) => {
                    log_warnings(&cfg);
                    app.log_warnings();
                    let left_out = app.htpasswd_entries_left_out();
                    shared.app.store(Arc::new(app));
                    if let (Some(tls), Some(certs)) = (&shared.tls, certs) {
                        tls.commit(certs);
                    }
                    shared.metrics.config_loaded(&hash, left_out);
                    Outcome::Applied(hash)
                }
                Err(message) => Outcome::Failed(ConfigError::InvalidFile {
                    path: file.path.clone(),
                    message,
                }),
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

/// What wakes the reload loop: file-system events in the config folder, changes to the
/// htpasswd files the live config names, and SIGHUP. Registered before the server reports
/// that it listens, so no early change is missed.
pub struct Triggers {
    _watcher: Option<notify::RecommendedWatcher>,
    events: tokio::sync::mpsc::UnboundedReceiver<()>,
    htpasswd: htpasswd::HtpasswdWatch,
    htpasswd_events: tokio::sync::mpsc::UnboundedReceiver<()>,
    hup: Option<tokio::signal::unix::Signal>,
}

impl Triggers {
    /// Must run inside the control runtime (for the signal handler). `htpasswd`: the files
    /// the startup config names, followed from now on.
    pub fn register(file: &ConfigFile, htpasswd: &[PathBuf]) -> Triggers {
        use notify::Watcher;
        let (tx, events) = tokio::sync::mpsc::unbounded_channel::<()>();
        let name = file
            .path
            .file_name()
            .map(|n| n.to_owned())
            .unwrap_or_default();
        let watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
            if ev.is_ok_and(|ev| may_change_config(&ev, &name)) {
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
        let (htpasswd_tx, htpasswd_events) = tokio::sync::mpsc::unbounded_channel::<()>();
        let mut htpasswd_watch = htpasswd::HtpasswdWatch::new(htpasswd_tx);
        htpasswd_watch.follow(htpasswd);
        Triggers {
            _watcher: watcher,
            events,
            htpasswd: htpasswd_watch,
            htpasswd_events,
            hup,
        }
    }
}

/// Whether a file-system event in the config folder can change the configuration: a
/// write, creation, rename or removal of the config file itself, or of a ConfigMap's
/// `..data` link and `..`-prefixed timestamped folders (the kubelet's atomic swap). Opens,
/// reads and read-only closes are not changes: counting them made every reload's own read
/// of the file trigger the next one, ten times a second, for as long as the process ran.
/// Other files in the folder (logs, sockets, an editor's swap file) are ignored; an
/// editor that saves by renaming a temporary file over the config is seen by the rename.
fn may_change_config(ev: &notify::Event, config_name: &std::ffi::OsStr) -> bool {
    if !crate::fs::events::may_change(&ev.kind) {
        return false;
    }
    // No paths: an overflow or a rescan request, where anything may have changed.
    ev.paths.is_empty()
        || ev.paths.iter().any(|p| match p.file_name() {
            Some(n) => n == config_name || n.as_encoded_bytes().starts_with(b".."),
            // A path without a last component ("/"): it cannot be told apart, so check.
            None => true,
        })
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
    // The htpasswd files of the config last read, which may have been refused for want
    // of one of them.
    let mut attempted = Vec::new();
    loop {
        let mut forced = false;
        let mut htpasswd = shared.app.load().htpasswd_files.clone();
        htpasswd.append(&mut attempted);
        htpasswd.sort();
        htpasswd.dedup();
        triggers.htpasswd.follow(&htpasswd);
        if !pending {
            tokio::select! {
                Some(()) = triggers.events.recv() => {}
                // The config text is the same: only a forced reload reads the file again.
                Some(()) = triggers.htpasswd_events.recv() => forced = true,
                Some(()) = async { match triggers.hup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => forced = true,
            }
        }
        pending = false;
        // Let a burst of events (a ConfigMap swap is several, a file written in pieces
        // many) settle into one reload: 100 ms without one, within 2 s, so a file still
        // being written is not read half way.
        let settle_until = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut more = false;
            while triggers.events.try_recv().is_ok() {
                more = true;
            }
            while triggers.htpasswd_events.try_recv().is_ok() {
                (more, forced) = (true, true);
            }
            if !more || tokio::time::Instant::now() >= settle_until {
                break;
            }
        }
        let (shared, file, startup, overrides) = (
            shared.clone(),
            file.clone(),
            startup.clone(),
            overrides.clone(),
        );
        // Building opens roots and reads files: keep it off the control loop's thread.
        attempted = tokio::task::spawn_blocking(move || {
            reload_once(&shared, &file, &startup, &overrides, forced);
            file.read()
                .map(|(cfg, _)| crate::app::htpasswd_files(&cfg, &file.base()))
                .unwrap_or_default()
        })
        .await
        .unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{
        AccessKind, AccessMode, CreateKind, DataChange, EventKind, ModifyKind, RenameMode,
    };

    fn event(kind: EventKind, path: &str) -> notify::Event {
        notify::Event::new(kind).add_path(PathBuf::from(path))
    }

    #[test]
    fn reading_the_config_is_not_a_change() {
        let name = std::ffi::OsStr::new("skiff.yaml");
        for kind in [
            EventKind::Access(AccessKind::Open(notify::event::AccessMode::Any)),
            EventKind::Access(AccessKind::Read),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
        ] {
            assert!(
                !may_change_config(&event(kind, "/etc/skiff/skiff.yaml"), name),
                "{kind:?}"
            );
        }
    }

    #[test]
    fn writes_renames_and_configmap_swaps_are_changes() {
        let name = std::ffi::OsStr::new("skiff.yaml");
        let changes = [
            (
                EventKind::Access(AccessKind::Close(AccessMode::Write)),
                "/etc/skiff/skiff.yaml",
            ),
            (
                EventKind::Modify(ModifyKind::Data(DataChange::Any)),
                "/etc/skiff/skiff.yaml",
            ),
            (
                EventKind::Modify(ModifyKind::Name(RenameMode::To)),
                "/etc/skiff/skiff.yaml",
            ),
            (EventKind::Create(CreateKind::File), "/etc/skiff/skiff.yaml"),
            (
                EventKind::Remove(notify::event::RemoveKind::File),
                "/etc/skiff/skiff.yaml",
            ),
            (
                EventKind::Modify(ModifyKind::Name(RenameMode::To)),
                "/etc/skiff/..data",
            ),
            (
                EventKind::Create(CreateKind::Folder),
                "/etc/skiff/..2026_11_22_10_00_00.1",
            ),
        ];
        for (kind, path) in changes {
            assert!(
                may_change_config(&event(kind, path), name),
                "{kind:?} {path}"
            );
        }
        // An overflow names no path: anything may have changed.
        assert!(may_change_config(
            &notify::Event::new(EventKind::Other),
            name
        ));
    }

    #[test]
    fn other_files_in_the_folder_are_not_changes() {
        let name = std::ffi::OsStr::new("skiff.yaml");
        for path in [
            "/srv/conf/php-fpm.log",
            "/srv/conf/.skiff.yaml.swp",
            "/srv/conf/skiff.yaml.bak",
        ] {
            let ev = event(EventKind::Modify(ModifyKind::Data(DataChange::Any)), path);
            assert!(!may_change_config(&ev, name), "{path}");
        }
    }

    /// With the real inotify watcher: reading the file, and writing a neighbour, wake
    /// nothing; rewriting the file does.
    #[tokio::test]
    async fn the_watcher_wakes_for_config_writes_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("skiff.yaml");
        std::fs::write(&path, "a: 1\n").unwrap();
        let mut triggers = Triggers::register(&ConfigFile { path: path.clone() }, &[]);
        std::fs::read_to_string(&path).unwrap();
        std::fs::write(dir.path().join("backend.log"), "x").unwrap();
        let woke = tokio::time::timeout(Duration::from_millis(300), triggers.events.recv()).await;
        assert!(woke.is_err(), "a read or a neighbour woke the reload loop");
        std::fs::write(&path, "a: 2\n").unwrap();
        let woke = tokio::time::timeout(Duration::from_secs(5), triggers.events.recv()).await;
        assert!(
            matches!(woke, Ok(Some(()))),
            "a write to the config was not seen"
        );
    }
}
