//! Per-rule modifiers: who may ask (address lists, rate limits; basic auth is in
//! `basic_auth`), and what the response carries (CORS, headers, caching).

use crate::http::reply::Reply;
use crate::http::request::RequestHead;
use http::header::{HeaderName, HeaderValue};
use http::StatusCode;
use ipnet::IpNet;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

/// The client's address: the peer, or, when the peer is a trusted proxy, the right-most
/// `X-Forwarded-For` entry that is not itself a trusted proxy.
pub fn client_ip(req: &RequestHead<'_>, trusted: &[IpNet]) -> Option<IpAddr> {
    let peer = req.peer?;
    if trusted.is_empty() || !trusted.iter().any(|n| n.contains(&peer)) {
        return Some(peer);
    }
    // Every X-Forwarded-For line, in order: a proxy that appends its own line leaves the
    // client's first line, which the client controls, on the left.
    let lines = req.headers.all("x-forwarded-for");
    let mut client = peer;
    for line in lines.iter().rev() {
        let Ok(text) = std::str::from_utf8(line) else {
            return Some(client);
        };
        for part in text.rsplit(',') {
            // Some balancers append `ip:port` (or `[v6]:port`).
            let part = part.trim();
            let Some(ip) = part
                .parse::<IpAddr>()
                .ok()
                .or_else(|| part.parse::<std::net::SocketAddr>().ok().map(|a| a.ip()))
            else {
                return Some(client); // garbage: stop trusting the chain here
            };
            client = ip;
            if !trusted.iter().any(|n| n.contains(&ip)) {
                return Some(client);
            }
        }
    }
    Some(client)
}

pub struct AccessList {
    pub allow: Vec<IpNet>,
    pub deny: Vec<IpNet>,
    pub status: StatusCode,
}

impl AccessList {
    pub fn permits(&self, ip: Option<IpAddr>) -> bool {
        let Some(ip) = ip else {
            return self.allow.is_empty() && self.deny.is_empty();
        };
        if self.deny.iter().any(|n| n.contains(&ip)) {
            return false;
        }
        self.allow.is_empty() || self.allow.iter().any(|n| n.contains(&ip))
    }
}

/// The bucket an address counts against: IPv6 clients by their /64, since one host
/// commonly holds a whole /64 and could otherwise rotate through it for fresh buckets (and
/// grow the map without end).
fn bucket_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none() => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
        other => other,
    }
}

/// A token bucket per client address.
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

const MAX_TRACKED_CLIENTS: usize = 100_000;

impl RateLimiter {
    pub fn new(rate: f64, burst: u32) -> RateLimiter {
        RateLimiter {
            rate,
            burst: burst as f64,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes a token, or says how many seconds until one is available.
    pub fn check(&self, ip: IpAddr) -> Result<(), u64> {
        let ip = bucket_key(ip);
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_TRACKED_CLIENTS && !buckets.contains_key(&ip) {
            // Full buckets carry no state worth keeping.
            let (rate, burst) = (self.rate, self.burst);
            buckets.retain(|_, (tokens, at)| {
                *tokens + now.duration_since(*at).as_secs_f64() * rate < burst
            });
            if buckets.len() >= MAX_TRACKED_CLIENTS / 10 * 9 {
                // Still nearly full (a slow rate, many clients): half are forgotten, and
                // start again with a full bucket like a client never seen. Each pass then
                // buys a tenth of the map's inserts, so no request scans it every time.
                let mut keep = false;
                buckets.retain(|_, _| {
                    keep = !keep;
                    keep
                });
            }
        }
        let (tokens, at) = buckets.entry(ip).or_insert((self.burst, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * self.rate).min(self.burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - *tokens) / self.rate).ceil().max(1.0) as u64)
        }
    }
}

pub struct Cors {
    pub any_origin: bool,
    pub origins: Vec<String>,
    pub allow_methods: HeaderValue,
    pub allow_headers: Option<HeaderValue>,
    pub expose_headers: Option<HeaderValue>,
    pub credentials: bool,
    pub max_age: Option<HeaderValue>,
}

