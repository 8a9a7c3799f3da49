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
    unsafe { read_into(gil, policy_out, |gil| policy_to_raw(gil.settings().policy)) }
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

/// Fills `*settings_out` with all of the lock's settings, as they are now
/// (see `gil_settings_t`), among them `options`, the text a report prints
/// for the lock. The caller sets `settings_out->struct_size` to
/// `sizeof(gil_settings_t)` first; a size this library cannot fill
/// (smaller than the struct's first version, larger than its own) is
/// `GIL_ERR_STRUCT_SIZE`, and nothing is written, as on every failure.
/// The `gil_get_*` calls of single settings read the same record. Any
/// thread; does not block.
///
/// # Safety
/// `gil` is NULL or a live lock; `settings_out` is NULL or points to a
/// `gil_settings_t` writable for its `struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn gil_get_settings(gil: *const gil_t, settings_out: *mut gil_settings_t) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        if settings_out.is_null() {
            return Err(GIL_ERR_NULL_ARGUMENT);
        }
        // SAFETY: non-NULL; the first field is readable by the contract.
        let size = unsafe { ptr::addr_of!((*settings_out).struct_size).read_unaligned() } as usize;
        if !(GIL_SETTINGS_MIN_SIZE..=size_of::<gil_settings_t>()).contains(&size) {
            return Err(GIL_ERR_STRUCT_SIZE);
        }
        let full = gil_settings_t {
            struct_size: size as u32,
            ..gil_settings_t::from_settings(gil.settings())
        };
        // SAFETY: `size` bytes are writable at `settings_out` (contract) and
        // readable from `full` (checked `size <= sizeof`).
        unsafe { ptr::copy_nonoverlapping(ptr::addr_of!(full).cast::<u8>(), settings_out.cast::<u8>(), size) };
        Ok(())
    })
}

/// `*value_out` = the lock's value of the number setting `key` (as
/// `gil_setting_key` names it: "spin_us", ...), as it is now; 0 while it
/// is not in effect ("lazy_us" without lazy release), as in
/// `gil_settings_t`. `GIL_ERR_UNKNOWN_SETTING` if no setting has that key.
/// Any thread; does not block.
///
/// # Safety
/// `gil` is NULL or a live lock; `key` is NULL or a NUL-terminated string;
/// `value_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_setting(gil: *const gil_t, key: *const c_char, value_out: *mut u64) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        // SAFETY: forwarded from this function's contract.
        let setting = unsafe { setting_named(key) }?;
        let value = setting.get(&gil.settings()).unwrap_or(0);
        // SAFETY: forwarded from this function's contract.
        unsafe { write_out(value_out, value) }
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
    unsafe { read_into(gil, us_out, |gil| gil.settings().lazy_release_us.unwrap_or(0)) }
}

/// `*monitor_out` = whether the process's monitor thread keeps this lock's
/// time. Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `monitor_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_monitor(gil: *const gil_t, monitor_out: *mut bool) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { read_into(gil, monitor_out, |gil| gil.settings().monitor) }
}

/// `*name_out` = the name of the preset this lock's configuration is (a
/// static string, as `gil_preset_name` gives), leaving aside the switch
/// interval, spin limit, lazy-release threshold and bound on laps set on
/// top of it; NULL
/// for a combination that no preset names. Any thread.
///
/// The name alone does not say the lock (a host's default for a preset
/// sets values on top of it): what a report prints is the options text
/// of `gil_get_settings`, which does.
///
/// # Safety
/// `gil` is NULL or a live lock; `name_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_preset(gil: *const gil_t, name_out: *mut *const c_char) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { read_into(gil, name_out, |gil| preset_name(gil.settings())) }
}

/// `*laps_out` = the lock's bound on laps (0: none; see `gil_config_t`).
/// Any thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `laps_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_laps(gil: *const gil_t, laps_out: *mut u32) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { read_into(gil, laps_out, |gil| gil.settings().laps) }
}

/// `*us_out` = the lock's spin limit in microseconds (0: no spinning). Any
/// thread.
///
/// # Safety
/// `gil` is NULL or a live lock; `us_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gil_get_spin(gil: *const gil_t, us_out: *mut u64) -> gil_result_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { read_into(gil, us_out, |gil| gil.settings().spin_us) }
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

#[cfg(test)]
mod tests {
    use std::ffi::CString;
    use std::mem::MaybeUninit;

