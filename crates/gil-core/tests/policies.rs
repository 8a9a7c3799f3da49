//! The priority policy and lazy release, with real threads.
#![cfg(not(gil_loom))]

#[cfg(target_os = "linux")]
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use gil_core::{Gil, GilConfig, GilError, Key, Policy, ReleaseReason, PRESETS};

mod common;
use common::{count_under_lock, tok};

/// These tests judge scheduling by timing: run one at a time, so that the
/// threads of one (several spin) do not take the CPUs another's scenario
/// needs on a 2-CPU machine.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Holds the lock for `d` or until asked to drop, and says how to release:
/// forced if asked, voluntary otherwise (an I/O-bound thread's turn).
fn hold(gil: &Gil, d: Duration) -> ReleaseReason {
    let t = Instant::now();
    while t.elapsed() < d && !gil.drop_requested() {
        std::hint::spin_loop();
    }
    if gil.drop_requested() {
        ReleaseReason::Forced
    } else {
        ReleaseReason::Voluntary
    }
}

/// `n` I/O-class threads (tokens 10..) that take the lock in turns of
/// 200 µs until `stop`, each pausing `pause` between turns (a blocking
/// call) if given.
fn io_flood(gil: &Arc<Gil>, stop: &Arc<AtomicBool>, n: usize, pause: Option<Duration>) -> Vec<thread::JoinHandle<()>> {
    (0..n)
        .map(|i| {
            let (gil, stop) = (gil.clone(), stop.clone());
            thread::spawn(move || {
                let me = tok(10 + i);
                while !stop.load(Ordering::Relaxed) {
                    gil.acquire(me).unwrap();
                    let reason = hold(&gil, Duration::from_micros(200));
                    gil.release(me, reason).unwrap();
                    if let Some(pause) = pause {
                        thread::sleep(pause);
                    }
                }
            })
        })
        .collect()
}

#[test]
fn every_preset_keeps_mutual_exclusion() {
    let _serial = one_at_a_time();
    // Each preset as it is, and with a bounded spin.
    for (name, spin_us) in PRESETS.iter().flat_map(|&n| [(n, 0), (n, 20)]) {
        const THREADS: usize = 6;
        const ROUNDS: u64 = 5_000;
        let config = GilConfig::preset(name).unwrap().switch_interval_us(50).spin_us(spin_us);
        let gil = Arc::new(Gil::new(config).unwrap());
        let reason = |gil: &Gil, round: u64| {
            if gil.drop_requested() || round.is_multiple_of(7) {
                ReleaseReason::Forced
            } else {
                ReleaseReason::Voluntary
            }
        };
        let between = |round: u64| {
            if round.is_multiple_of(97) {
                thread::sleep(Duration::from_micros(100)); // a "blocking call"
            }
        };
        // A thread ends with a final release (a voluntary last release
        // would leave a lazy lock reserved for its call).
        let total = count_under_lock(&gil, THREADS, ROUNDS, reason, between, true);
        assert_eq!(total, THREADS as u64 * ROUNDS, "preset {name}, spin {spin_us}");
        assert!(gil.is_idle(), "preset {name}, spin {spin_us}: lock left held");
    }
}

#[test]
fn presets_are_what_they_say() {
    let _serial = one_at_a_time();
    let g = |n| Gil::new(GilConfig::preset(n).unwrap()).unwrap();
    assert_eq!(
        (g("classic").policy(), g("classic").lazy_release_us()),
        (Policy::Classic, None)
    );
    assert_eq!(g("priority").policy(), Policy::Priority);
    assert_eq!(g("lazy").lazy_release_us(), Some(gil_core::DEFAULT_LAZY_RELEASE_US));
    assert_eq!(g("priority-lazy").policy(), Policy::Priority);
    assert!(!g("priority-lazy").uses_monitor());
    assert!(g("monitor").uses_monitor());
    assert_eq!(g("monitor").policy(), Policy::Classic);
    assert_eq!(
        (g("priority-monitor").policy(), g("priority-monitor").uses_monitor()),
        (Policy::Priority, true)
    );
    let plm = g("priority-lazy-monitor");
    assert_eq!(
        (plm.policy(), plm.lazy_release_us(), plm.uses_monitor()),
        (Policy::Priority, Some(gil_core::DEFAULT_LAZY_RELEASE_US), true)
    );
    assert!(GilConfig::preset("fifo-please").is_err());
    assert_eq!(Gil::new(GilConfig::new().spin_us(50)).unwrap().spin_us(), 50);
    assert_eq!(
        Gil::new(GilConfig::new().spin_us(gil_core::MAX_SPIN_US + 1)).err(),
        Some(GilError::InvalidSetting {
            key: Key::SpinUs,
            value: gil_core::MAX_SPIN_US + 1
        })
    );
    assert_eq!(
        Gil::new(GilConfig::new().lazy_release_us(Some(u64::MAX))).err(),
        Some(GilError::InvalidSetting {
            key: Key::LazyUs,
            value: u64::MAX
        })
    );
    assert_eq!(Gil::new(GilConfig::new().laps(3)).unwrap().laps(), 3);
    assert_eq!(Gil::new(GilConfig::new()).unwrap().laps(), 0, "no bound by default");
    assert_eq!(
        Gil::new(GilConfig::new().laps(gil_core::MAX_LAPS + 1)).err(),
        Some(GilError::InvalidSetting {
            key: Key::Laps,
            value: u64::from(gil_core::MAX_LAPS) + 1
        })
    );
}

/// With a bound on laps, a thread that lets go around short calls and
/// asks again at once takes the lock at most that many times while another
/// thread waits in line, then waits its turn; the switch interval is a
/// minute, so the one-interval hand-off bound never serves the waiter.
#[test]
fn a_thread_retaking_the_lock_laps_a_waiter_at_most_its_bound() {
    let _serial = one_at_a_time();
    for preset in ["priority", "priority-monitor", "monitor"] {
        let laps = gil_core::SERVER_LAPS;
        let config = GilConfig::preset(preset)
            .unwrap()
            .switch_interval_us(60_000_000)
            .laps(laps);
        let gil = Arc::new(Gil::new(config).unwrap());
        let (h, w) = (tok(1), tok(2));
        let waiting = Arc::new(AtomicBool::new(false));
        let seen = waiting.clone();
        gil.set_event_hook(Some(Arc::new(move |e: &gil_core::Event| {
            if e.kind == gil_core::EventKind::WaitStart && e.token == tok(2) {
                seen.store(true, Ordering::SeqCst);
            }
        })))
        .unwrap();
        gil.acquire(h).unwrap();
        let retakes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let waiter = {
            let (gil, retakes) = (gil.clone(), retakes.clone());
            thread::spawn(move || {
                gil.acquire(w).unwrap();
                let before = retakes.load(Ordering::SeqCst);
                gil.release(w, ReleaseReason::Final).unwrap();
                before
            })
        };
        while !waiting.load(Ordering::SeqCst) {
            thread::yield_now();
        }
        for _ in 0..1000 {
            gil.release(h, ReleaseReason::Voluntary).unwrap();
            gil.acquire(h).unwrap();
            retakes.fetch_add(1, Ordering::SeqCst);
        }
        gil.release(h, ReleaseReason::Final).unwrap();
        let before = waiter.join().unwrap();
        assert!(
            before <= laps as usize,
            "{preset}: the holder took the lock {before} times past a waiter (bound {laps})"
        );
        gil.set_event_hook(None).unwrap();
    }
}

/// With a 60 s interval, a classic waiter would wait a minute before asking;
/// an I/O-class waiter under the priority policy asks a CPU-class holder at
/// once, so this finishes (and counts one preemption), with or without the
/// monitor.
#[test]
fn priority_io_waiter_preempts_a_cpu_holder_at_once() {
    let _serial = one_at_a_time();
    for preset in ["priority", "priority-monitor"] {
        priority_preempts(GilConfig::preset(preset).unwrap());
    }
}

fn priority_preempts(config: GilConfig) {
    let gil = Arc::new(Gil::new(config.switch_interval_us(60_000_000)).unwrap());
    let (cpu, io) = (tok(1), tok(2));
    gil.acquire(cpu).unwrap();
    gil.release(cpu, ReleaseReason::Forced).unwrap();
    gil.acquire(cpu).unwrap(); // CPU-class now
    let waiter = {
        let gil = gil.clone();
        thread::spawn(move || {
            gil.acquire(io).unwrap();
            gil.release(io, ReleaseReason::Voluntary).unwrap();
        })
    };
    while !gil.drop_requested() {
        std::hint::spin_loop();
    }
    gil.release(cpu, ReleaseReason::Forced).unwrap();
    assert_eq!(gil.last_holder(), Some(io));
    waiter.join().unwrap();
    assert_eq!(gil.counters().preemptions, 1);
}

