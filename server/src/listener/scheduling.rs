//! The CPU scheduling policy of the serving threads.
//!
//! A proxy's worker does a few microseconds of work per event and then waits. Under the
//! default policy (SCHED_OTHER) every event that arrives while a backend process runs on
//! the same core wakes the worker at once and preempts that process: two context switches
//! and cold caches for one small event, about twice per proxied request. When the edge
//! shares cores with its backends (a php-fpm sidecar in the same pod, uWSGI on the same
//! node), those switches cost as much CPU as the proxying itself: on this project's 2-core
//! bench, SCHED_BATCH halved the front end's CPU per proxied Django request (BENCHMARKS.md,
//! session 5).
//!
//! SCHED_BATCH changes one thing: a waking worker does not preempt the running task; it
//! runs when that task blocks or its time slice ends (the scheduler tick), and then finds
//! the events that arrived meanwhile waiting together. On an idle core it runs at once, so
//! an edge on its own cores sees no difference; latency grows, by at most a slice, only
//! while the core is contended, which is when batching pays. It needs no privilege
//! (only real-time policies do), and `normal` restores the kernel default.
// sched_setscheduler(2) and sched_getscheduler(2) have no safe wrapper (rustix leaves
// them out); both take plain values and a pointer to a local.
#![allow(unsafe_code)]

use crate::settings::CpuScheduling;
use std::io;

impl CpuScheduling {
    fn policy(self) -> libc::c_int {
        match self {
            CpuScheduling::Batch => libc::SCHED_BATCH,
            CpuScheduling::Normal => libc::SCHED_OTHER,
        }
    }

    /// Applies the policy to the calling thread (threads it starts inherit it).
    pub fn apply_to_current_thread(self) -> io::Result<()> {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param for the
        // non-real-time policies, whose priority must be 0.
        let rc = unsafe { libc::sched_setscheduler(0, self.policy(), &param) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn current_policy() -> libc::c_int {
        // SAFETY: pid 0 is the calling thread; the call has no memory arguments.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[test]
    fn batch_then_normal_change_the_calling_threads_policy_only() {
        std::thread::spawn(|| {
            CpuScheduling::Batch.apply_to_current_thread().unwrap();
            assert_eq!(current_policy(), libc::SCHED_BATCH);
            // A thread started now inherits the policy, as tokio's blocking threads do.
            let child = std::thread::spawn(current_policy).join().unwrap();
            assert_eq!(child, libc::SCHED_BATCH);
            CpuScheduling::Normal.apply_to_current_thread().unwrap();
            assert_eq!(current_policy(), libc::SCHED_OTHER);
        })
        .join()
        .unwrap();
        // The test harness's own thread was never touched.
        assert_eq!(current_policy(), libc::SCHED_OTHER);
    }
}
