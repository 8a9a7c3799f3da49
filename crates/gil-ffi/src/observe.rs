//! Observers: event hooks and histograms.

use super::*;

/// What an event is about: one of the `GIL_EVENT_*` values.
pub type gil_event_kind_t = u32;
/// `token` found the lock taken and started waiting.
pub const GIL_EVENT_WAIT_START: gil_event_kind_t = 0;
/// `token` took the lock.
pub const GIL_EVENT_ACQUIRED: gil_event_kind_t = 1;
/// `token` let go of the lock; `reason` is a `GIL_RELEASE_*` value.
pub const GIL_EVENT_RELEASED: gil_event_kind_t = 2;
/// The holder `token` was asked to drop the lock; `other` asked (NULL: the
/// monitor thread).
pub const GIL_EVENT_DROP_REQUESTED: gil_event_kind_t = 3;
/// `token`'s forced release ended with another thread (`other`, if still
/// known) holding the lock.
pub const GIL_EVENT_FORCED_SWITCH: gil_event_kind_t = 4;
/// `token`'s lazily released call outlasted the threshold and the lock was
/// taken over, by `other` (NULL: by the monitor thread, for the waiters).
pub const GIL_EVENT_LAZY_TAKEOVER: gil_event_kind_t = 5;

/// One event, passed to a `gil_event_cb`. Valid only during the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gil_event_t {
    /// A `GIL_EVENT_*` value.
    pub kind: gil_event_kind_t,
    /// For `GIL_EVENT_RELEASED`: a `GIL_RELEASE_*` value; otherwise 0.
    pub reason: gil_release_reason_t,
    /// The thread it happened to.
    pub token: *mut c_void,
    /// The thread on the other side, or NULL (see the kinds).
    pub other: *mut c_void,
    /// When, in nanoseconds of `gil_now_ns()`'s clock.
    pub time_ns: u64,
}

/// Called as `callback(user_data, event)` for each event of a lock, on the
/// thread it happens on, sometimes under the lock's internal mutex: it must
/// be short and must not block. Calls on the same lock from inside it that
/// would wait return `GIL_ERR_REENTRANT`. It may be called from any thread.
/// It runs with the thread's cancellation disabled (see "Cancellation" at
/// the top of this header): a pending `pthread_cancel` acts at the thread's
/// next cancellation point after the library call returns.
pub type gil_event_cb = Option<unsafe extern "C" fn(user_data: *mut c_void, event: *const gil_event_t)>;

/// Number of power-of-two buckets in each histogram of `gil_histograms_t`.
pub const GIL_HISTOGRAM_BUCKETS: usize = 64;

/// Number of fine buckets in each histogram of `gil_histograms_t`: fine
/// bucket `i` counts durations in `[i, i + 1)` ns for `i < 8`; above, each
/// power of two `[2^p, 2^(p+1))` is cut into 8 equal parts, fine bucket
/// `8 + 8 * (p - 3) + k` counting `[(8 + k) * 2^(p-3), (9 + k) * 2^(p-3))`.
/// A quantile read as the top of its fine bucket is within 12.5 % of the
/// true value.
pub const GIL_HISTOGRAM_FINE_BUCKETS: usize = 496;

const _: () = assert!(GIL_HISTOGRAM_FINE_BUCKETS == gil_core::HISTOGRAM_FINE_BUCKETS);

