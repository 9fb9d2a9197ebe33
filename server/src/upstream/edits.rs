//! A rule's changes to a backend's response: its `headers` (on 2xx and 3xx, as for
//! files), its `cache` policy where the backend said nothing about caching and the response
//! is one a cache may keep, and its CORS fields in place of the backend's.

use super::response::ResponseHead;
use http::{HeaderName, HeaderValue, StatusCode};

/// What a rule changes on every backend response it routes, compiled once.
pub struct ResponseEdits {
    /// Removed first: the rule's `remove` names and the names it sets.
    pub remove: Vec<HeaderName>,
    /// Then appended: the rule's `set` fields, then its `add` fields.
    pub append: Vec<(HeaderName, HeaderValue)>,
    /// Cache-Control and max-age in seconds, for the responses `cacheable` takes.
    pub cache: Option<(HeaderValue, u64)>,
}

impl ResponseEdits {
    /// Edits `head` of a response with `status` to a request that carried Authorization
    /// or not (`authorized`); `now` is the Unix time Date is read from.
    pub fn apply(&self, status: StatusCode, head: &mut ResponseHead, now: u64, authorized: bool) {
        // Not on errors (as for files), nor on a 101 that starts a tunnel.
        if !(200..400).contains(&status.as_u16()) {
            return;
        }
        for name in &self.remove {
            head.remove(name);
        }
        for (name, value) in &self.append {
            head.append(name, value);
        }
        if let Some((cache_control, max_age)) = &self.cache {
            // An answer to a request with credentials is the backend's to mark cacheable
            // (RFC 9111 §3.5): a policy here could let a shared cache hand it to anyone.
            if !authorized && cacheable(status, head) {
                head.append(&http::header::CACHE_CONTROL, cache_control);
                if let Some(expires) = crate::http::expires_after(now, *max_age) {
                    head.append(&http::header::EXPIRES, &expires);
                }
            }
        }
    }
}

/// Whether a rule's cache policy may go on a backend's response: one the backend gave no
/// policy of its own (it may mark a signed-in page private), with a status caches keep by
/// default but for 300 (so no 302 to a login page or 304 overriding what the backend said
/// on its 200), and no Set-Cookie (which a `public` policy would let shared caches keep).
fn cacheable(status: StatusCode, head: &ResponseHead) -> bool {
    matches!(status.as_u16(), 200 | 203 | 204 | 206 | 301 | 308)
        && !head.has(&http::header::CACHE_CONTROL)
        && !head.has(&http::header::EXPIRES)
        && !head.has(&http::header::SET_COOKIE)
}

/// The fields of an actual response that say which origins may read it.
const CORS_FIELDS: [HeaderName; 3] = [
    http::header::ACCESS_CONTROL_ALLOW_ORIGIN,
    http::header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
    http::header::ACCESS_CONTROL_EXPOSE_HEADERS,
];

/// With the rule's CORS (`Some`, the fields for this request's origin, maybe none): the
/// backend's own CORS fields go, so the rule's origins are the only ones that can read
/// the response, and the rule's fields are added (a `Vary` beside the backend's).
pub fn apply_cors(fields: Option<&[(HeaderName, HeaderValue)]>, head: &mut ResponseHead) {
    let Some(fields) = fields else {
        return;
    };
    for name in &CORS_FIELDS {
        head.remove(name);
    }
    for (name, value) in fields {
        head.append(name, value);
    }
}
