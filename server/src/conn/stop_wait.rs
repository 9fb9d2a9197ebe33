//! How a waiting HTTP/1.1 connection learns that the server stops: its waker sits in a
//! list of this worker's, updated in place between requests, and the worker wakes them
//! all once. A watch subscription per wait cost two locked list edits per request.
//! Workers are current-thread runtimes, so a `StopWait` stays on the thread whose list
//! holds its slot (checked in debug builds).

use crate::shutdown::stopping;
use std::cell::RefCell;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

struct Waiting {
    stopping: bool,
    wakers: Vec<Option<Waker>>,
    free: Vec<usize>,
}

thread_local! {
    static WAITING: RefCell<Waiting> = const {
        RefCell::new(Waiting { stopping: false, wakers: Vec::new(), free: Vec::new() })
    };
}

/// Starts this worker's watch: at `Phase::Stopping` every waiting connection is woken.
pub(super) fn start(shared: &Arc<crate::state::Shared>) {
    // Taken into use now, before startup's pages go back (see `conn::start_worker`).
    WAITING.with(|_| {});
    let mut phase = shared.shutdown.subscribe();
    tokio::spawn(async move {
        stopping(&mut phase).await;
        stop_waiting();
    });
}

/// Marks the worker as stopping and wakes the connections waiting on it.
fn stop_waiting() {
    let woken: Vec<Waker> = WAITING.with(|w| {
        let mut w = w.borrow_mut();
        w.stopping = true;
        w.wakers.iter_mut().filter_map(Option::take).collect()
    });
    woken.into_iter().for_each(Waker::wake);
}

/// Whether this worker has been told the server stops.
pub(super) fn stopping_now() -> bool {
    WAITING.with(|w| w.borrow().stopping)
}

/// One connection's place in the list, taken at its first wait, given back when dropped.
#[derive(Default)]
pub(super) struct StopWait {
    slot: Option<usize>,
    #[cfg(debug_assertions)]
    thread: Option<std::thread::ThreadId>,
}

impl StopWait {
    /// Ready once the worker stops; otherwise the task is woken then.
    pub fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        WAITING.with(|w| {
            let mut w = w.borrow_mut();
            if w.stopping {
                return Poll::Ready(());
            }
            #[cfg(debug_assertions)]
            debug_assert!(self.thread.is_none_or(|t| t == std::thread::current().id()));
            let slot = match self.slot {
                Some(s) => s,
                None => {
                    let s = w.free.pop().unwrap_or_else(|| {
                        w.wakers.push(None);
                        w.wakers.len() - 1
                    });
                    self.slot = Some(s);
                    #[cfg(debug_assertions)]
                    {
                        self.thread = Some(std::thread::current().id());
                    }
                    s
                }
            };
            match &mut w.wakers[slot] {
                Some(old) if old.will_wake(cx.waker()) => {}
                entry => *entry = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
    }
}

impl StopWait {
    /// Whether the worker's list holds `waker` for this wait, to be woken at the stop
    /// (which has not come yet).
    pub fn will_wake(&self, waker: &Waker) -> bool {
        let Some(slot) = self.slot else {
            return false;
        };
        WAITING.with(|w| {
            let w = w.borrow();
            !w.stopping && w.wakers[slot].as_ref().is_some_and(|h| h.will_wake(waker))
        })
    }
}

impl Drop for StopWait {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            // At thread exit the list may be gone already: nothing to give back then.
            let _ = WAITING.try_with(|w| {
                let mut w = w.borrow_mut();
                w.wakers[slot] = None;
                w.free.push(slot);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn waiting_connections_are_woken_once_when_the_worker_stops_and_slots_are_reused() {
        // A thread of its own: the list is per thread.
        std::thread::spawn(|| {
            let counts: Vec<Arc<Count>> = (0..4)
                .map(|_| Arc::new(Count(AtomicUsize::new(0))))
                .collect();
            let mut waits: Vec<StopWait> = (0..3).map(|_| StopWait::default()).collect();
            for (wait, count) in waits.iter_mut().zip(&counts[..3]) {
                let waker = Waker::from(count.clone());
                // Polled twice with the same waker: one slot, still pending.
                for _ in 0..2 {
                    assert!(wait.poll(&mut Context::from_waker(&waker)).is_pending());
                }
            }
            assert_eq!(WAITING.with(|w| w.borrow().wakers.len()), 3);
            // A connection that ends gives its slot, and no waker, to the next one.
            drop(waits.pop());
            let mut next = StopWait::default();
            let waker = Waker::from(counts[3].clone());
            assert!(next.poll(&mut Context::from_waker(&waker)).is_pending());
            assert_eq!(WAITING.with(|w| w.borrow().wakers.len()), 3);

            assert!(!stopping_now());
            stop_waiting();
            assert!(stopping_now());
            let woken: Vec<usize> = counts.iter().map(|c| c.0.load(Ordering::SeqCst)).collect();
            assert_eq!(
                woken,
                [1, 1, 0, 1],
                "each waiting connection woken once, the one that ended not at all"
            );
            for wait in waits.iter_mut().chain([&mut next]) {
                assert!(wait.poll(&mut Context::from_waker(&waker)).is_ready());
            }
            // One that starts waiting after the stop is ready at once.
            assert!(StopWait::default()
                .poll(&mut Context::from_waker(&waker))
                .is_ready());
        })
        .join()
        .unwrap();
    }
}
