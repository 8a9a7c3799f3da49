//! Per-thread accounting (`gil_*thread_stats*`) and naming threads for
//! every observer (`gil_tag_thread`, `gil_name_thread`).

use super::*;

/// One thread's accounting, filled by `gil_get_thread_stats` or passed to a
/// `gil_thread_stats_cb`. Times are nanoseconds; each field is read without
/// stopping the thread, so a busy thread's snapshot is not atomic as a
/// whole. See `gil_set_thread_stats`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gil_thread_stats_t {
    /// Set by the caller of `gil_get_thread_stats` to
    /// `sizeof(gil_thread_stats_t)` before the call.
    pub struct_size: u32,
    /// 1 while the thread has not made its final release, else 0.
    pub alive: u32,
    /// The thread.
    pub token: *mut c_void,
    /// The number attached with `gil_tag_thread`, 0 if none.
    pub tag: u64,
    /// When the record began, on `gil_now_ns()`'s clock.
    pub first_ns: u64,
    /// When its final release ended it; 0 while alive.
    pub ended_ns: u64,
    /// Time waiting for the lock (to get it, and in forced releases until
    /// another thread took it).
    pub wait_ns: u64,
    /// Time holding the lock.
    pub hold_ns: u64,
    /// Time released voluntarily (around blocking calls) before asking again.
    pub call_ns: u64,
    /// Times it took the lock.
    pub acquisitions: u64,
    /// Acquisitions that followed another thread's.
    pub switches_in: u64,
    /// Acquisitions that had to wait.
    pub waits: u64,
    /// Releases forced by a drop request.
    pub forced_releases: u64,
    /// Drop requests it raised while waiting.
    pub drop_requests_raised: u64,
    /// Drop requests it received while holding the lock.
    pub drop_requests_received: u64,
    /// In a `gil_thread_stats_cb` call: the name given with
    /// `gil_name_thread` (UTF-8, valid during the call only), or NULL.
    /// Always NULL from `gil_get_thread_stats`.
    pub name: *const c_char,
}

/// Called as `callback(user_data, stats)` for each thread by
/// `gil_foreach_thread_stats`; `stats` is valid during the call only.
/// Return 0 to go on, anything else to stop. It runs on the calling thread,
/// outside the lock's internals: it may call the lock's functions.
pub type gil_thread_stats_cb =
    Option<unsafe extern "C" fn(user_data: *mut c_void, stats: *const gil_thread_stats_t) -> i32>;

fn to_c(s: &ThreadStats, name: *const c_char) -> gil_thread_stats_t {
    let ns = |d: std::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    gil_thread_stats_t {
        struct_size: size_of::<gil_thread_stats_t>() as u32,
        alive: u32::from(s.alive),
        token: s.token.get() as *mut c_void,
        tag: s.tag,
        first_ns: s.first_ns,
        ended_ns: s.ended_ns.unwrap_or(0),
        wait_ns: ns(s.wait_time),
        hold_ns: ns(s.hold_time),
        call_ns: ns(s.call_time),
        acquisitions: s.acquisitions,
        switches_in: s.switches_in,
        waits: s.waits,
        forced_releases: s.forced_releases,
        drop_requests_raised: s.drop_requests_raised,
        drop_requests_received: s.drop_requests_received,
        name,
    }
}

/// Turns per-thread accounting on (`on` true) or off. Off by default; off
/// it costs nothing. On, each acquisition and release reads the clock and
/// updates the calling thread's own record (no lock). Turning it on keeps
/// what was recorded before. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock.
#[no_mangle]
pub unsafe extern "C" fn gil_set_thread_stats(gil: *mut gil_t, on: bool) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        unsafe { lock_ref(gil) }?.set_thread_stats(on);
        Ok(())
    })
}

/// `*on_out` = whether per-thread accounting is on. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `on_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_thread_stats_enabled(gil: *const gil_t, on_out: *mut bool) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { read_into(gil, on_out, |gil| gil.thread_stats_enabled()) }
}

/// Fills `*stats_out` (whose `struct_size` the caller sets to
/// `sizeof(gil_thread_stats_t)` first) with `token`'s accounting: its
/// current record, or after its final release its last one (the last 1024
/// ended records are kept). `GIL_ERR_UNKNOWN_THREAD` if the token has had
/// no event while accounting was on; `GIL_ERR_INVALID_ARGUMENT` for a bad
/// `struct_size`. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `stats_out` is NULL or points to a
/// writable `gil_thread_stats_t`.
#[no_mangle]
pub unsafe extern "C" fn gil_get_thread_stats(
    gil: *const gil_t,
    token: *mut c_void,
    stats_out: *mut gil_thread_stats_t,
) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        let token = self::token(token)?;
        if stats_out.is_null() {
            return Err(GIL_ERR_NULL_ARGUMENT);
        }
        // SAFETY: non-NULL; the first field is readable by the contract.
        let size = unsafe { ptr::addr_of!((*stats_out).struct_size).read_unaligned() } as usize;
        if size != size_of::<gil_thread_stats_t>() {
            return Err(GIL_ERR_INVALID_ARGUMENT);
        }
        let stats = gil.thread_stats(token).ok_or(GIL_ERR_UNKNOWN_THREAD)?;
        // SAFETY: non-NULL and writable by the contract.
        unsafe { stats_out.write(to_c(&stats, ptr::null())) };
        Ok(())
    })
}

