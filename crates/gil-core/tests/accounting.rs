//! Per-thread accounting with real threads: known waits, holds and calls
//! are reported at least as long as they were, and the per-thread counts
//! add up to the lock's counters.
#![cfg(not(gil_loom))]

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use gil_core::{Gil, GilConfig, GilError, ReleaseReason};

mod common;
#[cfg(unix)]
use common::in_fork_child;
use common::tok;

#[test]
fn a_known_wait_hold_and_call_are_reported_at_least_as_long() {
    let gil = Arc::new(Gil::new(GilConfig::new().switch_interval_us(1_000_000)).unwrap());
    gil.set_thread_stats(true);
    let (a, b) = (tok(1), tok(2));
    gil.acquire(a).unwrap();
    let waiter = {
        let gil = gil.clone();
        thread::spawn(move || {
            gil.acquire(b).unwrap();
            gil.release(b, ReleaseReason::Final).unwrap();
        })
    };
    // Hold on until b is waiting, then 30 ms more: b waited at least that.
    while gil.thread_stats(b).is_none_or(|s| s.waits == 0) {
        thread::yield_now();
    }
    thread::sleep(Duration::from_millis(30));
    gil.release(a, ReleaseReason::Voluntary).unwrap();
    waiter.join().unwrap();
    // In a "call" for 20 ms, then back.
    thread::sleep(Duration::from_millis(20));
    gil.acquire(a).unwrap();
    gil.release(a, ReleaseReason::Voluntary).unwrap();

    let sb = gil.thread_stats(b).unwrap();
    assert!(sb.wait_time >= Duration::from_millis(30), "{sb:?}");
    assert!(!sb.alive && sb.ended_ns.is_some());
    assert_eq!((sb.acquisitions, sb.waits, sb.switches_in), (1, 1, 1));
    let sa = gil.thread_stats(a).unwrap();
    assert!(sa.hold_time >= Duration::from_millis(30), "{sa:?}");
    assert!(sa.call_time >= Duration::from_millis(20), "{sa:?}");
    assert_eq!(sa.acquisitions, 2);
    assert!(sa.alive);
}

#[test]
fn per_thread_counts_add_up_to_the_lock_counters() {
    for config in [GilConfig::new(), GilConfig::preset("priority-monitor").unwrap()] {
        let gil = Arc::new(Gil::new(config.switch_interval_us(200)).unwrap());
        gil.set_thread_stats(true);
        let start = Arc::new(Barrier::new(3));
        let finished = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (1..=3)
            .map(|n| {
                let (gil, start, finished) = (gil.clone(), start.clone(), finished.clone());
                thread::spawn(move || {
                    let me = tok(n);
                    start.wait();
                    gil.acquire(me).unwrap();
                    gil.tag_thread(me, 100 + n as u64).unwrap();
                    let mut switches = 0;
                    // The last one left has nobody to ask it to drop.
                    while switches < 5 && finished.load(SeqCst) < 2 {
                        if gil.handle_drop_request(me).unwrap() {
                            switches += 1;
                        }
                    }
                    finished.fetch_add(1, SeqCst);
                    gil.release(me, ReleaseReason::Final).unwrap();
                    switches
                })
            })
            .collect();
        let handled: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
        let c = gil.counters();
        let all = gil.all_thread_stats();
        assert_eq!(all.len(), 3);
        let sum = |f: fn(&gil_core::ThreadStats) -> u64| all.iter().map(f).sum::<u64>();
        assert_eq!(sum(|s| s.acquisitions), c.acquisitions);
        assert_eq!(sum(|s| s.switches_in), c.switches);
        assert_eq!(sum(|s| s.forced_releases), handled);
        assert_eq!(sum(|s| s.drop_requests_received), c.drop_requests);
        assert!(sum(|s| s.drop_requests_raised) <= c.drop_requests);
        let mut tags: Vec<u64> = all.iter().map(|s| s.tag).collect();
        tags.sort_unstable();
        assert_eq!(tags, [101, 102, 103]);
        assert!(all.iter().all(|s| !s.alive));
        // Each forced release waited for another thread to take over.
        assert!(all
            .iter()
            .all(|s| s.forced_releases == 0 || s.wait_time > Duration::ZERO));
    }
}

