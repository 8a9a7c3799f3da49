//! The lock itself: create, free, acquire, release, drop requests, the
//! switch interval, fork.

use super::*;

/// A reason for `gil_release`: one of the `GIL_RELEASE_*` values.
pub type gil_release_reason_t = u32;
/// Around a blocking call. If a drop request is pending, it is answered like
/// `GIL_RELEASE_FORCED` (as CPython's `drop_gil`).
pub const GIL_RELEASE_VOLUNTARY: gil_release_reason_t = 0;
/// Answering a drop request: returns only once another thread has taken the
/// lock, unless nobody waits.
pub const GIL_RELEASE_FORCED: gil_release_reason_t = 1;
/// The thread never takes the lock again: never waits, and the token is
/// forgotten as last holder.
pub const GIL_RELEASE_FINAL: gil_release_reason_t = 2;

/// Called as `callback(user_data, holder)` when a waiter asks `holder` to
/// drop the lock. It runs on the waiting thread, under the lock's internal
/// mutex, while `holder` still holds the lock, so it may touch the holder's
/// per-thread state. It must be short and must not block. Calls on the same
/// lock from inside it that would wait (acquire, release, hooks, traces,
/// free) return `GIL_ERR_REENTRANT` instead of deadlocking. It may be called
/// from any thread. It runs with the thread's cancellation disabled (see
/// "Cancellation" at the top of this header): a pending `pthread_cancel` of
/// the waiter acts at its next cancellation point after `gil_acquire` (or
/// `gil_acquire_or_abort`) returns.
pub type gil_drop_request_cb = Option<unsafe extern "C" fn(user_data: *mut c_void, holder: *mut c_void)>;

/// Called as `callback(user_data)` by `gil_acquire_or_abort` each time a
/// switch interval passes without getting the lock; non-zero gives up. Same
/// restrictions as `gil_drop_request_cb`, and also run with cancellation
/// disabled: a pending `pthread_cancel` acts at the thread's next
/// cancellation point after `gil_acquire_or_abort` returns.
pub type gil_abort_cb = Option<unsafe extern "C" fn(user_data: *mut c_void) -> bool>;

/// A lock. Opaque: create with `gil_new`, destroy with `gil_free`.
pub struct gil_t {
    pub(crate) gil: Gil,
    /// The running trace (`gil_trace_start`), if any.
    pub(crate) trace: Mutex<Option<Tracing>>,
}

/// A trace in progress: its hook on the lock and the file it goes to.
pub(crate) struct Tracing {
    pub(crate) hook: OwnedHook,
    pub(crate) session: TraceSession,
}

impl gil_t {
    pub(crate) fn tracing(&self) -> MutexGuard<'_, Option<Tracing>> {
        // Nothing under this mutex can be left half-changed by a panic.
        self.trace.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `GIL_ERR_REENTRANT` inside one of this lock's callbacks: the trace's
    /// mutex may be held by a thread that waits for that callback to end
    /// (`gil_trace_stop` does).
    pub(crate) fn check_not_in_callback(&self) -> Result<(), gil_result_t> {
        if self.gil.in_callback() {
            Err(GIL_ERR_REENTRANT)
        } else {
            Ok(())
        }
    }
}

/// The C callback and its user data, callable from any thread (the caller of
/// `gil_new` promises that, see `gil_drop_request_cb`).
pub(crate) struct DropCallback {
    pub(crate) callback: unsafe extern "C" fn(*mut c_void, *mut c_void),
    pub(crate) user_data: *mut c_void,
}
// SAFETY: `gil_drop_request_cb`'s contract makes the callback and its user
// data usable from any thread; we only pass the pointer back.
unsafe impl Send for DropCallback {}
// SAFETY: as above; we never dereference `user_data`.
unsafe impl Sync for DropCallback {}

impl DropCallback {
    pub(crate) fn call(&self, holder: Token) {
        // SAFETY: the caller of gil_new promised a callback that accepts its
        // user data and a holder token, from any thread.
        unsafe { (self.callback)(self.user_data, holder.get() as *mut c_void) }
    }
}