/// Histograms of one lock, filled by `gil_get_histograms`. Bucket `i`
/// counts durations in [2^i, 2^(i+1)) nanoseconds (bucket 0 also counts 0);
/// the fine buckets (see `GIL_HISTOGRAM_FINE_BUCKETS`) count the same
/// durations in finer steps, and each power-of-two bucket is the sum of
/// its fine ones.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gil_histograms_t {
    /// Set by the caller to `sizeof(gil_histograms_t)` before the call. A
    /// caller built against 0.1's header, whose struct ended at `hold`,
    /// passes that smaller size and gets only the fields it knows.
    pub struct_size: u32,
    /// Reserved, always 0.
    pub reserved: u32,
    /// Time from asking for the lock to getting it, for waits.
    pub wait: [u64; GIL_HISTOGRAM_BUCKETS],
    /// Time from getting the lock to letting go of it.
    pub hold: [u64; GIL_HISTOGRAM_BUCKETS],
    /// `wait` in fine buckets.
    pub wait_fine: [u64; GIL_HISTOGRAM_FINE_BUCKETS],
    /// `hold` in fine buckets.
    pub hold_fine: [u64; GIL_HISTOGRAM_FINE_BUCKETS],
}

/// `sizeof(gil_histograms_t)` in 0.1's header: up to and including `hold`.
const HISTOGRAMS_V1_SIZE: usize = std::mem::offset_of!(gil_histograms_t, wait_fine);

/// A C hook and its user data, callable from any thread (the caller of
/// `gil_add_event_hook` promises that, see `gil_event_cb`).
pub(crate) struct EventCallback {
    callback: unsafe extern "C" fn(*mut c_void, *const gil_event_t),
    user_data: *mut c_void,
}
// SAFETY: `gil_event_cb`'s contract makes the callback and its user data
// usable from any thread; we only pass the pointer back.
unsafe impl Send for EventCallback {}
// SAFETY: as above; we never dereference `user_data`.
unsafe impl Sync for EventCallback {}

impl EventCallback {
    pub(crate) fn call(&self, e: &Event) {
        let (kind, reason) = match e.kind {
            EventKind::WaitStart => (GIL_EVENT_WAIT_START, 0),
            EventKind::Acquired => (GIL_EVENT_ACQUIRED, 0),
            EventKind::Released(r) => (GIL_EVENT_RELEASED, reason_to_raw(r)),
            EventKind::DropRequested => (GIL_EVENT_DROP_REQUESTED, 0),
            EventKind::ForcedSwitch => (GIL_EVENT_FORCED_SWITCH, 0),
            EventKind::LazyTakeover => (GIL_EVENT_LAZY_TAKEOVER, 0),
            _ => return, // a kind this C ABI does not know yet
        };
        let event = gil_event_t {
            kind,
            reason,
            token: e.token.get() as *mut c_void,
            other: e.other.map_or(ptr::null_mut(), |t| t.get() as *mut c_void),
            time_ns: e.time_ns,
        };
        // SAFETY: the caller of gil_set_event_hook promised a callback that
        // accepts its user data and an event pointer valid for the call.
        unsafe { (self.callback)(self.user_data, &event) }
    }
}

/// A set of `GIL_EVENT_MASK_*` bits: which events a hook wants.
pub type gil_event_mask_t = u32;
/// `GIL_EVENT_WAIT_START` events.
pub const GIL_EVENT_MASK_WAIT_START: gil_event_mask_t = 1 << 0;
/// `GIL_EVENT_ACQUIRED` events.
pub const GIL_EVENT_MASK_ACQUIRED: gil_event_mask_t = 1 << 1;
/// `GIL_EVENT_RELEASED` events with `GIL_RELEASE_VOLUNTARY`.
pub const GIL_EVENT_MASK_RELEASED_VOLUNTARY: gil_event_mask_t = 1 << 2;
/// `GIL_EVENT_RELEASED` events with `GIL_RELEASE_FORCED`.
pub const GIL_EVENT_MASK_RELEASED_FORCED: gil_event_mask_t = 1 << 3;
/// `GIL_EVENT_RELEASED` events with `GIL_RELEASE_FINAL`.
pub const GIL_EVENT_MASK_RELEASED_FINAL: gil_event_mask_t = 1 << 4;
/// `GIL_EVENT_RELEASED` events, whatever the reason.
pub const GIL_EVENT_MASK_RELEASED: gil_event_mask_t = 0b111 << 2;
/// `GIL_EVENT_DROP_REQUESTED` events.
pub const GIL_EVENT_MASK_DROP_REQUESTED: gil_event_mask_t = 1 << 5;
/// `GIL_EVENT_FORCED_SWITCH` events.
pub const GIL_EVENT_MASK_FORCED_SWITCH: gil_event_mask_t = 1 << 6;
/// `GIL_EVENT_LAZY_TAKEOVER` events.
pub const GIL_EVENT_MASK_LAZY_TAKEOVER: gil_event_mask_t = 1 << 7;
/// Every event.
pub const GIL_EVENT_MASK_ALL: gil_event_mask_t = 0xff;

