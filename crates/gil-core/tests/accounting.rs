//! Per-thread accounting with real threads: known waits, holds and calls
//! are reported at least as long as they were, and the per-thread counts
//! add up to the lock's counters.
#![cfg(not(gil_loom))]

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use gil_core::{Gil, GilConfig, ReleaseReason};

mod common;
use common::{in_fork_child, tok};

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
                    assert!(gil.tag_thread(me, 100 + n as u64));
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
