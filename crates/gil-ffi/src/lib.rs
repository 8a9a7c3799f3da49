//! The C ABI of gil-core: `include/gil.h`, `libgil.a`, `libgil.so`.
//!
//! Conventions (after rustls-ffi):
//! - every symbol starts with `gil_`; the lock is the opaque `gil_t`;
//! - fallible functions return a `gil_result_t` whose numbers never change
//!   and are never reused; `gil_result_str` names them;
//! - out-parameters end in `_out` and are written only on success;
//! - structs the caller fills or reads (`gil_config_t`, `gil_counters_t`)
//!   start with `struct_size`, so fields can be added without breaking
//!   callers compiled against an older header;
//! - every exported body runs inside `catch_unwind`: a Rust panic becomes
//!   `GIL_ERR_PANIC` (or a documented neutral value) and never unwinds into C;
//! - enum-like inputs are plain integers, checked on entry, so no C value
//!   can become an invalid Rust enum.
#![allow(non_camel_case_types, reason = "C names: the header is the interface")]

use std::ffi::{c_char, c_void, CStr, OsStr};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::mem::{offset_of, size_of};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use gil_core::trace::{TraceFormat, Tracer};
use gil_core::{Event, EventKind, Gil, GilConfig, GilError, Policy, ReleaseReason, Token};

/// Major version of this library; matches `Cargo.toml`.
pub const GIL_VERSION_MAJOR: u32 = 0;
/// Minor version of this library; matches `Cargo.toml`.
pub const GIL_VERSION_MINOR: u32 = 1;
/// Patch version of this library; matches `Cargo.toml`.
pub const GIL_VERSION_PATCH: u32 = 0;

/// What a call did. The numbers are fixed forever; a retired code is never
/// reused.
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
    /// An enum-like argument (a release reason, a policy) out of range, or a
    /// `gil_counters_t` with a bad `struct_size`.
    GIL_ERR_INVALID_ARGUMENT = 8,
    /// `gil_policy_from_name` does not know the name.
    GIL_ERR_UNKNOWN_POLICY = 9,
    /// A file could not be created or written (`gil_trace_start`,
    /// `gil_trace_stop`).
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
}
use gil_result_t::*;

impl gil_result_t {
    /// Every code, for turning a number back into one.
    const ALL: [gil_result_t; 14] = [
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
    ];

    /// The code numbered `n`, if there is one.
    fn from_u32(n: u32) -> Option<gil_result_t> {
        Self::ALL.into_iter().find(|r| *r as u32 == n)
    }

    /// What the code means, for people.
    fn text(self) -> &'static CStr {
        match self {
            GIL_OK => c"ok",
            GIL_ERR_NULL_ARGUMENT => c"a required pointer argument was NULL",
            GIL_ERR_NOT_HOLDER => c"the calling token does not hold the lock",
            GIL_ERR_ALREADY_HELD => c"the calling token already holds the lock (it is not re-entrant)",
            GIL_ERR_INVALID_CONFIG => c"invalid configuration (struct_size, policy or switch interval)",
            GIL_ERR_BUSY => c"the lock is held or awaited",
            GIL_ERR_PANIC => c"internal error (a Rust panic was caught)",
            GIL_ERR_ABORTED => c"the wait for the lock was aborted by the caller's callback",
            GIL_ERR_INVALID_ARGUMENT => c"an argument is out of range",
            GIL_ERR_UNKNOWN_POLICY => c"unknown policy name",
            GIL_ERR_IO => c"a file could not be created or written",
            GIL_ERR_NOT_TRACING => c"no trace is running on this lock",
            GIL_ERR_REENTRANT => c"called from inside one of the lock's own callbacks",
            GIL_ERR_UNKNOWN_PRESET => c"unknown preset name",
        }
    }
}

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

/// A scheduling policy: one of the `GIL_POLICY_*` values.
pub type gil_policy_t = u32;
/// CPython 3.2–3.13's "new GIL", exactly.
pub const GIL_POLICY_CLASSIC: gil_policy_t = 0;
/// I/O-class threads (last release voluntary) before CPU-class ones (last
/// release forced); an I/O-class waiter preempts a CPU-class holder at once;
/// a CPU-class waiter is served first after 10 switch intervals.
pub const GIL_POLICY_PRIORITY: gil_policy_t = 1;

/// Default switch interval, in microseconds (CPython's 5 ms).
pub const GIL_DEFAULT_SWITCH_INTERVAL_US: u64 = 5_000;
/// Largest accepted switch interval, in microseconds (one hour).
pub const GIL_MAX_SWITCH_INTERVAL_US: u64 = 3_600_000_000;
/// Largest accepted `spin_us`, in microseconds (10 ms).
pub const GIL_MAX_SPIN_US: u64 = 10_000;

