//! Idle keep-alive connections parked out of their tasks: a plain HTTP/1.1 connection
//! silent for `PARK_AFTER` gives up its task, its tokio registration and its timer for a
//! slot in its worker's own epoll set, and a new task serves it once it is readable
//! again. A task with its registration and timer takes about 2 KB; a parked connection
//! takes its slot and its deadline's entry: about 300 bytes measured with 10,000 (nginx about 500).
//! At the connection limit the longest-idle parked connection is closed to admit a new
//! one, as nginx does with idle keep-alive connections.

use super::admission::Admission;
use rustix::buffer::spare_capacity;
use rustix::event::epoll;
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::{Notify, OwnedSemaphorePermit};

/// Silence after which a connection is parked. Requests of one page load follow each
/// other within milliseconds; past this the client waits on its user, and parking and
/// resuming (four epoll_ctl calls and a spawn, a few microseconds) are paid once a pause.
pub(crate) const PARK_AFTER: Duration = Duration::from_millis(250);

/// Events taken per epoll_wait.
const EVENTS_PER_WAIT: usize = 64;

/// Parked in a burst, this many connections' tasks have been freed: their memory goes
/// back to the OS `COLLECT_AFTER` after the burst, not at the allocator's leisure.
const COLLECT_BURST: usize = 64;
const COLLECT_AFTER: Duration = Duration::from_millis(100);

/// A connection waiting in the set, as it is handed back when readable.
pub(crate) struct Parked {
    pub stream: std::net::TcpStream,
    pub peer: SocketAddr,
    pub local_port: u16,
    /// Its last request's time: the keep-alive deadline runs from it, through resumes
    /// that bring no request.
    pub last_request: Instant,
    pub admission: Admission,
}

/// A slot; `gen` tells a reused slot from the one an event or deadline was meant for.
struct Slot {
    gen: u32,
    conn: Option<Parked>,
}

/// One worker's parked connections.
struct Set {
    epoll: OwnedFd,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Keep-alive deadlines, earliest first: (when, slot, gen).
    deadlines: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    /// The deadline the set's task sleeps until, if any.
    armed: Option<Instant>,
    /// Wakes the set's task for a deadline earlier than the armed one.
    wake: Arc<Notify>,
    /// Set once the server stops: connections are then closed, not parked.
    stopping: bool,
    /// Connections in the set.
    parked: usize,
    /// Parked since memory was last given back.
    since_collect: usize,
    /// epoll_wait's output, kept here: epoll events are not Send, so not in the task.
    events: Vec<epoll::Event>,
    /// Serves a connection that became readable (a request, or the peer closing).
    resume: fn(Parked),
}

thread_local! {
    static SET: RefCell<Option<Set>> = const { RefCell::new(None) };
}

/// Whether this thread parks connections (a worker whose set started; not a test's
/// runtime, nor a stopping server).
pub(crate) fn available() -> bool {
    SET.with(|s| s.borrow().as_ref().is_some_and(|s| !s.stopping))
}

/// Starts this worker's set and the task that watches it. Without an epoll instance
/// (a sandbox forbidding it), connections simply wait in their tasks.
#[allow(unsafe_code)]
pub(crate) fn start(shared: &Arc<crate::state::Shared>, resume: fn(Parked)) {
    let made = (|| -> std::io::Result<(OwnedFd, AsyncFd<OwnedFd>)> {
        let ours = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let task = ours.try_clone()?;
        // SAFETY: an OwnedFd keeps its descriptor open and the same until dropped.
        let watched = unsafe { AsyncFd::register_with_interest(task, Interest::READABLE) }
            .map_err(std::io::Error::from)?;
        Ok((ours, watched))
    })();
    let (epoll, watched) = match made {
        Ok(x) => x,
        Err(e) => {
            tracing::warn!(error = %e, "idle connections will not be parked: no epoll set");
            return;
        }
    };
    let wake = Arc::new(Notify::new());
    SET.with(|s| {
        *s.borrow_mut() = Some(Set {
            epoll,
            slots: Vec::new(),
            free: Vec::new(),
            deadlines: BinaryHeap::new(),
            armed: None,
            wake: wake.clone(),
            stopping: false,
            parked: 0,
            since_collect: 0,
            events: Vec::with_capacity(EVENTS_PER_WAIT),
            resume,
        })
    });
    shared.reclaim.register(wake.clone());
    tokio::spawn(watch(watched, wake, shared.clone()));
}