// The C values are the Rust ones (literals, so cbindgen can write them).
const _: () = assert!(
    GIL_EVENT_MASK_WAIT_START == EventMask::WAIT_START.bits()
        && GIL_EVENT_MASK_ACQUIRED == EventMask::ACQUIRED.bits()
        && GIL_EVENT_MASK_RELEASED_VOLUNTARY == EventMask::RELEASED_VOLUNTARY.bits()
        && GIL_EVENT_MASK_RELEASED_FORCED == EventMask::RELEASED_FORCED.bits()
        && GIL_EVENT_MASK_RELEASED_FINAL == EventMask::RELEASED_FINAL.bits()
        && GIL_EVENT_MASK_RELEASED == EventMask::RELEASED.bits()
        && GIL_EVENT_MASK_DROP_REQUESTED == EventMask::DROP_REQUESTED.bits()
        && GIL_EVENT_MASK_FORCED_SWITCH == EventMask::FORCED_SWITCH.bits()
        && GIL_EVENT_MASK_LAZY_TAKEOVER == EventMask::LAZY_TAKEOVER.bits()
        && GIL_EVENT_MASK_ALL == EventMask::ALL.bits()
);

/// The handle of a hook added with `gil_add_event_hook`; never 0. Unique in
/// the process: no two hooks, of one lock or of two, share a handle, so
/// another lock's handle removes nothing.
pub type gil_hook_id_t = u64;

impl EventCallback {
    fn into_hook(self) -> gil_core::EventHook {
        Arc::new(move |e: &Event| self.call(e))
    }
}

/// Adds `callback` (with `user_data`) as an event hook of the lock for the
/// events in `mask` (`GIL_EVENT_MASK_*` bits), beside any hooks and trace
/// already running: each event goes to every hook that wants it, in the
/// order they were added. `*id_out` = the handle that removes it
/// (`gil_remove_event_hook`). Waits for no running hook.
/// `GIL_ERR_NULL_ARGUMENT` for a NULL callback
/// or `id_out`; `GIL_ERR_INVALID_ARGUMENT` for a mask that is 0 or has bits
/// outside `GIL_EVENT_MASK_ALL`; `GIL_ERR_REENTRANT` from inside one of the
/// lock's callbacks. Nothing changes on error. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `callback`, if not NULL, follows
/// `gil_event_cb`'s contract with `user_data`; `id_out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn gil_add_event_hook(
    gil: *mut gil_t,
    callback: gil_event_cb,
    user_data: *mut c_void,
    mask: gil_event_mask_t,
    id_out: *mut gil_hook_id_t,
) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        let callback = callback.ok_or(GIL_ERR_NULL_ARGUMENT)?;
        if id_out.is_null() {
            return Err(GIL_ERR_NULL_ARGUMENT);
        }
        let mask = EventMask::from_bits(mask).ok_or(GIL_ERR_INVALID_ARGUMENT)?;
        let hook = EventCallback { callback, user_data }.into_hook();
        let id = gil.add_event_hook(hook, mask).map_err(map_err)?;
        // SAFETY: non-NULL, writable by this function's contract.
        unsafe { id_out.write(id.get()) };
        Ok(())
    })
}