/// Calls `callback(user_data, stats)` for every thread's accounting — the
/// live records and the kept ended ones, in the order they began — from a
/// snapshot taken first, so the callback may call the lock's functions.
/// Stops early when the callback returns non-zero. The callback runs with
/// the thread's cancellation disabled: a pending deferred `pthread_cancel`
/// is acted on at the thread's next cancellation point after this call
/// returns, not inside it. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `callback` is NULL or a function that
/// accepts `user_data` and a pointer valid for the call.
#[no_mangle]
pub unsafe extern "C" fn gil_foreach_thread_stats(
    gil: *const gil_t,
    callback: gil_thread_stats_cb,
    user_data: *mut c_void,
) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        let callback = callback.ok_or(GIL_ERR_NULL_ARGUMENT)?;
        for s in gil.all_thread_stats() {
            // A name with a NUL inside is cut there.
            let name = s
                .name
                .as_deref()
                .map(|n| std::ffi::CString::new(n.split('\0').next().unwrap_or("")).unwrap_or_default());
            let c = to_c(&s, name.as_ref().map_or(ptr::null(), |n| n.as_ptr()));
            // Cancellation is disabled here (`guard_result`): a forced
            // unwind from inside the callback could not cross these frames.
            // SAFETY: the caller promised a callback accepting `user_data`
            // and a pointer valid for the call (`c` and `name` outlive it).
            if unsafe { callback(user_data, &c) } != 0 {
                break;
            }
        }
        Ok(())
    })
}

/// Attaches a number of the host's (e.g. the OS thread id) to `token`'s
/// current accounting record, to tell threads apart after they end. Call
/// it from the thread using the token, after an acquisition; a different
/// number on an open record ends it and starts a new thread's (the token
/// was reused). Tagging again with the same number is cheap (a look in the
/// thread's own cache).
///
/// If `token` holds the lock and has no record — accounting was turned on
/// while it held the lock — its record begins now: holding the lock,
/// tagged, with no acquisition counted (the acquisition came before the
/// record). A holder that turns accounting on and wants to be measured
/// from then calls this right after `gil_set_thread_stats(gil, true)`.
///
/// `GIL_ERR_UNKNOWN_THREAD` if the token has no current record and does
/// not hold the lock (or accounting is off); `GIL_ERR_FOREIGN_THREAD` from
/// a thread other than the one that made the token's latest accounting
/// event (a record has one writer). Nothing changes on an error.
///
/// # Safety
/// `gil` is NULL or a live lock.
#[no_mangle]
pub unsafe extern "C" fn gil_tag_thread(gil: *mut gil_t, token: *mut c_void, tag: u64) -> gil_result_t {
    // Hot: hosts tag on every acquisition while accounting is on, and
    // tagging reaches no cancellation point (map look-ups under std
    // mutexes), so it keeps cancellation as it is (see `guard_hot`).
    guard_result_hot(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        gil.tag_thread(self::token(token)?, tag).map_err(map_err)
    })
}

/// Names `token` for every observer: its accounting record, and its row in
/// the running trace if there is one (as `gil_trace_name_thread`). Bytes
/// that are not UTF-8 show as replacement characters. A token without a
/// current accounting record gets none from this (`gil_get_thread_stats`
/// still says `GIL_ERR_UNKNOWN_THREAD`): the name waits for the token's
/// next record, e.g. its first acquisition; the last 1024 names waiting so
/// are kept, the oldest dropped, and a rename replaces.
/// `GIL_ERR_REENTRANT` from inside one of the lock's callbacks. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn gil_name_thread(gil: *mut gil_t, token: *mut c_void, name: *const c_char) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let handle = unsafe { handle_ref(gil) }?;
        let token = self::token(token)?;
        // SAFETY: forwarded from this function's contract.
        let name = unsafe { c_str_lossy(name) }?;
        handle.check_not_in_callback()?;
        handle.gil.name_thread(token, name.clone());
        if let Some(t) = &*handle.tracing() {
            t.session.tracer().name_thread(token, name);
        }
        Ok(())
    })
}

/// Names the thread whose accounting record was tagged `tag` (see
/// `gil_tag_thread`), in that record and, if a trace is running, in the
/// trace's row of that life of the thread — also after the thread has
/// ended and its token was reused. With `since_ns` 0: the latest record
/// with the tag (a live one first); otherwise the first that began at or
/// after `since_ns` (`gil_now_ns()` time): the thread the host saw start
/// then, even if later threads reused its number. `GIL_ERR_UNKNOWN_THREAD`
/// if no record fits; `GIL_ERR_REENTRANT` from inside one of the lock's
/// callbacks. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn gil_name_tagged(
    gil: *mut gil_t,
    tag: u64,
    since_ns: u64,
    name: *const c_char,
) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let handle = unsafe { handle_ref(gil) }?;
        // SAFETY: forwarded from this function's contract.
        let name = unsafe { c_str_lossy(name) }?;
        handle.check_not_in_callback()?;
        let (token, began) = handle
            .gil
            .name_tagged(tag, since_ns, name.clone())
            .ok_or(GIL_ERR_UNKNOWN_THREAD)?;
        if let Some(t) = &*handle.tracing() {
            t.session.tracer().name_thread_at(token, began, name);
        }
        Ok(())
    })
}
