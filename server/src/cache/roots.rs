//! The document roots the I/O cache knows: each directory opened once, with a stable id
//! that keys its entries.

use crate::fs::open::Root;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A document root as the cache knows it: the open directory, a stable id and the index
/// files tried for directories.
#[derive(Debug)]
pub struct CacheRoot {
    pub id: u32,
    pub root: Root,
    pub index_files: Vec<String>,
}

/// (device, inode, follow symlinks, index files) and the root opened for them.
type KnownRoot = (u64, u64, bool, Vec<String>, Arc<CacheRoot>);

/// Opens document roots and gives each directory a stable id, so a config reload that
/// keeps a root keeps its cache entries, and one that swaps the directory gets fresh ones.
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
        if let Some((.., existing)) = known.iter().find(|(d, i, f, idx, _)| {
            *d == dev && *i == ino && *f == follow_symlinks && idx == index_files
        }) {
            return Ok(existing.clone());
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
            entry.clone(),
        ));
        Ok(entry)
    }
}
