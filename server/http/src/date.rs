//! Per-thread caches of the current time as text, refreshed once a second: the Date
//! header and the access-log timestamp are formatted once per second, not per request.
//! The caller reads the clock (the server reads the kernel's coarse one, cheaper).

use std::cell::RefCell;
use std::time::{Duration, UNIX_EPOCH};

struct Clock {
    second: u64,
    http_date: String,
    log_date: String,
}

thread_local! {
    static CLOCK: RefCell<Clock> = const { RefCell::new(Clock { second: u64::MAX, http_date: String::new(), log_date: String::new() }) };
}

fn with_clock<R>(second: u64, f: impl FnOnce(&Clock) -> R) -> R {
    CLOCK.with(|c| {
        let mut clock = c.borrow_mut();
        if clock.second != second {
            clock.second = second;
            clock.http_date = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(second));
            clock.log_date = format_log_date(second);
        }
        f(&clock)
    })
}

/// The IMF-fixdate of a Unix second, e.g. `Sat, 21 Nov 2026 05:44:00 GMT`.
pub fn with_http_date<R>(second: u64, f: impl FnOnce(&str) -> R) -> R {
    with_clock(second, |c| f(&c.http_date))
}

/// The Apache log timestamp of a Unix second, e.g. `21/Nov/2026:05:44:00 +0000`.
pub fn with_log_date<R>(second: u64, f: impl FnOnce(&str) -> R) -> R {
    with_clock(second, |c| f(&c.log_date))
}

/// Formats a Unix second as Apache's `%d/%b/%Y:%H:%M:%S +0000`, from the IMF-fixdate fields.
fn format_log_date(second: u64) -> String {
    // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
    let imf = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(second));
    let f: Vec<&str> = imf.split(' ').collect();
    format!("{}/{}/{}:{} +0000", f[1], f[2], f[3], f[4])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_date_matches_apache_format() {
        assert_eq!(format_log_date(784111777), "06/Nov/1994:08:49:37 +0000");
        with_http_date(784111777, |d| {
            assert_eq!(d, "Sun, 06 Nov 1994 08:49:37 GMT")
        });
        // A new second is formatted anew, the old one not kept.
        with_http_date(784111778, |d| {
            assert_eq!(d, "Sun, 06 Nov 1994 08:49:38 GMT")
        });
        with_log_date(784111778, |d| assert_eq!(d, "06/Nov/1994:08:49:38 +0000"));
    }
}
