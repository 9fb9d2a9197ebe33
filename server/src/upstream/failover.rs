//! The endpoint and address order a request tries when connecting fails: first the other
//! resolved addresses of the same name (a headless Service's other pods), then the other
//! endpoints. One iterator for every protocol: the CGI exchanges and the HTTP proxy.

use super::pool::{Pool, Slot};
use std::net::{IpAddr, SocketAddr};

/// Walks a pool's endpoints for one request, in the order connections are tried.
pub struct Failover<'p> {
    pool: &'p Pool,
    client: IpAddr,
    /// Endpoints given up on. Filled only on failures: the usual request allocates nothing.
    tried: Vec<usize>,
    /// Addresses of the current endpoint already dialed.
    dialed: Vec<SocketAddr>,
    current: Option<(usize, Option<SocketAddr>)>,
}

impl<'p> Failover<'p> {
    pub fn new(pool: &'p Pool, client: IpAddr) -> Failover<'p> {
        Failover {
            pool,
            client,
            tried: Vec::new(),
            dialed: Vec::new(),
            current: None,
        }
    }

    /// The next endpoint and address to dial (`None` for the address: dial the name),
    /// assigning the request's slot to it; `None` when nothing is left. The first call
    /// picks by the pool's balancing; each later one means the previous dial failed.
    pub fn next(&mut self, slot: &mut Slot<'_>) -> Option<(usize, Option<SocketAddr>)> {
        if let Some((i, addr)) = self.current.take() {
            // The same name again, at one of its other resolved addresses.
            if let Some(addr) = addr {
                self.dialed.push(addr);
                if let Some(next) = self.pool.another_addr(i, &self.dialed) {
                    self.current = Some((i, Some(next)));
                    return self.current;
                }
            }
            self.tried.push(i);
        }
        let i = self.pool.pick(Some(self.client), &self.tried)?;
        self.pool.assign(slot, i);
        self.dialed.clear();
        // Dial the resolved address in rotation (a headless Service's pods), not the name.
        self.current = Some((i, self.pool.next_addr(i)));
        self.current
    }
}
