//! The document roots the I/O cache knows: each directory opened once, with a stable id
//! that keys its entries, for as long as a live configuration uses it.

use crate::fs::open::Root;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

/// A document root as the cache knows it: the open directory, a stable id and the index
/// files tried for directories.
#[derive(Debug)]
pub struct CacheRoot {
    pub id: u32,
    pub root: Root,
    pub index_files: Vec<String>,
}

/// (device, inode, follow symlinks, index files) and the root opened for them, held by
/// the configurations that use it: one no configuration uses any more closes its directory.
type KnownRoot = (u64, u64, bool, Vec<String>, Weak<CacheRoot>);

/// Opens document roots and gives each directory a stable id, so a config reload that
/// keeps a root keeps its cache entries, and one that swaps the directory gets fresh ones.
/// Ids are never reused, so entries of a root let go (evicted or swept idle in time) are
/// never served for another.
#[derive(Default)]
pub struct RootRegistry {
    next_id: std::sync::atomic::AtomicU32,
    known: std::sync::Mutex<Vec<KnownRoot>>,
}

impl RootRegistry {
    pub fn open(
        &self,
        path: &std::path::Path,
        follow_symlinks: bool,
        index_files: &[String],
    ) -> io::Result<Arc<CacheRoot>> {
        let root = Root::open(path, follow_symlinks)?;
        let (dev, ino) = root.identity()?;
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        known.retain(|(.., root)| root.strong_count() > 0);
        let same = |(d, i, f, idx, _): &&KnownRoot| {
            *d == dev && *i == ino && *f == follow_symlinks && idx == index_files
        };
        if let Some(existing) = known.iter().find(same).and_then(|(.., r)| r.upgrade()) {
            return Ok(existing);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let entry = Arc::new(CacheRoot {
            id,
            root,
            index_files: index_files.to_vec(),
        });
        known.push((
            dev,
            ino,
            follow_symlinks,
            index_files.to_vec(),
            Arc::downgrade(&entry),
        ));
        Ok(entry)
    }

    /// Roots some configuration still uses.
    #[cfg(test)]
    fn live(&self) -> usize {
        let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        known.iter().filter(|(.., r)| r.strong_count() > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_keeps_its_id_while_used_and_is_let_go_after() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let registry = RootRegistry::default();
        let first = registry.open(a.path(), false, &[]).unwrap();
        let again = registry.open(a.path(), false, &[]).unwrap();
        assert_eq!(
            first.id, again.id,
            "a reload keeping the root keeps its entries"
        );
        let other = registry.open(b.path(), false, &[]).unwrap();
        assert_ne!(other.id, first.id);
        assert_eq!(registry.live(), 2);
        let id = first.id;
        drop((first, again));
        assert_eq!(registry.live(), 1, "no configuration uses the first root");
        let reopened = registry.open(a.path(), false, &[]).unwrap();
        assert!(reopened.id > other.id, "a fresh id, never one reused");
        assert_ne!(reopened.id, id);
        assert_eq!(
            registry.known.lock().unwrap().len(),
            2,
            "the dead one is gone"
        );
    }
}
