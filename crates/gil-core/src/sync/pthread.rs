//! POSIX threads' mutex and condition variable, with the small API the lock
//! uses: `Mutex::lock` returns a guard, condition variables wait on a guard
//! passed by `&mut`, a timed wait measures `CLOCK_MONOTONIC` (as CPython's
//! `PyCOND_TIMEDWAIT` does where `pthread_condattr_setclock` exists).
//!
//! Each pthread object lives in its own heap allocation: POSIX forbids
//! using a copy of an initialised mutex or condition variable, so their
//! addresses must never change, even while the Rust value that owns them
//! moves.

pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize};
pub(crate) use std::thread_local;

use super::Clocked;
use crate::cancel::NoCancel;
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::time::{Duration, Instant};

/// A mutual-exclusion lock around a `T` (no poisoning: a panic while it is
/// held unlocks it and leaves `T` as it was).
pub(crate) struct Mutex<T> {
    raw: Box<UnsafeCell<libc::pthread_mutex_t>>,
    value: UnsafeCell<T>,
}

// SAFETY: the mutex hands out `&mut T` to one thread at a time, so sending
// or sharing it is sound whenever `T` itself may move between threads.
unsafe impl<T: Send> Send for Mutex<T> {}
// SAFETY: as above; `T` is only reached through a guard.
unsafe impl<T: Send> Sync for Mutex<T> {}

/// Proof that the calling thread holds a [`Mutex`]; unlocks on drop.
pub(crate) struct MutexGuard<'a, T> {
    mutex: &'a Mutex<T>,
}

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex {
            raw: Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER)),
            value: UnsafeCell::new(value),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        // SAFETY: `raw` is an initialised mutex at a fixed address; the
        // mutex is not recursive and no caller locks it twice (the guard
        // is the only way to hold it, and the lock never re-enters).
        let r = unsafe { libc::pthread_mutex_lock(self.raw.get()) };
        assert_eq!(r, 0, "pthread_mutex_lock failed");
        MutexGuard { mutex: self }
    }

    /// Locks, but while another thread holds the mutex tries again for up
    /// to `limit` before sleeping: for a thread that has just spun for a
    /// hand-off, whose counterpart holds the mutex for microseconds of
    /// bookkeeping. Sleeping on the mutex there would cost the wake-up the
    /// spin was meant to save.
    pub(crate) fn lock_spinning(&self, limit: Duration) -> MutexGuard<'_, T> {
        let start = Instant::now();
        loop {
            // SAFETY: as in `lock`; a failed try leaves the mutex as it was.
            let r = unsafe { libc::pthread_mutex_trylock(self.raw.get()) };
            if r == 0 {
                return MutexGuard { mutex: self };
            }
            debug_assert_eq!(r, libc::EBUSY, "pthread_mutex_trylock failed");
            if start.elapsed() >= limit {
                return self.lock();
            }
            for _ in 0..32 {
                std::hint::spin_loop();
            }
        }
    }
}

impl<T> Drop for Mutex<T> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no guard exists, so the mutex is unlocked
        // and nobody waits on it.
        unsafe { libc::pthread_mutex_destroy(self.raw.get()) };
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the guard exists, so this thread holds the mutex.
        let r = unsafe { libc::pthread_mutex_unlock(self.mutex.raw.get()) };
        debug_assert_eq!(r, 0, "pthread_mutex_unlock failed");
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this thread holds the mutex, so nobody writes `value`.
        unsafe { &*self.mutex.value.get() }
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this thread holds the mutex, and `&mut self` makes this
        // the only reference through the guard.
        unsafe { &mut *self.mutex.value.get() }
    }
}

/// A condition variable whose timed waits use `CLOCK_MONOTONIC`.
pub(crate) struct Condvar {
    raw: Box<UnsafeCell<libc::pthread_cond_t>>,
}

