//! RFC 9110 §13 conditional requests, evaluated in the order of §13.2.2. Pure functions.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The validators of the selected representation.
#[derive(Debug, Clone, Copy)]
pub struct Validators<'a> {
    /// The strong entity-tag, with its quotes: `"5f3a-1c2"`.
    pub etag: &'a [u8],
    /// Modification time, truncated to whole seconds as HTTP dates are.
    pub last_modified: SystemTime,
}

/// The precondition header values of a request, raw.
#[derive(Debug, Clone, Copy, Default)]
pub struct Preconditions<'a> {
    pub if_match: Option<&'a [u8]>,
    pub if_none_match: Option<&'a [u8]>,
    pub if_modified_since: Option<&'a [u8]>,
    pub if_unmodified_since: Option<&'a [u8]>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Proceed,
    NotModified,
    PreconditionFailed,
}

/// Evaluates the preconditions. `safe` is true for GET and HEAD: only those get a 304.
pub fn evaluate(pre: &Preconditions<'_>, v: &Validators<'_>, safe: bool) -> Outcome {
    // Step 1 and 2: If-Match, or else If-Unmodified-Since.
    if let Some(im) = pre.if_match {
        if !etag_list_matches(im, v.etag, Comparison::Strong) {
            return Outcome::PreconditionFailed;
        }
    } else if let Some(date) = pre.if_unmodified_since.and_then(parse_http_date) {
        if truncate(v.last_modified) > date {
            return Outcome::PreconditionFailed;
        }
    }
    // Step 3 and 4: If-None-Match, or else If-Modified-Since (GET/HEAD only).
    if let Some(inm) = pre.if_none_match {
        if etag_list_matches(inm, v.etag, Comparison::Weak) {
            return if safe {
                Outcome::NotModified
            } else {
                Outcome::PreconditionFailed
            };
        }
    } else if safe {
        if let Some(date) = pre.if_modified_since.and_then(parse_http_date) {
            if truncate(v.last_modified) <= date {
                return Outcome::NotModified;
            }
        }
    }
    Outcome::Proceed
}

/// RFC 9110 §13.1.5: does `If-Range` allow the range to be served? A weak tag never does;
/// a date must equal Last-Modified exactly.
pub fn if_range_allows(value: &[u8], v: &Validators<'_>) -> bool {
    let value = trim(value);
    if value.starts_with(b"\"") || value.starts_with(b"W/") {
        return matches!(parse_entity_tag(value), Some((false, tag, rest)) if rest.is_empty() && tag == v.etag);
    }
    match parse_http_date(value) {
        Some(date) => truncate(v.last_modified) == date,
        None => false,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Comparison {
    Strong,
    Weak,
}

/// Matches `*` or a comma-separated list of entity-tags against our (strong) tag.
/// A malformed list matches nothing.
fn etag_list_matches(list: &[u8], ours: &[u8], cmp: Comparison) -> bool {
    let list = trim(list);
    if list == b"*" {
        return true;
    }
    let mut rest = list;
    loop {
        rest = trim_start(rest);
        if rest.is_empty() {
            return false;
        }
        let Some((weak, tag, after)) = parse_entity_tag(rest) else {
            return false;
        };
        // Our tag is strong, so a weak comparison ignores only the client's W/ flag.
        if tag == ours && (cmp == Comparison::Weak || !weak) {
            return true;
        }
        rest = trim_start(after);
        match rest.first() {
            Some(b',') => rest = &rest[1..],
            None => return false,
            Some(_) => return false,
        }
    }
}

/// Parses one entity-tag at the start of `s`: returns (weak, the quoted tag with its
/// quotes, the rest).
fn parse_entity_tag(s: &[u8]) -> Option<(bool, &[u8], &[u8])> {
    let (weak, s) = match s.strip_prefix(b"W/") {
        Some(r) => (true, r),
        None => (false, s),
    };
    if s.first() != Some(&b'"') {
        return None;
    }
    let end = s[1..].iter().position(|&b| b == b'"')? + 1;
    let tag = &s[..=end];
    // etagc = %x21 / %x23-7E / obs-text
    if tag[1..end]
        .iter()
        .any(|&b| b == b'"' || b < 0x21 || b == 0x7f)
    {
        return None;
    }
    Some((weak, tag, &s[end + 1..]))
}

/// Parses an HTTP date (IMF-fixdate and the two obsolete forms, via httpdate).
pub fn parse_http_date(v: &[u8]) -> Option<SystemTime> {
    let s = std::str::from_utf8(trim(v)).ok()?;
    httpdate::parse_http_date(s).ok()
}

/// HTTP dates have one-second resolution, so file times are compared truncated.
pub fn truncate(t: SystemTime) -> SystemTime {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => UNIX_EPOCH + Duration::from_secs(d.as_secs()),
        Err(_) => UNIX_EPOCH,
    }
}

fn trim_start(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|b| **b == b' ' || **b == b'\t').count();
    &s[n..]
}

