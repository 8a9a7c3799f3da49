//! The options grammar for C hosts: `gil_config_parse`, `gil_options_t`,
//! `gil_trace_path` (see gil-core's `options` module for the grammar).

use std::ffi::CString;

use gil_core::options::{expand_trace_path, OptionsErrorKind};
use gil_core::{Host, Options};

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

/// Runs `body`, the body of an exported call that takes `err`, as
/// [`guard_result`] does, and on any failure writes a message into `err`
/// (`err_len` bytes): the body's own, or for a failure that comes without
/// one (a caught panic) the result code's text. So `err` never keeps what
/// an earlier call left there when this one fails.
///
/// # Safety
/// `err` is NULL or valid for writing `err_len` bytes.
unsafe fn with_message(
    err: *mut c_char,
    err_len: usize,
    body: impl FnOnce() -> Result<(), (gil_result_t, String)>,
) -> gil_result_t {
    let mut message = None;
    let code = guard_result(|| {
        body().map_err(|(code, text)| {
            message = Some(text);
            code
        })
    });
    if code != GIL_OK {
        let fallback = || code.text().to_string_lossy().into_owned();
        // SAFETY: forwarded from this function's contract.
        unsafe { write_message(err, err_len, &message.unwrap_or_else(fallback)) };
    }
    code
}

/// Parses an options text, `PRESET[,KEY=VALUE...]`, the grammar every host
/// shares: a preset name (see `gil_preset_name`), then each at most once
/// `interval_us` (0 to `GIL_MAX_SWITCH_INTERVAL_US`), `lazy_us` (1 µs to an
/// hour), `spin_us` (0 to `GIL_MAX_SPIN_US`), `laps` (0 to
/// `GIL_MAX_LAPS`), `stats` (0 or 1), `trace` (a file name `NAME.json` or
/// `NAME.svg`; `%p` for the process id, `%%` for a percent sign),
/// `trace_ring` (1 to 2^32 events; needs `trace`). No spaces; an unknown
/// key, a key given twice and an empty option are errors, so a typo never
/// leaves a default silently in force. Which presets take which keys (any
/// other pairing is an error):
///
/// | key | presets |
/// |-----|---------|
/// | `interval_us`, `spin_us`, `stats`, `trace`, `trace_ring` | all |
/// | `lazy_us` | `lazy`, `priority-lazy`, `priority-lazy-monitor` |
/// | `laps` | `priority`, `priority-lazy`, `monitor`, `priority-monitor`, `priority-lazy-monitor` |
///
/// On success fills `*config_out` (whole, `struct_size` included, no
/// callback: add the host's own) and, if `options_out` is not NULL,
/// `*options_out`. With `options_out` NULL the host starts no observers,
/// and `stats`, `trace` and `trace_ring` are refused.
///
/// On every failure writes nothing to the outputs and puts a message for
/// the user into `err` (if not NULL; cut to `err_len` bytes, NUL included; 256
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
    let body = || {
        if text.is_null() {
            return Err((GIL_ERR_NULL_ARGUMENT, "no options text (NULL)".to_owned()));
        }
        // SAFETY: non-NULL and NUL-terminated by the contract.
        let text = unsafe { CStr::from_ptr(text) };
        // SAFETY: forwarded from this function's contract.
        unsafe { parse_into(Host::Generic, text, config_out, options_out) }
    };
    // SAFETY: forwarded from this function's contract.
    unsafe { with_message(err, err_len, body) }
}

