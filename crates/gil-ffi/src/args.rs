//! Checking what C passes in (lock pointers, tokens, strings, enum-like
//! integers) and writing out-parameters.

use super::*;

/// # Safety
/// `gil` is NULL or a pointer from `gil_new` not yet freed.
pub(crate) unsafe fn lock_ref<'a>(gil: *const gil_t) -> Result<&'a Gil, gil_result_t> {
    // SAFETY: forwarded from this function's contract.
    unsafe { handle_ref(gil) }.map(|g| &g.gil)
}

/// # Safety
/// `gil` is NULL or a pointer from `gil_new` not yet freed.
pub(crate) unsafe fn handle_ref<'a>(gil: *const gil_t) -> Result<&'a gil_t, gil_result_t> {
    // SAFETY: by this function's contract, non-NULL means live.
    unsafe { gil.as_ref() }.ok_or(GIL_ERR_NULL_ARGUMENT)
}

/// A C string as text for people (names, titles): bytes that are not UTF-8
/// become replacement characters rather than an error, since a host may
/// cut a name in the middle of a character.
///
/// # Safety
/// `s` is NULL or a NUL-terminated string.
pub(crate) unsafe fn c_str_lossy<'a>(s: *const c_char) -> Result<std::borrow::Cow<'a, str>, gil_result_t> {
    if s.is_null() {
        return Err(GIL_ERR_NULL_ARGUMENT);
    }
    // SAFETY: non-NULL and NUL-terminated by this function's contract.
    Ok(unsafe { CStr::from_ptr(s) }.to_string_lossy())
}

/// A C string as a file name: its bytes as they are on a POSIX system; on
/// Windows, UTF-8 whatever the ANSI code page, else
/// `GIL_ERR_INVALID_ARGUMENT` (the rule `gil.h` states and
/// `docs/platforms.md` argues, "File names").
pub(crate) fn c_path(s: &CStr) -> Result<&Path, gil_result_t> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Ok(Path::new(std::ffi::OsStr::from_bytes(s.to_bytes())))
    }
    #[cfg(not(unix))]
    {
        s.to_str().map(Path::new).map_err(|_| GIL_ERR_INVALID_ARGUMENT)
    }
}

pub(crate) fn token(ptr: *mut c_void) -> Result<Token, gil_result_t> {
    Token::from_ptr(ptr).ok_or(GIL_ERR_NULL_ARGUMENT)
}

pub(crate) fn policy_from_raw(raw: gil_policy_t) -> Result<Policy, gil_result_t> {
    match raw {
        GIL_POLICY_CLASSIC => Ok(Policy::Classic),
        GIL_POLICY_PRIORITY => Ok(Policy::Priority),
        _ => Err(GIL_ERR_INVALID_ARGUMENT),
    }
}

pub(crate) fn policy_to_raw(policy: Policy) -> gil_policy_t {
    match policy {
        Policy::Classic => GIL_POLICY_CLASSIC,
        Policy::Priority => GIL_POLICY_PRIORITY,
        _ => u32::MAX,
    }
}

/// # Safety
/// `out` is NULL or valid for writing one `T`.
pub(crate) unsafe fn write_out<T>(out: *mut T, value: T) -> Result<(), gil_result_t> {
    if out.is_null() {
        return Err(GIL_ERR_NULL_ARGUMENT);
    }
    // SAFETY: non-NULL, and valid for writes by this function's contract.
    unsafe { out.write(value) };
    Ok(())
}

pub(crate) fn reason_to_raw(reason: ReleaseReason) -> gil_release_reason_t {
    match reason {
        ReleaseReason::Voluntary => GIL_RELEASE_VOLUNTARY,
        ReleaseReason::Forced => GIL_RELEASE_FORCED,
        ReleaseReason::Final => GIL_RELEASE_FINAL,
    }
}

/// The shape of every `gil_get_*`-style query: `*out = read(lock)`.
///
/// # Safety
/// `gil` is NULL or a live lock from `gil_new`; `out` is NULL or valid for
/// writing one `T`.
pub(crate) unsafe fn read_into<T>(gil: *const gil_t, out: *mut T, read: impl FnOnce(&Gil) -> T) -> gil_result_t {
    guard_result(|| {
        // SAFETY: forwarded from this function's contract.
        let gil = unsafe { lock_ref(gil) }?;
        // SAFETY: forwarded from this function's contract.
        unsafe { write_out(out, read(gil)) }
    })
}