/// With a spin limit, a CPU-class thread displaced by an I/O-class one
/// spins while the I/O thread holds the lock and takes it back when that
/// thread lets go, without sleeping (`Counters::cpu_spin_takes`); without a
/// limit it sleeps. Each of 50 rounds is a chance: in a round where the OS
/// keeps the CPU thread off a CPU for the whole limit it sleeps instead, so
/// at least one must spin. None does on a one-CPU machine, where no thread
/// spins.
#[test]
fn priority_a_displaced_cpu_thread_spins_for_the_io_holder() {
    let _serial = one_at_a_time();
    let cpus = thread::available_parallelism().map_or(2, |n| n.get());
    for preset in ["priority", "priority-monitor"] {
        for spin_us in [0, gil_core::MAX_SPIN_US] {
            let (takes, _) = displaced_rounds(GilConfig::preset(preset).unwrap().spin_us(spin_us), 50, false);
            if spin_us > 0 && cpus > 1 {
                assert!(
                    takes > 0,
                    "{preset}, spin_us={spin_us}: the CPU thread never spun for the I/O holder"
                );
            } else {
                assert_eq!(takes, 0, "{preset}, spin_us={spin_us}, {cpus} CPUs: a CPU thread spun");
            }
        }
    }
}

/// `rounds` times, an I/O-class thread preempts a CPU-class holder, and
/// lets go once the CPU thread, having answered, waits for the lock again
/// (and 200 µs more: its work under the lock). With `quick_call`, it first
/// lets go around a call that returns at once (2 µs) and takes the lock
/// back. The lock's `cpu_spin_takes` after, and in how many rounds the I/O
/// thread came back from the quick call with nobody having taken the lock
/// in between.
fn displaced_rounds(config: GilConfig, rounds: usize, quick_call: bool) -> (u64, usize) {
    let gil = Arc::new(Gil::new(config.switch_interval_us(60_000_000)).unwrap());
    let (cpu, io) = (tok(1), tok(2));
    let cpu_waits = Arc::new(AtomicU64::new(0));
    let counted = cpu_waits.clone();
    let hook: gil_core::EventHook = Arc::new(move |e: &gil_core::Event| {
        if e.token == cpu {
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    gil.add_event_hook(hook, gil_core::EventMask::WAIT_START).unwrap();
    gil.acquire(cpu).unwrap();
    gil.release(cpu, ReleaseReason::Forced).unwrap(); // alone: CPU-class from now on
    gil.acquire(cpu).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let cpu_thread = {
        let (gil, stop) = (gil.clone(), stop.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if gil.drop_requested() {
                    gil.release(cpu, ReleaseReason::Forced).unwrap();
                    gil.acquire(cpu).unwrap();
                }
                std::hint::spin_loop();
            }
            gil.release(cpu, ReleaseReason::Final).unwrap();
        })
    };
    let mut came_back = 0;
    for _ in 0..rounds {
        let waits = cpu_waits.load(Ordering::SeqCst);
        gil.acquire(io).unwrap(); // preempts the CPU thread at once
        while cpu_waits.load(Ordering::SeqCst) == waits {
            thread::yield_now();
        }
        busy(200);
        if quick_call {
            let switches = gil.switch_number();
            gil.release(io, ReleaseReason::Voluntary).unwrap();
            busy(2);
            gil.acquire(io).unwrap();
            came_back += usize::from(gil.switch_number() == switches);
        }
        gil.release(io, ReleaseReason::Voluntary).unwrap();
        while gil.holder() != Some(cpu) {
            thread::yield_now();
        }
    }
    stop.store(true, Ordering::SeqCst);
    cpu_thread.join().unwrap();
    (gil.counters().cpu_spin_takes, came_back)
}

/// A CPU-class thread spinning for an I/O-class holder lets it come back
/// from a call that returns at once: it takes the lock only once the lock
/// has stayed free for a while (`SPIN_GRACE`), so an event loop's quick
/// sends are not hand-offs. Taking it the moment it came free, the CPU
/// thread won nearly every such race, and the I/O thread had to ask for
/// the lock back. At least half of 50 rounds must see the I/O thread back
/// first (a round is lost only if the OS deschedules it for the grace).
#[test]
fn priority_a_cpu_thread_spinning_for_an_io_holder_lets_it_back_from_a_quick_call() {
    let _serial = one_at_a_time();
    for preset in ["priority", "priority-monitor"] {
        let config = GilConfig::preset(preset).unwrap().spin_us(gil_core::MAX_SPIN_US);
        let (_, came_back) = displaced_rounds(config, 50, true);
        assert!(
            came_back >= 25,
            "{preset}: the spinning CPU thread took the lock during the I/O thread's quick call \
             in {} of 50 rounds",
            50 - came_back
        );
    }
}

/// A CPU-class thread leaves a lock that an I/O-class thread let go of
/// (around a call) free for the grace (`SPIN_GRACE`, 20 µs) before it
/// takes it, even when it comes back for the lock while the lock is
/// already free: it goes through the waiting room instead of taking the
/// lock on the fast path. So an I/O thread whose call returns at once (a
/// send, a read of data already there) gets the lock back without a
/// hand-off, where the fast path gave it to the CPU thread, and the I/O
/// thread had to take it back after. Each of 50 rounds, the I/O thread
/// lets go and stays away; the CPU thread's `acquire` must take at least
/// the grace. No thread spins on a one-CPU machine.
#[test]
fn priority_a_cpu_thread_leaves_a_lock_an_io_thread_let_go_of_free_for_a_grace() {
    const SPIN_GRACE: Duration = Duration::from_micros(20);
    let _serial = one_at_a_time();
    if thread::available_parallelism().map_or(2, |n| n.get()) < 2 {
        return;
    }
    for preset in ["priority", "priority-monitor"] {
        let config = GilConfig::preset(preset).unwrap().spin_us(gil_core::MAX_SPIN_US);
        let gil = Arc::new(Gil::new(config.switch_interval_us(60_000_000)).unwrap());
        let (cpu, io) = (tok(1), tok(2));
        // Round r: the I/O thread sets `go` to r once it has let go; the
        // CPU thread sets `done` to r once it has had the lock (0: it is
        // CPU-class, on its own thread, which remembers the class).
        let [go, done] = [(); 2].map(|()| Arc::new(AtomicU64::new(u64::MAX)));
        let cpu_thread = {
            let (gil, go, done) = (gil.clone(), go.clone(), done.clone());
            thread::spawn(move || {
                gil.acquire(cpu).unwrap();
                gil.release(cpu, ReleaseReason::Forced).unwrap(); // alone: CPU-class from now on
                done.store(0, Ordering::SeqCst);
                let mut quickest = Duration::MAX;
                for round in 1..=50 {
                    while go.load(Ordering::SeqCst) != round {
                        thread::yield_now();
                    }
                    let t = Instant::now();
                    gil.acquire(cpu).unwrap();
                    quickest = quickest.min(t.elapsed());
                    gil.release(cpu, ReleaseReason::Forced).unwrap(); // stays CPU-class
                    done.store(round, Ordering::SeqCst);
                }
                quickest
            })
        };
        while done.load(Ordering::SeqCst) != 0 {
            thread::yield_now();
        }
        for round in 1..=50 {
            gil.acquire(io).unwrap();
            gil.release(io, ReleaseReason::Voluntary).unwrap();
            go.store(round, Ordering::SeqCst);
            while done.load(Ordering::SeqCst) != round {
                thread::yield_now();
            }
        }
        let quickest = cpu_thread.join().unwrap();
        assert!(
            quickest >= SPIN_GRACE,
            "{preset}: the CPU thread took a lock the I/O thread had just let go of after {quickest:?}"
        );
    }
}

/// A clock of the calling thread (`CLOCK_THREAD_CPUTIME_ID`: its CPU time,
/// which does not run while it sleeps or waits for a CPU) or of the
/// machine, in nanoseconds.
#[cfg(target_os = "linux")]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    // SAFETY: a zeroed timespec is a valid value for clock_gettime to fill.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `ts` is a valid, writable timespec.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(r, 0, "clock_gettime({clock}) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's involuntary context switches so far (the OS took
/// its CPU while it could run).
#[cfg(target_os = "linux")]
fn involuntary_switches() -> i64 {
    // SAFETY: a zeroed rusage is a valid value for getrusage to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    assert_eq!(r, 0, "getrusage(RUSAGE_THREAD) failed");
    usage.ru_nivcsw
}

/// Spins for `us` microseconds.
fn busy(us: u64) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_micros(us) {
        std::hint::spin_loop();
    }
}

