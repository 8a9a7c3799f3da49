//! loom's model-checked primitives behind the same API as [`super::pthread`]
//! (guards passed by `&mut`, no poisoning). Timed waits are not here: under
//! loom a wait "times out" only when the model's clock ticks (see
//! `Gil::loom_tick`).

pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize};
pub(crate) use loom::thread::yield_now;
pub(crate) use loom::thread_local;
use std::ops::{Deref, DerefMut};

/// loom's mutex (no poisoning).
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

/// Holds `Some` except for the instant a condvar wait has taken it.
pub(crate) struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(loom::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        MutexGuard(Some(self.0.lock().unwrap_or_else(|e| e.into_inner())))
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

    pub(crate) fn notify_one(&self) {
        self.0.notify_one();
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}
