//! The I/O cache, after Cherokee's iocache: small files are held in memory with their
//! representation headers prebuilt, so a hit makes no file-system syscall. Large files
//! keep an open descriptor (as nginx's open_file_cache does) for sendfile.
//!
//! Freshness: an entry is re-checked with stat(2) at most once per `revalidate` interval,
//! as lighttpd's `simple` stat cache does; a changed file is reloaded and a deleted one is
//! dropped. Eviction is quick_cache's CLOCK-Pro over entry weight (bytes held), which keeps
//! hot small files and resists scans by one-hit files.

mod front;
pub mod idle;
mod open_errors;
mod revalidation;
mod roots;

pub use roots::{CacheRoot, RootRegistry};

use crate::fs::mime::content_type_for;
use crate::fs::open::Root;
use crate::http::encoding::Encoding;
use bytes::Bytes;
use http::HeaderValue;
use open_errors::{classify_open_error, is_missing, refused_for_good};
use revalidation::{fingerprint, index_candidate, index_overtaken, sidecar_keys};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone)]
pub struct CacheSettings {
    /// Files up to this size are held in memory.
    pub max_file_size: u64,
    /// Total bytes held (memory plus a fixed charge per entry).
    pub max_bytes: u64,
    /// How long an entry is trusted before it is re-checked with stat.
    pub revalidate: Duration,
    /// In-memory files at least this large also keep their descriptor open, so that
    /// plaintext HTTP/1.1 can send them with sendfile (cheaper than writev from ~16 KiB, BENCHMARKS.md).
    pub keep_descriptor_from: u64,
}

impl Default for CacheSettings {
    fn default() -> Self {
        CacheSettings {
            max_file_size: 256 * 1024,
            max_bytes: 64 * 1024 * 1024,
            revalidate: Duration::from_secs(1),
            keep_descriptor_from: 16 * 1024,
        }
    }
}

/// What identifies a version of a file on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StatKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl StatKey {
    fn of(st: &rustix::fs::Stat) -> StatKey {
        StatKey {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size as u64,
            mtime_ns: st.st_mtime as i128 * 1_000_000_000 + st.st_mtime_nsec as i128,
        }
    }
    fn modified(&self) -> SystemTime {
        if self.mtime_ns >= 0 {
            UNIX_EPOCH + Duration::from_nanos(self.mtime_ns as u64)
        } else {
            UNIX_EPOCH
        }
    }
}

#[derive(Debug)]
pub enum Data {
    /// Held in memory; large enough ones keep their descriptor for sendfile too.
    Memory(Bytes, Option<Arc<File>>),
    File(Arc<File>),
}

/// One representation of a file: the original or a precompressed sidecar.
#[derive(Debug)]
pub struct Variant {
    pub encoding: Option<Encoding>,
    pub len: u64,
    pub modified: SystemTime,
    pub etag: HeaderValue,
    pub last_modified: HeaderValue,
    pub data: Data,
    /// The 200 response head, built on first use by the handler that owns header policy.
    pub head_200: std::sync::OnceLock<Arc<crate::http::reply::PrebuiltHead>>,
}

/// A file and its sidecars, ready to serve.
#[derive(Debug)]
pub struct FileEntry {
    pub content_type: HeaderValue,
    pub identity: Variant,
    /// Sidecars newer than the original, in server preference order.
    pub encoded: Vec<Variant>,
    pub available: Vec<Encoding>,
    /// The file's path relative to the root (after index resolution).
    rel: String,
    /// Stat keys of the original and of each possible sidecar (None: absent or ignored).
    fingerprint: [Option<StatKey>; 4],
    /// The coarse monotonic clock (`now_ms`) when this entry was last known fresh.
    checked_at_ms: AtomicU64,
    /// Found changed or gone: no longer served, whatever `checked_at_ms` says (a worker's
    /// front may still hold it).
    retired: AtomicBool,
    /// For a derived entry: the ETag of the version it was made from.
    derived_from: Option<HeaderValue>,
}

