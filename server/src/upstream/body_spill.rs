//! A request body buffered whole in an unnamed file (O_TMPFILE in the temp directory)
//! before a CGI backend's worker is taken, as nginx buffers bodies to disk for FastCGI: a
//! slow upload then holds no php-fpm or uWSGI worker while it trickles in. What the
//! bodies buffered at once hold together is capped, counted as bytes are written; a body
//! that meets the cap hands on what its file holds and streams the rest.

use crate::coarse_clock;
use bytes::Bytes;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes handed to the backend per frame, read back from the file.
const READ_CHUNK: u64 = 64 * 1024;

/// What buffered request bodies may hold together (in files, or in memory), and what they
/// hold.
pub struct BufferBudget {
    cap: u64,
    held: AtomicU64,
}

impl BufferBudget {
    pub const fn new(cap: u64) -> BufferBudget {
        BufferBudget {
            cap,
            held: AtomicU64::new(0),
        }
    }

    /// Takes up to `want` bytes of what is left; returns how many it took.
    fn take(&self, want: u64) -> u64 {
        let mut taken = 0;
        let _ = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                taken = want.min(self.cap.saturating_sub(held));
                (taken > 0).then(|| held + taken)
            });
        taken
    }

    /// Takes `want` bytes, or none if that much is not left.
    pub fn try_take(&self, want: u64) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(want).filter(|&sum| sum <= self.cap)
            })
            .is_ok()
    }

    pub fn give_back(&self, bytes: u64) {
        self.held.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// Bytes the buffered bodies hold now.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Acquire)
    }

    /// Whether nothing is left to take.
    pub fn spent(&self) -> bool {
        self.held() >= self.cap
    }
}

/// The files' budget: 1 GiB, under the 2 GiB `/tmp` the operator gives an edge with a CGI
/// pool, so the kubelet never evicts a pod for its uploads.
pub static FILES: BufferBudget = BufferBudget::new(1 << 30);

/// What bodies gathered whole in memory past their first 64 KiB may hold together: CGI
/// bodies without a length, when no file can be had or the files' budget is met. Past it,
/// 503: a pod's memory is not the place for a flood of uploads.
pub static MEMORY: BufferBudget = BufferBudget::new(256 << 20);

static NO_FOLDER_WARNED: AtomicBool = AtomicBool::new(false);

/// Writes of buffered bodies running at once, for the whole process: a stalled disk then
/// parks this many blocking threads, not one per upload (and basic auth's bcrypt, on the
/// same pool, keeps threads); an upload waiting for its turn reads nothing meanwhile.
static WRITES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(8);

/// The unnamed file and its share of the budget, given back when the last holder (the
/// body, or a write still running for a body gone) closes it: when its space is freed.
struct SpillFile {
    file: File,
    budget: &'static BufferBudget,
    charged: AtomicU64,
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        self.budget.give_back(self.charged.load(Ordering::Acquire));
    }
}

/// A body's bytes in an unnamed file: written as they arrive (on the blocking pool), then
/// read back in order.
pub struct Spill {
    file: Arc<SpillFile>,
    len: u64,
    read: u64,
}

impl Spill {
    /// A file in `dir` counted against `budget`; `None` when the budget is spent, or no
    /// file can be made there (a read-only file system: logged once).
    pub fn create(dir: &Path, budget: &'static BufferBudget) -> Option<Spill> {
        if budget.spent() {
            return None;
        }
        match open_unnamed(dir) {
            Ok(file) => Some(Spill {
                file: Arc::new(SpillFile {
                    file,
                    budget,
                    charged: AtomicU64::new(0),
                }),
                len: 0,
                read: 0,
            }),
            Err(e) => {
                if !NO_FOLDER_WARNED.swap(true, Ordering::Relaxed) {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot buffer request bodies in a file there: large uploads stream to CGI backends as they arrive (a slow one holds a worker)");
                }
                None
            }
        }
    }

