//! Timed waits on `CLOCK_MONOTONIC`, set on the condition variable with
//! `pthread_condattr_setclock` (Linux, the BSDs), as CPython's
//! `PyCOND_TIMEDWAIT` does where the call exists. Setting the wall clock
//! neither stretches nor shortens a wait.

use std::time::Duration;

/// Makes `cond` measure its timed waits on `CLOCK_MONOTONIC`.
///
/// # Safety
/// `cond` points to a condition variable at its final address, not yet
/// used by any thread.
pub(super) unsafe fn init(cond: *mut libc::pthread_cond_t) {
    // SAFETY:
    // - `attr` is initialised by `pthread_condattr_init` before use and
    //   destroyed after;
    // - `cond` is at its final address and unused (this function's
    //   contract), so initialising it again is allowed.
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
        assert_eq!(libc::pthread_cond_init(cond, &attr), 0, "pthread_cond_init failed");
        libc::pthread_condattr_destroy(&mut attr);
    }
}

/// Waits on `cond` for at most `timeout`; `true` if it timed out.
///
/// # Safety
/// `cond` was set up by [`init`]; the calling thread holds `mutex`.
pub(super) unsafe fn wait(
    cond: *mut libc::pthread_cond_t,
    mutex: *mut libc::pthread_mutex_t,
    timeout: Duration,
) -> bool {
    let deadline = super::deadline_after(libc::CLOCK_MONOTONIC, timeout);
    // SAFETY: by this function's contract; `deadline` is a valid timespec.
    let r = unsafe { libc::pthread_cond_timedwait(cond, mutex, &deadline) };
    debug_assert!(r == 0 || r == libc::ETIMEDOUT, "pthread_cond_timedwait failed: {r}");
    r == libc::ETIMEDOUT
}