/// Called as `callback(user_data, holder)` when a waiter asks `holder` to
/// drop the lock. It runs on the waiting thread, under the lock's internal
/// mutex, while `holder` still holds the lock, so it may touch the holder's
/// per-thread state. It must be short and must not block. Calls on the same
/// lock from inside it that would wait (acquire, release, hooks, traces,
/// free) return `GIL_ERR_REENTRANT` instead of deadlocking. It may be called
/// from any thread.
pub type gil_drop_request_cb = Option<unsafe extern "C" fn(user_data: *mut c_void, holder: *mut c_void)>;

/// Called as `callback(user_data)` by `gil_acquire_or_abort` each time a
/// switch interval passes without getting the lock; non-zero gives up. Same
/// restrictions as `gil_drop_request_cb`.
pub type gil_abort_cb = Option<unsafe extern "C" fn(user_data: *mut c_void) -> bool>;

/// How to build a lock. Fill it with `gil_config_init`, then change fields.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gil_config_t {
    /// `sizeof(gil_config_t)` as the caller compiled it (set by
    /// `gil_config_init`). Fields past it take their defaults; a size larger
    /// than this library knows is refused with `GIL_ERR_INVALID_CONFIG`.
    pub struct_size: u32,
    /// One of the `GIL_POLICY_*` values. Default: `GIL_POLICY_CLASSIC`.
    pub policy: gil_policy_t,
    /// Microseconds a waiter waits before asking for a drop; 0 behaves as 1.
    /// Default: `GIL_DEFAULT_SWITCH_INTERVAL_US`.
    pub switch_interval_us: u64,
    /// Optional; see `gil_drop_request_cb`. Default: NULL.
    pub on_drop_request: gil_drop_request_cb,
    /// Passed to `on_drop_request`. Default: NULL.
    pub user_data: *mut c_void,
    /// Lazy release around system calls: a voluntary release only marks the
    /// thread as in a call, and another thread takes the lock over once the
    /// call has lasted this many microseconds. 0 (the default): off, every
    /// release is real, as in CPython.
    pub lazy_release_us: u64,
    /// Non-zero: the process's monitor thread keeps this lock's time and
    /// waiters are served first come, first served (see gil-core's
    /// `GilConfig::monitor`). Default: 0, every waiter times its own wait.
    pub monitor: u32,
    /// A bounded spin: microseconds a waiter that has just asked the holder
    /// to drop watches the lock before it sleeps (at most 10000). Default:
    /// 0, no spinning, as in CPython.
    pub spin_us: u32,
}

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
}

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
pub type gil_event_cb = Option<unsafe extern "C" fn(user_data: *mut c_void, event: *const gil_event_t)>;

/// Number of buckets in each histogram of `gil_histograms_t`.
pub const GIL_HISTOGRAM_BUCKETS: usize = 64;

/// Histograms of one lock, filled by `gil_get_histograms`. Bucket `i`
/// counts durations in [2^i, 2^(i+1)) nanoseconds (bucket 0 also counts 0).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gil_histograms_t {
    /// Set by the caller to `sizeof(gil_histograms_t)` before the call.
    pub struct_size: u32,
    /// Reserved, always 0.
    pub reserved: u32,
    /// Time from asking for the lock to getting it, for waits.
    pub wait: [u64; GIL_HISTOGRAM_BUCKETS],
    /// Time from getting the lock to letting go of it.
    pub hold: [u64; GIL_HISTOGRAM_BUCKETS],
}

/// A lock. Opaque: create with `gil_new`, destroy with `gil_free`.
pub struct gil_t {
    gil: Gil,
    /// Who owns the lock's event hook. Changed only under this mutex, so a
    /// C hook and a trace never replace each other.
    hook: Mutex<HookOwner>,
}

/// The user of a lock's one event hook.
enum HookOwner {
    None,
    /// `gil_set_event_hook` installed a C callback.
    C,
    /// `gil_trace_start` is recording into this file.
    Trace {
        tracer: Arc<Tracer>,
        file: File,
        format: TraceFormat,
    },
}

impl gil_config_t {
    /// A full-size configuration with `settings`' values and no callback:
    /// the one place the C defaults come from (`GilConfig::new()`).
    fn from_settings(settings: gil_core::Settings) -> gil_config_t {
        gil_config_t {
            struct_size: size_of::<gil_config_t>() as u32,
            policy: policy_to_raw(settings.policy),
            switch_interval_us: settings.switch_interval_us,
            on_drop_request: None,
            user_data: ptr::null_mut(),
            lazy_release_us: settings.lazy_release_us.unwrap_or(0),
            monitor: u32::from(settings.monitor),
            // A preset's spin is at most MAX_SPIN_US, which fits.
            spin_us: u32::try_from(settings.spin_us).unwrap_or(u32::MAX),
        }
    }
}

