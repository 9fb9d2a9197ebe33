//! File bytes read into a new buffer that starts mid-page, without zeroing it first.
//!
//! rustls copies each TLS record's plaintext into a buffer that begins 5 bytes into a
//! page, and glibc's `rep movsb` on AMD Zen is several times slower when source and
//! destination share their offset within a page (4K aliasing): page-aligned file chunks
//! made that copy a third of an HTTPS download's CPU (BENCHMARKS.md, "HTTPS").

use bytes::Bytes;
use std::fs::File;
use std::io;

pub const PAGE: usize = 4096;
/// Where the first byte sits within its page: as far as can be from the records' 5.
const FIRST_BYTE_IN_PAGE: usize = PAGE / 2;

/// How far past `addr` a buffer's first byte goes to sit mid-page.
pub fn pad_to_mid_page(addr: usize) -> usize {
    (FIRST_BYTE_IN_PAGE + PAGE - addr % PAGE) % PAGE
}

/// `want` bytes of `file` at `offset`, or None if the file ends first.
pub fn read_mid_page(file: &File, offset: u64, want: usize) -> io::Result<Option<Bytes>> {
    let mut buf = Vec::with_capacity(want + PAGE);
    let pad = pad_to_mid_page(buf.as_ptr() as usize);
    buf.resize(pad, 0);
    let end = pad + want;
    while buf.len() < end {
        let at = offset + (buf.len() - pad) as u64;
        // Into the spare capacity: up to PAGE - pad bytes past `want` may be read, and
        // are cut off below.
        match rustix::io::pread(file, rustix::buffer::spare_capacity(&mut buf), at) {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    buf.truncate(end);
    Ok(Some(Bytes::from(buf).slice(pad..)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(len: usize) -> (tempfile::NamedTempFile, Vec<u8>) {
        let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&bytes).unwrap();
        (f, bytes)
    }

    #[test]
    fn exactly_the_bytes_asked_for_starting_mid_page() {
        let (f, bytes) = file_of(300_000);
        for (offset, want) in [
            (0, 0),
            (0, 1),
            (0, 262_144),
            (1, 4096),
            (299_000, 1000),
            (12_345, 100_000),
        ] {
            let got = read_mid_page(f.as_file(), offset as u64, want)
                .unwrap()
                .unwrap();
            assert_eq!(&got[..], &bytes[offset..offset + want], "{offset}+{want}");
            if want > 0 {
                assert_eq!(got.as_ptr() as usize % PAGE, FIRST_BYTE_IN_PAGE);
            }
        }
    }

    #[test]
    fn a_file_that_ends_first_is_none() {
        let (f, _) = file_of(1000);
        assert_eq!(read_mid_page(f.as_file(), 900, 200).unwrap(), None);
        assert_eq!(read_mid_page(f.as_file(), 1000, 1).unwrap(), None);
        assert_eq!(
            read_mid_page(f.as_file(), 900, 100).unwrap().unwrap().len(),
            100
        );
    }
}
