//! The scale sweep: what passing the lock costs as waiters pile up.
//!
//! `waiters + 1` threads all contend for one lock: each takes it, does one
//! work unit (about a microsecond) under it, releases it voluntarily and
//! takes it again at once, until told to stop. At any moment one of them
//! holds the lock and the others wait, so `waiters` is the number of
//! waiting threads. Over a measured window (after a warm-up, before the
//! stop) a cell counts:
//!
//! - acquisitions and hand-offs (the lock's `switches`: an acquisition by
//!   another thread than the last holder). Whether a release hands the lock
//!   over or the releaser takes it straight back is the policy's choice;
//!   both rates are reported.
//! - the process's context switches (`getrusage(RUSAGE_SELF)`: every
//!   thread, the lock's monitor thread included), voluntary ones (a thread
//!   went to sleep, so something had to wake it) and involuntary ones.
//!   Windows keeps no such count for a process: there they are not shown.
//!
//! A lock whose hand-off does work that grows with the number of waiters
//! shows falling rates as `waiters` grows; one that wakes every waiter to
//! pick one (a thundering herd) shows wake-ups per hand-off growing with it.
//! Neither should happen. A counter bumped under the lock proves mutual
//! exclusion after every cell, as in the simulator.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Barrier};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use gil_core::{Counters, Gil, GilConfig, ReleaseReason, Token};

use crate::workload::{work_unit, ExclusiveCounter};

/// One cell of the scale sweep.
#[derive(Debug, Clone)]
pub struct ScaleCell {
    /// The lock's configuration (a preset, usually).
    pub config: GilConfig,
    /// Threads waiting while one holds the lock: `waiters + 1` threads run.
    pub waiters: usize,
    /// The measured window.
    pub duration: Duration,
    /// Time before the window, for the start-up rush to settle.
    pub warm_up: Duration,
}

impl ScaleCell {
    /// `waiters + 1` contending threads on a lock built from `config`,
    /// measured for `duration` after a warm-up of a fifth of that (at most
    /// 200 ms).
    pub fn new(config: GilConfig, waiters: usize, duration: Duration) -> ScaleCell {
        ScaleCell {
            config,
            waiters,
            duration,
            warm_up: (duration / 5).min(Duration::from_millis(200)),
        }
    }
}

/// The process's context switches so far (all threads, living or not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContextSwitches {
    /// A thread blocked (slept) and another ran: `ru_nvcsw`.
    pub voluntary: u64,
    /// A runnable thread was preempted: `ru_nivcsw`.
    pub involuntary: u64,
}

impl ContextSwitches {
    /// The process's counts now (`getrusage(RUSAGE_SELF)`); `None` where
    /// the OS does not count them (Windows).
    pub fn now() -> io::Result<Option<ContextSwitches>> {
        Ok(crate::os::context_switches()?.map(|(voluntary, involuntary)| ContextSwitches { voluntary, involuntary }))
    }

    fn since(self, earlier: ContextSwitches) -> ContextSwitches {
        ContextSwitches {
            voluntary: self.voluntary.saturating_sub(earlier.voluntary),
            involuntary: self.involuntary.saturating_sub(earlier.involuntary),
        }
    }
}

/// What a cell measured. Every count is over the measured window, except
/// `units`, which covers the threads' whole run.
#[derive(Debug, Clone)]
pub struct ScaleOutcome {
    /// The measured window's length.
    pub elapsed: Duration,
    /// Acquisitions in the window.
    pub acquisitions: u64,
    /// Hand-offs in the window: acquisitions by another thread than the
    /// last holder (the lock's `switches`).
    pub handoffs: u64,
    /// Drop requests raised in the window.
    pub drop_requests: u64,
    /// The process's context switches in the window (`None` where the OS
    /// does not count them).
    pub context_switches: Option<ContextSwitches>,
    /// Work units all threads did, each under the lock, from start to stop.
    pub units: u64,
    /// The lock's counters at the end, after every thread's final release.
    pub counters: Counters,
}

impl ScaleOutcome {
    /// Acquisitions per second.
    pub fn acquisitions_per_s(&self) -> f64 {
        self.acquisitions as f64 / self.elapsed.as_secs_f64()
    }

    /// Hand-offs per second.
    pub fn handoffs_per_s(&self) -> f64 {
        self.handoffs as f64 / self.elapsed.as_secs_f64()
    }

    /// Voluntary context switches (a thread slept, so it had to be woken)
    /// per hand-off; `None` without hand-offs or counts.
    pub fn wakeups_per_handoff(&self) -> Option<f64> {
        let x = self.context_switches?;
        (self.handoffs > 0).then(|| x.voluntary as f64 / self.handoffs as f64)
    }

    /// All context switches per hand-off; `None` without hand-offs or counts.
    pub fn context_switches_per_handoff(&self) -> Option<f64> {
        let x = self.context_switches?;
        (self.handoffs > 0).then(|| (x.voluntary + x.involuntary) as f64 / self.handoffs as f64)
    }
}