impl gil_t {
    fn hook_owner(&self) -> MutexGuard<'_, HookOwner> {
        // Nothing under this mutex can be left half-changed by a panic.
        self.hook.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `GIL_ERR_REENTRANT` inside one of this lock's callbacks: the hook
    /// owner's mutex may be held by a thread that waits for that callback
    /// to end (`gil_set_event_hook` does).
    fn check_not_in_callback(&self) -> Result<(), gil_result_t> {
        if self.gil.in_callback() {
            Err(GIL_ERR_REENTRANT)
        } else {
            Ok(())
        }
    }
}

/// The C callback and its user data, callable from any thread (the caller of
/// `gil_new` promises that, see `gil_drop_request_cb`).
struct DropCallback {
    callback: unsafe extern "C" fn(*mut c_void, *mut c_void),
    user_data: *mut c_void,
}
// SAFETY: `gil_drop_request_cb`'s contract makes the callback and its user
// data usable from any thread; we only pass the pointer back.
unsafe impl Send for DropCallback {}
// SAFETY: as above; we never dereference `user_data`.
unsafe impl Sync for DropCallback {}

impl DropCallback {
    fn call(&self, holder: Token) {
        // SAFETY: the caller of gil_new promised a callback that accepts its
        // user data and a holder token, from any thread.
        unsafe { (self.callback)(self.user_data, holder.get() as *mut c_void) }
    }
}

/// Runs `body`, turning a panic into `on_panic`.
fn guard<T>(on_panic: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(on_panic)
}

/// Runs a fallible body, turning a panic into `GIL_ERR_PANIC`.
fn guard_result(body: impl FnOnce() -> Result<(), gil_result_t>) -> gil_result_t {
    guard(GIL_ERR_PANIC, || match body() {
        Ok(()) => GIL_OK,
        Err(code) => code,
    })
}

fn map_err(e: GilError) -> gil_result_t {
    match e {
        GilError::NotHolder => GIL_ERR_NOT_HOLDER,
        GilError::AlreadyHeld => GIL_ERR_ALREADY_HELD,
        GilError::InvalidSwitchInterval(_) | GilError::InvalidLazyThreshold(_) | GilError::InvalidSpin(_) => {
            GIL_ERR_INVALID_CONFIG
        }
        GilError::Busy => GIL_ERR_BUSY,
        GilError::Aborted => GIL_ERR_ABORTED,
        GilError::Reentrant => GIL_ERR_REENTRANT,
        _ => GIL_ERR_PANIC,
    }
}

/// # Safety
/// `gil` is NULL or a pointer from `gil_new` not yet freed.
unsafe fn lock_ref<'a>(gil: *const gil_t) -> Result<&'a Gil, gil_result_t> {
    // SAFETY: forwarded from this function's contract.
    unsafe { handle_ref(gil) }.map(|g| &g.gil)
}

/// # Safety
/// `gil` is NULL or a pointer from `gil_new` not yet freed.
unsafe fn handle_ref<'a>(gil: *const gil_t) -> Result<&'a gil_t, gil_result_t> {
    // SAFETY: by this function's contract, non-NULL means live.
    unsafe { gil.as_ref() }.ok_or(GIL_ERR_NULL_ARGUMENT)
}

/// A C string as text for people (names, titles): bytes that are not UTF-8
/// become replacement characters rather than an error, since a host may
/// cut a name in the middle of a character.
///
/// # Safety
/// `s` is NULL or a NUL-terminated string.
unsafe fn c_str_lossy<'a>(s: *const c_char) -> Result<std::borrow::Cow<'a, str>, gil_result_t> {
    if s.is_null() {
        return Err(GIL_ERR_NULL_ARGUMENT);
    }
    // SAFETY: non-NULL and NUL-terminated by this function's contract.
    Ok(unsafe { CStr::from_ptr(s) }.to_string_lossy())
}

fn token(ptr: *mut c_void) -> Result<Token, gil_result_t> {
    Token::from_ptr(ptr).ok_or(GIL_ERR_NULL_ARGUMENT)
}

fn policy_from_raw(raw: gil_policy_t) -> Result<Policy, gil_result_t> {
    match raw {
        GIL_POLICY_CLASSIC => Ok(Policy::Classic),
        GIL_POLICY_PRIORITY => Ok(Policy::Priority),
        _ => Err(GIL_ERR_INVALID_ARGUMENT),
    }
}

fn policy_to_raw(policy: Policy) -> gil_policy_t {
    match policy {
        Policy::Classic => GIL_POLICY_CLASSIC,
        Policy::Priority => GIL_POLICY_PRIORITY,
        _ => u32::MAX,
    }
}

/// # Safety
/// `out` is NULL or valid for writing one `T`.
unsafe fn write_out<T>(out: *mut T, value: T) -> Result<(), gil_result_t> {
    if out.is_null() {
        return Err(GIL_ERR_NULL_ARGUMENT);
    }
    // SAFETY: non-NULL, and valid for writes by this function's contract.
    unsafe { out.write(value) };
    Ok(())
}

