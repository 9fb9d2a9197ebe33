//! Gives back, once the server is up, the code and read-only data pages that starting
//! touched. The kernel maps file pages 64 KiB at a time around each fault, so option
//! parsing, configuration and runtime setup leave megabytes of the executable's (and
//! libc's) text resident that serving never runs. Those pages are clean copies of the
//! page cache: unmapping them (MADV_DONTNEED) loses nothing, and the pages serving does
//! use come back on first use as minor faults.
#![allow(unsafe_code)]

use std::ops::Range;

/// A program header's part that matters here.
#[derive(Clone, Copy)]
struct Segment {
    loaded: bool,
    writable: bool,
    vaddr: usize,
    memsz: usize,
}

/// The whole pages of an object's read-only loaded segments (code and constants), at
/// its load address `base`. Never a page of a writable segment: RELRO, relocated at
/// start, lies in one, and pages are rounded inward so none is shared with one.
fn read_only_pages(base: usize, segments: &[Segment], page: usize) -> Vec<Range<usize>> {
    segments
        .iter()
        .filter(|s| s.loaded && !s.writable && s.memsz > 0)
        .filter_map(|s| {
            let start = (base + s.vaddr).next_multiple_of(page);
            let end = (base + s.vaddr + s.memsz) / page * page;
            (start < end).then_some(start..end)
        })
        .collect()
}

/// Unmaps the read-only pages of the executable and of the libraries loaded from files;
/// returns how many ranges were given back.
pub fn release() -> usize {
    /// Called by the loader for each loaded object, with its lock held, so no object
    /// can be unloaded (and its range reused) while its pages are given back.
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        released: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader passes a valid object description for the call's duration,
        // and `released` is the counter `release` passed.
        let (info, released) = unsafe { (&*info, &mut *(released as *mut usize)) };
        // The executable (an empty name) and libraries loaded from a path; not the vDSO,
        // which is the kernel's own mapping.
        let name = if info.dlpi_name.is_null() {
            &[][..]
        } else {
            // SAFETY: a non-null dlpi_name is a NUL-terminated string.
            unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }.to_bytes()
        };
        if !(name.is_empty() || name.starts_with(b"/")) || info.dlpi_phdr.is_null() {
            return 0;
        }
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum.into()) };
        let segments: Vec<Segment> = headers
            .iter()
            .map(|h| Segment {
                loaded: h.p_type == libc::PT_LOAD,
                writable: h.p_flags & libc::PF_W != 0,
                vaddr: h.p_vaddr as usize,
                memsz: h.p_memsz as usize,
            })
            .collect();
        // SAFETY: sysconf only reads a constant.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        for range in read_only_pages(info.dlpi_addr as usize, &segments, page) {
            // SAFETY: whole pages of a read-only, private file mapping that nothing
            // writes: after MADV_DONTNEED every access faults the same bytes back in
            // from the file, so nothing that reads or runs them can tell.
            let rc = unsafe {
                libc::madvise(
                    range.start as *mut libc::c_void,
                    range.end - range.start,
                    libc::MADV_DONTNEED,
                )
            };
            if rc == 0 {
                *released += 1;
            }
        }
        0
    }
    let mut released = 0usize;
    // SAFETY: `each` matches the callback's signature and reads only what it is given.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut released as *mut usize).cast()) };
    released
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(loaded: bool, writable: bool, vaddr: usize, memsz: usize) -> Segment {
        Segment {
            loaded,
            writable,
            vaddr,
            memsz,
        }
    }

    /// The layout of the static-pie skiff: R (relocations, constants), R E (code) starting
    /// mid-page, RW (RELRO, then data), and a non-loaded header.
    #[test]
    fn only_whole_pages_of_read_only_loaded_segments_are_given_back() {
        let segments = [
            seg(true, false, 0x0, 0x3780e8),
            seg(true, false, 0x379100, 0xaeda90),
            seg(true, true, 0xe67b90, 0x74470),
            seg(false, false, 0xe67b90, 0x73b28),
            seg(true, false, 0x1000, 0),
        ];
        let base = 0x5555_0000_0000;
        assert_eq!(
            read_only_pages(base, &segments, 4096),
            vec![base..base + 0x378000, base + 0x37a000..base + 0xe66000],
            "pages shared with a neighbour, writable, empty or unloaded segments stay"
        );
    }

    #[test]
    fn released_code_still_runs() {
        assert!(release() > 0, "the test binary's own text is read-only");
        // This test's own code and the formatting machinery fault back in.
        assert_eq!(format!("{}", 6 * 7), "42");
    }
}
