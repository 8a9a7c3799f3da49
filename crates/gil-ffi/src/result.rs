//! Result codes: `gil_result_t`, its text, and the panic boundary every
//! exported function runs inside.

use super::*;

/// What a call did. The numbers are fixed forever; a retired code stays
/// listed here as a comment and its number is never given to another
/// meaning (none is retired so far).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum gil_result_t {
    /// Success.
    GIL_OK = 0,
    /// A required pointer argument (the lock, a token, an out-pointer, a
    /// name) was NULL.
    GIL_ERR_NULL_ARGUMENT = 1,
    /// Release (or handle a drop request) by a token that does not hold the lock.
    GIL_ERR_NOT_HOLDER = 2,
    /// Acquire by the token that already holds the lock (it is not re-entrant).
    GIL_ERR_ALREADY_HELD = 3,
    /// A `gil_config_t` with a bad `struct_size`, policy or switch interval,
    /// or a switch interval out of range in `gil_set_switch_interval`.
    GIL_ERR_INVALID_CONFIG = 4,
    /// `gil_free` of a lock that is held or awaited (not merely reserved by
    /// a lazy release); nothing was freed.
    GIL_ERR_BUSY = 5,
    /// A bug inside the library (a Rust panic), caught at the boundary.
    GIL_ERR_PANIC = 6,
    /// `gil_acquire_or_abort` gave up because its callback said so.
    GIL_ERR_ABORTED = 7,
    /// An enum-like argument (a release reason, a policy, an event mask)
    /// out of range, a struct with a bad `struct_size`, or a trace name
    /// that is not `.json` or `.svg` (on Windows, or not UTF-8). Never a
    /// file system's answer: that is `GIL_ERR_IO`.
    GIL_ERR_INVALID_ARGUMENT = 8,
    /// `gil_policy_from_name` does not know the name.
    GIL_ERR_UNKNOWN_POLICY = 9,
    /// A file could not be created or written (`gil_trace_start`,
    /// `gil_trace_stop`, `gil_options_start`), whatever the system's
    /// reason: a name it refuses as invalid (`EINVAL`, Windows' error 87
    /// for a device name such as `NUL.json`) too.
    GIL_ERR_IO = 10,
    /// `gil_trace_stop` or `gil_trace_name_thread` without a running trace.
    GIL_ERR_NOT_TRACING = 11,
    /// A call on the lock from inside one of its own callbacks (an event
    /// hook, the drop-request callback, an abort callback) that would wait
    /// for the calling thread itself: acquiring, releasing, installing or
    /// removing a hook, starting, naming in or stopping a trace, freeing.
    /// Nothing changed.
    GIL_ERR_REENTRANT = 12,
    /// `gil_config_preset` does not know the name.
    GIL_ERR_UNKNOWN_PRESET = 13,
    /// `gil_remove_event_hook` of a handle that names no hook installed on
    /// the lock (e.g. removed already).
    GIL_ERR_UNKNOWN_HOOK = 14,
    /// `gil_get_thread_stats` of a token with no accounting record (no
    /// event of it while accounting was on, or its record was dropped).
    GIL_ERR_UNKNOWN_THREAD = 15,
    /// `gil_tag_thread` from a thread other than the one using the token
    /// (the one that made its latest accounting event); nothing changed.
    GIL_ERR_FOREIGN_THREAD = 16,
    /// An error this version of the C ABI has no code of its own for (a
    /// newer gil-core error reaching an older mapping). Not a bug in the
    /// library: that is `GIL_ERR_PANIC`.
    GIL_ERR_OTHER = 17,
    /// The call names something this platform does not have (fork on
    /// Windows); nothing changed. The call exists on every platform, so
    /// the exported symbols are the same everywhere.
    GIL_ERR_UNSUPPORTED = 18,
    /// A struct's `struct_size` that this library cannot fill: smaller
    /// than the struct's first version, or larger than the struct this
    /// library knows (`gil_get_settings`); nothing was written.
    GIL_ERR_STRUCT_SIZE = 19,
    /// `gil_config_parse_host` does not know the host's name (see
    /// `gil_host_name`).
    GIL_ERR_UNKNOWN_HOST = 20,
    /// `gil_get_setting` does not know the key (see `gil_setting_key`).
    GIL_ERR_UNKNOWN_SETTING = 21,
}
pub use gil_result_t::*;

impl gil_result_t {
    /// Every code, for turning a number back into one.
    pub(crate) const ALL: [gil_result_t; 22] = [
        GIL_OK,
        GIL_ERR_NULL_ARGUMENT,
        GIL_ERR_NOT_HOLDER,
        GIL_ERR_ALREADY_HELD,
        GIL_ERR_INVALID_CONFIG,
        GIL_ERR_BUSY,
        GIL_ERR_PANIC,
        GIL_ERR_ABORTED,
        GIL_ERR_INVALID_ARGUMENT,
        GIL_ERR_UNKNOWN_POLICY,
        GIL_ERR_IO,
        GIL_ERR_NOT_TRACING,
        GIL_ERR_REENTRANT,
        GIL_ERR_UNKNOWN_PRESET,
        GIL_ERR_UNKNOWN_HOOK,
        GIL_ERR_UNKNOWN_THREAD,
        GIL_ERR_FOREIGN_THREAD,
        GIL_ERR_OTHER,
        GIL_ERR_UNSUPPORTED,
        GIL_ERR_STRUCT_SIZE,
        GIL_ERR_UNKNOWN_HOST,
        GIL_ERR_UNKNOWN_SETTING,
    ];

