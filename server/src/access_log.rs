//! The access log: Apache "combined" (the default, what fail2ban and log tools parse) or
//! JSON lines, to stdout. Each worker formats into its own buffer and writes it in one
//! syscall when it fills or once a second, so logging costs no lock and little time.

use crate::http::text::push_decimal;
use std::io::Write;
use std::net::IpAddr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Combined,
    Json,
    Off,
}

pub struct LogRecord<'a> {
    /// The client address: formatted only when a line is written, so a connection with
    /// logging off never formats it.
    pub remote: IpAddr,
    pub method: &'a str,
    /// The request target as received (bytes: escaped when written, never re-validated).
    pub target: &'a [u8],
    pub version: &'a str,
    pub status: u16,
    pub bytes: u64,
    pub referer: Option<&'a [u8]>,
    pub user_agent: Option<&'a [u8]>,
    pub duration_us: u64,
    /// Time to the response head, in microseconds (JSON only; see `wants_timings`).
    pub first_byte_us: u64,
    /// The virtual server that answered (JSON only).
    pub vhost: &'a str,
    /// The backend pool that answered, if any (JSON only).
    pub pool: Option<&'a str>,
}

/// Where log lines go. Each worker writes whole buffers with one write(2); a file is opened
/// with O_APPEND, so writes from several workers never interleave within a line.
#[derive(Clone, Debug, Default)]
pub enum Destination {
    #[default]
    Stdout,
    File(std::sync::Arc<std::fs::File>),
}

impl Destination {
    pub fn open(path: Option<&str>) -> std::io::Result<Destination> {
        match path {
            None => Ok(Destination::Stdout),
            Some(p) => Ok(Destination::File(std::sync::Arc::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)?,
            ))),
        }
    }
}

pub struct AccessLog {
    format: LogFormat,
    destination: Destination,
    buf: Vec<u8>,
}

const FLUSH_AT: usize = 32 * 1024;

impl AccessLog {
    pub fn new(format: LogFormat, destination: Destination) -> AccessLog {
        AccessLog {
            format,
            destination,
            buf: Vec::new(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.format != LogFormat::Off
    }

    /// Only the JSON format has fields for durations: the combined one leaves them out.
    pub fn wants_timings(&self) -> bool {
        self.format == LogFormat::Json
    }

    pub fn log(&mut self, r: &LogRecord<'_>) {
        match self.format {
            LogFormat::Off => return,
            LogFormat::Combined => format_combined(&mut self.buf, r),
            LogFormat::Json => format_json(&mut self.buf, r),
        }
        if self.buf.len() >= FLUSH_AT {
            self.flush();
        }
    }

    pub fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        // A failed write (closed stdout, full disk) drops the lines rather than stalling serving.
        let _ = match &self.destination {
            Destination::Stdout => std::io::stdout().lock().write_all(&self.buf),
            Destination::File(f) => (&**f).write_all(&self.buf),
        };
        self.buf.clear();
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        self.flush();
    }
}

/// An address as `IpAddr`'s `Display` writes it; IPv4 (nearly every line) without the
/// formatting machinery.
fn push_ip(out: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                push_decimal(out, u64::from(octet));
            }
        }
        IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}

/// `%h - - [%t] "%r" %>s %b "%{Referer}i" "%{User-agent}i"`
pub fn format_combined(out: &mut Vec<u8>, r: &LogRecord<'_>) {
    push_ip(out, r.remote);
    out.extend_from_slice(b" - - [");
    crate::http::date::with_log_date(crate::coarse_clock::unix_seconds(), |d| {
        out.extend_from_slice(d.as_bytes())
    });
    out.extend_from_slice(b"] \"");
    escape_apache(out, r.method.as_bytes());
    out.push(b' ');
    escape_apache(out, r.target);
    out.push(b' ');
    out.extend_from_slice(r.version.as_bytes());
    out.extend_from_slice(b"\" ");
    push_decimal(out, r.status as u64);
    out.push(b' ');
    if r.bytes == 0 {
        out.push(b'-');
    } else {
        push_decimal(out, r.bytes);
    }
    for field in [r.referer, r.user_agent] {
        out.extend_from_slice(b" \"");
        match field {
            Some(v) => escape_apache(out, v),
            None => out.push(b'-'),
        }
        out.push(b'"');
    }
    out.push(b'\n');
}

pub fn format_json(out: &mut Vec<u8>, r: &LogRecord<'_>) {
    out.extend_from_slice(b"{\"time\":\"");
    crate::http::date::with_log_date(crate::coarse_clock::unix_seconds(), |d| {
        out.extend_from_slice(d.as_bytes())
    });
    out.extend_from_slice(b"\",\"remote\":\"");
    push_ip(out, r.remote);
    out.extend_from_slice(b"\",\"method\":\"");
    escape_json(out, r.method.as_bytes());
    out.extend_from_slice(b"\",\"target\":\"");
    escape_json(out, r.target);
    let _ = write!(
        out,
        "\",\"protocol\":\"{}\",\"status\":{},\"bytes\":{},\"duration_us\":{},\"first_byte_us\":{},\"vhost\":\"",
        r.version, r.status, r.bytes, r.duration_us, r.first_byte_us
    );
    escape_json(out, r.vhost.as_bytes());
    out.extend_from_slice(b"\",\"pool\":");
    match r.pool {
        Some(p) => {
            out.push(b'"');
            escape_json(out, p.as_bytes());
            out.push(b'"');
        }
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"referer\":");
    for (i, field) in [r.referer, r.user_agent].into_iter().enumerate() {
        if i == 1 {
            out.extend_from_slice(b",\"user_agent\":");
        }
        match field {
            Some(v) => {
                out.push(b'"');
                escape_json(out, v);
                out.push(b'"');
            }
            None => out.extend_from_slice(b"null"),
        }
    }
    out.extend_from_slice(b"}\n");
}

