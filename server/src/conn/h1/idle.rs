//! Buffers a connection lends back to its worker while it waits for a request, so an idle
//! keep-alive connection holds none (nginx frees its buffers on keep-alive the same way).

use std::cell::RefCell;

/// A connection's buffers: the request buffer, the output queue's head bytes and
/// segments, and the responses queued for recording (generic: their types are the
/// connection's own).
pub(super) struct Buffers<S, P> {
    pub read: Vec<u8>,
    pub head: Vec<u8>,
    pub segs: Vec<S>,
    pub pending: Vec<P>,
}

/// Buffers kept per worker: enough for a burst of connections turning busy at once;
/// beyond it they go back to the allocator.
const KEPT_PER_WORKER: usize = 32;

/// Capacity a fresh head buffer starts with: a few response heads.
const HEAD_CAPACITY: usize = 512;

/// The largest head buffer given back that the pool keeps as it is: a few pipelined heads,
/// or a head with a small body copied in (`output::INLINE_BODY_MAX`).
pub(super) const HEAD_KEPT_CAPACITY: usize = 8 * HEAD_CAPACITY;

/// Capacity a fresh segment list starts with: one response's head, body, and a spare.
const SEGS_CAPACITY: usize = 4;

/// One response queued unless the client pipelines.
const PENDING_CAPACITY: usize = 1;

/// A per-thread pool (each worker is a current-thread runtime, so a connection is
/// served on one thread from start to end).
pub(super) struct Pool<S: 'static, P: 'static> {
    kept: &'static std::thread::LocalKey<RefCell<Vec<Buffers<S, P>>>>,
}

impl<S: 'static, P: 'static> Pool<S, P> {
    pub const fn new(kept: &'static std::thread::LocalKey<RefCell<Vec<Buffers<S, P>>>>) -> Self {
        Pool { kept }
    }

    /// Buffers with a request buffer of exactly `read_len` bytes: pooled ones, or new.
    pub fn take(&self, read_len: usize) -> Buffers<S, P> {
        let pooled = self.kept.with(|k| {
            let mut k = k.borrow_mut();
            // A buffer of another length (the limit is per process, so this is a test's
            // second server on the thread) is dropped rather than handed out.
            while let Some(b) = k.pop() {
                if b.read.len() == read_len {
                    return Some(b);
                }
            }
            None
        });
        pooled.unwrap_or_else(|| Buffers {
            read: vec![0u8; read_len],
            head: Vec::with_capacity(HEAD_CAPACITY),
            segs: Vec::with_capacity(SEGS_CAPACITY),
            pending: Vec::with_capacity(PENDING_CAPACITY),
        })
    }

    /// Returns buffers to the pool (emptied), or to the allocator when it is full.
    pub fn give(&self, mut b: Buffers<S, P>) {
        if b.read.is_empty() {
            return;
        }
        b.head.clear();
        b.segs.clear();
        b.pending.clear();
        // A batch of pipelined responses may have grown them: keep only ordinary sizes.
        if b.head.capacity() > HEAD_KEPT_CAPACITY {
            b.head = Vec::with_capacity(HEAD_CAPACITY);
        }
        if b.segs.capacity() > 16 * SEGS_CAPACITY {
            b.segs = Vec::with_capacity(SEGS_CAPACITY);
        }
        if b.pending.capacity() > 16 * PENDING_CAPACITY {
            b.pending = Vec::with_capacity(PENDING_CAPACITY);
        }
        self.kept.with(|k| {
            let mut k = k.borrow_mut();
            if k.len() < KEPT_PER_WORKER {
                k.push(b);
            }
        });
    }

    /// How many buffers this thread keeps (for tests).
    #[cfg(test)]
    pub fn kept(&self) -> usize {
        self.kept.with(|k| k.borrow().len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        static KEPT: RefCell<Vec<Buffers<u32, u8>>> = const { RefCell::new(Vec::new()) };
    }
    static POOL: Pool<u32, u8> = Pool::new(&KEPT);

    #[test]
    fn buffers_given_back_are_reused_emptied_and_the_pool_is_bounded() {
        let mut b = POOL.take(100);
        assert_eq!(b.read.len(), 100);
        b.head.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        b.segs.push(7);
        b.pending.push(1);
        let read_ptr = b.read.as_ptr();
        POOL.give(b);
        assert_eq!(POOL.kept(), 1);
        let again = POOL.take(100);
        assert_eq!(again.read.as_ptr(), read_ptr, "the pooled buffer is reused");
        assert!(again.head.is_empty() && again.segs.is_empty() && again.pending.is_empty());
        assert_eq!(POOL.kept(), 0);

        // Another length is not handed out.
        POOL.give(again);
        assert_eq!(POOL.take(200).read.len(), 200);
        assert_eq!(POOL.kept(), 0);

        // Never more than KEPT_PER_WORKER.
        let many: Vec<_> = (0..KEPT_PER_WORKER + 5).map(|_| POOL.take(10)).collect();
        for b in many {
            POOL.give(b);
        }
        assert_eq!(POOL.kept(), KEPT_PER_WORKER);
        // A buffer already given (empty read buffer) is not pooled twice.
        POOL.give(Buffers {
            read: Vec::new(),
            head: Vec::new(),
            segs: Vec::new(),
            pending: Vec::new(),
        });
        assert_eq!(POOL.kept(), KEPT_PER_WORKER);
    }
}
