//! Room for new connections at `max_connections`, taken from idle ones across workers: an
//! accept loop with no permit left asks, and the first worker with an idle parked
//! connection closes it and hands its permit straight to the asker.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{oneshot, Notify, OwnedSemaphorePermit};

/// The waiting accept loops' asks and the workers' park sets that can meet them.
#[derive(Default)]
pub struct IdleReclaim {
    /// Oldest first. An ask whose receiver is gone (its connection got a permit another
    /// way) is skipped when met and pruned when another is made, so this holds at most
    /// one per waiting accept loop.
    asks: Mutex<VecDeque<oneshot::Sender<OwnedSemaphorePermit>>>,
    /// `asks.len()`, read without the lock by the park sets' tasks.
    queued: AtomicUsize,
    /// Each worker's park-set wake-up: `notify_one` keeps a permit, so no ask is missed
    /// by a set whose task is busy when it is made.
    wakes: Mutex<Vec<Arc<Notify>>>,
}

impl IdleReclaim {
    /// Registers a worker's park set, woken on every ask.
    pub fn register(&self, wake: Arc<Notify>) {
        lock(&self.wakes).push(wake);
    }

    /// Asks every worker for an idle connection's permit, which arrives on the receiver.
    /// Dropping the receiver withdraws the ask.
    pub fn ask(&self) -> oneshot::Receiver<OwnedSemaphorePermit> {
        let (tx, rx) = oneshot::channel();
        {
            let mut asks = lock(&self.asks);
            asks.retain(|ask| !ask.is_closed());
            asks.push_back(tx);
            self.queued.store(asks.len(), Ordering::Release);
        }
        for wake in lock(&self.wakes).iter() {
            wake.notify_one();
        }
        rx
    }

    /// Whether an ask may be waiting (one atomic load, on each turn of a park set's task).
    pub fn waiting(&self) -> bool {
        self.queued.load(Ordering::Acquire) > 0
    }

    /// Meets the open asks, oldest first, with permits from `make_room` (which closes an
    /// idle connection) until it has none or no ask is open. Returns how many were met.
    /// An ask stays queued, and `waiting` true, until a permit is in hand for it: taken
    /// out while a set that has nothing idle tries, it would hide from a set that has.
    pub fn meet(&self, mut make_room: impl FnMut() -> Option<OwnedSemaphorePermit>) -> usize {
        let mut met = 0;
        while self.any_open() {
            let Some(mut permit) = make_room() else {
                return met;
            };
            // Whoever asked first gets it. A waiter that left meanwhile hands it back, and
            // with no ask left (another set met it) it goes back to the semaphore.
            loop {
                let Some(ask) = self.next_open() else {
                    return met;
                };
                match ask.send(permit) {
                    Ok(()) => {
                        met += 1;
                        break;
                    }
                    Err(back) => permit = back,
                }
            }
        }
        met
    }

    /// Whether an ask is open, dropping the withdrawn ones ahead of it.
    fn any_open(&self) -> bool {
        let mut asks = lock(&self.asks);
        while asks.front().is_some_and(|ask| ask.is_closed()) {
            asks.pop_front();
        }
        self.queued.store(asks.len(), Ordering::Release);
        !asks.is_empty()
    }

    fn next_open(&self) -> Option<oneshot::Sender<OwnedSemaphorePermit>> {
        let mut asks = lock(&self.asks);
        let open = loop {
            match asks.pop_front() {
                Some(ask) if ask.is_closed() => continue,
                other => break other,
            }
        };
        self.queued.store(asks.len(), Ordering::Release);
        open
    }
}

/// A poisoned lock still holds a valid queue: a panic elsewhere must not stop admission.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::Semaphore;

    fn permit(s: &Arc<Semaphore>) -> OwnedSemaphorePermit {
        s.clone().try_acquire_owned().unwrap()
    }

    #[tokio::test]
    async fn an_ask_wakes_every_worker_and_gets_the_permit_it_is_handed() {
        let reclaim = IdleReclaim::default();
        let (a, b) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        reclaim.register(a.clone());
        reclaim.register(b.clone());
        let sem = Arc::new(Semaphore::new(1));
        let rx = reclaim.ask();
        assert!(reclaim.waiting());
        // notify_one kept a permit for each: both wake without having been waiting.
        a.notified().await;
        b.notified().await;
        // A worker with nothing idle keeps the ask open for the next.
        assert_eq!(reclaim.meet(|| None), 0);
        assert!(reclaim.waiting());
        assert_eq!(reclaim.meet(|| Some(permit(&sem))), 1);
        assert!(!reclaim.waiting());
        assert_eq!(sem.available_permits(), 0);
        drop(rx.await.expect("the permit handed over"));
        assert_eq!(sem.available_permits(), 1);
    }

    /// Two waiters, one met: the other's ask stays open whatever order they finish in
    /// (a shared count of asks could not tell which one a withdrawal was for).
    #[tokio::test]
    async fn each_ask_is_met_once_and_a_withdrawn_one_by_nobody() {
        let reclaim = IdleReclaim::default();
        let sem = Arc::new(Semaphore::new(3));
        let first = reclaim.ask();
        let second = reclaim.ask();
        // meet runs until no ask is open: both are met, each with its own permit.
        assert_eq!(reclaim.meet(|| Some(permit(&sem))), 2);
        assert_eq!(sem.available_permits(), 1);
        assert!(first.await.is_ok() && second.await.is_ok());
        // A withdrawn ask (its receiver dropped) takes no idle connection.
        drop(reclaim.ask());
        let mut closed = 0;
        assert_eq!(
            reclaim.meet(|| {
                closed += 1;
                Some(permit(&sem))
            }),
            0
        );
        assert_eq!(
            closed, 0,
            "an idle connection was closed for a withdrawn ask"
        );
        assert!(!reclaim.waiting());
    }

    /// A set with nothing idle that is trying an ask must not hide it from the others:
    /// one that looks meanwhile still sees it waiting, and meets it.
    #[tokio::test]
    async fn an_ask_stays_visible_while_a_set_with_nothing_idle_tries_it() {
        let reclaim = Arc::new(IdleReclaim::default());
        let sem = Arc::new(Semaphore::new(1));
        let rx = reclaim.ask();
        let trying = {
            let reclaim = reclaim.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    reclaim.meet(|| {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                        None
                    });
                }
            })
        };
        let mut looks = 0;
        while !trying.is_finished() {
            assert!(reclaim.waiting(), "the ask hid while another set tried it");
            looks += 1;
        }
        trying.join().unwrap();
        assert!(looks > 1_000, "looked only {looks} times");
        assert_eq!(reclaim.meet(|| Some(permit(&sem))), 1);
        assert!(rx.await.is_ok());
    }

    /// A permit sent to a waiter that has just gone returns to the semaphore.
    #[tokio::test]
    async fn a_permit_for_a_waiter_that_left_goes_back() {
        let reclaim = IdleReclaim::default();
        let sem = Arc::new(Semaphore::new(1));
        let mut rx = Some(reclaim.ask());
        let mut sent = false;
        let met = reclaim.meet(|| {
            if sent {
                return None;
            }
            sent = true;
            // The waiter leaves between the ask being taken and the permit sent.
            drop(rx.take());
            Some(permit(&sem))
        });
        assert_eq!(met, 0);
        assert_eq!(sem.available_permits(), 1);
    }
}
