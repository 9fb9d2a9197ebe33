//! Letting go of files nobody asked for lately. An entry that keeps a descriptor open
//! also keeps a file deleted or replaced since on disk (a site synced anew, a ConfigMap
//! swapped): it is dropped once it has gone unrevalidated for the idle limit, as nginx's
//! `open_file_cache inactive` does. In-memory entries stay until the budget evicts them.

use super::FileCache;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How often the cache is swept.
const SWEEP: Duration = Duration::from_secs(30);

impl FileCache {
    /// How long a descriptor-holding entry may go unrevalidated: a minute, or ten
    /// revalidation intervals when those are long (a hot file is revalidated once per
    /// interval, so it never looks idle).
    pub fn idle_limit(&self) -> Duration {
        Duration::from_secs(60).max(self.settings.revalidate.saturating_mul(10))
    }

    /// Drops the entries holding a descriptor that have gone unrevalidated for `limit`;
    /// returns how many.
    pub fn drop_idle(&self, limit: Duration) -> usize {
        let now = self.now_ms();
        let limit = limit.as_millis() as u64;
        let before = self.entries.len();
        self.entries.retain(|_, e| {
            !e.holds_descriptor()
                || now.saturating_sub(e.checked_at_ms.load(Ordering::Relaxed)) < limit
        });
        before.saturating_sub(self.entries.len())
    }
}

/// Sweeps `cache` for the life of the process (on the control runtime).
pub async fn sweep(cache: Arc<FileCache>) {
    let mut tick = tokio::time::interval(SWEEP);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        // A shard at a time, each write-locked for the walk of its entries (microseconds
        // each): cheaper inline than a blocking thread woken twice a minute.
        let dropped = cache.drop_idle(cache.idle_limit());
        if dropped > 0 {
            tracing::debug!(dropped, "idle open files let go");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{CacheRoot, CacheSettings, Lookup};
    use crate::fs::open::Root;

    #[test]
    fn idle_entries_with_a_descriptor_are_dropped_and_small_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big.bin"), vec![7u8; 64 * 1024]).unwrap();
        std::fs::write(dir.path().join("small.txt"), "small").unwrap();
        let root = CacheRoot {
            id: 1,
            root: Root::open(dir.path(), false).unwrap(),
            index_files: vec![],
        };
        let cache = FileCache::new(CacheSettings::default());
        for name in ["big.bin", "small.txt"] {
            let found = cache
                .lookup(&root, &format!("/{name}"), name, false)
                .unwrap();
            assert!(matches!(found, Lookup::File(..)), "{name}");
        }
        assert_eq!(cache.len(), 2);
        assert_eq!(
            cache.drop_idle(cache.idle_limit()),
            0,
            "nothing is idle yet"
        );
        // The big file is deleted: its open descriptor keeps its space until let go.
        std::fs::remove_file(dir.path().join("big.bin")).unwrap();
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(cache.drop_idle(Duration::from_millis(1)), 1);
        assert_eq!(cache.len(), 1, "the in-memory entry stays");
        assert_eq!(cache.idle_limit(), Duration::from_secs(60));
    }
}
