//! Traces written to a file (`gil_trace_*`).

use super::*;

/// Starts recording the lock's events, for a timeline written to `path`
/// by `gil_trace_stop`, a UTF-8 name on every OS (Windows too: not the
/// ANSI code page; see the header's opening comment). The format follows
/// the file name: `.json` for Chrome trace-event JSON (opens in Perfetto),
/// `.svg` for an SVG timeline; anything else is
/// `GIL_ERR_INVALID_ARGUMENT`. The path is checked now,
/// so a path that cannot be written fails here with `GIL_ERR_IO` (whatever
/// the system's reason, a name it refuses as invalid such as `NUL.json`
/// on Windows too), not at the end: a name that holds anything but a
/// regular file (a symbolic link, a FIFO, a device, a directory) is
/// refused, never followed or opened; a file is created and removed beside
/// it (`O_EXCL | O_NOFOLLOW`); and on Windows a missing name is created
/// and removed by the system (`FILE_FLAG_DELETE_ON_CLOSE`), so that it
/// judges the name too. An existing file is left as it is until
/// `gil_trace_stop` replaces it, and a missing one stays missing: nothing
/// is at the name until the trace is written whole, so a process that
/// ends without `gil_trace_stop` (killed, say) leaves no empty file.
/// `title` (may be NULL; not UTF-8 is shown with replacement characters)
/// heads the picture.
/// At most `max_events` events are kept (0: about a million); a trace that
/// fills up ends at the first event that did not fit. Names given to rows
/// are bounded too (at most twice `max_events` are kept). The trace is an
/// event hook of its own: event hooks added by the host keep running
/// beside it. `GIL_ERR_BUSY` if a trace is already running on the lock.
/// `GIL_ERR_REENTRANT` from inside one of the lock's callbacks. Any thread.
/// The call runs with cancellation disabled (it opens and writes files): a
/// pending deferred `pthread_cancel` is acted on at the thread's next
/// cancellation point after it.
///
/// # Safety
/// `gil` is NULL or a live lock; `path` is NULL or a NUL-terminated string;
/// `title` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn gil_trace_start(
    gil: *mut gil_t,
    path: *const c_char,
    title: *const c_char,
    max_events: usize,
) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { gil_trace_start_ex(gil, path, title, max_events, 0) }
}

/// `gil_trace_start` flag: keep the last `max_events` events instead of
/// stopping when full (a ring buffer); the trace then starts at the oldest
/// event kept and ends when it is stopped. Its memory stays bounded however
/// long it runs and however many threads it names: names of rows none of
/// the kept events refers to are dropped (the newest kept), and a new name
/// for a thread's life replaces the one before.
pub const GIL_TRACE_RING: u32 = 1;

/// `gil_trace_start` with `flags`: 0, or `GIL_TRACE_RING`. Other bits are
/// `GIL_ERR_INVALID_ARGUMENT`. Any thread.
///
/// # Safety
/// As `gil_trace_start`.
#[no_mangle]
pub unsafe extern "C" fn gil_trace_start_ex(
    gil: *mut gil_t,
    path: *const c_char,
    title: *const c_char,
    max_events: usize,
    flags: u32,
) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let handle = unsafe { handle_ref(gil) }?;
        if flags & !GIL_TRACE_RING != 0 {
            return Err(GIL_ERR_INVALID_ARGUMENT);
        }
        if path.is_null() {
            return Err(GIL_ERR_NULL_ARGUMENT);
        }
        // SAFETY: non-NULL and NUL-terminated by this function's contract.
        let path = c_path(unsafe { CStr::from_ptr(path) })?;
        let title = if title.is_null() {
            None
        } else {
            // SAFETY: non-NULL, NUL-terminated by this function's contract.
            Some(unsafe { c_str_lossy(title) }?)
        };
        start_trace(handle, path, title.as_deref(), max_events, flags & GIL_TRACE_RING != 0).map_err(|(code, _)| code)
    })
}