impl FileEntry {
    pub fn variant(&self, enc: Option<Encoding>) -> &Variant {
        match enc {
            None => &self.identity,
            Some(e) => self
                .encoded
                .iter()
                .find(|v| v.encoding == Some(e))
                .unwrap_or(&self.identity),
        }
    }
    /// Whether a variant keeps its file open (for sendfile).
    fn holds_descriptor(&self) -> bool {
        std::iter::once(&self.identity)
            .chain(&self.encoded)
            .any(|v| matches!(v.data, Data::File(_) | Data::Memory(_, Some(_))))
    }

    fn weight(&self) -> u64 {
        const ENTRY_OVERHEAD: u64 = 512;
        // An open descriptor is charged as if it were bytes, so the budget bounds them too
        // (64 MiB: at most 16,384): a crawler walking a site of large files (512 bytes
        // each otherwise) would hold hundreds of thousands open, up to EMFILE.
        const DESCRIPTOR: u64 = 4096;
        let cost = |v: &Variant| match &v.data {
            Data::Memory(b, None) => b.len() as u64,
            Data::Memory(b, Some(_)) => b.len() as u64 + DESCRIPTOR,
            Data::File(_) => DESCRIPTOR,
        };
        ENTRY_OVERHEAD + cost(&self.identity) + self.encoded.iter().map(cost).sum::<u64>()
    }
}

/// What a request path resolves to.
#[derive(Debug)]
pub enum Lookup {
    File(Arc<FileEntry>, Hit),
    /// A directory requested without its trailing slash.
    RedirectToSlash,
    /// A directory with no index file; `rel` is its path for a listing.
    Directory(String),
    NotFound,
    /// Something that exists but is not servable: a device, a FIFO, a symlink out of root.
    Forbidden,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hit {
    Hit,
    Miss,
}

#[derive(Clone)]
struct EntryWeighter;

impl quick_cache::Weighter<CacheKey, Arc<FileEntry>> for EntryWeighter {
    fn weight(&self, _key: &CacheKey, val: &Arc<FileEntry>) -> u64 {
        val.weight()
    }
}

/// Entries are keyed by document root and request path, so every virtual server (and
/// every config generation) shares one byte budget.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CacheKey {
    root: u32,
    path: Box<str>,
    /// 0 for the file itself; otherwise a derived form (a compressed coding).
    derived: u8,
}

impl std::hash::Hash for CacheKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.root.hash(h);
        self.path.as_ref().hash(h);
        self.derived.hash(h);
    }
}

/// The borrowed form of `CacheKey`, for lookups without allocating.
struct KeyRef<'a> {
    root: u32,
    path: &'a str,
    derived: u8,
}

impl std::hash::Hash for KeyRef<'_> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.root.hash(h);
        self.path.hash(h);
        self.derived.hash(h);
    }
}

impl quick_cache::Equivalent<CacheKey> for KeyRef<'_> {
    fn equivalent(&self, key: &CacheKey) -> bool {
        self.root == key.root && self.derived == key.derived && self.path == &*key.path
    }
}

thread_local! {
    /// This thread's front (`front`): each worker's own.
    static FRONT: std::cell::RefCell<front::Front<FileEntry>> =
        std::cell::RefCell::new(front::Front::new());
}

pub struct FileCache {
    settings: CacheSettings,
    entries: quick_cache::sync::Cache<CacheKey, Arc<FileEntry>, EntryWeighter>,
    /// Tells this cache's entries from another's in the workers' fronts.
    id: u64,
}

/// Shards of the entry map. Each shard holds an equal part of `max_bytes` and silently
/// refuses an entry heavier than about 97 % of its part, so there are only as many as
/// leave room for the heaviest entry (a file of `max_file_size` and three encoded forms),
/// and at most 4 per CPU (quick_cache's default). Without this, 32 CPUs and the default
/// budget cached no file over ~120 KiB, and compressed such a file again on every request.
fn shards(settings: &CacheSettings) -> usize {
    // The entry's 512 bytes, and a file and three encoded forms, each with a descriptor.
    let heaviest = settings
        .max_file_size
        .saturating_add(4096)
        .saturating_mul(4)
        .saturating_add(512);
    let room = heaviest.saturating_add(heaviest / 16);
    let fit = usize::try_from(settings.max_bytes / room.max(1)).unwrap_or(usize::MAX);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let most = fit.clamp(1, cpus.saturating_mul(4));
    // quick_cache rounds up to a power of two; rounding down keeps each part large enough.
    1 << most.ilog2()
}

