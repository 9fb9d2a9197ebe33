//! A pool's endpoints and the policy for choosing one: balancing, passive health
//! (`max_fails` within `fail_timeout` takes an endpoint out for `fail_timeout`), and a bound
//! on requests in flight. No I/O: connections are `connection`'s, and names are resolved
//! again every `dns.refresh` by `dns::watch`; requests rotate over the addresses, so a
//! Kubernetes headless Service's changing pods are followed without any reload.

use skiff_config::{Balance, PoolProtocol};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// `host:port`, resolved on each connection.
    Tcp(String),
    Unix(PathBuf),
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Tcp(a) => f.write_str(a),
            Address::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

pub struct Endpoint {
    pub address: Address,
    /// Addresses of a `host:port` endpoint: fixed for an IP literal, refreshed from DNS for
    /// a name. Connections rotate over them; empty means "resolve on connect".
    addrs: arc_swap::ArcSwap<Vec<std::net::SocketAddr>>,
    rotate: AtomicUsize,
    /// Passive health of the resolved addresses of a name (a headless Service's pods), so
    /// one bad pod is skipped without taking the whole name out of rotation.
    addr_health: std::sync::Mutex<Vec<AddrHealth>>,
    /// The latest time any address of this endpoint stays down: while it is past, the
    /// rotation needs no lock.
    addr_down_until_ms: AtomicU64,
    fails: AtomicU32,
    first_fail_ms: AtomicU64,
    down_until_ms: AtomicU64,
    pub active: AtomicUsize,
}

#[derive(Debug, Clone, Copy)]
struct AddrHealth {
    addr: std::net::SocketAddr,
    fails: u32,
    first_fail_ms: u64,
    down_until_ms: u64,
}

pub struct Pool {
    /// Held only here: kept connections hold a weak reference, which tells them once a
    /// reload has retired this pool (and config generation).
    alive: Arc<()>,
    /// Idle FastCGI connections kept per worker and endpoint (0: no reuse).
    pub keepalive: usize,
    pub name: &'static str,
    pub protocol: PoolProtocol,
    pub endpoints: Vec<Endpoint>,
    balance: Balance,
    max_fails: u32,
    fail_timeout: Duration,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub send_timeout: Duration,
    pub max_body_size: u64,
    /// Forward header names with `_` (off: dropped, see the config field).
    pub underscores_in_headers: bool,
    max_active: usize,
    /// Worker processes per endpoint address, for `skiff_upstream_workers`.
    pub workers: Option<u32>,
    active: AtomicUsize,
    next: AtomicUsize,
    epoch: Instant,
    /// The pool's metric handles, taken on its first request.
    pub metrics: std::sync::OnceLock<crate::metrics::PoolMetrics>,
}