/// Closes this worker's longest-idle parked connection and returns its permit, for a new
/// connection to take at once; `None` when the worker has none parked.
pub(crate) fn close_longest_idle() -> Option<OwnedSemaphorePermit> {
    with_set(Set::close_longest_idle).flatten()
}

/// Parks an idle connection (one with nothing buffered and nothing to send) until it is
/// readable, or until its keep-alive deadline (from `last_active`: its last request, or
/// its last response's end) when it is closed. It is closed at once when the server stops or the set cannot take it.
pub(crate) fn park(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    local_port: u16,
    last_request: Instant,
    admission: Admission,
) {
    // Leaves tokio's epoll set (and frees its registration) first.
    let Ok(stream) = stream.into_std() else {
        return;
    };
    let keepalive = admission.shared.settings.limits.keepalive_timeout;
    let metrics = admission.shared.metrics.clone();
    let conn = Parked {
        stream,
        peer,
        local_port,
        last_request,
        admission,
    };
    SET.with(|s| {
        let mut s = s.borrow_mut();
        let Some(set) = s.as_mut().filter(|s| !s.stopping) else {
            return;
        };
        let idx = match set.free.pop() {
            Some(i) => i,
            None => {
                set.slots.push(Slot { gen: 0, conn: None });
                (set.slots.len() - 1) as u32
            }
        };
        let slot = &mut set.slots[idx as usize];
        slot.gen = slot.gen.wrapping_add(1);
        let gen = slot.gen;
        // Level-triggered: bytes that came after the task's last read report at once.
        let data = epoll::EventData::new_u64(u64::from(gen) << 32 | u64::from(idx));
        let flags = epoll::EventFlags::IN | epoll::EventFlags::RDHUP;
        if let Err(e) = epoll::add(&set.epoll, &conn.stream, data, flags) {
            tracing::debug!(error = %e, "cannot park a connection; closing it");
            set.free.push(idx);
            return;
        }
        slot.conn = Some(conn);
        metrics.connections_parked.inc();
        set.parked += 1;
        set.since_collect += 1;
        let deadline = last_request + keepalive;
        set.deadlines.push(Reverse((deadline, idx, gen)));
        // A resumed connection's entry stays until its deadline: drop the stale ones
        // before they outnumber the live ones (a client waking its connection every
        // 250 ms would otherwise leave hundreds).
        if set.deadlines.len() > 2 * set.parked + 1024 {
            let slots = &set.slots;
            set.deadlines.retain(|Reverse((_, i, g))| {
                let slot = &slots[*i as usize];
                slot.gen == *g && slot.conn.is_some()
            });
            set.deadlines.shrink_to(2 * set.parked + 1024);
        }
        if set.armed.is_none_or(|a| deadline < a) || set.since_collect == COLLECT_BURST {
            set.wake.notify_one();
        }
    });
}

impl Set {
    /// Takes the connection in `idx` if it is still the one of generation `gen`.
    fn take(&mut self, idx: u32, gen: u32) -> Option<Parked> {
        let slot = self.slots.get_mut(idx as usize)?;
        if slot.gen != gen {
            return None;
        }
        let conn = slot.conn.take()?;
        self.free.push(idx);
        self.parked -= 1;
        conn.admission.shared.metrics.connections_parked.dec();
        // A socket left in the set would report readable forever: closing it takes it out.
        if let Err(e) = epoll::delete(&self.epoll, &conn.stream) {
            tracing::debug!(error = %e, "cannot unpark a connection; closing it");
            return None;
        }
        Some(conn)
    }

    /// Closes the parked connection with the earliest keep-alive deadline, which is the
    /// one whose last request is oldest, and returns its permit; `None` when none is
    /// parked. One whose next request has already arrived is resumed instead: closing a
    /// socket with unread bytes resets it, and the request would be lost.
    fn close_longest_idle(&mut self) -> Option<OwnedSemaphorePermit> {
        while let Some(Reverse((_, idx, gen))) = self.deadlines.pop() {
            // Entries of resumed connections stay in the heap: skip them.
            let slot = &self.slots[idx as usize];
            let Some(conn) = slot.conn.as_ref().filter(|_| slot.gen == gen) else {
                continue;
            };
            let speaking = has_unread_bytes(&conn.stream);
            let Some(mut conn) = self.take(idx, gen) else {
                continue;
            };
            if speaking {
                (self.resume)(conn);
                continue;
            }
            conn.admission.shared.metrics.connections_reclaimed.inc();
            return conn.admission.take_permit();
        }
        None
    }