/// Removes the hook `id` (from `gil_add_event_hook`). Returns once no
/// thread is still inside it, so the caller may free its user data; it
/// waits for that hook only, not for other hooks running meanwhile.
/// `GIL_ERR_UNKNOWN_HOOK` if no such hook is installed on this lock (removed
/// already, or another lock's); a running trace's hook is never reached by
/// any handle. `GIL_ERR_REENTRANT` from inside one of the lock's callbacks
/// (it would wait for itself). Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock.
#[no_mangle]
pub unsafe extern "C" fn gil_remove_event_hook(gil: *mut gil_t, id: gil_hook_id_t) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        gil.remove_event_hook(HookId::from_raw(id)).map_err(map_err)
    })
}

/// Installs `callback` (with `user_data`) as the lock's replaceable event
/// hook for every event, replacing the one an earlier call installed; a
/// NULL callback removes it. Hooks added with `gil_add_event_hook` and a
/// running trace are left alone. Returns once no thread is still inside the
/// hook it replaced, so the caller may free that hook's user data.
/// `GIL_ERR_REENTRANT` from inside one of the lock's callbacks (it would
/// wait for itself). Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `callback`, if not NULL, follows
/// `gil_event_cb`'s contract with `user_data`.
#[no_mangle]
pub unsafe extern "C" fn gil_set_event_hook(
    gil: *mut gil_t,
    callback: gil_event_cb,
    user_data: *mut c_void,
) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        let hook = callback.map(|callback| EventCallback { callback, user_data }.into_hook());
        gil.set_event_hook(hook).map_err(map_err)
    })
}

/// Turns the lock's wait-time and hold-time histograms on (`on` true) or
/// off. They are off by default: hold times cost a clock read per
/// acquisition and release. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock.
#[no_mangle]
pub unsafe extern "C" fn gil_set_histograms(gil: *mut gil_t, on: bool) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        unsafe { lock_ref(gil) }?.set_histograms(on);
        Ok(())
    })
}

/// `*on_out` = whether the lock's histograms are on. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `on_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_histograms_enabled(gil: *const gil_t, on_out: *mut bool) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { read_into(gil, on_out, |gil| gil.histograms_enabled()) }
}

/// Empties the lock's histograms. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock.
#[no_mangle]
pub unsafe extern "C" fn gil_reset_histograms(gil: *mut gil_t) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        unsafe { lock_ref(gil) }?.reset_histograms();
        Ok(())
    })
}

/// Fills `*histograms_out`, whose `struct_size` the caller must set to
/// `sizeof(gil_histograms_t)` first (or to 0.1's smaller size, then only
/// the fields up to `hold` are written). A racy snapshot. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `histograms_out` is NULL or points to a
/// writable `gil_histograms_t` of the size its `struct_size` says.
#[no_mangle]
pub unsafe extern "C" fn gil_get_histograms(gil: *const gil_t, histograms_out: *mut gil_histograms_t) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        if histograms_out.is_null() {
            return Err(GIL_ERR_NULL_ARGUMENT);
        }
        // SAFETY: non-NULL; the first field is readable by the contract.
        let size = unsafe { ptr::addr_of!((*histograms_out).struct_size).read_unaligned() } as usize;
        if size != size_of::<gil_histograms_t>() && size != HISTOGRAMS_V1_SIZE {
            return Err(GIL_ERR_INVALID_ARGUMENT);
        }
        let h = gil.histograms();
        let out = gil_histograms_t {
            struct_size: size as u32,
            reserved: 0,
            wait: h.wait.buckets,
            hold: h.hold.buckets,
            wait_fine: h.wait.fine,
            hold_fine: h.hold.fine,
        };
        // SAFETY: non-NULL, and the caller's struct is writable for `size`
        // bytes by the contract (a 0.1 caller's struct is that long); `size`
        // is at most `size_of::<gil_histograms_t>()`, so the source has them.
        unsafe { ptr::copy_nonoverlapping(ptr::addr_of!(out).cast::<u8>(), histograms_out.cast::<u8>(), size) };
        Ok(())
    })
}
