//! Event hooks and histograms with real threads.
#![cfg(not(gil_loom))]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use gil_core::{Event, EventKind, EventMask, Gil, GilConfig, GilError, HookId, ReleaseReason, Token};

mod common;
use common::tok;

fn recorder(gil: &Gil) -> Arc<Mutex<Vec<Event>>> {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    gil.set_event_hook(Some(Arc::new(move |e: &Event| sink.lock().unwrap().push(*e))))
        .expect("not inside a hook");
    events
}

/// Two CPU-bound threads that poll the drop request, for `rounds` forced
/// switches each.
fn contend(gil: &Arc<Gil>, rounds: usize) {
    let start = Arc::new(Barrier::new(2));
    let workers: Vec<_> = [1, 2]
        .into_iter()
        .map(|n| {
            let (gil, start) = (gil.clone(), start.clone());
            thread::spawn(move || {
                let me = tok(n);
                start.wait();
                gil.acquire(me).unwrap();
                let mut switches = 0;
                while switches < rounds {
                    if gil.handle_drop_request(me).unwrap() {
                        switches += 1;
                    }
                    std::hint::spin_loop();
                }
                gil.release(me, ReleaseReason::Final).unwrap();
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
}

#[test]
fn events_alternate_and_match_the_counters() {
    let gil = Arc::new(Gil::new(GilConfig::new().switch_interval_us(200)).unwrap());
    let events = recorder(&gil);
    contend(&gil, 5);
    gil.set_event_hook(None).expect("not inside a hook");
    let events = events.lock().unwrap().clone();
    let c = gil.counters();

    // Released is reported before the lock word is let go, Acquired after
    // it is won: in the order hooks ran, holders strictly alternate.
    let mut holder: Option<Token> = None;
    for e in &events {
        match e.kind {
            EventKind::Acquired => {
                assert_eq!(holder, None, "{:?} acquired while {holder:?} held", e.token);
                holder = Some(e.token);
            }
            EventKind::Released(_) => {
                assert_eq!(holder, Some(e.token), "release by a non-holder");
                holder = None;
            }
            EventKind::DropRequested => {
                assert!(e.other.is_some_and(|w| w != e.token), "a request names its waiter");
            }
            EventKind::ForcedSwitch => {
                assert_ne!(e.other, Some(e.token), "a switch is to another thread");
            }
            _ => {}
        }
    }
    assert_eq!(holder, None);
    let count = |k: EventKind| events.iter().filter(|e| e.kind == k).count() as u64;
    assert_eq!(count(EventKind::Acquired), c.acquisitions);
    assert_eq!(count(EventKind::DropRequested), c.drop_requests);
    assert_eq!(count(EventKind::ForcedSwitch), c.forced_switches);
    assert!(c.forced_switches >= 10, "each worker was switched away 5 times");
    let waits = count(EventKind::WaitStart);
    assert!(waits >= 10, "every switch follows a wait ({waits})");
    // Acquired and Released are stamped while the lock is held, so the
    // holders' events are in time order too (waiters stamp theirs
    // concurrently, and may be preempted before their hook runs).
    let held: Vec<u64> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Acquired | EventKind::Released(_)))
        .map(|e| e.time_ns)
        .collect();
    assert!(
        held.windows(2).all(|w| w[0] <= w[1]),
        "holders' events out of time order"
    );
}

#[test]
fn no_events_once_the_hook_is_removed() {
    let gil = Gil::new(GilConfig::new()).unwrap();
    let events = recorder(&gil);
    gil.acquire(tok(1)).unwrap();
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    assert_eq!(events.lock().unwrap().len(), 2);
    gil.set_event_hook(None).expect("not inside a hook");
    assert!(!gil.has_event_hook());
    gil.acquire(tok(1)).unwrap();
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    assert_eq!(events.lock().unwrap().len(), 2);
}

#[test]
fn replacing_a_hook_waits_for_its_running_calls() {
    // A hook that is slow to finish: set_event_hook(None) must not return
    // while it runs.
    let gil = Arc::new(Gil::new(GilConfig::new()).unwrap());
    let inside = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicUsize::new(0));
    let (i, c) = (inside.clone(), calls.clone());
    gil.set_event_hook(Some(Arc::new(move |_: &Event| {
        i.store(true, SeqCst);
        thread::sleep(Duration::from_millis(50));
        c.fetch_add(1, SeqCst);
        i.store(false, SeqCst);
    })))
    .expect("not inside a hook");
    let emitter = {
        let gil = gil.clone();
        thread::spawn(move || gil.acquire(tok(1)).unwrap())
    };
    while !inside.load(SeqCst) {
        thread::yield_now();
    }
    gil.set_event_hook(None).expect("not inside a hook");
    assert!(!inside.load(SeqCst), "set_event_hook returned while the old hook ran");
    assert_eq!(calls.load(SeqCst), 1);
    emitter.join().unwrap();
}

#[test]
fn a_panicking_hook_does_not_break_the_lock() {
    let gil = Gil::new(GilConfig::new()).unwrap();
    gil.set_event_hook(Some(Arc::new(|_: &Event| panic!("hook bug"))))
        .expect("not inside a hook");
    gil.acquire(tok(1)).unwrap();
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    assert!(gil.is_idle());
    assert_eq!(gil.counters().acquisitions, 1);
}

#[test]
fn histograms_count_waits_and_holds_only_while_on() {
    let gil = Arc::new(Gil::new(GilConfig::new().switch_interval_us(200)).unwrap());
    gil.acquire(tok(1)).unwrap();
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    assert_eq!(gil.histograms().hold.count(), 0, "off by default");

    gil.set_histograms(true);
    assert!(gil.histograms_enabled());
    gil.acquire(tok(1)).unwrap();
    thread::sleep(Duration::from_millis(2));
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    let h = gil.histograms();
    assert_eq!(h.hold.count(), 1);
    assert!(h.hold.quantile(1.0).unwrap() >= Duration::from_millis(2));
    assert_eq!(h.wait.count(), 0, "an uncontended acquire does not wait");

    let before = gil.counters().acquisitions;
    contend(&gil, 3);
    let h = gil.histograms();
    let c = gil.counters();
    assert_eq!(h.hold.count() - 1, c.acquisitions - before, "one hold per acquisition");
    assert!(h.wait.count() >= 6, "every switch followed a wait");

    gil.reset_histograms();
    gil.set_histograms(false);
    gil.acquire(tok(1)).unwrap();
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    assert_eq!(gil.histograms().hold.count(), 0);
}

#[test]
fn lazy_release_and_reclaim_are_reported_once_each() {
    for preset in ["lazy", "priority-lazy-monitor"] {
        let gil = Gil::new(GilConfig::preset(preset).unwrap()).unwrap();
        let events = recorder(&gil);
        gil.set_histograms(true);
        let me = tok(1);
        gil.acquire(me).unwrap();
        gil.release(me, ReleaseReason::Voluntary).unwrap(); // lazily: a system call
        gil.acquire(me).unwrap(); // a reclaim
        gil.release(me, ReleaseReason::Final).unwrap();
        let kinds: Vec<_> = events.lock().unwrap().iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [
                EventKind::Acquired,
                EventKind::Released(ReleaseReason::Voluntary),
                EventKind::Acquired,
                EventKind::Released(ReleaseReason::Final),
            ],
            "{preset}"
        );
        assert_eq!(gil.histograms().hold.count(), 2, "{preset}");
        assert_eq!(gil.counters().lazy_releases, 1, "{preset}");
        // Observers off again: the plain fast paths, nothing reported.
        gil.set_event_hook(None).expect("not inside a hook");
        gil.set_histograms(false);
        gil.acquire(me).unwrap();
        gil.release(me, ReleaseReason::Final).unwrap();
        assert_eq!(events.lock().unwrap().len(), 4);
        assert_eq!(gil.histograms().hold.count(), 2);
    }
}

