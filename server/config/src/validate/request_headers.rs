//! Checks of a proxy action's `request_headers`: names, templated values, and the fields
//! Skiff sets itself.

use super::fields::{framing_header, header_name_invalid, header_value_invalid};
use super::Checker;
use crate::model::RequestHeaders;
use crate::template::{Piece, Template};

/// Why a header the server manages cannot be set or added by a rule, if it is one.
fn managed_header(name: &str) -> Option<String> {
    if name.eq_ignore_ascii_case("host") {
        return Some("give the Host the backend sees with the proxy's `host`".into());
    }
    if name.eq_ignore_ascii_case("x-forwarded-for") {
        return Some(
            "Skiff appends the client's address to X-Forwarded-For; it may only be removed".into(),
        );
    }
    framing_header(name)
}

/// Fields a backend reads one value of: an added one beside Skiff's or the client's would
/// leave it to guess which counts.
const SINGLE_VALUED: [&str; 5] = [
    "x-forwarded-proto",
    "x-forwarded-host",
    "x-forwarded-port",
    "x-forwarded-prefix",
    "x-real-ip",
];

pub(super) fn check_request_headers(
    c: &mut Checker,
    at: &str,
    h: &RequestHeaders,
    captures: usize,
) {
    for (i, name) in h.remove.iter().enumerate() {
        let why = if header_name_invalid(name) {
            Some(format!("{name:?} is not a header name"))
        } else if name.eq_ignore_ascii_case("host") {
            Some(
                "a request needs a Host; give the one the backend sees with the proxy's `host`"
                    .into(),
            )
        } else {
            framing_header(name)
        };
        if let Some(why) = why {
            c.fail(format!("{at}.remove[{i}]"), why);
        }
    }
    // Names are case-insensitive: two spellings of one in `set` and `add` would leave
    // the outcome to the map's order.
    let mut seen: Vec<String> = Vec::new();
    for (kind, map) in [("set", &h.set), ("add", &h.add)] {
        for (name, value) in map {
            let path = format!("{at}.{kind}.{name}");
            if header_name_invalid(name) {
                c.fail(path, format!("{name:?} is not a header name"));
                continue;
            }
            if let Some(why) = managed_header(name) {
                c.fail(path, why);
                continue;
            }
            let lower = name.to_ascii_lowercase();
            if seen.contains(&lower) {
                c.fail(
                    path,
                    format!("{name:?} is named twice (names are case-insensitive); give it once"),
                );
                continue;
            }
            seen.push(lower);
            if kind == "add" && SINGLE_VALUED.iter().any(|f| f.eq_ignore_ascii_case(name)) {
                c.fail(path, format!("a backend reads one {name}; use `set`"));
                continue;
            }
            match Template::parse_header(value, captures) {
                Err(e) => c.fail(path, e),
                Ok(t) => {
                    let literal_invalid = t.pieces.iter().any(|p| match p {
                        Piece::Literal(s) => header_value_invalid(s),
                        _ => false,
                    });
                    if literal_invalid {
                        c.fail(
                            path,
                            "not a valid header value: it holds a control character",
                        );
                    }
                }
            }
        }
    }
}
