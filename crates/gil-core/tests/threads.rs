//! The lock with real OS threads.
#![cfg(not(gil_loom))]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use gil_core::{Gil, GilConfig, GilError, Key, ReleaseReason, Token};

mod common;
use common::{count_under_lock, tok};

#[test]
fn mutual_exclusion_8_threads_exact_total() {
    const THREADS: usize = 8;
    const ROUNDS: u64 = 20_000;
    // A short interval so drop requests and forced switches happen too.
    let gil = Arc::new(Gil::new(GilConfig::new().switch_interval_us(50)).unwrap());
    let reason = |gil: &Gil, round: u64| match round % 3 {
        0 => ReleaseReason::Voluntary,
        1 if gil.drop_requested() => ReleaseReason::Forced,
        _ => ReleaseReason::Voluntary,
    };
    let total = count_under_lock(&gil, THREADS, ROUNDS, reason, |_| (), false);
    assert_eq!(total, THREADS as u64 * ROUNDS);
    let c = gil.counters();
    assert_eq!(c.acquisitions, THREADS as u64 * ROUNDS);
    assert!(!gil.is_locked());
    assert!(gil.is_idle());
}

/// CPU-bound threads that poll the flag each get the lock within a bounded
/// number of switch intervals: forced switching prevents a holder from
/// keeping it, so nobody starves. The bound is loose (a fairness property,
/// not a speed claim): 250 intervals against an expected handful.
#[test]
fn polling_cpu_threads_each_get_the_lock_within_bounded_intervals() {
    const THREADS: usize = 4;
    const INTERVAL_US: u64 = 2_000;
    const BOUND: Duration = Duration::from_micros(INTERVAL_US * 250);
    let gil = Arc::new(Gil::new(GilConfig::new().switch_interval_us(INTERVAL_US)).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let (gil, stop) = (gil.clone(), stop.clone());
            thread::spawn(move || {
                let me = tok(i + 1);
                let (mut longest, mut turns) = (Duration::ZERO, 0u32);
                let mut waited = Instant::now();
                gil.acquire(me).unwrap();
                loop {
                    longest = longest.max(waited.elapsed());
                    turns += 1;
                    // Hold the lock, spinning, until asked to drop it.
                    while !gil.drop_requested() && !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    gil.release(me, ReleaseReason::Forced).unwrap();
                    waited = Instant::now();
                    gil.acquire(me).unwrap();
                }
                gil.release(me, ReleaseReason::Final).unwrap();
                (longest, turns)
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(1_500));
    stop.store(true, Ordering::Relaxed);
    for (i, h) in handles.into_iter().enumerate() {
        let (longest, turns) = h.join().unwrap();
        assert!(turns >= 2, "thread {i} held the lock only {turns} time(s)");
        assert!(
            longest <= BOUND,
            "thread {i} waited {longest:?} (> {BOUND:?}) for the lock"
        );
    }
    assert!(gil.counters().forced_switches > 0);
}

#[test]
fn callback_names_the_holder_while_it_holds() {
    // (token named by the callback, whether that token held the lock then)
    type Seen = Vec<(Token, bool)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let gil_slot: Arc<Mutex<Option<Arc<Gil>>>> = Arc::default();
    let gil = {
        let (seen, slot) = (seen.clone(), gil_slot.clone());
        Arc::new(
            Gil::new(
                GilConfig::new()
                    .switch_interval_us(1_000)
                    .on_drop_request(move |holder| {
                        let gil = slot.lock().unwrap().clone().expect("set before use");
                        // The holder may be letting go (its name cleared),
                        // but cannot finish while this runs: the word stays
                        // locked and it stays the last holder.
                        let holding = gil.is_locked() && gil.last_holder() == Some(holder);
                        seen.lock().unwrap().push((holder, holding));
                    }),
            )
            .unwrap(),
        )
    };
    *gil_slot.lock().unwrap() = Some(gil.clone());
    let (a, b) = (tok(0xA0), tok(0xB0));
    gil.acquire(a).unwrap();
    let waiter = {
        let gil = gil.clone();
        thread::spawn(move || {
            gil.acquire(b).unwrap();
            gil.release(b, ReleaseReason::Final).unwrap();
        })
    };
    // The holder does not poll: only the callback can tell it. Wait for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "no drop request within 10 s");
        thread::sleep(Duration::from_millis(1));
    }
    assert!(gil.drop_requested());
    gil.release(a, ReleaseReason::Forced).unwrap();
    waiter.join().unwrap();
    let seen = seen.lock().unwrap();
    for &(named, holding) in seen.iter() {
        assert_eq!(named, a);
        assert!(holding, "callback ran while {named:?} was not holding");
    }
    *gil_slot.lock().unwrap() = None; // break the Arc cycle
}

#[test]
fn forced_release_returns_only_after_another_thread_took_the_lock() {
    let gil = Arc::new(Gil::new(GilConfig::new().switch_interval_us(500)).unwrap());
    let (a, b) = (tok(1), tok(2));
    for _ in 0..20 {
        gil.acquire(a).unwrap();
        let waiter = {
            let gil = gil.clone();
            thread::spawn(move || {
                gil.acquire(b).unwrap();
                thread::sleep(Duration::from_millis(2));
                gil.release(b, ReleaseReason::Voluntary).unwrap();
            })
        };
        // Only a waiter raises the request, so once it is up B is waiting.
        while !gil.drop_requested() {
            thread::yield_now();
        }
        gil.release(a, ReleaseReason::Forced).unwrap();
        assert_eq!(gil.last_holder(), Some(b), "forced release returned before B took over");
        waiter.join().unwrap();
    }
    assert_eq!(gil.counters().forced_switches, 20);
}

#[test]
fn forced_release_without_waiters_returns_at_once() {
    let gil = Gil::new(GilConfig::new()).unwrap();
    gil.acquire(tok(1)).unwrap();
    gil.release(tok(1), ReleaseReason::Forced).unwrap();
    assert!(!gil.is_locked());
    assert_eq!(gil.counters().forced_switches, 0);
}

#[test]
fn no_drop_request_without_a_waiter() {
    let gil = Gil::new(GilConfig::new().switch_interval_us(100)).unwrap();
    gil.acquire(tok(1)).unwrap();
    thread::sleep(Duration::from_millis(20));
    assert!(!gil.drop_requested());
    assert_eq!(gil.counters().drop_requests, 0);
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
}

/// Interval I = 1 s. Waiters B and C start waiting at t=0 under A; A lets
/// go at 0.5 I and B (or C) takes over, holding 0.75 I. The waiters' first
/// timeout (t = I) comes after that switch, so it must not raise a
/// request; a lock that asked on every timeout would ask the new holder at
/// t = I, half way into its turn. The next timeout is an interval later
/// (1.5 I from the switch at the earliest), after B's turn. Each margin is
/// a quarter of a second or more, so a loaded machine that wakes a sleeper
/// late does not turn the outcome.
#[test]
fn a_switch_restarts_the_waiters_interval() {
    const I_MS: u64 = 1_000;
    let requests = Arc::new(AtomicUsize::new(0));
    let gil = {
        let requests = requests.clone();
        Arc::new(
            Gil::new(
                GilConfig::new()
                    .switch_interval_us(I_MS * 1_000)
                    .on_drop_request(move |_| {
                        requests.fetch_add(1, Ordering::SeqCst);
                    }),
            )
            .unwrap(),
        )
    };
    gil.acquire(tok(1)).unwrap();
    let waiters: Vec<_> = (2..4)
        .map(|n| {
            let gil = gil.clone();
            thread::spawn(move || {
                gil.acquire(tok(n)).unwrap();
                thread::sleep(Duration::from_millis(I_MS * 3 / 4));
                let asked = gil.drop_requested();
                gil.release(tok(n), ReleaseReason::Final).unwrap();
                asked
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(I_MS / 2));
    gil.release(tok(1), ReleaseReason::Final).unwrap();
    for w in waiters {
        assert!(
            !w.join().unwrap(),
            "a new holder was asked to drop before one interval without a switch"
        );
    }
    assert_eq!(requests.load(Ordering::SeqCst), 0);
}

#[test]
fn misuse_is_an_error_and_changes_nothing() {
    let gil = Gil::new(GilConfig::new()).unwrap();
    let (a, b) = (tok(1), tok(2));
    assert_eq!(gil.release(a, ReleaseReason::Voluntary), Err(GilError::NotHolder));
    gil.acquire(a).unwrap();
    assert_eq!(gil.acquire(a), Err(GilError::AlreadyHeld));
    assert_eq!(gil.try_acquire(a), Err(GilError::AlreadyHeld));
    assert_eq!(gil.try_acquire(b), Ok(false));
    assert_eq!(gil.release(b, ReleaseReason::Forced), Err(GilError::NotHolder));
    assert_eq!(gil.handle_drop_request(b), Err(GilError::NotHolder));
    assert_eq!(gil.holder(), Some(a));
    assert_eq!(gil.counters().acquisitions, 1);
    let gil = match gil.close() {
        Err((gil, GilError::Busy)) => gil,
        other => panic!("close of a held lock gave {:?}", other.map_err(|e| e.1)),
    };
    assert_eq!(gil.holder(), Some(a), "a refused close lost the holder");
    gil.release(a, ReleaseReason::Voluntary).unwrap();
    assert!(gil.close().is_ok());
}

#[test]
fn switch_interval_bounds() {
    assert_eq!(
        Gil::new(GilConfig::new().switch_interval_us(gil_core::MAX_SWITCH_INTERVAL_US + 1)).err(),
        Some(GilError::InvalidSetting {
            key: Key::IntervalUs,
            value: gil_core::MAX_SWITCH_INTERVAL_US + 1
        })
    );
    let gil = Gil::new(GilConfig::new()).unwrap();
    assert_eq!(gil.switch_interval_us(), gil_core::DEFAULT_SWITCH_INTERVAL_US);
    assert_eq!(
        gil.set_switch_interval_us(u64::MAX),
        Err(GilError::InvalidSetting {
            key: Key::IntervalUs,
            value: u64::MAX
        })
    );
    assert_eq!(gil.switch_interval_us(), gil_core::DEFAULT_SWITCH_INTERVAL_US);
    gil.set_switch_interval_us(0).unwrap();
    assert_eq!(gil.switch_interval_us(), 0);
}

#[test]
fn zero_interval_behaves_as_one_microsecond() {
    // With 0 taken literally a waiter would never block; as 1 µs it raises
    // a request almost at once, and the holder can answer it.
    let gil = Arc::new(Gil::new(GilConfig::new().switch_interval_us(0)).unwrap());
    gil.acquire(tok(1)).unwrap();
    let waiter = {
        let gil = gil.clone();
        thread::spawn(move || {
            gil.acquire(tok(2)).unwrap();
            gil.release(tok(2), ReleaseReason::Final).unwrap();
        })
    };
    while !gil.drop_requested() {
        thread::yield_now();
    }
    assert!(gil.handle_drop_request(tok(1)).unwrap());
    gil.release(tok(1), ReleaseReason::Final).unwrap();
    waiter.join().unwrap();
}

#[test]
fn final_release_forgets_the_token_and_it_may_come_back_as_new() {
    let gil = Gil::new(GilConfig::new()).unwrap();
    gil.acquire(tok(7)).unwrap();
    gil.release(tok(7), ReleaseReason::Voluntary).unwrap();
    assert_eq!(gil.last_holder(), Some(tok(7)));
    gil.acquire(tok(7)).unwrap();
    assert_eq!(gil.switch_number(), 1, "re-taking by the last holder is not a switch");
    gil.release(tok(7), ReleaseReason::Final).unwrap();
    assert_eq!(gil.last_holder(), None);
    // Same address, new thread state: allowed, and counted as a switch.
    gil.acquire(tok(7)).unwrap();
    assert_eq!(gil.switch_number(), 2);
    gil.release(tok(7), ReleaseReason::Final).unwrap();
}

#[test]
fn abort_leaves_without_the_lock_and_frees_a_forced_releaser() {
    let gil = Arc::new(Gil::new(GilConfig::new().switch_interval_us(1_000)).unwrap());
    let abort = Arc::new(AtomicBool::new(false));
    gil.acquire(tok(1)).unwrap();
    let waiter = {
        let (gil, abort) = (gil.clone(), abort.clone());
        thread::spawn(move || gil.acquire_or_abort(tok(2), &mut || abort.load(Ordering::SeqCst)))
    };
    while !gil.drop_requested() {
        thread::yield_now();
    }
    // The holder is about to answer; the waiter gives up meanwhile. The
    // forced release must not wait for a switch that can no longer happen.
    abort.store(true, Ordering::SeqCst);
    let releaser = {
        let gil = gil.clone();
        thread::spawn(move || {
            // Releasing from another OS thread is fine: the token is the identity.
            gil.release(tok(1), ReleaseReason::Forced).unwrap();
        })
    };
    let got = waiter.join().unwrap();
    releaser.join().unwrap();
    match got {
        Err(GilError::Aborted) => assert!(gil.is_idle()),
        // The release may win the race and hand the lock over first.
        Ok(()) => gil.release(tok(2), ReleaseReason::Final).unwrap(),
        Err(e) => panic!("unexpected {e}"),
    }
    assert!(!gil.drop_requested());
}

#[test]
fn a_panicking_callback_unwinds_the_waiter_and_leaves_the_lock_consistent() {
    let gil = Arc::new(
        Gil::new(
            GilConfig::new()
                .switch_interval_us(500)
                .on_drop_request(|_| panic!("host callback failed")),
        )
        .unwrap(),
    );
    gil.acquire(tok(1)).unwrap();
    let waiter = {
        let gil = gil.clone();
        thread::spawn(move || gil.acquire(tok(2)))
    };
    assert!(waiter.join().is_err(), "the callback's panic reached the waiter");
    assert_eq!(gil.holder(), Some(tok(1)));
    assert!(!gil.drop_requested(), "no waiter is left to serve a request");
    gil.release(tok(1), ReleaseReason::Forced).unwrap(); // must not wait: nobody waits
    assert!(gil.is_idle());
}

#[test]
fn instances_are_independent() {
    let g1 = Gil::new(GilConfig::new()).unwrap();
    let g2 = Gil::new(GilConfig::new().switch_interval_us(1)).unwrap();
    g1.acquire(tok(1)).unwrap();
    assert_eq!(g2.try_acquire(tok(2)), Ok(true));
    assert_eq!(g2.try_acquire(tok(1)), Ok(false));
    assert_eq!(g1.holder(), Some(tok(1)));
    assert_eq!(g2.holder(), Some(tok(2)));
    g1.release(tok(1), ReleaseReason::Final).unwrap();
    g2.release(tok(2), ReleaseReason::Final).unwrap();
}

#[test]
#[cfg(unix)]
fn reinit_after_fork_in_a_real_child_process() {
    let gil = Arc::new(Gil::new(GilConfig::new().switch_interval_us(1_000)).unwrap());
    let main = tok(1);
    gil.acquire(main).unwrap();
    // Threads blocked on the lock at fork time: they do not exist in the child.
    let waiters: Vec<_> = (2..5)
        .map(|n| {
            let gil = gil.clone();
            thread::spawn(move || {
                gil.acquire(tok(n)).unwrap();
                gil.release(tok(n), ReleaseReason::Final).unwrap();
            })
        })
        .collect();
    while !gil.drop_requested() {
        thread::yield_now();
    }
    // SAFETY: the child only runs async-signal-tolerant work on memory it
    // owns (glibc's malloc is fork-safe) and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let child = tok(0xC);
        gil.reinit_after_fork(child);
        let ok = gil.holder() == Some(child)
            && gil.counters().acquisitions == 1
            && !gil.drop_requested()
            && gil.release(child, ReleaseReason::Voluntary).is_ok()
            && gil.try_acquire(tok(0xD)) == Ok(true)
            && gil.release(tok(0xD), ReleaseReason::Forced).is_ok()
            && gil.is_idle();
        // SAFETY: `_exit` ends the child without running the parent's
        // atexit handlers or the test harness.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child, `status` is a valid out-pointer.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child failed: {status}"
    );
    // The parent is unaffected: still the holder, waiters still served.
    assert_eq!(gil.holder(), Some(main));
    gil.release(main, ReleaseReason::Forced).unwrap();
    for w in waiters {
        w.join().unwrap();
    }
    assert!(gil.is_idle());
}
