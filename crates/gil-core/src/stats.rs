//! Per-lock histograms of wait time and hold time, in power-of-two buckets
//! of nanoseconds. Off by default (hold times need a clock read on every
//! acquisition and release); [`Gil::set_histograms`](crate::Gil::set_histograms)
//! turns them on.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Number of buckets: bucket `i` counts durations in `[2^i, 2^(i+1))`
/// nanoseconds (bucket 0 also counts 0 ns), which covers every `u64`.
pub const HISTOGRAM_BUCKETS: usize = 64;

/// The live, concurrently updated form.
pub(crate) struct Histogram {
    buckets: [AtomicU64; HISTOGRAM_BUCKETS],
}

impl Histogram {
    pub(crate) fn new() -> Histogram {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    pub(crate) fn record(&self, ns: u64) {
        self.buckets[bucket_of(ns)].fetch_add(1, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: std::array::from_fn(|i| self.buckets[i].load(Relaxed)),
        }
    }

    pub(crate) fn reset(&self) {
        for b in &self.buckets {
            b.store(0, Relaxed);
        }
    }
}

fn bucket_of(ns: u64) -> usize {
    (63 - (ns | 1).leading_zeros()) as usize
}

/// A copy of one histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Bucket `i` counts durations in [`bucket_range(i)`](Self::bucket_range).
    pub buckets: [u64; HISTOGRAM_BUCKETS],
}

impl Default for HistogramSnapshot {
    fn default() -> Self {
        HistogramSnapshot {
            buckets: [0; HISTOGRAM_BUCKETS],
        }
    }
}

impl HistogramSnapshot {
    /// The nanoseconds bucket `i` covers: `[2^i, 2^(i+1))`, 0 included in
    /// bucket 0. Panics if `i >= HISTOGRAM_BUCKETS`.
    pub fn bucket_range(i: usize) -> std::ops::Range<u64> {
        assert!(i < HISTOGRAM_BUCKETS, "bucket {i} out of range");
        let lo = if i == 0 { 0 } else { 1u64 << i };
        let hi = if i == 63 { u64::MAX } else { 1u64 << (i + 1) };
        lo..hi
    }

    /// How many durations were recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// An upper bound for the `q`-quantile (`q` in `[0, 1]`, clamped): the
    /// top of the bucket that holds it. `None` if nothing was recorded.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(Duration::from_nanos(Self::bucket_range(i).end));
            }
        }
        None
    }
}

/// Both histograms of a lock, see [`Gil::histograms`](crate::Gil::histograms).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Histograms {
    /// Time from asking for the lock to getting it, for acquisitions that
    /// had to wait.
    pub wait: HistogramSnapshot,
    /// Time from getting the lock to letting go of it (a lazily released
    /// system call ends the hold).
    pub hold: HistogramSnapshot,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 0);
        assert_eq!(bucket_of(2), 1);
        assert_eq!(bucket_of(3), 1);
        assert_eq!(bucket_of(1024), 10);
        assert_eq!(bucket_of(2047), 10);
        assert_eq!(bucket_of(u64::MAX), 63);
        for i in 0..HISTOGRAM_BUCKETS {
            let r = HistogramSnapshot::bucket_range(i);
            assert_eq!(bucket_of(r.start), i);
            assert_eq!(bucket_of(r.end - 1), i);
        }
    }

    #[test]
    fn quantile_is_the_top_of_the_holding_bucket() {
        let h = Histogram::new();
        assert_eq!(h.snapshot().quantile(0.5), None);
        for _ in 0..99 {
            h.record(1_500); // bucket 10: [1024, 2048)
        }
        h.record(5_000_000); // bucket 22: [4194304, 8388608)
        let s = h.snapshot();
        assert_eq!(s.count(), 100);
        assert_eq!(s.quantile(0.5), Some(Duration::from_nanos(2048)));
        assert_eq!(s.quantile(0.99), Some(Duration::from_nanos(2048)));
        assert_eq!(s.quantile(1.0), Some(Duration::from_nanos(8_388_608)));
        h.reset();
        assert_eq!(h.snapshot().count(), 0);
    }
}