/// Creates a free lock. `config` may be NULL for the defaults. On success
/// `*gil_out` is the new lock. Any thread; does not block.
///
/// # Safety
/// `config` is NULL or points to a `gil_config_t` whose first `struct_size`
/// bytes are readable; `gil_out` is valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn gil_new(config: *const gil_config_t, gil_out: *mut *mut gil_t) -> gil_result_t {
    guard_result(|| {
        if gil_out.is_null() {
            return Err(GIL_ERR_NULL_ARGUMENT);
        }
        let builder = if config.is_null() {
            GilConfig::new()
        } else {
            // SAFETY: forwarded from this function's contract.
            unsafe { read_config(config) }?.builder()?
        };
        let gil = Gil::new(builder).map_err(map_err)?;
        let boxed = Box::into_raw(Box::new(gil_t {
            gil,
            trace: Mutex::new(None),
        }));
        // SAFETY: checked non-NULL above; valid for writes by the contract.
        unsafe { gil_out.write(boxed) };
        Ok(())
    })
}

/// Destroys a lock. NULL is a no-op (`GIL_OK`). A lock that is held or
/// awaited is not freed: `GIL_ERR_BUSY`. A lock only reserved by a lazy
/// release (`gil_is_reserved`) is not held: it is freed. No thread may be
/// inside (or enter) another call on the lock while it is freed, nor call
/// from inside one of its callbacks (`GIL_ERR_REENTRANT`). Once every lock
/// is freed and no call runs, a program may unload the shared library
/// (`dlclose`, `FreeLibrary`), even while the monitor thread of a monitor
/// preset has not yet exited: on Windows, glibc, musl and macOS that is
/// safe (`docs/platforms.md`, "Unloading the library").
///
/// # Safety
/// `gil` is NULL or a pointer from `gil_new` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn gil_free(gil: *mut gil_t) -> gil_result_t {
    guard_result(|| {
        if gil.is_null() {
            return Ok(());
        }
        // SAFETY: non-NULL and live by the contract.
        let lock = unsafe { &(*gil).gil };
        if lock.in_callback() {
            return Err(GIL_ERR_REENTRANT);
        }
        if !lock.settle() {
            return Err(GIL_ERR_BUSY);
        }
        // SAFETY: from `Box::into_raw` in gil_new; the caller gives it up.
        drop(unsafe { Box::from_raw(gil) });
        Ok(())
    })
}

/// Blocks until `token` (non-NULL, naming the calling thread) holds the
/// lock. While it waits, each switch interval without a switch raises a drop
/// request on the holder. On Linux, waiting is no cancellation point for a
/// thread with deferred cancellation (as for `pthread_mutex_lock`): a
/// `pthread_cancel` takes effect at its next cancellation point after the
/// call (a thread with asynchronous cancellation: see the header's
/// opening comment). Any thread; blocks.
///
/// # Safety
/// `gil` is NULL or a live lock from `gil_new`.
#[no_mangle]
pub unsafe extern "C" fn gil_acquire(gil: *mut gil_t, token: *mut c_void) -> gil_result_t {
    guard_result_hot(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        gil.acquire(self::token(token)?).map_err(map_err)
    })
}

/// Like `gil_acquire`, but after each switch interval spent waiting calls
/// `should_abort(user_data)`; if it returns true, gives up with
/// `GIL_ERR_ABORTED` without the lock. `should_abort` may be NULL (never
/// abort). Any thread; blocks.
///
/// # Safety
/// `gil` is NULL or a live lock; `should_abort`, if set, accepts `user_data`.
#[no_mangle]
pub unsafe extern "C" fn gil_acquire_or_abort(
    gil: *mut gil_t,
    token: *mut c_void,
    should_abort: gil_abort_cb,
    user_data: *mut c_void,
) -> gil_result_t {
    guard_result_hot(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        let token = self::token(token)?;
        let mut check = || match should_abort {
            // SAFETY: the caller promised `should_abort` accepts `user_data`.
            Some(f) => unsafe { f(user_data) },
            None => false,
        };
        gil.acquire_or_abort(token, &mut check).map_err(map_err)
    })
}

/// Takes the lock if it is free right now: `*acquired_out` is true if
/// `token` now holds it, false if another token does. Any thread; does not
/// wait for the lock (only, briefly, for its internal mutex).
///
/// # Safety
/// `gil` is NULL or a live lock; `acquired_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_try_acquire(gil: *mut gil_t, token: *mut c_void, acquired_out: *mut bool) -> gil_result_t {
    guard_result_hot(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        let token = self::token(token)?;
        if acquired_out.is_null() {
            return Err(GIL_ERR_NULL_ARGUMENT);
        }
        let got = gil.try_acquire(token).map_err(map_err)?;
        // SAFETY: checked non-NULL; writable by the contract.
        unsafe { write_out(acquired_out, got) }
    })
}