impl FileCache {
    pub fn new(settings: CacheSettings) -> FileCache {
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        let options = quick_cache::OptionsBuilder::new()
            .estimated_items_capacity(4096)
            .weight_capacity(settings.max_bytes.max(1))
            .shards(shards(&settings))
            .build()
            .expect("both capacities are set");
        let entries = quick_cache::sync::Cache::with_options(
            options,
            EntryWeighter,
            Default::default(),
            Default::default(),
        );
        FileCache {
            settings,
            entries,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Bytes currently held, by the cache's own weighing.
    pub fn weight(&self) -> u64 {
        self.entries.weight()
    }

    /// Entries currently held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every hit reads the clock; a revalidation interval needs no finer step than a tick.
    fn now_ms(&self) -> u64 {
        crate::coarse_clock::monotonic_ms()
    }

    /// Resolves a normalized request path (`/a/b`, or `/dir/` for a directory) in `root`.
    // Inlined even with cold callers (misses), so the handler's hot path keeps its body.
    #[inline(always)]
    pub fn lookup(
        &self,
        root: &CacheRoot,
        path: &str,
        rel: &str,
        trailing_slash: bool,
    ) -> io::Result<Lookup> {
        let now = self.now_ms();
        let interval = self.settings.revalidate.as_millis() as u64;
        let fresh = |entry: &FileEntry| {
            now.saturating_sub(entry.checked_at_ms.load(Ordering::Relaxed)) < interval
        };
        if let Some(entry) = FRONT.with(|f| f.borrow().get(self.id, root.id, path)) {
            if entry.retired.load(Ordering::Relaxed) {
                FRONT.with(|f| f.borrow_mut().forget(self.id, root.id, path));
            } else if fresh(&entry) {
                return Ok(Lookup::File(entry, Hit::Hit));
            }
        }
        let key = KeyRef {
            root: root.id,
            path,
            derived: 0,
        };
        let found = self.lookup_shared(root, path, rel, trailing_slash, &key, now, interval)?;
        if let Lookup::File(entry, _) = &found {
            if entry.weight() <= front::MAX_WEIGHT && !entry.holds_descriptor() {
                FRONT.with(|f| f.borrow_mut().put(self.id, root.id, path, entry));
            }
        }
        Ok(found)
    }

    /// `lookup` in the shared cache: a fresh entry, a revalidated one, or the file loaded.
    #[allow(clippy::too_many_arguments)]
    fn lookup_shared(
        &self,
        root: &CacheRoot,
        path: &str,
        rel: &str,
        trailing_slash: bool,
        key: &KeyRef<'_>,
        now: u64,
        interval: u64,
    ) -> io::Result<Lookup> {
        if let Some(entry) = self.entries.get(key) {
            let checked = entry.checked_at_ms.load(Ordering::Relaxed);
            if now.saturating_sub(checked) < interval {
                return Ok(Lookup::File(entry, Hit::Hit));
            }
            // One request revalidates; concurrent ones keep serving the entry meanwhile.
            if entry
                .checked_at_ms
                .compare_exchange(checked, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
            {
                return Ok(Lookup::File(entry, Hit::Hit));
            }
            if fingerprint(&root.root, &entry.rel) == entry.fingerprint
                && !index_overtaken(&root.root, &root.index_files, rel, &entry.rel)
            {
                return Ok(Lookup::File(entry, Hit::Hit));
            }
            entry.retired.store(true, Ordering::Relaxed);
            self.entries.remove(key);
        }
        let found = self.load(root, rel, trailing_slash)?;
        if let Lookup::File(entry, _) = &found {
            if entry.fingerprint[0].is_some() {
                self.entries.insert(
                    CacheKey {
                        root: root.id,
                        path: path.into(),
                        derived: 0,
                    },
                    entry.clone(),
                );
            }
        }
        Ok(found)
    }

    /// A form derived from `source` (for example a compressed coding, `tag` > 0), made by
    /// `make` once per source version and held as its own cache entry, so it is weighed
    /// and evicted on its own. `None` from `make` means "not worth it" and is remembered too.
    pub fn derived(
        &self,
        root: &CacheRoot,
        path: &str,
        tag: u8,
        source: &FileEntry,
        make: impl FnOnce(&Variant) -> Option<(Bytes, Option<Encoding>)>,
    ) -> Option<Arc<FileEntry>> {
        debug_assert!(tag > 0);
        let key = KeyRef {
            root: root.id,
            path,
            derived: tag,
        };
        if let Some(found) = self.entries.get(&key) {
            if found.derived_from.as_ref() == Some(&source.identity.etag) {
                return (found.identity.len > 0).then_some(found);
            }
        }
        let made = make(&source.identity);
        let (bytes, encoding) = made.clone().unwrap_or((Bytes::new(), None));
        let tag_text = encoding.map_or("none", |e| e.token());
        let etag = source.identity.etag.to_str().unwrap_or("\"x\"");
        let etag = format!("{}-c{tag_text}\"", etag.trim_end_matches('"'));
        let entry = Arc::new(FileEntry {
            content_type: source.content_type.clone(),
            identity: Variant {
                encoding,
                len: bytes.len() as u64,
                modified: source.identity.modified,
                etag: HeaderValue::from_str(&etag).ok()?,
                last_modified: source.identity.last_modified.clone(),
                data: Data::Memory(bytes, None),
                head_200: std::sync::OnceLock::new(),
            },
            encoded: Vec::new(),
            available: Vec::new(),
            rel: source.rel.clone(),
            fingerprint: source.fingerprint,
            checked_at_ms: AtomicU64::new(self.now_ms()),
            retired: AtomicBool::new(false),
            derived_from: Some(source.identity.etag.clone()),
        });
        self.entries.insert(
            CacheKey {
                root: root.id,
                path: path.into(),
                derived: tag,
            },
            entry.clone(),
        );
        made.map(|_| entry)
    }

    fn load(&self, croot: &CacheRoot, rel: &str, trailing_slash: bool) -> io::Result<Lookup> {
        let root = &croot.root;
        let file = match root.open_file(rel) {
            Ok(f) => f,
            Err(e) => return classify_open_error(e),
        };
        let st = rustix::fs::fstat(&file)?;
        match rustix::fs::FileType::from_raw_mode(st.st_mode) {
            rustix::fs::FileType::RegularFile => {
                if trailing_slash && rel != "." {
                    return Ok(Lookup::NotFound); // "/file.txt/" names no directory
                }
                let entry = self.build_entry(root, rel, file, &st)?;
                Ok(Lookup::File(Arc::new(entry), Hit::Miss))
            }
            rustix::fs::FileType::Directory => {
                if !trailing_slash {
                    return Ok(Lookup::RedirectToSlash);
                }
                for index in &croot.index_files {
                    let candidate = index_candidate(rel, index);
                    match root.open_file(&candidate) {
                        Ok(f) => {
                            let st = rustix::fs::fstat(&f)?;
                            if rustix::fs::FileType::from_raw_mode(st.st_mode)
                                == rustix::fs::FileType::RegularFile
                            {
                                let entry = self.build_entry(root, &candidate, f, &st)?;
                                return Ok(Lookup::File(Arc::new(entry), Hit::Miss));
                            }
                        }
                        Err(e) if is_missing(&e) => continue,
                        Err(e) => return classify_open_error(e),
                    }
                }
                Ok(Lookup::Directory(rel.to_owned()))
            }
            _ => Ok(Lookup::Forbidden),
        }
    }
}

impl FileCache {
    fn build_entry(
        &self,
        root: &Root,
        rel: &str,
        file: File,
        st: &rustix::fs::Stat,
    ) -> io::Result<FileEntry> {
        let key = StatKey::of(st);
        let identity = self.build_variant(file, key, None)?;
        // The sidecars as revalidation will see them, whether or not they can be served: one
        // that stats but can never be opened (unreadable, a symlink out of the root) is
        // left out without making every revalidation see a change. One that fails for a
        // while (out of descriptors, rewritten meanwhile) is left out of the fingerprint
        // too, so the next revalidation tries again; neither fails the original's response.
        let sides = sidecar_keys(root, rel, Some(key));
        let mut fingerprint = [Some(key), sides[0], sides[1], sides[2]];
        let mut encoded = Vec::new();
        for (i, enc) in Encoding::ALL.iter().enumerate() {
            if sides[i].is_none() {
                continue;
            }
            let side = format!("{rel}{}", enc.suffix());
            let f = match root.open_file(&side) {
                Ok(f) => f,
                Err(e) => {
                    if !refused_for_good(&e) {
                        fingerprint[i + 1] = None;
                    }
                    continue;
                }
            };
            let Ok(sst) = rustix::fs::fstat(&f) else {
                fingerprint[i + 1] = None;
                continue;
            };
            let skey = StatKey::of(&sst);
            if rustix::fs::FileType::from_raw_mode(sst.st_mode) != rustix::fs::FileType::RegularFile
                || skey.mtime_ns < key.mtime_ns
            {
                continue; // replaced since the stat, or older than the original: ignored
            }
            let Ok(variant) = self.build_variant(f, skey, Some(*enc)) else {
                fingerprint[i + 1] = None;
                continue;
            };
            fingerprint[i + 1] = Some(skey);
            encoded.push(variant);
        }
        let available = encoded.iter().filter_map(|v| v.encoding).collect();
        Ok(FileEntry {
            content_type: content_type_for(rel),
            identity,
            encoded,
            available,
            rel: rel.to_owned(),
            fingerprint,
            checked_at_ms: AtomicU64::new(self.now_ms()),
            retired: AtomicBool::new(false),
            derived_from: None,
        })
    }

    fn build_variant(
        &self,
        file: File,
        key: StatKey,
        encoding: Option<Encoding>,
    ) -> io::Result<Variant> {
        let modified = key.modified();
        // Strong ETag from mtime (ns) and size, not the inode: replicas serving the same
        // content from different volumes must agree, or revalidation misses between pods.
        let etag = format!(
            "\"{:x}-{:x}{}{}\"",
            key.mtime_ns,
            key.size,
            if encoding.is_some() { "-" } else { "" },
            encoding.map_or("", |e| e.token())
        );
        let data = if key.size <= self.settings.max_file_size {
            let bytes = read_exact_size(&file, key.size)?;
            let keep = (key.size >= self.settings.keep_descriptor_from).then(|| Arc::new(file));
            Data::Memory(bytes, keep)
        } else {
            Data::File(Arc::new(file))
        };
        Ok(Variant {
            encoding,
            len: key.size,
            modified,
            etag: HeaderValue::from_str(&etag).expect("hex etag is a valid header value"),
            last_modified: HeaderValue::from_str(&httpdate::fmt_http_date(modified))
                .expect("http date is a valid header value"),
            data,
            head_200: std::sync::OnceLock::new(),
        })
    }
}

/// Reads a whole small file. A file that changes size while read is an error, so a torn
/// read is never cached.
fn read_exact_size(file: &File, size: u64) -> io::Result<Bytes> {
    let shrank = || io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank while being read");
    // Larger files are placed mid-page for rustls's record copy (fs::chunk); the page
    // that costs is at most 1/16 of them. Smaller ones are held exactly.
    if size >= MID_PAGE_FROM {
        return crate::fs::chunk::read_mid_page(file, 0, size as usize)?.ok_or_else(shrank);
    }
    let mut buf = vec![0u8; size as usize];
    let mut done = 0;
    while done < buf.len() {
        let n = file.read_at(&mut buf[done..], done as u64)?;
        if n == 0 {
            return Err(shrank());
        }
        done += n;
    }
    Ok(Bytes::from(buf))
}

/// The size from which a cached file's bytes start mid-page.
const MID_PAGE_FROM: u64 = 64 * 1024;
