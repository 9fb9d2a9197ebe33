//! Reloads certificates when their files change: the folders are watched (a Kubernetes
//! Secret volume swaps a `..data` link rather than writing files; a `subPath` mount is
//! never updated at all), and every minute the files are read again in case an event
//! was missed.

use super::Tls;
use notify::Watcher;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How often the files are read again without an event.
const RECHECK: Duration = Duration::from_secs(60);

/// Follows the certificate folders for the life of the process (on the control runtime).
pub async fn watch(tls: Arc<Tls>) {
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel::<()>();
    let filter = tls.clone();
    let watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        if ev.is_ok_and(|ev| may_change(&ev, &filter)) {
            let _ = tx.send(());
        }
    });
    let mut watcher = match watcher {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch certificate files; rechecking every minute");
            None
        }
    };
    let mut watched = BTreeSet::<PathBuf>::new();
    let mut recheck = tokio::time::interval(RECHECK);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // A reload may have named new folders.
        if let Some(w) = watcher.as_mut() {
            for dir in tls.folders() {
                // A pending certificate's folder may not exist (a pod started before its
                // Secret volume was added): the minute's recheck is all it can get.
                if !watched.contains(&dir) && dir.is_dir() {
                    match w.watch(&dir, notify::RecursiveMode::NonRecursive) {
                        Ok(()) => {
                            watched.insert(dir);
                        }
                        Err(e) => {
                            tracing::warn!(folder = %dir.display(), error = %e, "cannot watch a certificate folder")
                        }
                    }
                }
            }
        }
        tokio::select! {
            Some(()) = events.recv() => {
                // A Secret update is several events, and a certificate may be written
                // before its key: let them settle into one reload.
                tokio::time::sleep(Duration::from_millis(200)).await;
                while events.try_recv().is_ok() {}
            }
            _ = recheck.tick() => {}
        }
        let tls = tls.clone();
        let _ = tokio::task::spawn_blocking(move || tls.refresh()).await;
    }
}

/// Writes, creations, renames and removals of a certificate file or of a `..`-prefixed
/// Kubernetes volume entry; never reads (the reload's own reads would wake it again).
fn may_change(ev: &notify::Event, tls: &Tls) -> bool {
    if !crate::fs::events::may_change(&ev.kind) {
        return false;
    }
    ev.paths.is_empty()
        || ev
            .paths
            .iter()
            .any(|p| p.file_name().is_none_or(|n| tls.is_certificate_file(n)))
}
