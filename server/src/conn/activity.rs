//! What a hyper connection is doing: its requests in flight and when the last one ended,
//! so a connection that does nothing (HTTP/2 above all, which hyper never times out) is
//! closed and gives its permit back: after the header timeout if it never sent a
//! request, after the keep-alive timeout between requests. It also notices a peer that
//! takes no response data for the send timeout while holding streams open by never
//! granting HTTP/2 flow-control window (the socket stays writable, so the I/O-level send
//! deadline cannot see it).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

pub(super) struct Activity {
    opened: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds after `opened` when the last request ended; `u64::MAX`: none yet.
    last_ended_ms: AtomicU64,
    /// Per request in flight: since when (milliseconds after `opened`) its response
    /// waits for the peer to take it, or `NOT_WAITING`. One clock per stream, so a peer
    /// cannot keep one stream stalled by moving data on another.
    waiting: Mutex<Vec<Arc<AtomicU64>>>,
    /// Wakes the watcher when a frame waits while it sleeps toward an idle deadline,
    /// the one case where a deadline comes closer: a busy watcher wakes within the send
    /// timeout anyway, and a request's start or end only moves deadlines later.
    changed: Notify,
    /// The watcher sleeps toward an idle deadline (no request was in flight).
    watching_idle: AtomicBool,
}

/// Why the connection should be closed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    Idle,
    /// Response data waited the whole send timeout for the peer to take it.
    Stalled,
}

/// One request in flight on the connection, until dropped (with its response body).
pub(super) struct Busy {
    activity: Arc<Activity>,
    /// This request's entry in `Activity::waiting`.
    waiting_since: Arc<AtomicU64>,
    /// A body frame was handed to hyper and hyper has not asked for the next.
    handed: bool,
}

const NOT_WAITING: u64 = u64::MAX;

impl Activity {
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            last_ended_ms: AtomicU64::new(u64::MAX),
            waiting: Mutex::new(Vec::new()),
            changed: Notify::new(),
            watching_idle: AtomicBool::new(true),
        })
    }

    pub fn begin(self: &Arc<Self>) -> Busy {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        let waiting_since = Arc::new(AtomicU64::new(NOT_WAITING));
        self.waiting_list().push(waiting_since.clone());
        Busy {
            activity: self.clone(),
            waiting_since,
            handed: false,
        }
    }

    fn waiting_list(&self) -> std::sync::MutexGuard<'_, Vec<Arc<AtomicU64>>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ms(&self) -> u64 {
        self.opened.elapsed().as_millis() as u64
    }

    fn at(&self, ms: u64) -> Instant {
        self.opened + Duration::from_millis(ms)
    }

    /// Resolves once no request has been in flight for `between` (or, before the first
    /// request, for `before_first` since the connection opened), or once response data
    /// has waited `stall` for the peer to take it.
    pub async fn closes(
        &self,
        before_first: Duration,
        between: Duration,
        stall: Duration,
    ) -> Verdict {
        loop {
            let now = Instant::now();
            // Marked idle before looking, so a frame handed after the look wakes it.
            self.watching_idle.store(true, Ordering::Relaxed);
            let busy = self.in_flight.load(Ordering::Relaxed) > 0;
            if busy {
                self.watching_idle.store(false, Ordering::Relaxed);
            }
            // Busy, it looks again within the send timeout (a frame handed meanwhile
            // stalls no sooner) and within the keep-alive (a request's end starts it).
            let look_again = now + between.min(stall);
            let due = if busy {
                let oldest = self
                    .waiting_list()
                    .iter()
                    .map(|w| w.load(Ordering::Relaxed))
                    .min()
                    .unwrap_or(NOT_WAITING);
                if oldest != NOT_WAITING {
                    let due = self.at(oldest) + stall;
                    if now >= due {
                        return Verdict::Stalled;
                    }
                    due.min(look_again)
                } else {
                    look_again
                }
            } else {
                let due = match self.last_ended_ms.load(Ordering::Relaxed) {
                    u64::MAX => self.opened + before_first,
                    ms => self.at(ms) + between,
                };
                if now >= due {
                    return Verdict::Idle;
                }
                due
            };
            tokio::select! {
                () = tokio::time::sleep_until(due) => {}
                () = self.changed.notified() => {}
            }
        }
    }
}

impl Busy {
    /// A body frame went to hyper, which writes it once the peer has room for it.
    pub fn handed(&mut self) {
        if !self.handed {
            self.handed = true;
            let a = &self.activity;
            self.waiting_since.store(a.now_ms(), Ordering::Relaxed);
            if a.watching_idle.load(Ordering::Relaxed) {
                a.changed.notify_one();
            }
        }
    }

    /// The peer took part of what waits: the wait starts over (the deadline only moves
    /// later, so the watcher needs no wake-up).
    pub fn progressed(&mut self) {
        if self.handed {
            let now = self.activity.now_ms();
            self.waiting_since.store(now, Ordering::Relaxed);
        }
    }