impl Cors {
    fn allowed_origin(&self, origin: &[u8]) -> bool {
        self.any_origin || self.origins.iter().any(|o| o.as_bytes() == origin)
    }

    /// A preflight answer, when this request is one.
    pub fn preflight(&self, req: &RequestHead<'_>) -> Option<Reply> {
        if req.method != http::Method::OPTIONS {
            return None;
        }
        let origin = req.headers.get("origin")?;
        req.headers.get("access-control-request-method")?;
        let mut r = Reply::new(StatusCode::NO_CONTENT);
        self.push_vary(&mut r.headers);
        if self.allowed_origin(origin) {
            self.push_origin(&mut r.headers, origin);
            r.headers.push((
                http::header::ACCESS_CONTROL_ALLOW_METHODS,
                self.allow_methods.clone(),
            ));
            if let Some(h) = &self.allow_headers {
                r.headers
                    .push((http::header::ACCESS_CONTROL_ALLOW_HEADERS, h.clone()));
            }
            if let Some(m) = &self.max_age {
                r.headers
                    .push((http::header::ACCESS_CONTROL_MAX_AGE, m.clone()));
            }
        }
        Some(r)
    }

    /// Adds the CORS headers of an actual (non-preflight) response, in place of any the
    /// rule's `headers` set (two Access-Control-Allow-Origin fields fail the browser's check).
    pub fn decorate(&self, req: &RequestHead<'_>, r: &mut Reply) {
        r.headers.retain(|(n, _)| {
            n != http::header::ACCESS_CONTROL_ALLOW_ORIGIN
                && n != http::header::ACCESS_CONTROL_ALLOW_CREDENTIALS
                && n != http::header::ACCESS_CONTROL_EXPOSE_HEADERS
        });
        self.decorate_fields(req, &mut r.headers);
    }

    /// The CORS fields of an actual response, pushed onto `fields`.
    pub fn decorate_fields(
        &self,
        req: &RequestHead<'_>,
        fields: &mut Vec<(HeaderName, HeaderValue)>,
    ) {
        self.push_vary(fields);
        // `*` whatever the request, so a cached answer serves every origin (Fetch, "CORS
        // protocol and HTTP caches").
        let origin = match req.headers.get("origin") {
            _ if self.any_origin && !self.credentials => &b"*"[..],
            Some(origin) if self.allowed_origin(origin) => origin,
            _ => return,
        };
        self.push_origin(fields, origin);
        if let Some(h) = &self.expose_headers {
            fields.push((http::header::ACCESS_CONTROL_EXPOSE_HEADERS, h.clone()));
        }
    }

    /// `Vary: Origin` on every response of a policy that answers origins differently, also
    /// those without an Origin or with one refused: a cache must not hand one origin's
    /// answer to another.
    fn push_vary(&self, fields: &mut Vec<(HeaderName, HeaderValue)>) {
        if !self.any_origin || self.credentials {
            fields.push((http::header::VARY, HeaderValue::from_static("Origin")));
        }
    }

    fn push_origin(&self, fields: &mut Vec<(HeaderName, HeaderValue)>, origin: &[u8]) {
        if self.any_origin && !self.credentials {
            fields.push((
                http::header::ACCESS_CONTROL_ALLOW_ORIGIN,
                HeaderValue::from_static("*"),
            ));
        } else if let Ok(v) = HeaderValue::from_bytes(origin) {
            fields.push((http::header::ACCESS_CONTROL_ALLOW_ORIGIN, v));
        }
        if self.credentials {
            fields.push((
                http::header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            ));
        }
    }
}

/// Response header changes.
pub struct HeaderOps {
    pub remove: Vec<HeaderName>,
    pub set: Vec<(HeaderName, HeaderValue)>,
    pub add: Vec<(HeaderName, HeaderValue)>,
}