/// `gil_config_parse` for a host: the preset `text` names stands for
/// `host`'s default for it, and each option `text` gives wins over that
/// default. The hosts (`gil_host_name`), and what the presets' names
/// stand for on each where it is not the library's preset:
///
/// | host | its defaults |
/// |------|--------------|
/// | `generic` | none |
/// | `cpython` | `priority,spin_us=50`, `priority-lazy,spin_us=50`, `priority-monitor,spin_us=50`, `priority-lazy-monitor,spin_us=50` |
/// | `micropython` | none |
/// | `ocaml` | `classic,interval_us=50000`, `priority,spin_us=200`, `priority-lazy,spin_us=200`, `priority-monitor,spin_us=200`, `priority-lazy-monitor,spin_us=200` |
/// | `ruby` | `classic,interval_us=100000`, `priority,spin_us=200`, `priority-lazy,spin_us=200`, `priority-monitor,spin_us=200`, `priority-lazy-monitor,spin_us=200` |
///
/// A NULL `text` is the host's default text (`priority` on the four
/// runtimes, `classic` on `generic`); an empty one is an error, as in
/// `gil_config_parse`. `options_out->given` names the keys `text` gave,
/// not the host's defaults. What a lock built from the result prints is
/// the options text of `gil_get_settings`, which builds the same lock on
/// every host.
///
/// Returns what `gil_config_parse` returns, and `GIL_ERR_UNKNOWN_HOST`
/// for a host it does not know, with a message in `err` naming it (e.g.
/// `unknown GIL host 'jython' (known: generic, cpython, micropython,
/// ocaml, ruby)`); `GIL_ERR_NULL_ARGUMENT` if `host` or `config_out` is
/// NULL. Nothing is written to the outputs on failure. Any thread.
///
/// # Safety
/// `host` is NULL or a NUL-terminated string; `text` is NULL or a
/// NUL-terminated string; `config_out` is NULL or writable for a
/// `gil_config_t`; `options_out` is NULL or writable for a
/// `gil_options_t`; `err` is NULL or writable for `err_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn gil_config_parse_host(
    host: *const c_char,
    text: *const c_char,
    config_out: *mut gil_config_t,
    options_out: *mut gil_options_t,
    err: *mut c_char,
    err_len: usize,
) -> gil_result_t {
    let body = || {
        if host.is_null() {
            return Err((GIL_ERR_NULL_ARGUMENT, "no host (NULL)".to_owned()));
        }
        // SAFETY: non-NULL and NUL-terminated by the contract.
        let host = host_from_name(unsafe { CStr::from_ptr(host) })?;
        let text = if text.is_null() {
            CString::new(host.default_options()).expect("a host's default has no NUL")
        } else {
            // SAFETY: non-NULL and NUL-terminated by the contract.
            unsafe { CStr::from_ptr(text) }.to_owned()
        };
        // SAFETY: forwarded from this function's contract.
        unsafe { parse_into(host, &text, config_out, options_out) }
    };
    // SAFETY: forwarded from this function's contract.
    unsafe { with_message(err, err_len, body) }
}