fn collector(sink: &Arc<Mutex<Vec<Event>>>) -> gil_core::EventHook {
    let sink = sink.clone();
    Arc::new(move |e: &Event| sink.lock().unwrap().push(*e))
}

/// `events` in a canonical order, to compare them as a multiset.
fn sorted(events: &[Event]) -> Vec<Event> {
    let mut v = events.to_vec();
    v.sort_by_key(|e| (e.time_ns, e.token, e.kind.name(), e.other));
    v
}

/// The events thread `t` reported, in the order a hook saw them: those that
/// happened to it, and the drop requests it raised as a waiter (reported on
/// its thread about the holder).
fn made_by(events: &[Event], t: Token) -> Vec<Event> {
    events
        .iter()
        .copied()
        .filter(|e| match e.kind {
            EventKind::DropRequested => e.other == Some(t),
            _ => e.token == t,
        })
        .collect()
}

#[test]
fn two_hooks_both_see_every_event_and_a_mask_filters() {
    let gil = Arc::new(Gil::new(GilConfig::new().switch_interval_us(200)).unwrap());
    let (all, acquired, replaceable) = (
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(Mutex::new(Vec::new())),
    );
    let id_all = gil.add_event_hook(collector(&all), EventMask::ALL).unwrap();
    let id_acq = gil.add_event_hook(collector(&acquired), EventMask::ACQUIRED).unwrap();
    gil.set_event_hook(Some(collector(&replaceable))).unwrap();
    assert_eq!(gil.event_hooks(), 3);
    contend(&gil, 5);
    // Replacing the replaceable hook leaves the added ones alone.
    gil.set_event_hook(None).unwrap();
    assert_eq!(gil.event_hooks(), 2);
    gil.remove_event_hook(id_acq).unwrap();
    gil.remove_event_hook(id_all).unwrap();
    assert!(!gil.has_event_hook());

    let all = all.lock().unwrap().clone();
    let acquired = acquired.lock().unwrap().clone();
    let replaceable = replaceable.lock().unwrap().clone();
    // What the contract promises: every hook sees every event it wants,
    // and the events of one thread in the order that thread made them.
    // Events of two threads may reach two hooks interleaved differently
    // (thread A gives an event to the first hook, B gives one to both, A
    // then to the second).
    assert_eq!(
        sorted(&all),
        sorted(&replaceable),
        "both all-event hooks saw the same events"
    );
    for t in [tok(1), tok(2)] {
        assert_eq!(
            made_by(&all, t),
            made_by(&replaceable, t),
            "both all-event hooks saw {t:?}'s events in the order it made them"
        );
    }
    // Acquisitions are ordered by the lock itself: each is reported while
    // its thread holds the lock, so every hook sees them in one order.
    let want: Vec<Event> = all.iter().copied().filter(|e| e.kind == EventKind::Acquired).collect();
    assert_eq!(acquired, want, "the masked hook saw exactly the acquisitions");
    assert_eq!(acquired.len() as u64, gil.counters().acquisitions);
    assert!(all.iter().any(|e| e.kind == EventKind::DropRequested));
}