/// What one round of an I/O-class thread's quick calls did to a CPU-class
/// waiter (`watch_quick_calls`).
#[cfg(target_os = "linux")]
struct Watched {
    /// The waiter had the lock before the I/O thread's last release.
    took_early: bool,
    /// The waiter's CPU time in its `acquire`.
    cpu_time: Duration,
    /// With `count_io_waits`, how many of the I/O thread's takes during its
    /// quick calls waited in the room (its `WAIT_START` events); else 0.
    io_waits: usize,
    /// The round did not go as meant, and says nothing: the OS took
    /// either thread's CPU (the I/O thread's holds and calls grew, or the
    /// waiter's watch, which keeps the time, passed while it could not
    /// look), or the calls began late.
    preempted: bool,
    /// One of the I/O thread's steps before the waiter's take grew past
    /// what the round means to show ([`held_up`]): a shared machine's host
    /// can take a vCPU for tens of microseconds unseen by the thread's own
    /// counters (seen here in about a third of 1 ms rounds). A waiter may
    /// rightly stop watching then; a round so held up in which it took
    /// the lock early says nothing.
    held_up: bool,
}

/// A CPU-class thread waits for the lock (spin limit `limit_us`) while an
/// I/O-class thread holds it; 100 µs after it began to wait, the I/O
/// thread makes quick calls (letting go for 2 µs, well within the 20 µs
/// grace), holding the lock `hold_us` after each, until `calls_us` after
/// the wait began (at least one call), then lets go for good. With
/// `count_io_waits`, counts the I/O thread's waits in the room meanwhile.
#[cfg(target_os = "linux")]
fn watch_quick_calls(limit_us: u64, calls_us: u64, hold_us: u64, count_io_waits: bool) -> Watched {
    let config = GilConfig::preset("priority").unwrap().spin_us(limit_us);
    let gil = Arc::new(Gil::new(config.switch_interval_us(60_000_000)).unwrap());
    let (cpu, io) = (tok(1), tok(2));
    let [ready, io_done] = [(); 2].map(|()| Arc::new(AtomicBool::new(false)));
    let cpu_thread = {
        let (gil, ready, io_done) = (gil.clone(), ready.clone(), io_done.clone());
        thread::spawn(move || {
            gil.acquire(cpu).unwrap();
            gil.release(cpu, ReleaseReason::Forced).unwrap(); // alone: CPU-class from now on
            ready.store(true, Ordering::SeqCst);
            while gil.holder() != Some(io) {
                thread::yield_now();
            }
            let (before, switches) = (clock_ns(libc::CLOCK_THREAD_CPUTIME_ID), involuntary_switches());
            gil.acquire(cpu).unwrap();
            let took_at = Instant::now();
            let cpu_time = Duration::from_nanos(clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) - before);
            let preempted = involuntary_switches() != switches;
            let took_early = !io_done.load(Ordering::SeqCst);
            gil.release(cpu, ReleaseReason::Final).unwrap();
            (took_early, took_at, cpu_time, preempted)
        })
    };
    while !ready.load(Ordering::SeqCst) {
        thread::yield_now();
    }
    // When the waiter began to wait, which is when its watch begins, and
    // how often the I/O thread waited.
    let waiting = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let io_waits = Arc::new(AtomicUsize::new(0));
    let (seen, io_waited) = (waiting.clone(), io_waits.clone());
    let hook: gil_core::EventHook = Arc::new(move |e: &gil_core::Event| {
        if e.token == cpu {
            *seen.lock().unwrap() = Some(Instant::now());
        } else {
            io_waited.fetch_add(1, Ordering::SeqCst);
        }
    });
    let hook = gil.add_event_hook(hook, gil_core::EventMask::WAIT_START).unwrap();
    gil.acquire(io).unwrap();
    let waited = loop {
        if let Some(t) = *waiting.lock().unwrap() {
            break t;
        }
        std::hint::spin_loop();
    };
    let switches = involuntary_switches();
    // The hook makes every take and release report itself, which lengthens
    // the I/O thread's holds: it stays on only to count its waits.
    let hook = if count_io_waits {
        Some(hook)
    } else {
        gil.remove_event_hook(hook).unwrap();
        None
    };
    while waited.elapsed() < Duration::from_micros(100) {
        std::hint::spin_loop(); // the waiter is watching by now
    }
    // The waiter's watch keeps the time from its start: calls that begin
    // much later (near a 300 µs limit) are not the round this was meant
    // to be.
    let late = waited.elapsed() > Duration::from_micros(200);
    let mut io_preempted;
    // When each release began and the take after it returned, in turn.
    let mut marks = Vec::with_capacity(4096);
    loop {
        marks.push(Instant::now());
        gil.release(io, ReleaseReason::Voluntary).unwrap();
        busy(2);
        gil.acquire(io).unwrap();
        marks.push(Instant::now());
        // The last hold does not count: the waiter has stopped watching or
        // watches on through it as asked.
        io_preempted = involuntary_switches() != switches;
        busy(hold_us);
        if waited.elapsed() >= Duration::from_micros(calls_us) {
            break;
        }
    }
    if let Some(hook) = hook {
        gil.remove_event_hook(hook).unwrap();
    }
    io_done.store(true, Ordering::SeqCst);
    gil.release(io, ReleaseReason::Final).unwrap();
    let (took_early, took_at, cpu_time, cpu_preempted) = cpu_thread.join().unwrap();
    Watched {
        took_early,
        cpu_time,
        io_waits: io_waits.load(Ordering::SeqCst),
        preempted: late || io_preempted || cpu_preempted,
        held_up: held_up(&marks, hold_us, took_at),
    }
}

/// Whether one of the I/O thread's steps in `marks` (when each release
/// began, then when the take after it returned, in turn) that began before
/// the waiter's take at `took_at` lasted, up to that take, longer than the
/// round means: a call (2 µs) past half the spin's grace (10 µs of 20),
/// or a hold between two calls (`hold_us`) by more than 4 µs, which
/// brings it near the 10 µs a watcher allows one (`WATCH_HOLD`). The last
/// hold, after the calls, is the I/O thread's own and does not count. A
/// waiter that takes the lock in a quick call as its own doing (asleep,
/// woken by a release) makes no step long: it takes within a step.
#[cfg(target_os = "linux")]
fn held_up(marks: &[Instant], hold_us: u64, took_at: Instant) -> bool {
    let call_bound = Duration::from_micros(10);
    let hold_bound = Duration::from_micros(hold_us + 4);
    marks.windows(2).enumerate().any(|(i, step)| {
        let (from, to) = (step[0], step[1].min(took_at));
        let bound = if i % 2 == 0 { call_bound } else { hold_bound };
        from < took_at && to.duration_since(from) > bound
    })
}

/// A CPU-class thread waiting while an I/O-class thread goes in and out of
/// quick calls, holding the lock briefly between them, keeps watching past
/// its spin limit (for at most twice the limit in all) and takes the lock
/// only once the I/O thread lets go for good: asleep after the limit, it
/// is woken by one of the quick calls' releases and takes the lock in the
/// middle of that call. With a 300 µs limit, the calls go on until 510
/// µs into the watch, within its 600 µs bound. A round in which the OS
/// took either thread's CPU, or one held up unseen in which the waiter
/// took the lock early, says nothing and is run again; three other
/// rounds where the waiter took the lock early fail. (Here, with the
/// watch ended at the limit, 50 of 60 rounds fail, none held up.)
#[cfg(target_os = "linux")]
#[test]
fn priority_a_cpu_thread_watches_an_io_threads_quick_calls_without_sleeping() {
    assert_watched_through_quick_calls(1);
}

/// As above with no hold between the quick calls: the I/O thread takes
/// the lock back and lets it go at once, mostly between two of the
/// waiter's looks, so that the waiter finds the lock free look after look.
/// Each take still ends a free lock's grace (the waiter counts the I/O
/// thread's takes), and the waiter takes the lock only once the calls end.
#[cfg(target_os = "linux")]
#[test]
fn priority_a_cpu_thread_counts_the_io_threads_takes_it_did_not_see() {
    assert_watched_through_quick_calls(0);
}

/// The two tests above: quick calls with holds of `hold_us` between them
/// for 510 µs of a 300 µs spin limit's watch, in rounds the OS did not
/// preempt, fail if the waiter took the lock early in three not held up.
#[cfg(target_os = "linux")]
fn assert_watched_through_quick_calls(hold_us: u64) {
    let _serial = one_at_a_time();
    if thread::available_parallelism().map_or(2, |n| n.get()) < 2 {
        return;
    }
    let mut early = 0;
    for _ in 0..20 {
        let w = watch_quick_calls(300, 510, hold_us, false);
        if w.preempted || (w.took_early && w.held_up) {
            continue;
        }
        if !w.took_early {
            return;
        }
        early += 1;
        assert!(
            early < 3,
            "the CPU thread took the lock during the I/O thread's quick calls in {early} unpreempted rounds"
        );
    }
    eprintln!(
        "{early} of 20 rounds took the lock early, the others were preempted or held up: nothing shown either way"
    );
}

