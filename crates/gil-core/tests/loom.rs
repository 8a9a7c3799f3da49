//! loom models of the protocol: every interleaving of 2–3 threads (plus a
//! clock thread where time matters).
//!
//! Run with:
//! `RUSTFLAGS="--cfg gil_loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p gil-core --test loom --release`
//!
//! Time: under loom a timed wait ends by timeout only when the model's clock
//! thread calls `Gil::loom_tick`; whether that comes before or after a
//! notification is explored like any other interleaving.
//!
//! Bookkeeping of the models themselves uses std atomics: loom runs one
//! thread at a time, so they record the real order of events, against which
//! the lock's behaviour is judged.
#![cfg(gil_loom)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex as StdMutex;

use gil_core::{Gil, GilConfig, ReleaseReason, Token};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

mod common;
use common::tok;

/// Per-token phase, in real execution order: `true` from the moment a
/// thread calls `acquire` until its `release` has returned.
#[derive(Default)]
struct Phases([AtomicBool; 8]);

impl Phases {
    fn enter(&self, t: Token) {
        self.0[t.get()].store(true, SeqCst);
    }
    fn leave(&self, t: Token) {
        self.0[t.get()].store(false, SeqCst);
    }
    fn active(&self, t: Token) -> bool {
        self.0[t.get()].load(SeqCst)
    }
}

/// The model's clock: one tick, at any point of the execution.
fn spawn_clock(gil: &Arc<Gil>) -> thread::JoinHandle<()> {
    let gil = gil.clone();
    thread::spawn(move || gil.loom_tick(|| ()))
}

fn acquire(gil: &Gil, phases: &Phases, t: Token) {
    phases.enter(t);
    gil.acquire(t).unwrap();
}

fn release(gil: &Gil, phases: &Phases, t: Token, reason: ReleaseReason) {
    gil.release(t, reason).unwrap();
    phases.leave(t);
}

/// Fails a model none of whose explored executions reached the case it
/// exists for (`hits` counts them), naming the case. Below CI's depth some
/// models cannot reach their case at all, and the message says so, so that
/// a quick run at `LOOM_MAX_PREEMPTIONS=1` is not read as a fault of the lock.
#[track_caller]
fn assert_reached(hits: usize, case: &str) {
    if hits > 0 {
        return;
    }
    let depth = std::env::var("LOOM_MAX_PREEMPTIONS").ok();
    match depth.as_deref().map(str::parse::<usize>) {
        Some(Ok(d)) if d < 2 => panic!(
            "no execution {case}: at LOOM_MAX_PREEMPTIONS={d} this model may not reach its case; \
             run it with 2, as CI does, before reading this as a fault of the lock"
        ),
        _ => panic!("no execution {case}"),
    }
}

#[test]
fn mutual_exclusion() {
    loom::model(|| {
        let gil = Arc::new(Gil::new(GilConfig::new()).unwrap());
        let data = Arc::new(UnsafeCell::new(0u32));
        let spawn = |n: usize, reason: ReleaseReason| {
            let (gil, data) = (gil.clone(), data.clone());
            thread::spawn(move || {
                gil.acquire(tok(n)).unwrap();
                // loom's UnsafeCell fails the model on any unsynchronised access.
                // SAFETY: only touched while holding the GIL, which loom checks.
                data.with_mut(|v| unsafe { *v += 1 });
                gil.release(tok(n), reason).unwrap();
            })
        };
        let a = spawn(1, ReleaseReason::Voluntary);
        let b = spawn(2, ReleaseReason::Forced);
        // The main thread competes with try_acquire.
        if gil.try_acquire(tok(3)).unwrap() {
            // SAFETY: as above.
            data.with_mut(|v| unsafe { *v += 1 });
            gil.release(tok(3), ReleaseReason::Final).unwrap();
        }
        a.join().unwrap();
        b.join().unwrap();
        // SAFETY: both threads joined.
        let total = data.with(|v| unsafe { *v });
        assert!(total == 2 || total == 3, "lost an increment: {total}");
        assert!(gil.is_idle());
    });
}

#[test]
fn no_lost_wakeup() {
    // Two threads block behind the holder; every release must wake someone,
    // or loom reports the deadlock.
    loom::model(|| {
        let gil = Arc::new(Gil::new(GilConfig::new()).unwrap());
        gil.acquire(tok(1)).unwrap();
        let waiters: Vec<_> = [2, 3]
            .into_iter()
            .map(|n| {
                let gil = gil.clone();
                thread::spawn(move || {
                    gil.acquire(tok(n)).unwrap();
                    gil.release(tok(n), ReleaseReason::Voluntary).unwrap();
                })
            })
            .collect();
        gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
        for w in waiters {
            w.join().unwrap();
        }
        assert!(gil.is_idle());
        assert_eq!(gil.counters().acquisitions, 3);
    });
}

/// Executions of a model in which the checked event happened at least once,
/// so a model cannot pass by never exercising what it checks.
static EXERCISED: AtomicUsize = AtomicUsize::new(0);