fn lock_err(e: gil_core::GilError) -> io::Error {
    io::Error::other(format!("lock: {e}"))
}

/// One contending thread: take the lock, one unit, release, again, until
/// `stop`; then a final release. Returns its units.
fn contender(gil: &Gil, me: Token, shared: &ExclusiveCounter, stop: &AtomicBool) -> io::Result<u64> {
    let mut seed = me.get() as u64;
    let mut units = 0;
    gil.acquire(me).map_err(lock_err)?;
    loop {
        seed = work_unit(seed);
        shared.bump();
        units += 1;
        if stop.load(Relaxed) {
            break;
        }
        gil.release(me, ReleaseReason::Voluntary).map_err(lock_err)?;
        gil.acquire(me).map_err(lock_err)?;
    }
    gil.release(me, ReleaseReason::Final).map_err(lock_err)?;
    Ok(units)
}

/// Runs one cell. An error means the cell is void (the lock refused an
/// operation, a thread panicked, or `getrusage` failed); lost updates under
/// the lock, or a lock not idle at the end, are errors too.
pub fn run(cell: &ScaleCell) -> io::Result<ScaleOutcome> {
    let threads = cell.waiters + 1;
    let gil = Arc::new(Gil::new(cell.config.clone()).map_err(lock_err)?);
    let shared = Arc::new(ExclusiveCounter::default());
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<JoinHandle<io::Result<u64>>> = (0..threads)
        .map(|i| {
            let (gil, shared, stop, start) = (gil.clone(), shared.clone(), stop.clone(), start.clone());
            thread::Builder::new().name(format!("scale-{}", i + 1)).spawn(move || {
                start.wait();
                let me = Token::new(i + 1).expect("non-zero");
                contender(&gil, me, &shared, &stop)
            })
        })
        .collect::<io::Result<_>>()?;

    start.wait();
    thread::sleep(cell.warm_up);
    let window = (|| {
        let (c0, t0, x0) = (gil.counters(), Instant::now(), ContextSwitches::now()?);
        thread::sleep(cell.duration);
        let (c1, elapsed, x1) = (gil.counters(), t0.elapsed(), ContextSwitches::now()?);
        io::Result::Ok((c1, c0, elapsed, x1.zip(x0).map(|(x1, x0)| x1.since(x0))))
    })();
    stop.store(true, Relaxed);

    let mut units = 0;
    let mut failed = None;
    for h in handles {
        match h.join() {
            Ok(Ok(n)) => units += n,
            Ok(Err(e)) => failed = failed.or(Some(e)),
            Err(_) => failed = failed.or(Some(io::Error::other("a contending thread panicked"))),
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let (c1, c0, elapsed, context_switches) = window?;
    let bumps = shared.take();
    if bumps != units {
        return Err(io::Error::other(format!(
            "mutual exclusion broken: {bumps} bumps under the lock, {units} expected"
        )));
    }
    if !gil.is_idle() {
        return Err(io::Error::other(
            "the lock is not idle after every thread's final release",
        ));
    }
    Ok(ScaleOutcome {
        elapsed,
        acquisitions: c1.acquisitions - c0.acquisitions,
        handoffs: c1.switches - c0.switches,
        drop_requests: c1.drop_requests - c0.drop_requests,
        context_switches,
        units,
        counters: gil.counters(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tiny_scale_cell_hands_off_and_counts_consistently() {
        // A short interval, so that even a lock that lets the releaser take
        // it straight back hands it over within the window.
        let mut cell = ScaleCell::new(
            GilConfig::new().switch_interval_us(1_000),
            4,
            Duration::from_millis(100),
        );
        cell.warm_up = Duration::from_millis(20);
        let o = run(&cell).unwrap(); // exclusion and idleness checked inside
        assert!(o.handoffs > 0, "no hand-off among 5 contending threads");
        assert!(o.handoffs <= o.acquisitions, "a hand-off is an acquisition");
        assert!(o.acquisitions <= o.units, "each acquisition in the window did a unit");
        // Each thread did one unit per acquisition, over its whole run.
        assert_eq!(o.counters.acquisitions, o.units, "one acquisition per unit");
        if cfg!(unix) {
            assert!(o.wakeups_per_handoff().is_some());
            assert!(o.context_switches_per_handoff().unwrap() >= o.wakeups_per_handoff().unwrap());
        }
    }

    #[test]
    #[cfg(unix)]
    fn context_switches_count_another_threads_sleep() {
        use std::sync::atomic::Ordering::{Acquire, Release};
        let slept = Arc::new(AtomicBool::new(false));
        let before = ContextSwitches::now().unwrap().unwrap();
        // A sleeping thread blocks at least once: a voluntary switch. This
        // thread spins meanwhile, so the count must come from the other.
        let sleeper = {
            let slept = slept.clone();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(5));
                slept.store(true, Release);
            })
        };
        while !slept.load(Acquire) {
            std::hint::spin_loop();
        }
        let d = ContextSwitches::now().unwrap().unwrap().since(before);
        sleeper.join().unwrap();
        assert!(d.voluntary >= 1, "{d:?}");
    }
}