/// While a CPU-class thread, alone in the waiting room, watches an
/// I/O-class thread's quick calls, the I/O thread takes the lock back
/// after each call without waiting in the room: the watcher, which needs
/// no wake-up, steps out of the lock word, so the takes and releases stay
/// on the fast path (in the room, each would take the mutex). Checked on
/// rounds the OS did not preempt or hold up and in which the waiter
/// watched on.
#[cfg(target_os = "linux")]
#[test]
fn priority_an_io_threads_quick_calls_stay_on_the_fast_path_while_a_cpu_thread_watches() {
    let _serial = one_at_a_time();
    if thread::available_parallelism().map_or(2, |n| n.get()) < 2 {
        return;
    }
    // The I/O thread must wait in at most two rounds, as it would in
    // every one with a waiter that never stepped out.
    let mut waited = 0;
    for _ in 0..20 {
        let w = watch_quick_calls(300, 510, 1, true);
        if w.preempted || w.held_up || w.took_early {
            continue;
        }
        if w.io_waits == 0 {
            return;
        }
        waited += 1;
        assert!(
            waited < 3,
            "the I/O thread waited in the room during its quick calls in {waited} unpreempted rounds"
        );
    }
    eprintln!("no round unpreempted with the waiter watching on: nothing shown either way");
}

/// A CPU-class thread watching an I/O-class thread stops watching once
/// that thread, back from a quick call, holds the lock for longer than a
/// step between two calls (10 µs, `WATCH_HOLD`): it sleeps through the
/// I/O thread's own work instead of spinning through it. The I/O thread
/// makes one quick call, then holds the lock for 3 ms with a spin limit of
/// 10 ms; the waiter's CPU time in its `acquire` must stay under 1 ms
/// (about 3 ms when it watches throughout). The least of ten rounds
/// counts, leaving out those in which the OS took either thread's CPU
/// before the hold (the waiter watches on while the I/O thread waits for
/// a CPU to make its call).
#[cfg(target_os = "linux")]
#[test]
fn priority_a_cpu_thread_sleeps_through_an_io_threads_long_hold() {
    let _serial = one_at_a_time();
    if thread::available_parallelism().map_or(2, |n| n.get()) < 2 {
        return;
    }
    let rounds: Vec<Watched> = (0..10).map(|_| watch_quick_calls(10_000, 0, 3_000, false)).collect();
    let Some(least) = rounds.iter().filter(|w| !w.preempted).map(|w| w.cpu_time).min() else {
        eprintln!("every round preempted: nothing shown either way");
        return;
    };
    assert!(
        least < Duration::from_millis(1),
        "the CPU thread spun {least:?} through a 3 ms hold of the I/O thread"
    );
}

/// A thread that had to be asked to drop is CPU-class even if it answers
/// with a voluntary release (a blocking call made after the request): back
/// from its call it waits an interval like any CPU-class thread instead of
/// preempting the thread it handed the lock to.
#[test]
fn priority_a_voluntary_release_answering_a_request_makes_a_cpu_class_thread() {
    let _serial = one_at_a_time();
    for preset in ["priority", "priority-lazy", "priority-monitor"] {
        let gil = Arc::new(Gil::new(GilConfig::preset(preset).unwrap().switch_interval_us(2_000)).unwrap());
        let (io, cpu) = (tok(1), tok(2));
        let (cpu_class, io_holds) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let other = {
            let (gil, cpu_class, io_holds) = (gil.clone(), cpu_class.clone(), io_holds.clone());
            thread::spawn(move || {
                gil.acquire(cpu).unwrap();
                gil.release(cpu, ReleaseReason::Forced).unwrap(); // alone: CPU-class at once
                cpu_class.store(true, Ordering::SeqCst);
                while !io_holds.load(Ordering::SeqCst) {
                    thread::yield_now();
                }
                gil.acquire(cpu).unwrap(); // behind `io`: asks after an interval
                while !gil.drop_requested() {
                    std::hint::spin_loop();
                }
                gil.release(cpu, ReleaseReason::Final).unwrap();
            })
        };
        while !cpu_class.load(Ordering::SeqCst) {
            thread::yield_now();
        }
        gil.acquire(io).unwrap(); // I/O-class: it never released yet
        io_holds.store(true, Ordering::SeqCst);
        while !gil.drop_requested() {
            std::hint::spin_loop();
        }
        let before = gil.counters();
        gil.release(io, ReleaseReason::Voluntary).unwrap(); // answers the request
        gil.acquire(io).unwrap(); // `cpu` holds it by now: wait, or preempt?
        other.join().unwrap();
        let after = gil.counters();
        assert_eq!(
            after.preemptions, before.preemptions,
            "{preset}: the thread that was asked to drop preempted its successor"
        );
        gil.release(io, ReleaseReason::Final).unwrap();
    }
}

/// Classic does not preempt: the same set-up raises no request (within a
/// second, against a 60 s interval).
#[test]
fn classic_does_not_preempt() {
    let _serial = one_at_a_time();
    let gil = Arc::new(Gil::new(GilConfig::new().switch_interval_us(60_000_000)).unwrap());
    let (cpu, io) = (tok(1), tok(2));
    gil.acquire(cpu).unwrap();
    gil.release(cpu, ReleaseReason::Forced).unwrap();
    gil.acquire(cpu).unwrap();
    let waiter = {
        let gil = gil.clone();
        thread::spawn(move || {
            gil.acquire(io).unwrap();
            gil.release(io, ReleaseReason::Final).unwrap();
        })
    };
    thread::sleep(Duration::from_millis(200));
    assert!(!gil.drop_requested());
    gil.release(cpu, ReleaseReason::Voluntary).unwrap();
    waiter.join().unwrap();
    assert_eq!(gil.counters().preemptions, 0);
}

/// Three I/O-class threads keep the lock busy, each re-acquiring right after
/// releasing; a CPU-class waiter still gets it within the starvation bound
/// (STARVATION_INTERVALS) plus the holders' response time. The assertion allows 40x
/// the bound: a fairness property, not a speed claim.
#[test]
fn priority_cpu_waiter_is_not_starved_by_io_threads() {
    let _serial = one_at_a_time();
    for preset in ["priority", "priority-monitor"] {
        cpu_waiter_not_starved(preset);
    }
}