#[test]
fn drop_request_only_after_a_timeout_without_a_switch() {
    // A holds, lets go and takes it back, then B takes it; X competes; the
    // clock ticks once.
    // Every request for holder H must come after a tick that happened after
    // H started the acquisition that made it the holder after another token
    // (no switch since the timeout): a request without a timeout, or one
    // whose timeout ran under a previous holder, fails the model.
    struct Book {
        ticks: AtomicUsize,
        /// Ticks seen when each token last started an acquisition that
        /// could be a switch (a re-take by the last holder is not one).
        since: [AtomicUsize; 8],
        /// The token whose `acquire` returned last.
        last: AtomicUsize,
        phases: Phases,
    }
    impl Book {
        fn start(&self, gil: &Gil, t: Token) {
            if self.last.load(SeqCst) != t.get() {
                self.since[t.get()].store(self.ticks.load(SeqCst), SeqCst);
            }
            acquire(gil, &self.phases, t);
            self.last.store(t.get(), SeqCst);
        }
    }
    let before = EXERCISED.load(SeqCst);
    loom::model(|| {
        let book = std::sync::Arc::new(Book {
            ticks: AtomicUsize::new(0),
            since: Default::default(),
            last: AtomicUsize::new(0),
            phases: Phases::default(),
        });
        let cb_book = book.clone();
        let config = GilConfig::new().on_drop_request(move |holder| {
            let b = &cb_book;
            assert!(
                b.phases.active(holder),
                "request for {holder:?}, which is not in the lock"
            );
            let since = b.since[holder.get()].load(SeqCst);
            let now = b.ticks.load(SeqCst);
            assert!(
                now > since,
                "request for {holder:?} without a timeout since it started acquiring"
            );
            EXERCISED.fetch_add(1, SeqCst);
        });
        let gil = Arc::new(Gil::new(config).unwrap());
        book.start(&gil, tok(1));
        let clock = {
            let (gil, book) = (gil.clone(), book.clone());
            thread::spawn(move || {
                gil.loom_tick(|| {
                    book.ticks.fetch_add(1, SeqCst);
                })
            })
        };
        let other = {
            let (gil, book) = (gil.clone(), book.clone());
            thread::spawn(move || {
                let x = tok(3);
                book.start(&gil, x);
                release(&gil, &book.phases, x, ReleaseReason::Voluntary);
            })
        };
        // Let go and take it back with the same token: a waiter woken by
        // this release sees no switch, but no timeout either.
        release(&gil, &book.phases, tok(1), ReleaseReason::Voluntary);
        book.start(&gil, tok(1));
        release(&gil, &book.phases, tok(1), ReleaseReason::Voluntary);
        // And a switch to a third token, which restarts X's interval.
        book.start(&gil, tok(2));
        release(&gil, &book.phases, tok(2), ReleaseReason::Voluntary);
        clock.join().unwrap();
        other.join().unwrap();
    });
    assert_reached(EXERCISED.load(SeqCst) - before, "raised a drop request");
}

#[test]
fn forced_switch_is_acknowledged() {
    // A holds and polls the flag; W waits; the clock ticks once. If A sees
    // the request and releases with Forced, the release must not return
    // before W has taken the lock.
    let forced = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = forced.clone();
    loom::model(move || {
        let gil = Arc::new(Gil::new(GilConfig::new()).unwrap());
        let (a, w) = (tok(1), tok(2));
        gil.acquire(a).unwrap();
        let clock = spawn_clock(&gil);
        let waiter = {
            let gil = gil.clone();
            thread::spawn(move || {
                gil.acquire(w).unwrap();
                gil.release(w, ReleaseReason::Voluntary).unwrap();
            })
        };
        let mut asked = false;
        for _ in 0..2 {
            if gil.drop_requested() {
                asked = true;
                break;
            }
            thread::yield_now();
        }
        if asked {
            gil.release(a, ReleaseReason::Forced).unwrap();
            assert_eq!(
                gil.last_holder(),
                Some(w),
                "forced release returned before the waiter took over"
            );
            seen.fetch_add(1, SeqCst);
        } else {
            // A voluntary release with a request pending (raised after the
            // last poll) also waits for the switch, as CPython's drop_gil.
            let pending = gil.drop_requested();
            gil.release(a, ReleaseReason::Voluntary).unwrap();
            if pending {
                assert_eq!(
                    gil.last_holder(),
                    Some(w),
                    "release with a pending request returned before the switch"
                );
            }
        }
        // Trying to win it straight back is allowed now, and cannot have
        // happened before W's turn.
        gil.acquire(a).unwrap();
        gil.release(a, ReleaseReason::Final).unwrap();
        clock.join().unwrap();
        waiter.join().unwrap();
        if asked {
            assert_eq!(gil.counters().forced_switches, 1);
        }
    });
    assert_reached(forced.load(SeqCst), "took the forced path");
}