/// Bytes of a client's field logged at most (then `...`): escaped, a field of bytes
/// outside ASCII grows four to six times, and a line is written in one piece.
const MAX_FIELD: usize = 4096;

/// A field cut to [`MAX_FIELD`], and whether it was.
fn capped(v: &[u8]) -> (&[u8], bool) {
    if v.len() > MAX_FIELD {
        (&v[..MAX_FIELD], true)
    } else {
        (v, false)
    }
}

/// Apache's escaping: `"` and `\` are backslashed, other non-printables become `\xhh`, so
/// a request cannot forge log lines.
fn escape_apache(out: &mut Vec<u8>, v: &[u8]) {
    let (v, cut) = capped(v);
    escape_apache_whole(out, v);
    if cut {
        out.extend_from_slice(b"...");
    }
}

fn escape_apache_whole(out: &mut Vec<u8>, v: &[u8]) {
    // Most values need no escaping. A branch-free fold (no early exit) vectorizes, so
    // the common case is one pass and one copy.
    let dirty = v.iter().fold(false, |acc, &b| {
        acc | (b.wrapping_sub(0x20) > 0x5e) | (b == b'"') | (b == b'\\')
    });
    if !dirty {
        out.extend_from_slice(v);
        return;
    }
    for &b in v {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x20..=0x7e => out.push(b),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
}

fn escape_json(out: &mut Vec<u8>, v: &[u8]) {
    let (v, cut) = capped(v);
    for &b in v {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x20..=0x7e => out.push(b),
            // Control and non-ASCII bytes: escaped, so the line is valid JSON whatever came in.
            _ => {
                let _ = write!(out, "\\u{:04x}", b);
            }
        }
    }
    if cut {
        out.extend_from_slice(b"...");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record<'a>(ua: Option<&'a [u8]>) -> LogRecord<'a> {
        LogRecord {
            remote: IpAddr::from([192, 0, 2, 7]),
            method: "GET",
            target: b"/a b?\"x\"",
            version: "HTTP/1.1",
            status: 200,
            bytes: 1795,
            referer: None,
            user_agent: ua,
            duration_us: 42,
            first_byte_us: 7,
            vhost: "shop \"main\"",
            pool: None,
        }
    }

    #[test]
    fn addresses_are_written_as_display_writes_them() {
        for ip in [
            "192.0.2.7",
            "0.0.0.0",
            "255.255.255.255",
            "10.0.100.9",
            "2001:db8::1",
            "::1",
            "::ffff:192.0.2.7",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            let mut out = b"x".to_vec();
            push_ip(&mut out, ip);
            assert_eq!(out, format!("x{ip}").into_bytes(), "{ip}");
        }
    }

    #[test]
    fn combined_line_is_apache_shaped_and_escaped() {
        let mut out = Vec::new();
        format_combined(&mut out, &record(Some(b"curl/8\n\"evil\"")));
        let line = String::from_utf8(out).unwrap();
        let re_prefix = "192.0.2.7 - - [";
        assert!(line.starts_with(re_prefix), "{line}");
        assert!(
            line.contains(
                "] \"GET /a b?\\\"x\\\" HTTP/1.1\" 200 1795 \"-\" \"curl/8\\x0a\\\"evil\\\"\"\n"
            ),
            "{line}"
        );
        assert_eq!(line.matches('\n').count(), 1);
    }

    #[test]
    fn json_line_is_valid_and_escaped() {
        let mut out = Vec::new();
        format_json(&mut out, &record(Some(b"ua\x01")));
        let line = String::from_utf8(out).unwrap();
        assert!(line.contains("\"status\":200,\"bytes\":1795"), "{line}");
        assert!(
            line.contains("\"referer\":null,\"user_agent\":\"ua\\u0001\"}"),
            "{line}"
        );
        assert!(line.contains("\"target\":\"/a b?\\\"x\\\"\""), "{line}");
        assert!(
            line.contains("\"duration_us\":42,\"first_byte_us\":7,\"vhost\":\"shop \\\"main\\\"\",\"pool\":null,"),
            "{line}"
        );
        let mut out = Vec::new();
        format_json(
            &mut out,
            &LogRecord {
                pool: Some("php"),
                ..record(None)
            },
        );
        let line = String::from_utf8(out).unwrap();
        assert!(
            line.contains("\"pool\":\"php\",\"referer\":null,\"user_agent\":null}"),
            "{line}"
        );
    }

    #[test]
    fn a_long_field_is_cut_and_marked_in_both_formats() {
        let ua = vec![0xffu8; 16 * 1024];
        for (format, per_byte) in [
            (format_json as fn(&mut Vec<u8>, &LogRecord<'_>), 6),
            (format_combined, 4),
        ] {
            let mut out = Vec::new();
            format(&mut out, &record(Some(&ua)));
            assert!(
                out.len() < MAX_FIELD * per_byte + 512,
                "{} bytes for a 16 KiB field",
                out.len()
            );
            let line = String::from_utf8(out).unwrap();
            assert!(line.contains("...\""), "the cut is marked");
            assert_eq!(line.lines().count(), 1);
        }
    }
}
