//! Opening files beneath the document root. `openat2(RESOLVE_BENEATH)` makes the kernel
//! refuse any resolution (symlink or "..") that leaves the root, with no check-then-open
//! race. With `follow_symlinks_outside_root`, symlinks may point anywhere.

use rustix::fs::{openat2, Mode, OFlags, ResolveFlags};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once openat2 is found missing (kernels before 5.6, some sandboxes, valgrind).
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

#[derive(Debug)]
pub struct Root {
    dir: OwnedFd,
    /// The root's canonical path, for the fallback check when openat2 is unavailable.
    canonical: PathBuf,
    follow_symlinks_outside_root: bool,
}

impl Root {
    pub fn open(path: &Path, follow_symlinks_outside_root: bool) -> io::Result<Root> {
        let dir = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Root {
            dir,
            canonical: std::fs::canonicalize(path)?,
            follow_symlinks_outside_root,
        })
    }

    /// Opens `rel` (relative, already normalized) read-only. O_NONBLOCK keeps a FIFO in the
    /// tree from blocking the worker; it has no effect on regular files.
    pub fn open_file(&self, rel: &str) -> io::Result<File> {
        if NO_OPENAT2.load(Ordering::Relaxed) {
            return self.open_file_checked(rel);
        }
        let resolve = if self.follow_symlinks_outside_root {
            ResolveFlags::NO_MAGICLINKS
        } else {
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS
        };
        let fd = openat2(
            &self.dir,
            rel,
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
            resolve,
        );
        match fd {
            Ok(fd) => Ok(File::from(fd)),
            Err(rustix::io::Errno::NOSYS) => {
                NO_OPENAT2.store(true, Ordering::Relaxed);
                tracing::warn!(
                    "openat2 is unavailable; checking opened paths through /proc instead"
                );
                self.open_file_checked(rel)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Fallback without openat2: open, then ask the kernel where the descriptor really
    /// points. Checking the opened file (not the name) leaves no race to exploit.
    fn open_file_checked(&self, rel: &str) -> io::Result<File> {
        let fd = rustix::fs::openat(
            &self.dir,
            rel,
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
        )?;
        if !self.follow_symlinks_outside_root {
            let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
            if !is_within(&real, &self.canonical) {
                return Err(io::Error::from_raw_os_error(
                    rustix::io::Errno::XDEV.raw_os_error(),
                ));
            }
        }
        Ok(File::from(fd))
    }

    /// The root directory's (device, inode): the same directory keeps its cache entries
    /// across config reloads.
    pub fn identity(&self) -> io::Result<(u64, u64)> {
        let st = rustix::fs::fstat(&self.dir)?;
        Ok((st.st_dev, st.st_ino))
    }

    /// Metadata without opening, for cheap revalidation (follows symlinks like open does;
    /// a change of target shows up as a changed inode and forces a fresh, checked open).
    pub fn stat(&self, rel: &str) -> io::Result<rustix::fs::Stat> {
        rustix::fs::statat(&self.dir, rel, rustix::fs::AtFlags::empty()).map_err(io::Error::from)
    }
}

fn is_within(path: &Path, root: &Path) -> bool {
    path == root || path.starts_with(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_refuses_escapes_like_openat2() {
        let root_dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::fs::write(root_dir.path().join("ok.txt"), "ok").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret"),
            root_dir.path().join("escape"),
        )
        .unwrap();
        std::os::unix::fs::symlink("ok.txt", root_dir.path().join("inside")).unwrap();
        let root = Root::open(root_dir.path(), false).unwrap();
        for checked in [false, true] {
            let open = |rel: &str| {
                if checked {
                    root.open_file_checked(rel)
                } else {
                    root.open_file(rel)
                }
            };
            assert!(open("ok.txt").is_ok());
            assert!(open("inside").is_ok());
            let err = open("escape").unwrap_err();
            assert_eq!(
                err.raw_os_error(),
                Some(rustix::io::Errno::XDEV.raw_os_error()),
                "checked={checked}"
            );
        }
        // Starts-with is by path component: "/srv/www2" is not inside "/srv/www".
        assert!(!is_within(Path::new("/srv/www2/x"), Path::new("/srv/www")));
        assert!(is_within(Path::new("/srv/www/x"), Path::new("/srv/www")));
    }
}