#[test]
fn callback_runs_only_while_its_token_holds() {
    // H takes the lock and lets go; W waits; N arrives at any moment (and
    // may take the lock on the fast path); the clock ticks. While the callback runs for H (and it yields to let H move),
    // H's release must not have returned.
    let calls = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    loom::model(move || {
        let phases = std::sync::Arc::new(Phases::default());
        let in_callback = std::sync::Arc::new(StdMutex::new(None::<Token>));
        let (cb_phases, cb_flag, counted) = (phases.clone(), in_callback.clone(), counted.clone());
        let config = GilConfig::new().on_drop_request(move |holder| {
            assert!(
                cb_phases.active(holder),
                "callback for {holder:?} after its release returned"
            );
            *cb_flag.lock().unwrap() = Some(holder);
            thread::yield_now();
            assert!(
                cb_phases.active(holder),
                "{holder:?} finished releasing during its callback"
            );
            *cb_flag.lock().unwrap() = None;
            counted.fetch_add(1, SeqCst);
        });
        let gil = Arc::new(Gil::new(config).unwrap());
        let h = tok(1);
        acquire(&gil, &phases, h);
        let clock = spawn_clock(&gil);
        let waiter = {
            let (gil, phases) = (gil.clone(), phases.clone());
            thread::spawn(move || {
                acquire(&gil, &phases, tok(2));
                release(&gil, &phases, tok(2), ReleaseReason::Final);
            })
        };
        let newcomer = {
            let (gil, phases) = (gil.clone(), phases.clone());
            thread::spawn(move || {
                acquire(&gil, &phases, tok(3));
                release(&gil, &phases, tok(3), ReleaseReason::Voluntary);
            })
        };
        gil.release(h, ReleaseReason::Voluntary).unwrap();
        assert_ne!(
            *in_callback.lock().unwrap(),
            Some(h),
            "release returned inside the callback"
        );
        phases.leave(h);
        clock.join().unwrap();
        waiter.join().unwrap();
        newcomer.join().unwrap();
    });
    assert_reached(calls.load(SeqCst), "ran the callback");
}

#[test]
fn abort_releases_a_forced_releaser() {
    // W gives up waiting at its first timeout while A answers W's request
    // with a forced release: A must not wait for a switch that can no
    // longer come.
    loom::model(|| {
        let gil = Arc::new(Gil::new(GilConfig::new()).unwrap());
        let (a, w) = (tok(1), tok(2));
        gil.acquire(a).unwrap();
        let clock = spawn_clock(&gil);
        let waiter = {
            let gil = gil.clone();
            thread::spawn(move || match gil.acquire_or_abort(w, &mut || true) {
                Ok(()) => gil.release(w, ReleaseReason::Final).unwrap(),
                Err(e) => assert_eq!(e, gil_core::GilError::Aborted),
            })
        };
        thread::yield_now();
        gil.release(a, ReleaseReason::Forced).unwrap();
        clock.join().unwrap();
        waiter.join().unwrap();
        assert!(!gil.is_locked());
    });
}

#[test]
fn settling_a_reservation_races_safely_with_reclaim_and_a_waiter() {
    // T releases lazily; `settle` (what `close` and `gil_free` do) ends the
    // reservation while T comes back and W arrives: whoever wins, both get
    // the lock in turn, never together, and the lock ends idle.
    let settled = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = settled.clone();
    loom::model(move || {
        let gil = Arc::new(Gil::new(GilConfig::new().lazy_release_us(Some(50))).unwrap());
        let data = Arc::new(UnsafeCell::new(0u32));
        let (t, w) = (tok(1), tok(2));
        gil.acquire(t).unwrap();
        gil.release(t, ReleaseReason::Voluntary).unwrap();
        let settler = {
            let gil = gil.clone();
            thread::spawn(move || {
                let before = gil.is_reserved();
                let idle = gil.settle();
                before && idle && !gil.is_reserved()
            })
        };
        let waiter = {
            let (gil, data) = (gil.clone(), data.clone());
            thread::spawn(move || {
                gil.acquire(w).unwrap();
                // SAFETY: only touched while holding the GIL, which loom checks.
                data.with_mut(|v| unsafe { *v += 1 });
                gil.release(w, ReleaseReason::Final).unwrap();
            })
        };
        gil.acquire(t).unwrap();
        // SAFETY: as above.
        data.with_mut(|v| unsafe { *v += 1 });
        gil.release(t, ReleaseReason::Final).unwrap();
        if settler.join().unwrap() {
            seen.fetch_add(1, SeqCst);
        }
        waiter.join().unwrap();
        // SAFETY: all threads joined.
        assert_eq!(data.with(|v| unsafe { *v }), 2);
        assert!(gil.is_idle());
        assert!(gil.settle(), "nothing left to settle");
    });
    assert_reached(settled.load(SeqCst), "settled the reservation before the others came");
}

