//! RFC 9110 §14 byte ranges. Pure parsing and resolution against a representation length.

/// An inclusive byte range resolved against the representation length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    pub start: u64,
    pub end: u64,
}

impl ByteRange {
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }
    pub fn is_empty(&self) -> bool {
        false
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeOutcome {
    /// No usable Range: serve the whole representation with 200.
    Ignore,
    /// One or more satisfiable ranges, in request order.
    Ranges(Vec<ByteRange>),
    /// Syntactically fine but nothing satisfiable: 416.
    Unsatisfiable,
}

/// More ranges than this are ignored (a full 200), a defence against "Apache Killer"
/// (CVE-2011-3192) style requests.
pub const MAX_RANGES: usize = 64;

/// Parses a `Range` header against a representation of `len` bytes.
/// Unknown units and malformed values are ignored, as RFC 9110 permits.
pub fn parse(header: &[u8], len: u64) -> RangeOutcome {
    let Ok(s) = std::str::from_utf8(header) else {
        return RangeOutcome::Ignore;
    };
    let s = s.trim();
    let Some((unit, set)) = s.split_once('=') else {
        return RangeOutcome::Ignore;
    };
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return RangeOutcome::Ignore;
    }
    let mut ranges = Vec::new();
    let mut specs = 0;
    for spec in set.split(',') {
        let spec = spec.trim();
        if spec.is_empty() {
            continue; // empty list elements are allowed by the list syntax
        }
        specs += 1;
        if specs > MAX_RANGES {
            return RangeOutcome::Ignore;
        }
        let Some((first, last)) = spec.split_once('-') else {
            return RangeOutcome::Ignore;
        };
        let (first, last) = (first.trim(), last.trim());
        if first.is_empty() {
            // suffix-range: the last N bytes
            let Some(n) = parse_u64(last) else {
                return RangeOutcome::Ignore;
            };
            if n > 0 && len > 0 {
                ranges.push(ByteRange {
                    start: len.saturating_sub(n),
                    end: len - 1,
                });
            }
            continue;
        }
        let Some(start) = parse_u64(first) else {
            return RangeOutcome::Ignore;
        };
        let end = if last.is_empty() {
            None
        } else {
            match parse_u64(last) {
                Some(e) if e >= start => Some(e),
                _ => return RangeOutcome::Ignore,
            }
        };
        if start < len {
            ranges.push(ByteRange {
                start,
                end: end.map_or(len - 1, |e| e.min(len - 1)),
            });
        }
    }
    if specs == 0 {
        return RangeOutcome::Ignore;
    }
    if ranges.is_empty() {
        return RangeOutcome::Unsatisfiable;
    }
    if overlapping(&ranges) {
        // Overlaps only serve to amplify; answer with the whole representation.
        return RangeOutcome::Ignore;
    }
    RangeOutcome::Ranges(ranges)
}

fn parse_u64(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn overlapping(ranges: &[ByteRange]) -> bool {
    if ranges.len() < 2 {
        return false;
    }
    let mut sorted: Vec<ByteRange> = ranges.to_vec();
    sorted.sort_by_key(|r| r.start);
    sorted.windows(2).any(|w| w[1].start <= w[0].end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, end: u64) -> ByteRange {
        ByteRange { start, end }
    }

    #[test]
    fn single_ranges() {
        assert_eq!(
            parse(b"bytes=0-99", 1000),
            RangeOutcome::Ranges(vec![r(0, 99)])
        );
        assert_eq!(
            parse(b"bytes=500-", 1000),
            RangeOutcome::Ranges(vec![r(500, 999)])
        );
        assert_eq!(
            parse(b"bytes=-200", 1000),
            RangeOutcome::Ranges(vec![r(800, 999)])
        );
        assert_eq!(
            parse(b"bytes=-2000", 1000),
            RangeOutcome::Ranges(vec![r(0, 999)])
        );
        assert_eq!(
            parse(b"bytes=900-5000", 1000),
            RangeOutcome::Ranges(vec![r(900, 999)])
        );
        assert_eq!(
            parse(b"BYTES = 1-1", 10),
            RangeOutcome::Ranges(vec![r(1, 1)])
        );
    }

    #[test]
    fn several_ranges_keep_request_order() {
        assert_eq!(
            parse(b"bytes=10-19, 0-4,,-1", 100),
            RangeOutcome::Ranges(vec![r(10, 19), r(0, 4), r(99, 99)])
        );
        // Unsatisfiable members are dropped when others remain.
        assert_eq!(
            parse(b"bytes=0-0,5000-", 100),
            RangeOutcome::Ranges(vec![r(0, 0)])
        );
    }

    #[test]
    fn unsatisfiable() {
        assert_eq!(parse(b"bytes=1000-", 1000), RangeOutcome::Unsatisfiable);
        assert_eq!(parse(b"bytes=-0", 1000), RangeOutcome::Unsatisfiable);
        assert_eq!(parse(b"bytes=0-", 0), RangeOutcome::Unsatisfiable);
    }

    #[test]
    fn malformed_or_foreign_ranges_are_ignored() {
        assert_eq!(parse(b"items=0-1", 100), RangeOutcome::Ignore);
        assert_eq!(parse(b"bytes=5-1", 100), RangeOutcome::Ignore);
        assert_eq!(parse(b"bytes=a-b", 100), RangeOutcome::Ignore);
        assert_eq!(parse(b"bytes=+1-2", 100), RangeOutcome::Ignore);
        assert_eq!(parse(b"bytes=", 100), RangeOutcome::Ignore);
        assert_eq!(parse(b"bytes 0-1", 100), RangeOutcome::Ignore);
        assert_eq!(
            parse(b"bytes=99999999999999999999999-", 100),
            RangeOutcome::Ignore
        );
    }

    #[test]
    fn overlapping_and_excessive_ranges_are_ignored() {
        assert_eq!(parse(b"bytes=0-10,5-20", 100), RangeOutcome::Ignore);
        let many: String = (0..65).map(|i| format!("{}-{},", i * 2, i * 2)).collect();
        assert_eq!(
            parse(format!("bytes={many}").as_bytes(), 1000),
            RangeOutcome::Ignore
        );
    }
}