/// The library's version, `"MAJOR.MINOR.PATCH"`, a static string. Any thread.
#[no_mangle]
pub extern "C" fn gil_version() -> *const c_char {
    static VERSION: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(s) => s,
        Err(_) => panic!("version contains a NUL"),
    };
    VERSION.as_ptr()
}

/// A static, human-readable description of `result` (also of unknown
/// codes). Any thread; never NULL.
#[no_mangle]
pub extern "C" fn gil_result_str(result: u32) -> *const c_char {
    gil_result_t::from_u32(result)
        .map_or(c"unknown result code", gil_result_t::text)
        .as_ptr()
}

/// Fills `config` with the defaults and `struct_size = sizeof(gil_config_t)`.
/// Any thread; does not block.
///
/// # Safety
/// `config` is NULL or valid for writing a `gil_config_t`.
#[no_mangle]
pub unsafe extern "C" fn gil_config_init(config: *mut gil_config_t) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        unsafe { write_out(config, gil_config_t::from_settings(GilConfig::new().settings())) }
    })
}

/// Reads a caller's config of any known size; missing fields take defaults.
///
/// # Safety
/// `config` is valid for reading `config.struct_size` bytes.
unsafe fn read_config(config: *const gil_config_t) -> Result<gil_config_t, gil_result_t> {
    let mut full = gil_config_t::from_settings(GilConfig::new().settings());
    // SAFETY: the first field is always there (the caller sets it).
    let size = unsafe { ptr::addr_of!((*config).struct_size).read_unaligned() } as usize;
    let min = offset_of!(gil_config_t, policy) + size_of::<gil_policy_t>();
    if size < min || size > size_of::<gil_config_t>() {
        return Err(GIL_ERR_INVALID_CONFIG);
    }
    // SAFETY:
    // - the caller's struct has `size` readable bytes (its own struct_size);
    // - `full` has at least `size` bytes, checked above;
    // - all-bytes-valid: u32/u64/pointer fields, and the callback is an
    //   Option of a fn pointer, which a C NULL or function address fills.
    unsafe { ptr::copy_nonoverlapping(config.cast::<u8>(), ptr::addr_of_mut!(full).cast::<u8>(), size) };
    Ok(full)
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
        let mut builder = GilConfig::new();
        if !config.is_null() {
            // SAFETY: forwarded from this function's contract.
            let c = unsafe { read_config(config) }?;
            let policy = policy_from_raw(c.policy).map_err(|_| GIL_ERR_INVALID_CONFIG)?;
            builder = builder
                .switch_interval_us(c.switch_interval_us)
                .policy(policy)
                .lazy_release_us((c.lazy_release_us != 0).then_some(c.lazy_release_us))
                .monitor(c.monitor != 0)
                .spin_us(u64::from(c.spin_us));
            if let Some(callback) = c.on_drop_request {
                let cb = DropCallback {
                    callback,
                    user_data: c.user_data,
                };
                builder = builder.on_drop_request(move |holder| cb.call(holder));
            }
        }
        let gil = Gil::new(builder).map_err(map_err)?;
        let boxed = Box::into_raw(Box::new(gil_t {
            gil,
            hook: Mutex::new(HookOwner::None),
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
/// from inside one of its callbacks (`GIL_ERR_REENTRANT`).
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
/// request on the holder. Any thread; blocks.
///
/// # Safety
/// `gil` is NULL or a live lock from `gil_new`.
#[no_mangle]
pub unsafe extern "C" fn gil_acquire(gil: *mut gil_t, token: *mut c_void) -> gil_result_t {
    guard_result(|| {
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
    guard_result(|| {
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
    guard_result(|| {
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
    guard_result(|| {
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
    guard(false, || unsafe { lock_ref(gil) }.is_ok_and(Gil::drop_requested))
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
    guard_result(|| {
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
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        // SAFETY: forwarded from this function's contract.
        unsafe { write_out(us_out, gil.switch_interval_us()) }
    })
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
/// A C event hook stays installed; a running trace is dropped unwritten
/// (its file belongs to the parent). Call it in the child before any other
/// call on the lock and before the child starts any thread. Does not block.
///
/// # Safety
/// `gil` is NULL or a live lock (inherited from the parent), and no other
/// thread uses it during the call (in a child after `fork()` there is none).
#[no_mangle]
pub unsafe extern "C" fn gil_reinit_after_fork(gil: *mut gil_t, token: *mut c_void) -> gil_result_t {
    guard_result(|| {
        let token = self::token(token)?;
        // SAFETY: non-NULL means live by this function's contract, and no
        // other thread uses it: the exclusive borrow is sound.
        let handle = unsafe { gil.as_mut() }.ok_or(GIL_ERR_NULL_ARGUMENT)?;
        // A parent thread may have held the hook owner's mutex (or the
        // tracer's) when it forked: neither can be locked here again.
        // Replace the one, read the old one without locking it.
        let old = std::mem::replace(&mut handle.hook, Mutex::new(HookOwner::None));
        let owner = old.into_inner().unwrap_or_else(PoisonError::into_inner);
        handle.gil.reinit_after_fork(token);
        match owner {
            HookOwner::None => {}
            HookOwner::C => *handle.hook_owner() = HookOwner::C,
            HookOwner::Trace { tracer, .. } => {
                handle.gil.set_event_hook(None).map_err(map_err)?;
                tracer.discard_after_fork();
            }
        }
        Ok(())
    })
}

/// `*holder_out` = the token holding the lock, or NULL if it is free. For
/// observers (debuggers, profilers): a racy snapshot. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `holder_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_holder(gil: *const gil_t, holder_out: *mut *mut c_void) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        let holder = gil.holder().map_or(ptr::null_mut(), |t| t.get() as *mut c_void);
        // SAFETY: forwarded from this function's contract.
        unsafe { write_out(holder_out, holder) }
    })
}

/// `*holder_out` = the token that took the lock last (CPython's
/// `last_holder`), NULL after its final release. Racy snapshot; any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `holder_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_last_holder(gil: *const gil_t, holder_out: *mut *mut c_void) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        let holder = gil.last_holder().map_or(ptr::null_mut(), |t| t.get() as *mut c_void);
        // SAFETY: forwarded from this function's contract.
        unsafe { write_out(holder_out, holder) }
    })
}

/// `*locked_out` = whether some token holds the lock. A lock released
/// with `GIL_RELEASE_VOLUNTARY` under lazy release is not held, only
/// reserved (`gil_is_reserved`). Racy snapshot; any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `locked_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_is_locked(gil: *const gil_t, locked_out: *mut bool) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        // SAFETY: forwarded from this function's contract.
        unsafe { write_out(locked_out, gil.is_locked()) }
    })
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
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        // SAFETY: forwarded from this function's contract.
        unsafe { write_out(reserved_out, gil.is_reserved()) }
    })
}

/// `*switch_number_out` = how many times the lock changed hands (CPython's
/// `switch_number`). Racy snapshot; any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `switch_number_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_switch_number(gil: *const gil_t, switch_number_out: *mut u64) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        // SAFETY: forwarded from this function's contract.
        unsafe { write_out(switch_number_out, gil.switch_number()) }
    })
}