fn cpu_waiter_not_starved(preset: &str) {
    const INTERVAL_US: u64 = 1_000;
    let gil = Arc::new(Gil::new(GilConfig::preset(preset).unwrap().switch_interval_us(INTERVAL_US)).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let flood = io_flood(&gil, &stop, 3, None);
    let cpu = tok(1);
    let bound = Duration::from_micros(INTERVAL_US * gil_core::STARVATION_INTERVALS);
    let mut longest = Duration::ZERO;
    for _ in 0..10 {
        gil.acquire(cpu).unwrap();
        gil.release(cpu, ReleaseReason::Forced).unwrap(); // CPU-class from now on
        thread::sleep(Duration::from_millis(2));
        let t = Instant::now();
        gil.acquire(cpu).unwrap();
        longest = longest.max(t.elapsed());
        gil.release(cpu, ReleaseReason::Forced).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for h in flood {
        h.join().unwrap();
    }
    assert!(
        longest <= bound * 40,
        "{preset}: CPU-class waiter waited {longest:?} (bound {bound:?})"
    );
}

#[test]
fn lazy_release_uncontended_is_a_reclaim_without_a_switch() {
    let _serial = one_at_a_time();
    let gil = Gil::new(GilConfig::preset("lazy").unwrap()).unwrap();
    let me = tok(1);
    gil.acquire(me).unwrap();
    for _ in 0..100 {
        gil.release(me, ReleaseReason::Voluntary).unwrap();
        assert!(
            gil.is_reserved() && !gil.is_locked(),
            "the lock stays reserved, not held, during the call"
        );
        assert_eq!(gil.holder(), None, "nobody runs while in the call");
        assert_eq!(gil.release(me, ReleaseReason::Voluntary), Err(GilError::NotHolder));
        gil.acquire(me).unwrap();
    }
    let c = gil.counters();
    assert_eq!(
        (c.lazy_releases, c.acquisitions, c.switches, c.lazy_takeovers),
        (100, 101, 1, 0)
    );
    gil.release(me, ReleaseReason::Final).unwrap();
    assert!(gil.is_idle());
}

/// A call that blocks longer than the threshold: a waiter takes the lock
/// over while the caller is still in it, and the caller, back, waits its turn.
#[test]
fn lazy_release_long_call_is_taken_over() {
    let _serial = one_at_a_time();
    let gil = Arc::new(Gil::new(GilConfig::new().lazy_release_us(Some(100))).unwrap());
    let (caller, waiter) = (tok(1), tok(2));
    let in_call = Arc::new(AtomicBool::new(true));
    let took_over = Arc::new(AtomicBool::new(false));
    gil.acquire(caller).unwrap();
    gil.release(caller, ReleaseReason::Voluntary).unwrap();
    let w = {
        let (gil, in_call, took_over) = (gil.clone(), in_call.clone(), took_over.clone());
        thread::spawn(move || {
            gil.acquire(waiter).unwrap();
            let during_call = in_call.load(Ordering::SeqCst);
            took_over.store(true, Ordering::SeqCst);
            thread::sleep(Duration::from_millis(5));
            gil.release(waiter, ReleaseReason::Final).unwrap();
            during_call
        })
    };
    // The blocking call lasts until the waiter took over, or 10 s: a fixed
    // 100 ms was shorter than starting the waiter and the monitor thread
    // under Wine on a busy machine, and the caller, back first, then held
    // the lock while joining the waiter.
    let call = Instant::now();
    while !took_over.load(Ordering::SeqCst) && call.elapsed() < Duration::from_secs(10) {
        thread::sleep(Duration::from_millis(1));
    }
    in_call.store(false, Ordering::SeqCst);
    assert!(
        took_over.load(Ordering::SeqCst),
        "the waiter did not take over within 10 s of the call"
    );
    gil.acquire(caller).unwrap();
    assert!(w.join().unwrap(), "the waiter did not take over during the call");
    let c = gil.counters();
    assert_eq!(c.lazy_takeovers, 1);
    assert_eq!(gil.last_holder(), Some(caller));
    gil.release(caller, ReleaseReason::Final).unwrap();
}

/// A pending drop request turns a lazy release into a real one, with
/// CPython's forced-switch wait.
#[test]
fn lazy_release_with_a_pending_request_hands_over() {
    let _serial = one_at_a_time();
    let gil = Arc::new(
        Gil::new(
            GilConfig::new()
                .lazy_release_us(Some(1_000_000))
                .switch_interval_us(500),
        )
        .unwrap(),
    );
    let (a, b) = (tok(1), tok(2));
    gil.acquire(a).unwrap();
    let w = {
        let gil = gil.clone();
        thread::spawn(move || {
            gil.acquire(b).unwrap();
            gil.release(b, ReleaseReason::Final).unwrap();
        })
    };
    while !gil.drop_requested() {
        thread::yield_now();
    }
    gil.release(a, ReleaseReason::Voluntary).unwrap();
    assert!(matches!(gil.last_holder(), Some(t) if t == b) || gil.last_holder().is_none());
    w.join().unwrap();
    assert_eq!(
        gil.counters().lazy_takeovers,
        0,
        "handed over, not taken over after the threshold"
    );
}

/// A thread that makes system calls all the time (each lazily released and
/// reclaimed, each shorter than the threshold) must still be asked to drop
/// after about one interval, however much of its time it spends inside the
/// calls: the wake-ups those calls cause may not restart a waiter's
/// interval, and a holder found in a call is asked all the same (it answers
/// at its next release). With and without the monitor; calls of no length
/// and of 30 µs.
#[test]
fn lazy_release_frequent_calls_are_still_asked_to_drop() {
    let _serial = one_at_a_time();
    for preset in ["lazy", "priority-lazy", "priority-lazy-monitor"] {
        for call in [Duration::ZERO, Duration::from_micros(30)] {
            frequent_calls_are_asked(preset, call);
        }
    }
}

fn frequent_calls_are_asked(preset: &str, call: Duration) {
    let gil = Arc::new(
        Gil::new(
            GilConfig::preset(preset)
                .unwrap()
                .lazy_release_us(Some(1_000_000))
                .switch_interval_us(2_000),
        )
        .unwrap(),
    );
    let (busy, waiter) = (tok(1), tok(2));
    let got_it = Arc::new(AtomicBool::new(false));
    // A CPU-class waiter under the priority policy (its own forced release
    // first): an I/O-class one would get the lock handed over at once.
    let (ready, go) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let w = {
        let (gil, got_it, ready, go) = (gil.clone(), got_it.clone(), ready.clone(), go.clone());
        thread::spawn(move || {
            gil.acquire(waiter).unwrap();
            gil.release(waiter, ReleaseReason::Forced).unwrap();
            ready.store(true, Ordering::SeqCst);
            while !go.load(Ordering::SeqCst) {
                thread::yield_now();
            }
            gil.acquire(waiter).unwrap();
            got_it.store(true, Ordering::SeqCst);
            gil.release(waiter, ReleaseReason::Final).unwrap();
        })
    };
    while !ready.load(Ordering::SeqCst) {
        thread::yield_now();
    }
    gil.acquire(busy).unwrap();
    go.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !got_it.load(Ordering::SeqCst) && Instant::now() < deadline {
        gil.release(busy, ReleaseReason::Voluntary).unwrap(); // a call ...
        let t = Instant::now();
        while t.elapsed() < call {
            std::hint::spin_loop(); // ... of `call`, the lock reserved for us
        }
        gil.acquire(busy).unwrap();
        gil.handle_drop_request(busy).unwrap();
    }
    let asked = got_it.load(Ordering::SeqCst);
    gil.release(busy, ReleaseReason::Final).unwrap();
    w.join().unwrap();
    assert!(
        asked,
        "{preset}, calls of {call:?}: the waiter never got the lock from a thread making calls"
    );
    assert!(gil.counters().drop_requests >= 1);
    assert_eq!(gil.counters().lazy_takeovers, 0, "no call reached the 1 s threshold");
}

/// Six I/O-class threads pass the lock around in 1 ms holds while a
/// CPU-class thread waits; when it starves it asks the holder to drop. The
/// holder forced out that way keeps its I/O class: coming back, it preempts
/// the CPU-class thread at once instead of waiting behind it (before, it
/// became CPU-class, and request handlers in a busy server waited out the
/// starvation bound in a chain). A 100 ms interval keeps the interval's own
/// requests (which do make a CPU-class thread) out of the way.
#[test]
fn priority_a_holder_forced_out_for_a_starving_waiter_stays_io_class() {
    let _serial = one_at_a_time();
    for preset in ["priority", "priority-monitor"] {
        // The scenario depends on the threads' timing (the CPU-class thread
        // gets in early whenever no I/O-class thread happens to wait):
        // tried until it happens, and only then judged.
        let judged = (0..50).find_map(|_| forced_for_starving_stays_io(preset));
        assert_eq!(
            judged,
            Some(true),
            "{preset}: the thread forced out for the starving waiter came back CPU-class \
             (None: the scenario never happened in 50 tries)"
        );
    }
}

/// `Some(true)` if the thread forced out came back I/O-class, `None` if no
/// thread was forced out for a starving waiter.
fn forced_for_starving_stays_io(preset: &str) -> Option<bool> {
    let gil = Arc::new(Gil::new(GilConfig::preset(preset).unwrap().switch_interval_us(100_000)).unwrap());
    let cpu = tok(1);
    let (stop, back) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    // The I/O thread forced out first (its token number).
    let forced = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut io: Vec<_> = (2..8)
        .map(|n| {
            let (gil, stop, back, forced) = (gil.clone(), stop.clone(), back.clone(), forced.clone());
            let handle = thread::spawn(move || {
                let me = tok(n);
                while !stop.load(Ordering::SeqCst) {
                    gil.acquire(me).unwrap();
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_millis(1) && !gil.drop_requested() {
                        std::hint::spin_loop();
                    }
                    if gil.drop_requested() {
                        let _ = forced.compare_exchange(0, n, Ordering::SeqCst, Ordering::SeqCst);
                        stop.store(true, Ordering::SeqCst);
                        gil.release(me, ReleaseReason::Forced).unwrap();
                    } else {
                        // A blocking call that returns at once: the thread
                        // queues again straight away, so an I/O-class waiter
                        // is always there and the CPU-class thread gets in
                        // only by starving, however loaded the machine.
                        gil.release(me, ReleaseReason::Voluntary).unwrap();
                    }
                }
                // The thread forced out comes back when told, on the same OS
                // thread (a class is remembered per thread).
                if forced.load(Ordering::SeqCst) == n {
                    while !back.load(Ordering::SeqCst) {
                        thread::sleep(Duration::from_millis(1));
                    }
                    gil.acquire(me).unwrap();
                    gil.release(me, ReleaseReason::Final).unwrap();
                }
            });
            (n, handle)
        })
        .collect();
    while gil.counters().acquisitions < 8 {
        thread::sleep(Duration::from_millis(1)); // the I/O threads are running
    }
    for _ in 0..30 {
        gil.acquire(cpu).unwrap(); // waits behind the I/O threads
        gil.release(cpu, ReleaseReason::Forced).unwrap(); // CPU-class
        if forced.load(Ordering::SeqCst) != 0 {
            break;
        }
    }
    stop.store(true, Ordering::SeqCst);
    let n = forced.load(Ordering::SeqCst);
    let judged = if gil.counters().starvation_promotions > 0 && n != 0 {
        // Only the thread forced out is left.
        let (others, kept): (Vec<_>, Vec<_>) = io.into_iter().partition(|(m, _)| *m != n);
        io = kept;
        for (_, h) in others {
            h.join().unwrap();
        }
        gil.acquire(cpu).unwrap();
        let before = gil.counters().preemptions;
        back.store(true, Ordering::SeqCst);
        // Asked at once if it preempts; after 100 ms if it waits its turn.
        while !gil.drop_requested() {
            std::hint::spin_loop();
        }
        gil.release(cpu, ReleaseReason::Forced).unwrap();
        for (_, h) in io.drain(..) {
            h.join().unwrap();
        }
        Some(gil.counters().preemptions == before + 1)
    } else {
        None
    };
    back.store(true, Ordering::SeqCst);
    for (_, h) in io {
        h.join().unwrap();
    }
    judged
}

/// Under the priority policy a lazy voluntary release hands the lock to a
/// waiting I/O-class thread at once (a real release, no reservation to
/// outlast): reserving it made every request handler of a threaded server
/// wait for a takeover. The threshold of an hour would make that wait
/// endless; the test finishing says the lock was handed over.
#[test]
fn priority_lazy_release_hands_over_to_a_waiting_io_thread() {
    let _serial = one_at_a_time();
    for preset in ["priority-lazy", "priority-lazy-monitor"] {
        let config = GilConfig::preset(preset).unwrap().lazy_release_us(Some(3_600_000_000));
        let gil = Arc::new(Gil::new(config).unwrap());
        let waits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let w = waits.clone();
        let hook: gil_core::EventHook = Arc::new(move |e: &gil_core::Event| {
            if e.kind == gil_core::EventKind::WaitStart {
                w.fetch_add(1, Ordering::SeqCst);
            }
        });
        gil.set_event_hook(Some(hook)).unwrap();
        let (holder, io) = (tok(1), tok(2));
        gil.acquire(holder).unwrap();
        let waiter = {
            let gil = gil.clone();
            thread::spawn(move || {
                gil.acquire(io).unwrap(); // I/O-class: it never released yet
                gil.release(io, ReleaseReason::Final).unwrap();
            })
        };
        while waits.load(Ordering::SeqCst) == 0 {
            thread::yield_now();
        }
        gil.release(holder, ReleaseReason::Voluntary).unwrap();
        waiter.join().unwrap();
        let c = gil.counters();
        assert_eq!((c.lazy_releases, c.lazy_takeovers), (0, 0), "{preset}: {c:?}");
        assert_eq!(gil.last_holder(), None, "{preset}: the waiter's final release");
    }
}

/// A CPU-class waiter that is woken at every release but always loses the
/// race to an I/O-class thread arriving right after it (two threads taking
/// turns, each calling `acquire` the moment the other's `release` returns,
/// so neither ever waits and every release wakes the CPU-class waiter) is
/// still served within the starvation bound. Its waits never time out, so
/// the bound must be checked at every wake-up, not only after a timed wait
/// expired.
#[test]
fn priority_a_cpu_waiter_woken_often_still_starves_into_the_lock() {
    let _serial = one_at_a_time();
    for preset in ["priority", "priority-lazy", "priority-monitor", "priority-lazy-monitor"] {
        let (served, counters) = woken_cpu_waiter_served(preset);
        assert!(
            served,
            "{preset}: the CPU-class waiter never got the lock ({counters:?})"
        );
    }
}

fn woken_cpu_waiter_served(preset: &str) -> (bool, gil_core::Counters) {
    const INTERVAL_US: u64 = 1_000;
    let gil = Arc::new(Gil::new(GilConfig::preset(preset).unwrap().switch_interval_us(INTERVAL_US)).unwrap());
    let cpu = tok(1);
    gil.acquire(cpu).unwrap();
    gil.release(cpu, ReleaseReason::Forced).unwrap(); // CPU-class from now on
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicBool::new(false));
    let turn = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let io: Vec<_> = (0..2)
        .map(|i| {
            let (gil, stop, turn) = (gil.clone(), stop.clone(), turn.clone());
            thread::spawn(move || {
                let me = tok(2 + i);
                while !stop.load(Ordering::Relaxed) {
                    if turn.load(Ordering::Acquire) != i {
                        std::hint::spin_loop();
                        continue;
                    }
                    gil.acquire(me).unwrap();
                    // Held long enough for the waiter to block, never so
                    // long that its wait times out.
                    let reason = hold(&gil, Duration::from_micros(20));
                    gil.release(me, reason).unwrap();
                    turn.store(1 - i, Ordering::Release);
                }
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(5)); // the I/O threads are cycling
    let arrived = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (gil, served, arrived, stop) = (gil.clone(), served.clone(), arrived.clone(), stop.clone());
        thread::spawn(move || {
            // Arrive while it is held. On a busy machine this thread may run
            // only while the I/O threads do not, and see the lock free for a
            // long time: the clock below starts once it is queued, and it
            // gives up when the test stops instead of spinning for ever.
            while !gil.is_locked() {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                std::hint::spin_loop();
            }
            arrived.store(true, Ordering::Relaxed);
            gil.acquire(cpu).unwrap();
            served.store(true, Ordering::Relaxed);
            gil.release(cpu, ReleaseReason::Final).unwrap();
        })
    };
    let arrival = Instant::now() + Duration::from_secs(120);
    while !arrived.load(Ordering::Relaxed) && Instant::now() < arrival {
        thread::sleep(Duration::from_millis(1));
    }
    // 1000 starvation bounds: the property is "served at all".
    let deadline = Instant::now() + Duration::from_secs(10);
    while arrived.load(Ordering::Relaxed) && !served.load(Ordering::Relaxed) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
    let ok = served.load(Ordering::Relaxed);
    let counters = gil.counters();
    stop.store(true, Ordering::Relaxed);
    for h in io {
        h.join().unwrap();
    }
    waiter.join().unwrap();
    assert!(
        arrived.load(Ordering::Relaxed),
        "{preset}: the CPU-class thread never found the lock held in 120 s"
    );
    (ok, counters)
}

/// A CPU-bound thread beside I/O-class threads that keep the lock busy (8
/// threads, each holding it 200 µs between 100 µs blocking calls) gets
/// a slice: once served after starving, it keeps the lock for a fifth of a
/// switch interval instead of dropping it at the next I/O-class arrival.
/// So it holds the lock for at least a fifth of an interval in every
/// STARVATION_INTERVALS and a fifth (5 %; 14-22 % measured, as the flood
/// leaves the lock free at times); without the slice, for the few
/// microseconds it takes to notice a drop request at each turn (1.5 %
/// measured). The assertion asks for 3 %: a share, whatever the machine's
/// speed.
#[test]
fn priority_a_starved_cpu_thread_gets_a_slice() {
    let _serial = one_at_a_time();
    for preset in ["priority", "priority-lazy", "priority-monitor", "priority-lazy-monitor"] {
        let run = cpu_threads_beside_io_flood(preset, 1);
        assert!(
            run.share >= 0.03,
            "{preset}: the CPU-bound thread held the lock {:.2} % of the time",
            run.share * 100.0
        );
    }
}

/// The starvation bound is the CPU class's, not each thread's: two
/// CPU-bound threads beside the same I/O flood take turns at the slices
/// one of them gets alone. Each is served several times (in turn, neither
/// starves), and the starvation promotions, one per slice, are at least a
/// bound apart, as for one thread: at most `elapsed / bound + 1` of them.
/// Timed per thread, each thread's bound runs on its own and the two
/// together are promoted up to twice as often.
///
/// Asserted as that ceiling, which a loaded machine can only move away
/// from (a descheduled thread is promoted later, never sooner). A ratio
/// of two runs (two threads against one) is not robust: on a busy machine
/// each cycle of one thread alone carries its own scheduling delays, which
/// a second thread overlaps, and correct runs measured 1.6-1.8x beside a
/// build. Where the bound runs from is checked exactly by policy.rs's
/// `the_starvation_bound_runs_from_the_cpu_class_last_turn`.
#[test]
fn priority_cpu_threads_share_one_starvation_bound() {
    let _serial = one_at_a_time();
    for preset in ["priority", "priority-monitor"] {
        let two = cpu_threads_beside_io_flood(preset, 2);
        assert!(
            two.served.iter().all(|&n| n >= 3),
            "{preset}: a CPU-bound thread was not served in turn: {:?}",
            two.served
        );
        let bound = Duration::from_micros(FLOOD_INTERVAL_US * gil_core::STARVATION_INTERVALS);
        let ceiling = (two.elapsed.as_nanos() / bound.as_nanos()) as u64 + 1;
        assert!(
            two.promotions <= ceiling,
            "{preset}: {} starvation promotions in {:?}, more than one per bound ({ceiling})",
            two.promotions,
            two.elapsed
        );
    }
}

/// The switch interval of [`cpu_threads_beside_io_flood`].
const FLOOD_INTERVAL_US: u64 = 1_000;

/// What `n` CPU-bound threads got beside an I/O flood in 0.5 s.
struct CpuRun {
    /// The share of the time the CPU-bound threads held the lock, together.
    share: f64,
    /// How often each of them took the lock.
    served: Vec<u64>,
    /// Starvation promotions during the run.
    promotions: u64,
    /// How long the run took.
    elapsed: Duration,
}

fn cpu_threads_beside_io_flood(preset: &str, n: usize) -> CpuRun {
    const INTERVAL_US: u64 = FLOOD_INTERVAL_US;
    const RUN: Duration = Duration::from_millis(500);
    let gil = Arc::new(Gil::new(GilConfig::preset(preset).unwrap().switch_interval_us(INTERVAL_US)).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let flood = io_flood(&gil, &stop, 8, Some(Duration::from_micros(100)));
    // The CPU-bound threads: each runs until asked to drop.
    let start = Instant::now();
    let cpus: Vec<_> = (0..n)
        .map(|i| {
            let gil = gil.clone();
            thread::spawn(move || {
                let me = tok(1 + i);
                let (mut held, mut served) = (Duration::ZERO, 0u64);
                while start.elapsed() < RUN {
                    gil.acquire(me).unwrap();
                    served += 1;
                    let t = Instant::now();
                    while !gil.drop_requested() && start.elapsed() < RUN {
                        std::hint::spin_loop();
                    }
                    held += t.elapsed();
                    gil.release(me, ReleaseReason::Forced).unwrap();
                }
                (held, served)
            })
        })
        .collect();
    let results: Vec<_> = cpus.into_iter().map(|h| h.join().unwrap()).collect();
    let elapsed = start.elapsed();
    let promotions = gil.counters().starvation_promotions;
    stop.store(true, Ordering::Relaxed);
    for h in flood {
        h.join().unwrap();
    }
    let held: Duration = results.iter().map(|r| r.0).sum();
    CpuRun {
        share: held.as_secs_f64() / elapsed.as_secs_f64(),
        served: results.iter().map(|r| r.1).collect(),
        promotions,
        elapsed,
    }
}

/// No herd on a timer: sixteen threads wait behind a holder that keeps the
/// lock 100 switch intervals without answering the drop request. Only the
/// waiters that keep time (the first in line, and under the priority policy
/// the CPU-class waiter the starvation bound is timed on: none here) wake
/// once an interval; the others sleep until their turn. Each waiter counts
/// the times it went to sleep while waiting (`RUSAGE_THREAD` voluntary
/// context switches). Timed by every waiter, as in CPython's `take_gil`,
/// each would sleep about 100 times. Linux only (`RUSAGE_THREAD`).
#[test]
#[cfg(target_os = "linux")]
fn only_the_first_waiter_wakes_on_a_timer() {
    let _serial = one_at_a_time();
    for preset in PRESETS {
        let sleeps = sleeps_behind_a_long_holder(preset);
        let often = sleeps.iter().filter(|&&n| n > 20).count();
        assert!(
            often <= 2,
            "{preset}: {often} of {} waiters woke more than 20 times: {sleeps:?}",
            sleeps.len()
        );
    }
}

/// How many times each of 16 waiters slept while a holder kept the lock for
/// 100 intervals of 1 ms.
#[cfg(target_os = "linux")]
fn sleeps_behind_a_long_holder(preset: &str) -> Vec<i64> {
    fn voluntary_switches() -> i64 {
        // SAFETY: `getrusage` writes only the struct it is given.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above; RUSAGE_THREAD is the calling thread.
        assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) }, 0);
        usage.ru_nvcsw
    }
    const INTERVAL_US: u64 = 1_000;
    let gil = Arc::new(Gil::new(GilConfig::preset(preset).unwrap().switch_interval_us(INTERVAL_US)).unwrap());
    let holder = tok(1);
    gil.acquire(holder).unwrap();
    let waiters: Vec<_> = (0..16)
        .map(|i| {
            let gil = gil.clone();
            thread::spawn(move || {
                let me = tok(2 + i);
                let before = voluntary_switches();
                gil.acquire(me).unwrap();
                let sleeps = voluntary_switches() - before;
                gil.release(me, ReleaseReason::Final).unwrap();
                sleeps
            })
        })
        .collect();
    let start = Instant::now();
    while start.elapsed() < Duration::from_micros(100 * INTERVAL_US) {
        std::hint::spin_loop(); // the drop request goes unanswered
    }
    gil.release(holder, ReleaseReason::Voluntary).unwrap();
    waiters.into_iter().map(|h| h.join().unwrap()).collect()
}

/// The calling thread's CPU affinity, as a set.
#[cfg(target_os = "linux")]
fn affinity() -> libc::cpu_set_t {
    // SAFETY: an all-zero cpu_set_t is a valid set; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set), 0);
        set
    }
}

