//! Reading a lock's state and counters.

use super::*;

/// Counters of one lock, filled by `gil_get_counters`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct gil_counters_t {
    /// Set by the caller to `sizeof(gil_counters_t)` before the call.
    pub struct_size: u32,
    /// Reserved, always 0.
    pub reserved: u32,
    /// Successful acquisitions.
    pub acquisitions: u64,
    /// Acquisitions by a different token than the previous holder.
    pub switches: u64,
    /// Drop requests raised by waiters.
    pub drop_requests: u64,
    /// Forced releases after which another thread took the lock.
    pub forced_switches: u64,
    /// Nanoseconds spent waiting in acquisitions that did not succeed at once.
    pub wait_ns: u64,
    /// Priority policy: immediate drop requests by I/O-class waiters.
    pub preemptions: u64,
    /// Lazy release: voluntary releases that only marked a system call.
    pub lazy_releases: u64,
    /// Lazy release: calls that outlasted the threshold while a thread waited.
    pub lazy_takeovers: u64,
    /// Priority policy: CPU-class waiters served first after the starvation bound.
    pub starvation_promotions: u64,
    /// Priority policy with `spin_us`: CPU-class waiters that spun while an
    /// I/O-class thread held the lock and took it when it let go, without
    /// sleeping.
    pub cpu_spin_takes: u64,
}

/// `*holder_out` = the token holding the lock, or NULL if it is free. For
/// observers (debuggers, profilers): a racy snapshot. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `holder_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_holder(gil: *const gil_t, holder_out: *mut *mut c_void) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        read_into(gil, holder_out, |gil| {
            gil.holder().map_or(ptr::null_mut(), |t| t.get() as *mut c_void)
        })
    }
}

/// `*holder_out` = the token that took the lock last (CPython's
/// `last_holder`), NULL after its final release. Racy snapshot; any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `holder_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_last_holder(gil: *const gil_t, holder_out: *mut *mut c_void) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        read_into(gil, holder_out, |gil| {
            gil.last_holder().map_or(ptr::null_mut(), |t| t.get() as *mut c_void)
        })
    }
}

/// `*locked_out` = whether some token holds the lock. A lock released
/// with `GIL_RELEASE_VOLUNTARY` under lazy release is not held, only
/// reserved (`gil_is_reserved`). Racy snapshot; any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `locked_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_is_locked(gil: *const gil_t, locked_out: *mut bool) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { read_into(gil, locked_out, |gil| gil.is_locked()) }
}

/// `*reserved_out` = whether the lock is reserved for a thread that
/// released it lazily (`GIL_RELEASE_VOLUNTARY` with `lazy_release_us` set)
/// and is in its blocking call: that thread takes it back without waiting
/// if it returns within the threshold; after that a waiter takes it over.
/// Nobody holds a reserved lock: `gil_free` ends a reservation nobody
/// waits for and frees the lock. Racy snapshot; any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `reserved_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_is_reserved(gil: *const gil_t, reserved_out: *mut bool) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { read_into(gil, reserved_out, |gil| gil.is_reserved()) }
}

/// `*switch_number_out` = how many times the lock changed hands (CPython's
/// `switch_number`). Racy snapshot; any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `switch_number_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_switch_number(gil: *const gil_t, switch_number_out: *mut u64) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { read_into(gil, switch_number_out, |gil| gil.switch_number()) }
}

/// `*policy_out` = the lock's policy (a `GIL_POLICY_*` value). Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `policy_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_policy(gil: *const gil_t, policy_out: *mut gil_policy_t) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { read_into(gil, policy_out, |gil| policy_to_raw(gil.policy())) }
}

/// Fills `*counters_out`, whose `struct_size` the caller must set to
/// `sizeof(gil_counters_t)` first (smaller known sizes get the fields that
/// fit). Each counter is a racy snapshot. Any thread; does not block.
///
/// # Safety
/// `gil` is NULL or a live lock; `counters_out` is NULL or points to a
/// `gil_counters_t` writable for its `struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn gil_get_counters(gil: *const gil_t, counters_out: *mut gil_counters_t) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        if counters_out.is_null() {
            return Err(GIL_ERR_NULL_ARGUMENT);
        }
        // SAFETY: non-NULL; the first field is readable by the contract.
        let size = unsafe { ptr::addr_of!((*counters_out).struct_size).read_unaligned() } as usize;
        let min = offset_of!(gil_counters_t, acquisitions) + size_of::<u64>();
        if size < min || size > size_of::<gil_counters_t>() {
            return Err(GIL_ERR_INVALID_ARGUMENT);
        }
        let c = gil.counters();
        let full = gil_counters_t {
            struct_size: size as u32,
            reserved: 0,
            acquisitions: c.acquisitions,
            switches: c.switches,
            drop_requests: c.drop_requests,
            forced_switches: c.forced_switches,
            wait_ns: u64::try_from(c.wait_time.as_nanos()).unwrap_or(u64::MAX),
            preemptions: c.preemptions,
            lazy_releases: c.lazy_releases,
            lazy_takeovers: c.lazy_takeovers,
            starvation_promotions: c.starvation_promotions,
            cpu_spin_takes: c.cpu_spin_takes,
        };
        // SAFETY: `size` bytes are writable at `counters_out` (contract) and
        // readable from `full` (checked `size <= sizeof`).
        unsafe { ptr::copy_nonoverlapping(ptr::addr_of!(full).cast::<u8>(), counters_out.cast::<u8>(), size) };
        Ok(())
    })
}

/// `*us_out` = the lock's lazy-release threshold in microseconds, 0 if lazy
/// release is off. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `us_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_lazy_release(gil: *const gil_t, us_out: *mut u64) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { read_into(gil, us_out, |gil| gil.lazy_release_us().unwrap_or(0)) }
}

/// `*monitor_out` = whether the process's monitor thread keeps this lock's
/// time. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `monitor_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_monitor(gil: *const gil_t, monitor_out: *mut bool) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { read_into(gil, monitor_out, |gil| gil.uses_monitor()) }
}

/// `*name_out` = the name of the preset this lock's configuration is (a
/// static string, as `gil_preset_name` gives), leaving aside the switch
/// interval, spin limit, lazy-release threshold and bound on laps set on
/// top of it; NULL
/// for a combination that no preset names. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `name_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_preset(gil: *const gil_t, name_out: *mut *const c_char) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        read_into(gil, name_out, |gil| {
            let index = gil
                .settings()
                .preset()
                .and_then(|name| gil_core::PRESETS.iter().position(|&p| p == name));
            index.map_or(ptr::null(), |i| gil_preset_name(i))
        })
    }
}

/// `*laps_out` = the lock's bound on laps (0: none; see `gil_config_t`).
/// Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `laps_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_laps(gil: *const gil_t, laps_out: *mut u32) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { read_into(gil, laps_out, |gil| gil.laps()) }
}

/// `*us_out` = the lock's spin limit in microseconds (0: no spinning). Any
/// thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `us_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_spin(gil: *const gil_t, us_out: *mut u64) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { read_into(gil, us_out, |gil| gil.spin_us()) }
}

/// How many times the process's monitor thread has woken up (0 if it never
/// ran). It does not change while no monitored lock has a waiter. Any thread.
#[no_mangle]
pub extern "C" fn gil_monitor_wakeups() -> u64 {
    guard(0, gil_core::monitor_wakeups)
}

/// Nanoseconds on the monotonic clock of `gil_event_t.time_ns`, shared by
/// every lock in the process. Any thread.
#[no_mangle]
pub extern "C" fn gil_now_ns() -> u64 {
    guard(0, gil_core::now_ns)
}
