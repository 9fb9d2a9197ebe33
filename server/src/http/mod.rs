//! HTTP pieces the handlers share: the reply they build here, and the I/O-free semantics
//! of the `skiff-http` crate under their usual names.
pub mod reply;

pub use skiff_http::{conditional, date, encoding, range, request, text};

/// A response body as hyper takes it, whatever made it (a reply, a backend).
pub type BoxedBody = http_body_util::combinators::BoxBody<bytes::Bytes, std::io::Error>;

/// 9999-12-31T23:59:59Z, the last moment an HTTP date can name.
pub const LAST_HTTP_DATE: u64 = 253_402_300_799;

/// The Expires value `max_age` seconds after `now` (Unix seconds), or none past year 9999,
/// which an HTTP date cannot write.
pub fn expires_after(now: u64, max_age: u64) -> Option<http::HeaderValue> {
    let expires = now.saturating_add(max_age);
    if expires > LAST_HTTP_DATE {
        return None;
    }
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(expires);
    http::HeaderValue::from_str(&httpdate::fmt_http_date(at)).ok()
}
