//! Each worker's own map of the small files it served lately, in front of the shared
//! cache: a hit there takes no shard lock other workers take. The shared cache decides
//! what is fresh: an entry here is used while it would be used there without a stat (its
//! revalidation interval), never once it was found changed. Hot files then reach the
//! shared cache's eviction policy about once per interval per worker, which it counts as
//! one use.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// Entries held per worker; a full front starts over.
const CAPACITY: usize = 256;

/// Only entries this light are held, and none holding a descriptor: one the shared cache
/// evicts or retires may stay here (unused once stale) until the front starts over, so
/// what a front holds beyond the cache's budget is `CAPACITY` times this at worst.
pub(super) const MAX_WEIGHT: u64 = 16 * 1024;

type Fast<K, V> = HashMap<K, V, BuildHasherDefault<PathHasher>>;

/// One worker's entries (`E`, the cache's entry type): by cache and root (several
/// virtual servers, test servers in one process), then by path.
pub(super) struct Front<E> {
    roots: Fast<(u64, u32), Fast<Box<str>, Arc<E>>>,
    entries: usize,
}

impl<E> Front<E> {
    pub fn new() -> Front<E> {
        Front {
            roots: HashMap::default(),
            entries: 0,
        }
    }

    /// The entry held for `path` in `root` of cache `cache`.
    pub fn get(&self, cache: u64, root: u32, path: &str) -> Option<Arc<E>> {
        self.roots.get(&(cache, root))?.get(path).cloned()
    }

    /// Holds `entry` for `path` in `root` of cache `cache`, in place of any older one.
    pub fn put(&mut self, cache: u64, root: u32, path: &str, entry: &Arc<E>) {
        if let Some(held) = self
            .roots
            .get_mut(&(cache, root))
            .and_then(|paths| paths.get_mut(path))
        {
            *held = entry.clone();
            return;
        }
        if self.entries >= CAPACITY {
            self.roots.clear();
            self.entries = 0;
        }
        self.roots
            .entry((cache, root))
            .or_default()
            .insert(path.into(), entry.clone());
        self.entries += 1;
    }

    /// Lets go of the entry for `path` (found retired).
    pub fn forget(&mut self, cache: u64, root: u32, path: &str) {
        if let Some(paths) = self.roots.get_mut(&(cache, root)) {
            if paths.remove(path).is_some() {
                self.entries -= 1;
            }
            if paths.is_empty() {
                self.roots.remove(&(cache, root));
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.roots.values().map(HashMap::len).sum()
    }
}

/// A multiply-rotate hash (rustc's FxHasher) for request paths. Not flood-resistant,
/// which is safe here: only paths of files that exist are held, at most `CAPACITY`.
#[derive(Default)]
struct PathHasher(u64);

impl Hasher for PathHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }
    }

    fn write_u8(&mut self, b: u8) {
        self.add(u64::from(b));
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl PathHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_bounded_across_roots_and_found_by_cache_root_and_path() {
        let mut front = Front::new();
        let entry = Arc::new(7u8);
        // Many roots serving the same paths (virtual servers, deploys to new roots).
        for root in 0..100u32 {
            for path in ["/", "/favicon.ico", "/robots.txt"] {
                front.put(1, root, path, &entry);
                assert!(front.len() <= CAPACITY, "{} entries", front.len());
            }
        }
        front.put(2, 99, "/", &Arc::new(8u8));
        assert_eq!(front.get(2, 99, "/").as_deref(), Some(&8));
        assert_eq!(front.get(1, 99, "/").as_deref(), Some(&7));
        assert_eq!(front.get(1, 99, "/nothing"), None);
        let before = front.len();
        front.forget(1, 99, "/");
        assert_eq!(front.get(1, 99, "/"), None);
        assert_eq!(front.len(), before - 1);
        // Putting the same key again replaces, and does not count twice.
        front.put(2, 99, "/", &Arc::new(9u8));
        assert_eq!(front.get(2, 99, "/").as_deref(), Some(&9));
        assert_eq!(front.len(), before - 1);
    }
}