    /// Appends as much of `data` as the budget leaves room for; returns how much that was.
    /// A full file system counts as a spent budget (0: the rest of the body streams). The
    /// write runs on the blocking pool: one can wait on the disk (dirty-page throttling in
    /// the pod's memory cgroup), and the worker serves other connections meanwhile.
    pub async fn write(&mut self, data: &Bytes) -> io::Result<usize> {
        let budget = self.file.budget;
        let taken = budget.take(data.len() as u64);
        if taken == 0 {
            return Ok(0);
        }
        // Charged to the file before the wait: a body dropped meanwhile gives it back
        // when the write running for it has closed the file too.
        self.file.charged.fetch_add(taken, Ordering::AcqRel);
        let written = match WRITES.acquire().await {
            Ok(_turn) => {
                let part = data.slice(..taken as usize);
                let (file, at) = (self.file.clone(), self.len);
                tokio::task::spawn_blocking(move || file.file.write_all_at(&part, at))
                    .await
                    .unwrap_or_else(|e| Err(io::Error::other(e)))
            }
            Err(closed) => Err(io::Error::other(closed)),
        };
        if let Err(e) = written {
            self.file.charged.fetch_sub(taken, Ordering::AcqRel);
            budget.give_back(taken);
            let full = matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT));
            if full {
                warn_buffer_failure("", "the temp directory is full: this upload streams on");
                return Ok(0);
            }
            return Err(e);
        }
        self.len += taken;
        Ok(taken as usize)
    }

    /// Bytes written and not read back yet.
    pub fn remaining(&self) -> u64 {
        self.len - self.read
    }

    /// The next bytes to hand on (at most 64 KiB; empty once all were read).
    pub fn read_next(&mut self) -> io::Result<Bytes> {
        let want = self.remaining().min(READ_CHUNK) as usize;
        let mut buf = vec![0u8; want];
        self.file.file.read_exact_at(&mut buf, self.read)?;
        self.read += want as u64;
        Ok(Bytes::from(buf))
    }
}

/// A file with no name in `dir`: gone with its last descriptor, whatever happens.
fn open_unnamed(dir: &Path) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        dir,
        OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
        Mode::RUSR | Mode::WUSR,
    )?;
    Ok(File::from(fd))
}

/// Logs a failure to buffer a body (a full disk) at most once a minute, with how many
/// went unlogged since: a full disk fails every upload, and each would log otherwise.
/// `pool` is empty where the file does not know it.
pub fn warn_buffer_failure(pool: &str, why: &str) {
    static NEXT_MS: AtomicU64 = AtomicU64::new(0);
    static UNLOGGED: AtomicU64 = AtomicU64::new(0);
    let now = coarse_clock::monotonic_ms();
    let next = NEXT_MS.load(Ordering::Relaxed);
    if now < next
        || NEXT_MS
            .compare_exchange(next, now + 60_000, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        UNLOGGED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let unlogged = UNLOGGED.swap(0, Ordering::Relaxed);
    tracing::warn!(pool, error = %why, unlogged_since_last = unlogged, "cannot buffer a request body (is the temp directory full?)");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(cap: u64) -> &'static BufferBudget {
        Box::leak(Box::new(BufferBudget::new(cap)))
    }

    #[tokio::test]
    async fn a_body_goes_back_out_in_order_from_a_file_without_a_name() {
        let dir = tempfile::tempdir().unwrap();
        let body: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
        let mut spill = Spill::create(dir.path(), budget(1 << 20)).expect("a file");
        for part in body.chunks(7_000) {
            let part = Bytes::copy_from_slice(part);
            assert_eq!(spill.write(&part).await.unwrap(), part.len());
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no name");
        let mut back = Vec::new();
        while spill.remaining() > 0 {
            let chunk = spill.read_next().unwrap();
            assert!(chunk.len() as u64 <= READ_CHUNK);
            back.extend_from_slice(&chunk);
        }
        assert_eq!(back, body);
    }

    #[tokio::test]
    async fn the_budget_counts_bytes_written_and_frees_them_with_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let budget = budget(10_000);
        let mut first = Spill::create(dir.path(), budget).unwrap();
        let mut second = Spill::create(dir.path(), budget).unwrap();
        assert_eq!(
            budget.held(),
            0,
            "a file reserves nothing before it is written"
        );
        assert_eq!(
            first.write(&Bytes::from(vec![1u8; 6_000])).await.unwrap(),
            6_000
        );
        assert_eq!(
            second.write(&Bytes::from(vec![2u8; 6_000])).await.unwrap(),
            4_000,
            "what is left"
        );
        assert_eq!(
            second.write(&Bytes::from(vec![2u8; 10])).await.unwrap(),
            0,
            "the budget is spent"
        );
        assert_eq!(budget.held(), 10_000);
        drop(first);
        assert_eq!(budget.held(), 4_000, "freed with the file");
        assert_eq!(second.write(&Bytes::from(vec![2u8; 10])).await.unwrap(), 10);
        assert_eq!(second.remaining(), 4_010);
        drop(second);
        assert_eq!(budget.held(), 0);
    }

    /// A body dropped while a write for it still runs (the client gone) gives its share
    /// back when that write has closed the file too: when the space is freed.
    #[tokio::test]
    async fn the_share_goes_back_with_the_files_last_holder() {
        let dir = tempfile::tempdir().unwrap();
        let budget = budget(10_000);
        let mut spill = Spill::create(dir.path(), budget).unwrap();
        assert_eq!(
            spill.write(&Bytes::from(vec![1u8; 3_000])).await.unwrap(),
            3_000
        );
        let running_write = spill.file.clone();
        drop(spill);
        assert_eq!(budget.held(), 3_000, "the file is still open");
        drop(running_write);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn without_a_writable_folder_there_is_no_file() {
        assert!(Spill::create(Path::new("/proc/self"), budget(10)).is_none());
    }
}
