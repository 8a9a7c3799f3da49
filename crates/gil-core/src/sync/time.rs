//! The real clock, shared by every OS's primitives: the protocol's
//! [`Clock`] and [`Stamp`]s (`std::time::Instant`, monotonic everywhere),
//! the bounded spin, and the one rule every timed wait follows: the
//! monotonic clock, not the OS wait's own, says when a wait has timed out.
//!
//! An OS wait may time out early by the monotonic clock: where it measures
//! a realtime deadline (a platform without `pthread_condattr_setclock`, or
//! Linux built with `--cfg gil_realtime_wait`), setting the wall clock
//! forwards ends it at once; Windows' waits count whole milliseconds. Such
//! a time-out is not reported: [`wait_until`] waits again for what is left.
//! (Setting the wall clock backwards stretches a realtime wait in progress
//! by the jump; no portable call can prevent that. See `pthread/realtime.rs`.)

use std::time::{Duration, Instant};

/// The protocol's clock: the monotonic clock. (Under loom, a count of the
/// model's ticks.) Kept in the data under the lock's mutex, so that the
/// loom version can be advanced there.
#[derive(Default)]
pub(crate) struct Clock;

/// A point in time read from a [`Clock`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Stamp(Instant);

impl Clock {
    pub(crate) fn now(&self) -> Stamp {
        Stamp(Instant::now())
    }

    /// Whether `d` has passed since `since`.
    pub(crate) fn passed(&self, since: Stamp, d: Duration) -> bool {
        since.0.elapsed() >= d
    }

    /// How much of `d` is left since `since` (at least 1 µs).
    pub(crate) fn left(&self, since: Stamp, d: Duration) -> Duration {
        d.saturating_sub(since.0.elapsed()).max(Duration::from_micros(1))
    }
}

/// Spins, without blocking, while `busy()` holds and `limit` has not passed.
pub(crate) fn spin_while(limit: Duration, mut busy: impl FnMut() -> bool) {
    let start = Instant::now();
    while busy() && start.elapsed() < limit {
        for _ in 0..32 {
            std::hint::spin_loop();
        }
    }
}

/// Runs `f` after `unlock()` and before `relock()`, which runs also if `f`
/// unwinds: a guard's `unlocked_spinning`, the same on every OS.
pub(crate) fn unlocked<R>(unlock: impl FnOnce(), relock: impl FnOnce(), f: impl FnOnce() -> R) -> R {
    /// Runs its closure when dropped.
    struct OnDrop<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for OnDrop<F> {
        fn drop(&mut self) {
            if let Some(relock) = self.0.take() {
                relock();
            }
        }
    }
    unlock();
    let _relock = OnDrop(Some(relock));
    f()
}

/// Waits with `os_wait` until it is woken or `timeout` has passed on the
/// monotonic clock; `true` on timeout. `os_wait(left)` blocks for about
/// `left` at most and says whether its own clock timed out; a time-out
/// that comes before the monotonic deadline waits again for the rest.
pub(crate) fn wait_until(timeout: Duration, mut os_wait: impl FnMut(Duration) -> bool) -> bool {
    let start = Instant::now();
    let mut left = timeout;
    loop {
        if !os_wait(left) {
            return false;
        }
        left = timeout.saturating_sub(start.elapsed());
        if left.is_zero() {
            return true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_os_time_out_before_the_monotonic_deadline_waits_again() {
        // An OS wait whose clock jumps forwards: each call "times out" at
        // once, as a realtime deadline does when the wall clock is set on.
        let timeout = Duration::from_millis(20);
        let start = Instant::now();
        let (mut calls, mut first_end) = (0, None);
        let timed_out = wait_until(timeout, |left| {
            calls += 1;
            assert!(left <= timeout, "asked to wait {left:?}, more than the timeout");
            std::thread::sleep(Duration::from_millis(1));
            first_end.get_or_insert_with(Instant::now);
            true
        });
        assert!(timed_out);
        assert!(start.elapsed() >= timeout, "timed out after {:?}", start.elapsed());
        // Unless the first 1 ms sleep overran the whole timeout (a busy
        // machine), its early time-out was followed by another wait.
        let overran = first_end.is_some_and(|end| end >= start + timeout);
        assert!(calls > 1 || overran, "an early time-out ended the wait");
    }

    #[test]
    fn a_wake_up_ends_the_wait_without_a_time_out() {
        let mut calls = 0;
        let timed_out = wait_until(Duration::from_secs(60), |_| {
            calls += 1;
            false
        });
        assert!(!timed_out);
        assert_eq!(calls, 1);
    }

    #[test]
    fn a_time_out_at_the_deadline_is_reported_once() {
        let timeout = Duration::from_millis(2);
        let mut calls = 0;
        let timed_out = wait_until(timeout, |left| {
            calls += 1;
            std::thread::sleep(left);
            true
        });
        assert!(timed_out);
        assert_eq!(calls, 1);
    }
}
