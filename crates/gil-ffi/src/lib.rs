//! The C ABI of gil-core: `include/gil.h`, `libgil.a`, `libgil.so`.
//!
//! Conventions (after rustls-ffi):
//! - every symbol starts with `gil_`; the lock is the opaque `gil_t`;
//! - fallible functions return a `gil_result_t` whose numbers never change
//!   and are never reused; `gil_result_str` names them;
//! - out-parameters end in `_out` and are written only on success;
//! - structs the caller fills or reads (`gil_config_t`, `gil_counters_t`,
//!   `gil_settings_t`) start with `struct_size`, so fields can be added
//!   without breaking callers compiled against an older header;
//! - every exported body runs inside `catch_unwind`: a Rust panic becomes
//!   `GIL_ERR_PANIC` (or a documented neutral value) and never unwinds into C;
//! - every exported body runs with the thread's cancellation disabled
//!   (`gil_core::NoCancel`), so that a deferred `pthread_cancel` is never
//!   acted on inside the library, where its forced unwind would meet that
//!   `catch_unwind` and abort; the hot calls (acquire, release, the
//!   drop-request flag) disable it only around their waits and callbacks;
//! - enum-like inputs are plain integers, checked on entry, so no C value
//!   can become an invalid Rust enum.
#![allow(non_camel_case_types, reason = "C names: the header is the interface")]

use std::ffi::{c_char, c_void, CStr};
use std::mem::{offset_of, size_of};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use gil_core::trace::{TraceFormat, TraceSession};
use gil_core::{
    Event, EventKind, EventMask, Gil, GilConfig, GilError, HookId, NoCancel, OwnedHook, Policy, ReleaseReason,
    ThreadStats, Token,
};

mod accounting;
mod args;
mod config;
mod lock;
mod observe;
mod options;
mod query;
mod result;
mod trace;

pub use accounting::*;
use args::*;
pub use config::*;
pub use lock::*;
pub use observe::*;
pub use options::*;
pub use query::*;
pub use result::*;
pub use trace::*;

/// Major version of this library; matches `Cargo.toml`.
pub const GIL_VERSION_MAJOR: u32 = 0;
/// Minor version of this library; matches `Cargo.toml`.
pub const GIL_VERSION_MINOR: u32 = 1;
/// Patch version of this library; matches `Cargo.toml`.
pub const GIL_VERSION_PATCH: u32 = 0;

/// The library's version, `"MAJOR.MINOR.PATCH"`, a static string. Any thread.
#[no_mangle]
pub extern "C" fn gil_version() -> *const c_char {
    static VERSION: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(s) => s,
        Err(_) => panic!("version contains a NUL"),
    };
    VERSION.as_ptr()
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
        // The configuration's constants are checked where they are defined.
        assert_eq!(GIL_HISTOGRAM_BUCKETS, gil_core::HISTOGRAM_BUCKETS);
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
        for code in gil_result_t::ALL {
            assert_eq!(gil_result_t::from_u32(code as u32), Some(code));
        }
        let mut numbers: Vec<u32> = gil_result_t::ALL.iter().map(|c| *c as u32).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), gil_result_t::ALL.len(), "two codes share a number");
        let text = |c: u32| {
            // SAFETY: gil_result_str always returns a static C string.
            unsafe { CStr::from_ptr(gil_result_str(c)) }.to_owned()
        };
        let unknown = text(u32::MAX);
        for code in gil_result_t::ALL {
            let t = text(code as u32);
            assert_ne!(t, unknown, "{code:?} has no text");
            let shared = gil_result_t::ALL.iter().filter(|c| text(**c as u32) == t).count();
            assert_eq!(shared, 1, "{code:?} shares its text");
        }
    }

    #[test]
    fn no_error_of_the_core_is_reported_as_a_panic() {
        for e in GilError::every_kind() {
            let code = map_err(e);
            assert_ne!(code, GIL_ERR_PANIC, "{e:?}");
            assert_ne!(code, GIL_ERR_OTHER, "{e:?} has no code of its own");
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
            let gil = Gil::new(c.builder().unwrap()).unwrap();
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
