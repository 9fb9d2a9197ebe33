//! Gives back, once the server is up, the code and read-only data pages that starting
//! touched. The kernel maps file pages 64 KiB at a time around each fault, so option
//! parsing, configuration and runtime setup leave megabytes of the executable's (and
//! libc's) text resident that serving never runs. Those mappings are clean copies of the
//! page cache: unmapping them (MADV_DONTNEED) loses nothing, and the pages serving does
//! use come back on first use as minor faults.
#![allow(unsafe_code)]

use std::ops::Range;

/// The mappings safe to unmap in `/proc/self/smaps`: file-backed, read-only (code or
/// constants, never writable), private, and with no page of their own (`Anonymous: 0`,
/// which excludes RELRO, the relocated data made read-only after start).
pub fn clean_file_mappings(smaps: &str) -> Vec<Range<usize>> {
    let mut found = Vec::new();
    let mut current: Option<Range<usize>> = None;
    for line in smaps.lines() {
        if let Some(range) = mapping_header(line) {
            current = range;
            continue;
        }
        if let (Some(range), Some(kb)) = (&current, line.strip_prefix("Anonymous:")) {
            if kb.trim().trim_end_matches("kB").trim() == "0" {
                found.push(range.clone());
            }
            current = None;
        }
    }
    found
}

/// For a mapping's header line: `Some(Some(range))` if it is a candidate, `Some(None)`
/// if it is another mapping, `None` for the lines that describe one.
fn mapping_header(line: &str) -> Option<Option<Range<usize>>> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let perms = fields.next()?;
    let (_offset, _dev, inode) = (fields.next()?, fields.next()?, fields.next()?);
    let path = fields.next().unwrap_or("");
    let candidate = matches!(perms, "r--p" | "r-xp") && inode != "0" && path.starts_with('/');
    Some(candidate.then_some(start..end))
}

/// Unmaps the clean file mappings; returns how many were given back.
pub fn release() -> usize {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return 0;
    };
    let mut released = 0;
    for range in clean_file_mappings(&smaps) {
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
55d000100000-55d000900000 r-xp 00100000 fd:01 1234 /usr/bin/skiff
Rss:                3000 kB
Anonymous:             0 kB
55d000900000-55d000980000 r--p 00900000 fd:01 1234 /usr/bin/skiff
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
";

    #[test]
    fn only_clean_read_only_private_file_mappings_are_released() {
        assert_eq!(
            clean_file_mappings(SMAPS),
            vec![
                0x55d000000000..0x55d000100000,
                0x55d000100000..0x55d000900000
            ],
            "not RELRO (anonymous pages), rw data, anonymous code, the vDSO or shared mappings"
        );
    }

    #[test]
    fn released_code_still_runs() {
        let before = clean_file_mappings(&std::fs::read_to_string("/proc/self/smaps").unwrap());
        assert!(
            !before.is_empty(),
            "the test binary's own text is a candidate"
        );
        assert!(release() > 0);
        // This test's own code and the formatting machinery fault back in.
        assert_eq!(format!("{}", 6 * 7), "42");
    }
}