/// `*policy_out` = the lock's policy (a `GIL_POLICY_*` value). Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `policy_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_policy(gil: *const gil_t, policy_out: *mut gil_policy_t) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        // SAFETY: forwarded from this function's contract.
        unsafe { write_out(policy_out, policy_to_raw(gil.policy())) }
    })
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
        };
        // SAFETY: `size` bytes are writable at `counters_out` (contract) and
        // readable from `full` (checked `size <= sizeof`).
        unsafe { ptr::copy_nonoverlapping(ptr::addr_of!(full).cast::<u8>(), counters_out.cast::<u8>(), size) };
        Ok(())
    })
}

/// The name of `policy` (`"classic"`, ...), a static string; NULL if the
/// value is not a known policy. Any thread.
#[no_mangle]
pub extern "C" fn gil_policy_name(policy: gil_policy_t) -> *const c_char {
    guard(ptr::null(), || match policy_from_raw(policy) {
        Ok(Policy::Classic) => c"classic".as_ptr(),
        Ok(Policy::Priority) => c"priority".as_ptr(),
        _ => ptr::null(),
    })
}

/// `*policy_out` = the policy named `name` (a NUL-terminated string, as
/// printed by `gil_policy_name`); `GIL_ERR_UNKNOWN_POLICY` if there is none.
/// Any thread.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `policy_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_policy_from_name(name: *const c_char, policy_out: *mut gil_policy_t) -> gil_result_t {
    guard_result(|| {
        if name.is_null() {
            return Err(GIL_ERR_NULL_ARGUMENT);
        }
        // SAFETY: non-NULL and NUL-terminated by the contract.
        let name = unsafe { CStr::from_ptr(name) };
        let policy: Policy = name
            .to_str()
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or(GIL_ERR_UNKNOWN_POLICY)?;
        // SAFETY: forwarded from this function's contract.
        unsafe { write_out(policy_out, policy_to_raw(policy)) }
    })
}

/// `*us_out` = the lock's lazy-release threshold in microseconds, 0 if lazy
/// release is off. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `us_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_lazy_release(gil: *const gil_t, us_out: *mut u64) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        // SAFETY: forwarded from this function's contract.
        unsafe { write_out(us_out, gil.lazy_release_us().unwrap_or(0)) }
    })
}

