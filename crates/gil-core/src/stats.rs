//! Per-lock histograms of wait time and hold time, in nanoseconds. Off by
//! default (hold times need a clock read on every acquisition and release);
//! [`Gil::set_histograms`](crate::Gil::set_histograms) turns them on.
//!
//! Each duration is counted once, in a *fine* bucket: the values below
//! [`FINE_SUB_BUCKETS`] have one bucket each, and every power of two above
//! is cut into [`FINE_SUB_BUCKETS`] equal parts (as HDR histograms do with
//! three significant bits), so a bucket is at most 1/8 of its lower bound
//! wide and a quantile read from it is within 12.5 % of the true value. The
//! power-of-two buckets are sums of fine ones, made when a snapshot is taken.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Number of power-of-two buckets: bucket `i` counts durations in
/// `[2^i, 2^(i+1))` nanoseconds (bucket 0 also counts 0 ns), which covers
/// every `u64`.
pub const HISTOGRAM_BUCKETS: usize = 64;

/// Fine buckets per power of two (and the number of values below the first
/// cut power of two, each with a bucket of its own).
pub const FINE_SUB_BUCKETS: usize = 8;

/// log2 of [`FINE_SUB_BUCKETS`].
const SUB_BITS: u32 = FINE_SUB_BUCKETS.trailing_zeros();

/// Number of fine buckets: one for each of the values 0..8, then eight for
/// each power of two from 2^3 to 2^63.
pub const HISTOGRAM_FINE_BUCKETS: usize = FINE_SUB_BUCKETS + (64 - SUB_BITS as usize) * FINE_SUB_BUCKETS;

/// The live, concurrently updated form: fine buckets only, one relaxed
/// increment per recorded duration.
pub(crate) struct Histogram {
    fine: [AtomicU64; HISTOGRAM_FINE_BUCKETS],
}