/// Sets the calling thread's CPU affinity.
#[cfg(target_os = "linux")]
fn set_affinity(set: &libc::cpu_set_t) {
    // SAFETY: `set` is a valid cpu_set_t of that size.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(set), set) };
    assert_eq!(r, 0);
}

#[cfg(target_os = "linux")]
#[test]
fn a_thread_narrowed_to_one_cpu_after_the_lock_was_made_does_not_spin() {
    let gil = Arc::new(Gil::new(GilConfig::new().policy(Policy::Priority).spin_us(200)).unwrap());
    let all = affinity();
    // SAFETY: `all` was filled by sched_getaffinity.
    if unsafe { libc::CPU_COUNT(&all) } < 2 {
        eprintln!("skipped: this process may use one CPU only");
        return;
    }
    assert_eq!(gil.spin_us(), 200);
    let narrowed = {
        let gil = gil.clone();
        thread::spawn(move || {
            let before = gil.spin_us_now();
            // SAFETY: valid sets; the first CPU of the thread's own.
            let first = (0..libc::CPU_SETSIZE as usize)
                .find(|&c| unsafe { libc::CPU_ISSET(c, &all) })
                .unwrap();
            // SAFETY: an all-zero cpu_set_t is a valid set.
            let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: `first` < CPU_SETSIZE.
            unsafe { libc::CPU_SET(first, &mut one) };
            set_affinity(&one);
            // Past the bound on how long a thread keeps its last answer.
            thread::sleep(Duration::from_millis(15));
            let narrow = gil.spin_us_now();
            set_affinity(&all);
            thread::sleep(Duration::from_millis(15));
            (before, narrow, gil.spin_us_now())
        })
    };
    let (before, narrow, widened) = narrowed.join().unwrap();
    assert_eq!(before, 200, "a thread that may use two CPUs spins");
    assert_eq!(narrow, 0, "narrowed to one CPU after Gil::new, it must not spin");
    assert_eq!(widened, 200, "widened again, it spins again");
    assert_eq!(gil.spin_us(), 200, "the configured limit is unchanged");
}

