//! The kernel's coarse clocks: the time of its last tick (a few ms behind at most), read
//! from the vDSO in a quarter of a precise read's time. For what is read on every request
//! and needs no finer step than a tick: the Date header's second, the I/O cache's
//! revalidation clock.
#![allow(unsafe_code)]

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// How far the coarse clock may trail the precise one: a tick (10 ms at most, HZ 100)
/// plus the timekeeper's own lateness, 6.8 ms measured here at HZ 250, more under a
/// hypervisor's steal. Past this into a second, the precise clock answers (5% of reads).
const MAX_LAG_NS: i64 = 50_000_000;

/// The clock's reading, or None if the kernel refused it (then the precise clock is used).
fn read(clock: libc::clockid_t) -> Option<libc::timespec> {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to fill, and only read on success.
    let rc = unsafe { libc::clock_gettime(clock, &mut t) };
    (rc == 0).then_some(t)
}

/// Milliseconds of the monotonic clock at the last tick.
pub fn monotonic_ms() -> u64 {
    match read(libc::CLOCK_MONOTONIC_COARSE) {
        Some(t) => (t.tv_sec as u64) * 1000 + (t.tv_nsec as u64) / 1_000_000,
        None => {
            static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
            START.get_or_init(Instant::now).elapsed().as_millis() as u64
        }
    }
}

/// The Unix second now. Within a tick of the next second the coarse clock may still show
/// the last one, and a file's modification time (fine-grained) may already be in the
/// next: then the precise clock is read, so Date is never earlier than a Last-Modified.
pub fn unix_seconds() -> u64 {
    match read(libc::CLOCK_REALTIME_COARSE) {
        Some(t) if t.tv_nsec < 1_000_000_000 - MAX_LAG_NS => u64::try_from(t.tv_sec).unwrap_or(0),
        _ => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_second_is_never_behind_the_precise_clock_and_the_monotonic_one_moves() {
        // Across at least one second boundary: never behind the precise second read
        // before it (near the boundary the precise clock answers), never ahead of the
        // one read after.
        let secs = || {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs()
        };
        for _ in 0..2000 {
            let before = secs();
            let coarse = unix_seconds();
            let after = secs();
            assert!(
                (before..=after).contains(&coarse),
                "{coarse} not in {before}..={after}"
            );
            std::thread::sleep(Duration::from_micros(500));
        }
        let a = monotonic_ms();
        std::thread::sleep(Duration::from_millis(50));
        let b = monotonic_ms();
        // Within a tick (10 ms at most) of the 50 ms slept.
        assert!(b - a >= 40, "50 ms measured as {} ms", b - a);
    }
}
