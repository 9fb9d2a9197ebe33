//! Each worker's own map of the small files it served lately, in front of the shared
//! cache: a hit there takes no shard lock and hashes nothing other workers hash. The
//! shared cache decides what is fresh: an entry here is used while it would be used
//! there without a stat (its revalidation interval), never once it was found changed.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// Paths held per worker; a full map starts over.
const CAPACITY: usize = 256;

/// Only entries this light are held: one the shared cache evicts may live on here until
/// it next expires, so what the fronts hold beyond the cache's budget stays small
/// (`CAPACITY` times this, per worker, at worst).
pub(super) const MAX_WEIGHT: u64 = 16 * 1024;

/// One worker's entries (`E`, the cache's entry type), by path. Under a path there is
/// normally one, more only when several roots or caches (test servers in one process)
/// serve the same path.
pub(super) struct Front<E> {
    held: HashMap<Box<str>, Vec<Held<E>>, BuildHasherDefault<PathHasher>>,
}

/// An entry with the cache and root it came from.
type Held<E> = (u64, u32, Arc<E>);

impl<E> Front<E> {
    pub fn new() -> Front<E> {
        Front {
            held: HashMap::default(),
        }
    }

    /// The entry held for `path` in `root` of cache `cache`.
    pub fn get(&self, cache: u64, root: u32, path: &str) -> Option<Arc<E>> {
        self.held
            .get(path)?
            .iter()
            .find(|(c, r, _)| *c == cache && *r == root)
            .map(|(.., e)| e.clone())
    }

    /// Holds `entry` for `path` in `root` of cache `cache`, in place of any older one.
    pub fn put(&mut self, cache: u64, root: u32, path: &str, entry: &Arc<E>) {
        if let Some(held) = self.held.get_mut(path) {
            match held.iter_mut().find(|(c, r, _)| *c == cache && *r == root) {
                Some(slot) => slot.2 = entry.clone(),
                None => held.push((cache, root, entry.clone())),
            }
            return;
        }
        if self.held.len() >= CAPACITY {
            self.held.clear();
        }
        self.held
            .insert(path.into(), vec![(cache, root, entry.clone())]);
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
