//! The monitor thread (`GilConfig::monitor`) with real threads.
#![cfg(not(gil_loom))]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use gil_core::{Event, EventKind, Gil, GilConfig, Policy, ReleaseReason};

mod common;
use common::tok;
#[cfg(unix)]
use common::{a_waiter_gets_the_holder_asked, in_fork_child};

/// Counts `WaitStart` events, so a test can wait until a thread is queued.
fn count_waits(gil: &Gil) -> Arc<AtomicUsize> {
    let waits = Arc::new(AtomicUsize::new(0));
    let w = waits.clone();
    gil.set_event_hook(Some(Arc::new(move |e: &Event| {
        if e.kind == EventKind::WaitStart {
            w.fetch_add(1, SeqCst);
        }
    })))
    .expect("not inside a hook");
    waits
}

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(60), "timed out waiting for {what}");
        thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn waiters_are_served_in_arrival_order() {
    for preset in ["monitor", "priority-monitor"] {
        let gil = Arc::new(Gil::new(GilConfig::preset(preset).unwrap()).unwrap());
        let waits = count_waits(&gil);
        let order = Arc::new(Mutex::new(Vec::new()));
        gil.acquire(tok(100)).unwrap();
        let mut threads = Vec::new();
        for n in 1..=5 {
            let (gil, order) = (gil.clone(), order.clone());
            threads.push(thread::spawn(move || {
                gil.acquire(tok(n)).unwrap();
                order.lock().unwrap().push(n);
                gil.release(tok(n), ReleaseReason::Final).unwrap();
            }));
            // Queue them one after the other.
            wait_until("the waiter to queue", || waits.load(SeqCst) == n);
        }
        gil.release(tok(100), ReleaseReason::Final).unwrap();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![1, 2, 3, 4, 5], "{preset}");
        assert!(gil.is_idle());
    }
}

#[test]
fn the_monitor_asks_a_running_holder_after_an_interval() {
    const INTERVAL: Duration = Duration::from_millis(20);
    let requests = Arc::new(Mutex::new(Vec::new()));
    let gil = Arc::new(
        Gil::new(
            GilConfig::preset("monitor")
                .unwrap()
                .switch_interval_us(INTERVAL.as_micros() as u64),
        )
        .unwrap(),
    );
    let r = requests.clone();
    gil.set_event_hook(Some(Arc::new(move |e: &Event| {
        if matches!(e.kind, EventKind::WaitStart | EventKind::DropRequested) {
            r.lock().unwrap().push(*e);
        }
    })))
    .expect("not inside a hook");
    let holder = tok(1);
    gil.acquire(holder).unwrap();
    let waiter = {
        let gil = gil.clone();
        thread::spawn(move || {
            gil.acquire(tok(2)).unwrap();
            // Voluntary: keeps `last_holder` for the check below.
            gil.release(tok(2), ReleaseReason::Voluntary).unwrap();
        })
    };
    while !gil.drop_requested() {
        std::hint::spin_loop();
    }
    gil.release(holder, ReleaseReason::Forced).unwrap();
    assert_eq!(
        gil.last_holder(),
        Some(tok(2)),
        "forced release returned before the switch"
    );
    waiter.join().unwrap();
    let events = requests.lock().unwrap().clone();
    let wait = events.iter().find(|e| e.kind == EventKind::WaitStart).unwrap();
    let request = events.iter().find(|e| e.kind == EventKind::DropRequested).unwrap();
    assert_eq!(request.token, holder);
    assert_eq!(request.other, None, "the monitor, not the waiter, asked");
    // The holder gets its whole interval: never asked earlier.
    assert!(
        request.time_ns - wait.time_ns >= INTERVAL.as_nanos() as u64,
        "asked after {} ns",
        request.time_ns - wait.time_ns
    );
    assert_eq!(gil.counters().forced_switches, 1);
}

