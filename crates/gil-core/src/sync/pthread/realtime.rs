//! Timed waits to a deadline on `CLOCK_REALTIME`, the default clock of a
//! POSIX condition variable: the fallback of a system that has neither
//! `pthread_condattr_setclock` nor a relative wait, as in CPython's
//! `Python/condvar.h` there. Chosen by `--cfg gil_realtime_wait` (CI runs
//! gil-core's real-thread tests with it on Linux).
//!
//! What a jump of the wall clock does to a wait in progress:
//! - set forwards, the OS wait ends early; `wait_until` sees on the
//!   monotonic clock that time is left and waits again: no interval ends
//!   early;
//! - set backwards by `J`, the OS wait lasts `J` longer (no portable call
//!   can prevent it): a waiter that keeps the switch interval asks for its
//!   drop request up to `J` late, once. A notification still ends the wait
//!   at once, so hand-offs are not delayed.

use std::time::Duration;

/// Nothing to set: `PTHREAD_COND_INITIALIZER` measures `CLOCK_REALTIME`.
///
/// # Safety
/// As `monotonic::init` (nothing is done here).
pub(super) unsafe fn init(_cond: *mut libc::pthread_cond_t) {}

/// Waits on `cond` for at most about `timeout` (a realtime deadline);
/// `true` if it timed out.
///
/// # Safety
/// `cond` was set up by [`init`]; the calling thread holds `mutex`.
pub(super) unsafe fn wait(
    cond: *mut libc::pthread_cond_t,
    mutex: *mut libc::pthread_mutex_t,
    timeout: Duration,
) -> bool {
    let deadline = super::deadline_after(libc::CLOCK_REALTIME, timeout);
    // SAFETY: by this function's contract; `deadline` is a valid timespec.
    let r = unsafe { libc::pthread_cond_timedwait(cond, mutex, &deadline) };
    debug_assert!(r == 0 || r == libc::ETIMEDOUT, "pthread_cond_timedwait failed: {r}");
    r == libc::ETIMEDOUT
}