/// The body of `gil_config_parse` and `gil_config_parse_host`: `text`
/// parsed on `host` into the outputs, or the code and message.
///
/// # Safety
/// `config_out` is NULL or writable for a `gil_config_t`; `options_out` is
/// NULL or writable for a `gil_options_t`.
unsafe fn parse_into(
    host: Host,
    text: &CStr,
    config_out: *mut gil_config_t,
    options_out: *mut gil_options_t,
) -> Result<(), (gil_result_t, String)> {
    if config_out.is_null() {
        return Err((
            GIL_ERR_NULL_ARGUMENT,
            "no config_out to write the settings to (NULL)".to_owned(),
        ));
    }
    let bytes = text.to_bytes();
    let parsed = if options_out.is_null() {
        Options::parse_for_without_observers(host, bytes)
    } else {
        Options::parse_for(host, bytes)
    };
    let options = parsed.map_err(|e| {
        let code = match e.kind() {
            OptionsErrorKind::UnknownPreset(_) => GIL_ERR_UNKNOWN_PRESET,
            _ => GIL_ERR_INVALID_CONFIG,
        };
        (code, e.to_string())
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

/// `gil_options_start` flag: the caller is a fork child whose parent
/// started the same options; a trace starts only if its name has `%p`
/// (without one the file is the parent's).
pub const GIL_OPTIONS_FORK_CHILD: u32 = 1;

/// Starts the observers `options` (as `gil_config_parse` wrote them) asks
/// for on `gil`, so that every host starts them alike: `stats=1` turns the
/// per-thread accounting on; `trace=NAME` starts a trace
/// (`gil_trace_start_ex`) into NAME with each `%p` replaced by this
/// process's id, as a ring of `trace_ring` events if that was given,
/// headed by `title` (may be NULL). The host writes the trace with
/// `gil_trace_stop` (at exit, say). `flags`: 0 or `GIL_OPTIONS_FORK_CHILD`.
///
/// The file the trace goes to is copied into `path_out` (if not NULL; cut
/// to `path_len` bytes, NUL included; empty when no trace started), for a
/// message if writing it fails later. On every failure `err` (if not NULL;
/// cut to `err_len` bytes) says what failed in words, naming the file and the
/// system's reason, e.g. `the GIL trace file '/x/t.json' cannot be created:
/// No such file or directory (os error 2)`; the accounting stays on if
/// `stats=1` turned it on. Returns `GIL_ERR_IO` for a file that cannot be
/// created, `GIL_ERR_BUSY` if a trace runs already, `GIL_ERR_INVALID_ARGUMENT`
/// for `options` that `gil_config_parse` did not write (wrong
/// `struct_size`, a name it refuses) or unknown `flags`,
/// `GIL_ERR_NULL_ARGUMENT` if `gil` or `options` is NULL,
/// `GIL_ERR_REENTRANT` from inside one of the lock's callbacks. Any
/// thread; runs with cancellation disabled, as `gil_trace_start`.
///
/// # Safety
/// `gil` is NULL or a live lock; `options` is NULL or a readable
/// `gil_options_t`; `title` is NULL or a NUL-terminated string; `path_out`
/// is NULL or writable for `path_len` bytes; `err` is NULL or writable for
/// `err_len` bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments, reason = "a C call: outputs are (pointer, length) pairs")]
pub unsafe extern "C" fn gil_options_start(
    gil: *mut gil_t,
    options: *const gil_options_t,
    title: *const c_char,
    flags: u32,
    path_out: *mut c_char,
    path_len: usize,
    err: *mut c_char,
    err_len: usize,
) -> gil_result_t {
    let fail = |code: gil_result_t, message: &str| Err((code, message.to_owned()));
    let body = || {
        // SAFETY: forwarded from this function's contract.
        unsafe { write_message(path_out, path_len, "") };
        // SAFETY: forwarded from this function's contract.
        let Ok(handle) = (unsafe { handle_ref(gil) }) else {
            return fail(GIL_ERR_NULL_ARGUMENT, "no lock (NULL)");
        };
        // SAFETY: NULL or readable by this function's contract.
        let Some(options) = (unsafe { options.as_ref() }) else {
            return fail(GIL_ERR_NULL_ARGUMENT, "no options (NULL)");
        };
        if options.struct_size as usize != size_of::<gil_options_t>() {
            return fail(
                GIL_ERR_INVALID_ARGUMENT,
                "options not written by gil_config_parse (struct_size)",
            );
        }
        if flags & !GIL_OPTIONS_FORK_CHILD != 0 {
            return fail(GIL_ERR_INVALID_ARGUMENT, &format!("unknown flags {flags:#x}"));
        }
        if handle.check_not_in_callback().is_err() {
            return fail(
                GIL_ERR_REENTRANT,
                "gil_options_start called from inside one of the lock's callbacks",
            );
        }
        if options.stats != 0 {
            handle.gil.set_thread_stats(true);
        }
        let name_bytes: Vec<u8> = options
            .trace
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        if name_bytes.is_empty() {
            return Ok(());
        }
        let Some(path) = std::str::from_utf8(&name_bytes)
            .ok()
            .and_then(|name| expand_trace_path(name, std::process::id()))
        else {
            return fail(
                GIL_ERR_INVALID_ARGUMENT,
                "the trace name is not one gil_config_parse accepts",
            );
        };
        if flags & GIL_OPTIONS_FORK_CHILD != 0 && !has_pid(&name_bytes) {
            return Ok(());
        }
        // Not UTF-8 becomes replacement characters: never an error.
        // SAFETY: NULL or NUL-terminated by this function's contract.
        let title = (!title.is_null()).then(|| unsafe { c_str_lossy(title) }.unwrap_or_default());
        let ring = options.given & GIL_OPTION_TRACE_RING != 0;
        let max_events = usize::try_from(options.trace_ring).unwrap_or(usize::MAX);
        match start_trace(handle, Path::new(&path), title.as_deref(), max_events, ring) {
            Ok(()) => {
                // SAFETY: forwarded from this function's contract.
                unsafe { write_message(path_out, path_len, &path) };
                Ok(())
            }
            Err((GIL_ERR_BUSY, _)) => fail(GIL_ERR_BUSY, "a GIL trace is running already"),
            Err((code, Some(e))) => fail(code, &format!("the GIL trace file '{path}' cannot be created: {e}")),
            Err((code, None)) => fail(
                code,
                &format!(
                    "the GIL trace file '{path}' cannot be created: {}",
                    code.text().to_string_lossy()
                ),
            ),
        }
    };
    // SAFETY: forwarded from this function's contract.
    unsafe { with_message(err, err_len, body) }
}

/// Whether a trace name (as the grammar takes it) has a `%p`; `%%` is a
/// percent sign, not the start of one.
fn has_pid(name: &[u8]) -> bool {
    let mut bytes = name.iter();
    while let Some(&c) = bytes.next() {
        if c == b'%' && bytes.next() == Some(&b'p') {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use gil_core::options::Key;
    use gil_core::PRESETS;

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

    /// A fresh lock with `text`'s configuration and options.
    fn lock_with(text: &CStr) -> (*mut gil_t, gil_options_t) {
        let (r, config, options, message) = parse(text, true);
        assert_eq!((r, message.as_str()), (GIL_OK, ""));
        let mut lock = ptr::null_mut();
        // SAFETY: a valid config and out-pointer.
        assert_eq!(unsafe { gil_new(&config, &mut lock) }, GIL_OK);
        (lock, options)
    }

    /// `gil_options_start`'s code, `path_out` and `err`.
    fn start(lock: *mut gil_t, options: &gil_options_t, flags: u32) -> (gil_result_t, String, String) {
        let mut path = [0 as c_char; 256];
        let mut err = [0 as c_char; 256];
        // SAFETY: a live lock, valid pointers and lengths.
        let r = unsafe {
            gil_options_start(
                lock,
                options,
                c"title".as_ptr(),
                flags,
                path.as_mut_ptr(),
                256,
                err.as_mut_ptr(),
                256,
            )
        };
        // SAFETY: both NUL-terminated by gil_options_start.
        let text = |b: &[c_char; 256]| unsafe { CStr::from_ptr(b.as_ptr()) }.to_string_lossy().into_owned();
        (r, text(&path), text(&err))
    }

    fn scratch_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("gil-ffi-options-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn stats_on(lock: *mut gil_t) -> bool {
        let mut on = false;
        // SAFETY: a live lock and a writable bool.
        assert_eq!(unsafe { gil_get_thread_stats_enabled(lock, &mut on) }, GIL_OK);
        on
    }

    #[test]
    fn options_start_turns_on_stats_and_a_trace_named_with_the_pid() {
        let dir = scratch_dir("start");
        let text = std::ffi::CString::new(format!(
            "priority,stats=1,trace={}/g-%p.json,trace_ring=50",
            dir.display()
        ))
        .unwrap();
        let (lock, options) = lock_with(&text);
        assert!(!stats_on(lock));
        let (r, path, err) = start(lock, &options, 0);
        assert_eq!((r, err.as_str()), (GIL_OK, ""));
        assert_eq!(path, format!("{}/g-{}.json", dir.display(), std::process::id()));
        assert!(stats_on(lock));
        // A second start finds the trace running, and says so.
        let (r, path2, err) = start(lock, &options, 0);
        assert_eq!((r, path2.as_str()), (GIL_ERR_BUSY, ""));
        assert_eq!(err, "a GIL trace is running already");
        // SAFETY: a live lock, then freed once.
        unsafe {
            assert_eq!(gil_trace_stop(lock, ptr::null_mut()), GIL_OK);
            assert_eq!(gil_free(lock), GIL_OK);
        }
        assert!(std::fs::read_to_string(&path).unwrap().contains("traceEvents"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn options_start_in_a_fork_child_traces_only_names_with_a_pid() {
        let dir = scratch_dir("child");
        for (name, traced) in [("one.json", false), ("p%%p.json", false), ("c-%p.json", true)] {
            let text = std::ffi::CString::new(format!("classic,trace={}/{name}", dir.display())).unwrap();
            let (lock, options) = lock_with(&text);
            let (r, path, err) = start(lock, &options, GIL_OPTIONS_FORK_CHILD);
            assert_eq!((r, err.as_str()), (GIL_OK, ""), "{name}");
            assert_eq!(!path.is_empty(), traced, "{name}: {path}");
            // SAFETY: a live lock, then freed once.
            unsafe {
                let stopped = gil_trace_stop(lock, ptr::null_mut());
                assert_eq!(stopped, if traced { GIL_OK } else { GIL_ERR_NOT_TRACING }, "{name}");
                assert_eq!(gil_free(lock), GIL_OK);
            }
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn options_start_names_a_file_it_cannot_create_and_bad_arguments() {
        let dir = scratch_dir("bad");
        let text = std::ffi::CString::new(format!("priority,stats=1,trace={}/no/such/t.svg", dir.display())).unwrap();
        let (lock, mut options) = lock_with(&text);
        let (r, path, err) = start(lock, &options, 0);
        assert_eq!((r, path.as_str()), (GIL_ERR_IO, ""));
        let expected = format!(
            "the GIL trace file '{}/no/such/t.svg' cannot be created: ",
            dir.display()
        );
        // The OS's own words for the missing directory (they differ by OS).
        let os_err = std::fs::File::create(dir.join("no/such/t.svg"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with(&expected) && err.ends_with(&os_err), "{err}");
        assert!(stats_on(lock), "stats=1 stays on");
        let (r, _, err) = start(lock, &options, 2);
        assert_eq!((r, err.as_str()), (GIL_ERR_INVALID_ARGUMENT, "unknown flags 0x2"));
        options.struct_size -= 1;
        let (r, _, _) = start(lock, &options, 0);
        assert_eq!(r, GIL_ERR_INVALID_ARGUMENT);
        // SAFETY: NULL options are refused before anything is read.
        let r = unsafe {
            gil_options_start(
                lock,
                ptr::null(),
                ptr::null(),
                0,
                ptr::null_mut(),
                0,
                ptr::null_mut(),
                0,
            )
        };
        assert_eq!(r, GIL_ERR_NULL_ARGUMENT);
        // SAFETY: a live lock, freed once.
        assert_eq!(unsafe { gil_free(lock) }, GIL_OK);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// `gil_options_start` on `lock` with `options` into an `err` that an
    /// earlier call filled: what `err` holds after.
    fn start_over_stale(lock: *mut gil_t, options: *const gil_options_t) -> (gil_result_t, String) {
        let mut err = [b'x' as c_char; 128];
        err[127] = 0;
        // SAFETY: valid pointers and lengths; `lock` and `options` may be NULL.
        let r = unsafe {
            gil_options_start(
                lock,
                options,
                ptr::null(),
                0,
                ptr::null_mut(),
                0,
                err.as_mut_ptr(),
                err.len(),
            )
        };
        // SAFETY: NUL-terminated, by gil_options_start or at the end.
        (
            r,
            unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned(),
        )
    }

    #[test]
    fn every_failing_exit_of_options_start_says_what_failed() {
        let (lock, options) = lock_with(c"priority");
        let (r, message) = start_over_stale(ptr::null_mut(), &options);
        assert_eq!((r, message.as_str()), (GIL_ERR_NULL_ARGUMENT, "no lock (NULL)"));
        let (r, message) = start_over_stale(lock, ptr::null());
        assert_eq!((r, message.as_str()), (GIL_ERR_NULL_ARGUMENT, "no options (NULL)"));
        // From inside the lock's own event hook.
        let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
        let (at, from_hook) = (lock as usize, seen.clone());
        let options_at = &raw const options as usize;
        // SAFETY: a live lock.
        let gil = unsafe { &(*lock).gil };
        let hook: gil_core::EventHook = std::sync::Arc::new(move |_: &gil_core::Event| {
            let mut seen = from_hook.lock().unwrap();
            if seen.is_none() {
                *seen = Some(start_over_stale(at as *mut gil_t, options_at as *const gil_options_t));
            }
        });
        let id = gil.add_event_hook(hook, gil_core::EventMask::ALL).unwrap();
        let token = gil_core::Token::new(1).unwrap();
        gil.acquire(token).unwrap();
        gil.release(token, gil_core::ReleaseReason::Final).unwrap();
        gil.remove_event_hook(id).unwrap();
        let (r, message) = seen.lock().unwrap().take().expect("the hook ran");
        assert_eq!(r, GIL_ERR_REENTRANT);
        assert!(message.contains("inside one of the lock's callbacks"), "{message}");
        // SAFETY: a live lock, freed once.
        assert_eq!(unsafe { gil_free(lock) }, GIL_OK);
    }

    #[test]
    fn config_parse_names_the_null_argument_it_met() {
        let mut err = [0 as c_char; 128];
        let mut config = gil_config_t::from_settings(gil_core::GilConfig::new().settings());
        // SAFETY: valid pointers and lengths; config_out NULL on purpose.
        let r = unsafe {
            gil_config_parse(
                c"priority".as_ptr(),
                ptr::null_mut(),
                ptr::null_mut(),
                err.as_mut_ptr(),
                128,
            )
        };
        // SAFETY: NUL-terminated by gil_config_parse.
        let message = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned();
        assert_eq!(r, GIL_ERR_NULL_ARGUMENT);
        assert!(message.contains("config_out"), "{message}");
        // SAFETY: valid pointers and lengths; text NULL on purpose.
        let r = unsafe { gil_config_parse(ptr::null(), &mut config, ptr::null_mut(), err.as_mut_ptr(), 128) };
        // SAFETY: NUL-terminated by gil_config_parse.
        let message = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned();
        assert_eq!((r, message.as_str()), (GIL_ERR_NULL_ARGUMENT, "no options text (NULL)"));
    }

    /// The table of which presets take which keys, as `include/gil.h`
    /// documents it: each key with the presets it is documented for.
    fn documented_keys() -> Vec<(String, Vec<String>)> {
        let header = include_str!("../../../include/gil.h");
        let start = header
            .find("Which presets take which keys")
            .expect("gil.h documents which presets take which keys");
        let mut rows = Vec::new();
        let lines = header[start..].lines().map(|line| line.trim_start_matches("//").trim());
        for line in lines.skip_while(|line| !line.starts_with('|')) {
            if !line.starts_with('|') {
                break;
            }
            if line.starts_with("| key") || line.starts_with("|--") {
                continue;
            }
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            let names =
                |cell: &str| -> Vec<String> { cell.split(", ").map(|n| n.trim_matches('`').to_owned()).collect() };
            let presets = if cells[1] == "all" {
                PRESETS.iter().map(|p| (*p).to_owned()).collect()
            } else {
                names(cells[1])
            };
            for key in names(cells[0]) {
                rows.push((key, presets.clone()));
            }
        }
        rows
    }

    #[test]
    fn the_header_documents_which_presets_take_each_key_as_the_parser_does() {
        let table = documented_keys();
        assert_eq!(table.len(), Key::ALL.len(), "every key documented once: {table:?}");
        for key in Key::ALL {
            let (_, documented) = table
                .iter()
                .find(|(name, _)| name == key.name())
                .unwrap_or_else(|| panic!("{} is not in gil.h's table", key.name()));
            let value = match key {
                Key::Trace => "t.json",
                Key::TraceRing => "5",
                Key::LazyUs => "30",
                Key::Laps => "2",
                Key::Stats => "1",
                _ => "10",
            };
            for preset in PRESETS {
                let mut text = format!("{preset},{}={value}", key.name());
                if key == Key::TraceRing {
                    text = format!("{preset},trace=t.json,trace_ring={value}");
                }
                let accepted = text.parse::<Options>().is_ok();
                let said = documented.iter().any(|p| p == preset);
                assert_eq!(
                    accepted, said,
                    "'{text}': the parser says {accepted}, gil.h says {said}"
                );
            }
        }
    }

    #[test]
    fn the_header_documents_each_hosts_defaults_as_the_library_has_them() {
        let header = include_str!("../../../include/gil.h");
        let start = header
            .find("| host | its defaults |")
            .expect("gil.h tables the hosts' defaults");
        let rows: Vec<(String, Vec<String>)> = header[start..]
            .lines()
            .map(|line| line.trim_start_matches("//").trim())
            .take_while(|line| line.starts_with('|'))
            .skip(2)
            .map(|line| {
                let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
                let texts = if cells[1] == "none" {
                    Vec::new()
                } else {
                    cells[1].split(", ").map(|t| t.trim_matches('`').to_owned()).collect()
                };
                (cells[0].trim_matches('`').to_owned(), texts)
            })
            .collect();
        let hosts: Vec<&str> = Host::ALL.iter().map(|h| h.name()).collect();
        assert_eq!(rows.iter().map(|(h, _)| h.as_str()).collect::<Vec<_>>(), hosts);
        for (name, documented) in rows {
            let host: Host = name.parse().unwrap();
            let defaults: Vec<String> = PRESETS
                .iter()
                .map(|p| host.preset_options(p).unwrap().to_owned())
                .filter(|text| !PRESETS.contains(&text.as_str()))
                .collect();
            assert_eq!(documented, defaults, "{name}: gil.h against the library");
        }
    }

    #[test]
    fn has_pid_reads_percent_escapes() {
        assert!(has_pid(b"a-%p.json"));
        assert!(has_pid(b"%%%p.json"));
        assert!(!has_pid(b"a-%%p.json"));
        assert!(!has_pid(b"a.json"));
    }
}
