//! Traffic shaping: response bodies sent no faster than a per-connection rate and shared
//! token buckets (per virtual server, per rule) allow. Pure timing logic; the connection
//! layers sleep for the durations it returns.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A token bucket of bytes, with a one-second burst. Debt is allowed: a sender takes what it
/// sends and waits out the deficit, so large chunks never starve.
#[derive(Debug)]
pub struct TokenBucket {
    rate: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    pub fn new(bytes_per_second: u64) -> TokenBucket {
        let rate = bytes_per_second as f64;
        TokenBucket {
            rate,
            state: Mutex::new((rate, Instant::now())),
        }
    }

    pub fn rate(&self) -> u64 {
        self.rate as u64
    }

    /// Takes `n` bytes; returns how long to wait before sending them.
    pub fn take(&self, n: u64, now: Instant) -> Duration {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (tokens, at) = &mut *st;
        *tokens =
            (*tokens + now.saturating_duration_since(*at).as_secs_f64() * self.rate).min(self.rate);
        *at = now;
        *tokens -= n as f64;
        if *tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-*tokens / self.rate)
        }
    }
}

/// The limits that apply to one response.
#[derive(Debug, Default)]
pub struct Throttle {
    pub per_connection: Option<u64>,
    pub buckets: Vec<Arc<TokenBucket>>,
}

impl Throttle {
    /// Chunks of about 1/20 s at the slowest rate, so pacing is smooth but cheap.
    pub fn chunk_size(&self) -> usize {
        let slowest = self
            .buckets
            .iter()
            .map(|b| b.rate())
            .chain(self.per_connection)
            .min()
            .unwrap_or(u64::MAX);
        (slowest / 20).clamp(1024, 64 * 1024) as usize
    }
}

/// Pacing state of one response body.
pub struct Pacer {
    throttle: Arc<Throttle>,
    start: Instant,
    sent: u64,
}

impl Pacer {
    pub fn new(throttle: Arc<Throttle>) -> Pacer {
        Pacer {
            throttle,
            start: Instant::now(),
            sent: 0,
        }
    }

    pub fn chunk_size(&self) -> usize {
        self.throttle.chunk_size()
    }

    /// Accounts for a chunk of `n` bytes; returns how long to wait before sending it.
    pub fn before_chunk(&mut self, n: u64) -> Duration {
        let now = Instant::now();
        let mut wait = Duration::ZERO;
        if let Some(rate) = self.throttle.per_connection {
            // The first second's worth goes out at once, then the rate holds.
            let due = self.start
                + Duration::from_secs_f64(self.sent.saturating_sub(rate) as f64 / rate as f64);
            wait = due.saturating_duration_since(now);
        }
        for b in &self.throttle.buckets {
            wait = wait.max(b.take(n, now));
        }
        self.sent += n;
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_allows_a_burst_then_charges_time() {
        let b = TokenBucket::new(10_000);
        let t = Instant::now();
        assert_eq!(b.take(10_000, t), Duration::ZERO);
        assert_eq!(b.take(5_000, t), Duration::from_millis(500));
        // Half a second later the debt is paid.
        assert_eq!(b.take(0, t + Duration::from_millis(500)), Duration::ZERO);
    }

    #[test]
    fn per_connection_pacing_spreads_a_body_over_time() {
        let mut p = Pacer::new(Arc::new(Throttle {
            per_connection: Some(100_000),
            buckets: vec![],
        }));
        assert_eq!(p.chunk_size(), 5_000);
        let mut total = Duration::ZERO;
        for _ in 0..60 {
            total = total.max(p.before_chunk(5_000));
        }
        // 300 kB at 100 kB/s, the first 100 kB free: the last chunk is due after ~2 s.
        assert!(
            total > Duration::from_millis(1_800) && total <= Duration::from_millis(2_000),
            "{total:?}"
        );
    }
}