#[test]
fn the_monitor_takes_over_a_system_call_that_outlasts_the_threshold() {
    let gil = Arc::new(
        Gil::new(
            GilConfig::new()
                .policy(Policy::Priority)
                .lazy_release_us(Some(100))
                .monitor(true),
        )
        .unwrap(),
    );
    let takeovers = Arc::new(Mutex::new(Vec::new()));
    let t = takeovers.clone();
    gil.set_event_hook(Some(Arc::new(move |e: &Event| {
        if e.kind == EventKind::LazyTakeover {
            t.lock().unwrap().push(*e);
        }
    })))
    .expect("not inside a hook");
    let io = tok(1);
    gil.acquire(io).unwrap();
    gil.release(io, ReleaseReason::Voluntary).unwrap(); // lazily: "in a system call"
    assert!(gil.is_reserved() && !gil.is_locked());
    // Another thread wants the lock while the call lasts (it never ends by
    // itself: only a takeover lets the waiter in).
    let waiter = {
        let gil = gil.clone();
        thread::spawn(move || {
            gil.acquire(tok(2)).unwrap();
            let holder = gil.holder();
            gil.release(tok(2), ReleaseReason::Voluntary).unwrap();
            holder
        })
    };
    assert_eq!(waiter.join().unwrap(), Some(tok(2)));
    let events = takeovers.lock().unwrap().clone();
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].token, events[0].other),
        (io, None),
        "the monitor took it over"
    );
    assert_eq!(gil.counters().lazy_takeovers, 1);
    // Back from the call: the lock is gone, and taken again normally.
    gil.acquire(io).unwrap();
    gil.release(io, ReleaseReason::Final).unwrap();
    assert!(!gil.is_locked());
}

#[test]
fn a_fast_system_call_is_reclaimed_despite_waiters() {
    // With a threshold of one hour, the monitor never takes a call over: the
    // thread in the call comes back with one CAS even though a CPU-class
    // thread waits. (An I/O-class waiter gets the lock handed over instead:
    // see tests/policies.rs.) An interval of an hour too: the waiter's own
    // drop request would end a lazy release however the threads are timed.
    let gil = Arc::new(
        Gil::new(
            GilConfig::preset("priority-lazy-monitor")
                .unwrap()
                .switch_interval_us(3_600_000_000)
                .lazy_release_us(Some(3_600_000_000)),
        )
        .unwrap(),
    );
    let waits = count_waits(&gil);
    let io = tok(1);
    let (cpu_class, go) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let waiter = {
        let (gil, cpu_class, go) = (gil.clone(), cpu_class.clone(), go.clone());
        thread::spawn(move || {
            gil.acquire(tok(2)).unwrap();
            gil.release(tok(2), ReleaseReason::Forced).unwrap(); // CPU-class
            cpu_class.store(true, SeqCst);
            while !go.load(SeqCst) {
                thread::yield_now();
            }
            gil.acquire(tok(2)).unwrap();
            gil.release(tok(2), ReleaseReason::Final).unwrap();
        })
    };
    wait_until("the waiter to be CPU-class", || cpu_class.load(SeqCst));
    gil.acquire(io).unwrap();
    go.store(true, SeqCst);
    wait_until("the waiter to queue", || waits.load(SeqCst) == 1);
    let before = gil.counters();
    for _ in 0..100 {
        gil.release(io, ReleaseReason::Voluntary).unwrap();
        gil.acquire(io).unwrap();
    }
    let after = gil.counters();
    assert_eq!(after.lazy_releases - before.lazy_releases, 100);
    assert_eq!(after.switches, before.switches, "nobody else got the lock");
    assert_eq!(after.lazy_takeovers, 0);
    gil.release(io, ReleaseReason::Final).unwrap();
    waiter.join().unwrap();
}

/// A queued waiter that has waited past the hand-off bound (one switch
/// interval first in line) gets the free lock: a running thread's
/// `try_acquire` cannot take it first.
#[test]
fn try_acquire_does_not_overtake_an_overdue_waiter() {
    for preset in ["monitor", "priority", "priority-monitor"] {
        let gil = Arc::new(Gil::new(GilConfig::preset(preset).unwrap()).unwrap());
        let waits = count_waits(&gil);
        let judged = Arc::new(AtomicBool::new(false));
        gil.acquire(tok(1)).unwrap();
        let waiter = {
            let (gil, judged) = (gil.clone(), judged.clone());
            thread::spawn(move || {
                gil.acquire(tok(2)).unwrap();
                // Held until the loop below has seen it taken: a lock freed
                // again meanwhile would be free for `try_acquire`.
                while !judged.load(SeqCst) {
                    thread::yield_now();
                }
                gil.release(tok(2), ReleaseReason::Final).unwrap();
            })
        };
        wait_until("the waiter to queue", || waits.load(SeqCst) == 1);
        thread::sleep(Duration::from_micros(gil.switch_interval_us()) * 2);
        // Final: a voluntary release answering the waiter's drop request
        // would return only once the waiter had the lock, and the loop
        // below would have nothing to race with.
        gil.release(tok(1), ReleaseReason::Final).unwrap();
        // Free for an instant, but handed to the overdue waiter.
        let (mut took, mut tries) = (false, 0u64);
        while !took && gil.last_holder() != Some(tok(2)) {
            took = gil.try_acquire(tok(3)).unwrap();
            tries += 1;
        }
        judged.store(true, SeqCst);
        assert!(
            !took,
            "{preset}: try_acquire overtook an overdue waiter ({tries} tries)"
        );
        waiter.join().unwrap();
    }
}

