//! Timed waits on macOS and iOS, which have no `pthread_condattr_setclock`:
//! `pthread_cond_timedwait_relative_np`, as CPython's `Python/condvar.h`
//! uses there. Its timeout is relative; the kernel measures it on the
//! absolute time of the Mach clock (`mach_absolute_time`), which the wall
//! clock does not move, so setting the system time neither stretches nor
//! shortens a wait (Apple's libpthread and xnu sources; compile-checked
//! in CI, not run: no Mac here).

use std::time::Duration;

extern "C" {
    // <pthread.h> on Apple systems; the libc crate does not declare it.
    fn pthread_cond_timedwait_relative_np(
        cond: *mut libc::pthread_cond_t,
        mutex: *mut libc::pthread_mutex_t,
        reltime: *const libc::timespec,
    ) -> libc::c_int;
}

/// Nothing to set: relative waits need no clock attribute.
///
/// # Safety
/// As `monotonic::init` (nothing is done here).
pub(super) unsafe fn init(_cond: *mut libc::pthread_cond_t) {}

/// Waits on `cond` for at most `timeout`; `true` if it timed out.
///
/// # Safety
/// `cond` was set up by [`init`]; the calling thread holds `mutex`.
pub(super) unsafe fn wait(
    cond: *mut libc::pthread_cond_t,
    mutex: *mut libc::pthread_mutex_t,
    timeout: Duration,
) -> bool {
    let rel = super::timespec(timeout);
    // SAFETY: by this function's contract; `rel` is a valid timespec.
    let r = unsafe { pthread_cond_timedwait_relative_np(cond, mutex, &rel) };
    debug_assert!(
        r == 0 || r == libc::ETIMEDOUT,
        "pthread_cond_timedwait_relative_np failed: {r}"
    );
    r == libc::ETIMEDOUT
}
