//! Letting go of files nobody asked for lately. An entry that keeps a descriptor open
//! also keeps a file deleted or replaced since on disk (a site synced anew, a ConfigMap
//! swapped): it is dropped once unasked for a minute, as nginx's `open_file_cache
//! inactive` does. In-memory entries stay until the budget evicts them.

use super::{FileCache, FileEntry};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How often the cache is swept.
const SWEEP: Duration = Duration::from_secs(30);

impl FileCache {
    /// How long a descriptor-holding entry may go unrevalidated: a minute unasked, as an
    /// entry's revalidation trails its last request by at most one interval.
    pub fn idle_limit(&self) -> Duration {
        Duration::from_secs(60).saturating_add(self.settings.revalidate)
    }

    /// Takes out the entries holding a descriptor that have gone unrevalidated for
    /// `limit`, and returns them: dropping the last holder of a deleted file's descriptor
    /// frees its blocks, which may take a while, and quick_cache drops what `retain`
    /// removes under the shard's lock.
    pub fn drop_idle(&self, limit: Duration) -> Vec<Arc<FileEntry>> {
        let now = self.now_ms();
        let limit = limit.as_millis() as u64;
        let dropped = std::cell::RefCell::new(Vec::new());
        self.entries.retain(|_, e| {
            let idle = now.saturating_sub(e.checked_at_ms.load(Ordering::Relaxed)) >= limit;
            let keep = !idle || !e.holds_descriptor();
            if !keep {
                dropped.borrow_mut().push(e.clone());
            }
            keep
        });
        dropped.into_inner()
    }
}

/// Sweeps `cache` for the life of the process (on the control runtime).
pub async fn sweep(cache: Arc<FileCache>) {
    let mut tick = tokio::time::interval(SWEEP);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        // Each shard is write-locked while its entries are walked (a cheap age check
        // each): inline. The closes, which free deleted files, go to a blocking thread.
        let dropped = cache.drop_idle(cache.idle_limit());
        if !dropped.is_empty() {
            tracing::debug!(dropped = dropped.len(), "idle open files let go");
            let _ = tokio::task::spawn_blocking(move || drop(dropped)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{CacheRoot, CacheSettings, Lookup};
    use crate::fs::open::Root;

    /// Whether this process holds a descriptor of `path` (deleted or not).
    fn holds_open(path: &std::path::Path) -> bool {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .any(|fd| {
                std::fs::read_link(fd.path()).is_ok_and(|target| {
                    target.to_string_lossy().trim_end_matches(" (deleted)")
                        == path.to_string_lossy()
                })
            })
    }

    #[test]
    fn idle_entries_with_a_descriptor_are_let_go_and_asked_for_and_small_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["asked.bin", "gone.bin"] {
            std::fs::write(dir.path().join(name), vec![7u8; 64 * 1024]).unwrap();
        }
        std::fs::write(dir.path().join("small.txt"), "small").unwrap();
        let root = CacheRoot {
            id: 1,
            root: Root::open(dir.path(), false).unwrap(),
            index_files: vec![],
        };
        let cache = FileCache::new(CacheSettings {
            revalidate: Duration::from_millis(10),
            ..CacheSettings::default()
        });
        let get = |name: &str| {
            let found = cache
                .lookup(&root, &format!("/{name}"), name, false)
                .unwrap();
            assert!(matches!(found, Lookup::File(..)), "{name}");
        };
        for name in ["asked.bin", "gone.bin", "small.txt"] {
            get(name);
        }
        assert_eq!(cache.idle_limit(), Duration::from_millis(60_010));
        assert!(
            cache.drop_idle(cache.idle_limit()).is_empty(),
            "nothing is idle yet"
        );
        // gone.bin is deleted, its space kept by the open descriptor; asked.bin is asked
        // for again after its interval, which revalidates it.
        let gone = dir.path().join("gone.bin");
        std::fs::remove_file(&gone).unwrap();
        assert!(holds_open(&gone));
        std::thread::sleep(Duration::from_millis(120));
        get("asked.bin");
        let dropped = cache.drop_idle(Duration::from_millis(80));
        assert_eq!(dropped.len(), 1, "only gone.bin is idle");
        drop(dropped);
        assert!(!holds_open(&gone), "the deleted file is still held open");
        assert!(holds_open(&dir.path().join("asked.bin")));
        assert_eq!(cache.len(), 2, "asked.bin and the in-memory small.txt stay");
    }
}