// SAFETY: pthread condition variables are made to be shared between threads.
unsafe impl Send for Condvar {}
// SAFETY: as above.
unsafe impl Sync for Condvar {}

impl Condvar {
    pub(crate) fn new() -> Self {
        let raw = Box::new(UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER));
        // SAFETY:
        // - `attr` is initialised by `pthread_condattr_init` before use and
        //   destroyed after;
        // - `raw` is at its final address, and initialised exactly once.
        unsafe {
            let mut attr: libc::pthread_condattr_t = std::mem::zeroed();
            assert_eq!(
                libc::pthread_condattr_init(&mut attr),
                0,
                "pthread_condattr_init failed"
            );
            assert_eq!(
                libc::pthread_condattr_setclock(&mut attr, libc::CLOCK_MONOTONIC),
                0,
                "pthread_condattr_setclock(CLOCK_MONOTONIC) failed"
            );
            assert_eq!(libc::pthread_cond_init(raw.get(), &attr), 0, "pthread_cond_init failed");
            libc::pthread_condattr_destroy(&mut attr);
        }
        Condvar { raw }
    }

    /// Blocks until notified (or a spurious wake-up).
    pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        let _no_cancel = NoCancel::new();
        // SAFETY: the guard proves this thread holds `guard.mutex`, which
        // `pthread_cond_wait` releases and takes back before returning.
        let r = unsafe { libc::pthread_cond_wait(self.raw.get(), guard.mutex.raw.get()) };
        debug_assert_eq!(r, 0, "pthread_cond_wait failed");
    }

    /// Blocks until notified or `timeout` (at least 1 µs) has passed, for
    /// data that carries a [`Clock`]; `true` on timeout.
    pub(crate) fn wait_for<T: Clocked>(&self, guard: &mut MutexGuard<'_, T>, timeout: Duration) -> bool {
        self.wait_timeout(guard, timeout.max(Duration::from_micros(1)))
    }

    /// Blocks until notified or `timeout` has passed; `true` on timeout.
    pub(crate) fn wait_timeout<T>(&self, guard: &mut MutexGuard<'_, T>, timeout: Duration) -> bool {
        let deadline = deadline_after(timeout);
        let _no_cancel = NoCancel::new();
        // SAFETY: as in `wait`; `deadline` is a valid timespec.
        let r = unsafe { libc::pthread_cond_timedwait(self.raw.get(), guard.mutex.raw.get(), &deadline) };
        debug_assert!(r == 0 || r == libc::ETIMEDOUT, "pthread_cond_timedwait failed: {r}");
        r == libc::ETIMEDOUT
    }

    pub(crate) fn notify_one(&self) {
        // SAFETY: an initialised condition variable at a fixed address.
        unsafe { libc::pthread_cond_signal(self.raw.get()) };
    }

    pub(crate) fn notify_all(&self) {
        // SAFETY: as in `notify_one`.
        unsafe { libc::pthread_cond_broadcast(self.raw.get()) };
    }
}

impl Drop for Condvar {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: nobody waits on it any more.
        unsafe { libc::pthread_cond_destroy(self.raw.get()) };
    }
}

/// `CLOCK_MONOTONIC` now plus `timeout`, saturating far in the future.
fn deadline_after(timeout: Duration) -> libc::timespec {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is valid for writing; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let secs = libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX);
    let mut sec = now.tv_sec.saturating_add(secs);
    let mut nsec = now.tv_nsec + libc::c_long::from(timeout.subsec_nanos() as i32);
    if nsec >= 1_000_000_000 {
        nsec -= 1_000_000_000;
        sec = sec.saturating_add(1);
    }
    libc::timespec {
        tv_sec: sec,
        tv_nsec: nsec,
    }
}

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
pub(crate) fn spin_while(limit: Duration, busy: impl Fn() -> bool) {
    let start = Instant::now();
    while busy() && start.elapsed() < limit {
        for _ in 0..32 {
            std::hint::spin_loop();
        }
    }
}
