//! Calls on a lock from inside its own callbacks (event hooks, the
//! drop-request callback, an abort check) return `GilError::Reentrant` and
//! change nothing, under every preset, instead of waiting for the calling
//! thread itself. Each scenario runs under a watchdog, so a hang fails.
#![cfg(not(gil_loom))]

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread;
use std::time::Duration;

use gil_core::{Event, EventKind, Gil, GilConfig, GilError, ReleaseReason, Token, PRESETS};

mod common;
use common::tok;

/// Runs `scenario` on its own thread and fails if it has not finished
/// within a minute (a deadlock would otherwise hang the test run).
fn watchdog(what: &str, scenario: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let runner = thread::spawn(move || {
        scenario();
        let _ = done.send(());
    });
    match finished.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => runner.join().expect("scenario thread"),
        // The scenario panicked: join to report its message.
        Err(mpsc::RecvTimeoutError::Disconnected) => runner.join().expect(what),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: hung (a call from inside a callback deadlocked)"),
    }
}

/// What the callbacks' calls returned.
type Log = Arc<Mutex<Vec<(&'static str, Result<(), GilError>)>>>;

fn record(log: &Log, what: &'static str, r: Result<(), GilError>) {
    log.lock().unwrap().push((what, r));
}

/// Every call a callback may try on its own lock, with `holder` the token
/// holding the lock at that moment.
fn call_everything(gil: &Gil, holder: Token, log: &Log) {
    record(log, "acquire", gil.acquire(tok(90)));
    record(log, "acquire_or_abort", gil.acquire_or_abort(tok(91), &mut || false));
    record(log, "try_acquire", gil.try_acquire(tok(92)).map(|_| ()));
    record(log, "release", gil.release(holder, ReleaseReason::Voluntary));
    record(log, "release forced", gil.release(holder, ReleaseReason::Forced));
    record(log, "release final", gil.release(holder, ReleaseReason::Final));
    record(log, "set_event_hook", gil.set_event_hook(None));
    assert!(gil.in_callback());
}

fn assert_all_reentrant(preset: &str, log: &Log, at_least: usize) {
    let log = log.lock().unwrap();
    assert!(log.len() >= at_least, "{preset}: the callback ran {} calls", log.len());
    for (what, r) in log.iter() {
        assert_eq!(*r, Err(GilError::Reentrant), "{preset}: {what} from inside a callback");
    }
}

#[test]
fn a_hook_calling_its_own_lock_gets_reentrant() {
    for &preset in PRESETS {
        watchdog(preset, move || {
            let gil = Arc::new(Gil::new(GilConfig::preset(preset).unwrap().switch_interval_us(1_000)).unwrap());
            let log: Log = Arc::default();
            let weak: Weak<Gil> = Arc::downgrade(&gil);
            let l = log.clone();
            // On the waiter's thread, under the lock's mutex (WaitStart), and
            // on the holder's own thread right after it took the lock.
            gil.set_event_hook(Some(Arc::new(move |e: &Event| {
                let Some(gil) = weak.upgrade() else { return };
                match e.kind {
                    EventKind::WaitStart => call_everything(&gil, tok(1), &l),
                    EventKind::Acquired if e.token == tok(1) => call_everything(&gil, tok(1), &l),
                    _ => {}
                }
            })))
            .unwrap();
            gil.acquire(tok(1)).unwrap();
            assert_eq!(
                gil.holder(),
                Some(tok(1)),
                "{preset}: the hook's release changed nothing"
            );
            let waiter = {
                let gil = gil.clone();
                thread::spawn(move || {
                    gil.acquire(tok(2)).unwrap();
                    gil.release(tok(2), ReleaseReason::Final).unwrap();
                })
            };
            while log.lock().unwrap().len() < 14 {
                thread::yield_now();
            }
            assert_eq!(gil.holder(), Some(tok(1)), "{preset}: still the holder");
            gil.release(tok(1), ReleaseReason::Final).unwrap();
            waiter.join().unwrap();
            assert!(gil.has_event_hook(), "{preset}: the hook removed itself");
            gil.set_event_hook(None).unwrap();
            assert!(gil.is_idle(), "{preset}: left idle");
            assert!(!gil.in_callback());
            assert_all_reentrant(preset, &log, 14);
        });
    }
}

#[test]
fn the_drop_request_callback_calling_its_own_lock_gets_reentrant() {
    for &preset in PRESETS {
        watchdog(preset, move || {
            let log: Log = Arc::default();
            let slot: Arc<OnceLock<Weak<Gil>>> = Arc::default();
            let (l, s) = (log.clone(), slot.clone());
            let calls = Arc::new(AtomicUsize::new(0));
            let c = calls.clone();
            let config = GilConfig::preset(preset)
                .unwrap()
                .switch_interval_us(1_000)
                .on_drop_request(move |holder| {
                    if c.fetch_add(1, SeqCst) == 0 {
                        if let Some(gil) = s.get().and_then(Weak::upgrade) {
                            call_everything(&gil, holder, &l);
                        }
                    }
                });
            let gil = Arc::new(Gil::new(config).unwrap());
            slot.set(Arc::downgrade(&gil)).unwrap();
            let holder = tok(1);
            gil.acquire(holder).unwrap();
            let waiter = {
                let gil = gil.clone();
                thread::spawn(move || {
                    gil.acquire(tok(2)).unwrap();
                    gil.release(tok(2), ReleaseReason::Final).unwrap();
                })
            };
            // The holder runs until asked to drop. It polls the flag alone
            // until the callback is done: the callback's release with the
            // holder's token (a thread using another's token) clears and
            // restores the holder for an instant.
            while !gil.drop_requested() || log.lock().unwrap().len() < 7 {
                thread::yield_now();
            }
            assert_eq!(
                gil.holder(),
                Some(holder),
                "{preset}: the callback's release changed nothing"
            );
            assert!(gil.handle_drop_request(holder).unwrap(), "{preset}: the request stands");
            gil.release(holder, ReleaseReason::Final).unwrap();
            waiter.join().unwrap();
            assert!(gil.is_idle(), "{preset}: left idle");
            assert_all_reentrant(preset, &log, 7);
        });
    }
}

#[test]
fn an_abort_check_calling_its_own_lock_gets_reentrant() {
    for &preset in PRESETS {
        watchdog(preset, move || {
            let gil = Arc::new(Gil::new(GilConfig::preset(preset).unwrap().switch_interval_us(1_000)).unwrap());
            let holder = tok(1);
            gil.acquire(holder).unwrap();
            let log: Log = Arc::default();
            let waiter = {
                let (gil, log) = (gil.clone(), log.clone());
                thread::spawn(move || {
                    let mut check = || {
                        call_everything(&gil, holder, &log);
                        true
                    };
                    gil.acquire_or_abort(tok(2), &mut check)
                })
            };
            assert_eq!(waiter.join().unwrap(), Err(GilError::Aborted), "{preset}");
            assert_eq!(
                gil.holder(),
                Some(holder),
                "{preset}: the check's release changed nothing"
            );
            gil.release(holder, ReleaseReason::Final).unwrap();
            assert!(gil.is_idle(), "{preset}: left idle");
            assert_all_reentrant(preset, &log, 7);
        });
    }
}

#[test]
fn a_hook_may_use_another_lock() {
    watchdog("two locks", || {
        let other = Arc::new(Gil::new(GilConfig::new()).unwrap());
        let gil = Gil::new(GilConfig::new()).unwrap();
        let log: Log = Arc::default();
        let (o, l) = (other.clone(), log.clone());
        gil.set_event_hook(Some(Arc::new(move |e: &Event| {
            if e.kind == EventKind::Acquired {
                assert!(!o.in_callback());
                record(&l, "other acquire", o.acquire(tok(7)));
                record(&l, "other release", o.release(tok(7), ReleaseReason::Final));
            }
        })))
        .unwrap();
        gil.acquire(tok(1)).unwrap();
        gil.release(tok(1), ReleaseReason::Final).unwrap();
        gil.set_event_hook(None).unwrap();
        let log = log.lock().unwrap();
        assert_eq!(*log, vec![("other acquire", Ok(())), ("other release", Ok(()))]);
        assert!(other.is_idle());
    });
}