#[test]
#[cfg(unix)]
fn a_monitored_lock_works_in_a_fork_child() {
    let gil = Arc::new(Gil::new(GilConfig::preset("priority-monitor").unwrap().switch_interval_us(1_000)).unwrap());
    // Start the monitor in the parent.
    gil.acquire(tok(1)).unwrap();
    let w = {
        let gil = gil.clone();
        thread::spawn(move || {
            gil.acquire(tok(2)).unwrap();
            gil.release(tok(2), ReleaseReason::Final).unwrap();
        })
    };
    while !gil.drop_requested() {
        thread::yield_now();
    }
    gil.release(tok(1), ReleaseReason::Forced).unwrap();
    w.join().unwrap();
    gil.acquire(tok(1)).unwrap();
    in_fork_child(|| {
        let child = tok(0xC);
        gil.reinit_after_fork(child);
        // A waiter in the child: the drop request must come from a monitor
        // thread started in the child (the parent's did not survive).
        a_waiter_gets_the_holder_asked(&gil, child) && gil.is_idle()
    });
    gil.release(tok(1), ReleaseReason::Final).unwrap();
}

#[test]
fn back_to_back_takeovers_are_not_missed() {
    // Each acquire finds the previous token's lazily released call in
    // progress, so only the monitor's takeover lets it in; with a one-hour
    // interval nothing else would. A waiter's kick that came while the
    // monitor was still finishing its look at the previous takeover used
    // to be skipped, and the waiter slept until the next look, an hour on.
    let (done, finished) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let config = GilConfig::preset("priority-lazy-monitor")
            .unwrap()
            .switch_interval_us(3_600_000_000)
            .lazy_release_us(Some(1));
        let gil = Gil::new(config).unwrap();
        for i in 0..500 {
            let me = tok(1 + i % 3);
            gil.acquire(me).unwrap();
            gil.release(me, ReleaseReason::Voluntary).unwrap();
        }
        let _ = done.send(gil.counters().lazy_takeovers);
    });
    let takeovers = finished
        .recv_timeout(Duration::from_secs(120))
        .expect("a waiter was left waiting for a takeover");
    assert_eq!(takeovers, 499, "every acquire but the first took the lock over");
}

#[test]
fn a_new_waiter_gets_a_call_that_began_before_it_taken_over() {
    // A one-hour interval: the monitor's schedule for this lock is an hour
    // long once it has looked at it. Then, while the lock is still in its
    // list: the queue empties, a thread makes a lazy release with nobody
    // waiting (no reason to tell the monitor), and a new waiter comes. It
    // must not wait for the hour: the monitor is told to look.
    let gil = Arc::new(
        Gil::new(
            GilConfig::preset("priority-lazy-monitor")
                .unwrap()
                .lazy_release_us(Some(100))
                .switch_interval_us(3_600_000_000),
        )
        .unwrap(),
    );
    let waits = count_waits(&gil);
    let acquire_in_thread = |n: usize| {
        let gil = gil.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        thread::spawn(move || {
            gil.acquire(tok(n)).unwrap();
            gil.release(tok(n), ReleaseReason::Final).unwrap();
            tx.send(()).unwrap();
        });
        rx
    };
    gil.acquire(tok(1)).unwrap();
    let first = acquire_in_thread(2);
    wait_until("the first waiter to queue", || waits.load(SeqCst) == 1);
    // Time for the monitor (started by this first wait) to look at the lock
    // while the waiter is queued, and to schedule its next look an hour on.
    thread::sleep(Duration::from_millis(50));
    gil.release(tok(1), ReleaseReason::Final).unwrap();
    first
        .recv_timeout(Duration::from_secs(60))
        .expect("the first waiter got the lock");
    // The queue is empty now; the monitor will not look for an hour.
    gil.acquire(tok(3)).unwrap();
    gil.release(tok(3), ReleaseReason::Voluntary).unwrap(); // lazily: in a call, nobody waits
    let second = acquire_in_thread(4);
    assert!(
        second.recv_timeout(Duration::from_secs(60)).is_ok(),
        "the new waiter was left waiting behind a system call nobody timed"
    );
    assert_eq!(gil.counters().lazy_takeovers, 1);
}
