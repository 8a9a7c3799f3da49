//! How a lock is built and what it is: `gil_config_t`, its defaults,
//! presets, policies and hosts, and `gil_settings_t`, a lock's settings
//! read back. A setting's mapping between C and gil-core lives here, in
//! both directions.

use std::ffi::CString;
use std::sync::OnceLock;

use gil_core::{Host, Key, NumberSetting, Options, Settings, NUMBER_SETTINGS};

use super::*;

/// A scheduling policy: one of the `GIL_POLICY_*` values.
pub type gil_policy_t = u32;
/// CPython 3.2–3.13's "new GIL", exactly.
pub const GIL_POLICY_CLASSIC: gil_policy_t = 0;
/// I/O-class threads (last release voluntary) before CPU-class ones (last
/// release forced); an I/O-class waiter preempts a CPU-class holder at once;
/// the CPU-class waiter that has waited longest is served first once the CPU
/// class has had no turn for 4 switch intervals, and keeps the lock for a
/// fifth of an interval.
pub const GIL_POLICY_PRIORITY: gil_policy_t = 1;

/// Default switch interval, in microseconds (CPython's 5 ms).
pub const GIL_DEFAULT_SWITCH_INTERVAL_US: u64 = 5_000;
/// Largest accepted switch interval, in microseconds (one hour).
pub const GIL_MAX_SWITCH_INTERVAL_US: u64 = 3_600_000_000;
/// Largest accepted `spin_us`, in microseconds (10 ms).
pub const GIL_MAX_SPIN_US: u64 = 10_000;
/// Largest accepted `laps`.
pub const GIL_MAX_LAPS: u32 = 16;
/// The bound on `laps` that suits a thread-per-connection server.
pub const GIL_SERVER_LAPS: u32 = 3;
/// Room for an options text in `gil_settings_t`, its NUL included.
pub const GIL_OPTIONS_TEXT_MAX: usize = 256;

// The header's constants are the core's.
const _: () = assert!(GIL_DEFAULT_SWITCH_INTERVAL_US == gil_core::DEFAULT_SWITCH_INTERVAL_US);
const _: () = assert!(GIL_MAX_SWITCH_INTERVAL_US == gil_core::MAX_SWITCH_INTERVAL_US);
const _: () = assert!(GIL_MAX_SPIN_US == gil_core::MAX_SPIN_US);
const _: () = assert!(GIL_MAX_LAPS == gil_core::MAX_LAPS);
const _: () = assert!(GIL_SERVER_LAPS == gil_core::SERVER_LAPS);

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
    /// waiters are served in arrival order, with bounded overtaking (see
    /// gil-core's `GilConfig::monitor`). Default: 0, every waiter times its own wait.
    pub monitor: u32,
    /// A bounded spin: microseconds a thread waiting for a hand-off watches
    /// the lock before it sleeps (at most 10000): a waiter that has just
    /// asked the holder to drop, a holder that dropped on request waiting
    /// for the switch, and (priority) a CPU-class waiter while an I/O-class
    /// thread holds the lock (see gil-core's `GilConfig::spin_us`). Under
    /// the priority policy an I/O-class thread that has just asked a
    /// CPU-class holder to drop watches at least 10 us, whatever the limit,
    /// if no other I/O-class thread waits.
    /// No thread spins on a one-CPU machine. Default: 0, no spinning but
    /// that look (CPython has no spin).
    pub spin_us: u32,
    /// Bounded laps (priority policy or monitor): a running thread may take
    /// the free lock before the first waiter in line only while it has
    /// taken it fewer than this many times since that waiter joined the
    /// line (at most `GIL_MAX_LAPS`; see gil-core's `GilConfig::laps` for
    /// what it costs). Default: 0, no bound. Added in 0.1; a caller built
    /// with an older header (smaller `struct_size`) gets the default.
    pub laps: u32,
}

impl gil_config_t {
    /// A full-size configuration with `settings`' values and no callback:
    /// the one place the C defaults come from (`GilConfig::new()`).
    pub(crate) fn from_settings(settings: Settings) -> gil_config_t {
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
            laps: settings.laps,
        }
    }

    /// The configuration to build the lock from, the callback included.
    /// Ranges are checked by `Gil::new`.
    pub(crate) fn builder(&self) -> Result<GilConfig, gil_result_t> {
        let policy = policy_from_raw(self.policy).map_err(|_| GIL_ERR_INVALID_CONFIG)?;
        let mut builder = GilConfig::new()
            .switch_interval_us(self.switch_interval_us)
            .policy(policy)
            .lazy_release_us((self.lazy_release_us != 0).then_some(self.lazy_release_us))
            .monitor(self.monitor != 0)
            .spin_us(u64::from(self.spin_us))
            .laps(self.laps);
        if let Some(callback) = self.on_drop_request {
            let cb = DropCallback {
                callback,
                user_data: self.user_data,
            };
            builder = builder.on_drop_request(move |holder| cb.call(holder));
        }
        Ok(builder)
    }
}