#[test]
fn off_it_records_nothing_and_on_again_it_resumes() {
    let gil = Gil::new(GilConfig::new()).unwrap();
    assert!(!gil.thread_stats_enabled());
    gil.acquire(tok(1)).unwrap();
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    assert!(gil.thread_stats(tok(1)).is_none());
    gil.set_thread_stats(true);
    gil.acquire(tok(1)).unwrap();
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    gil.set_thread_stats(false);
    gil.acquire(tok(1)).unwrap();
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    assert_eq!(gil.thread_stats(tok(1)).unwrap().acquisitions, 1);
    // On again: the open record is ended, the token's next event starts anew.
    gil.set_thread_stats(true);
    assert!(!gil.thread_stats(tok(1)).unwrap().alive);
    gil.acquire(tok(1)).unwrap();
    let s = gil.thread_stats(tok(1)).unwrap();
    assert!(s.alive && s.acquisitions == 1);
    assert_eq!(gil.all_thread_stats().len(), 2);
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    assert!(gil.is_idle());
}

#[test]
#[cfg(unix)]
fn a_fork_child_starts_with_no_records() {
    let gil = Gil::new(GilConfig::new()).unwrap();
    gil.set_thread_stats(true);
    gil.acquire(tok(1)).unwrap();
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    gil.acquire(tok(2)).unwrap();
    in_fork_child(|| {
        gil.reinit_after_fork(tok(2));
        gil.release(tok(2), ReleaseReason::Voluntary).unwrap();
        let all = gil.all_thread_stats();
        all.len() == 1 && all[0].token == tok(2) && gil.thread_stats(tok(1)).is_none()
    });
    assert_eq!(gil.all_thread_stats().len(), 2);
    gil.release(tok(2), ReleaseReason::Voluntary).unwrap();
}

/// What every kept record must satisfy: it ends after it begins, and the
/// time charged to its three states fits in its life (up to `after`, a
/// time taken after the snapshot, for a live one). The records that do
/// not, described.
fn inconsistent(all: &[gil_core::ThreadStats], after: u64) -> Vec<String> {
    all.iter()
        .filter(|s| {
            let charged = s.wait_time + s.hold_time + s.call_time;
            let end = s.ended_ns.unwrap_or(after);
            s.first_ns > end || charged > Duration::from_nanos(end - s.first_ns)
        })
        .map(|s| format!("{s:?}"))
        .collect()
}

/// Several threads take the lock in turn (waits, forced switches, final
/// releases, new tags) while another turns accounting off and on and reads
/// every record: each read satisfies `inconsistent`'s invariants.
#[test]
fn records_stay_consistent_while_accounting_is_toggled_under_contention() {
    const WORKERS: usize = 3;
    const TOGGLES: usize = 600;
    let gil = Arc::new(Gil::new(GilConfig::new().switch_interval_us(50)).unwrap());
    gil.set_thread_stats(true);
    let toggled = Arc::new(AtomicUsize::new(0));
    let rounds = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (1..=WORKERS)
        .map(|n| {
            let (gil, toggled, rounds) = (gil.clone(), toggled.clone(), rounds.clone());
            thread::spawn(move || {
                let me = tok(n);
                let mut round = 0u64;
                while toggled.load(SeqCst) < TOGGLES {
                    round += 1;
                    gil.acquire(me).unwrap();
                    // A new number now and then: the token "reused".
                    let _ = gil.tag_thread(me, n as u64 * 1000 + round / 13);
                    for _ in 0..50 {
                        // Forced switches when another thread waits.
                        gil.handle_drop_request(me).unwrap();
                    }
                    // Now and then a final release: the token's next round
                    // is a new life.
                    let how = if round % 17 == 0 {
                        ReleaseReason::Final
                    } else {
                        ReleaseReason::Voluntary
                    };
                    gil.release(me, how).unwrap();
                    rounds.fetch_add(1, SeqCst);
                }
            })
        })
        .collect();
    let mut bad = Vec::new();
    let mut checked = 0;
    for i in 0..TOGGLES {
        // Some rounds between two toggles (progress, not time).
        let seen = rounds.load(SeqCst);
        while rounds.load(SeqCst) < seen + WORKERS {
            thread::yield_now();
        }
        gil.set_thread_stats(i % 2 == 1);
        let all = gil.all_thread_stats();
        checked += all.len();
        bad.extend(inconsistent(&all, gil_core::now_ns()));
        toggled.fetch_add(1, SeqCst);
    }
    for w in workers {
        w.join().unwrap();
    }
    gil.set_thread_stats(false);
    gil.set_thread_stats(true);
    let all = gil.all_thread_stats();
    bad.extend(inconsistent(&all, gil_core::now_ns()));
    assert!(checked > 0);
    assert!(
        bad.is_empty(),
        "{} of {checked} records inconsistent, e.g. {:?}",
        bad.len(),
        &bad[..bad.len().min(3)]
    );
}