/// Lets go of the lock held by `token`. `GIL_RELEASE_FORCED` (and
/// `GIL_RELEASE_VOLUNTARY` with a drop request pending) blocks until another
/// thread has taken the lock, unless nobody waits; the others do not block.
/// Called by the thread that holds the lock.
///
/// # Safety
/// `gil` is NULL or a live lock.
#[no_mangle]
pub unsafe extern "C" fn gil_release(
    gil: *mut gil_t,
    token: *mut c_void,
    reason: gil_release_reason_t,
) -> gil_result_t {
    guard_result_hot(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        let token = self::token(token)?;
        let reason = match reason {
            GIL_RELEASE_VOLUNTARY => ReleaseReason::Voluntary,
            GIL_RELEASE_FORCED => ReleaseReason::Forced,
            GIL_RELEASE_FINAL => ReleaseReason::Final,
            _ => return Err(GIL_ERR_INVALID_ARGUMENT),
        };
        gil.release(token, reason).map_err(map_err)
    })
}

/// Whether a waiter has asked the current holder to drop the lock. One
/// relaxed load: cheap enough to poll often. False for NULL. Any thread
/// (only the holder should act on it); does not block.
///
/// # Safety
/// `gil` is NULL or a live lock.
#[no_mangle]
pub unsafe extern "C" fn gil_drop_requested(gil: *const gil_t) -> bool {
    // SAFETY: forwarded from this function's contract.
    guard_hot(false, || unsafe { lock_ref(gil) }.is_ok_and(Gil::drop_requested))
}

/// For hosts that poll: if a drop was requested, releases with
/// `GIL_RELEASE_FORCED` and re-acquires. `*yielded_out` (may be NULL) tells
/// whether it did. Called by the holder; may block.
///
/// # Safety
/// `gil` is NULL or a live lock; `yielded_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_handle_drop_request(
    gil: *mut gil_t,
    token: *mut c_void,
    yielded_out: *mut bool,
) -> gil_result_t {
    guard_result_hot(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        let yielded = gil.handle_drop_request(self::token(token)?).map_err(map_err)?;
        if !yielded_out.is_null() {
            // SAFETY: non-NULL; writable by the contract.
            unsafe { yielded_out.write(yielded) };
        }
        Ok(())
    })
}

/// `*us_out` = the switch interval in microseconds, as set. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `us_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_switch_interval(gil: *const gil_t, us_out: *mut u64) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { read_into(gil, us_out, |gil| gil.switch_interval_us()) }
}

/// Sets the switch interval (microseconds, 0 behaving as 1); waiters use it
/// from their next wait. Above `GIL_MAX_SWITCH_INTERVAL_US`:
/// `GIL_ERR_INVALID_CONFIG`, interval unchanged. Any thread; does not block.
///
/// # Safety
/// `gil` is NULL or a live lock.
#[no_mangle]
pub unsafe extern "C" fn gil_set_switch_interval(gil: *mut gil_t, us: u64) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        gil.set_switch_interval_us(us).map_err(map_err)
    })
}

/// In the child after `fork()`: makes the lock fresh and held by `token`
/// (the forking thread), forgetting every other thread; counters restart.
/// Event hooks stay installed; a running trace is dropped unwritten (its
/// file belongs to the parent; the child may start its own). Call it in the child before any other
/// call on the lock and before the child starts any thread. Does not block.
/// On Windows, which has no `fork()`: `GIL_ERR_UNSUPPORTED`, nothing changed.
///
/// # Safety
/// `gil` is NULL or a live lock (inherited from the parent), and no other
/// thread uses it during the call (in a child after `fork()` there is none).
#[no_mangle]
pub unsafe extern "C" fn gil_reinit_after_fork(gil: *mut gil_t, token: *mut c_void) -> gil_result_t {
    guard_result(|| {
        if cfg!(windows) {
            return Err(GIL_ERR_UNSUPPORTED);
        }
        let token = self::token(token)?;
        // SAFETY: non-NULL means live by this function's contract, and no
        // other thread uses it: the exclusive borrow is sound.
        let handle = unsafe { gil.as_mut() }.ok_or(GIL_ERR_NULL_ARGUMENT)?;
        // A parent thread may have held the trace's mutex (or the
        // tracer's) when it forked: neither can be locked here again.
        // Replace the one, read the old one without locking it.
        let old = std::mem::replace(&mut handle.trace, Mutex::new(None));
        let tracing = old.into_inner().unwrap_or_else(PoisonError::into_inner);
        handle.gil.reinit_after_fork(token);
        if let Some(Tracing { hook, session }) = tracing {
            handle.gil.remove_owned_event_hook(hook).map_err(|(_, e)| map_err(e))?;
            session.discard_after_fork();
        }
        Ok(())
    })
}
