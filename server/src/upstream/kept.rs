//! Idle FastCGI connections kept per worker for reuse: checked before each reuse, and
//! closed after a minute idle or once their pool's config generation is retired.

use super::connection::Conn;
use super::pool::Pool;
use std::cell::{Cell, RefCell};
use std::sync::Weak;
use std::time::{Duration, Instant};

/// How long a kept connection may wait for its next request (nginx's upstream
/// `keepalive_timeout` default): each holds a php-fpm child meanwhile.
pub(super) const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How often a worker with kept connections closes those past their time or their pool.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// Kept connections to one endpoint of one pool.
struct Entry {
    /// The pool's liveness token: gone once a reload has retired the pool.
    pool: Weak<()>,
    endpoint: usize,
    /// Oldest first; reuse takes the newest.
    conns: Vec<(Conn, Instant)>,
}

impl Entry {
    fn is(&self, pool: &Pool, endpoint: usize) -> bool {
        self.endpoint == endpoint && std::ptr::eq(self.pool.as_ptr(), pool.alive_token())
    }
}

// Per worker thread: a tokio socket belongs to the runtime (worker) that registered it.
// A short list searched linearly: a worker holds a few pools' endpoints, and this runs on
// every kept-connection request, where hashing the key would cost more than the search.
thread_local! {
    static IDLE: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
    static SWEEPING: Cell<bool> = const { Cell::new(false) };
}

/// An idle connection to endpoint `i` on this worker that is still open and has nothing
/// unread, if one is kept.
pub fn take_idle(pool: &Pool, i: usize) -> Option<Conn> {
    if pool.keepalive == 0 {
        return None;
    }
    let now = Instant::now();
    IDLE.with(|m| {
        let mut m = m.borrow_mut();
        let entry = m.iter_mut().find(|e| e.is(pool, i))?;
        while let Some((conn, since)) = entry.conns.pop() {
            if now.duration_since(since) < IDLE_TIMEOUT && quiet(&conn) {
                return Some(conn);
            }
        }
        None
    })
}

/// Keeps a connection for reuse by this worker.
pub fn put_idle(pool: &Pool, i: usize, conn: Conn) {
    IDLE.with(|m| {
        let mut m = m.borrow_mut();
        // Retired generations' connections close now, not at the next sweep.
        m.retain(|e| e.pool.strong_count() > 0);
        let at = match m.iter().position(|e| e.is(pool, i)) {
            Some(at) => at,
            None => {
                m.push(Entry {
                    pool: pool.alive_weak(),
                    endpoint: i,
                    conns: Vec::new(),
                });
                m.len() - 1
            }
        };
        let list = &mut m[at].conns;
        if list.len() < pool.keepalive {
            list.push((conn, Instant::now()));
        }
    });
    start_sweeping();
}

/// Closes the connections past their idle time, those the backend closed or wrote to
/// unasked, and those of retired pools; returns how many stay.
fn sweep(entries: &mut Vec<Entry>, now: Instant) -> usize {
    entries.retain_mut(|e| {
        if e.pool.strong_count() == 0 {
            return false;
        }
        e.conns
            .retain(|(conn, since)| now.duration_since(*since) < IDLE_TIMEOUT && quiet(conn));
        !e.conns.is_empty()
    });
    entries.iter().map(|e| e.conns.len()).sum()
}

/// A timer on this worker while it keeps connections; it ends when none are left.
fn start_sweeping() {
    if SWEEPING.replace(true) {
        return;
    }
    tokio::spawn(async {
        loop {
            tokio::time::sleep(SWEEP_EVERY).await;
            let left = IDLE.with(|m| sweep(&mut m.borrow_mut(), Instant::now()));
            if left == 0 {
                SWEEPING.set(false);
                return;
            }
        }
    });
}