    use gil_core::{Host, Options};

    use super::*;

    /// A lock built from `text` parsed on `host`.
    fn lock_on(host: &str, text: Option<&str>) -> *mut gil_t {
        let host = CString::new(host).unwrap();
        let text = text.map(|t| CString::new(t).unwrap());
        let mut config = MaybeUninit::<gil_config_t>::uninit();
        let mut err = [0 as c_char; 256];
        // SAFETY: valid strings (or NULL text), writable outputs.
        let r = unsafe {
            gil_config_parse_host(
                host.as_ptr(),
                text.as_ref().map_or(ptr::null(), |t| t.as_ptr()),
                config.as_mut_ptr(),
                ptr::null_mut(),
                err.as_mut_ptr(),
                err.len(),
            )
        };
        // SAFETY: NUL-terminated by gil_config_parse_host (empty on success).
        let message = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned();
        assert_eq!((r, message.as_str()), (GIL_OK, ""), "{host:?} {text:?}");
        let mut lock = ptr::null_mut();
        // SAFETY: a config written on success, a writable out-pointer.
        assert_eq!(unsafe { gil_new(config.as_ptr(), &mut lock) }, GIL_OK);
        lock
    }

    fn settings_of(lock: *const gil_t) -> gil_settings_t {
        let mut s = MaybeUninit::<gil_settings_t>::uninit();
        // SAFETY: struct_size is the first field, written before the call.
        unsafe { ptr::addr_of_mut!((*s.as_mut_ptr()).struct_size).write(size_of::<gil_settings_t>() as u32) };
        // SAFETY: a live lock and a record writable for its struct_size.
        assert_eq!(unsafe { gil_get_settings(lock, s.as_mut_ptr()) }, GIL_OK);
        // SAFETY: written whole on success.
        unsafe { s.assume_init() }
    }

    fn text_of(s: &gil_settings_t) -> String {
        // SAFETY: NUL-terminated by gil_get_settings.
        unsafe { CStr::from_ptr(s.options.as_ptr()) }
            .to_str()
            .unwrap()
            .to_owned()
    }

    fn free(lock: *mut gil_t) {
        // SAFETY: a live lock, freed once.
        assert_eq!(unsafe { gil_free(lock) }, GIL_OK);
    }

    #[test]
    fn a_hosts_preset_reports_the_options_text_it_is() {
        for (host, text, printed) in [
            ("cpython", "priority", "priority,spin_us=50"),
            (
                "cpython",
                "priority-lazy,lazy_us=30",
                "priority-lazy,lazy_us=30,spin_us=50",
            ),
            ("ocaml", "classic", "classic,interval_us=50000"),
            ("ocaml", "priority", "priority,spin_us=200"),
            ("ruby", "classic", "classic,interval_us=100000"),
            ("ruby", "priority,spin_us=0", "priority,spin_us=0"),
            ("micropython", "priority", "priority,spin_us=0"),
            ("generic", "lazy", "lazy"),
        ] {
            let lock = lock_on(host, Some(text));
            let s = settings_of(lock);
            assert_eq!(text_of(&s), printed, "{text} on {host}");
            // SAFETY: a static name of a preset.
            let preset = unsafe { CStr::from_ptr(s.preset) }.to_str().unwrap();
            assert_eq!(preset, text.split(',').next().unwrap(), "{text} on {host}");
            // What was printed builds the same lock on every host.
            let mut i = 0;
            // SAFETY: gil_host_name returns NULL or a static C string.
            while let Some(on) = unsafe { gil_host_name(i).as_ref() } {
                // SAFETY: non-NULL static C string.
                let on = unsafe { CStr::from_ptr(on) }.to_str().unwrap();
                let again = lock_on(on, Some(printed));
                assert_eq!(text_of(&settings_of(again)), printed, "'{printed}' on {on}");
                free(again);
                i += 1;
            }
            free(lock);
        }
        // No text: the host's default.
        let lock = lock_on("ocaml", None);
        assert_eq!(text_of(&settings_of(lock)), "priority,spin_us=200");
        free(lock);
    }

