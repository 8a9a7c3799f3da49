//! The options grammar for C hosts: `gil_config_parse`, `gil_options_t`,
//! `gil_trace_path` (see gil-core's `options` module for the grammar).

use gil_core::options::{expand_trace_path, OptionsErrorKind};
use gil_core::Options;

use super::*;

/// Room for a `trace` file name in `gil_options_t`, its NUL included.
pub const GIL_TRACE_PATH_MAX: usize = 1024;

// The longest name the grammar takes fits, with its NUL.
const _: () = assert!(gil_core::options::MAX_TRACE_PATH < GIL_TRACE_PATH_MAX);

/// `gil_options_t.given`: the text gave `interval_us`.
pub const GIL_OPTION_INTERVAL_US: u32 = 1 << 0;
/// `gil_options_t.given`: the text gave `lazy_us`.
pub const GIL_OPTION_LAZY_US: u32 = 1 << 1;
/// `gil_options_t.given`: the text gave `spin_us`.
pub const GIL_OPTION_SPIN_US: u32 = 1 << 2;
/// `gil_options_t.given`: the text gave `laps`.
pub const GIL_OPTION_LAPS: u32 = 1 << 3;
/// `gil_options_t.given`: the text gave `stats`.
pub const GIL_OPTION_STATS: u32 = 1 << 4;
/// `gil_options_t.given`: the text gave `trace`.
pub const GIL_OPTION_TRACE: u32 = 1 << 5;
/// `gil_options_t.given`: the text gave `trace_ring`.
pub const GIL_OPTION_TRACE_RING: u32 = 1 << 6;

/// What an options text asks for beyond the lock's configuration: the
/// observers a host starts with the lock, and which keys were given.
/// Written whole by `gil_config_parse` (`struct_size` included).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gil_options_t {
    /// `sizeof(gil_options_t)`.
    pub struct_size: u32,
    /// The keys the text gave, as `GIL_OPTION_*` bits (a host that has its
    /// own way to set the switch interval can tell `interval_us=` given
    /// from the default).
    pub given: u32,
    /// `trace_ring=N`: keep only the last N events (`GIL_TRACE_RING`); 0
    /// if not given.
    pub trace_ring: u64,
    /// `stats=1`: 1, per-thread accounting from the start; else 0.
    pub stats: u32,
    /// `trace=PATH`: the file name as given, `%p` not yet replaced (see
    /// `gil_trace_path`), NUL-terminated; empty if not given.
    pub trace: [c_char; GIL_TRACE_PATH_MAX],
}

/// Writes `message` into `err` (`err_len` bytes, NUL included), cut to fit
/// on a character boundary. Nothing if `err` is NULL or `err_len` 0. Also
/// `gil_trace_path`'s copy, after it has checked that the name fits.
///
/// # Safety
/// `err` is NULL or valid for writing `err_len` bytes.
unsafe fn write_message(err: *mut c_char, err_len: usize, message: &str) {
    if err.is_null() || err_len == 0 {
        return;
    }
    let mut n = message.len().min(err_len - 1);
    while !message.is_char_boundary(n) {
        n -= 1;
    }
    // SAFETY: `err` has `err_len` > n bytes by this function's contract;
    // `message` has n readable bytes; they cannot overlap (a Rust string).
    unsafe {
        ptr::copy_nonoverlapping(message.as_ptr().cast::<c_char>(), err, n);
        err.add(n).write(0);
    }
}

