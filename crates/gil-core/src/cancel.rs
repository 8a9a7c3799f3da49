//! Deferred thread cancellation (`pthread_cancel`) kept out of the lock.
//!
//! A cancellation acted on inside one of the lock's calls would unwind
//! through its frames with its mutex held, a hook half run or a file half
//! written; glibc's forced unwind then meets the library's `catch_unwind`
//! (or an `extern "C"` boundary) and the process aborts: "FATAL: exception
//! not rethrown". So no cancellation point reached inside the library acts
//! while a [`NoCancel`] lives: the condition-variable waits, every callback
//! the lock runs (event hooks, the drop-request callback, abort checks,
//! `foreach` callbacks of the C ABI) and the library's own file I/O (trace
//! files). A pending request is acted on at the thread's next cancellation
//! point after the library's call returns, as for `pthread_mutex_lock`.
//!
//! A thread with *asynchronous* cancellation may be cancelled anywhere,
//! and also when a guard re-enables cancellation. Switching it to deferred
//! only around calls on the lock is not enough: glibc before 2.41 acts on
//! a cancel signal sent while the thread was asynchronous when the signal
//! arrives later, inside a cancellable system call (the condition-variable
//! waits), whatever the thread's state and type are by then. So such a
//! thread must be deferred from its first call on the lock and stay so;
//! MicroPython's shim does this and acts on a pending cancel itself after
//! each call (see micropython/shim). Linux only (glibc, musl): elsewhere the guard does
//! nothing, and so it does under loom, whose model threads share one OS
//! thread (nested guards of two of them would restore out of order).

/// Disables the calling thread's cancellation while it lives and restores
/// the previous state when dropped (nested guards restore in turn).
#[must_use = "cancellation is disabled only while the guard lives"]
pub struct NoCancel {
    #[cfg(all(target_os = "linux", not(gil_loom)))]
    old: libc::c_int,
    /// Not `Send`: the state belongs to the thread that made the guard.
    _thread: std::marker::PhantomData<*const ()>,
}

#[cfg(all(target_os = "linux", not(gil_loom)))]
mod ffi {
    // glibc, musl and uClibc (<pthread.h>); the libc crate does not declare
    // these for Linux.
    pub(super) const PTHREAD_CANCEL_DISABLE: libc::c_int = 1;
    extern "C" {
        pub(super) fn pthread_setcancelstate(state: libc::c_int, oldstate: *mut libc::c_int) -> libc::c_int;
    }
}

impl NoCancel {
    /// Disables cancellation of the calling thread until the guard is dropped.
    #[cfg(all(target_os = "linux", not(gil_loom)))]
    #[inline]
    pub fn new() -> Self {
        let mut old = ffi::PTHREAD_CANCEL_DISABLE;
        // SAFETY: `old` is valid for writing; the call only changes this
        // thread's cancelability state.
        unsafe { ffi::pthread_setcancelstate(ffi::PTHREAD_CANCEL_DISABLE, &mut old) };
        NoCancel {
            old,
            _thread: std::marker::PhantomData,
        }
    }

    /// Does nothing on this system (no deferred cancellation to keep out).
    #[cfg(any(not(target_os = "linux"), gil_loom))]
    #[inline]
    pub fn new() -> Self {
        NoCancel {
            _thread: std::marker::PhantomData,
        }
    }
}

impl Default for NoCancel {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NoCancel {
    #[inline]
    fn drop(&mut self) {
        #[cfg(all(target_os = "linux", not(gil_loom)))]
        // SAFETY: restores the state saved by `new` on this same thread (the
        // guard is not `Send`).
        unsafe {
            ffi::pthread_setcancelstate(self.old, std::ptr::null_mut())
        };
    }
}

impl std::fmt::Debug for NoCancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NoCancel")
    }
}
