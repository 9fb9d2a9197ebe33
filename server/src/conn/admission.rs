//! What an accepted connection holds until it closes, in a task or parked: its place
//! under `max_connections`, the drain's counts of open connections, and the gauge.

use crate::shutdown::ConnectionGuard;
use crate::state::Shared;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::OwnedSemaphorePermit;

pub(crate) struct Admission {
    pub shared: Arc<Shared>,
    permit: Option<OwnedSemaphorePermit>,
    global: Option<ConnectionGuard>,
    /// This worker's open connections: the worker stops only once they are gone.
    local: Arc<AtomicUsize>,
}

impl Admission {
    pub fn new(
        shared: Arc<Shared>,
        permit: OwnedSemaphorePermit,
        local: &Arc<AtomicUsize>,
    ) -> Admission {
        let global = shared.shutdown.connection_opened();
        local.fetch_add(1, Ordering::AcqRel);
        shared.metrics.connections_open.inc();
        Admission {
            shared,
            permit: Some(permit),
            global: Some(global),
            local: local.clone(),
        }
    }
}

impl Admission {
    /// Takes the connection's permit, to hand to a new connection before this one closes
    /// (`park::close_longest_idle`): it then never goes back through the semaphore's queue.
    pub fn take_permit(&mut self) -> Option<OwnedSemaphorePermit> {
        self.permit.take()
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.shared.metrics.connections_open.dec();
        drop(self.permit.take());
        drop(self.global.take());
        // Last: the worker's drain ends when this reaches 0.
        self.local.fetch_sub(1, Ordering::AcqRel);
    }
}
