//! Whether two rules' matches share a request, with a sample of one. Methods, headers,
//! cookies, prefixes, exact paths and extensions are decided exactly, following how the server
//! matches (`Conditions::matches`: the path is decoded and normalized, extensions compare
//! without case, a regex searches anywhere in the path). A regex is tried on sample paths
//! built from the other conditions and its own literals; when none fits, its anchored
//! literals may still prove the rules disjoint, and otherwise the answer is "maybe".

use crate::model::Match;
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::hir::Look;

/// Literals of one regex taken into samples; enough for alternations of a few words.
const SAMPLE_LITERALS: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlap {
    /// No request matches both.
    Disjoint,
    /// This request matches both: `[METHOD ]path[ with header ...]`.
    Sample(String),
    /// A regex may match a common path; none was found.
    Maybe,
}

/// A rule's match with its regex compiled once, for all the pairs it is compared in.
pub struct Prepared<'a> {
    matches: &'a Match,
    /// `None` without a regex; `Some(None)` for one the validator refuses.
    pattern: Option<Option<Pattern>>,
}

impl Prepared<'_> {
    pub fn new(matches: &Match) -> Prepared<'_> {
        Prepared {
            matches,
            pattern: matches.regex.as_deref().map(Pattern::new),
        }
    }
}

pub fn overlap(a_prep: &Prepared<'_>, b_prep: &Prepared<'_>) -> Overlap {
    let (a, b) = (a_prep.matches, b_prep.matches);
    let Some(method) = common_method(a, b) else {
        return Overlap::Disjoint;
    };
    let Some(headers) = common_headers(a, b) else {
        return Overlap::Disjoint;
    };
    let Some(cookies) = common_cookies(a, b) else {
        return Overlap::Disjoint;
    };
    let mut patterns = Vec::new();
    for pattern in [&a_prep.pattern, &b_prep.pattern].into_iter().flatten() {
        match pattern {
            Some(p) => patterns.push(p),
            // The server would not load it: it matches nothing.
            None => return Overlap::Disjoint,
        }
    }
    let path = match common_path(a, b, &patterns) {
        Overlap::Sample(path) => path,
        other => return other,
    };
    let mut sample = match method {
        Some(m) => format!("{m} {path}"),
        None => path,
    };
    if !headers.is_empty() {
        let list: Vec<String> = headers
            .iter()
            .map(|(name, value)| match value {
                Some(v) => format!("{name}: {v}"),
                None => name.to_string(),
            })
            .collect();
        let noun = if list.len() == 1 { "header" } else { "headers" };
        sample = format!("{sample} with {noun} {}", list.join(", "));
    }
    if !cookies.is_empty() {
        let list: Vec<String> = cookies
            .iter()
            .map(|(name, value)| format!("{name}={}", value.unwrap_or("…")))
            .collect();
        let noun = if list.len() == 1 { "cookie" } else { "cookies" };
        let joint = if headers.is_empty() { "with" } else { "and" };
        sample = format!("{sample} {joint} {noun} {}", list.join("; "));
    }
    Overlap::Sample(sample)
}

/// `None`: no method satisfies both; `Some(None)`: any does; `Some(Some(m))`: `m` does.
/// Methods compare exactly, as `http::Method` does (`get` is not `GET`).
fn common_method<'a>(a: &'a Match, b: &'a Match) -> Option<Option<&'a str>> {
    match (a.methods.first(), b.methods.first()) {
        (None, None) => Some(None),
        (Some(m), None) | (None, Some(m)) => Some(Some(m)),
        (Some(_), Some(_)) => a
            .methods
            .iter()
            .find(|m| b.methods.contains(m))
            .map(|m| Some(m.as_str())),
    }
}

/// The header conditions of both rules merged by name (case-insensitive), or `None` when
/// two require different values of the same header.
fn common_headers<'a>(a: &'a Match, b: &'a Match) -> Option<Vec<(&'a str, Option<&'a str>)>> {
    let mut merged: Vec<(&str, Option<&str>)> = Vec::new();
    for h in a.headers.iter().chain(&b.headers) {
        let value = h.value.as_deref();
        match merged
            .iter_mut()
            .find(|(name, _)| name.eq_ignore_ascii_case(&h.name))
        {
            None => merged.push((&h.name, value)),
            Some((_, Some(have))) if value.is_some_and(|v| v != *have) => return None,
            Some((_, have)) => *have = have.or(value),
        }
    }
    Some(merged)
}

