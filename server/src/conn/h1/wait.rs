//! Waiting between requests: for bytes, the connection's deadline, or the worker's stop.
//! The deadline's timer and the stop list keep the task's waker from the wait before, so
//! the wait that follows an answered request polls only the socket; they are polled again
//! when the task wakes for anything else, once the timer is reset, or once it has fired.

use super::super::stop_wait::StopWait;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;
use tokio::net::TcpStream;
use tokio::time::Sleep;

/// What ended a wait.
pub(super) enum Woke {
    /// The socket is readable (or has an error to report on the next read).
    Readable,
    /// The timer reached its instant (the caller checks which deadline that was).
    Deadline,
    /// The worker stops, and the connection waits with nothing buffered.
    Stop,
}

/// A connection's one timer, re-armed lazily.
pub(super) struct Deadline {
    sleep: Pin<Box<Sleep>>,
    /// The waker the timer holds, from its last poll since a reset (None before).
    holds: Option<Waker>,
}

impl Deadline {
    pub fn new(at: Instant) -> Deadline {
        Deadline {
            sleep: Box::pin(tokio::time::sleep_until(at.into())),
            holds: None,
        }
    }

    pub fn reset(&mut self, at: Instant) {
        self.sleep.as_mut().reset(at.into());
        // Polled again before a wait may rely on it.
        self.holds = None;
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        // Outside the task's budget: with the budget spent, a Sleep answers Pending without
        // taking the waker, and `holds` would then claim a waker the timer does not hold.
        let mut sleep = tokio::task::unconstrained(self.sleep.as_mut());
        match Pin::new(&mut sleep).poll(cx) {
            Poll::Ready(()) => {
                self.holds = None;
                Poll::Ready(())
            }
            Poll::Pending => {
                if !self.holds.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    self.holds = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }

    /// Whether the timer will wake this `waker` when it fires, and has not fired yet (it
    /// fires on this thread's driver, never during a poll).
    fn will_wake(&self, waker: &Waker) -> bool {
        self.holds.as_ref().is_some_and(|w| w.will_wake(waker)) && !self.sleep.is_elapsed()
    }
}

/// Waits for bytes, the deadline, or (when `idle`: nothing buffered) the worker's stop.
pub(super) async fn wait(
    tcp: &TcpStream,
    deadline: &mut Deadline,
    stop: &mut StopWait,
    idle: bool,
) -> io::Result<Woke> {
    let mut first = true;
    std::future::poll_fn(|cx| {
        // The stream's single reader slot, not `readable()`'s waiter list: one task reads
        // this socket, and the slot is cheaper to fill and to wake.
        if let Poll::Ready(r) = tcp.poll_read_ready(cx) {
            return Poll::Ready(r.map(|()| Woke::Readable));
        }
        let settled =
            first && deadline.will_wake(cx.waker()) && (!idle || stop.will_wake(cx.waker()));
        first = false;
        if settled {
            return Poll::Pending;
        }
        if deadline.poll(cx).is_ready() {
            return Poll::Ready(Ok(Woke::Deadline));
        }
        if idle && stop.poll(cx).is_ready() {
            return Poll::Ready(Ok(Woke::Stop));
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;

    use super::super::socket::tcp_pair;

    /// Waits with nothing buffered; the deadline must end the wait about `expected`
    /// after `began`.
    async fn deadline_ends_the_wait(
        server: &TcpStream,
        deadline: &mut Deadline,
        stop: &mut StopWait,
        began: Instant,
        expected: Duration,
    ) {
        let woke = tokio::time::timeout(Duration::from_secs(3), wait(server, deadline, stop, true))
            .await
            .expect("the deadline ended the wait")
            .unwrap();
        assert!(matches!(woke, Woke::Deadline));
        let at = began.elapsed();
        assert!(
            at >= expected && at < expected + Duration::from_millis(1500),
            "woke after {at:?}, expected {expected:?}"
        );
    }

    /// Reads what arrived until the socket is drained, which clears its readiness.
    fn drain(server: &TcpStream) {
        let mut buf = [0u8; 64];
        while server.try_read(&mut buf).is_ok_and(|n| n > 0) {}
    }

    /// A wait ended by bytes leaves the timer holding the task's waker; the next wait
    /// polls only the socket, and the timer still ends it (a reset one, at its new time).
    #[tokio::test(flavor = "current_thread")]
    async fn a_wait_that_polls_only_the_socket_still_ends_at_the_deadline() {
        for reset_between in [false, true] {
            let (server, mut client) = tcp_pair().await;
            let began = Instant::now();
            let mut deadline = Deadline::new(began + Duration::from_millis(400));
            let mut stop = StopWait::default();
            // As the connection does before it waits: read until the socket is drained.
            drain(&server);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                client.write_all(b"x").await.unwrap();
                // Kept open: the second wait must end by its deadline, not by EOF.
                tokio::time::sleep(Duration::from_secs(5)).await;
                drop(client);
            });
            let woke = wait(&server, &mut deadline, &mut stop, true).await.unwrap();
            assert!(matches!(woke, Woke::Readable));
            assert!(deadline.holds.is_some(), "the first wait polled the timer");
            drain(&server);
            let expected = if reset_between {
                deadline.reset(began + Duration::from_millis(150));
                Duration::from_millis(150)
            } else {
                Duration::from_millis(400)
            };
            deadline_ends_the_wait(&server, &mut deadline, &mut stop, began, expected).await;
        }
    }

    /// The timer fired while the task awaited something else, which took the wake: the
    /// next wait must see it at once (`is_elapsed`); and once reset, it must be polled
    /// again, for the fired timer's waker is gone.
    #[tokio::test(flavor = "current_thread")]
    async fn a_deadline_that_fired_between_waits_is_not_slept_through() {
        for reset_after in [false, true] {
            let (server, mut client) = tcp_pair().await;
            let began = Instant::now();
            let mut deadline = Deadline::new(began + Duration::from_millis(100));
            let mut stop = StopWait::default();
            drain(&server);
            client.write_all(b"x").await.unwrap();
            let woke = wait(&server, &mut deadline, &mut stop, true).await.unwrap();
            assert!(matches!(woke, Woke::Readable));
            assert!(deadline.holds.is_some(), "the wait polled the timer");
            drain(&server);
            // The deadline passes, and the driver fires it, while the task sleeps here.
            tokio::time::sleep(Duration::from_millis(250)).await;
            let now = Instant::now();
            let expected = if reset_after {
                deadline.reset(now + Duration::from_millis(200));
                now - began + Duration::from_millis(200)
            } else {
                now - began
            };
            deadline_ends_the_wait(&server, &mut deadline, &mut stop, began, expected).await;
            drop(client);
        }
    }
}