#[test]
fn lazy_takeover_vs_reclaim_exactly_one_wins() {
    // T releases lazily (a "system call"), W wants the lock, the clock may
    // tick (the call outlasting the threshold), T comes back: T's reclaim
    // and W's takeover race for the same episode; exactly one may win, and
    // the loser must still get the lock afterwards.
    let takeovers = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = takeovers.clone();
    loom::model(move || {
        let gil = Arc::new(Gil::new(GilConfig::new().lazy_release_us(Some(50))).unwrap());
        let data = Arc::new(UnsafeCell::new(0u32));
        let (t, w) = (tok(1), tok(2));
        gil.acquire(t).unwrap();
        gil.release(t, ReleaseReason::Voluntary).unwrap();
        assert!(
            gil.is_reserved() && !gil.is_locked(),
            "a lazy release keeps the lock reserved"
        );
        let clock = spawn_clock(&gil);
        let waiter = {
            let (gil, data) = (gil.clone(), data.clone());
            thread::spawn(move || {
                gil.acquire(w).unwrap();
                // SAFETY: only touched while holding the GIL, which loom checks.
                data.with_mut(|v| unsafe { *v += 1 });
                gil.release(w, ReleaseReason::Final).unwrap();
            })
        };
        gil.acquire(t).unwrap();
        // SAFETY: as above.
        data.with_mut(|v| unsafe { *v += 1 });
        gil.release(t, ReleaseReason::Final).unwrap();
        clock.join().unwrap();
        waiter.join().unwrap();
        // SAFETY: both threads joined.
        assert_eq!(data.with(|v| unsafe { *v }), 2);
        let c = gil.counters();
        assert!(c.lazy_takeovers <= 1);
        seen.fetch_add(c.lazy_takeovers as usize, SeqCst);
        assert!(!gil.is_locked());
    });
    assert_reached(takeovers.load(SeqCst), "took the lock over from a system call");
}

#[test]
fn priority_io_waiter_preempts_a_cpu_holder_without_a_timeout() {
    // No clock: no waiter can ever time out. C is CPU-class (its last
    // release was forced) and spins until asked to drop; I, a fresh
    // (I/O-class) thread, must get it to drop at once. I looks for the
    // release before sleeping, letting go of the mutex meanwhile (the
    // preempting look, with or without a spin limit), also under the
    // monitor.
    for config in [
        GilConfig::new(),
        GilConfig::new().spin_us(10),
        GilConfig::new().monitor(true).spin_us(10),
    ] {
        priority_preemption_model(config.policy(gil_core::Policy::Priority));
    }
}

fn priority_preemption_model(config: GilConfig) {
    loom::model(move || {
        let gil = Arc::new(Gil::new(config.clone()).unwrap());
        let (c, i) = (tok(1), tok(2));
        gil.acquire(c).unwrap();
        gil.release(c, ReleaseReason::Forced).unwrap(); // nobody waits: returns at once
        gil.acquire(c).unwrap(); // now a CPU-class holder
        let io = {
            let gil = gil.clone();
            thread::spawn(move || {
                gil.acquire(i).unwrap();
                gil.release(i, ReleaseReason::Voluntary).unwrap();
            })
        };
        while !gil.drop_requested() {
            thread::yield_now();
        }
        gil.release(c, ReleaseReason::Forced).unwrap();
        assert_eq!(gil.last_holder(), Some(i), "the I/O waiter did not take over");
        io.join().unwrap();
        assert_eq!(gil.counters().preemptions, 1);
    });
}

#[test]
fn a_cpu_waiter_spinning_for_an_io_holder_takes_the_lock_back() {
    // As above, and C, having let go, asks for the lock again while I
    // holds it: with a spin limit C spins (without the mutex) for I's
    // release, then takes the lock or sleeps. Whatever the interleaving,
    // both finish (I's release is not lost on a C that spun instead of
    // waiting) and C ends up holding, plain and monitored.
    cpu_waiter_takes_the_lock_back(1);
}

#[test]
fn a_cpu_waiter_watching_alone_misses_no_release() {
    // As above, but I makes two calls while C asks for the lock back: C,
    // alone in the room, watches with WAITERS cleared (it needs no
    // wake-up), so I takes the lock back and lets it go on the fast path,
    // without the mutex. Whatever the interleaving, C either takes the
    // lock during the watch or puts WAITERS back before it sleeps, so no
    // release of I's is lost on it (and I, if C got the lock between its
    // calls, gets it back): both finish.
    cpu_waiter_takes_the_lock_back(2);
}

/// The two models above: C, a CPU-class holder, is preempted by I, which
/// then makes `calls` calls (a take and a voluntary release each) while C
/// asks for the lock back; C ends up holding.
fn cpu_waiter_takes_the_lock_back(calls: usize) {
    for config in [GilConfig::new().spin_us(10), GilConfig::new().monitor(true).spin_us(10)] {
        let config = config.policy(gil_core::Policy::Priority);
        loom::model(move || {
            let gil = Arc::new(Gil::new(config.clone()).unwrap());
            let (c, i) = (tok(1), tok(2));
            gil.acquire(c).unwrap();
            gil.release(c, ReleaseReason::Forced).unwrap(); // nobody waits: returns at once
            gil.acquire(c).unwrap(); // now a CPU-class holder
            let io = {
                let gil = gil.clone();
                thread::spawn(move || {
                    for _ in 0..calls {
                        gil.acquire(i).unwrap();
                        gil.release(i, ReleaseReason::Voluntary).unwrap();
                    }
                })
            };
            while !gil.drop_requested() {
                thread::yield_now();
            }
            gil.release(c, ReleaseReason::Forced).unwrap();
            gil.acquire(c).unwrap();
            assert_eq!(gil.holder(), Some(c));
            // Before the join: I may wait for it (a call after C's take).
            gil.release(c, ReleaseReason::Final).unwrap();
            io.join().unwrap();
        });
    }
}

