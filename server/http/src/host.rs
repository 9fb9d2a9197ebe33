//! The Host header and request-target authority: validated as `host[:port]` (RFC 9110
//! §7.2, RFC 3986 §3.2) and normalised to the name that routing, `$host` and
//! SERVER_NAME use, so `a.test:80@evil.example` is refused instead of routed to `a.test`.

use std::borrow::Cow;
use std::net::Ipv6Addr;

/// A valid authority: the name lower-cased without a trailing dot (an IPv6 literal keeps
/// its brackets), and the port if one was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authority<'a> {
    pub name: Cow<'a, str>,
    pub port: Option<u16>,
}

/// Why an authority was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error("the host is empty")]
    Empty,
    #[error("the host is longer than 253 bytes")]
    TooLong,
    #[error("byte 0x{byte:02x} at offset {at} is not allowed in a host name")]
    BadByte { byte: u8, at: usize },
    #[error("the host name has an empty label")]
    EmptyLabel,
    #[error("the port is not a number from 0 to 65535")]
    BadPort,
    #[error("the IPv6 literal is not valid")]
    BadIpv6,
}

/// Longest DNS name in text form (RFC 1035 §2.3.4, without the root dot).
const MAX_NAME: usize = 253;

/// What each byte is in a `host[:port]`, as a table: the check runs on every request.
const BYTE_CLASS: [u8; 256] = {
    let mut t = [OTHER; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = match b as u8 {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' => NAME,
            b'.' => DOT,
            b':' => COLON,
            _ => OTHER,
        };
        b += 1;
    }
    t
};
const OTHER: u8 = 0;
const NAME: u8 = 1;
const DOT: u8 = 2;
const COLON: u8 = 3;

/// Whether `parse_authority` would accept `raw`, in one pass without building anything
/// (the connection layer asks this of every request's Host).
pub fn is_valid(raw: &[u8]) -> bool {
    if raw.first() == Some(&b'[') {
        return parse_authority(raw).is_ok();
    }
    // One pass over the name: allowed bytes, no leading or doubled dot. Most bytes are
    // letters or digits: one table load and one branch each.
    let mut end = 0;
    let mut previous_dot = true;
    while end < raw.len() {
        match BYTE_CLASS[usize::from(raw[end])] {
            NAME => previous_dot = false,
            DOT if !previous_dot => previous_dot = true,
            COLON => break,
            _ => return false,
        }
        end += 1;
    }
    // A trailing dot (the root) is allowed once.
    let name_len = end - usize::from(previous_dot && end > 0);
    if name_len == 0 || name_len > MAX_NAME {
        return false;
    }
    let port = &raw[end..];
    match port {
        [] | [b':'] => true,
        [b':', digits @ ..] => parse_port(digits).is_ok(),
        _ => false,
    }
}

/// Parses and normalises a Host value or the authority of an absolute-form target.
/// Names are DNS-style: letters, digits, `-`, `_` and dots, or an IPv4 address; IPv6
/// literals in brackets. Userinfo (`@`), paths, spaces and percent-encoding are refused.
pub fn parse_authority(raw: &[u8]) -> Result<Authority<'_>, HostError> {
    if raw.is_empty() {
        return Err(HostError::Empty);
    }
    let (name, rest_at) = if raw[0] == b'[' {
        let close = raw
            .iter()
            .position(|&b| b == b']')
            .ok_or(HostError::BadIpv6)?;
        let inner = std::str::from_utf8(&raw[1..close]).map_err(|_| HostError::BadIpv6)?;
        inner.parse::<Ipv6Addr>().map_err(|_| HostError::BadIpv6)?;
        (&raw[..=close], close + 1)
    } else {
        let end = raw.iter().position(|&b| b == b':').unwrap_or(raw.len());
        (&raw[..end], end)
    };
    let port = match &raw[rest_at..] {
        [] => None,
        [b':'] => None, // RFC 3986 allows an empty port
        [b':', digits @ ..] => Some(parse_port(digits)?),
        [byte, ..] => {
            return Err(HostError::BadByte {
                byte: *byte,
                at: rest_at,
            })
        }
    };
    if raw[0] == b'[' {
        let text = std::str::from_utf8(name).map_err(|_| HostError::BadIpv6)?;
        return Ok(Authority {
            name: lower(text),
            port,
        });
    }
    let name = name.strip_suffix(b".").unwrap_or(name);
    if name.is_empty() {
        return Err(HostError::Empty);
    }
    if name.len() > MAX_NAME {
        return Err(HostError::TooLong);
    }
    if name.ends_with(b".") {
        return Err(HostError::EmptyLabel);
    }
    let mut previous = b'.';
    for (at, &byte) in name.iter().enumerate() {
        match byte {
            b'.' if previous == b'.' => return Err(HostError::EmptyLabel),
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {}
            _ => return Err(HostError::BadByte { byte, at }),
        }
        previous = byte;
    }
    // Only ASCII passed the loop above.
    let text = std::str::from_utf8(name).map_err(|_| HostError::Empty)?;
    Ok(Authority {
        name: lower(text),
        port,
    })
}