/// Parses an options text, `PRESET[,KEY=VALUE...]`, the grammar every host
/// shares: a preset name (see `gil_preset_name`), then each at most once
/// `interval_us` (0 to `GIL_MAX_SWITCH_INTERVAL_US`), `lazy_us` (1 µs to an
/// hour; lazy presets only), `spin_us` (0 to `GIL_MAX_SPIN_US`), `laps` (0
/// to `GIL_MAX_LAPS`; not `classic`), `stats` (0 or 1), `trace` (a file
/// name ending in `.json` or `.svg`; `%p` for the process id, `%%` for a
/// percent sign), `trace_ring` (1 to 2^32 events; needs `trace`). No
/// spaces; an unknown key, a key given twice and an empty option are
/// errors, so a typo never leaves a default silently in force.
///
/// On success fills `*config_out` (whole, `struct_size` included, no
/// callback: add the host's own) and, if `options_out` is not NULL,
/// `*options_out`. With `options_out` NULL the host starts no observers,
/// and `stats`, `trace` and `trace_ring` are refused.
///
/// On failure writes nothing to the outputs and puts a message for the
/// user into `err` (if not NULL; cut to `err_len` bytes, NUL included; 256
/// bytes hold every message but the longest values), naming the text
/// (escaped: `\xNN` for a byte that is not printable ASCII) and what is
/// wrong, e.g. `'priority,laps=99': laps must be a number from 0 to 16, not
/// '99'`. Returns `GIL_ERR_UNKNOWN_PRESET` for an unknown preset,
/// `GIL_ERR_INVALID_CONFIG` for anything else wrong in the text,
/// `GIL_ERR_NULL_ARGUMENT` if `text` or `config_out` is NULL. Any thread.
///
/// # Safety
/// `text` is NULL or a NUL-terminated string; `config_out` is NULL or
/// writable for a `gil_config_t`; `options_out` is NULL or writable for a
/// `gil_options_t`; `err` is NULL or writable for `err_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn gil_config_parse(
    text: *const c_char,
    config_out: *mut gil_config_t,
    options_out: *mut gil_options_t,
    err: *mut c_char,
    err_len: usize,
) -> gil_result_t {
    guard_result(|| {
        if text.is_null() || config_out.is_null() {
            // SAFETY: forwarded from this function's contract.
            unsafe { write_message(err, err_len, "no options text (NULL)") };
            return Err(GIL_ERR_NULL_ARGUMENT);
        }
        // SAFETY: non-NULL and NUL-terminated by the contract.
        let bytes = unsafe { CStr::from_ptr(text) }.to_bytes();
        let parsed = if options_out.is_null() {
            Options::parse_without_observers(bytes)
        } else {
            Options::parse(bytes)
        };
        let options = parsed.map_err(|e| {
            // SAFETY: forwarded from this function's contract.
            unsafe { write_message(err, err_len, &e.to_string()) };
            match e.kind() {
                OptionsErrorKind::UnknownPreset(_) => GIL_ERR_UNKNOWN_PRESET,
                _ => GIL_ERR_INVALID_CONFIG,
            }
        })?;
        let config = gil_config_t::from_settings(options.settings());
        if !options_out.is_null() {
            let mut out = gil_options_t {
                struct_size: size_of::<gil_options_t>() as u32,
                given: options.given_mask(),
                trace_ring: options.trace_ring().unwrap_or(0),
                stats: u32::from(options.stats()),
                trace: [0; GIL_TRACE_PATH_MAX],
            };
            // The grammar keeps a name under MAX_TRACE_PATH (< the room).
            let name = options.trace().unwrap_or_default().as_bytes();
            for (to, from) in out.trace.iter_mut().zip(name) {
                *to = *from as c_char;
            }
            // SAFETY: checked non-NULL; writable by the contract.
            unsafe { options_out.write(out) };
        }
        // SAFETY: checked non-NULL; writable by the contract.
        unsafe { config_out.write(config) };
        Ok(())
    })
}