#[test]
fn a_drop_request_brings_a_watcher_back_into_the_lock_word() {
    // C, CPU-class, waits while I (I/O-class) holds; alone, it watches
    // with WAITERS cleared. The monitor's look (the clock's tick, at any
    // point) asks I to drop: the request puts WAITERS back, so I cannot
    // finish releasing on the fast path while the callback runs for it.
    // (The monitor drops a panic of the callback: the callback counts
    // what it saw instead.)
    let config = GilConfig::new()
        .policy(gil_core::Policy::Priority)
        .monitor(true)
        .spin_us(10);
    let (calls, released) = (
        std::sync::Arc::new(AtomicUsize::new(0)),
        std::sync::Arc::new(AtomicUsize::new(0)),
    );
    let (counted, seen_released) = (calls.clone(), released.clone());
    loom::model(move || {
        let phases = std::sync::Arc::new(Phases::default());
        let (cb_phases, counted, seen_released) = (phases.clone(), counted.clone(), seen_released.clone());
        let config = config.clone().on_drop_request(move |holder| {
            let before = cb_phases.active(holder);
            thread::yield_now();
            if !before || !cb_phases.active(holder) {
                seen_released.fetch_add(1, SeqCst);
            }
            counted.fetch_add(1, SeqCst);
        });
        let gil = Arc::new(Gil::new(config).unwrap());
        let (c, i) = (tok(1), tok(2));
        let ready = std::sync::Arc::new(AtomicBool::new(false));
        let cpu = {
            let (gil, phases, ready) = (gil.clone(), phases.clone(), ready.clone());
            thread::spawn(move || {
                acquire(&gil, &phases, c);
                release(&gil, &phases, c, ReleaseReason::Forced); // nobody waits: CPU-class at once
                ready.store(true, SeqCst);
                acquire(&gil, &phases, c);
                release(&gil, &phases, c, ReleaseReason::Final);
            })
        };
        while !ready.load(SeqCst) {
            thread::yield_now();
        }
        let clock = spawn_clock(&gil);
        acquire(&gil, &phases, i);
        release(&gil, &phases, i, ReleaseReason::Voluntary);
        clock.join().unwrap();
        cpu.join().unwrap();
    });
    assert_reached(calls.load(SeqCst), "ran the callback");
    assert_eq!(
        released.load(SeqCst),
        0,
        "a holder finished releasing during its callback"
    );
}

// ---- the monitor ---------------------------------------------------------
//
// Under loom a monitored lock has no monitor thread: the clock thread's
// `loom_tick` takes the monitor's look, with exactly the code the thread
// runs (`monitor_pass_locked`).

fn monitored() -> GilConfig {
    GilConfig::new().monitor(true)
}

#[test]
fn an_overdue_waiter_is_served_before_a_newcomer() {
    // H holds; W1 queues; the clock ticks (W1, first in line, has now been
    // passed over for longer than the hand-off bound: any duration has
    // passed once the model ticked); only then W2 starts to ask, while H
    // lets go at any point. Whatever the interleaving, W1 gets the lock
    // before W2: W2 may not overtake it. Monitored and plain.
    for config in [monitored(), GilConfig::new().policy(gil_core::Policy::Priority)] {
        loom::model(move || {
            let gil = Arc::new(Gil::new(config.clone()).unwrap());
            let queued = std::sync::Arc::new(AtomicUsize::new(0));
            let q = queued.clone();
            gil.set_event_hook(Some(std::sync::Arc::new(move |e: &gil_core::Event| {
                if e.kind == gil_core::EventKind::WaitStart && e.token == tok(2) {
                    q.fetch_add(1, SeqCst);
                }
            })))
            .expect("not inside a hook");
            let order = std::sync::Arc::new(StdMutex::new(Vec::new()));
            gil.acquire(tok(1)).unwrap();
            let spawn = |n: usize, after: usize| {
                let (gil, order, queued) = (gil.clone(), order.clone(), queued.clone());
                thread::spawn(move || {
                    while queued.load(SeqCst) < after {
                        thread::yield_now();
                    }
                    gil.acquire(tok(n)).unwrap();
                    order.lock().unwrap().push(n);
                    gil.release(tok(n), ReleaseReason::Final).unwrap();
                })
            };
            let w1 = spawn(2, 0);
            while queued.load(SeqCst) < 1 {
                thread::yield_now();
            }
            gil.loom_tick(|| {});
            queued.fetch_add(1, SeqCst); // W2 may start
            let w2 = spawn(3, 2);
            thread::yield_now();
            gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
            w1.join().unwrap();
            w2.join().unwrap();
            assert_eq!(*order.lock().unwrap(), vec![2, 3], "W2 overtook an overdue W1");
            gil.set_event_hook(None).expect("not inside a hook");
            assert!(gil.is_idle());
        });
    }
}

