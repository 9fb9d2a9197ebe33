//! The kernel's coarse clocks: the time of its last tick (a few ms behind at most), read
//! from the vDSO in a quarter of a precise read's time. For what is read on every request
//! and needs no finer step than a tick: the Date header's second, the I/O cache's
//! revalidation clock.
#![allow(unsafe_code)]

fn read(clock: libc::clockid_t) -> libc::timespec {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to fill; both clock ids exist on every
    // Linux since 2.6.32, and a failure leaves `t` zeroed.
    unsafe { libc::clock_gettime(clock, &mut t) };
    t
}

/// Milliseconds of the monotonic clock at the last tick.
pub fn monotonic_ms() -> u64 {
    let t = read(libc::CLOCK_MONOTONIC_COARSE);
    (t.tv_sec as u64) * 1000 + (t.tv_nsec as u64) / 1_000_000
}

/// The Unix second at the last tick.
pub fn unix_seconds() -> u64 {
    u64::try_from(read(libc::CLOCK_REALTIME_COARSE).tv_sec).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    #[test]
    fn coarse_clocks_trail_the_precise_ones_by_at_most_a_tick() {
        let precise = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let coarse = unix_seconds();
        assert!(
            coarse <= precise + 1 && coarse + 1 >= precise,
            "{coarse} against {precise}"
        );
        let a = monotonic_ms();
        std::thread::sleep(Duration::from_millis(50));
        let b = monotonic_ms();
        // HZ is 100 to 1000: a tick is 10 ms at most.
        assert!(
            (40..1000).contains(&(b - a)),
            "50 ms measured as {} ms",
            b - a
        );
    }
}
