//! Helpers shared by the test binaries (each uses some of them).
#![allow(dead_code)]

use gil_core::Token;

/// The token numbered `n` (non-zero).
pub fn tok(n: usize) -> Token {
    Token::new(n).expect("tokens are non-zero")
}

/// Forks; the child runs `child` and leaves with `_exit` (0 if it returned
/// true); the parent asserts that it did.
#[cfg(not(gil_loom))]
pub fn in_fork_child(child: impl FnOnce() -> bool) {
    // SAFETY: the child only uses memory it owns, starts threads (glibc
    // allows that after fork) and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = child();
        // SAFETY: `_exit` ends the child without the parent's atexit handlers.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: our own child; `status` is a valid out-pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child failed: {status}"
    );
}

/// With `holder` holding `gil`, a thread comes to wait for it; `true` once a
/// drop request reached the holder (within 30 s), it let go with a forced
/// release, and the waiter got the lock and finished.
#[cfg(not(gil_loom))]
pub fn a_waiter_gets_the_holder_asked(gil: &std::sync::Arc<gil_core::Gil>, holder: Token) -> bool {
    use gil_core::ReleaseReason;
    use std::time::{Duration, Instant};
    let w = {
        let gil = gil.clone();
        std::thread::spawn(move || {
            gil.acquire(tok(0xD)).unwrap();
            gil.release(tok(0xD), ReleaseReason::Final).unwrap();
        })
    };
    let t = Instant::now();
    while !gil.drop_requested() {
        if t.elapsed() > Duration::from_secs(30) {
            return false;
        }
        std::hint::spin_loop();
    }
    gil.release(holder, ReleaseReason::Forced).is_ok() && w.join().is_ok()
}
