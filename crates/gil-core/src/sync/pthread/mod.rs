//! POSIX threads' mutex and condition variable, with the small API the lock
//! uses: `Mutex::lock` returns a guard, condition variables wait on a guard
//! passed by `&mut`.
//!
//! How a timed wait measures its time is the one thing that differs
//! between the POSIX systems, and it is chosen here, once, as CPython's
//! `Python/condvar.h` chooses:
//!
//! | module          | where                                        | the OS wait's clock                |
//! |-----------------|----------------------------------------------|------------------------------------|
//! | `monotonic.rs`  | Linux, the BSDs, every other POSIX system    | `CLOCK_MONOTONIC` (`pthread_condattr_setclock`) |
//! | `apple.rs`      | macOS, iOS (no `pthread_condattr_setclock`)  | a relative wait (`pthread_cond_timedwait_relative_np`) |
//! | `realtime.rs`   | any of them built with `--cfg gil_realtime_wait` | `CLOCK_REALTIME`, a deadline   |
//!
//! Whichever it is, the monotonic clock decides when a wait has timed out
//! (`super::time::wait_until`). `realtime.rs` is the fallback of a system
//! with neither call; CI runs gil-core's real-thread tests with it on Linux,
//! so the path that differs from Linux's is exercised there.
//!
//! Each pthread object lives in its own heap allocation: POSIX forbids
//! using a copy of an initialised mutex or condition variable, so their
//! addresses must never change, even while the Rust value that owns them
//! moves.
//!
//! A library thread ([`spawn_detached`]) keeps the shared library mapped
//! until it has ended, where the system can: see there.

pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize};

pub(crate) use super::time::{spin_while, Clock, Stamp};

use super::time::{unlocked, wait_until};
use super::Clocked;
use crate::cancel::NoCancel;
use std::cell::UnsafeCell;
use std::io;
use std::ops::{Deref, DerefMut};
use std::time::{Duration, Instant};

#[cfg(all(target_vendor = "apple", not(gil_realtime_wait)))]
#[path = "apple.rs"]
mod timed;
#[cfg(all(not(target_vendor = "apple"), not(gil_realtime_wait)))]
#[path = "monotonic.rs"]
mod timed;
#[cfg(gil_realtime_wait)]
#[path = "realtime.rs"]
mod timed;

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
    fn lock_spinning(&self, limit: Duration) -> MutexGuard<'_, T> {
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

impl<T> MutexGuard<'_, T> {
    /// Runs `f` with the mutex unlocked, then locks it again as
    /// `Mutex::lock_spinning` does with `limit`, also if `f` unwinds: for a
    /// thread that watches for a hand-off without the mutex (parking_lot's
    /// `MutexGuard::unlocked`). `guard` is lent out meanwhile, so nothing
    /// can reach the value through it while the mutex is not held.
    pub(crate) fn unlocked_spinning<R>(guard: &mut Self, limit: Duration, f: impl FnOnce() -> R) -> R {
        let mutex = guard.mutex;
        // A second guard for the lock `guard` holds, dropped, unlocks; a
        // new lock's guard, forgotten, leaves `guard` standing for it.
        unlocked(
            || drop(MutexGuard { mutex }),
            || std::mem::forget(mutex.lock_spinning(limit)),
            f,
        )
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

/// A condition variable whose timed waits end by the monotonic clock.
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
        // SAFETY: `raw` is at its final address and not yet used.
        unsafe { timed::init(raw.get()) };
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

    /// Blocks until notified or `timeout` has passed on the monotonic
    /// clock; `true` on timeout.
    pub(crate) fn wait_timeout<T>(&self, guard: &mut MutexGuard<'_, T>, timeout: Duration) -> bool {
        let _no_cancel = NoCancel::new();
        let (cond, mutex) = (self.raw.get(), guard.mutex.raw.get());
        wait_until(timeout, |left| {
            // SAFETY: the guard proves this thread holds `mutex`, which the
            // wait releases and takes back before returning; `cond` was
            // initialised by `timed::init`.
            unsafe { timed::wait(cond, mutex, left) }
        })
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

/// `clock` now plus `timeout`, saturating far in the future: the deadline
/// of a `pthread_cond_timedwait` on a condition variable that measures
/// `clock`.
#[cfg_attr(
    all(target_vendor = "apple", not(gil_realtime_wait)),
    allow(dead_code, reason = "Apple's timed waits are relative")
)]
fn deadline_after(clock: libc::clockid_t, timeout: Duration) -> libc::timespec {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is valid for writing; both clocks used here always exist.
    unsafe { libc::clock_gettime(clock, &mut now) };
    let rel = timespec(timeout);
    let mut sec = now.tv_sec.saturating_add(rel.tv_sec);
    let mut nsec = now.tv_nsec + rel.tv_nsec;
    if nsec >= 1_000_000_000 {
        nsec -= 1_000_000_000;
        sec = sec.saturating_add(1);
    }
    libc::timespec {
        tv_sec: sec,
        tv_nsec: nsec,
    }
}

/// `d` as a `timespec`, saturating far in the future.
fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
        // Below 10^9: fits every platform's `c_long`.
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

/// Starts a thread named `name` that runs `body` and is never joined.
///
/// The shared library its code is in must stay mapped until the thread
/// has ended, whatever `dlclose` a program calls meanwhile, and no POSIX
/// call gives a reference back without returning into the library. glibc
/// keeps a library loaded while a thread has a thread-local destructor
/// registered from it (`__cxa_thread_atexit_impl`, which std's
/// thread-locals use there) until the destructor has run at the thread's
/// exit, after `body` returned: the thread registers one first. musl
/// never unloads a library, and Apple's dyld never one with thread-local
/// variables, as this one has (`docs/platforms.md`).
pub(crate) fn spawn_detached(name: &str, body: impl FnOnce() + Send + 'static) -> io::Result<()> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            hold_library();
            body();
        })
        .map(drop)
}

/// Registers a thread-local destructor for the calling thread (once).
fn hold_library() {
    /// Nothing to drop: its destructor's registration is the point.
    struct Held;
    impl Drop for Held {
        fn drop(&mut self) {}
    }
    std::thread_local! {
        static HELD: Held = const { Held };
    }
    HELD.with(|_| {});
}