fn trim(s: &[u8]) -> &[u8] {
    let s = trim_start(s);
    let n = s
        .iter()
        .rev()
        .take_while(|b| **b == b' ' || **b == b'\t')
        .count();
    &s[..s.len() - n]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }
    const ETAG: &[u8] = b"\"abc-1\"";
    fn v() -> Validators<'static> {
        Validators {
            etag: ETAG,
            last_modified: t(1_000_000_000) + Duration::from_millis(300),
        }
    }
    fn date(secs: u64) -> String {
        httpdate::fmt_http_date(t(secs))
    }

    #[test]
    fn if_none_match_uses_weak_comparison_and_lists() {
        let mut p = Preconditions {
            if_none_match: Some(b"\"abc-1\""),
            ..Default::default()
        };
        assert_eq!(evaluate(&p, &v(), true), Outcome::NotModified);
        p.if_none_match = Some(b"W/\"abc-1\"");
        assert_eq!(evaluate(&p, &v(), true), Outcome::NotModified);
        p.if_none_match = Some(b"\"x\", W/\"abc-1\" ,\"y\"");
        assert_eq!(evaluate(&p, &v(), true), Outcome::NotModified);
        p.if_none_match = Some(b"*");
        assert_eq!(evaluate(&p, &v(), true), Outcome::NotModified);
        p.if_none_match = Some(b"\"other\"");
        assert_eq!(evaluate(&p, &v(), true), Outcome::Proceed);
        p.if_none_match = Some(b"garbage");
        assert_eq!(evaluate(&p, &v(), true), Outcome::Proceed);
        // On an unsafe method a match is a failed precondition.
        p.if_none_match = Some(b"*");
        assert_eq!(evaluate(&p, &v(), false), Outcome::PreconditionFailed);
    }

    #[test]
    fn if_none_match_takes_precedence_over_if_modified_since() {
        let future = date(2_000_000_000);
        let p = Preconditions {
            if_none_match: Some(b"\"other\""),
            if_modified_since: Some(future.as_bytes()),
            ..Default::default()
        };
        assert_eq!(evaluate(&p, &v(), true), Outcome::Proceed);
    }

    #[test]
    fn if_modified_since_compares_whole_seconds() {
        let same = date(1_000_000_000);
        let before = date(999_999_999);
        let mut p = Preconditions {
            if_modified_since: Some(same.as_bytes()),
            ..Default::default()
        };
        assert_eq!(evaluate(&p, &v(), true), Outcome::NotModified);
        p.if_modified_since = Some(before.as_bytes());
        assert_eq!(evaluate(&p, &v(), true), Outcome::Proceed);
        p.if_modified_since = Some(b"not a date");
        assert_eq!(evaluate(&p, &v(), true), Outcome::Proceed);
        // Only GET and HEAD are answered 304 for a date.
        p.if_modified_since = Some(same.as_bytes());
        assert_eq!(evaluate(&p, &v(), false), Outcome::Proceed);
    }

    #[test]
    fn if_match_is_strong_and_wins_over_if_unmodified_since() {
        let mut p = Preconditions {
            if_match: Some(b"\"abc-1\""),
            ..Default::default()
        };
        assert_eq!(evaluate(&p, &v(), true), Outcome::Proceed);
        p.if_match = Some(b"W/\"abc-1\"");
        assert_eq!(evaluate(&p, &v(), true), Outcome::PreconditionFailed);
        p.if_match = Some(b"*");
        assert_eq!(evaluate(&p, &v(), true), Outcome::Proceed);
        let old = date(1);
        p.if_match = Some(b"\"abc-1\"");
        p.if_unmodified_since = Some(old.as_bytes());
        assert_eq!(evaluate(&p, &v(), true), Outcome::Proceed);
    }

    #[test]
    fn if_unmodified_since_fails_for_newer_files() {
        let old = date(1);
        let same = date(1_000_000_000);
        let mut p = Preconditions {
            if_unmodified_since: Some(old.as_bytes()),
            ..Default::default()
        };
        assert_eq!(evaluate(&p, &v(), true), Outcome::PreconditionFailed);
        p.if_unmodified_since = Some(same.as_bytes());
        assert_eq!(evaluate(&p, &v(), true), Outcome::Proceed);
    }

    #[test]
    fn if_range_needs_a_strong_tag_or_the_exact_date() {
        assert!(if_range_allows(b"\"abc-1\"", &v()));
        assert!(!if_range_allows(b"W/\"abc-1\"", &v()));
        assert!(!if_range_allows(b"\"zzz\"", &v()));
        assert!(if_range_allows(date(1_000_000_000).as_bytes(), &v()));
        assert!(!if_range_allows(date(1_000_000_001).as_bytes(), &v()));
        assert!(!if_range_allows(b"yesterday", &v()));
    }

    #[test]
    fn obsolete_date_forms_parse() {
        assert!(parse_http_date(b"Sunday, 06-Nov-94 08:49:37 GMT").is_some());
        assert!(parse_http_date(b"Sun Nov  6 08:49:37 1994").is_some());
        assert!(parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT").is_some());
    }
}