#[test]
fn a_running_thread_overtakes_a_waiter_at_most_its_laps() {
    // With a bound of SERVER_LAPS laps: H holds; W queues. H lets go
    // around a call and asks again at once, SERVER_LAPS + 1 times; each
    // time it is running when the lock comes free and W has to wake, so H
    // may take it first, but no more than SERVER_LAPS times after W
    // joined: then it waits its turn behind W. The clock never ticks, so
    // the hand-off bound (a switch interval) never frees W. Monitored and
    // plain.
    let laps = gil_core::SERVER_LAPS;
    for config in [
        monitored().laps(laps),
        GilConfig::new().policy(gil_core::Policy::Priority).laps(laps),
    ] {
        loom::model(move || {
            let gil = Arc::new(Gil::new(config.clone()).unwrap());
            let queued = std::sync::Arc::new(AtomicBool::new(false));
            let q = queued.clone();
            gil.set_event_hook(Some(std::sync::Arc::new(move |e: &gil_core::Event| {
                if e.kind == gil_core::EventKind::WaitStart && e.token == tok(2) {
                    q.store(true, SeqCst);
                }
            })))
            .expect("not inside a hook");
            let order = std::sync::Arc::new(StdMutex::new(Vec::new()));
            gil.acquire(tok(1)).unwrap();
            let w = {
                let (gil, order) = (gil.clone(), order.clone());
                thread::spawn(move || {
                    gil.acquire(tok(2)).unwrap();
                    order.lock().unwrap().push(2);
                    gil.release(tok(2), ReleaseReason::Final).unwrap();
                })
            };
            while !queued.load(SeqCst) {
                thread::yield_now();
            }
            for _ in 0..=laps {
                gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
                gil.acquire(tok(1)).unwrap();
                order.lock().unwrap().push(1);
            }
            gil.release(tok(1), ReleaseReason::Final).unwrap();
            w.join().unwrap();
            let order = order.lock().unwrap();
            let before_w = order.iter().take_while(|&&t| t == 1).count();
            assert!(before_w <= laps as usize, "H overtook W {before_w} times: {order:?}");
            gil.set_event_hook(None).expect("not inside a hook");
            assert!(gil.is_idle());
        });
    }
}

#[test]
fn monitor_look_vs_release() {
    // H holds, looks at the flag twice, then lets go: forced if asked,
    // voluntary otherwise. W waits; the clock (the monitor) ticks once, at
    // any point. The monitor's request may only ever name a holder that
    // holds; a forced release returns only after the switch; nobody is left
    // waiting.
    let forced = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = forced.clone();
    loom::model(move || {
        let phases = std::sync::Arc::new(Phases::default());
        let p = phases.clone();
        let config = monitored().on_drop_request(move |holder| {
            assert!(p.active(holder), "monitor asked {holder:?}, which is not in the lock");
        });
        let gil = Arc::new(Gil::new(config).unwrap());
        let (h, w) = (tok(1), tok(2));
        acquire(&gil, &phases, h);
        let clock = spawn_clock(&gil);
        let waiter = {
            let (gil, phases) = (gil.clone(), phases.clone());
            thread::spawn(move || {
                acquire(&gil, &phases, w);
                release(&gil, &phases, w, ReleaseReason::Voluntary);
            })
        };
        let mut asked = false;
        for _ in 0..2 {
            if gil.drop_requested() {
                asked = true;
                break;
            }
            thread::yield_now();
        }
        if asked {
            gil.release(h, ReleaseReason::Forced).unwrap();
            assert_eq!(gil.last_holder(), Some(w), "forced release returned before the switch");
            seen.fetch_add(1, SeqCst);
        } else {
            gil.release(h, ReleaseReason::Voluntary).unwrap();
        }
        phases.leave(h);
        clock.join().unwrap();
        waiter.join().unwrap();
        assert!(!gil.is_locked());
    });
    assert_reached(forced.load(SeqCst), "had the monitor ask for a drop");
}

#[test]
fn monitor_takeover_vs_reclaim_exactly_one_wins() {
    // As `lazy_takeover_vs_reclaim_exactly_one_wins`, with the monitor
    // timing the call: it sees the episode at one look and takes it over at
    // a later one, so the clock ticks twice.
    let takeovers = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = takeovers.clone();
    loom::model(move || {
        let gil = Arc::new(Gil::new(monitored().lazy_release_us(Some(50))).unwrap());
        let data = Arc::new(UnsafeCell::new(0u32));
        let (t, w) = (tok(1), tok(2));
        gil.acquire(t).unwrap();
        gil.release(t, ReleaseReason::Voluntary).unwrap();
        let clock = {
            let gil = gil.clone();
            thread::spawn(move || {
                gil.loom_tick(|| ());
                gil.loom_tick(|| ());
            })
        };
        let waiter = {
            let (gil, data) = (gil.clone(), data.clone());
            thread::spawn(move || {
                gil.acquire(w).unwrap();
                // SAFETY: only touched while holding the GIL, which loom checks.
                data.with_mut(|v| unsafe { *v += 1 });
                gil.release(w, ReleaseReason::Final).unwrap();
            })
        };
        gil.acquire(t).unwrap();
        // SAFETY: as above.
        data.with_mut(|v| unsafe { *v += 1 });
        gil.release(t, ReleaseReason::Final).unwrap();
        clock.join().unwrap();
        waiter.join().unwrap();
        // SAFETY: all threads joined.
        assert_eq!(data.with(|v| unsafe { *v }), 2);
        let c = gil.counters();
        assert!(c.lazy_takeovers <= 1);
        seen.fetch_add(c.lazy_takeovers as usize, SeqCst);
        assert!(!gil.is_locked());
    });
    assert_reached(takeovers.load(SeqCst), "had the monitor take a call over");
}

