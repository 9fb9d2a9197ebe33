//! The protocol-neutral view of a request that handlers see. Both the HTTP/1.1 fast path
//! and the hyper path build one, so handlers never depend on the wire format.

use crate::conditional::Preconditions;
use http::Method;
use std::net::IpAddr;

/// All request headers, for rules and modifiers that look past the common ones.
#[derive(Debug, Clone, Copy, Default)]
pub enum HeaderSource<'a> {
    #[default]
    None,
    /// The fast path's parsed headers.
    H1(&'a [httparse::Header<'a>]),
    /// hyper's header map.
    Map(&'a http::HeaderMap),
    /// The HTTP/2 driver's decoded head.
    H2(&'a crate::h2::request::Head),
}

impl<'a> HeaderSource<'a> {
    /// The first value of a header, by case-insensitive name.
    pub fn get(&self, name: &str) -> Option<&'a [u8]> {
        match self {
            HeaderSource::None => None,
            HeaderSource::H1(hs) => hs
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| h.value),
            HeaderSource::Map(m) => m.get(name).map(|v| v.as_bytes()),
            HeaderSource::H2(h) => h.get(name),
        }
    }

    /// Every value of a header, in the order received (one per field line).
    pub fn all(&self, name: &str) -> Vec<&'a [u8]> {
        match self {
            HeaderSource::None => Vec::new(),
            HeaderSource::H1(hs) => hs
                .iter()
                .filter(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| h.value)
                .collect(),
            HeaderSource::Map(m) => m.get_all(name).iter().map(|v| v.as_bytes()).collect(),
            HeaderSource::H2(h) => h
                .fields()
                .filter(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
                .map(|(_, v)| v)
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct RequestHead<'a> {
    pub method: Method,
    /// The request target as received (path and query), for the access log.
    pub target: &'a str,
    /// The path of the request target, still percent-encoded ("*" for `OPTIONS *`).
    pub path: &'a str,
    pub query: Option<&'a str>,
    /// The Host field, or the authority of an absolute-form target or HTTP/2's
    /// `:authority`, which take its place (RFC 9112 §3.2.2).
    pub host: Option<&'a [u8]>,
    /// More than one Host field was sent (RFC 9112 §3.2: 400).
    pub host_repeated: bool,
    pub preconditions: Preconditions<'a>,
    pub range: Option<&'a [u8]>,
    pub if_range: Option<&'a [u8]>,
    pub accept_encoding: Option<&'a [u8]>,
    pub referer: Option<&'a [u8]>,
    pub user_agent: Option<&'a [u8]>,
    /// The TCP peer's address.
    pub peer: Option<IpAddr>,
    /// The request came over TLS (HTTPS).
    pub secure: bool,
    /// Over TLS, the Host names a certificate other than the one the connection was given
    /// for its SNI (RFC 9110 §15.5.20: 421).
    pub misdirected: bool,
    pub headers: HeaderSource<'a>,
}

impl<'a> RequestHead<'a> {
    /// Splits a request target into path and query. Absolute-form targets
    /// (`http://host/path`) keep only their path, as RFC 9112 §3.2.2 requires servers to accept.
    pub fn split_target(target: &'a str) -> (&'a str, Option<&'a str>) {
        let absolute = if target.starts_with('/') {
            None
        } else {
            target.find("://")
        };
        let target = match absolute {
            Some(i) => {
                let after = &target[i + 3..];
                match after.find(['/', '?']) {
                    Some(j) if after.as_bytes()[j] == b'/' => &after[j..],
                    Some(j) => &after[j..], // "http://h?q": an empty path with a query
                    None => "/",
                }
            }
            _ => target,
        };
        // A byte loop, not `split_once('?')`: targets are short, and the char searcher's
        // set-up cost more than the scan (`?` is ASCII, so `i` is a char boundary).
        match target.bytes().position(|b| b == b'?') {
            Some(i) => {
                let p = &target[..i];
                (if p.is_empty() { "/" } else { p }, Some(&target[i + 1..]))
            }
            None => (target, None),
        }
    }

    /// The authority of an absolute-form target (`http://a.test:8080/p` gives `a.test:8080`).
    pub fn target_authority(target: &'a str) -> Option<&'a str> {
        // Only http and https: `x?://h/admin` is no absolute-form target to route on.
        let after = ["http://", "https://"].iter().find_map(|scheme| {
            let head = target.get(..scheme.len())?;
            head.eq_ignore_ascii_case(scheme)
                .then(|| &target[scheme.len()..])
        })?;
        Some(&after[..after.find(['/', '?']).unwrap_or(after.len())])
    }

    /// Records a header if it is one handlers use. Names are compared case-insensitively.
    pub fn note_header(&mut self, name: &[u8], value: &'a [u8]) {
        // Dispatch on length first: cheap, and most headers are skipped here.
        let slot = match name.len() {
            4 if name.eq_ignore_ascii_case(b"host") => {
                self.host_repeated |= self.host.is_some();
                &mut self.host
            }
            5 if name.eq_ignore_ascii_case(b"range") => &mut self.range,
            8 if name.eq_ignore_ascii_case(b"if-match") => &mut self.preconditions.if_match,
            8 if name.eq_ignore_ascii_case(b"if-range") => &mut self.if_range,
            7 if name.eq_ignore_ascii_case(b"referer") => &mut self.referer,
            10 if name.eq_ignore_ascii_case(b"user-agent") => &mut self.user_agent,
            13 if name.eq_ignore_ascii_case(b"if-none-match") => {
                &mut self.preconditions.if_none_match
            }
            15 if name.eq_ignore_ascii_case(b"accept-encoding") => &mut self.accept_encoding,
            17 if name.eq_ignore_ascii_case(b"if-modified-since") => {
                &mut self.preconditions.if_modified_since
            }
            19 if name.eq_ignore_ascii_case(b"if-unmodified-since") => {
                &mut self.preconditions.if_unmodified_since
            }
            _ => return,
        };
        // A repeated header keeps its first value; list-valued ones are rare in practice here.
        if slot.is_none() {
            *slot = Some(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_split_into_path_and_query() {
        assert_eq!(RequestHead::split_target("/a/b?x=1"), ("/a/b", Some("x=1")));
        assert_eq!(RequestHead::split_target("/a"), ("/a", None));
        assert_eq!(
            RequestHead::split_target("http://h.example/p?q"),
            ("/p", Some("q"))
        );
        assert_eq!(RequestHead::split_target("http://h.example"), ("/", None));
        assert_eq!(
            RequestHead::split_target("http://h.example?q"),
            ("/", Some("q"))
        );
        assert_eq!(RequestHead::split_target("*"), ("*", None));
        assert_eq!(RequestHead::split_target("/?"), ("/", Some("")));
        assert_eq!(RequestHead::split_target("?x"), ("/", Some("x")));
        assert_eq!(RequestHead::split_target("/a?b?c"), ("/a", Some("b?c")));
        assert_eq!(RequestHead::split_target("/é?ü"), ("/é", Some("ü")));
    }

    #[test]
    fn headers_are_noted_case_insensitively() {
        let mut h = RequestHead::default();
        h.note_header(b"HOST", b"a");
        h.note_header(b"If-None-Match", b"\"x\"");
        h.note_header(b"X-Other", b"ignored");
        h.note_header(b"host", b"second");
        assert_eq!(h.host, Some(&b"a"[..]));
        assert!(h.host_repeated, "a second Host field went unnoticed");
        assert_eq!(h.preconditions.if_none_match, Some(&b"\"x\""[..]));
    }

    #[test]
    fn absolute_form_targets_name_their_authority() {
        assert_eq!(
            RequestHead::target_authority("http://a.test:8080/p?q"),
            Some("a.test:8080")
        );
        assert_eq!(
            RequestHead::target_authority("http://a.test?q"),
            Some("a.test")
        );
        assert_eq!(
            RequestHead::target_authority("HTTPS://a.test/"),
            Some("a.test")
        );
        assert_eq!(RequestHead::target_authority("x?://h/admin"), None);
        assert_eq!(RequestHead::target_authority("/p"), None);
        assert_eq!(RequestHead::target_authority("*"), None);
    }
}
