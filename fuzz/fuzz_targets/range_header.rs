//! The Range header parser (RFC 9110 §14) on arbitrary header values and representation
//! lengths: never a panic, and the same answer twice; satisfiable ranges are non-empty,
//! inside the representation, at most MAX_RANGES and never overlapping (overlaps only
//! amplify, so they get the whole representation), which bounds what a multipart answer
//! can send by the representation's length; an empty representation has none; and an
//! empty list element (a trailing ",") changes nothing.
//!
//! Input: `LEN\nVALUE` with LEN in decimal, so the seeds read as text; without a decimal
//! first line, the whole input is the value. Each value is also checked against lengths
//! at the edges (0, 1, LEN-1, LEN+1, u64::MAX), where off-by-ones and overflows live.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skiff_http::range::{parse, RangeOutcome, MAX_RANGES};

fn check(value: &[u8], len: u64) {
    let outcome = parse(value, len);
    assert_eq!(outcome, parse(value, len), "not deterministic");
    let with_empty_element = [value, b","].concat();
    assert_eq!(
        parse(&with_empty_element, len),
        outcome,
        "a trailing empty list element changed the outcome"
    );
    match &outcome {
        RangeOutcome::Ignore => return,
        RangeOutcome::Unsatisfiable | RangeOutcome::Ranges(_) => {
            // Only the bytes unit is understood; anything else is ignored.
            let text = std::str::from_utf8(value).expect("a range from non-UTF-8");
            let unit = text.split_once('=').map(|(unit, _)| unit.trim());
            assert!(
                unit.is_some_and(|u| u.eq_ignore_ascii_case("bytes")),
                "a range in another unit"
            );
        }
    }
    let RangeOutcome::Ranges(ranges) = outcome else {
        return;
    };
    assert!(len > 0, "a range of an empty representation");
    assert!(!ranges.is_empty() && ranges.len() <= MAX_RANGES);
    let mut total: u64 = 0;
    for r in &ranges {
        assert!(r.start <= r.end && r.end < len, "{r:?} outside {len} bytes");
        assert!((1..=len).contains(&r.len()));
        // Checked: fuzz builds run without overflow checks (-O), and a wrapped sum
        // would hide the very excess this bounds.
        total = total
            .checked_add(r.len())
            .expect("ranges sum past u64::MAX");
    }
    assert!(total <= len, "ranges sum to {total} of {len} bytes");
    let mut sorted = ranges.clone();
    sorted.sort_by_key(|r| r.start);
    for pair in sorted.windows(2) {
        assert!(pair[0].end < pair[1].start, "overlap: {pair:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    let (len, value) = match data.iter().position(|&b| b == b'\n') {
        Some(nl) => match std::str::from_utf8(&data[..nl])
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
        {
            Some(len) => (len, &data[nl + 1..]),
            None => (data.len() as u64, data),
        },
        None => (data.len() as u64, data),
    };
    for len in [
        len,
        0,
        1,
        len.saturating_sub(1),
        len.saturating_add(1),
        u64::MAX,
    ] {
        check(value, len);
    }
});