/// Starts a trace into `path` on `handle`'s lock (the body of
/// `gil_trace_start_ex`, its arguments checked); a failure to create the
/// file comes back with the system's error, for a message.
pub(crate) fn start_trace(
    handle: &gil_t,
    path: &Path,
    title: Option<&str>,
    max_events: usize,
    ring: bool,
) -> Result<(), (gil_result_t, Option<std::io::Error>)> {
    TraceFormat::from_path(path).ok_or((GIL_ERR_INVALID_ARGUMENT, None))?;
    handle.check_not_in_callback().map_err(|code| (code, None))?;
    let mut tracing = handle.tracing();
    if tracing.is_some() {
        return Err((GIL_ERR_BUSY, None));
    }
    let session = if ring {
        TraceSession::create_ring(path, max_events)
    } else {
        TraceSession::create(path, max_events)
    };
    // The name's format was checked above: whatever fails now is the file
    // system's answer, an invalid-parameter one (EINVAL, Windows' error 87
    // for a device name such as NUL.json) too.
    let session = session.map_err(|e| (GIL_ERR_IO, Some(e)))?;
    if let Some(t) = title {
        session.tracer().set_title(t);
    }
    let hook = handle
        .gil
        .add_owned_event_hook(session.tracer().hook(), EventMask::ALL)
        .map_err(|e| (map_err(e), None))?;
    *tracing = Some(Tracing { hook, session });
    Ok(())
}

/// Names `token`'s row in the running trace's picture (default: `thread N
/// (0x...)`); bytes that are not UTF-8 show as replacement characters. If
/// the token made its final release and came back, the name goes to the
/// life it is in now. `GIL_ERR_NOT_TRACING` without a running trace;
/// `GIL_ERR_REENTRANT` from inside one of the lock's callbacks. Any thread;
/// runs with cancellation disabled, as `gil_trace_start`.
///
/// # Safety
/// `gil` is NULL or a live lock; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn gil_trace_name_thread(
    gil: *mut gil_t,
    token: *mut c_void,
    name: *const c_char,
) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let handle = unsafe { handle_ref(gil) }?;
        let token = self::token(token)?;
        // SAFETY: forwarded from this function's contract.
        let name = unsafe { c_str_lossy(name) }?;
        handle.check_not_in_callback()?;
        match &*handle.tracing() {
            Some(t) => {
                t.session.tracer().name_thread(token, name);
                Ok(())
            }
            None => Err(GIL_ERR_NOT_TRACING),
        }
    })
}

/// Stops the running trace and writes it to the file given to
/// `gil_trace_start`, whole: into a new file beside it (`.NAME.PID.N.tmp`,
/// same directory, `O_EXCL | O_NOFOLLOW`), renamed over the path once
/// complete. If the name no longer holds a regular file or nothing (a
/// symbolic link put there meanwhile), `GIL_ERR_IO` and nothing is written. The path holds
/// what it held before, then one whole trace, never part of one: a trace
/// started on the same path meanwhile (on this lock once this call has
/// taken the trace, or on another) writes its own file the same way, and
/// the last to finish stays. `*events_out` (if `events_out` is not NULL) =
/// the number of events written. `GIL_ERR_NOT_TRACING` without a running
/// trace; `GIL_ERR_IO` if writing failed (the trace is stopped either way;
/// the path is left as it was and the temporary file removed);
/// `GIL_ERR_REENTRANT` from inside one of the lock's callbacks. Any thread.
/// The call runs with cancellation disabled (it opens and writes files): a
/// pending deferred `pthread_cancel` is acted on at the thread's next
/// cancellation point after it.
///
/// # Safety
/// `gil` is NULL or a live lock; `events_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_trace_stop(gil: *mut gil_t, events_out: *mut u64) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let handle = unsafe { handle_ref(gil) }?;
        handle.check_not_in_callback()?;
        let mut tracing = handle.tracing();
        let Some(Tracing { hook, session }) = tracing.take() else {
            return Err(GIL_ERR_NOT_TRACING);
        };
        // The trace is written whatever the removal says (its hook is
        // owned: no handle of gil_remove_event_hook reaches it).
        let removed = handle.gil.remove_owned_event_hook(hook);
        drop(tracing);
        let events = session.finish().map_err(|_| GIL_ERR_IO)?;
        removed.map_err(|(_, e)| map_err(e))?;
        if !events_out.is_null() {
            // SAFETY: non-NULL, writable by this function's contract.
            unsafe { events_out.write(events as u64) };
        }
        Ok(())
    })
}