/// The trace file name for process `pid` from a `trace=` name as given
/// (`gil_options_t.trace`): `%p` replaced by `pid`, `%%` by `%`, into `out`
/// (`out_len` bytes, NUL included). `GIL_ERR_INVALID_ARGUMENT` if
/// `template` is not a name `gil_config_parse` accepts, or the name does
/// not fit in `out` (nothing is written then); `GIL_ERR_NULL_ARGUMENT` if
/// `template` or `out` is NULL. Any thread.
///
/// # Safety
/// `template` is NULL or a NUL-terminated string; `out` is NULL or
/// writable for `out_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn gil_trace_path(
    template: *const c_char,
    pid: u32,
    out: *mut c_char,
    out_len: usize,
) -> gil_result_t {
    guard_result(|| {
        if template.is_null() || out.is_null() {
            return Err(GIL_ERR_NULL_ARGUMENT);
        }
        // SAFETY: non-NULL and NUL-terminated by the contract.
        let template = unsafe { CStr::from_ptr(template) }
            .to_str()
            .map_err(|_| GIL_ERR_INVALID_ARGUMENT)?;
        let path = expand_trace_path(template, pid).ok_or(GIL_ERR_INVALID_ARGUMENT)?;
        if path.len() >= out_len {
            return Err(GIL_ERR_INVALID_ARGUMENT);
        }
        // SAFETY: forwarded from this function's contract; it fits whole.
        unsafe { write_message(out, out_len, &path) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use gil_core::options::Key;

    use super::*;

    #[test]
    fn option_bits_are_the_keys_bits() {
        let bits = [
            (Key::IntervalUs, GIL_OPTION_INTERVAL_US),
            (Key::LazyUs, GIL_OPTION_LAZY_US),
            (Key::SpinUs, GIL_OPTION_SPIN_US),
            (Key::Laps, GIL_OPTION_LAPS),
            (Key::Stats, GIL_OPTION_STATS),
            (Key::Trace, GIL_OPTION_TRACE),
            (Key::TraceRing, GIL_OPTION_TRACE_RING),
        ];
        assert_eq!(bits.len(), Key::ALL.len());
        for (key, bit) in bits {
            assert_eq!(key.bit(), bit, "{key}");
        }
    }

    fn parse(text: &CStr, observers: bool) -> (gil_result_t, gil_config_t, gil_options_t, String) {
        let mut config = gil_config_t::from_settings(GilConfig::new().settings());
        // SAFETY: all-zero is a valid gil_options_t (integers and chars).
        let mut options: gil_options_t = unsafe { std::mem::zeroed() };
        let mut err = [0 as c_char; 80];
        let out = if observers {
            ptr::addr_of_mut!(options)
        } else {
            ptr::null_mut()
        };
        // SAFETY: valid pointers and lengths.
        let r = unsafe { gil_config_parse(text.as_ptr(), &mut config, out, err.as_mut_ptr(), err.len()) };
        // SAFETY: gil_config_parse NUL-terminates what it writes; zeroed else.
        let message = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned();
        (r, config, options, message)
    }

    #[test]
    fn parse_fills_config_and_options() {
        let (r, config, options, message) = parse(c"priority-lazy,lazy_us=30,laps=3,stats=1,trace=g-%p.svg", true);
        assert_eq!((r, message.as_str()), (GIL_OK, ""));
        assert_eq!(config.policy, GIL_POLICY_PRIORITY);
        assert_eq!(
            (config.lazy_release_us, config.laps, config.switch_interval_us),
            (30, 3, 5_000)
        );
        assert_eq!(
            options.given,
            GIL_OPTION_LAZY_US | GIL_OPTION_LAPS | GIL_OPTION_STATS | GIL_OPTION_TRACE
        );
        assert_eq!((options.stats, options.trace_ring), (1, 0));
        // SAFETY: NUL-terminated by gil_config_parse.
        let trace = unsafe { CStr::from_ptr(options.trace.as_ptr()) };
        assert_eq!(trace, c"g-%p.svg");
        let mut path = [0 as c_char; 16];
        // SAFETY: valid pointers and lengths.
        let r = unsafe { gil_trace_path(trace.as_ptr(), 77, path.as_mut_ptr(), 16) };
        assert_eq!(r, GIL_OK);
        // SAFETY: NUL-terminated by gil_trace_path.
        assert_eq!(unsafe { CStr::from_ptr(path.as_ptr()) }, c"g-77.svg");
        // SAFETY: valid pointers; too short for "g-77.svg" and its NUL.
        let r = unsafe { gil_trace_path(trace.as_ptr(), 77, path.as_mut_ptr(), 8) };
        assert_eq!(r, GIL_ERR_INVALID_ARGUMENT);
    }

    #[test]
    fn errors_are_codes_and_messages_and_write_no_output() {
        let (r, config, _, message) = parse(c"fast", true);
        assert_eq!(r, GIL_ERR_UNKNOWN_PRESET);
        assert!(message.starts_with("'fast': unknown GIL policy 'fast'"), "{message}");
        assert_eq!(config.policy, GIL_POLICY_CLASSIC); // untouched
        let (r, _, _, message) = parse(c"priority,laps=99", true);
        assert_eq!(r, GIL_ERR_INVALID_CONFIG);
        assert_eq!(
            message,
            "'priority,laps=99': laps must be a number from 0 to 16, not '99'"
        );
        let (r, _, _, message) = parse(c"priority,trace=t.svg", false);
        assert_eq!(r, GIL_ERR_INVALID_CONFIG);
        assert!(message.contains("trace asks for an observer"), "{message}");
        // Cut to the buffer, on a character boundary, NUL-terminated.
        let (r, _, _, message) = parse(
            c"priority,spin_us=\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9",
            true,
        );
        assert_eq!(r, GIL_ERR_INVALID_CONFIG);
        assert_eq!(message.len(), 79);
        // SAFETY: NULL text is refused before anything is read.
        let r = unsafe { gil_config_parse(ptr::null(), ptr::null_mut(), ptr::null_mut(), ptr::null_mut(), 0) };
        assert_eq!(r, GIL_ERR_NULL_ARGUMENT);
    }
}