#[test]
fn bad_masks_and_unknown_handles_are_errors() {
    let gil = Gil::new(GilConfig::new()).unwrap();
    let sink = Arc::new(Mutex::new(Vec::new()));
    assert_eq!(
        gil.add_event_hook(collector(&sink), EventMask::from_bits(0).unwrap()),
        Err(GilError::InvalidEventMask(0))
    );
    assert_eq!(EventMask::from_bits(EventMask::ALL.bits() + 1), None);
    assert!(!gil.has_event_hook());
    let id = gil.add_event_hook(collector(&sink), EventMask::RELEASED).unwrap();
    gil.remove_event_hook(id).unwrap();
    assert_eq!(gil.remove_event_hook(id), Err(GilError::UnknownHook(id.get())));
    assert_eq!(
        gil.remove_event_hook(HookId::from_raw(999)),
        Err(GilError::UnknownHook(999))
    );
    // With no hook left the lock is back on its uninstrumented paths.
    gil.acquire(tok(1)).unwrap();
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    assert!(sink.lock().unwrap().is_empty());
}

#[test]
fn removing_a_hook_waits_for_its_running_call_and_spares_the_others() {
    let gil = Arc::new(Gil::new(GilConfig::new()).unwrap());
    let inside = Arc::new(AtomicBool::new(false));
    let (i, slow_calls) = (inside.clone(), Arc::new(AtomicUsize::new(0)));
    let c = slow_calls.clone();
    let slow = gil
        .add_event_hook(
            Arc::new(move |_: &Event| {
                i.store(true, SeqCst);
                thread::sleep(Duration::from_millis(50));
                c.fetch_add(1, SeqCst);
                i.store(false, SeqCst);
            }),
            EventMask::ACQUIRED,
        )
        .unwrap();
    let other = Arc::new(Mutex::new(Vec::new()));
    let keep = gil.add_event_hook(collector(&other), EventMask::ALL).unwrap();
    let emitter = {
        let gil = gil.clone();
        thread::spawn(move || gil.acquire(tok(1)).unwrap())
    };
    while !inside.load(SeqCst) {
        thread::yield_now();
    }
    gil.remove_event_hook(slow).unwrap();
    assert!(!inside.load(SeqCst), "remove_event_hook returned while the hook ran");
    assert_eq!(slow_calls.load(SeqCst), 1);
    emitter.join().unwrap();
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    let kinds: Vec<_> = other.lock().unwrap().iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [EventKind::Acquired, EventKind::Released(ReleaseReason::Voluntary)]
    );
    gil.remove_event_hook(keep).unwrap();
}