impl Histogram {
    pub(crate) fn new() -> Histogram {
        Histogram {
            fine: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    pub(crate) fn record(&self, ns: u64) {
        self.fine[fine_bucket_of(ns)].fetch_add(1, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> HistogramSnapshot {
        let fine: [u64; HISTOGRAM_FINE_BUCKETS] = std::array::from_fn(|i| self.fine[i].load(Relaxed));
        let mut buckets = [0; HISTOGRAM_BUCKETS];
        for (i, &n) in fine.iter().enumerate() {
            buckets[bucket_of(HistogramSnapshot::fine_bucket_range(i).start)] += n;
        }
        HistogramSnapshot { buckets, fine }
    }

    pub(crate) fn reset(&self) {
        for b in &self.fine {
            b.store(0, Relaxed);
        }
    }
}

fn bucket_of(ns: u64) -> usize {
    (63 - (ns | 1).leading_zeros()) as usize
}

fn fine_bucket_of(ns: u64) -> usize {
    if ns < FINE_SUB_BUCKETS as u64 {
        return ns as usize;
    }
    let power = 63 - ns.leading_zeros(); // >= SUB_BITS
    let sub = (ns >> (power - SUB_BITS)) as usize & (FINE_SUB_BUCKETS - 1);
    FINE_SUB_BUCKETS + (power - SUB_BITS) as usize * FINE_SUB_BUCKETS + sub
}

/// A copy of one histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Bucket `i` counts durations in [`bucket_range(i)`](Self::bucket_range).
    pub buckets: [u64; HISTOGRAM_BUCKETS],
    /// Fine bucket `i` counts durations in
    /// [`fine_bucket_range(i)`](Self::fine_bucket_range); `buckets` are
    /// their sums.
    pub fine: [u64; HISTOGRAM_FINE_BUCKETS],
}

impl Default for HistogramSnapshot {
    fn default() -> Self {
        HistogramSnapshot {
            buckets: [0; HISTOGRAM_BUCKETS],
            fine: [0; HISTOGRAM_FINE_BUCKETS],
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

    /// The nanoseconds fine bucket `i` covers: `[i, i + 1)` below 8, then
    /// each power of two `[2^p, 2^(p+1))` (p >= 3) in eight equal parts of
    /// `2^(p-3)`. The last ends at `u64::MAX`, which it also counts. Panics
    /// if `i >= HISTOGRAM_FINE_BUCKETS`.
    pub fn fine_bucket_range(i: usize) -> std::ops::Range<u64> {
        assert!(i < HISTOGRAM_FINE_BUCKETS, "fine bucket {i} out of range");
        if i < FINE_SUB_BUCKETS {
            return i as u64..i as u64 + 1;
        }
        let power = (i / FINE_SUB_BUCKETS - 1) as u32 + SUB_BITS;
        let sub = (i % FINE_SUB_BUCKETS) as u64;
        let width = 1u64 << (power - SUB_BITS);
        let lo = (FINE_SUB_BUCKETS as u64 + sub) << (power - SUB_BITS);
        lo..lo.saturating_add(width)
    }

    /// How many durations were recorded.
    pub fn count(&self) -> u64 {
        self.fine.iter().sum()
    }

    /// An upper bound for the `q`-quantile (`q` in `[0, 1]`, clamped): the
    /// top of the fine bucket that holds it, so within 12.5 % above the
    /// true value (exact below 8 ns). `None` if nothing was recorded.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &n) in self.fine.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(Duration::from_nanos(Self::fine_bucket_range(i).end));
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
    fn fine_buckets_tile_every_u64_in_eighths_of_their_power() {
        assert_eq!(HISTOGRAM_FINE_BUCKETS, 496);
        let mut next = 0u64;
        for i in 0..HISTOGRAM_FINE_BUCKETS {
            let r = HistogramSnapshot::fine_bucket_range(i);
            assert_eq!(r.start, next, "bucket {i} starts where {} ended", i.saturating_sub(1));
            assert!(r.end > r.start);
            assert_eq!(fine_bucket_of(r.start), i);
            assert_eq!(fine_bucket_of(r.end - 1), i);
            // At most an eighth of its lower bound wide (exact below 8).
            assert!(r.start < 8 || (r.end - r.start) * 8 <= r.start, "bucket {i}: {r:?}");
            // Inside one power-of-two bucket.
            assert_eq!(bucket_of(r.start), bucket_of(r.end - 1));
            next = r.end;
        }
        assert_eq!(next, u64::MAX);
        assert_eq!(fine_bucket_of(u64::MAX), HISTOGRAM_FINE_BUCKETS - 1);
    }

    #[test]
    fn quantile_is_the_top_of_the_holding_fine_bucket() {
        let h = Histogram::new();
        assert_eq!(h.snapshot().quantile(0.5), None);
        for _ in 0..99 {
            h.record(1_500); // [1408, 1536): 2^10 in eighths of 128
        }
        h.record(5_000_000); // [4718592, 5242880): 2^22 in eighths of 2^19
        let s = h.snapshot();
        assert_eq!(s.count(), 100);
        assert_eq!(s.quantile(0.5), Some(Duration::from_nanos(1536)));
        assert_eq!(s.quantile(0.99), Some(Duration::from_nanos(1536)));
        assert_eq!(s.quantile(1.0), Some(Duration::from_nanos(5_242_880)));
        // The power-of-two buckets are the fine ones summed.
        assert_eq!(s.buckets[10], 99);
        assert_eq!(s.buckets[22], 1);
        assert_eq!(s.buckets.iter().sum::<u64>(), 100);
        h.reset();
        assert_eq!(h.snapshot().count(), 0);
        assert_eq!(h.snapshot().buckets, [0; HISTOGRAM_BUCKETS]);
    }

    #[test]
    fn quantiles_are_within_an_eighth_of_the_true_value() {
        // Durations spread over nine decades: every reported quantile is at
        // least the true one and at most 12.5 % above it (+1 ns below 8).
        let mut values: Vec<u64> = (0..20_000u64)
            .map(|k| (k * k * 7919 + k * 104_729) % 3_000_000_007)
            .collect();
        let h = Histogram::new();
        for &v in &values {
            h.record(v);
        }
        values.sort_unstable();
        let s = h.snapshot();
        for q in [0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let rank = ((q * values.len() as f64).ceil() as usize).max(1);
            let truth = values[rank - 1];
            let got = s.quantile(q).unwrap().as_nanos() as u64;
            assert!(got > truth, "q {q}: {got} <= {truth}");
            assert!(got - truth <= (truth / 8).max(1), "q {q}: {got} vs {truth}");
        }
    }
}
