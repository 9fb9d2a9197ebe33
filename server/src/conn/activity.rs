//! What a hyper connection is doing: its requests in flight and when the last one ended,
//! so a connection that does nothing (HTTP/2 above all, which hyper never times out) is
//! closed and gives its permit back: after the header timeout if it never sent a
//! request, after the keep-alive timeout between requests.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

pub(super) struct Activity {
    opened: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds after `opened` when the last request ended; `u64::MAX`: none yet.
    last_ended_ms: AtomicU64,
}

/// One request in flight on the connection, until dropped (with its response body).
pub(super) struct Busy(Arc<Activity>);

impl Activity {
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            last_ended_ms: AtomicU64::new(u64::MAX),
        })
    }

    pub fn begin(self: &Arc<Self>) -> Busy {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        Busy(self.clone())
    }

    /// Resolves once no request has been in flight for `between` (or, before the first
    /// request, for `before_first` since the connection opened).
    pub async fn idle(&self, before_first: Duration, between: Duration) {
        loop {
            let due = if self.in_flight.load(Ordering::Relaxed) > 0 {
                // Busy: look again after a while; a request's end moves the deadline.
                Instant::now() + between
            } else {
                match self.last_ended_ms.load(Ordering::Relaxed) {
                    u64::MAX => self.opened + before_first,
                    ms => self.opened + Duration::from_millis(ms) + between,
                }
            };
            if Instant::now() >= due && self.in_flight.load(Ordering::Relaxed) == 0 {
                return;
            }
            tokio::time::sleep_until(due).await;
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let ms = self.0.opened.elapsed().as_millis() as u64;
        self.0.last_ended_ms.store(ms, Ordering::Relaxed);
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_never_asks_is_idle_after_the_first_bound() {
        let a = Activity::new();
        let t0 = Instant::now();
        a.idle(Duration::from_secs(10), Duration::from_secs(75))
            .await;
        assert_eq!(t0.elapsed().as_secs(), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_keeps_it_open_and_its_end_starts_the_keepalive() {
        let a = Activity::new();
        let t0 = Instant::now();
        let busy = a.begin();
        let watch = {
            let a = a.clone();
            tokio::spawn(async move {
                a.idle(Duration::from_secs(10), Duration::from_secs(75))
                    .await
            })
        };
        tokio::time::sleep(Duration::from_secs(200)).await;
        assert!(!watch.is_finished(), "closed while a request was in flight");
        drop(busy);
        watch.await.unwrap();
        let took = t0.elapsed().as_secs();
        assert!((275..=276).contains(&took), "closed after {took} s");
    }
}