fn parse_port(digits: &[u8]) -> Result<u16, HostError> {
    if digits.is_empty() || digits.len() > 5 {
        return Err(HostError::BadPort);
    }
    let mut n = 0u32;
    for &d in digits {
        let v = d.wrapping_sub(b'0');
        if v > 9 {
            return Err(HostError::BadPort);
        }
        n = n * 10 + u32::from(v);
    }
    u16::try_from(n).map_err(|_| HostError::BadPort)
}

fn lower(text: &str) -> Cow<'_, str> {
    if text.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(text.to_ascii_lowercase())
    } else {
        Cow::Borrowed(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(raw: &str) -> (String, Option<u16>) {
        let a = parse_authority(raw.as_bytes()).unwrap_or_else(|e| panic!("{raw:?}: {e}"));
        (a.name.into_owned(), a.port)
    }

    fn err(raw: &str) -> HostError {
        parse_authority(raw.as_bytes()).expect_err(raw)
    }

    #[test]
    fn the_quick_check_agrees_with_the_parser() {
        for raw in [
            "a.test",
            "A.Test.:8080",
            "a.test:",
            "10.0.0.1:80",
            "[::1]:443",
            "my_host.internal",
            "a.test:80@evil.example",
            "user@a.test",
            "a.test/x",
            "a b",
            "",
            ".",
            ":80",
            "a..test",
            ".a.test",
            "a.test..",
            "a.test:65536",
            "a.test:8o",
            "a.test:80:81",
            "[::1",
            "[::1]x",
            "a.",
            "a.:1",
            "..",
            "a.test.:",
        ] {
            assert_eq!(
                is_valid(raw.as_bytes()),
                parse_authority(raw.as_bytes()).is_ok(),
                "{raw:?}"
            );
        }
        assert!(!is_valid("a".repeat(254).as_bytes()));
        assert!(!is_valid("caf\u{e9}.test".as_bytes()));
    }

    #[test]
    fn names_and_ports_are_normalised() {
        assert_eq!(ok("a.test"), ("a.test".into(), None));
        assert_eq!(ok("A.Test.:8080"), ("a.test".into(), Some(8080)));
        assert_eq!(ok("a.test:"), ("a.test".into(), None));
        assert_eq!(ok("10.0.0.1:80"), ("10.0.0.1".into(), Some(80)));
        assert_eq!(ok("[::1]:443"), ("[::1]".into(), Some(443)));
        assert_eq!(ok("[FE80::1]"), ("[fe80::1]".into(), None));
        assert_eq!(ok("my_host.internal"), ("my_host.internal".into(), None));
    }

    #[test]
    fn userinfo_paths_and_garbage_are_refused_with_the_reason() {
        assert_eq!(
            err("a.test:80@evil.example"),
            HostError::BadPort,
            "userinfo after a port"
        );
        assert_eq!(err("user@a.test"), HostError::BadByte { byte: b'@', at: 4 });
        assert_eq!(err("a.test/x"), HostError::BadByte { byte: b'/', at: 6 });
        assert_eq!(err("a b"), HostError::BadByte { byte: b' ', at: 1 });
        assert_eq!(err("a%2etest"), HostError::BadByte { byte: b'%', at: 1 });
        assert_eq!(err(""), HostError::Empty);
        assert_eq!(err("."), HostError::Empty);
        assert_eq!(err(":80"), HostError::Empty);
        assert_eq!(err("a..test"), HostError::EmptyLabel);
        assert_eq!(err(".a.test"), HostError::EmptyLabel);
        assert_eq!(err("a.test.."), HostError::EmptyLabel);
        assert_eq!(err("a.test:65536"), HostError::BadPort);
        assert_eq!(err("a.test:8o"), HostError::BadPort);
        assert_eq!(err("a.test:80:81"), HostError::BadPort);
        assert_eq!(err("[::1"), HostError::BadIpv6);
        assert_eq!(err("[not-v6]"), HostError::BadIpv6);
        assert_eq!(err("[::1]x"), HostError::BadByte { byte: b'x', at: 5 });
        assert_eq!(err(&"a".repeat(254)), HostError::TooLong);
        assert_eq!(
            err("caf\u{e9}.test"),
            HostError::BadByte { byte: 0xc3, at: 3 }
        );
    }
}