#[test]
fn starving_cpu_waiter_goes_next() {
    // Priority policy. C makes itself CPU-class (a forced release), then
    // waits behind H (I/O-class); I, another I/O-class thread, arrives at
    // any point. Once C reaches the starvation bound, the very next
    // acquisition is C's, whoever else waits. Under loom any duration has
    // passed once the clock ticked, so one tick is the bound: with the
    // monitor its look promotes C; without it, C promotes itself when the
    // tick ends its wait, and a second tick lets the model go on timing the
    // holder after the promotion.
    //
    // Both models (three threads and a clock; every look at the lock is
    // a dozen steps) are the largest of all: at the CI depth they run with
    // one preemption (about 2 s each), and at the depth asked for with
    // `LOOM_DEEP_STARVATION=1` (over ten minutes each at depth 2).
    let shallow = std::env::var_os("LOOM_DEEP_STARVATION").is_none();
    for (config, ticks) in [(monitored(), 1), (GilConfig::new(), 2)] {
        starvation_model(config.policy(gil_core::Policy::Priority), ticks, shallow);
    }
}

fn starvation_model(config: GilConfig, ticks: usize, shallow: bool) {
    let promoted = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = promoted.clone();
    let mut builder = loom::model::Builder::new();
    if shallow {
        builder.preemption_bound = Some(builder.preemption_bound.map_or(1, |b| b.min(1)));
    }
    builder.check(move || {
        let gil = Arc::new(Gil::new(config.clone()).unwrap());
        // The first acquisition made after a promotion: (token, promotions).
        let first_after = std::sync::Arc::new(StdMutex::new(None::<usize>));
        {
            let (g, first) = (gil.clone(), first_after.clone());
            gil.set_event_hook(Some(std::sync::Arc::new(move |e: &gil_core::Event| {
                // Acquisitions with waiters, and promotions, both happen
                // under the lock's mutex: the hook sees them in order.
                if e.kind == gil_core::EventKind::Acquired && g.counters().starvation_promotions > 0 {
                    first.lock().unwrap().get_or_insert(e.token.get());
                }
            })))
            .expect("not inside a hook");
        }
        let ready = std::sync::Arc::new(AtomicBool::new(false));
        let cpu = {
            let (gil, ready) = (gil.clone(), ready.clone());
            thread::spawn(move || {
                let c = tok(2);
                gil.acquire(c).unwrap();
                gil.release(c, ReleaseReason::Forced).unwrap(); // alone: returns at once
                ready.store(true, SeqCst);
                gil.acquire(c).unwrap();
                gil.release(c, ReleaseReason::Final).unwrap();
            })
        };
        while !ready.load(SeqCst) {
            thread::yield_now();
        }
        gil.acquire(tok(1)).unwrap();
        let io = {
            let gil = gil.clone();
            thread::spawn(move || {
                gil.acquire(tok(3)).unwrap();
                gil.release(tok(3), ReleaseReason::Final).unwrap();
            })
        };
        let clock = {
            let gil = gil.clone();
            thread::spawn(move || {
                for _ in 0..ticks {
                    gil.loom_tick(|| ());
                }
            })
        };
        thread::yield_now();
        gil.release(tok(1), ReleaseReason::Voluntary).unwrap();
        cpu.join().unwrap();
        io.join().unwrap();
        clock.join().unwrap();
        gil.set_event_hook(None).expect("not inside a hook"); // the hook holds the lock: break the cycle
        if gil.counters().starvation_promotions > 0 {
            assert_eq!(
                *first_after.lock().unwrap(),
                Some(2),
                "someone overtook the starving CPU-class waiter"
            );
            seen.fetch_add(1, SeqCst);
        }
        assert!(gil.is_idle());
    });
    assert_reached(promoted.load(SeqCst), "reached the starvation bound");
}