    #[test]
    fn the_record_matches_the_getters() {
        for text in [
            "priority-lazy-monitor,interval_us=1234,lazy_us=77,spin_us=9,laps=3",
            "classic",
            "monitor,laps=2",
            "lazy",
        ] {
            let lock = lock_on("cpython", Some(text));
            // SAFETY: a live lock.
            unsafe { assert_eq!(gil_set_switch_interval(lock, 4321), GIL_OK) };
            let s = settings_of(lock);
            let (mut policy, mut interval, mut lazy, mut spin, mut laps) = (9, 0, 0, 0, 0);
            let (mut monitor, mut preset) = (false, ptr::null());
            // SAFETY: a live lock and writable outputs.
            unsafe {
                assert_eq!(gil_get_policy(lock, &mut policy), GIL_OK);
                assert_eq!(gil_get_switch_interval(lock, &mut interval), GIL_OK);
                assert_eq!(gil_get_lazy_release(lock, &mut lazy), GIL_OK);
                assert_eq!(gil_get_spin(lock, &mut spin), GIL_OK);
                assert_eq!(gil_get_laps(lock, &mut laps), GIL_OK);
                assert_eq!(gil_get_monitor(lock, &mut monitor), GIL_OK);
                assert_eq!(gil_get_preset(lock, &mut preset), GIL_OK);
            }
            assert_eq!(s.struct_size as usize, size_of::<gil_settings_t>());
            assert_eq!(
                (
                    s.policy,
                    s.switch_interval_us,
                    s.lazy_release_us,
                    s.spin_us,
                    s.laps,
                    s.monitor,
                    s.preset
                ),
                (policy, interval, lazy, spin, laps, monitor, preset),
                "{text}"
            );
            assert_eq!(interval, 4321, "the interval as it is now");
            // The text is the settings: it reads back as them.
            // SAFETY: a live lock.
            let core = unsafe { &(*lock).gil }.settings();
            let parsed = Options::parse_for(Host::Ruby, text_of(&s).as_bytes()).unwrap();
            assert_eq!(parsed.settings(), core, "{text}");
            free(lock);
        }
    }

    /// The keys `gil_setting_key` lists.
    fn listed_keys() -> Vec<String> {
        let mut keys = Vec::new();
        // SAFETY: gil_setting_key returns NULL or a static C string.
        while let Some(key) = unsafe { gil_setting_key(keys.len()).as_ref() } {
            // SAFETY: non-NULL static C string.
            keys.push(unsafe { CStr::from_ptr(key) }.to_str().unwrap().to_owned());
        }
        keys
    }

    #[test]
    fn every_setting_is_listed_and_reads_as_the_text_set_it() {
        let keys = listed_keys();
        let expected: Vec<&str> = gil_core::NUMBER_SETTINGS.iter().map(|s| s.key.name()).collect();
        assert_eq!(keys, expected);
        for key in &keys {
            let setting = gil_core::Key::from_name(key.as_bytes()).unwrap().setting().unwrap();
            let value = setting.min.max(setting.max / 3);
            // The first preset that takes the key.
            let preset = gil_core::PRESETS
                .iter()
                .find(|p| setting.taken_by(&gil_core::GilConfig::preset(p).unwrap().settings()))
                .unwrap();
            let lock = lock_on("generic", Some(&format!("{preset},{key}={value}")));
            let c_key = CString::new(key.as_str()).unwrap();
            let mut got = u64::MAX;
            // SAFETY: a live lock, a C string, a writable output.
            assert_eq!(unsafe { gil_get_setting(lock, c_key.as_ptr(), &mut got) }, GIL_OK);
            assert_eq!(got, value, "{preset},{key}={value}");
            free(lock);
        }
        // A setting not in effect reads as 0, as in the record.
        let lock = lock_on("generic", Some("priority"));
        let mut got = u64::MAX;
        // SAFETY: as above.
        assert_eq!(unsafe { gil_get_setting(lock, c"lazy_us".as_ptr(), &mut got) }, GIL_OK);
        assert_eq!(got, 0);
        // An unknown key or a NULL is an error, and nothing is written.
        got = 7;
        for (key, code) in [
            (c"laps ".as_ptr(), GIL_ERR_UNKNOWN_SETTING),
            (c"stats".as_ptr(), GIL_ERR_UNKNOWN_SETTING),
            (ptr::null(), GIL_ERR_NULL_ARGUMENT),
        ] {
            // SAFETY: a live lock, NULL or a C string, a writable output.
            assert_eq!(unsafe { gil_get_setting(lock, key, &mut got) }, code);
            assert_eq!(got, 7);
        }
        free(lock);
    }