/// A slot among the pool's requests in flight; released on drop.
pub struct Slot<'p> {
    pool: &'p Pool,
    endpoint: Option<usize>,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.pool.active.fetch_sub(1, Ordering::AcqRel);
        if let Some(i) = self.endpoint {
            self.pool.endpoints[i].active.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Pool {
    pub fn from_config(p: &skiff_config::Pool, name: &'static str) -> Pool {
        Pool {
            alive: Arc::new(()),
            keepalive: p.keepalive,
            name,
            protocol: p.protocol,
            endpoints: p
                .endpoints
                .iter()
                .map(|e| Endpoint {
                    address: match e.strip_prefix("unix:") {
                        Some(path) => Address::Unix(PathBuf::from(path)),
                        None => Address::Tcp(e.clone()),
                    },
                    addrs: arc_swap::ArcSwap::from_pointee(
                        e.parse::<std::net::SocketAddr>()
                            .map(|a| vec![a])
                            .unwrap_or_default(),
                    ),
                    rotate: AtomicUsize::new(0),
                    addr_health: std::sync::Mutex::new(Vec::new()),
                    addr_down_until_ms: AtomicU64::new(0),
                    fails: AtomicU32::new(0),
                    first_fail_ms: AtomicU64::new(0),
                    down_until_ms: AtomicU64::new(0),
                    active: AtomicUsize::new(0),
                })
                .collect(),
            balance: p.balance,
            max_fails: p.max_fails,
            fail_timeout: p.fail_timeout,
            connect_timeout: p.connect_timeout,
            read_timeout: p.read_timeout,
            send_timeout: p.send_timeout,
            max_body_size: p.max_body_size,
            underscores_in_headers: p.underscores_in_headers,
            max_active: p.max_active_requests,
            workers: p.workers,
            active: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            epoch: Instant::now(),
            metrics: std::sync::OnceLock::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Takes a place among the requests in flight, or `None` when the pool is full.
    pub fn admit(&self) -> Option<Slot<'_>> {
        let prev = self.active.fetch_add(1, Ordering::AcqRel);
        let slot = Slot {
            pool: self,
            endpoint: None,
        };
        (prev < self.max_active).then_some(slot)
    }

    pub fn is_up(&self, i: usize) -> bool {
        // Never marked down (the usual case): no clock read.
        let until = self.endpoints[i].down_until_ms.load(Ordering::Relaxed);
        until == 0 || until <= self.now_ms()
    }

    /// Chooses an endpoint not in `tried`; endpoints marked down are used only if all are.
    /// Runs on every request, so it counts instead of collecting candidates.
    pub fn pick(&self, client: Option<IpAddr>, tried: &[usize]) -> Option<usize> {
        let n = self.endpoints.len();
        let any_up = (0..n).any(|i| !tried.contains(&i) && self.is_up(i));
        let eligible = |i: &usize| !tried.contains(i) && (!any_up || self.is_up(*i));
        let count = (0..n).filter(eligible).count();
        if count == 0 {
            return None;
        }
        let nth = |k: usize| (0..n).filter(eligible).nth(k);
        match self.balance {
            Balance::RoundRobin => nth(self.next.fetch_add(1, Ordering::Relaxed) % count),
            Balance::LeastConn => (0..n)
                .filter(eligible)
                .min_by_key(|&i| (self.endpoints[i].active.load(Ordering::Relaxed), i)),
            Balance::IpHash => {
                let h = client.map_or(0, |ip| {
                    use std::hash::{Hash, Hasher};
                    let mut s = std::collections::hash_map::DefaultHasher::new();
                    ip.hash(&mut s);
                    s.finish()
                });
                nth((h % count as u64) as usize)
            }
        }
    }

    pub fn assign(&self, slot: &mut Slot<'_>, i: usize) {
        if let Some(prev) = slot.endpoint.replace(i) {
            self.endpoints[prev].active.fetch_sub(1, Ordering::AcqRel);
        }
        self.endpoints[i].active.fetch_add(1, Ordering::AcqRel);
    }

    pub fn report_failure(&self, i: usize) {
        let e = &self.endpoints[i];
        let now = self.now_ms();
        let window = self.fail_timeout.as_millis() as u64;
        if now.saturating_sub(e.first_fail_ms.load(Ordering::Relaxed)) > window {
            e.first_fail_ms.store(now, Ordering::Relaxed);
            e.fails.store(0, Ordering::Relaxed);
        }
        if e.fails.fetch_add(1, Ordering::AcqRel) + 1 >= self.max_fails {
            e.down_until_ms.store(now + window, Ordering::Relaxed);
            e.fails.store(0, Ordering::Relaxed);
            tracing::warn!(pool = self.name, endpoint = %e.address, "endpoint marked down");
        }
    }

    /// A failure of endpoint `i` at the address that was dialed. When the endpoint is a
    /// name with several addresses, the address is taken out for `fail_timeout` after
    /// `max_fails`, and the endpoint itself only once all of its addresses are out.
    pub fn report_failure_at(&self, i: usize, addr: Option<std::net::SocketAddr>) {
        let e = &self.endpoints[i];
        let addrs = e.addrs.load();
        let Some(addr) = addr.filter(|_| addrs.len() > 1) else {
            return self.report_failure(i);
        };
        let now = self.now_ms();
        let window = self.fail_timeout.as_millis() as u64;
        let all_down = {
            let mut health = e.addr_health.lock().unwrap();
            health.retain(|h| addrs.contains(&h.addr));
            let h = match health.iter().position(|h| h.addr == addr) {
                Some(k) => &mut health[k],
                None => {
                    health.push(AddrHealth {
                        addr,
                        fails: 0,
                        first_fail_ms: now,
                        down_until_ms: 0,
                    });
                    health.last_mut().unwrap()
                }
            };
            if now.saturating_sub(h.first_fail_ms) > window {
                h.first_fail_ms = now;
                h.fails = 0;
            }
            h.fails += 1;
            if h.fails >= self.max_fails {
                h.down_until_ms = now + window;
                e.addr_down_until_ms
                    .fetch_max(now + window, Ordering::Relaxed);
                h.fails = 0;
                tracing::warn!(pool = self.name, endpoint = %e.address, address = %addr, "address marked down");
            }
            addrs
                .iter()
                .all(|a| health.iter().any(|h| h.addr == *a && h.down_until_ms > now))
        };
        if all_down {
            e.down_until_ms.store(now + window, Ordering::Relaxed);
            tracing::warn!(pool = self.name, endpoint = %e.address, "endpoint marked down: every address is down");
        }
    }

    /// Resolved addresses of endpoint `i` (none for a unix socket or an unresolved name),
    /// and how many of them are marked down.
    pub fn address_counts(&self, i: usize) -> (usize, usize) {
        let e = &self.endpoints[i];
        let addrs = e.addrs.load();
        let now = self.now_ms();
        let health = e.addr_health.lock().unwrap();
        let down = addrs
            .iter()
            .filter(|a| {
                health
                    .iter()
                    .any(|h| h.addr == **a && h.down_until_ms > now)
            })
            .count();
        (addrs.len(), down)
    }

    /// Endpoints up and down, a name counting as its resolved addresses (a headless
    /// Service's pods), for `skiff_upstream_endpoints`.
    pub fn endpoint_states(&self) -> (usize, usize) {
        let (mut up, mut down) = (0, 0);
        for i in 0..self.endpoints.len() {
            let (addrs, addrs_down) = self.address_counts(i);
            if !self.is_up(i) {
                down += addrs.max(1);
            } else if addrs > 1 {
                up += addrs - addrs_down;
                down += addrs_down;
            } else {
                up += 1;
            }
        }
        (up, down)
    }

    pub fn report_success(&self, i: usize) {
        self.endpoints[i].fails.store(0, Ordering::Relaxed);
    }

    /// Another resolved address of endpoint `i` (a name with several), in rotation, that
    /// is not in `dialed`: where a request goes after a connect failure before trying
    /// other endpoints. `None` when the name has one address or all were dialed.
    pub fn another_addr(
        &self,
        i: usize,
        dialed: &[std::net::SocketAddr],
    ) -> Option<std::net::SocketAddr> {
        let count = self.endpoints[i].addrs.load().len();
        if count < 2 {
            return None;
        }
        (0..count)
            .filter_map(|_| self.next_addr(i))
            .find(|a| !dialed.contains(a))
    }

    /// Names (not IP literals) among the endpoints, with their indices.
    pub(super) fn named_endpoints(&self) -> Vec<(usize, String, u16)> {
        self.endpoints
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match &e.address {
                Address::Tcp(a) if a.parse::<std::net::SocketAddr>().is_err() => {
                    let (host, port) = a.rsplit_once(':')?;
                    Some((i, host.to_owned(), port.parse().ok()?))
                }
                _ => None,
            })
            .collect()
    }

    /// Replaces the resolved addresses of endpoint `i`; whether they changed.
    pub(super) fn set_addrs(&self, i: usize, addrs: Vec<std::net::SocketAddr>) -> bool {
        let e = &self.endpoints[i];
        if **e.addrs.load() == addrs {
            return false;
        }
        e.addrs.store(std::sync::Arc::new(addrs));
        true
    }

    /// What identifies this pool (and config generation) among kept connections.
    pub(super) fn alive_token(&self) -> *const () {
        Arc::as_ptr(&self.alive)
    }

    /// A reference to this pool's liveness that does not keep it alive.
    pub(super) fn alive_weak(&self) -> std::sync::Weak<()> {
        Arc::downgrade(&self.alive)
    }

    /// The next address of endpoint `i` in rotation, if it has resolved ones, skipping
    /// addresses marked down while any other is up.
    pub fn next_addr(&self, i: usize) -> Option<std::net::SocketAddr> {
        let e = &self.endpoints[i];
        let addrs = e.addrs.load();
        if addrs.is_empty() {
            return None;
        }
        let start = e.rotate.fetch_add(1, Ordering::Relaxed);
        // Only a name with several addresses, one of them recently marked down, pays for
        // the lock.
        let now = if addrs.len() > 1 { self.now_ms() } else { 0 };
        if addrs.len() > 1 && e.addr_down_until_ms.load(Ordering::Relaxed) > now {
            let health = e.addr_health.lock().unwrap();
            let is_down = |a: &std::net::SocketAddr| {
                health.iter().any(|h| h.addr == *a && h.down_until_ms > now)
            };
            if let Some(up) = (0..addrs.len())
                .map(|k| addrs[(start + k) % addrs.len()])
                .find(|a| !is_down(a))
            {
                return Some(up);
            }
        }
        Some(addrs[start % addrs.len()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(balance: Balance, n: usize) -> Pool {
        let cfg = skiff_config::Pool {
            name: "p".into(),
            protocol: PoolProtocol::Http,
            endpoints: (0..n).map(|i| format!("127.0.0.1:{}", 1000 + i)).collect(),
            balance,
            max_fails: 2,
            fail_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(1),
            read_timeout: Duration::from_secs(1),
            send_timeout: Duration::from_secs(1),
            max_body_size: 1,
            max_active_requests: 2,
            keepalive: 0,
            workers: None,
            underscores_in_headers: false,
        };
        Pool::from_config(&cfg, "p")
    }

    #[test]
    fn round_robin_spreads_evenly() {
        let p = pool(Balance::RoundRobin, 3);
        let mut counts = [0; 3];
        for _ in 0..300 {
            counts[p.pick(None, &[]).unwrap()] += 1;
        }
        assert_eq!(counts, [100, 100, 100]);
    }

    #[test]
    fn least_conn_prefers_idle_endpoints() {
        let p = pool(Balance::LeastConn, 3);
        p.endpoints[0].active.store(5, Ordering::Relaxed);
        p.endpoints[1].active.store(1, Ordering::Relaxed);
        p.endpoints[2].active.store(3, Ordering::Relaxed);
        assert_eq!(p.pick(None, &[]), Some(1));
        assert_eq!(
            p.pick(None, &[1]),
            Some(2),
            "failover skips tried endpoints"
        );
    }

    #[test]
    fn ip_hash_is_sticky() {
        let p = pool(Balance::IpHash, 3);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let first = p.pick(Some(a), &[]);
        assert!((0..20).all(|_| p.pick(Some(a), &[]) == first));
    }

    #[test]
    fn failures_take_an_endpoint_out_of_rotation() {
        let p = pool(Balance::RoundRobin, 2);
        p.report_failure(0);
        assert!(p.is_up(0), "one failure of max_fails 2");
        p.report_failure(0);
        assert!(!p.is_up(0));
        assert!((0..10).all(|_| p.pick(None, &[]) == Some(1)));
        // With every endpoint down, the pool still tries rather than failing outright.
        p.report_failure(1);
        p.report_failure(1);
        assert!(p.pick(None, &[]).is_some());
    }

    #[test]
    fn a_bad_address_of_a_name_is_skipped_without_taking_the_name_down() {
        let p = pool(Balance::RoundRobin, 1);
        let (a, b): (std::net::SocketAddr, std::net::SocketAddr) = (
            "10.0.0.1:80".parse().unwrap(),
            "10.0.0.2:80".parse().unwrap(),
        );
        p.endpoints[0].addrs.store(std::sync::Arc::new(vec![a, b]));
        p.report_failure_at(0, Some(a));
        p.report_failure_at(0, Some(a)); // max_fails = 2
        assert!(p.is_up(0), "the name stays in rotation");
        assert_eq!(p.address_counts(0), (2, 1));
        for _ in 0..6 {
            assert_eq!(p.next_addr(0), Some(b), "the bad address is skipped");
        }
        p.report_failure_at(0, Some(b));
        p.report_failure_at(0, Some(b));
        assert!(!p.is_up(0), "all addresses down: the endpoint is down");
    }

    #[test]
    fn the_queue_is_bounded() {
        let p = pool(Balance::RoundRobin, 1);
        let a = p.admit();
        let b = p.admit();
        assert!(a.is_some() && b.is_some());
        assert!(
            p.admit().is_none(),
            "third request beyond max_active_requests 2"
        );
        drop(a);
        assert!(p.admit().is_some());
    }
}