/// The name of preset number `index` (0, 1, ...), a static string; NULL past
/// the last one. The presets: "classic" (CPython's GIL), "priority",
/// "lazy" (classic + lazy release), "priority-lazy", and the same timed by
/// the monitor thread: "monitor", "priority-monitor",
/// "priority-lazy-monitor". Any thread.
#[no_mangle]
pub extern "C" fn gil_preset_name(index: usize) -> *const c_char {
    static NAMES: [&CStr; 7] = [
        c"classic",
        c"priority",
        c"lazy",
        c"priority-lazy",
        c"monitor",
        c"priority-monitor",
        c"priority-lazy-monitor",
    ];
    guard(ptr::null(), || NAMES.get(index).map_or(ptr::null(), |n| n.as_ptr()))
}

/// Fills `*config_out` (all fields, `struct_size` included) with the preset
/// named `name` (see `gil_preset_name`): policy, lazy-release threshold and
/// the default switch interval; no callback. `GIL_ERR_UNKNOWN_PRESET` if
/// there is no such preset. Any thread.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `config_out` is NULL or
/// writable for a `gil_config_t`.
#[no_mangle]
pub unsafe extern "C" fn gil_config_preset(name: *const c_char, config_out: *mut gil_config_t) -> gil_result_t {
    guard_result(|| {
        if name.is_null() || config_out.is_null() {
            return Err(GIL_ERR_NULL_ARGUMENT);
        }
        // SAFETY: non-NULL and NUL-terminated by the contract.
        let name = unsafe { CStr::from_ptr(name) }
            .to_str()
            .map_err(|_| GIL_ERR_UNKNOWN_PRESET)?;
        let preset = GilConfig::preset(name).map_err(|_| GIL_ERR_UNKNOWN_PRESET)?;
        let config = gil_config_t::from_settings(preset.settings());
        // SAFETY: checked non-NULL; writable by the contract.
        unsafe { config_out.write(config) };
        Ok(())
    })
}

/// `*monitor_out` = whether the process's monitor thread keeps this lock's
/// time. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `monitor_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_monitor(gil: *const gil_t, monitor_out: *mut bool) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        // SAFETY: forwarded from this function's contract.
        unsafe { write_out(monitor_out, gil.uses_monitor()) }
    })
}

/// `*us_out` = the lock's spin limit in microseconds (0: no spinning). Any
/// thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `us_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_spin(gil: *const gil_t, us_out: *mut u64) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        // SAFETY: forwarded from this function's contract.
        unsafe { write_out(us_out, gil.spin_us()) }
    })
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

/// The C hook and its user data, callable from any thread (the caller of
/// `gil_set_event_hook` promises that, see `gil_event_cb`).
struct EventCallback {
    callback: unsafe extern "C" fn(*mut c_void, *const gil_event_t),
    user_data: *mut c_void,
}
// SAFETY: `gil_event_cb`'s contract makes the callback and its user data
// usable from any thread; we only pass the pointer back.
unsafe impl Send for EventCallback {}
// SAFETY: as above; we never dereference `user_data`.
unsafe impl Sync for EventCallback {}

impl EventCallback {
    fn call(&self, e: &Event) {
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

fn reason_to_raw(reason: ReleaseReason) -> gil_release_reason_t {
    match reason {
        ReleaseReason::Voluntary => GIL_RELEASE_VOLUNTARY,
        ReleaseReason::Forced => GIL_RELEASE_FORCED,
        ReleaseReason::Final => GIL_RELEASE_FINAL,
    }
}

/// Installs `callback` (with `user_data`) as the lock's event hook,
/// replacing any hook; a NULL callback removes it. Returns once no thread is
/// still inside the hook it replaced, so the caller may free that hook's
/// user data. `GIL_ERR_BUSY` while a trace is running (`gil_trace_start`),
/// which uses the same hook. `GIL_ERR_REENTRANT` from inside one of the
/// lock's callbacks (it would wait for itself). Any thread.
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
        let handle = unsafe { handle_ref(gil) }?;
        handle.check_not_in_callback()?;
        let mut owner = handle.hook_owner();
        if matches!(*owner, HookOwner::Trace { .. }) {
            return Err(GIL_ERR_BUSY);
        }
        let hook = callback.map(|callback| {
            let cb = EventCallback { callback, user_data };
            Arc::new(move |e: &Event| cb.call(e)) as gil_core::EventHook
        });
        handle.gil.set_event_hook(hook.clone()).map_err(map_err)?;
        *owner = if hook.is_some() { HookOwner::C } else { HookOwner::None };
        Ok(())
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
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        // SAFETY: forwarded from this function's contract.
        unsafe { write_out(on_out, gil.histograms_enabled()) }
    })
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
/// `sizeof(gil_histograms_t)` first. A racy snapshot. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `histograms_out` is NULL or points to a
/// writable `gil_histograms_t`.
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
        if size != size_of::<gil_histograms_t>() {
            return Err(GIL_ERR_INVALID_ARGUMENT);
        }
        let h = gil.histograms();
        let out = gil_histograms_t {
            struct_size: size as u32,
            reserved: 0,
            wait: h.wait.buckets,
            hold: h.hold.buckets,
        };
        // SAFETY: non-NULL, and writable for a whole struct by the contract.
        unsafe { histograms_out.write(out) };
        Ok(())
    })
}

