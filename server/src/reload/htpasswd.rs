//! Reloads the configuration when an htpasswd file it names changes, as nginx reads its
//! `auth_basic_user_file` per request: a user removed from a file (or a Kubernetes
//! Secret) is refused without a restart, and an optional file that appears is used.

use notify::Watcher;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use tokio::sync::mpsc::UnboundedSender;

/// Follows the folders of the live configuration's htpasswd files (the folder, as a
/// Secret volume swaps a `..data` link rather than writing the file).
pub struct HtpasswdWatch {
    watcher: Option<notify::RecommendedWatcher>,
    folders: BTreeSet<PathBuf>,
    /// The files' names, which the event filter matches (shared with its thread).
    names: Arc<RwLock<BTreeSet<OsString>>>,
}

impl HtpasswdWatch {
    /// Each change sends on `changed`: a forced reload, as the config text is the same.
    pub fn new(changed: UnboundedSender<()>) -> HtpasswdWatch {
        let names = Arc::new(RwLock::new(BTreeSet::new()));
        let filter = names.clone();
        let watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
            let names = filter.read().unwrap_or_else(|e| e.into_inner());
            if ev.is_ok_and(|ev| may_change(&ev, &names)) {
                let _ = changed.send(());
            }
        });
        let watcher = match watcher {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch htpasswd files; reload with SIGHUP after changing one");
                None
            }
        };
        HtpasswdWatch {
            watcher,
            folders: BTreeSet::new(),
            names,
        }
    }

    /// Watches the folders of `files` (those that exist: a pod started before its Secret
    /// volume was added has none to watch) and forgets folders no longer named.
    pub fn follow(&mut self, files: &[PathBuf]) {
        let Some(watcher) = self.watcher.as_mut() else {
            return;
        };
        *self.names.write().unwrap_or_else(|e| e.into_inner()) = files
            .iter()
            .filter_map(|f| f.file_name())
            .map(Into::into)
            .collect();
        let wanted: BTreeSet<PathBuf> = files
            .iter()
            .filter_map(|f| f.parent())
            .filter(|d| d.is_dir())
            .map(Path::to_owned)
            .collect();
        for gone in self.folders.difference(&wanted) {
            let _ = watcher.unwatch(gone);
        }
        self.folders.retain(|d| wanted.contains(d));
        for dir in wanted {
            if self.folders.contains(&dir) {
                continue;
            }
            match watcher.watch(&dir, notify::RecursiveMode::NonRecursive) {
                Ok(()) => {
                    self.folders.insert(dir);
                }
                Err(e) => {
                    tracing::warn!(folder = %dir.display(), error = %e, "cannot watch an htpasswd folder")
                }
            }
        }
    }
}

/// A write, creation, rename or removal of a watched file name, or of a `..`-prefixed
/// Kubernetes volume entry; never a read (the reload's own would wake it again).
fn may_change(ev: &notify::Event, names: &BTreeSet<OsString>) -> bool {
    crate::fs::events::may_change(&ev.kind)
        && (ev.paths.is_empty()
            || ev.paths.iter().any(|p| {
                p.file_name()
                    .is_none_or(|n| names.contains(n) || n.as_encoded_bytes().starts_with(b".."))
            }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// With the real inotify watcher: a read of the file, or a neighbour's write, is no
    /// change; rewriting the file is, and so is creating it in a folder that waited.
    #[tokio::test]
    async fn a_change_to_a_followed_file_wakes_and_reads_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("htpasswd");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut watch = HtpasswdWatch::new(tx);
        watch.follow(std::slice::from_ref(&file));
        std::fs::write(dir.path().join("other"), "x").unwrap();
        let woke = tokio::time::timeout(Duration::from_millis(300), rx.recv()).await;
        assert!(woke.is_err(), "a neighbour woke the reload loop");
        std::fs::write(&file, "a:b\n").unwrap();
        let woke = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
        assert!(
            matches!(woke, Ok(Some(()))),
            "creating the file did not wake it"
        );
        // The write's later events (its data, its close) come separately: let them land.
        tokio::time::sleep(Duration::from_millis(200)).await;
        while rx.try_recv().is_ok() {}
        std::fs::read_to_string(&file).unwrap();
        let woke = tokio::time::timeout(Duration::from_millis(300), rx.recv()).await;
        assert!(woke.is_err(), "a read woke the reload loop");
        // No longer named: its changes are not followed.
        watch.follow(&[]);
        std::fs::write(&file, "a:c\n").unwrap();
        let woke = tokio::time::timeout(Duration::from_millis(300), rx.recv()).await;
        assert!(woke.is_err(), "a file no longer named woke the reload loop");
    }
}
