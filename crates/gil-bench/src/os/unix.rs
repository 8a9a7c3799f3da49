//! POSIX systems: a Unix-domain socket pair, and `getrusage`.

use std::io;

/// One end of a connected byte stream (a Unix-domain socket).
pub type Stream = std::os::unix::net::UnixStream;

/// Two connected ends.
pub fn stream_pair() -> io::Result<(Stream, Stream)> {
    Stream::pair()
}

/// The process's voluntary and involuntary context switches so far (all
/// threads, living or not), from `getrusage(RUSAGE_SELF)`; `None` where
/// the OS does not count them.
pub fn context_switches() -> io::Result<Option<(u64, u64)>> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY:
    // - `usage` is valid for writes of a whole `rusage` for the call;
    // - `RUSAGE_SELF` is a valid `who`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `rusage` is plain integers, so the zeroed value was already
    // initialised, and the successful call has filled it in.
    let usage = unsafe { usage.assume_init() };
    Ok(Some((usage.ru_nvcsw as u64, usage.ru_nivcsw as u64)))
}