impl HeaderOps {
    pub fn apply(&self, r: &mut Reply) {
        if !self.remove.is_empty() || !self.set.is_empty() {
            materialize(r);
            r.headers
                .retain(|(n, _)| !self.remove.contains(n) && !self.set.iter().any(|(s, _)| s == n));
        }
        r.headers.extend(self.set.iter().cloned());
        r.headers.extend(self.add.iter().cloned());
    }
}

/// Browser caching.
pub struct CachePolicy {
    pub cache_control: HeaderValue,
    pub max_age: u64,
}

impl CachePolicy {
    pub fn apply(&self, r: &mut Reply) {
        materialize(r);
        r.headers
            .retain(|(n, _)| n != http::header::CACHE_CONTROL && n != http::header::EXPIRES);
        r.headers
            .push((http::header::CACHE_CONTROL, self.cache_control.clone()));
        // The clock Date is read from, so Expires - Date is max-age exactly.
        let now = crate::coarse_clock::unix_seconds();
        if let Some(v) = crate::http::expires_after(now, self.max_age) {
            r.headers.push((http::header::EXPIRES, v));
        }
    }
}

/// Moves shared (prebuilt) headers into the reply's own list so they can be changed.
fn materialize(r: &mut Reply) {
    if let Some(shared) = r.shared_head.take() {
        let mut own = shared.fields.clone();
        own.append(&mut r.headers);
        r.headers = own;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request::HeaderSource;

    fn req_with<'a>(peer: &str, headers: &'a [httparse::Header<'a>]) -> RequestHead<'a> {
        RequestHead {
            peer: Some(peer.parse().unwrap()),
            headers: HeaderSource::H1(headers),
            ..Default::default()
        }
    }

    #[test]
    fn forwarded_for_is_believed_only_from_trusted_proxies() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let h = [httparse::Header {
            name: "X-Forwarded-For",
            value: b"203.0.113.9, 198.51.100.1, 10.1.1.1",
        }];
        assert_eq!(
            client_ip(&req_with("10.0.0.2", &h), &trusted),
            Some("198.51.100.1".parse().unwrap())
        );
        assert_eq!(
            client_ip(&req_with("192.0.2.1", &h), &trusted),
            Some("192.0.2.1".parse().unwrap())
        );
        let bad = [httparse::Header {
            name: "X-Forwarded-For",
            value: b"garbage",
        }];
        assert_eq!(
            client_ip(&req_with("10.0.0.2", &bad), &trusted),
            Some("10.0.0.2".parse().unwrap())
        );
    }

    #[test]
    fn every_forwarded_for_line_counts_and_the_rightmost_untrusted_address_wins() {
        // The client sent the first line; the trusted proxy appended the second.
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let two_lines = [
            httparse::Header {
                name: "X-Forwarded-For",
                value: b"10.1.1.1",
            },
            httparse::Header {
                name: "x-forwarded-for",
                value: b"203.0.113.5",
            },
        ];
        let one_line = [httparse::Header {
            name: "X-Forwarded-For",
            value: b"10.1.1.1, 203.0.113.5",
        }];
        for h in [&two_lines[..], &one_line[..]] {
            assert_eq!(
                client_ip(&req_with("10.0.0.2", h), &trusted),
                Some("203.0.113.5".parse().unwrap())
            );
        }
        // Trusted hops are walked back across lines.
        let hops = [
            httparse::Header {
                name: "X-Forwarded-For",
                value: b"198.51.100.7",
            },
            httparse::Header {
                name: "X-Forwarded-For",
                value: b"10.9.9.9",
            },
        ];
        assert_eq!(
            client_ip(&req_with("10.0.0.2", &hops), &trusted),
            Some("198.51.100.7".parse().unwrap())
        );
        // An entry a balancer wrote as ip:port is still an address.
        let with_port = [httparse::Header {
            name: "X-Forwarded-For",
            value: b"203.0.113.5:41234",
        }];
        assert_eq!(
            client_ip(&req_with("10.0.0.2", &with_port), &trusted),
            Some("203.0.113.5".parse().unwrap())
        );
    }

    #[test]
    fn token_bucket_allows_a_burst_then_refuses_with_retry_after() {
        let rl = RateLimiter::new(1.0, 3);
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        assert!(rl.check(ip).is_ok() && rl.check(ip).is_ok() && rl.check(ip).is_ok());
        assert_eq!(rl.check(ip), Err(1));
        assert!(
            rl.check("192.0.2.2".parse().unwrap()).is_ok(),
            "buckets are per client"
        );
        // An IPv6 host rotating through its /64 shares one bucket.
        let rl = RateLimiter::new(1.0, 1);
        assert!(rl.check("2001:db8:1:2::1".parse().unwrap()).is_ok());
        assert_eq!(rl.check("2001:db8:1:2::ffff".parse().unwrap()), Err(1));
        assert!(rl.check("2001:db8:1:3::1".parse().unwrap()).is_ok());
    }

    #[test]
    fn a_max_age_past_what_an_http_date_can_name_gives_no_expires_and_no_panic() {
        let reply = |max_age| {
            let mut r = Reply::new(http::StatusCode::OK);
            CachePolicy {
                cache_control: HeaderValue::from_static("max-age=1"),
                max_age,
            }
            .apply(&mut r);
            r.headers.iter().any(|(n, _)| n == http::header::EXPIRES)
        };
        assert!(reply(3600), "an hour");
        assert!(!reply(u64::MAX), "max-age past year 9999");
        assert!(
            !reply(crate::http::LAST_HTTP_DATE),
            "max-age past year 9999"
        );
    }

    #[test]
    fn many_clients_at_a_slow_rate_keep_the_map_bounded() {
        // One request a minute allowed: no bucket refills within the test, so sweeping
        // full ones frees nothing, and the map must still stay bounded (and inserts
        // cheap: a scan per new client would take minutes here).
        let rl = RateLimiter::new(1.0 / 60.0, 1);
        for i in 0..(MAX_TRACKED_CLIENTS as u32 * 3) {
            let ip = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            assert!(rl.check(ip).is_ok(), "a new client has its burst");
        }
        let tracked = rl.buckets.lock().unwrap().len();
        assert!(tracked <= MAX_TRACKED_CLIENTS, "{tracked} clients tracked");
        // The latest client is remembered: its second request waits.
        let last = IpAddr::V4(std::net::Ipv4Addr::from(
            0x0a00_0000 + MAX_TRACKED_CLIENTS as u32 * 3 - 1,
        ));
        assert_eq!(rl.check(last), Err(60));
    }

    #[test]
    fn cors_fields_replace_the_rules_own_and_caches_keep_origins_apart() {
        let cors = |any_origin: bool| Cors {
            any_origin,
            origins: vec!["https://app.example".into()],
            allow_methods: HeaderValue::from_static("GET"),
            allow_headers: None,
            expose_headers: None,
            credentials: false,
            max_age: None,
        };
        let fields = |c: &Cors, origin: Option<&'static str>| {
            let sent = origin.map(|o| httparse::Header {
                name: "Origin",
                value: o.as_bytes(),
            });
            let sent: Vec<_> = sent.into_iter().collect();
            let mut r = Reply::new(StatusCode::OK);
            r.headers.push((
                http::header::ACCESS_CONTROL_ALLOW_ORIGIN,
                HeaderValue::from_static("https://set.by.headers"),
            ));
            c.decorate(&req_with("10.0.0.1", &sent), &mut r);
            r.headers
                .iter()
                .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap()))
                .collect::<Vec<_>>()
        };
        let listed = cors(false);
        assert_eq!(
            fields(&listed, Some("https://app.example")),
            [
                "vary: Origin",
                "access-control-allow-origin: https://app.example"
            ]
        );
        assert_eq!(
            fields(&listed, Some("https://evil.example")),
            ["vary: Origin"]
        );
        assert_eq!(fields(&listed, None), ["vary: Origin"]);
        // `*` is the same answer for every origin: sent without an Origin too, no Vary.
        let any = cors(true);
        for origin in [None, Some("https://evil.example")] {
            assert_eq!(fields(&any, origin), ["access-control-allow-origin: *"]);
        }
    }
}
