//! A request body buffered whole in an unnamed file (O_TMPFILE in the temp directory)
//! before a CGI backend's worker is taken, as nginx buffers bodies to disk for FastCGI: a
//! slow upload then holds no php-fpm or uWSGI worker while it trickles in. What the
//! bodies buffered at once may hold together is capped; past that, a body streams.

use bytes::Bytes;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What all bodies being buffered may hold at once (the pod's disk, or tmpfs memory).
const SPILL_CAP: u64 = 1 << 30;
/// Bytes handed to the backend per frame, read back from the file.
const READ_CHUNK: u64 = 64 * 1024;

static RESERVED: AtomicU64 = AtomicU64::new(0);
static WARNED: AtomicBool = AtomicBool::new(false);

/// A body's bytes in an unnamed file: written as they arrive, then read back in order.
pub struct Spill {
    file: File,
    /// Bytes reserved against [`SPILL_CAP`]: the body's declared length.
    reserved: u64,
    len: u64,
    read: u64,
}

impl Spill {
    /// A file in `dir` for a body of `declared` bytes; `None` when the cap would be passed
    /// or no file can be made there (a read-only file system: logged once).
    pub fn create(dir: &Path, declared: u64) -> Option<Spill> {
        let taken = RESERVED.fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
            held.checked_add(declared).filter(|&sum| sum <= SPILL_CAP)
        });
        if taken.is_err() {
            return None;
        }
        match open_unnamed(dir) {
            Ok(file) => Some(Spill {
                file,
                reserved: declared,
                len: 0,
                read: 0,
            }),
            Err(e) => {
                RESERVED.fetch_sub(declared, Ordering::AcqRel);
                if !WARNED.swap(true, Ordering::Relaxed) {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot buffer request bodies in a file there: large uploads stream to CGI backends as they arrive (a slow one holds a worker)");
                }
                None
            }
        }
    }

    /// Appends arrived bytes; never more than were declared.
    pub fn write(&mut self, data: &[u8]) -> io::Result<()> {
        if self.len + data.len() as u64 > self.reserved {
            return Err(io::Error::other("more body than its Content-Length"));
        }
        self.file.write_all(data)?;
        self.len += data.len() as u64;
        Ok(())
    }

    /// Bytes written and not read back yet.
    pub fn remaining(&self) -> u64 {
        self.len - self.read
    }

    /// The next bytes to hand on (at most 64 KiB; empty once all were read).
    pub fn read_next(&mut self) -> io::Result<Bytes> {
        let want = self.remaining().min(READ_CHUNK) as usize;
        let mut buf = vec![0u8; want];
        self.file.read_exact_at(&mut buf, self.read)?;
        self.read += want as u64;
        Ok(Bytes::from(buf))
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        RESERVED.fetch_sub(self.reserved, Ordering::AcqRel);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_goes_back_out_in_order_from_a_file_without_a_name() {
        let dir = tempfile::tempdir().unwrap();
        let body: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
        let mut spill = Spill::create(dir.path(), body.len() as u64).expect("a file");
        for part in body.chunks(7_000) {
            spill.write(part).unwrap();
        }
        assert!(
            spill.write(b"x").is_err(),
            "more than the declared length is refused"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no name");
        let mut back = Vec::new();
        while spill.remaining() > 0 {
            let chunk = spill.read_next().unwrap();
            assert!(chunk.len() as u64 <= READ_CHUNK);
            back.extend_from_slice(&chunk);
        }
        assert_eq!(back, body);
    }

    /// Other tests hold at most a few hundred kilobytes meanwhile, far from the halves.
    #[test]
    fn the_cap_holds_while_bodies_are_buffered_and_frees_with_them() {
        let dir = tempfile::tempdir().unwrap();
        let half = SPILL_CAP / 2 + 1;
        let first = Spill::create(dir.path(), half).expect("within the cap");
        assert!(Spill::create(dir.path(), half).is_none(), "past the cap");
        drop(first);
        assert!(Spill::create(dir.path(), half).is_some(), "freed on drop");
        assert!(Spill::create(dir.path(), SPILL_CAP + 1).is_none());
    }

    #[test]
    fn without_a_writable_folder_there_is_no_file() {
        assert!(Spill::create(Path::new("/proc/self"), 10).is_none());
    }
}
