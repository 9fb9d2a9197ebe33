//! A rule's changes to a backend's response: its `headers` and, where the backend said
//! nothing about caching, its `cache` policy (both on 2xx and 3xx, as for files), and the
//! CORS fields for the request's origin.

use super::response::ResponseHead;
use http::{HeaderName, HeaderValue, StatusCode};

/// What a rule changes on every backend response it routes, compiled once.
pub struct ResponseEdits {
    /// Removed first: the rule's `remove` names and the names it sets.
    pub remove: Vec<HeaderName>,
    /// Then appended: the rule's `set` fields, then its `add` fields.
    pub append: Vec<(HeaderName, HeaderValue)>,
    /// Cache-Control and max-age in seconds, for responses without Cache-Control or Expires.
    pub cache: Option<(HeaderValue, u64)>,
}

impl ResponseEdits {
    /// Edits `head` of a response with `status`; `now` is the Unix time Date is read from.
    pub fn apply(&self, status: StatusCode, head: &mut ResponseHead, now: u64) {
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
            // A backend's own policy wins: it may mark a signed-in page private.
            if !head.has(&http::header::CACHE_CONTROL) && !head.has(&http::header::EXPIRES) {
                head.append(&http::header::CACHE_CONTROL, cache_control);
                if let Some(expires) = crate::http::expires_after(now, *max_age) {
                    head.append(&http::header::EXPIRES, &expires);
                }
            }
        }
    }
}

/// Puts the rule's CORS fields on a response in place of any the backend sent for the
/// same names (two `Access-Control-Allow-Origin` fields fail the browser's check); a
/// `Vary` is added to the backend's.
pub fn apply_cors(fields: &[(HeaderName, HeaderValue)], head: &mut ResponseHead) {
    for (name, value) in fields {
        if name != http::header::VARY {
            head.remove(name);
        }
        head.append(name, value);
    }
}
