//! Opening files beneath the document root. `openat2(RESOLVE_BENEATH)` makes the kernel
//! refuse any resolution (symlink or "..") that leaves the root, with no check-then-open
//! race. With `follow_symlinks_outside_root`, symlinks may point anywhere.

use rustix::fs::{openat2, Mode, OFlags, ResolveFlags};
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

#[derive(Debug)]
pub struct Root {
    dir: OwnedFd,
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
            follow_symlinks_outside_root,
        })
    }

    /// Opens `rel` (relative, already normalized) read-only. O_NONBLOCK keeps a FIFO in the
    /// tree from blocking the worker; it has no effect on regular files.
    pub fn open_file(&self, rel: &str) -> io::Result<File> {
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
        )
        .map_err(io::Error::from)?;
        Ok(File::from(fd))
    }

    /// Metadata without opening, for cheap revalidation (follows symlinks like open does;
    /// a change of target shows up as a changed inode and forces a fresh, checked open).
    pub fn stat(&self, rel: &str) -> io::Result<rustix::fs::Stat> {
        rustix::fs::statat(&self.dir, rel, rustix::fs::AtFlags::empty()).map_err(io::Error::from)
    }
}
