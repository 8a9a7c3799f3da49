//! loom's model-checked primitives behind the same API as [`super::pthread`]
//! (guards passed by `&mut`, no poisoning). Time is a count of the model's
//! clock ticks (see `Gil::loom_tick`): any duration has passed once the
//! clock has ticked, and a timed wait "times out" when a tick wakes it.

use super::Clocked;
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize};
pub(crate) use loom::thread::yield_now;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

/// loom's mutex (no poisoning).
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

/// Holds `Some` except while a condvar wait, or `unlocked_spinning`, has
/// taken it.
pub(crate) struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>, &'a Mutex<T>);

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(loom::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        MutexGuard(Some(self.0.lock().unwrap_or_else(|e| e.into_inner())), self)
    }
}

impl<T> MutexGuard<'_, T> {
    /// Runs `f` with the mutex unlocked, then locks it again (see
    /// `pthread::MutexGuard::unlocked_spinning`; the model has no time to
    /// spin for).
    pub(crate) fn unlocked_spinning<R>(guard: &mut Self, _limit: Duration, f: impl FnOnce() -> R) -> R {
        drop(guard.0.take().expect("guard present outside a wait"));
        let out = f();
        guard.0 = Some(guard.1.lock().0.take().expect("a fresh guard"));
        out
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0.as_ref().expect("guard present outside a wait")
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0.as_mut().expect("guard present outside a wait")
    }
}

/// loom's condition variable.
pub(crate) struct Condvar(loom::sync::Condvar);

impl Condvar {
    pub(crate) fn new() -> Self {
        Self(loom::sync::Condvar::new())
    }

    pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        let inner = guard.0.take().expect("guard present outside a wait");
        guard.0 = Some(self.0.wait(inner).unwrap_or_else(|e| e.into_inner()));
    }

    /// Waits until notified; `true` if the model's clock ticked meanwhile
    /// (the wait "timed out"; the tick notifies every waiter).
    pub(crate) fn wait_for<T: Clocked>(&self, guard: &mut MutexGuard<'_, T>, _timeout: Duration) -> bool {
        let before = guard.clock().ticks;
        self.wait(guard);
        guard.clock().ticks != before
    }

    pub(crate) fn notify_one(&self) {
        self.0.notify_one();
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}

/// The model's clock: how many times it has ticked.
#[derive(Default)]
pub(crate) struct Clock {
    ticks: u64,
}

/// A tick count read from a [`Clock`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Stamp(u64);

impl Clock {
    pub(crate) fn now(&self) -> Stamp {
        Stamp(self.ticks)
    }

    /// Any duration has passed once the clock has ticked since `since`.
    pub(crate) fn passed(&self, since: Stamp, _d: Duration) -> bool {
        self.ticks != since.0
    }

    /// Time is not measured: all of `d` is left.
    pub(crate) fn left(&self, _since: Stamp, d: Duration) -> Duration {
        d
    }

    /// One tick of the model's clock.
    pub(crate) fn tick(&mut self) {
        self.ticks += 1;
    }
}

/// A spin is one look: loom explores the interleavings a longer one would
/// allow.
pub(crate) fn spin_while(_limit: Duration, mut busy: impl FnMut() -> bool) {
    let _ = busy();
    yield_now();
}