/// Whether a kept connection is still open with nothing unread: a backend that closed it
/// (php-fpm restarted, a child recycled) or wrote to it unasked would otherwise answer
/// the next request with an end of stream or a stray response. A peek that never blocks.
fn quiet(conn: &Conn) -> bool {
    use std::os::fd::AsFd;
    let fd = match conn {
        Conn::Tcp(s) => s.as_fd(),
        Conn::Unix(s) => s.as_fd(),
    };
    let mut byte = [0u8; 1];
    let peeked = rustix::net::recv(
        fd,
        &mut byte,
        rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT,
    );
    matches!(peeked, Err(rustix::io::Errno::AGAIN))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    fn pool(keepalive: usize) -> Pool {
        let cfg = skiff_config::Pool {
            name: "php".into(),
            protocol: skiff_config::PoolProtocol::Fastcgi,
            endpoints: vec!["127.0.0.1:9".into(), "127.0.0.1:10".into()],
            balance: Default::default(),
            max_fails: 1,
            fail_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(1),
            read_timeout: Duration::from_secs(1),
            send_timeout: Duration::from_secs(1),
            max_body_size: 1,
            max_active_requests: 2,
            keepalive,
            workers: None,
            underscores_in_headers: false,
        };
        Pool::from_config(&cfg, "php")
    }

    /// A connected pair: the kept end and the backend's end.
    async fn pair(listener: &tokio::net::TcpListener) -> (Conn, tokio::net::TcpStream) {
        let (c, a) = tokio::join!(
            tokio::net::TcpStream::connect(listener.local_addr().unwrap()),
            listener.accept()
        );
        (Conn::Tcp(c.unwrap()), a.unwrap().0)
    }

    fn kept() -> usize {
        IDLE.with(|m| m.borrow().iter().map(|e| e.conns.len()).sum())
    }

    #[tokio::test]
    async fn a_connection_is_reused_only_while_open_quiet_and_its_pool_alive() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let p = pool(2);
        let (conn, _backend) = pair(&listener).await;
        put_idle(&p, 0, conn);
        assert!(take_idle(&p, 1).is_none(), "another endpoint's");
        assert!(take_idle(&p, 0).is_some(), "an open, quiet connection");
        assert!(take_idle(&p, 0).is_none(), "taken already");

        // Closed by the backend, or holding bytes nobody asked for: not reused.
        let (conn, backend) = pair(&listener).await;
        put_idle(&p, 0, conn);
        drop(backend);
        let (conn, mut backend) = pair(&listener).await;
        put_idle(&p, 0, conn);
        backend.write_all(b"stray").await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            take_idle(&p, 0).is_none(),
            "a closed or written-to connection"
        );

        // A reload retires the pool: the next put anywhere on this worker closes its
        // connections, and the new generation's pool does not see them.
        let (conn, mut backend) = pair(&listener).await;
        put_idle(&p, 0, conn);
        drop(p);
        let next = pool(2);
        assert!(
            take_idle(&next, 0).is_none(),
            "an older generation's connection"
        );
        let (conn, _b) = pair(&listener).await;
        put_idle(&next, 0, conn);
        assert_eq!(kept(), 1, "the retired pool's connection is still kept");
        let mut byte = [0u8; 1];
        let n = tokio::io::AsyncReadExt::read(&mut backend, &mut byte)
            .await
            .unwrap();
        assert_eq!(n, 0, "the backend did not see the retired connection close");
        assert!(take_idle(&next, 0).is_some());
    }

    #[tokio::test]
    async fn a_sweep_closes_connections_past_their_idle_time_and_of_retired_pools() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (a, b) = (pool(4), pool(4));
        let (c1, _k1) = pair(&listener).await;
        let (c2, _k2) = pair(&listener).await;
        let (c3, _k3) = pair(&listener).await;
        put_idle(&a, 0, c1);
        put_idle(&a, 0, c2);
        put_idle(&b, 0, c3);
        let mut entries = IDLE.with(|m| std::mem::take(&mut *m.borrow_mut()));
        let now = Instant::now();
        assert_eq!(sweep(&mut entries, now), 3);
        // One of a's two is older than the idle timeout.
        let e = entries.iter_mut().find(|e| e.is(&a, 0)).unwrap();
        e.conns[0].1 = now - IDLE_TIMEOUT;
        assert_eq!(sweep(&mut entries, now), 2);
        drop(b);
        assert_eq!(sweep(&mut entries, now), 1, "the retired pool's connection");
        drop(a);
        assert_eq!(sweep(&mut entries, now), 0);
        assert!(entries.is_empty(), "entries of retired pools are forgotten");
    }
}