    #[test]
    fn a_struct_size_it_cannot_fill_is_refused_and_nothing_is_written() {
        let lock = lock_on("generic", Some("priority"));
        for size in [
            0,
            4,
            GIL_SETTINGS_MIN_SIZE - 1,
            size_of::<gil_settings_t>() + 1,
            u32::MAX as usize,
        ] {
            let mut s = gil_settings_t::from_settings(gil_core::GilConfig::new().settings());
            s.struct_size = size as u32;
            s.laps = 77;
            // SAFETY: a live lock; the record is refused before it is written.
            let r = unsafe { gil_get_settings(lock, &mut s) };
            assert_eq!(r, GIL_ERR_STRUCT_SIZE, "struct_size {size}");
            assert_eq!(
                (s.struct_size, s.laps),
                (size as u32, 77),
                "struct_size {size}: written"
            );
        }
        // SAFETY: NULL outputs and locks are refused.
        unsafe {
            assert_eq!(gil_get_settings(lock, ptr::null_mut()), GIL_ERR_NULL_ARGUMENT);
            let mut s = gil_settings_t::from_settings(gil_core::GilConfig::new().settings());
            assert_eq!(gil_get_settings(ptr::null(), &mut s), GIL_ERR_NULL_ARGUMENT);
        }
        free(lock);
    }

    #[test]
    fn an_unknown_host_is_an_error_naming_it() {
        let mut err = [0 as c_char; 256];
        let mut config = gil_config_t::from_settings(gil_core::GilConfig::new().settings());
        config.laps = 5;
        // SAFETY: valid strings and outputs.
        let r = unsafe {
            gil_config_parse_host(
                c"jython".as_ptr(),
                c"priority".as_ptr(),
                &mut config,
                ptr::null_mut(),
                err.as_mut_ptr(),
                err.len(),
            )
        };
        // SAFETY: NUL-terminated by gil_config_parse_host.
        let message = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned();
        assert_eq!(r, GIL_ERR_UNKNOWN_HOST);
        assert_eq!(
            message,
            "unknown GIL host 'jython' (known: generic, cpython, micropython, ocaml, ruby)"
        );
        assert_eq!(config.laps, 5, "nothing written");
        // SAFETY: as above, the host NULL.
        let r = unsafe {
            gil_config_parse_host(
                ptr::null(),
                ptr::null(),
                &mut config,
                ptr::null_mut(),
                err.as_mut_ptr(),
                err.len(),
            )
        };
        // SAFETY: NUL-terminated by gil_config_parse_host.
        let message = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned();
        assert_eq!((r, message.as_str()), (GIL_ERR_NULL_ARGUMENT, "no host (NULL)"));
        // Bad text on a known host: the grammar's own message.
        // SAFETY: as above.
        let r = unsafe {
            gil_config_parse_host(
                c"ocaml".as_ptr(),
                c"priority,spin_us=99999".as_ptr(),
                &mut config,
                ptr::null_mut(),
                err.as_mut_ptr(),
                err.len(),
            )
        };
        // SAFETY: NUL-terminated by gil_config_parse_host.
        let message = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned();
        assert_eq!(r, GIL_ERR_INVALID_CONFIG);
        assert!(message.ends_with("not '99999'"), "{message}");
    }

    #[test]
    fn hosts_match_the_core() {
        let mut i = 0;
        // SAFETY: gil_host_name returns NULL or a static C string.
        while let Some(name) = unsafe { gil_host_name(i).as_ref() } {
            // SAFETY: non-NULL static C string.
            let name = unsafe { CStr::from_ptr(name) }.to_str().unwrap();
            assert_eq!(Host::ALL.get(i).map(|h| h.name()), Some(name));
            i += 1;
        }
        assert_eq!(i, Host::ALL.len());
    }

    #[test]
    fn the_longest_options_text_fits_the_record() {
        let longest = gil_core::GilConfig::preset("priority-lazy-monitor")
            .unwrap()
            .switch_interval_us(gil_core::MAX_SWITCH_INTERVAL_US)
            .lazy_release_us(Some(gil_core::MAX_SWITCH_INTERVAL_US))
            .spin_us(gil_core::MAX_SPIN_US)
            .laps(gil_core::MAX_LAPS)
            .settings();
        let text = Options::from_settings(longest).unwrap().to_string();
        assert!(text.len() < GIL_OPTIONS_TEXT_MAX, "{text}");
        assert_eq!(text_of(&gil_settings_t::from_settings(longest)), text);
    }
}