#[test]
fn a_panicking_hook_does_not_keep_the_next_from_its_events() {
    let gil = Gil::new(GilConfig::new()).unwrap();
    gil.add_event_hook(Arc::new(|_: &Event| panic!("hook bug")), EventMask::ALL)
        .unwrap();
    let sink = Arc::new(Mutex::new(Vec::new()));
    gil.add_event_hook(collector(&sink), EventMask::ALL).unwrap();
    gil.acquire(tok(1)).unwrap();
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    assert_eq!(sink.lock().unwrap().len(), 2);
}

#[test]
fn a_handle_of_one_lock_removes_nothing_on_another() {
    let (a, b) = (Gil::new(GilConfig::new()).unwrap(), Gil::new(GilConfig::new()).unwrap());
    let (seen_a, seen_b) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
    let id_a = a.add_event_hook(collector(&seen_a), EventMask::ALL).unwrap();
    let id_b = b.add_event_hook(collector(&seen_b), EventMask::ALL).unwrap();
    assert_eq!(b.remove_event_hook(id_a), Err(GilError::UnknownHook(id_a.get())));
    assert_eq!(b.event_hooks(), 1, "b's hook is still installed");
    b.acquire(tok(1)).unwrap();
    b.release(tok(1), ReleaseReason::Voluntary).unwrap();
    assert_eq!(seen_b.lock().unwrap().len(), 2, "b's hook still runs");
    assert_ne!(id_a, id_b, "no two hooks in the process share a handle");
    a.remove_event_hook(id_a).unwrap();
    b.remove_event_hook(id_b).unwrap();
}

