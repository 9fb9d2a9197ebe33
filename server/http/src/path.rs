//! Maps a request path onto a path relative to the document root, safely.
//!
//! Pure string work, no I/O: the result is later opened with `openat2(RESOLVE_BENEATH)`
//! (see `fs::open`), so even a symlink planted after this check cannot leave the root.
//! Every rejection here corresponds to a traversal trick seen in nginx, lighttpd or
//! Apache CVEs; the unit tests below name them.

use std::borrow::Cow;

/// Why a request path cannot be mapped onto the file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("request path must start with '/'")]
    NotAbsolute,
    #[error("malformed percent-encoding")]
    BadEncoding,
    #[error("percent-decoded path is not valid UTF-8")]
    NotUtf8,
    #[error("NUL or control character in path")]
    ControlCharacter,
    #[error("backslash in path")]
    Backslash,
    #[error("encoded slash (%2F) in path")]
    EncodedSlash,
    #[error("path climbs above the document root")]
    AboveRoot,
    #[error("path names a hidden (dot) file")]
    Hidden,
    #[error("dot segment with parameters ('..;' or '.;') in path")]
    DotSegmentParameters,
}

impl PathError {
    /// Hidden files are reported as absent (404); everything else is a malformed request (400).
    pub fn is_not_found(self) -> bool {
        matches!(self, PathError::Hidden)
    }
}

/// A normalized request path: starts with '/', no empty, "." or ".." segments, and keeps a
/// trailing slash when the request had one (it decides between a directory and a redirect).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanPath<'a>(Cow<'a, str>);

impl<'a> CleanPath<'a> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// The path relative to the root, as openat2 wants it ("." for the root itself).
    pub fn relative(&self) -> &str {
        let rel = self.0.trim_start_matches('/');
        if rel.is_empty() {
            "."
        } else {
            rel
        }
    }
    pub fn has_trailing_slash(&self) -> bool {
        self.0.ends_with('/')
    }
    /// The same path, owning its text (to keep one from the configuration).
    pub fn into_owned(self) -> CleanPath<'static> {
        CleanPath(Cow::Owned(self.0.into_owned()))
    }
    /// The path with `suffix` appended to its last segment (`/about` and `.html` give
    /// `/about.html`), or `None` for a path ending in '/', whose last segment is empty.
    /// The suffix is taken as it is: it must hold no '/' and not make a dot segment.
    pub fn with_suffix(&self, suffix: &str) -> Option<CleanPath<'static>> {
        if self.has_trailing_slash() || suffix.contains('/') {
            return None;
        }
        Some(CleanPath(Cow::Owned(format!("{}{suffix}", self.0))))
    }
}

/// Percent-encodes what a URL path cannot hold as it is (`%`, `?`, `#`, spaces, control
/// characters, `\`, quotes and brackets, non-ASCII), keeping every character RFC 3986
/// allows in a path (`pchar` and `/`), so a cleaned path goes back into a Location
/// meaning exactly itself: `/wiki/Help:Contents` stays as it is.
pub fn percent_encode_path(text: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Percent-encodes all but unreserved characters (and `/` when `keep_slash`), so a
/// decoded name or path goes back into a URL as exactly what it is.
pub fn percent_encode(text: &str, keep_slash: bool) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'.' | b'_' | b'~')
            || (keep_slash && b == b'/')
        {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Policy knobs for mapping.
#[derive(Debug, Clone, Copy)]
pub struct PathPolicy {
    /// Serve files and folders whose name starts with '.' (except `.well-known`, always served).
    pub allow_hidden: bool,
}

/// Decodes and normalizes `raw` (the path part of the request target, without the query).
// Always inlined: the request path has it in its body, and a second caller (a fallback
// read from the configuration) would otherwise make it a call there.
#[inline(always)]
pub fn clean_request_path(raw: &str, policy: PathPolicy) -> Result<CleanPath<'_>, PathError> {
    if !raw.starts_with('/') {
        return Err(PathError::NotAbsolute);
    }
    // Fast path: nothing to decode and nothing to normalize, so borrow the input.
    if !needs_work(raw.as_bytes()) {
        return Ok(CleanPath(Cow::Borrowed(raw)));
    }
    let decoded = percent_decode(raw)?;
    let decoded = String::from_utf8(decoded).map_err(|_| PathError::NotUtf8)?;
    if decoded.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err(PathError::ControlCharacter);
    }
    if decoded.contains('\\') {
        return Err(PathError::Backslash);
    }
    // Dot-segment removal happens after decoding, so "%2e%2e" is treated as "..".
    let mut segments: Vec<&str> = Vec::new();
    for seg in decoded.split('/') {
        // Tomcat and other Servlet containers drop a segment's ";parameters" before
        // resolving dots: "/public/..;/admin" would reach a backend as "/admin" while a
        // rule for "/admin" never matched it here.
        if seg.starts_with(".;") || seg.starts_with("..;") {
            return Err(PathError::DotSegmentParameters);
        }
        match seg {
            "" | "." => {}
            ".." => {
                if segments.pop().is_none() {
                    return Err(PathError::AboveRoot);
                }
            }
            s => segments.push(s),
        }
    }
    let trailing = decoded.ends_with('/')
        || decoded.ends_with("/.")
        || decoded.ends_with("/..")
        || segments.is_empty();
    let mut out = String::with_capacity(decoded.len());
    for s in &segments {
        out.push('/');
        out.push_str(s);
    }
    if trailing {
        out.push('/');
    }
    let clean = CleanPath(Cow::Owned(out));
    check_hidden(&clean, policy)?;
    Ok(clean)
}