#[test]
fn a_name_alone_makes_no_record() {
    let gil = Gil::new(GilConfig::new()).unwrap();
    gil.set_thread_stats(true);
    gil.name_thread(tok(5), "named early");
    // On, off, a name, on: nothing to end, nothing listed.
    gil.set_thread_stats(false);
    gil.name_thread(tok(6), "named while off");
    gil.set_thread_stats(true);
    assert!(gil.thread_stats(tok(5)).is_none() && gil.thread_stats(tok(6)).is_none());
    assert!(gil.all_thread_stats().is_empty());
    assert_eq!(gil.tag_thread(tok(5), 1), Err(GilError::UnknownThread));
    // The name waited for the token's record.
    gil.acquire(tok(5)).unwrap();
    gil.release(tok(5), ReleaseReason::Final).unwrap();
    let s = gil.thread_stats(tok(5)).unwrap();
    assert_eq!(s.name.as_deref(), Some("named early"));
    assert!(s.ended_ns.is_some_and(|e| e >= s.first_ns));
}

#[test]
fn the_holder_is_measured_from_turning_accounting_on_when_it_tags() {
    let gil = Gil::new(GilConfig::new()).unwrap();
    gil.acquire(tok(1)).unwrap();
    assert_eq!(
        gil.tag_thread(tok(1), 7),
        Err(GilError::UnknownThread),
        "accounting off"
    );
    gil.set_thread_stats(true);
    assert!(gil.thread_stats(tok(1)).is_none(), "no event yet");
    assert_eq!(
        gil.tag_thread(tok(2), 8),
        Err(GilError::UnknownThread),
        "not the holder"
    );
    gil.tag_thread(tok(1), 7).unwrap();
    let s = gil.thread_stats(tok(1)).unwrap();
    assert!(s.alive && s.tag == 7 && s.acquisitions == 0, "{s:?}");
    // CPU-bound work with the lock: held time from the tag on.
    let start = s.first_ns;
    while gil_core::now_ns() <= start {
        std::hint::spin_loop();
    }
    let s = gil.thread_stats(tok(1)).unwrap();
    assert!(s.hold_time > Duration::ZERO, "{s:?}");
    assert_eq!(s.wait_time + s.call_time, Duration::ZERO);
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    assert_eq!(gil.all_thread_stats().len(), 1, "the release went to the same record");
}

#[test]
fn a_tag_from_another_thread_is_refused() {
    let gil = Arc::new(Gil::new(GilConfig::new()).unwrap());
    gil.set_thread_stats(true);
    gil.acquire(tok(1)).unwrap();
    gil.tag_thread(tok(1), 5).unwrap();
    let other = gil.clone();
    let got = thread::spawn(move || other.tag_thread(tok(1), 6)).join().unwrap();
    assert_eq!(got, Err(GilError::ForeignThread));
    let all = gil.all_thread_stats();
    assert_eq!((all.len(), all[0].tag, all[0].alive), (1, 5, true));
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
}
