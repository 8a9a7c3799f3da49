//! The synchronisation primitives gil-core is built from, switched between
//! the real ones and loom's model-checked ones by `--cfg gil_loom`.
//!
//! Everything the protocol touches goes through this module, so a loom run
//! explores every interleaving of exactly the code that ships. The API is
//! parking_lot's (guards passed by `&mut`), which loom's types are adapted to.
//!
//! Timed waits are the one place the two worlds differ on purpose: loom has
//! no clock, so under loom a wait "times out" only when the model's clock
//! thread ticks (see `Gil::loom_tick`). Whether a timeout happens before a
//! notification is then a nondeterministic choice that loom explores.

#[cfg(not(gil_loom))]
mod imp {
    pub(crate) use parking_lot::{Mutex, MutexGuard};
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize};
    pub(crate) use std::thread_local;
    use std::time::Duration;

    /// A condition variable for [`Mutex`].
    #[derive(Default)]
    pub(crate) struct Condvar(parking_lot::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Self {
            Self(parking_lot::Condvar::new())
        }

        /// Blocks until notified (or a spurious wake-up).
        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            self.0.wait(guard);
        }

        /// Blocks until notified or `timeout` has passed; `true` on timeout.
        pub(crate) fn wait_timeout<T>(&self, guard: &mut MutexGuard<'_, T>, timeout: Duration) -> bool {
            self.0.wait_for(guard, timeout).timed_out()
        }

        pub(crate) fn notify_one(&self) {
            self.0.notify_one();
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }
}

#[cfg(gil_loom)]
mod imp {
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize};
    pub(crate) use loom::thread_local;
    use std::ops::{Deref, DerefMut};

    /// loom's mutex behind parking_lot's API (no poisoning).
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

    /// loom's condition variable behind parking_lot's API.
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
}

pub(crate) use imp::*;