    /// The code numbered `n`, if there is one.
    pub(crate) fn from_u32(n: u32) -> Option<gil_result_t> {
        Self::ALL.into_iter().find(|r| *r as u32 == n)
    }

    /// What the code means, for people.
    pub(crate) fn text(self) -> &'static CStr {
        match self {
            GIL_OK => c"ok",
            GIL_ERR_NULL_ARGUMENT => c"a required pointer argument was NULL",
            GIL_ERR_NOT_HOLDER => c"the calling token does not hold the lock",
            GIL_ERR_ALREADY_HELD => c"the calling token already holds the lock (it is not re-entrant)",
            GIL_ERR_INVALID_CONFIG => c"invalid configuration (struct_size, policy, or a setting out of its range)",
            GIL_ERR_BUSY => c"the lock is held or awaited",
            GIL_ERR_PANIC => c"internal error (a Rust panic was caught)",
            GIL_ERR_ABORTED => c"the wait for the lock was aborted by the caller's callback",
            GIL_ERR_INVALID_ARGUMENT => c"an argument is out of range",
            GIL_ERR_UNKNOWN_POLICY => c"unknown policy name",
            GIL_ERR_IO => c"a file could not be created or written",
            GIL_ERR_NOT_TRACING => c"no trace is running on this lock",
            GIL_ERR_REENTRANT => c"called from inside one of the lock's own callbacks",
            GIL_ERR_UNKNOWN_PRESET => c"unknown preset name",
            GIL_ERR_UNKNOWN_HOOK => c"no such event hook is installed on this lock",
            GIL_ERR_UNKNOWN_THREAD => c"no accounting record for this thread",
            GIL_ERR_FOREIGN_THREAD => c"the token's accounting record belongs to another thread",
            GIL_ERR_OTHER => c"an error this version of the C ABI has no code for",
            GIL_ERR_UNSUPPORTED => c"not available on this platform",
            GIL_ERR_STRUCT_SIZE => c"struct_size is not a size of the struct this library can fill",
            GIL_ERR_UNKNOWN_HOST => c"unknown host name",
            GIL_ERR_UNKNOWN_SETTING => c"unknown setting key",
        }
    }
}

/// Runs `body` with the calling thread's cancellation disabled, turning a
/// panic into `on_panic`. Every exported call but the lock's hot ones
/// runs so: a deferred `pthread_cancel` acted on at a cancellation point
/// inside the library (a file write, a callback, the `getrandom` behind a
/// thread's first `HashMap`) would meet this `catch_unwind` and abort the
/// process ("FATAL: exception not rethrown"); it is acted on after the
/// call instead (see `gil_core::cancel`).
pub(crate) fn guard<T>(on_panic: T, body: impl FnOnce() -> T) -> T {
    let _no_cancel = NoCancel::new();
    guard_hot(on_panic, body)
}

/// Runs a fallible body as [`guard`] does, turning a panic into
/// `GIL_ERR_PANIC`.
pub(crate) fn guard_result(body: impl FnOnce() -> Result<(), gil_result_t>) -> gil_result_t {
    guard(GIL_ERR_PANIC, || result_code(body()))
}

/// [`guard`] without touching cancellation, for the lock's hot calls
/// (acquire, release, the drop-request flag, tagging): their only cancellation
/// points, the condition-variable waits and the callbacks, disable it
/// inside gil-core, and two `pthread_setcancelstate` calls would double
/// the cost of an uncontended acquire and release.
pub(crate) fn guard_hot<T>(on_panic: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(on_panic)
}

/// [`guard_result`] for the hot calls (see [`guard_hot`]).
pub(crate) fn guard_result_hot(body: impl FnOnce() -> Result<(), gil_result_t>) -> gil_result_t {
    guard_hot(GIL_ERR_PANIC, || result_code(body()))
}

fn result_code(r: Result<(), gil_result_t>) -> gil_result_t {
    match r {
        Ok(()) => GIL_OK,
        Err(code) => code,
    }
}

pub(crate) fn map_err(e: GilError) -> gil_result_t {
    match e {
        GilError::NotHolder => GIL_ERR_NOT_HOLDER,
        GilError::AlreadyHeld => GIL_ERR_ALREADY_HELD,
        e if e.is_invalid_setting() => GIL_ERR_INVALID_CONFIG,
        GilError::Busy => GIL_ERR_BUSY,
        GilError::Aborted => GIL_ERR_ABORTED,
        GilError::Reentrant => GIL_ERR_REENTRANT,
        GilError::InvalidEventMask(_) => GIL_ERR_INVALID_ARGUMENT,
        GilError::UnknownHook(_) => GIL_ERR_UNKNOWN_HOOK,
        GilError::UnknownThread => GIL_ERR_UNKNOWN_THREAD,
        GilError::ForeignThread => GIL_ERR_FOREIGN_THREAD,
        // GilError is non-exhaustive: a variant added to gil-core before
        // it gets a code here is an error all the same, not a panic.
        _ => GIL_ERR_OTHER,
    }
}

/// A static, human-readable description of `result` (also of unknown
/// codes). Any thread; never NULL.
#[no_mangle]
pub extern "C" fn gil_result_str(result: u32) -> *const c_char {
    gil_result_t::from_u32(result)
        .map_or(c"unknown result code", gil_result_t::text)
        .as_ptr()
}
