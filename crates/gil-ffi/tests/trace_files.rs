//! Trace files through the C ABI, as a C program meets them, on every OS
//! (`scripts/platforms.sh` runs these under Wine for Windows): a name the
//! OS refuses is `GIL_ERR_IO` with the OS's reason, never
//! `GIL_ERR_INVALID_ARGUMENT`; a trace leaves no file until it is written
//! whole.

use std::ffi::{c_char, CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr;

use gil::*;

/// A fresh, empty directory for one test.
fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gil-ffi-files-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The names in `dir`.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A new lock with the `priority` preset.
fn new_lock() -> *mut gil_t {
    let mut config = std::mem::MaybeUninit::<gil_config_t>::uninit();
    // SAFETY: a known preset name and a writable config.
    let r = unsafe { gil_config_preset(c"priority".as_ptr(), config.as_mut_ptr()) };
    assert_eq!(r, GIL_OK);
    let mut lock = ptr::null_mut();
    // SAFETY: written on success; a writable out-pointer.
    assert_eq!(unsafe { gil_new(config.as_ptr(), &mut lock) }, GIL_OK);
    lock
}

fn free_lock(lock: *mut gil_t) {
    // SAFETY: a live lock from `new_lock`, freed once.
    assert_eq!(unsafe { gil_free(lock) }, GIL_OK);
}

/// `path` as the C string a program passes (UTF-8, the library's rule).
fn c_name(path: &Path) -> CString {
    CString::new(path.to_str().expect("a UTF-8 test path")).unwrap()
}

/// `gil_trace_start` on `lock` into `path`.
fn trace_start(lock: *mut gil_t, path: &CStr) -> gil_result_t {
    // SAFETY: a live lock and a NUL-terminated name.
    unsafe { gil_trace_start(lock, path.as_ptr(), ptr::null(), 0) }
}

fn trace_stop(lock: *mut gil_t) -> gil_result_t {
    // SAFETY: a live lock; no count asked for.
    unsafe { gil_trace_stop(lock, ptr::null_mut()) }
}

/// `gil_options_start` on `lock` with the options `priority,trace=NAME`:
/// its code and its message.
fn options_start(lock: *mut gil_t, name: &str) -> (gil_result_t, String) {
    let text = CString::new(format!("priority,trace={name}")).unwrap();
    let mut config = std::mem::MaybeUninit::<gil_config_t>::uninit();
    // SAFETY: all-zero is a valid gil_options_t (integers and chars).
    let mut options: gil_options_t = unsafe { std::mem::zeroed() };
    let mut err = [0 as c_char; 512];
    // SAFETY: a NUL-terminated text, writable config, options and message.
    let r = unsafe { gil_config_parse(text.as_ptr(), config.as_mut_ptr(), &mut options, err.as_mut_ptr(), 512) };
    assert_eq!(r, GIL_OK, "{name}");
    // SAFETY: a live lock, readable options, a writable message.
    let r = unsafe {
        gil_options_start(
            lock,
            &options,
            ptr::null(),
            0,
            ptr::null_mut(),
            0,
            err.as_mut_ptr(),
            512,
        )
    };
    // SAFETY: NUL-terminated by gil_options_start (zeroed if it wrote none).
    let message = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned();
    (r, message)
}

/// Names in `dir` whose creation the OS refuses as an invalid parameter,
/// and the OS's words for it.
#[cfg(windows)]
fn refused_names(dir: &Path) -> (Vec<PathBuf>, String) {
    // Device names, reserved in every directory: Windows error 87.
    let names = ["NUL.json", "COM1.json"].iter().map(|n| dir.join(n)).collect();
    (names, std::io::Error::from_raw_os_error(87).to_string())
}

/// On Linux no file system here refuses a name with `EINVAL` (vfat,
/// exfat and ntfs3 do), so this thread's creations are made to fail as
/// theirs would: a seccomp filter on this thread only answers `openat`
/// with `O_CREAT` with `EINVAL`.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn refused_names(dir: &Path) -> (Vec<PathBuf>, String) {
    use libc::{
        sock_filter, sock_fprog, SYS_openat, BPF_ABS, BPF_JEQ, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_RET, BPF_W,
        EINVAL, O_CREAT, SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO,
    };
    let stmt = |code: u32, k: u32| sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |code: u32, k: u32, jt: u8, jf: u8| sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let nr = std::mem::offset_of!(libc::seccomp_data, nr) as u32;
    // The low half of openat's third argument, its flags (little-endian).
    let flags = std::mem::offset_of!(libc::seccomp_data, args) as u32 + 2 * 8;
    let mut filter = [
        stmt(BPF_LD | BPF_W | BPF_ABS, nr),
        jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat as u32, 0, 3),
        stmt(BPF_LD | BPF_W | BPF_ABS, flags),
        jump(BPF_JMP | BPF_JSET | BPF_K, O_CREAT as u32, 0, 1),
        stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL as u32),
        stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    ];
    let program = sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_mut_ptr(),
    };
    // SAFETY: plain system calls with valid arguments; the filter binds
    // this thread only (no SECCOMP_FILTER_FLAG_TSYNC) and ends with it.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        let r = libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, &program);
        assert_eq!(r, 0, "seccomp: {}", std::io::Error::last_os_error());
    }
    (
        vec![dir.join("t.json")],
        std::io::Error::from_raw_os_error(EINVAL).to_string(),
    )
}