    /// Closes the connections whose keep-alive deadline has passed; returns the next one.
    fn expire(&mut self, now: Instant) -> Option<Instant> {
        while let Some(&Reverse((when, idx, gen))) = self.deadlines.peek() {
            if when > now {
                return Some(when);
            }
            self.deadlines.pop();
            // Closing the socket also takes it out of the epoll set.
            drop(self.take(idx, gen));
        }
        None
    }

    /// Hands every connection epoll reports readable to a new task; returns how many
    /// events there were.
    fn resume_ready(&mut self) -> rustix::io::Result<usize> {
        let no_wait = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        let waited = epoll::wait(&self.epoll, spare_capacity(&mut events), Some(&no_wait));
        let n = events.len();
        for event in events.drain(..) {
            let data = event.data.u64();
            if let Some(conn) = self.take(data as u32, (data >> 32) as u32) {
                (self.resume)(conn);
            }
        }
        self.events = events;
        waited.map(|_| n)
    }

    /// Closes every parked connection, and parks none from now on.
    fn close_all(&mut self) {
        self.stopping = true;
        for idx in 0..self.slots.len() as u32 {
            let gen = self.slots[idx as usize].gen;
            drop(self.take(idx, gen));
        }
        self.deadlines.clear();
    }
}

fn with_set<R>(f: impl FnOnce(&mut Set) -> R) -> Option<R> {
    // try_with: at thread exit the set may already be gone.
    SET.try_with(|s| s.borrow_mut().as_mut().map(f))
        .ok()
        .flatten()
}

/// Closes the set's connections however the task ends (a runtime torn down included), so
/// none waits in a set nobody watches.
struct CloseOnExit;

impl Drop for CloseOnExit {
    fn drop(&mut self) {
        with_set(Set::close_all);
    }
}

/// The set's task: hands readable connections to new tasks, closes the ones whose
/// keep-alive deadline passed, and all of them once the server stops.
async fn watch(epoll: AsyncFd<OwnedFd>, wake: Arc<Notify>, shared: Arc<crate::state::Shared>) {
    let _close = CloseOnExit;
    let mut phase = shared.shutdown.subscribe();
    let mut collect_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if collect_at.is_some_and(|at| now >= at) {
            collect_at = None;
            crate::allocator::give_back_free_pages();
        }
        let next = with_set(|s| {
            // An accept loop ran out of permits and its worker had no idle connection. An
            // ask this set cannot meet leaves its heap empty, so the next connection
            // parked here wakes this task (`armed` is then None) and meets it.
            if shared.reclaim.waiting() {
                shared.reclaim.meet(|| s.close_longest_idle());
            }
            if s.since_collect >= COLLECT_BURST {
                s.since_collect = 0;
                collect_at.get_or_insert(now + COLLECT_AFTER);
            }
            let next = s.expire(now);
            s.armed = next;
            next
        })
        .flatten();
        let next = match (next, collect_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let sleep = async move {
            match next {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = crate::shutdown::stopping(&mut phase) => return,
            ready = epoll.readable() => {
                let Ok(mut ready) = ready else { return };
                match with_set(Set::resume_ready) {
                    Some(Ok(0)) => ready.clear_ready(),
                    Some(Ok(_)) | Some(Err(rustix::io::Errno::INTR)) => {}
                    Some(Err(e)) => {
                        tracing::error!(error = %e, "epoll_wait on the parked connections failed");
                        return;
                    }
                    None => return,
                }
            }
            () = sleep => {}
            () = wake.notified() => {}
        }
    }
}

/// Whether the peer has sent bytes not yet read (a peek that never blocks; the end of the
/// stream is not bytes).
fn has_unread_bytes(stream: &std::net::TcpStream) -> bool {
    let mut byte = [0u8; 1];
    let peeked = rustix::net::recv(
        stream,
        &mut byte,
        rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT,
    );
    matches!(peeked, Ok((n, _)) if n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn unread_bytes_are_seen_without_being_consumed() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        assert!(!has_unread_bytes(&server), "an idle socket");
        client.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        let end = Instant::now() + Duration::from_secs(5);
        while !has_unread_bytes(&server) {
            assert!(Instant::now() < end, "the request never showed");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(has_unread_bytes(&server), "the peek consumed the bytes");
        drop(client);
        let mut rest = Vec::new();
        std::io::Read::read_to_end(&mut &server, &mut rest).unwrap();
        assert_eq!(rest, b"GET / HTTP/1.1\r\n");
        assert!(
            !has_unread_bytes(&server),
            "the end of the stream is not bytes"
        );
    }
}
