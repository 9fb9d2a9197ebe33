//! Gives back, once the server is up, the code and read-only data pages that starting
//! touched. The kernel maps file pages 64 KiB at a time around each fault, so option
//! parsing, configuration and runtime setup leave megabytes of the executable's (and
//! libc's) text resident that serving never runs. Those mappings are clean copies of the
//! page cache: unmapping them (MADV_DONTNEED) loses nothing, and the pages serving does
//! use come back on first use as minor faults. Shared libraries are left alone (a
//! library could be unloaded and its range reused between reading the list and acting
//! on it); the static binary the images ship has none.
#![allow(unsafe_code)]

use std::ops::Range;

/// The mappings safe to unmap in `/proc/self/smaps`: the executable's own (`exe`; they
/// live as long as the process, so none can be replaced by another mapping meanwhile),
/// read-only (code or constants, never writable), private, and with no page of their own
/// in memory or in swap (`Anonymous: 0`, `Swap: 0`, which excludes RELRO, the relocated
/// data made read-only after start).
pub fn clean_file_mappings(smaps: &str, exe: &str) -> Vec<Range<usize>> {
    let mut found = Vec::new();
    // The mapping being read, if a candidate, and whether a field showed a page of its own.
    let mut current: Option<(Range<usize>, bool)> = None;
    let mut close = |current: &mut Option<(Range<usize>, bool)>| {
        if let Some((range, false)) = current.take() {
            found.push(range);
        }
    };
    for line in smaps.lines() {
        if let Some(candidate) = mapping_header(line, exe) {
            close(&mut current);
            current = candidate.map(|range| (range, false));
            continue;
        }
        if let Some((_, own)) = &mut current {
            for field in ["Anonymous:", "Swap:"] {
                if let Some(kb) = line.strip_prefix(field) {
                    *own |= kb.trim().trim_end_matches("kB").trim() != "0";
                }
            }
        }
    }
    close(&mut current);
    found
}

/// For a mapping's header line: `Some(Some(range))` if it is a candidate, `Some(None)`
/// if it is another mapping, `None` for the lines that describe one.
fn mapping_header(line: &str, exe: &str) -> Option<Option<Range<usize>>> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let perms = fields.next()?;
    let (_offset, _dev, _inode) = (fields.next()?, fields.next()?, fields.next()?);
    let path = fields.next().unwrap_or("");
    let candidate = matches!(perms, "r--p" | "r-xp") && path == exe;
    Some(candidate.then_some(start..end))
}

/// Unmaps the executable's clean mappings; returns how many were given back.
pub fn release() -> usize {
    let (Ok(smaps), Ok(exe)) = (
        std::fs::read_to_string("/proc/self/smaps"),
        std::fs::read_link("/proc/self/exe"),
    ) else {
        return 0;
    };
    let mut released = 0;
    for range in clean_file_mappings(&smaps, &exe.to_string_lossy()) {
        // SAFETY: the range is a whole read-only, private file mapping with no anonymous
        // (modified) page: after MADV_DONTNEED every access faults the same bytes back
        // in from the file, so nothing that reads or runs them can tell.
        let rc = unsafe {
            libc::madvise(
                range.start as *mut libc::c_void,
                range.end - range.start,
                libc::MADV_DONTNEED,
            )
        };
        if rc == 0 {
            released += 1;
        }
    }
    released
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d000000000-55d000100000 r--p 00000000 fd:01 1234 /usr/bin/skiff
Rss:                 512 kB
Anonymous:             0 kB
Swap:                  0 kB
55d000100000-55d000900000 r-xp 00100000 fd:01 1234 /usr/bin/skiff
Rss:                3000 kB
Anonymous:             0 kB
55d000900000-55d000920000 r--p 00900000 fd:01 1234 /usr/bin/skiff
Rss:                   0 kB
Anonymous:             0 kB
Swap:                128 kB
55d000920000-55d000980000 r--p 00920000 fd:01 1234 /usr/bin/skiff
Rss:                 460 kB
Anonymous:           460 kB
55d000980000-55d000990000 rw-p 00980000 fd:01 1234 /usr/bin/skiff
Anonymous:            40 kB
7f0000000000-7f0000010000 r-xp 00000000 00:00 0 
Anonymous:            64 kB
7ffc00000000-7ffc00002000 r-xp 00000000 00:00 0                          [vdso]
Anonymous:             0 kB
7f0000100000-7f0000200000 r-xs 00000000 fd:01 99 /dev/shm/x
Anonymous:             0 kB
7f0000300000-7f0000400000 r-xp 00000000 fd:01 77 /usr/lib/libc.so.6
Anonymous:             0 kB
";

    #[test]
    fn only_clean_read_only_private_file_mappings_are_released() {
        assert_eq!(
            clean_file_mappings(SMAPS, "/usr/bin/skiff"),
            vec![
                0x55d000000000..0x55d000100000,
                0x55d000100000..0x55d000900000
            ],
            "not RELRO (pages in memory or in swap), rw data, anonymous code, the vDSO, shared mappings or libraries"
        );
    }

    #[test]
    fn released_code_still_runs() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let before = clean_file_mappings(&smaps, &exe.to_string_lossy());
        assert!(
            !before.is_empty(),
            "the test binary's own text is a candidate"
        );
        assert!(release() > 0);
        // This test's own code and the formatting machinery fault back in.
        assert_eq!(format!("{}", 6 * 7), "42");
    }
}