#[test]
#[cfg(any(windows, all(target_os = "linux", target_arch = "x86_64")))]
fn an_os_refusal_of_a_trace_name_is_an_io_error_with_the_os_reason() {
    let dir = scratch_dir("refused");
    // In a thread of its own: on Linux the refusal stays with it.
    let inner = dir.clone();
    std::thread::spawn(move || {
        let lock = new_lock();
        let (names, reason) = refused_names(&inner);
        for path in names {
            let name = c_name(&path);
            assert_eq!(trace_start(lock, &name), GIL_ERR_IO, "{}", path.display());
            let (r, message) = options_start(lock, path.to_str().unwrap());
            assert_eq!(r, GIL_ERR_IO, "{}: {message}", path.display());
            let want = format!("the GIL trace file '{}' cannot be created: {reason}", path.display());
            assert_eq!(message, want);
            assert_eq!(trace_stop(lock), GIL_ERR_NOT_TRACING);
        }
        // A name that is not .json or .svg stays the caller's mistake.
        assert_eq!(
            trace_start(lock, &c_name(&inner.join("t.txt"))),
            GIL_ERR_INVALID_ARGUMENT
        );
        free_lock(lock);
    })
    .join()
    .unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_trace_leaves_no_file_until_it_is_written_whole() {
    let dir = scratch_dir("whole");
    let lock = new_lock();
    let path = dir.join("t.json");
    // Started by hand and by the options, the trace runs with nothing at
    // its name and nothing beside it: what a process killed now (never
    // reaching gil_trace_stop) would leave.
    assert_eq!(trace_start(lock, &c_name(&path)), GIL_OK);
    assert_eq!(names_in(&dir), Vec::<String>::new());
    assert_eq!(trace_stop(lock), GIL_OK);
    assert!(std::fs::read_to_string(&path).unwrap().contains("\"traceEvents\""));
    std::fs::remove_file(&path).unwrap();
    let (r, message) = options_start(lock, path.to_str().unwrap());
    assert_eq!((r, message.as_str()), (GIL_OK, ""));
    assert_eq!(names_in(&dir), Vec::<String>::new());
    assert_eq!(trace_stop(lock), GIL_OK);
    assert_eq!(names_in(&dir), vec!["t.json".to_owned()]);
    // The start still checks the name: a missing directory fails at once.
    assert_eq!(trace_start(lock, &c_name(&dir.join("no").join("t.svg"))), GIL_ERR_IO);
    free_lock(lock);
    std::fs::remove_dir_all(dir).unwrap();
}