/// Two threads on the lock play ping-pong through blocking calls (each
/// releases voluntarily around its wait for the other) beside a CPU thread
/// that lets go only when asked; `Some(rounds)` once all rounds are done
/// and the CPU thread stopped, `None` if they made no progress for 20 s.
fn ping_pong_beside_a_cpu_thread(config: GilConfig, rounds: usize) -> Option<usize> {
    use std::sync::mpsc::{channel, RecvTimeoutError};
    let gil = Arc::new(Gil::new(config).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let cpu = {
        let (gil, stop) = (gil.clone(), stop.clone());
        thread::spawn(move || {
            let me = tok(1);
            gil.acquire(me).unwrap();
            while !stop.load(Ordering::Relaxed) {
                if gil.drop_requested() {
                    gil.release(me, ReleaseReason::Forced).unwrap();
                    gil.acquire(me).unwrap();
                }
                std::hint::spin_loop();
            }
            gil.release(me, ReleaseReason::Final).unwrap();
        })
    };
    let (to_echo, echo_in) = channel::<usize>();
    let (to_main, main_in) = channel::<usize>();
    let (progress, watch) = channel::<usize>();
    let echo = {
        let gil = gil.clone();
        thread::spawn(move || {
            let me = tok(2);
            gil.acquire(me).unwrap();
            for _ in 0..rounds {
                gil.release(me, ReleaseReason::Voluntary).unwrap();
                let Ok(n) = echo_in.recv() else { return };
                gil.acquire(me).unwrap();
                gil.release(me, ReleaseReason::Voluntary).unwrap();
                let sent = to_main.send(n);
                gil.acquire(me).unwrap();
                if sent.is_err() {
                    break;
                }
            }
            gil.release(me, ReleaseReason::Final).unwrap();
        })
    };
    let main = {
        let gil = gil.clone();
        thread::spawn(move || {
            let me = tok(3);
            gil.acquire(me).unwrap();
            for i in 0..rounds {
                gil.release(me, ReleaseReason::Voluntary).unwrap();
                let sent = to_echo.send(i);
                gil.acquire(me).unwrap();
                gil.release(me, ReleaseReason::Voluntary).unwrap();
                let got = main_in.recv();
                gil.acquire(me).unwrap();
                if sent.is_err() || got.is_err() || progress.send(i).is_err() {
                    break;
                }
            }
            gil.release(me, ReleaseReason::Final).unwrap();
        })
    };
    let mut done = 0;
    while done < rounds {
        match watch.recv_timeout(Duration::from_secs(20)) {
            Ok(_) => done += 1,
            Err(RecvTimeoutError::Disconnected) => break,
            // Stuck: the threads stay blocked; leak them, the test fails.
            Err(RecvTimeoutError::Timeout) => return None,
        }
    }
    stop.store(true, Ordering::Relaxed);
    main.join().unwrap();
    echo.join().unwrap();
    cpu.join().unwrap();
    Some(done)
}

#[test]
fn every_preset_serves_a_ping_pong_beside_a_cpu_thread() {
    // Under priority-lazy-monitor, a look that both took a long call over
    // and found the CPU thread past its starvation bound woke the I/O
    // waiter, then made the CPU thread (asleep) the one to go first: the
    // lock stayed free with both asleep (OCaml's smoke test hung there).
    // A short interval keeps the presets without priority quick.
    let _serial = one_at_a_time();
    for name in PRESETS {
        for _ in 0..3 {
            let config = GilConfig::preset(name).unwrap().switch_interval_us(1000);
            assert_eq!(
                ping_pong_beside_a_cpu_thread(config, 200),
                Some(200),
                "preset {name}: the ping-pong stopped"
            );
        }
    }
}

#[test]
fn after_a_takeover_the_next_long_calls_hand_the_lock_over_at_once() {
    // A thread whose calls outlast the lazy threshold beside a CPU thread
    // that waits for the lock: the first call is taken over; for a while
    // after that (a switch interval, here 100 ms, doubling while takeovers
    // keep coming) its releases are real ones, so the CPU thread gets the
    // lock at once and nothing is left to take over. Before, every call
    // was taken over. Without a spin, so that the CPU thread waits in the
    // room (a watching waiter steps out of the lock word, the release sees
    // nobody waiting, and the watcher, awake already, takes the call over
    // itself).
    let _serial = one_at_a_time();
    for preset in ["priority-lazy", "priority-lazy-monitor", "lazy"] {
        let config = GilConfig::preset(preset)
            .unwrap()
            .switch_interval_us(100_000)
            .spin_us(0);
        let gil = Arc::new(Gil::new(config).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let (h, w) = (tok(1), tok(2));
        // Whether the CPU thread waits: its wait began and it has not
        // taken the lock since.
        let waiting = Arc::new(AtomicBool::new(false));
        let hook = {
            let waiting = waiting.clone();
            gil.add_event_hook(
                std::sync::Arc::new(move |e: &gil_core::Event| {
                    if e.token == w {
                        waiting.store(e.kind == gil_core::EventKind::WaitStart, Ordering::SeqCst);
                    }
                }),
                gil_core::EventMask::WAIT_START | gil_core::EventMask::ACQUIRED,
            )
            .unwrap()
        };
        gil.acquire(h).unwrap();
        let waiter = {
            let (gil, stop) = (gil.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    gil.acquire(w).unwrap();
                    gil.release(w, ReleaseReason::Forced).unwrap();
                }
            })
        };
        const CALLS: u64 = 20;
        for _ in 0..CALLS {
            // Until the CPU thread waits (a release that finds nobody
            // waiting reserves: there is nobody to hand the lock to),
            // answering no drop request (under classic the CPU thread's
            // come once an interval, 100 ms).
            let t = Instant::now();
            while !waiting.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(30) {
                std::hint::spin_loop();
            }
            gil.release(h, ReleaseReason::Voluntary).unwrap();
            thread::sleep(Duration::from_millis(1)); // the call
            gil.acquire(h).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        gil.release(h, ReleaseReason::Final).unwrap();
        waiter.join().unwrap();
        gil.remove_event_hook(hook).unwrap();
        let c = gil.counters();
        assert!(c.lazy_takeovers >= 1, "{preset}: no call was taken over: {c:?}");
        assert!(
            c.lazy_takeovers <= 5,
            "{preset}: {} of {CALLS} calls taken over: {c:?}",
            c.lazy_takeovers
        );
    }
}

#[test]
fn after_a_takeover_a_thread_that_finds_a_call_takes_it_over_at_once() {
    // A thread whose calls outlast the lazy threshold (here 4 s), and a
    // CPU thread that comes for the lock only after a call has begun (on
    // its way back from a forced switch, in a real program). The first
    // call is taken over after the threshold; in the stretch of hand-overs
    // that follows (the switch interval, here 10 minutes) the CPU thread
    // takes each call over as soon as it comes. Before, it waited out the
    // threshold every time, which is the rule's lower bound on a takeover:
    // a wait shorter than the threshold can only come from this rule.
    const THRESHOLD: Duration = Duration::from_secs(4);
    let _serial = one_at_a_time();
    for preset in ["priority-lazy", "priority-lazy-monitor", "lazy"] {
        let config = GilConfig::preset(preset)
            .unwrap()
            .switch_interval_us(600_000_000)
            .lazy_release_us(Some(THRESHOLD.as_micros() as u64))
            .spin_us(0);
        let gil = Arc::new(Gil::new(config).unwrap());
        let (h, w) = (tok(1), tok(2));
        let waiting = Arc::new(AtomicBool::new(false));
        let hook = {
            let waiting = waiting.clone();
            gil.add_event_hook(
                Arc::new(move |e: &gil_core::Event| {
                    if e.token == w {
                        waiting.store(e.kind == gil_core::EventKind::WaitStart, Ordering::SeqCst);
                    }
                }),
                gil_core::EventMask::WAIT_START | gil_core::EventMask::ACQUIRED,
            )
            .unwrap()
        };
        let (go_tx, go_rx) = std::sync::mpsc::channel::<bool>();
        let (got_tx, got_rx) = std::sync::mpsc::channel::<()>();
        let cpu = {
            let gil = gil.clone();
            thread::spawn(move || {
                while go_rx.recv() == Ok(true) {
                    gil.acquire(w).unwrap();
                    got_tx.send(()).unwrap();
                    gil.release(w, ReleaseReason::Forced).unwrap();
                }
            })
        };
        // Once alone, to be CPU-class (a forced release makes it so).
        go_tx.send(true).unwrap();
        got_rx.recv_timeout(Duration::from_secs(60)).expect("the lock was free");
        gil.acquire(h).unwrap();
        // The first call: the CPU thread waits before it begins, and takes
        // it over after the threshold.
        go_tx.send(true).unwrap();
        let t = Instant::now();
        while !waiting.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(60) {
            std::hint::spin_loop();
        }
        gil.release(h, ReleaseReason::Voluntary).unwrap();
        got_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the first call was taken over");
        gil.acquire(h).unwrap();
        // The next calls: the CPU thread comes after each began.
        for call in 1..=3 {
            gil.release(h, ReleaseReason::Voluntary).unwrap();
            let asked = Instant::now();
            go_tx.send(true).unwrap();
            got_rx
                .recv_timeout(Duration::from_secs(60))
                .expect("the CPU thread got the lock");
            let waited = asked.elapsed();
            assert!(
                waited < THRESHOLD,
                "{preset}: call {call}: the CPU thread waited {waited:?}, the whole threshold"
            );
            gil.acquire(h).unwrap();
        }
        go_tx.send(false).unwrap();
        gil.release(h, ReleaseReason::Final).unwrap();
        cpu.join().unwrap();
        gil.remove_event_hook(hook).unwrap();
        assert!(gil.counters().lazy_takeovers >= 4, "{preset}: {:?}", gil.counters());
    }
}