#[test]
fn priority_lazy_release_hands_over_to_an_io_waiter() {
    // Priority policy with lazy release. T holds; W (I/O-class) comes to
    // wait at any point; T releases voluntarily and takes the lock back; the
    // clock may tick. If W waits when T releases, the release is a real one
    // (no lazy release counted) and W is not kept waiting for a takeover;
    // otherwise it is lazy. Either way mutual exclusion holds and both get
    // the lock; some execution must hand over.
    for config in [GilConfig::new(), monitored()] {
        let handed = std::sync::Arc::new(AtomicUsize::new(0));
        let seen = handed.clone();
        let config = config.policy(gil_core::Policy::Priority).lazy_release_us(Some(50));
        loom::model(move || {
            let gil = Arc::new(Gil::new(config.clone()).unwrap());
            let data = Arc::new(UnsafeCell::new(0u32));
            let (t, w) = (tok(1), tok(2));
            gil.acquire(t).unwrap();
            let clock = spawn_clock(&gil);
            let waiter = {
                let (gil, data) = (gil.clone(), data.clone());
                thread::spawn(move || {
                    gil.acquire(w).unwrap();
                    // SAFETY: only touched while holding the GIL, which loom checks.
                    data.with_mut(|v| unsafe { *v += 1 });
                    gil.release(w, ReleaseReason::Final).unwrap();
                })
            };
            gil.release(t, ReleaseReason::Voluntary).unwrap();
            gil.acquire(t).unwrap();
            // SAFETY: as above.
            data.with_mut(|v| unsafe { *v += 1 });
            gil.release(t, ReleaseReason::Final).unwrap();
            clock.join().unwrap();
            waiter.join().unwrap();
            // SAFETY: both threads joined.
            assert_eq!(data.with(|v| unsafe { *v }), 2);
            let c = gil.counters();
            assert!(c.lazy_releases <= 1);
            if c.lazy_releases == 0 {
                seen.fetch_add(1, SeqCst);
                assert_eq!(c.lazy_takeovers, 0, "a real release left nothing to take over");
            }
            assert!(!gil.is_locked());
        });
        assert_reached(handed.load(SeqCst), "handed the lock to the I/O waiter");
    }
}

#[test]
fn a_preempted_cpu_thread_gets_the_lock_back_before_other_cpu_waiters() {
    // Priority policy, no clock (no turn can run out). B makes itself
    // CPU-class (a forced release), then waits behind A; A lets go (forced)
    // and B takes the lock as the CPU class's turn, A coming back to wait
    // as CPU-class too. Once A waits, I, a fresh (I/O-class) thread,
    // preempts B and lets go. Whatever the interleaving, the lock goes back
    // to B, whose turn it still is, not to A, which waited longer: the
    // acquisition after I's is B's. Plain and monitored.
    for config in [GilConfig::new(), monitored()] {
        turn_model(config.policy(gil_core::Policy::Priority));
    }
}

/// A step one thread waits for and another signals: a flag and a loom
/// `Notify` (whose wait may return early, so it waits until the flag).
#[derive(Default)]
struct Signal {
    done: AtomicBool,
    notify: loom::sync::Notify,
}

impl Signal {
    fn signal(&self) {
        self.done.store(true, SeqCst);
        self.notify.notify();
    }
    fn wait(&self) {
        while !self.done.load(SeqCst) {
            self.notify.wait();
        }
    }
}

fn turn_model(config: GilConfig) {
    loom::model(move || {
        let gil = Arc::new(Gil::new(config.clone()).unwrap());
        let (a, b, i) = (tok(1), tok(2), tok(3));
        // Acquisitions in order (the hook sees them under the lock's mutex),
        // and the steps the threads wait for: blocking, not spinning, so
        // that loom has few interleavings to explore.
        let taken = std::sync::Arc::new(StdMutex::new(Vec::<usize>::new()));
        let [ready, go, a_waits, b_waits] = [(); 4].map(|_| Arc::new(Signal::default()));
        {
            let (taken, a_waits, b_waits) = (taken.clone(), a_waits.clone(), b_waits.clone());
            gil.set_event_hook(Some(std::sync::Arc::new(move |e: &gil_core::Event| match e.kind {
                gil_core::EventKind::Acquired => taken.lock().unwrap().push(e.token.get()),
                gil_core::EventKind::WaitStart if e.token.get() == 1 => a_waits.signal(),
                gil_core::EventKind::WaitStart if e.token.get() == 2 => b_waits.signal(),
                _ => {}
            })))
            .expect("not inside a hook");
        }
        let cpu_b = {
            let (gil, ready, go) = (gil.clone(), ready.clone(), go.clone());
            thread::spawn(move || {
                gil.acquire(b).unwrap();
                gil.release(b, ReleaseReason::Forced).unwrap(); // alone: returns at once
                ready.signal();
                go.wait();
                gil.acquire(b).unwrap(); // waits behind A, CPU-class
                while !gil.handle_drop_request(b).unwrap() {
                    thread::yield_now(); // until I asks: then let go and come back
                }
                gil.release(b, ReleaseReason::Final).unwrap();
            })
        };
        ready.wait();
        gil.acquire(a).unwrap();
        go.signal();
        b_waits.wait();
        gil.release(a, ReleaseReason::Forced).unwrap(); // B takes; A is CPU-class now
        let io = {
            let (gil, a_waits) = (gil.clone(), a_waits.clone());
            thread::spawn(move || {
                a_waits.wait();
                gil.acquire(i).unwrap();
                gil.release(i, ReleaseReason::Final).unwrap();
            })
        };
        gil.acquire(a).unwrap();
        gil.release(a, ReleaseReason::Final).unwrap();
        cpu_b.join().unwrap();
        io.join().unwrap();
        gil.set_event_hook(None).expect("not inside a hook"); // the hook holds the lock: break the cycle
        let taken = taken.lock().unwrap().clone();
        let after_io = taken
            .iter()
            .position(|&t| t == 3)
            .and_then(|at| taken.get(at + 1).copied());
        assert_eq!(after_io, Some(2), "another CPU-class waiter took B's turn: {taken:?}");
        assert!(gil.is_idle());
    });
}