/// The cookie conditions of both rules merged by name (exactly: cookie names keep their
/// case), or `None` when two require different values of the same cookie.
fn common_cookies<'a>(a: &'a Match, b: &'a Match) -> Option<Vec<(&'a str, Option<&'a str>)>> {
    let mut merged: Vec<(&str, Option<&str>)> = Vec::new();
    for c in a.cookies.iter().chain(&b.cookies) {
        let value = c.value.as_deref();
        match merged.iter_mut().find(|(name, _)| *name == c.name) {
            None => merged.push((&c.name, value)),
            Some((_, Some(have))) if value.is_some_and(|v| v != *have) => return None,
            Some((_, have)) => *have = have.or(value),
        }
    }
    Some(merged)
}

/// A regex with what its literals say about every path it matches.
struct Pattern {
    regex: regex::Regex,
    /// With `^`: every matching path starts with one of these (`None`: unknown).
    starts: Option<Vec<Vec<u8>>>,
    /// With `$`: every matching path ends with one of these.
    ends: Option<Vec<Vec<u8>>>,
    /// Literals a match starts or ends with, to build sample paths from.
    pieces_first: Vec<String>,
    pieces_last: Vec<String>,
}

impl Pattern {
    /// `None` for a regex the validator refuses (the server would not load it).
    fn new(text: &str) -> Option<Pattern> {
        let regex = regex::Regex::new(text).ok()?;
        let hir = regex_syntax::parse(text).ok()?;
        let props = hir.properties();
        let literals = |kind| -> Option<Vec<Vec<u8>>> {
            let seq = Extractor::new().kind(kind).extract(&hir);
            seq.literals()
                .map(|ls| ls.iter().map(|l| l.as_bytes().to_vec()).collect())
        };
        let first = literals(ExtractKind::Prefix);
        let last = literals(ExtractKind::Suffix);
        let printable = |ls: &Option<Vec<Vec<u8>>>| -> Vec<String> {
            ls.iter()
                .flatten()
                .filter_map(|l| String::from_utf8(l.clone()).ok())
                .take(SAMPLE_LITERALS)
                .collect()
        };
        Some(Pattern {
            pieces_first: printable(&first),
            pieces_last: printable(&last),
            starts: first.filter(|_| props.look_set_prefix().contains(Look::Start)),
            ends: last.filter(|_| props.look_set_suffix().contains(Look::End)),
            regex,
        })
    }
}

fn common_path(a: &Match, b: &Match, patterns: &[&Pattern]) -> Overlap {
    let exact: Vec<&str> = [&a.path, &b.path]
        .into_iter()
        .flatten()
        .map(|p| p.as_str())
        .collect();
    let prefixes: Vec<&str> = [&a.prefix, &b.prefix]
        .into_iter()
        .flatten()
        .map(|p| p.as_str())
        .collect();
    let extension_sets: Vec<&[String]> = [&a.extensions[..], &b.extensions[..]]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect();
    let fits = |path: &str| {
        path.starts_with('/')
            && exact.iter().all(|e| path == *e)
            && prefixes.iter().all(|p| path.starts_with(p))
            && extension_sets.iter().all(|s| has_extension(path, s))
            && patterns.iter().all(|p| p.regex.is_match(path))
    };
    // An exact path is the only candidate: the answer is exact, regexes included.
    if let Some(path) = exact.first() {
        return if fits(path) {
            Overlap::Sample(path.to_string())
        } else {
            Overlap::Disjoint
        };
    }
    let prefix = prefixes
        .iter()
        .copied()
        .max_by_key(|p| p.len())
        .unwrap_or("");
    if !prefixes.iter().all(|p| prefix.starts_with(p)) {
        return Overlap::Disjoint;
    }
    // A path has one extension, so it must be in every set.
    let extensions: Option<Vec<String>> = extension_sets.first().map(|first| {
        first
            .iter()
            .filter(|x| {
                extension_sets
                    .iter()
                    .all(|s| s.iter().any(|y| y.eq_ignore_ascii_case(x)))
            })
            .map(|x| x.to_ascii_lowercase())
            .collect()
    });
    if extensions.as_ref().is_some_and(Vec::is_empty) {
        return Overlap::Disjoint;
    }
    let extensions = extensions.unwrap_or_default();
    if let Some(path) = samples(prefix, &extensions, patterns).find(|p| fits(p)) {
        return Overlap::Sample(path);
    }
    // Without a regex the first sample fits: a prefix extends to any extension.
    if patterns
        .iter()
        .any(|p| disjoint(p, prefix, &extensions, patterns))
    {
        Overlap::Disjoint
    } else {
        Overlap::Maybe
    }
}