    /// hyper came back for the next frame: the peer took the last one.
    pub fn taken(&mut self) {
        if self.handed {
            self.handed = false;
            self.waiting_since.store(NOT_WAITING, Ordering::Relaxed);
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.taken();
        let a = &self.activity;
        a.waiting_list()
            .retain(|w| !Arc::ptr_eq(w, &self.waiting_since));
        a.last_ended_ms.store(a.now_ms(), Ordering::Relaxed);
        // The watcher wakes within the keep-alive of the last look while busy, so it
        // finds the idle deadline this end starts in time: no wake-up per request.
        a.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_never_asks_is_idle_after_the_first_bound() {
        let a = Activity::new();
        let t0 = Instant::now();
        let verdict = a.closes(secs(10), secs(75), secs(30)).await;
        assert_eq!((verdict, t0.elapsed().as_secs()), (Verdict::Idle, 10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_keeps_it_open_and_its_end_starts_the_keepalive() {
        let a = Activity::new();
        let t0 = Instant::now();
        let busy = a.begin();
        let watch = {
            let a = a.clone();
            tokio::spawn(async move { a.closes(secs(10), secs(75), secs(30)).await })
        };
        tokio::time::sleep(Duration::from_secs(200)).await;
        assert!(!watch.is_finished(), "closed while a request was in flight");
        drop(busy);
        assert_eq!(watch.await.unwrap(), Verdict::Idle);
        let took = t0.elapsed().as_secs();
        assert!((275..=276).contains(&took), "closed after {took} s");
    }

    #[tokio::test(start_paused = true)]
    async fn a_frame_the_peer_never_takes_closes_the_connection_after_the_send_timeout() {
        let a = Activity::new();
        let mut busy = a.begin();
        tokio::time::sleep(secs(5)).await;
        busy.handed();
        let t0 = Instant::now();
        let verdict = a.closes(secs(10), secs(75), secs(30)).await;
        assert_eq!((verdict, t0.elapsed().as_secs()), (Verdict::Stalled, 30));
        // Taken in time, the stream is not stalled.
        busy.taken();
        let b = Activity::new();
        let mut slow = b.begin();
        slow.handed();
        let watch = {
            let b = b.clone();
            tokio::spawn(async move { b.closes(secs(10), secs(75), secs(30)).await })
        };
        tokio::time::sleep(secs(20)).await;
        slow.taken();
        slow.handed();
        tokio::time::sleep(secs(20)).await;
        assert!(
            !watch.is_finished(),
            "a peer taking data every 20 s was cut off"
        );
        drop(slow);
        assert_eq!(watch.await.unwrap(), Verdict::Idle);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_that_ends_while_waiting_starts_the_keepalive_not_the_stall() {
        let a = Activity::new();
        let mut busy = a.begin();
        busy.handed();
        let watch = {
            let a = a.clone();
            tokio::spawn(async move {
                let t0 = Instant::now();
                let verdict = a.closes(secs(10), secs(1), secs(30)).await;
                (verdict, t0.elapsed().as_secs())
            })
        };
        tokio::time::sleep(secs(2)).await;
        drop(busy);
        assert_eq!(watch.await.unwrap(), (Verdict::Idle, 3));
    }

    #[tokio::test(start_paused = true)]
    async fn data_moving_on_one_stream_does_not_hide_another_that_stalls() {
        let a = Activity::new();
        let mut stalled = a.begin();
        stalled.handed();
        let mut busy = a.begin();
        let watch = {
            let a = a.clone();
            tokio::spawn(async move {
                let t0 = Instant::now();
                let verdict = a.closes(secs(10), secs(75), secs(30)).await;
                (verdict, t0.elapsed().as_secs())
            })
        };
        // The other stream hands and takes a frame every 10 s.
        for _ in 0..5 {
            tokio::time::sleep(secs(10)).await;
            busy.handed();
            busy.taken();
        }
        assert_eq!(watch.await.unwrap(), (Verdict::Stalled, 30));
    }

    /// A request's start and end wake nobody (no wake-up per request under load), yet
    /// the deadlines hold: a frame handed while the watcher sleeps toward an idle
    /// deadline wakes it (its stall is due sooner), and a busy watcher finds the
    /// keep-alive that a request's end started in time.
    #[tokio::test(start_paused = true)]
    async fn deadlines_hold_without_a_wake_up_per_request() {
        let a = Activity::new();
        let watch = {
            let a = a.clone();
            tokio::spawn(async move {
                let t0 = Instant::now();
                let v = a.closes(secs(100), secs(75), secs(30)).await;
                (v, t0.elapsed().as_secs())
            })
        };
        tokio::time::sleep(secs(1)).await;
        let mut busy = a.begin();
        busy.handed();
        assert_eq!(watch.await.unwrap(), (Verdict::Stalled, 31));

        let b = Activity::new();
        let watch = {
            let b = b.clone();
            tokio::spawn(async move {
                let t0 = Instant::now();
                let v = b.closes(secs(10), secs(75), secs(30)).await;
                (v, t0.elapsed().as_secs())
            })
        };
        tokio::time::sleep(secs(1)).await;
        let long = b.begin();
        // Many short requests meanwhile, each handed and taken.
        for _ in 0..100 {
            let mut r = b.begin();
            r.handed();
            r.taken();
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        tokio::time::sleep(secs(49)).await;
        assert!(!watch.is_finished(), "closed with a request in flight");
        drop(long);
        // Ended at 100 s: idle 75 s later, not sooner and not much later.
        let (verdict, at) = watch.await.unwrap();
        assert_eq!(verdict, Verdict::Idle);
        assert!((175..=176).contains(&at), "closed at {at} s");
    }
}
