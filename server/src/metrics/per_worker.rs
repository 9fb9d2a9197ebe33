//! Counters and histograms that each worker adds to alone and a scrape sums. Every request
//! records into them: a shared prometheus-client counter costs an atomic add, and its
//! histogram a lock, on lines every worker writes; a worker's own cell takes plain stores.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// One writer's count: only the thread that took the cell adds to it, so an add is a
/// load and a store; a scrape reads it from any thread.
#[derive(Debug, Default)]
pub struct CountCell(AtomicU64);

impl CountCell {
    #[inline]
    pub fn add(&self, n: u64) {
        let v = self.0.load(Ordering::Relaxed);
        self.0.store(v.wrapping_add(n), Ordering::Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A counter made of its writers' cells.
#[derive(Debug, Clone, Default)]
pub struct SummedCounter {
    cells: Arc<Mutex<Vec<Arc<CountCell>>>>,
}

impl SummedCounter {
    /// A cell for one writer (a worker thread) to add to alone.
    pub fn cell(&self) -> Arc<CountCell> {
        let cell = Arc::new(CountCell::default());
        lock(&self.cells).push(cell.clone());
        cell
    }

    pub fn get(&self) -> u64 {
        lock(&self.cells)
            .iter()
            .fold(0u64, |sum, c| sum.wrapping_add(c.get()))
    }
}

impl TypedMetric for SummedCounter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for SummedCounter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<NoLabelSet, _, u64>(&self.get(), None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// One writer's observations: a count per bucket (the last one past every bound) and
/// the sum's bits. The total count is the buckets' sum, so a scrape always agrees with
/// itself on it.
#[derive(Debug)]
pub struct HistogramCell {
    bounds: &'static [f64],
    buckets: Box<[AtomicU64]>,
    sum_bits: AtomicU64,
}

impl HistogramCell {
    fn new(bounds: &'static [f64]) -> HistogramCell {
        HistogramCell {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_bits: AtomicU64::new(0f64.to_bits()),
        }
    }

    /// Records `v` in the first bucket whose bound is at least `v` (as prometheus-client's
    /// histogram does). Only the cell's writer calls this.
    #[inline]
    pub fn observe(&self, v: f64) {
        let i = self
            .bounds
            .iter()
            .position(|b| *b >= v)
            .unwrap_or(self.bounds.len());
        let bucket = &self.buckets[i];
        bucket.store(bucket.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let sum = f64::from_bits(self.sum_bits.load(Ordering::Relaxed)) + v;
        self.sum_bits.store(sum.to_bits(), Ordering::Relaxed);
    }
}

/// A histogram made of its writers' cells, all with the same bucket bounds.
#[derive(Debug, Clone)]
pub struct SummedHistogram {
    bounds: &'static [f64],
    cells: Arc<Mutex<Vec<Arc<HistogramCell>>>>,
}

impl SummedHistogram {
    pub fn new(bounds: &'static [f64]) -> SummedHistogram {
        SummedHistogram {
            bounds,
            cells: Arc::default(),
        }
    }

    /// A cell for one writer (a worker thread) to observe into alone.
    pub fn cell(&self) -> Arc<HistogramCell> {
        let cell = Arc::new(HistogramCell::new(self.bounds));
        lock(&self.cells).push(cell.clone());
        cell
    }

    /// The sum, the count, and each bucket's own count (not cumulative) with its bound;
    /// the last bound is `f64::MAX`, which the encoder writes as `+Inf`.
    fn totals(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let mut buckets: Vec<(f64, u64)> = self
            .bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::MAX))
            .map(|b| (b, 0))
            .collect();
        let mut sum = 0.0;
        for cell in lock(&self.cells).iter() {
            for (total, b) in buckets.iter_mut().zip(cell.buckets.iter()) {
                total.1 += b.load(Ordering::Relaxed);
            }
            sum += f64::from_bits(cell.sum_bits.load(Ordering::Relaxed));
        }
        let count = buckets.iter().map(|b| b.1).sum();
        (sum, count, buckets)
    }
}

impl TypedMetric for SummedHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for SummedHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let (sum, count, buckets) = self.totals();
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// The cell lists are only pushed to and summed: a panic elsewhere leaves them whole.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::histogram::Histogram;
    use prometheus_client::registry::Registry;

    // Powers of two, as are the values: every sum is exact, whatever its order.
    static BOUNDS: [f64; 3] = [0.0009765625, 0.0078125, 0.125];

    fn encode(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    /// Writers on several threads, each on its own cell, add up to what one shared
    /// counter and histogram would show, in the same exposition.
    #[test]
    fn cells_written_by_their_own_threads_sum_to_the_shared_metrics_exposition() {
        let counter = SummedCounter::default();
        let histogram = SummedHistogram::new(&BOUNDS);
        // One on a bound: it counts in that bound's bucket.
        let values = [0.00048828125, 0.0009765625, 0.00390625, 0.0625, 0.5, 8.0];
        std::thread::scope(|s| {
            for _ in 0..4 {
                let (c, h) = (counter.cell(), histogram.cell());
                s.spawn(move || {
                    for _ in 0..1000 {
                        c.add(2);
                        for v in values {
                            h.observe(v);
                        }
                    }
                });
            }
        });
        assert_eq!(counter.get(), 8000);

        let (shared_counter, shared_histogram) = (
            prometheus_client::metrics::counter::Counter::<u64>::default(),
            Histogram::new(BOUNDS),
        );
        shared_counter.inc_by(8000);
        for _ in 0..4000 {
            for v in values {
                shared_histogram.observe(v);
            }
        }
        let mut ours = Registry::default();
        ours.register("requests", "help", counter);
        ours.register("duration", "help", histogram);
        let mut theirs = Registry::default();
        theirs.register("requests", "help", shared_counter);
        theirs.register("duration", "help", shared_histogram);
        assert_eq!(encode(&ours), encode(&theirs));
        assert!(encode(&ours).contains("duration_bucket{le=\"0.0009765625\"} 8000\n"));
    }
}