/// The extension the server sees: after the last dot of the last segment.
fn has_extension(path: &str, extensions: &[String]) -> bool {
    let name = path.rsplit('/').next().unwrap_or("");
    name.rsplit_once('.')
        .is_some_and(|(_, e)| extensions.iter().any(|x| x.eq_ignore_ascii_case(e)))
}

/// Candidate paths, most readable first: a base (the prefix, or a regex's leading literal
/// that agrees with it) followed by a tail (nothing, a file name with one of the
/// extensions, or a regex's literals).
fn samples<'a>(
    prefix: &'a str,
    extensions: &'a [String],
    patterns: &'a [&'a Pattern],
) -> impl Iterator<Item = String> + 'a {
    let root = if prefix.is_empty() { "/" } else { prefix };
    let mut bases = vec![root.to_string()];
    // Only a literal that starts a path can start a base.
    for piece in patterns
        .iter()
        .flat_map(|p| &p.pieces_first)
        .filter(|piece| piece.starts_with('/'))
    {
        if piece.starts_with(prefix) {
            bases.push(piece.clone());
        } else if prefix.starts_with(piece.as_str()) {
            bases.push(prefix.to_string());
        }
    }
    let mut tails = vec![String::new(), "x".to_string()];
    tails.extend(extensions.iter().map(|x| format!("x.{x}")));
    for piece in patterns
        .iter()
        .flat_map(|p| p.pieces_last.iter().chain(&p.pieces_first))
    {
        // `.jpg` reads best after a file name, `secret` as one.
        let named = format!("x{piece}");
        if piece.starts_with('.') {
            tails.extend([named, piece.clone()]);
        } else {
            tails.extend([piece.clone(), named]);
        }
    }
    bases.into_iter().flat_map(move |base| {
        let tails = tails.clone();
        tails.into_iter().flat_map(move |tail| join(&base, &tail))
    })
}

/// `base` then `tail`, as the next segment and run on, without a doubled slash.
fn join(base: &str, tail: &str) -> Vec<String> {
    if tail.is_empty() {
        return vec![base.to_string()];
    }
    match (base.ends_with('/'), tail.strip_prefix('/')) {
        (true, Some(rest)) => vec![format!("{base}{rest}")],
        (true, None) | (false, Some(_)) => vec![format!("{base}{tail}")],
        (false, None) => vec![format!("{base}/{tail}"), format!("{base}{tail}")],
    }
}

/// Whether `p`'s anchored literals rule out every path the other conditions allow.
fn disjoint(p: &Pattern, prefix: &str, extensions: &[String], all: &[&Pattern]) -> bool {
    let clash = |x: &[u8], y: &[u8]| !(x.starts_with(y) || y.starts_with(x));
    let clash_end = |x: &[u8], y: &[u8]| !(x.ends_with(y) || y.ends_with(x));
    if let Some(starts) = &p.starts {
        if starts.iter().all(|s| clash(s, prefix.as_bytes())) {
            return true;
        }
        for other in all.iter().filter_map(|o| o.starts.as_ref()) {
            if starts.iter().all(|s| other.iter().all(|o| clash(s, o))) {
                return true;
            }
        }
    }
    if let Some(ends) = &p.ends {
        if !extensions.is_empty()
            && ends
                .iter()
                .all(|e| extensions.iter().all(|x| !ending_allows(e, x)))
        {
            return true;
        }
        for other in all.iter().filter_map(|o| o.ends.as_ref()) {
            if ends.iter().all(|e| other.iter().all(|o| clash_end(e, o))) {
                return true;
            }
        }
    }
    false
}

/// Whether a path ending with `ending` can have the extension `x`.
fn ending_allows(ending: &[u8], x: &str) -> bool {
    let Ok(ending) = std::str::from_utf8(ending) else {
        return true;
    };
    match ending.rsplit_once('/') {
        // The whole last segment is known.
        Some((_, name)) => name
            .rsplit_once('.')
            .is_some_and(|(_, e)| e.eq_ignore_ascii_case(x)),
        None => match ending.rsplit_once('.') {
            Some((_, e)) => e.eq_ignore_ascii_case(x),
            // The extension ends with `ending`.
            None => x
                .to_ascii_lowercase()
                .ends_with(&ending.to_ascii_lowercase()),
        },
    }
}