/// A lock's settings, all in one record: what `gil_get_settings` fills.
/// The caller sets `struct_size` to `sizeof(gil_settings_t)`; fields are
/// only ever appended, and a caller built with an older header (a
/// smaller `struct_size`, down to this first version's) gets the fields
/// that fit.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gil_settings_t {
    /// `sizeof(gil_settings_t)` as the caller compiled it, set by the caller.
    pub struct_size: u32,
    /// The policy, a `GIL_POLICY_*` value.
    pub policy: gil_policy_t,
    /// The switch interval in microseconds, as it is now
    /// (`gil_set_switch_interval` changes it); 0 behaves as 1.
    pub switch_interval_us: u64,
    /// The lazy-release threshold in microseconds; 0: lazy release is off.
    pub lazy_release_us: u64,
    /// The spin limit in microseconds; 0: no spinning.
    pub spin_us: u64,
    /// The bound on laps; 0: none.
    pub laps: u32,
    /// Whether the process's monitor thread keeps the lock's time.
    pub monitor: bool,
    /// The preset these settings are, leaving aside the values set on top
    /// of it (a static string, as `gil_preset_name` gives); NULL for a
    /// combination no preset names. The name alone is not the lock: a
    /// host's default for a preset may set values on top of it.
    pub preset: *const c_char,
    /// The options text these settings are, NUL-terminated: the preset,
    /// then every value that differs from the library's preset and every
    /// value some host's default sets for it (e.g. `priority,spin_us=50`,
    /// `classic,interval_us=5000`), so that it builds the same lock on
    /// every host (`gil_config_parse_host`). What a report prints for the
    /// lock. Empty if no text says these settings (a combination no
    /// preset names, laps on classic).
    pub options: [c_char; GIL_OPTIONS_TEXT_MAX],
}

/// The static name of the preset `settings` are (`Settings::preset`), NULL
/// if none.
pub(crate) fn preset_name(settings: Settings) -> *const c_char {
    settings
        .preset()
        .and_then(|name| gil_core::PRESETS.iter().position(|&p| p == name))
        .map_or(ptr::null(), |i| gil_preset_name(i))
}

/// The size of `gil_settings_t`'s first version: fields appended later
/// leave it.
pub(crate) const GIL_SETTINGS_MIN_SIZE: usize =
    offset_of!(gil_settings_t, options) + size_of::<[c_char; GIL_OPTIONS_TEXT_MAX]>();

impl gil_settings_t {
    /// A full-size record of `settings`.
    pub(crate) fn from_settings(settings: Settings) -> gil_settings_t {
        let mut record = gil_settings_t {
            struct_size: size_of::<gil_settings_t>() as u32,
            policy: policy_to_raw(settings.policy),
            switch_interval_us: settings.switch_interval_us,
            lazy_release_us: settings.lazy_release_us.unwrap_or(0),
            spin_us: settings.spin_us,
            laps: settings.laps,
            monitor: settings.monitor,
            preset: preset_name(settings),
            options: [0; GIL_OPTIONS_TEXT_MAX],
        };
        let text = Options::from_settings(settings).map(|o| o.to_string());
        // Every text fits (a test checks the longest); one that did not
        // would be left empty rather than cut into another lock's text.
        if let Some(text) = text.filter(|t| t.len() < GIL_OPTIONS_TEXT_MAX) {
            for (to, from) in record.options.iter_mut().zip(text.as_bytes()) {
                *to = *from as c_char;
            }
        }
        record
    }
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

/// The name of host number `index` (0, 1, ...), a static string; NULL past
/// the last one. The hosts: "generic" (the library's presets), "cpython",
/// "micropython", "ocaml", "ruby": each gives a preset's name its own
/// defaults (see `gil_config_parse_host`). Any thread.
#[no_mangle]
pub extern "C" fn gil_host_name(index: usize) -> *const c_char {
    static NAMES: [&CStr; 5] = [c"generic", c"cpython", c"micropython", c"ocaml", c"ruby"];
    guard(ptr::null(), || NAMES.get(index).map_or(ptr::null(), |n| n.as_ptr()))
}

/// The host named `name`: `GIL_ERR_UNKNOWN_HOST` and the core's message
/// (naming it) if there is none.
pub(crate) fn host_from_name(name: &CStr) -> Result<Host, (gil_result_t, String)> {
    Host::from_name(name.to_bytes()).map_err(|e| (GIL_ERR_UNKNOWN_HOST, e.to_string()))
}

/// The key of number setting number `index` (0, 1, ...), as the options
/// text names it, a static string; NULL past the last one. The settings:
/// "interval_us", "lazy_us", "spin_us", "laps", and any a later version
/// adds; `gil_get_setting` reads a lock's value of each, so a host can
/// list every setting without knowing them (CPython's
/// `_rustgil.settings()` does). Any thread.
#[no_mangle]
pub extern "C" fn gil_setting_key(index: usize) -> *const c_char {
    guard(ptr::null(), || {
        setting_keys().get(index).map_or(ptr::null(), |k| k.as_ptr())
    })
}

/// The number settings' keys, NUL-terminated, in the library's order.
fn setting_keys() -> &'static [CString] {
    static KEYS: OnceLock<Vec<CString>> = OnceLock::new();
    KEYS.get_or_init(|| {
        let keys = NUMBER_SETTINGS.iter().map(|s| CString::new(s.key.name()));
        keys.collect::<Result<_, _>>().expect("a key has no NUL")
    })
}

/// The number setting `key` names (a NUL-terminated key, as
/// `gil_setting_key` gives): `GIL_ERR_NULL_ARGUMENT` if NULL,
/// `GIL_ERR_UNKNOWN_SETTING` if no setting has it.
///
/// # Safety
/// `key` is NULL or a NUL-terminated string.
pub(crate) unsafe fn setting_named(key: *const c_char) -> Result<&'static NumberSetting, gil_result_t> {
    if key.is_null() {
        return Err(GIL_ERR_NULL_ARGUMENT);
    }
    // SAFETY: non-NULL and NUL-terminated by the contract.
    let key = unsafe { CStr::from_ptr(key) };
    Key::from_name(key.to_bytes())
        .and_then(Key::setting)
        .ok_or(GIL_ERR_UNKNOWN_SETTING)
}

/// Reads a caller's config of any known size; missing fields take defaults.
///
/// # Safety
/// `config` is valid for reading `config.struct_size` bytes.
pub(crate) unsafe fn read_config(config: *const gil_config_t) -> Result<gil_config_t, gil_result_t> {
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