#[test]
fn an_owned_hook_is_out_of_reach_of_every_handle() {
    let gil = Gil::new(GilConfig::new()).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let owned = gil.add_owned_event_hook(collector(&seen), EventMask::ALL).unwrap();
    // A later hook's number bounds every number given out before it.
    let probe = gil.add_event_hook(collector(&seen), EventMask::ACQUIRED).unwrap();
    gil.remove_event_hook(probe).unwrap();
    for n in 1..=probe.get() + 1000 {
        assert_eq!(
            gil.remove_event_hook(HookId::from_raw(n)),
            Err(GilError::UnknownHook(n)),
            "a guessed handle removed something"
        );
    }
    gil.set_event_hook(None).unwrap();
    assert_eq!(gil.event_hooks(), 1);
    gil.acquire(tok(1)).unwrap();
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    assert_eq!(seen.lock().unwrap().len(), 2, "the owned hook still runs");

    // Another lock does not take it, and gives it back.
    let other = Gil::new(GilConfig::new()).unwrap();
    let (owned, err) = other.remove_owned_event_hook(owned).unwrap_err();
    assert_eq!(err, GilError::UnknownHook(owned.get()));
    gil.remove_owned_event_hook(owned).unwrap();
    assert!(!gil.has_event_hook());
}

#[test]
fn editing_hooks_does_not_wait_for_another_running_hook() {
    let gil = Arc::new(Gil::new(GilConfig::new()).unwrap());
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    // Blocks until released (once: a closed channel lets later calls by).
    let blocking = gil
        .add_event_hook(
            Arc::new(move |_: &Event| {
                let _ = entered_tx.send(());
                let _ = release_rx.lock().unwrap().recv();
            }),
            EventMask::ACQUIRED,
        )
        .unwrap();
    let later = Arc::new(Mutex::new(Vec::new()));
    let b = gil.add_event_hook(collector(&later), EventMask::ALL).unwrap();
    let emitter = {
        let gil = gil.clone();
        thread::spawn(move || gil.acquire(tok(1)).unwrap())
    };
    entered_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the blocking hook ran");
    let (done_tx, done_rx) = mpsc::channel();
    let editor = {
        let (gil, seen) = (gil.clone(), Arc::new(Mutex::new(Vec::new())));
        thread::spawn(move || {
            let c = gil.add_event_hook(collector(&seen), EventMask::ALL).unwrap();
            gil.remove_event_hook(b).unwrap();
            gil.remove_event_hook(c).unwrap();
            done_tx.send(()).unwrap();
        })
    };
    // A failure detector only: the edits need no time from the hook.
    let edited = done_rx.recv_timeout(Duration::from_secs(30));
    release_tx.send(()).unwrap();
    drop(release_tx);
    emitter.join().unwrap();
    editor.join().unwrap();
    assert!(
        edited.is_ok(),
        "adding or removing a hook waited for another hook still running"
    );
    // The emitter was blocked in the first hook when `b` was removed: it
    // never entered `b`.
    assert!(later.lock().unwrap().is_empty(), "a removed hook ran after its removal");
    gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
    gil.remove_event_hook(blocking).unwrap();
}

#[test]
fn no_hook_runs_after_its_removal_while_events_flow() {
    let gil = Arc::new(Gil::new(GilConfig::new().switch_interval_us(100)).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = [1, 2]
        .into_iter()
        .map(|n| {
            let (gil, stop) = (gil.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(SeqCst) {
                    gil.acquire(tok(n)).unwrap();
                    gil.release(tok(n), ReleaseReason::Voluntary).unwrap();
                }
            })
        })
        .collect();
    let late_calls = Arc::new(AtomicUsize::new(0));
    let keep = gil.add_event_hook(Arc::new(|_: &Event| {}), EventMask::ALL).unwrap();
    for _ in 0..300 {
        let removed = Arc::new(AtomicBool::new(false));
        let (r, late) = (removed.clone(), late_calls.clone());
        let id = gil
            .add_event_hook(
                Arc::new(move |_: &Event| {
                    if r.load(SeqCst) {
                        late.fetch_add(1, SeqCst);
                    }
                }),
                EventMask::ALL,
            )
            .unwrap();
        thread::yield_now();
        gil.remove_event_hook(id).unwrap();
        removed.store(true, SeqCst);
    }
    stop.store(true, SeqCst);
    for w in workers {
        w.join().unwrap();
    }
    gil.remove_event_hook(keep).unwrap();
    assert_eq!(late_calls.load(SeqCst), 0, "a hook ran after its removal returned");
    assert!(!gil.has_event_hook());
}