/// Bytes a path may need decoding or normalizing for: `%`, `\\`, controls, and `/` (when
/// followed by `/` or `.`), as a table: the scan runs on every request.
const MAY_NEED_WORK: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = matches!(b as u8, b'%' | b'\\' | b'/' | 0x7f) || b < 0x20;
        b += 1;
    }
    t
};

/// Whether `raw` has percent-encoding, a backslash, a control byte, an empty segment or
/// a segment starting with a dot: anything but a path to borrow as it is.
fn needs_work(raw: &[u8]) -> bool {
    for (i, &b) in raw.iter().enumerate() {
        if MAY_NEED_WORK[usize::from(b)]
            && (b != b'/' || matches!(raw.get(i + 1), Some(b'/' | b'.')))
        {
            return true;
        }
    }
    false
}

/// Hidden-file check, run on every path (borrowed ones too).
pub fn check_hidden(path: &CleanPath<'_>, policy: PathPolicy) -> Result<(), PathError> {
    if policy.allow_hidden {
        return Ok(());
    }
    for seg in path.as_str().split('/') {
        if seg.starts_with('.') && seg != ".well-known" {
            return Err(PathError::Hidden);
        }
    }
    Ok(())
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Single-pass percent-decoding. Written by hand because the rejection of `%2F` needs to
/// know which slashes were encoded, which a generic decoder hides. Decoding happens once:
/// "%252e" becomes the literal "%2e", never ".".
fn percent_decode(raw: &str) -> Result<Vec<u8>, PathError> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let (Some(&h), Some(&l)) = (bytes.get(i + 1), bytes.get(i + 2)) else {
                return Err(PathError::BadEncoding);
            };
            let (Some(h), Some(l)) = (hex(h), hex(l)) else {
                return Err(PathError::BadEncoding);
            };
            let v = h << 4 | l;
            match v {
                b'/' => return Err(PathError::EncodedSlash),
                0 => return Err(PathError::ControlCharacter),
                _ => out.push(v),
            }
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table scan against the predicate it replaced (a byte loop carrying the
    /// previous byte), on every string of up to five bytes from the bytes that matter.
    #[test]
    fn the_table_scan_flags_exactly_what_the_byte_predicate_did() {
        fn reference(raw: &[u8]) -> bool {
            let mut prev = 0u8;
            raw.iter().any(|&b| {
                let special = b == b'%'
                    || b == b'\\'
                    || b < 0x20
                    || b == 0x7f
                    || (prev == b'/' && (b == b'/' || b == b'.'));
                prev = b;
                special
            })
        }
        let alphabet = [b'/', b'.', b'%', b'\\', b'a', 0x1f, 0x7f, 0x80, b'?'];
        let mut strings: Vec<Vec<u8>> = vec![vec![]];
        for _ in 0..5 {
            let longer: Vec<Vec<u8>> = strings
                .iter()
                .filter(|s| s.len() == strings.last().map_or(0, |l| l.len()))
                .flat_map(|s| {
                    alphabet.iter().map(move |&b| {
                        let mut t = s.clone();
                        t.push(b);
                        t
                    })
                })
                .collect();
            strings.extend(longer);
        }
        assert!(strings.len() > 60_000);
        for s in &strings {
            assert_eq!(needs_work(s), reference(s), "{s:?}");
        }
    }

    const STRICT: PathPolicy = PathPolicy {
        allow_hidden: false,
    };

    fn clean(p: &str) -> Result<String, PathError> {
        clean_request_path(p, STRICT).map(|c| c.as_str().to_owned())
    }

    #[test]
    fn plain_paths_are_borrowed_unchanged() {
        let c = clean_request_path("/css/site.css", STRICT).unwrap();
        assert!(matches!(c.0, Cow::Borrowed(_)));
        assert_eq!(c.relative(), "css/site.css");
        assert_eq!(clean_request_path("/", STRICT).unwrap().relative(), ".");
    }

    #[test]
    fn dot_segments_are_removed_after_decoding() {
        assert_eq!(clean("/a/./b/../c").unwrap(), "/a/c");
        assert_eq!(clean("/a/%2e%2e/c").unwrap(), "/c");
        assert_eq!(clean("/a/%2E/c").unwrap(), "/a/c");
        assert_eq!(clean("/a/b/..").unwrap(), "/a/");
        assert_eq!(clean("//a///b/").unwrap(), "/a/b/");
        assert_eq!(clean("/%20x").unwrap(), "/ x");
    }

    #[test]
    fn dot_segments_with_parameters_are_rejected_as_a_servlet_container_reads_them() {
        assert_eq!(
            clean("/public/..;/admin"),
            Err(PathError::DotSegmentParameters)
        );
        assert_eq!(
            clean("/public/..;jsessionid=1/admin"),
            Err(PathError::DotSegmentParameters)
        );
        assert_eq!(clean("/a/.;x/b"), Err(PathError::DotSegmentParameters));
        // Encoded, it is the same segment once decoded.
        assert_eq!(
            clean("/public/%2e%2e%3b/admin"),
            Err(PathError::DotSegmentParameters)
        );
        // Parameters elsewhere, and names that only start with dots, are paths like any.
        assert_eq!(
            clean("/shop;jsessionid=1/cart").unwrap(),
            "/shop;jsessionid=1/cart"
        );
        assert_eq!(
            clean("/a/...;x"),
            Err(PathError::Hidden),
            "a dot file's name"
        );
    }

    #[test]
    fn climbing_above_root_is_rejected() {
        assert_eq!(clean("/.."), Err(PathError::AboveRoot));
        assert_eq!(clean("/../etc/passwd"), Err(PathError::AboveRoot));
        assert_eq!(clean("/a/../../etc/passwd"), Err(PathError::AboveRoot));
        // nginx CVE-2009-2629 style: encoded dots.
        assert_eq!(
            clean("/%2e%2e/%2e%2e/etc/passwd"),
            Err(PathError::AboveRoot)
        );
    }

    #[test]
    fn apache_cve_2021_41773_and_42013() {
        // 41773: ".%2e" is "..".
        assert_eq!(
            clean("/cgi-bin/.%2e/.%2e/.%2e/etc/passwd"),
            Err(PathError::AboveRoot)
        );
        // 42013: double encoding "%%32%65" must not decode twice; a lone '%' followed by '%' is malformed.
        assert_eq!(
            clean("/cgi-bin/.%%32%65/etc/passwd"),
            Err(PathError::BadEncoding)
        );
        // "%252e" decodes once to the literal "%2e", a harmless name.
        assert_eq!(clean("/a/%252e%252e/b").unwrap(), "/a/%2e%2e/b");
    }

    #[test]
    fn nul_and_control_bytes_are_rejected() {
        // The classic "file.php%00.jpg" and nginx CVE-2013-4547 ("/foo \0.php").
        assert_eq!(
            clean("/index.html%00.jpg"),
            Err(PathError::ControlCharacter)
        );
        assert_eq!(clean("/foo%20%00.php"), Err(PathError::ControlCharacter));
        assert_eq!(
            clean("/a%0d%0aSet-Cookie:x"),
            Err(PathError::ControlCharacter)
        );
        assert_eq!(clean("/a%7f"), Err(PathError::ControlCharacter));
    }

    #[test]
    fn backslashes_and_encoded_slashes_are_rejected() {
        // lighttpd/Windows style "..\" and its encodings.
        assert_eq!(clean("/..\\..\\etc/passwd"), Err(PathError::Backslash));
        assert_eq!(clean("/..%5c..%5cetc/passwd"), Err(PathError::Backslash));
        assert_eq!(clean("/..%5C..%5Cetc/passwd"), Err(PathError::Backslash));
        // Encoded slash tricks ("..%2f" in Apache/Tomcat reports).
        assert_eq!(clean("/..%2f..%2fetc/passwd"), Err(PathError::EncodedSlash));
        assert_eq!(clean("/a%2Fb"), Err(PathError::EncodedSlash));
    }

    #[test]
    fn overlong_utf8_is_rejected() {
        // IIS-era "%c0%ae%c0%ae/" overlong dots, and "%c0%af" overlong slash.
        assert_eq!(clean("/%c0%ae%c0%ae/etc/passwd"), Err(PathError::NotUtf8));
        assert_eq!(clean("/..%c0%af../etc/passwd"), Err(PathError::NotUtf8));
        assert_eq!(clean("/%e2%82%ac.txt").unwrap(), "/€.txt");
    }

    #[test]
    fn malformed_escapes_are_rejected() {
        assert_eq!(clean("/a%"), Err(PathError::BadEncoding));
        assert_eq!(clean("/a%2"), Err(PathError::BadEncoding));
        assert_eq!(clean("/a%zz"), Err(PathError::BadEncoding));
        assert_eq!(clean("a/b"), Err(PathError::NotAbsolute));
        assert_eq!(clean("*"), Err(PathError::NotAbsolute));
    }

    #[test]
    fn dotfiles_are_hidden_unless_allowed() {
        assert_eq!(clean("/.env"), Err(PathError::Hidden));
        assert_eq!(clean("/.git/config"), Err(PathError::Hidden));
        assert_eq!(clean("/a/%2egit/config"), Err(PathError::Hidden));
        assert_eq!(
            clean("/.well-known/acme-challenge/x").unwrap(),
            "/.well-known/acme-challenge/x"
        );
        let open = PathPolicy { allow_hidden: true };
        assert_eq!(clean_request_path("/.env", open).unwrap().as_str(), "/.env");
        assert!(PathError::Hidden.is_not_found());
        assert!(!PathError::AboveRoot.is_not_found());
    }
}
