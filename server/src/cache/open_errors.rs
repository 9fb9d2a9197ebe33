//! What a failed open means for a lookup: missing, refused (for good or for the moment),
//! or an error to report.

use super::Lookup;
use std::io;

pub(super) fn is_missing(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc_errno::ENOENT) | Some(libc_errno::ENOTDIR)
    )
}

/// Whether an open failed for a reason that lasts until the file itself changes (its
/// permissions, a link out of the root, a socket), not for the moment (no descriptors
/// left, I/O).
pub(super) fn refused_for_good(e: &io::Error) -> bool {
    let errno = e.raw_os_error().unwrap_or(0);
    classify_open_error(io::Error::from_raw_os_error(errno)).is_ok()
}

pub(super) fn classify_open_error(e: io::Error) -> io::Result<Lookup> {
    match e.raw_os_error() {
        Some(libc_errno::ENOENT) | Some(libc_errno::ENOTDIR) | Some(libc_errno::ENAMETOOLONG) => {
            Ok(Lookup::NotFound)
        }
        // EXDEV: RESOLVE_BENEATH refused an escape; ELOOP: too many links; EACCES: permissions;
        // ENXIO, ENODEV: a socket or a device without a driver, refused as other
        // non-regular files are (not a 500 and a warning per request).
        Some(libc_errno::EXDEV)
        | Some(libc_errno::ELOOP)
        | Some(libc_errno::EACCES)
        | Some(libc_errno::EPERM)
        | Some(libc_errno::ENXIO)
        | Some(libc_errno::ENODEV) => Ok(Lookup::Forbidden),
        _ => Err(e),
    }
}

/// The errno values used above, from rustix, kept in one place.
mod libc_errno {
    use rustix::io::Errno;
    pub const ENOENT: i32 = Errno::NOENT.raw_os_error();
    pub const ENOTDIR: i32 = Errno::NOTDIR.raw_os_error();
    pub const ENAMETOOLONG: i32 = Errno::NAMETOOLONG.raw_os_error();
    pub const EXDEV: i32 = Errno::XDEV.raw_os_error();
    pub const ELOOP: i32 = Errno::LOOP.raw_os_error();
    pub const EACCES: i32 = Errno::ACCESS.raw_os_error();
    pub const EPERM: i32 = Errno::PERM.raw_os_error();
    pub const ENXIO: i32 = Errno::NXIO.raw_os_error();
    pub const ENODEV: i32 = Errno::NODEV.raw_os_error();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sidecar refused for good keeps its stat in the fingerprint (no reload at every
    /// revalidation); one refused for the moment does not (the next revalidation retries).
    #[test]
    fn open_errors_for_good_are_told_from_passing_ones() {
        let e = |errno: rustix::io::Errno| io::Error::from_raw_os_error(errno.raw_os_error());
        for lasting in [
            rustix::io::Errno::ACCESS,
            rustix::io::Errno::XDEV,
            rustix::io::Errno::LOOP,
            rustix::io::Errno::NXIO,
        ] {
            assert!(refused_for_good(&e(lasting)), "{lasting:?}");
        }
        for passing in [
            rustix::io::Errno::MFILE,
            rustix::io::Errno::NFILE,
            rustix::io::Errno::IO,
            rustix::io::Errno::NOMEM,
        ] {
            assert!(!refused_for_good(&e(passing)), "{passing:?}");
        }
    }
}
