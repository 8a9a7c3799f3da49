//! Helpers shared by the test binaries (each uses some of them).
#![allow(dead_code)]

use gil_core::Token;

/// The token numbered `n` (non-zero).
pub fn tok(n: usize) -> Token {
    Token::new(n).expect("tokens are non-zero")
}

/// Forks; the child runs `child` and leaves with `_exit` (0 if it returned
/// true); the parent asserts that it did. POSIX only (no fork on Windows).
#[cfg(all(not(gil_loom), unix))]
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

/// A counter with no synchronisation of its own: only the lock guards it.
#[cfg(not(gil_loom))]
struct Unprotected(std::cell::UnsafeCell<u64>);
// SAFETY: every access happens while holding the lock, which is exactly
// the property the tests using it check.
#[cfg(not(gil_loom))]
unsafe impl Sync for Unprotected {}

/// `threads` threads each add 1, `rounds` times, to a counter that only
/// `gil` guards, releasing after each round for `reason(gil, round)` and
/// then calling `between(round)` without the lock; with `final_release`,
/// each ends with an acquisition and a final release. The counter's total:
/// `threads * rounds` unless mutual exclusion failed.
#[cfg(not(gil_loom))]
pub fn count_under_lock(
    gil: &std::sync::Arc<gil_core::Gil>,
    threads: usize,
    rounds: u64,
    reason: fn(&gil_core::Gil, u64) -> gil_core::ReleaseReason,
    between: fn(u64),
    final_release: bool,
) -> u64 {
    use std::sync::{Arc, Barrier};
    let counter = Arc::new(Unprotected(std::cell::UnsafeCell::new(0)));
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (gil, counter, barrier) = (gil.clone(), counter.clone(), barrier.clone());
            std::thread::spawn(move || {
                let me = tok(i + 1);
                barrier.wait();
                for round in 0..rounds {
                    gil.acquire(me).unwrap();
                    // SAFETY: we hold the lock, the only guard of `counter`.
                    unsafe {
                        let v = std::ptr::read_volatile(counter.0.get());
                        std::hint::spin_loop();
                        std::ptr::write_volatile(counter.0.get(), v + 1);
                    }
                    gil.release(me, reason(&gil, round)).unwrap();
                    between(round);
                }
                if final_release {
                    gil.acquire(me).unwrap();
                    gil.release(me, gil_core::ReleaseReason::Final).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    // SAFETY: all threads joined; nobody else touches the counter.
    unsafe { *counter.0.get() }
}