/// Starts recording the lock's events, for a timeline written to `path`
/// by `gil_trace_stop`. The format follows the file name: `.json` for
/// Chrome trace-event JSON (opens in Perfetto), `.svg` for an SVG timeline;
/// anything else is `GIL_ERR_INVALID_ARGUMENT`. The file is created (or
/// emptied) now, so a path that cannot be written fails here with
/// `GIL_ERR_IO`, not at the end. `title` (may be NULL; not UTF-8 is shown
/// with replacement characters) heads the picture.
/// At most `max_events` events are kept (0: about a million); a trace that
/// fills up ends at the first event that did not fit. `GIL_ERR_BUSY` if a
/// trace is already running or a C hook is installed (`gil_set_event_hook`):
/// a trace uses the lock's event hook. `GIL_ERR_REENTRANT` from inside one
/// of the lock's callbacks. Any thread.
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
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let handle = unsafe { handle_ref(gil) }?;
        if path.is_null() {
            return Err(GIL_ERR_NULL_ARGUMENT);
        }
        // SAFETY: non-NULL and NUL-terminated by this function's contract.
        let path = Path::new(OsStr::from_bytes(unsafe { CStr::from_ptr(path) }.to_bytes()));
        let title = if title.is_null() {
            None
        } else {
            // SAFETY: non-NULL, NUL-terminated by this function's contract.
            Some(unsafe { c_str_lossy(title) }?)
        };
        let format = TraceFormat::from_path(path).ok_or(GIL_ERR_INVALID_ARGUMENT)?;
        handle.check_not_in_callback()?;
        let mut owner = handle.hook_owner();
        if !matches!(*owner, HookOwner::None) {
            return Err(GIL_ERR_BUSY);
        }
        let file = File::create(path).map_err(|_| GIL_ERR_IO)?;
        let tracer = Tracer::new(if max_events == 0 {
            Tracer::DEFAULT_MAX_EVENTS
        } else {
            max_events
        });
        if let Some(t) = title {
            tracer.set_title(t);
        }
        handle.gil.set_event_hook(Some(tracer.hook())).map_err(map_err)?;
        *owner = HookOwner::Trace { tracer, file, format };
        Ok(())
    })
}

/// Names `token`'s row in the running trace's picture (default: `thread N
/// (0x...)`); bytes that are not UTF-8 show as replacement characters. If
/// the token made its final release and came back, the name goes to the
/// life it is in now. `GIL_ERR_NOT_TRACING` without a running trace;
/// `GIL_ERR_REENTRANT` from inside one of the lock's callbacks. Any thread.
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
        match &*handle.hook_owner() {
            HookOwner::Trace { tracer, .. } => {
                tracer.name_thread(token, name);
                Ok(())
            }
            _ => Err(GIL_ERR_NOT_TRACING),
        }
    })
}

/// Stops the running trace and writes it to the file given to
/// `gil_trace_start`. `*events_out` (if `events_out` is not NULL) = the
/// number of events written. `GIL_ERR_NOT_TRACING` without a running trace;
/// `GIL_ERR_IO` if writing failed (the trace is stopped either way);
/// `GIL_ERR_REENTRANT` from inside one of the lock's callbacks. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `events_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_trace_stop(gil: *mut gil_t, events_out: *mut u64) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let handle = unsafe { handle_ref(gil) }?;
        handle.check_not_in_callback()?;
        let mut owner = handle.hook_owner();
        let HookOwner::Trace { tracer, file, format } = std::mem::replace(&mut *owner, HookOwner::None) else {
            return Err(GIL_ERR_NOT_TRACING);
        };
        handle.gil.set_event_hook(None).map_err(map_err)?;
        drop(owner);
        let trace = tracer.finish();
        let mut out = BufWriter::new(file);
        let written = match format {
            TraceFormat::ChromeJson => trace.write_chrome_json(&mut out),
            TraceFormat::Svg => trace.write_svg(&mut out),
        }
        .and_then(|()| out.flush());
        written.map_err(|_| GIL_ERR_IO)?;
        if !events_out.is_null() {
            // SAFETY: non-NULL, writable by this function's contract.
            unsafe { events_out.write(trace.events.len() as u64) };
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_constants_match_cargo_toml() {
        let want = format!("{GIL_VERSION_MAJOR}.{GIL_VERSION_MINOR}.{GIL_VERSION_PATCH}");
        assert_eq!(want, env!("CARGO_PKG_VERSION"));
        // SAFETY: gil_version returns a static NUL-terminated string.
        let got = unsafe { CStr::from_ptr(gil_version()) };
        assert_eq!(got.to_str().unwrap(), want);
    }

    #[test]
    fn header_version_macro_matches_cargo_toml() {
        let line = format!("#define GIL_VERSION \"{}\"", env!("CARGO_PKG_VERSION"));
        assert!(
            include_str!("../cbindgen.toml").contains(&line),
            "cbindgen.toml must define {line}"
        );
        assert!(
            include_str!("../../../include/gil.h").contains(&line),
            "include/gil.h is stale"
        );
    }

    #[test]
    fn constants_match_the_core() {
        assert_eq!(GIL_HISTOGRAM_BUCKETS, gil_core::HISTOGRAM_BUCKETS);
        assert_eq!(GIL_DEFAULT_SWITCH_INTERVAL_US, gil_core::DEFAULT_SWITCH_INTERVAL_US);
        assert_eq!(GIL_MAX_SWITCH_INTERVAL_US, gil_core::MAX_SWITCH_INTERVAL_US);
        assert_eq!(GIL_MAX_SPIN_US, gil_core::MAX_SPIN_US);
        for &p in Policy::ALL {
            let raw = policy_to_raw(p);
            assert_eq!(policy_from_raw(raw), Ok(p), "policy {p} does not round-trip");
            // SAFETY: gil_policy_name returns NULL or a static C string.
            let name = unsafe { CStr::from_ptr(gil_policy_name(raw)) };
            assert_eq!(name.to_str().unwrap(), p.name());
        }
    }

    #[test]
    fn every_result_code_has_its_own_text() {
        // The numbers are dense from 0: a gap would be a reused number.
        for (i, code) in gil_result_t::ALL.into_iter().enumerate() {
            assert_eq!(code as u32, i as u32, "{code:?} is out of order");
            assert_eq!(gil_result_t::from_u32(i as u32), Some(code));
        }
        let texts: Vec<_> = (0..gil_result_t::ALL.len() as u32)
            // SAFETY: gil_result_str always returns a static C string.
            .map(|c| unsafe { CStr::from_ptr(gil_result_str(c)) }.to_owned())
            .collect();
        // SAFETY: as above.
        let unknown = unsafe { CStr::from_ptr(gil_result_str(gil_result_t::ALL.len() as u32)) }.to_owned();
        for (i, t) in texts.iter().enumerate() {
            assert_ne!(t, &unknown, "code {i} has no text");
            assert_eq!(texts.iter().filter(|u| *u == t).count(), 1, "code {i} shares its text");
        }
    }

    #[test]
    fn a_preset_reads_back_as_its_settings() {
        for &name in gil_core::PRESETS {
            let mut c = std::mem::MaybeUninit::<gil_config_t>::uninit();
            let cname = std::ffi::CString::new(name).unwrap();
            // SAFETY: a valid name and a writable config.
            assert_eq!(unsafe { gil_config_preset(cname.as_ptr(), c.as_mut_ptr()) }, GIL_OK);
            // SAFETY: written on success.
            let c = unsafe { c.assume_init() };
            let gil = Gil::new(GilConfig::preset(name).unwrap()).unwrap();
            assert_eq!(c.policy, policy_to_raw(gil.policy()), "{name}");
            assert_eq!(c.switch_interval_us, gil.switch_interval_us(), "{name}");
            assert_eq!(c.lazy_release_us, gil.lazy_release_us().unwrap_or(0), "{name}");
            assert_eq!(c.monitor != 0, gil.uses_monitor(), "{name}");
            assert_eq!(u64::from(c.spin_us), gil.spin_us(), "{name}");
            assert_eq!(gil.settings(), GilConfig::preset(name).unwrap().settings(), "{name}");
        }
        let mut c = std::mem::MaybeUninit::<gil_config_t>::uninit();
        // SAFETY: as above.
        let r = unsafe { gil_config_preset(c"no-such-preset".as_ptr(), c.as_mut_ptr()) };
        assert_eq!(r, GIL_ERR_UNKNOWN_PRESET);
    }

    #[test]
    fn presets_match_the_core() {
        let mut i = 0;
        // SAFETY: gil_preset_name returns NULL or a static C string.
        while let Some(name) = unsafe { gil_preset_name(i).as_ref() } {
            // SAFETY: non-NULL static C string.
            let name = unsafe { CStr::from_ptr(name) }.to_str().unwrap();
            assert_eq!(gil_core::PRESETS.get(i), Some(&name));
            i += 1;
        }
        assert_eq!(i, gil_core::PRESETS.len());
    }

    #[test]
    fn a_panic_becomes_an_error_code() {
        assert_eq!(guard_result(|| panic!("boom")), GIL_ERR_PANIC);
    }
}
